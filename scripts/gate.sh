#!/usr/bin/env bash
# The gate of action.yml: runs the fixture corpus (the one embedded in dsh-conformance unless
# GATE_FIXTURES names one) against a host, writes JUnit XML, the Markdown summary (appended to
# $GITHUB_STEP_SUMMARY when set) and optionally the HTML compatibility report, and exits with
# `dsh-conformance run`'s exit code (0 ok, 1 a case failed, 2 could not run, 3 nothing ran).
#
#   GATE_HOST          the host driver's command line (required), e.g. "node $PWD/driver.mjs"
#   GATE_EXPECTATIONS  the host's expectations file ({"v":1,"xfail":{...}}; optional)
#   GATE_CASES         case id globs, space-separated (optional; default: every case)
#   GATE_OUT           output directory (default: dsh-conformance-results)
#   GATE_HTML_REPORT   "true" to also write GATE_OUT/report/report.html (runs the corpus again)
#   GATE_TIME_SCALE    timeout multiplier for slow runners (default 1)
#   GATE_FIXTURES      a fixtures directory instead of the embedded corpus (optional)
#   DSH_CONFORMANCE    the dsh-conformance binary (default: the one on PATH)
set -euo pipefail

fail() { echo "gate: $*" >&2; exit 2; }

host=${GATE_HOST:-}
[[ -n "${host//[[:space:]]/}" ]] || fail "GATE_HOST (the action's host input) is empty"
kit=${DSH_CONFORMANCE:-dsh-conformance}
command -v "$kit" >/dev/null 2>&1 || fail "$kit is not on PATH (install the kit first)"
out=${GATE_OUT:-dsh-conformance-results}
mkdir -p "$out" || fail "cannot create $out"
out=$(cd "$out" && pwd)

args=(run --host "$host" --time-scale "${GATE_TIME_SCALE:-1}"
  --junit "$out/junit.xml" --markdown "$out/summary.md" --json "$out/report.json")
if [[ -n "${GATE_EXPECTATIONS:-}" ]]; then
  [[ -f "$GATE_EXPECTATIONS" ]] || fail "expectations file $GATE_EXPECTATIONS does not exist"
  args+=(--expectations "$GATE_EXPECTATIONS")
fi
[[ -z "${GATE_FIXTURES:-}" ]] || args+=(--fixtures "$GATE_FIXTURES")
for glob in ${GATE_CASES:-}; do
  args+=(--case "$glob")
done

status=0
"$kit" "${args[@]}" || status=$?
if [[ -n "${GITHUB_STEP_SUMMARY:-}" && -f "$out/summary.md" ]]; then
  cat "$out/summary.md" >>"$GITHUB_STEP_SUMMARY"
fi

if [[ "${GATE_HTML_REPORT:-false}" == "true" ]]; then
  json_string() { local s=${1//\\/\\\\}; s=${s//\"/\\\"}; printf '"%s"' "$s"; }
  expectations=""
  if [[ -n "${GATE_EXPECTATIONS:-}" ]]; then
    expectations=",\"expectations\":$(json_string "$(cd "$(dirname "$GATE_EXPECTATIONS")" && pwd)/$(basename "$GATE_EXPECTATIONS")")"
  fi
  cat >"$out/report-config.json" <<JSON
{"include_reference":false,
 "hosts":[{"name":"host","command":["sh","-c",$(json_string "$host")]$expectations}],
 "variants":[{"name":"dsh-0.1.7-rc.1","env":{"FAKE_DSH_VERSION":"0.1.7-rc.1"}}]}
JSON
  report_args=(report --config "$out/report-config.json" --out "$out/report"
    --time-scale "${GATE_TIME_SCALE:-1}")
  [[ -z "${GATE_FIXTURES:-}" ]] || report_args+=(--fixtures "$GATE_FIXTURES")
  "$kit" "${report_args[@]}" || echo "gate: the HTML report run exited $?" >&2
fi
exit "$status"
