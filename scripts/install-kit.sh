#!/usr/bin/env bash
# Installs the kit's binaries (dsh-conformance, fake-dsh, dsh-host-driver) from a release archive
# into a directory, after checking the archive against its .sha256 file. Used by action.yml; runs
# anywhere with bash, curl, tar and sha256sum or shasum.
#
#   KIT_VERSION   the release version, e.g. 0.1.0 (required)
#   KIT_BASE_URL  where the archives are (default: the GitHub release v$KIT_VERSION of
#                 $KIT_REPOSITORY); a file:// URL works for a local `cargo xtask dist` output
#   KIT_REPOSITORY  owner/name of the kit's repository (default: $GITHUB_ACTION_REPOSITORY)
#   KIT_DIR       where to put the binaries (default: $RUNNER_TEMP/dsh-conformance or ./.dsh-kit)
# Prints the directory; when $GITHUB_PATH is set, also appends it there.
# Exit codes: 0 installed, 2 could not install (named in the message).
set -euo pipefail

fail() { echo "install-kit: $*" >&2; exit 2; }

version=${KIT_VERSION:?install-kit: KIT_VERSION is required}
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
if [[ -z "${KIT_BASE_URL:-}" ]]; then
  repository=${KIT_REPOSITORY:-${GITHUB_ACTION_REPOSITORY:-}}
  [[ -n "$repository" ]] || fail "set KIT_BASE_URL or KIT_REPOSITORY"
  KIT_BASE_URL="https://github.com/${repository}/releases/download/v${version}"
fi
dir=${KIT_DIR:-${RUNNER_TEMP:-$PWD}/dsh-conformance}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for file in "$name.tar.gz" "$name.tar.gz.sha256"; do
  curl --fail --silent --show-error --location --output "$work/$file" "$KIT_BASE_URL/$file" \
    || fail "cannot download $KIT_BASE_URL/$file"
done
if command -v sha256sum >/dev/null 2>&1; then
  (cd "$work" && sha256sum --check --status "$name.tar.gz.sha256") \
    || fail "$name.tar.gz does not match its .sha256"
else
  (cd "$work" && shasum -a 256 --check --status "$name.tar.gz.sha256") \
    || fail "$name.tar.gz does not match its .sha256"
fi
tar -xzf "$work/$name.tar.gz" -C "$work" || fail "cannot unpack $name.tar.gz"
mkdir -p "$dir"
for binary in dsh-conformance fake-dsh dsh-host-driver; do
  [[ -x "$work/$name/$binary" ]] || fail "$name.tar.gz holds no $binary"
  cp "$work/$name/$binary" "$dir/$binary"
done
if [[ -n "${GITHUB_PATH:-}" ]]; then
  echo "$dir" >>"$GITHUB_PATH"
fi
echo "$dir"
