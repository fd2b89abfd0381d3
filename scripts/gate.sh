#!/usr/bin/env bash
# The gate of action.yml: runs the fixture corpus embedded in dsh-conformance (another corpus only
# when GATE_FIXTURES names one, and then every output says so) against a host, writes JUnit XML,
# the Markdown summary (appended to $GITHUB_STEP_SUMMARY when set) and optionally the HTML
# compatibility report, and exits with `dsh-conformance run`'s exit code (0 ok, 1 a case failed,
# 2 could not run, 3 nothing ran or a case glob matched nothing), or 2 when the report asked for
# could not be written.
#
#   GATE_HOST          the host driver's command line (required), e.g. "node /abs/driver.mjs".
#                      Split like a shell splits words, run without a shell: nothing is expanded
#                      ($VAR stays as written), the same in `run` and `report`.
#   GATE_EXPECTATIONS  the host's expectations file ({"v":1,"xfail":{...}}; optional)
#   GATE_CASES         case id globs, space-separated (optional; default: every case); matched
#                      against case ids only, never against files
#   GATE_OUT           output directory (default: dsh-conformance-results)
#   GATE_HTML_REPORT   "true" to also write GATE_OUT/report/report.html (runs the corpus again)
#   GATE_TIME_SCALE    timeout multiplier for slow runners (default 1)
#   GATE_FIXTURES      a fixtures directory instead of the embedded corpus (optional)
#   GATE_PASS_ENV      names (or PREFIX*) of this job's variables the driver needs, space-separated
#                      (optional; the driver gets only an allowlist otherwise: docs/host-driver.md)
#   DSH_CONFORMANCE    the dsh-conformance binary (default: the one on PATH)
#
# Under GitHub Actions (GITHUB_ACTIONS=true) the kit's output holds host text (a failing
# handshake's stderr, names and messages in the table), which the runner would take for workflow
# commands (`::add-mask::`, `::error ...::`, `##[...]`): command processing is stopped with a
# random token on both streams before the kit runs, and resumed once it has exited.
set -euo pipefail

fail() { echo "gate: $*" >&2; exit 2; }

host=${GATE_HOST:-}
[[ -n "${host//[[:space:]]/}" ]] || fail "GATE_HOST (the action's host input) is empty"
kit=${DSH_CONFORMANCE:-dsh-conformance}
command -v "$kit" >/dev/null 2>&1 || fail "$kit is not on PATH (install the kit first)"
out=${GATE_OUT:-dsh-conformance-results}
mkdir -p "$out" || fail "cannot create $out"
out=$(cd "$out" && pwd)

# The corpus: the embedded one unless GATE_FIXTURES names another (never one found on disk).
if [[ -n "${GATE_FIXTURES:-}" ]]; then
  corpus=(--fixtures "$GATE_FIXTURES")
else
  corpus=(--embedded-corpus)
fi
common=(--host "$host" --time-scale "${GATE_TIME_SCALE:-1}" "${corpus[@]}")
set -f
for name in ${GATE_PASS_ENV:-}; do
  common+=(--pass-env "$name")
done
set +f
if [[ -n "${GATE_EXPECTATIONS:-}" ]]; then
  [[ -f "$GATE_EXPECTATIONS" ]] || fail "expectations file $GATE_EXPECTATIONS does not exist"
  expectations=$(cd "$(dirname "$GATE_EXPECTATIONS")" && pwd)/$(basename "$GATE_EXPECTATIONS")
  common+=(--expectations "$expectations")
fi

args=(run "${common[@]}" --junit "$out/junit.xml" --markdown "$out/summary.md"
  --json "$out/report.json")
# Word-split GATE_CASES with pathname expansion off: `lifecycle.*` is a case glob, not a file
# glob (a `lifecycle.md` in the workspace must not replace it).
set -f
for glob in ${GATE_CASES:-}; do
  args+=(--case "$glob")
done
set +f

if [[ "${GITHUB_ACTIONS:-}" == "true" ]]; then
  stop_token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  [[ ${#stop_token} -eq 32 ]] || fail "cannot read a random token from /dev/urandom"
  resume_commands() {
    echo "::$stop_token::"
    echo "::$stop_token::" >&2
  }
  echo "::stop-commands::$stop_token"
  echo "::stop-commands::$stop_token" >&2
  trap resume_commands EXIT
fi

status=0
"$kit" "${args[@]}" || status=$?
if [[ -n "${GITHUB_STEP_SUMMARY:-}" && -f "$out/summary.md" ]]; then
  cat "$out/summary.md" >>"$GITHUB_STEP_SUMMARY"
fi

if [[ "${GATE_HTML_REPORT:-false}" == "true" ]]; then
  report_status=0
  "$kit" report "${common[@]}" --host-name host --variant dsh-0.1.7-rc.1 --out "$out/report" \
    || report_status=$?
  if [[ ! -f "$out/report/report.html" ]] || ((report_status >= 2)); then
    echo "gate: the HTML report could not be written (report exited $report_status)" >&2
    ((status != 0)) || status=2
  fi
fi
exit "$status"
