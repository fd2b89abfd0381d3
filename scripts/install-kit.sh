#!/usr/bin/env bash
# Installs the kit's binaries (dsh-conformance, fake-dsh, dsh-host-driver) from a release archive
# into a directory. Used by action.yml; runs anywhere with bash, curl, tar and sha256sum or shasum.
#
# Trust: the archive is checked against a SHA-256 pinned outside the release it comes from: the
# KIT_SHA256 variable (the action's `sha256` input), else the line for the archive's own file name
# in kit-checksums.txt beside this script (written by the release checklist, docs/releasing.md).
# The release's own `.sha256` file is never trusted, and no path it names is ever read. Without a
# pin for this version and platform, nothing is installed.
#
#   KIT_VERSION     the release version, e.g. 0.1.0 (default: the action's ref when it is a
#                   version tag, else the version of the checkout this script is in)
#   KIT_SHA256      the archive's expected SHA-256 (hex), overriding kit-checksums.txt
#   KIT_CHECKSUMS   the pin file (default: kit-checksums.txt beside this script)
#   KIT_BASE_URL    where the archives are (the action's `kit-base-url` input; default: the GitHub
#                   release v$KIT_VERSION of $KIT_REPOSITORY); a file:// URL works for a local
#                   `cargo xtask dist` output
#   KIT_REPOSITORY  owner/name of the kit's repository (default: $GITHUB_ACTION_REPOSITORY)
#   KIT_DIR         where to put the binaries (default: $RUNNER_TEMP/dsh-conformance or ./dsh-conformance)
# Prints the directory; when $GITHUB_PATH is set, also appends it there.
# Exit codes: 0 installed, 2 could not install (named in the message).
set -euo pipefail

fail() { echo "install-kit: $*" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)

# The version: explicit, else the action's ref (v1.2.3 -> 1.2.3), else this checkout's version.
version=${KIT_VERSION:-}
if [[ -z "$version" && "${GITHUB_ACTION_REF:-}" =~ ^v?([0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?)$ ]]; then
  version=${BASH_REMATCH[1]}
fi
if [[ -z "$version" && -f "$here/../Cargo.toml" ]]; then
  version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$here/../Cargo.toml" | head -n 1)
fi
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?$ ]] \
  || fail "no usable kit version (got '${version}'): set KIT_VERSION (the action's version input)"

case "$(uname -s)" in
  Linux) os=linux ;;
  Darwin) os=darwin ;;
  *) fail "no binaries for $(uname -s): the kit supports Linux and macOS" ;;
esac
case "$(uname -m)" in
  x86_64 | amd64) cpu=x64 ;;
  aarch64 | arm64) cpu=arm64 ;;
  *) fail "no binaries for the $(uname -m) CPU (x64 and arm64 only)" ;;
esac
name="dsh-conformance-${version}-${os}-${cpu}"
archive="$name.tar.gz"

# The pinned checksum of this exact file name.
expected=${KIT_SHA256:-}
if [[ -z "$expected" ]]; then
  pins=${KIT_CHECKSUMS:-$here/kit-checksums.txt}
  [[ -f "$pins" ]] && expected=$(awk -v file="$archive" '$2 == file { print $1; exit }' "$pins")
  [[ -n "$expected" ]] || fail "no pinned SHA-256 for $archive in $pins: give the action's sha256 input (KIT_SHA256)"
fi
expected=$(printf '%s' "$expected" | tr 'A-F' 'a-f')
[[ "$expected" =~ ^[0-9a-f]{64}$ ]] || fail "the pinned SHA-256 for $archive is not 64 hex digits: '$expected'"

if [[ -z "${KIT_BASE_URL:-}" ]]; then
  repository=${KIT_REPOSITORY:-${GITHUB_ACTION_REPOSITORY:-}}
  [[ -n "$repository" ]] || fail "set KIT_BASE_URL or KIT_REPOSITORY"
  KIT_BASE_URL="https://github.com/${repository}/releases/download/v${version}"
fi
dir=${KIT_DIR:-${RUNNER_TEMP:-$PWD}/dsh-conformance}
if [[ -e "$dir" || -L "$dir" ]] && [[ ! -d "$dir" ]]; then
  fail "the install directory $dir exists and is not a directory: remove it or set KIT_DIR"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
curl --fail --silent --show-error --location --proto '=https,file' --output "$work/$archive" \
  "$KIT_BASE_URL/$archive" || fail "cannot download $KIT_BASE_URL/$archive"

if command -v sha256sum >/dev/null 2>&1; then
  actual=$(sha256sum "$work/$archive" | awk '{ print $1 }')
else
  actual=$(shasum -a 256 "$work/$archive" | awk '{ print $1 }')
fi
[[ "$actual" == "$expected" ]] \
  || fail "$archive has SHA-256 $actual, not the pinned $expected: refusing to install it"

mkdir "$work/unpacked"
tar -xzf "$work/$archive" -C "$work/unpacked" --no-same-owner || fail "cannot unpack $archive"
mkdir -p "$dir" || fail "cannot create the install directory $dir"
for binary in dsh-conformance fake-dsh dsh-host-driver; do
  source="$work/unpacked/$name/$binary"
  [[ -f "$source" && ! -L "$source" && -x "$source" ]] || fail "$archive holds no $name/$binary"
  rm -f "$dir/$binary"
  cp "$source" "$dir/$binary"
done
if [[ -n "${GITHUB_PATH:-}" ]]; then
  echo "$dir" >>"$GITHUB_PATH"
fi
echo "$dir"
