//! Deliberately wrong hosts that passed every case before issue 26 and fail now (issue 26 item 5),
//! each built from a correct host and a small wrapper, so no host mutant is needed:
//!
//! - a driver that claims `concurrent` but runs one turn at a time (the reference host behind a
//!   proxy that holds each `run` until the previous run's outcome): the concurrent cases are
//!   untestable for it, since its runs never overlap;
//! - a host that kills its runtimes' escaped daemons only when it shuts down (the Node host, which
//!   kills only each runtime's process group, wrapped whole in `dsh-conformance supervise`): a daemon
//!   that cleared its environment is now found at the run, through the case supervisor's tree;
//! - a host that kills every escaped daemon of its case at each run's end (the Node host with a
//!   `--supervisor` that kills them all): it kills the other conversation's daemon while that run
//!   is still in flight;
//! - a host that writes its session mapping in place (the Node host with `fs.renameSync` turned
//!   into an in-place copy by a `--require` preload): `resume.crash-after-save` sees the saved
//!   mapping modified in place, a finding that rests on I-C28 and so is informational;
//! - a host that keeps its mappings in memory and writes them only when it exits (the Node host
//!   with a preload that defers each save to `process.on("exit")`): it passes
//!   `resume.after-driver-restart`, whose driver is shut down, and fails `resume.crash-after-save`,
//!   whose driver is SIGKILLed right after a save.
//!
//! The Node.js ones skip, saying so, when `node` is not installed.

use dsh_test_support::{node_available, workspace_root as repo_root};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The Node example host's driver.
fn node_driver() -> PathBuf {
    repo_root().join("examples/node-host/driver.mjs")
}

fn kit() -> PathBuf {
    dsh_test_support::binary("dsh-conformance")
}

/// The corpus cases matching `cases` against `host`, as a `--format json` report.
fn run_cases(host: &str, cases: &[&str]) -> (Output, Value) {
    let root = repo_root();
    let mut command = Command::new(kit());
    command
        .arg("run")
        .arg("--host")
        .arg(host)
        .arg("--fake-dsh")
        .arg(dsh_test_support::binary("fake-dsh"))
        .arg("--fixtures")
        .arg(root.join("fixtures"))
        .args(["--jobs", "2", "--format", "json"])
        .current_dir(&root);
    for case in cases {
        command.args(["--case", case]);
    }
    let output = command.output().expect("dsh-conformance runs");
    let report = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "not a JSON report ({error}): {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output, report)
}

/// (verdict, rule, why) of case `id`.
fn verdict_of(report: &Value, id: &str) -> (String, String, String) {
    let case = report["cases"]
        .as_array()
        .and_then(|cases| cases.iter().find(|case| case["id"] == id))
        .unwrap_or_else(|| panic!("{id} is not in the report: {report}"));
    let text = |member: &str| case[member].as_str().unwrap_or("").to_string();
    (text("verdict"), text("rule"), text("why"))
}

/// (verdict, rule, why) of the one case `id` run against `host`.
fn judge(host: &str, id: &str) -> (String, String, String) {
    let (_, report) = run_cases(host, &[id]);
    verdict_of(&report, id)
}

/// A file in a fresh temp dir, executable.
fn script(dir: &Path, name: &str, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write the script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// Forwards the driver protocol to the host it starts, but holds each `run` request until the
/// run before it got its outcome: one turn at a time, whatever the host claims.
const SERIALIZING_PROXY: &str = r#"
const { spawn } = require("node:child_process");
const readline = require("node:readline");
const [command, ...args] = process.argv.slice(2);
const host = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
let busy = null;
const queue = [];
const send = (line) => host.stdin.write(line + "\n");
const parse = (line) => { try { return JSON.parse(line); } catch { return {}; } };
readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const request = parse(line);
  if (request.type === "run") {
    if (busy !== null) { queue.push(line); return; }
    busy = request.id;
  }
  send(line);
});
readline.createInterface({ input: host.stdout }).on("line", (line) => {
  process.stdout.write(line + "\n");
  const reply = parse(line);
  if (reply.type === "outcome" && reply.id === busy) {
    busy = null;
    const next = queue.shift();
    if (next !== undefined) { busy = parse(next).id; send(next); }
  }
});
process.stdin.on("end", () => host.stdin.end());
host.on("exit", (code) => process.exit(code ?? 1));
"#;

#[test]
fn a_driver_running_concurrent_turns_one_at_a_time_is_untestable() {
    if !node_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let proxy = script(dir.path(), "serialize.cjs", SERIALIZING_PROXY);
    let host = format!(
        "node {} {}",
        proxy.display(),
        dsh_test_support::binary("dsh-host-driver").display()
    );
    let concurrent = [
        "cancel.concurrent-cancel-earlier-run",
        "cancel.concurrent-other-run-completes",
        "resume.concurrent-sessions-stay-apart",
    ];
    let (output, report) = run_cases(&host, &concurrent);
    assert!(!output.status.success(), "a serial driver fails the gate");
    for id in concurrent {
        let (verdict, _, why) = verdict_of(&report, id);
        assert_eq!(verdict, "untestable", "{id}: {why}");
        assert!(
            why.contains("claims `concurrent` but ran the turns one at a time"),
            "{id}: {why}"
        );
    }
}

#[test]
fn a_host_killing_escaped_daemons_only_at_shutdown_fails_at_the_run() {
    if !node_available() {
        return;
    }
    // The whole Node driver under one subreaper: it kills the daemons only once the driver exits.
    let host = format!(
        "{} supervise -- node {}",
        kit().display(),
        node_driver().display()
    );
    let (verdict, rule, why) = judge(&host, "hygiene.daemon-setsid-cleared-env");
    assert_eq!(verdict, "fail", "{why}");
    assert_eq!(rule, "s10.owned-processes-force-killed", "{why}");
    assert!(
        why.contains("run r0:"),
        "judged at the run, not at shutdown: {why}"
    );
    assert!(why.contains("after the host's reply"), "{why}");
    assert!(
        why.contains("subreaper") && why.contains("dsh-conformance supervise"),
        "the finding says what a host must do: {why}"
    );
}

/// A `--supervisor` for the Node host that runs the runtime, then kills every escaped fake-dsh
/// daemon of the case it can see (orphans re-parented to the case's supervisor), whichever run
/// started it.
const KILL_EVERY_DAEMON: &str = r#"#!/bin/sh
shift 2
"$@"
status=$?
for dir in /proc/[0-9]*; do
  pid=${dir#/proc/}
  parent=$(sed 's/^.*) [A-Z] //' "$dir/stat" 2>/dev/null | cut -d' ' -f1)
  [ -n "$parent" ] || continue
  [ "$(cat "$dir/comm" 2>/dev/null)" = fake-dsh ] || continue
  [ "$(cat "/proc/$parent/comm" 2>/dev/null)" = dsh-conformance ] || continue
  if tr '\0' '\n' < "$dir/environ" 2>/dev/null | grep -qx "DSH_CONFORMANCE_CASE=$DSH_CONFORMANCE_CASE"; then
    kill -9 "$pid" 2>/dev/null
  fi
done
exit $status
"#;

#[test]
fn a_host_killing_every_daemon_at_each_run_end_kills_the_other_conversation_s() {
    if !node_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let supervisor = script(dir.path(), "kill-every-daemon", KILL_EVERY_DAEMON);
    let host = format!(
        "node {} --supervisor {}",
        node_driver().display(),
        supervisor.display()
    );
    let (verdict, rule, why) = judge(&host, "hygiene.concurrent-daemons-own-run-only");
    assert_eq!(verdict, "fail", "{why}");
    assert_eq!(rule, "s10.no-kill-other-runtime", "{why}");
    assert!(
        why.contains("another conversation, still in flight"),
        "{why}"
    );
}

/// The Node host with `preload` (written into `dir`) loaded by `node --require` before it.
fn node_host_with_preload(dir: &Path, preload: &str) -> String {
    let preload = script(dir, "preload.cjs", preload);
    format!(
        "node --require {} {}",
        preload.display(),
        node_driver().display()
    )
}

/// A `--require` preload for the Node host: its save (temp file, then rename over the mapping)
/// becomes an in-place rewrite of the mapping, what a crash mid-save leaves torn.
const SAVE_IN_PLACE: &str = r#"
const fs = require("node:fs");
fs.renameSync = (from, to) => {
  fs.writeFileSync(to, fs.readFileSync(from));
  fs.rmSync(from, { force: true });
};
"#;

#[test]
fn a_host_rewriting_its_mapping_in_place_is_seen_doing_it() {
    if !node_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let wrong = node_host_with_preload(dir.path(), SAVE_IN_PLACE);
    let (verdict, rule, why) = judge(&wrong, "resume.crash-after-save");
    assert_eq!(verdict, "informational", "{why}");
    assert_eq!(rule, "s7.conversation-one-session", "{why}");
    assert!(
        why.contains("modified its saved session mapping RUNTIME_DATA_DIR/sessions/")
            && why.contains("in place"),
        "{why}"
    );
    let right = format!("node {}", node_driver().display());
    let (verdict, _, why) = judge(&right, "resume.crash-after-save");
    assert_eq!(verdict, "pass", "the same host saving by rename: {why}");
}

/// A `--require` preload for the Node host: each save is held in memory (and read back from there)
/// and written only when the process exits, so a killed driver loses every mapping it saved.
const SAVE_AT_EXIT: &str = r#"
const fs = require("node:fs");
const pending = new Map();
const read = fs.readFileSync;
fs.renameSync = (from, to) => {
  pending.set(String(to), read(from));
  fs.rmSync(from, { force: true });
};
fs.readFileSync = (file, ...rest) => {
  const held = pending.get(String(file));
  if (held === undefined) return read(file, ...rest);
  const encoding = typeof rest[0] === "string" ? rest[0] : rest[0] && rest[0].encoding;
  return encoding ? held.toString(encoding) : Buffer.from(held);
};
process.on("exit", () => {
  for (const [to, data] of pending) fs.writeFileSync(to, data);
});
"#;

#[test]
fn a_host_saving_its_mappings_only_at_exit_loses_them_to_a_crash() {
    if !node_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let host = node_host_with_preload(dir.path(), SAVE_AT_EXIT);
    let (_, report) = run_cases(
        &host,
        &["resume.after-driver-restart", "resume.crash-after-save"],
    );
    let (verdict, _, why) = verdict_of(&report, "resume.after-driver-restart");
    assert_eq!(verdict, "pass", "a driver shut down saves: {why}");
    let (verdict, rule, why) = verdict_of(&report, "resume.crash-after-save");
    assert_eq!(verdict, "fail", "{why}");
    assert_eq!(rule, "s7.conversation-one-session", "{why}");
    assert!(why.contains("resumed"), "{why}");
}
