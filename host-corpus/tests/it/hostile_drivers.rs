//! Hostile drivers against the harness itself (issue 8), beyond the ones in the CLI's `run_cli`
//! tests: a driver that leaves daemons outside its process group, floods its stderr, closes
//! stdout but keeps running, answers a run with an outcome for a run id it was never given, never
//! answers the handshake, or crashes on its first run (said once, first, on the driver contract).
//! Each is that case's `fail` with a clear why, the other cases still run and pass, and no process
//! of any driver is alive afterwards.

use dsh_test_support::shell_driver as shell_driver_support;
use serde_json::Value;
use std::fs;

use shell_driver_support::ShellDriverKit;

/// One shell driver; its mode comes from the case's scenario (in its cwd, the case root).
/// Every pid worth checking afterwards goes to `$HOSTILE_PID_DIR/<mode>.pids`.
const HOSTILE_DRIVER: &str = r#"#!/bin/sh
mode=good
for m in hostile-daemon hostile-daemon-noenv hostile-stderr-flood hostile-stdout-closed hostile-foreign-outcome hostile-silent-handshake hostile-crash-on-run slow-sibling; do
  if grep -q "\"$m\"" scenario.json 2>/dev/null; then mode=$m; fi
done
pids="$HOSTILE_PID_DIR/$mode.pids"
echo "$$" >> "$pids"
sibling=
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
  case "$line" in
    *'"type":"handshake"'*)
      case "$mode" in
        hostile-silent-handshake) continue ;;
        hostile-daemon)
          # Two daemons that leave the driver's process group: one double-forked with its stdio
          # on /dev/null, one that keeps the driver's stderr open.
          ( setsid sleep 600 </dev/null >/dev/null 2>&1 & echo "$!" >> "$pids" )
          setsid sleep 601 </dev/null >/dev/null &
          echo "$!" >> "$pids" ;;
        hostile-daemon-noenv)
          # A daemon with an empty environment: no case token to find it by (issue 17).
          ( env -i setsid sleep 602 </dev/null >/dev/null 2>&1 & echo "$!" >> "$pids" ) ;;
        slow-sibling)
          sleep 600 &
          sibling=$!
          echo "$sibling" >> "$pids" ;;
      esac
      printf '%s\n' '{"v":1,"type":"handshake","driver":"sh-hostile","version":"0.0.1","capabilities":["discover"]}' ;;
    *'"type":"discover"'*)
      available=true
      case "$mode" in
        hostile-stderr-flood) head -c 24000000 /dev/zero | tr '\0' 'e' >&2 ;;
        hostile-stdout-closed) exec >&- ; continue ;;
        slow-sibling)
          # Other cases sweep their leftovers meanwhile; this case's own process must survive.
          sleep 1
          kill -0 "$sibling" 2>/dev/null || available=false ;;
      esac
      if [ "$available" = true ]; then
        printf '{"v":1,"type":"discovered","id":"%s","available":true,"version":"0.1.7-rc.1","warnings":[],"diagnostic":null,"code":null}\n' "$id"
      else
        printf '{"v":1,"type":"discovered","id":"%s","available":false,"version":null,"warnings":[],"diagnostic":"my own process was killed","code":"DSH_PROFILE_PROBE_FAILED"}\n' "$id"
      fi ;;
    *'"type":"run"'*)
      if [ "$mode" = hostile-crash-on-run ]; then
        printf '%s\n' 'Traceback (most recent call last):' '  File "driver.py", line 12, in run' 'TypeError: spawn() needs cwd' >&2
        exit 1
      fi
      printf '%s\n' '{"v":1,"type":"outcome","id":"r-never-sent","status":"completed","session_id":null,"resumed":false,"code":null,"message":null,"foreign_frames":0,"stderr":""}' ;;
    *'"type":"shutdown"'*)
      if [ -n "$sibling" ]; then kill "$sibling"; wait "$sibling"; fi
      printf '%s\n' '{"v":1,"type":"bye"}'
      exit 0 ;;
  esac
done
"#;

/// Writes a case; `mode` goes into the scenario, where the driver looks for it.
fn mode_case(kit: &ShellDriverKit, id: &str, mode: &str, step: &str) {
    kit.write_case(
        id,
        &format!(
            r#"{{"v":1,"id":"{id}","summary":"{id}","spec":["5"],"rules":["s5.test-rule"],
               "timeout_ms":3000,"runtime":{{"version":"{mode}"}},"steps":[{step}]}}"#
        ),
    );
}

fn run_jobs(kit: &ShellDriverKit, jobs: &str) -> std::process::Output {
    kit.run()
        .args(["--format", "json", "--jobs", jobs])
        .output()
        .expect("dsh-conformance runs")
}

const DISCOVER: &str = r#"{"discover":{},"expect":{"available":true}}"#;
const RUN: &str = r#"{"run":{"conversation":"c1","prompt":"Create a landing page"},"expect":{"status":"completed"}}"#;

/// A process is gone when /proc has no entry for it, or it is a zombie (dead, not yet reaped by
/// its new parent).
fn is_gone(pid: i32) -> bool {
    !dsh_engine::procfs::is_live(pid)
}

/// (id, verdict, rule, why) of every case in a `--format json` report.
fn verdicts(output: &std::process::Output) -> Vec<(String, String, String, String)> {
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "not a JSON report ({error}): {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    report["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|case| {
            let text = |member: &str| case[member].as_str().unwrap_or("").to_string();
            (text("id"), text("verdict"), text("rule"), text("why"))
        })
        .collect()
}

/// Kills whatever a failed assertion would otherwise leave behind.
struct PidSweeper<'a>(&'a ShellDriverKit);

impl Drop for PidSweeper<'_> {
    fn drop(&mut self) {
        for (_, pid) in self.0.recorded_pids() {
            if !is_gone(pid) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

#[test]
fn hostile_drivers_fail_their_own_case_only_and_leave_no_process() {
    let kit = ShellDriverKit::new(HOSTILE_DRIVER);
    let _sweeper = PidSweeper(&kit);
    mode_case(&kit, "discovery.canned-available", "good", DISCOVER);
    mode_case(&kit, "discovery.slow-sibling", "slow-sibling", DISCOVER);
    mode_case(&kit, "hostile.daemon", "hostile-daemon", DISCOVER);
    mode_case(
        &kit,
        "hostile.daemon-noenv",
        "hostile-daemon-noenv",
        DISCOVER,
    );
    mode_case(
        &kit,
        "hostile.stderr-flood",
        "hostile-stderr-flood",
        DISCOVER,
    );
    mode_case(
        &kit,
        "hostile.stdout-closed",
        "hostile-stdout-closed",
        DISCOVER,
    );
    mode_case(
        &kit,
        "hostile.foreign-outcome",
        "hostile-foreign-outcome",
        RUN,
    );
    mode_case(
        &kit,
        "hostile.silent-handshake",
        "hostile-silent-handshake",
        DISCOVER,
    );
    mode_case(&kit, "survivor.after-hostile", "good", DISCOVER);
    for id in ["hostile.crash-on-run", "hostile.crash-on-run-again"] {
        mode_case(&kit, id, "hostile-crash-on-run", RUN);
    }

    let output = run_jobs(&kit, "3");
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let found = verdicts(&output);
    let case = |id: &str| {
        found
            .iter()
            .find(|(found_id, ..)| found_id == id)
            .unwrap_or_else(|| panic!("{id} not reported: {found:?}"))
            .clone()
    };
    for id in [
        "discovery.canned-available",
        "discovery.slow-sibling",
        "survivor.after-hostile",
    ] {
        let (_, verdict, _, why) = case(id);
        assert_eq!(verdict, "pass", "{id}: {why}");
    }
    let expected = [
        (
            "hostile.daemon",
            "s10.process-tree-reaped",
            "left 2 process(es) running outside its process group",
        ),
        (
            "hostile.daemon-noenv",
            "s10.process-tree-reaped",
            "left 1 process(es) running outside its process group",
        ),
        (
            "hostile.stderr-flood",
            "s14.stderr-bounded",
            "bytes to its stderr",
        ),
        (
            "hostile.stdout-closed",
            "s6.driver-reply-valid",
            "the host closed its stdout before its first reply (still running)",
        ),
        (
            "hostile.crash-on-run",
            "s6.driver-reply-valid",
            "run r0: the host exited before its first reply (exit status 1) while waiting for \
             the outcome of r0; its stderr ends: Traceback (most recent call last): /   File \
             \"driver.py\", line 12, in run / TypeError: spawn() needs cwd",
        ),
        (
            "hostile.crash-on-run-again",
            "s6.driver-reply-valid",
            "exited before its first reply",
        ),
        (
            "hostile.foreign-outcome",
            "s6.driver-reply-valid",
            "sent outcome for r-never-sent",
        ),
        (
            "hostile.silent-handshake",
            "s6.driver-reply-valid",
            "handshake: no reply from the driver",
        ),
    ];
    for (id, rule, why_part) in expected {
        let (_, verdict, found_rule, why) = case(id);
        assert_eq!(verdict, "fail", "{id}: {why}");
        assert_eq!(found_rule, rule, "{id}: {why}");
        assert!(why.contains(why_part), "{id}: {why}");
    }

    // The crash is said once for the run, with the stderr's tail.
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr
            .matches("the host driver is broken: case hostile.crash-on-run")
            .count(),
        1,
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("TypeError: spawn() needs cwd").count(),
        1,
        "{stderr}"
    );
    assert!(
        stderr.contains("fails on s6.driver-reply-valid (the driver contract)"),
        "{stderr}"
    );

    let recorded = kit.recorded_pids();
    let daemons = recorded
        .iter()
        .filter(|(mode, _)| mode == "hostile-daemon")
        .count();
    assert_eq!(daemons, 3, "the driver and its two daemons: {recorded:?}");
    for mode in [
        "hostile-daemon-noenv",
        "hostile-stdout-closed",
        "hostile-silent-handshake",
        "slow-sibling",
    ] {
        assert!(
            recorded.iter().any(|(found, _)| found == mode),
            "{mode} recorded no pid: {recorded:?}"
        );
    }
    let alive: Vec<&(String, i32)> = recorded.iter().filter(|(_, pid)| !is_gone(*pid)).collect();
    assert!(alive.is_empty(), "left alive: {alive:?}");
}

#[test]
fn a_daemon_is_reported_and_killed_when_the_driver_is_killed_for_a_timeout() {
    let kit = ShellDriverKit::new(HOSTILE_DRIVER);
    let _sweeper = PidSweeper(&kit);
    // The daemon driver answers the handshake, but never a run: the harness kills its group at
    // the case deadline, and the daemons outside the group are still found.
    mode_case(&kit, "hostile.daemon-then-hang", "hostile-daemon", RUN);
    fs::write(
        kit.driver(),
        HOSTILE_DRIVER.replace(
            r#"    *'"type":"run"'*)"#,
            r#"    *'"type":"run"'*) sleep 600 ;;
    *'"type":"never"'*)"#,
        ),
    )
    .expect("rewrite driver");
    let output = run_jobs(&kit, "1");
    let found = verdicts(&output);
    let (_, verdict, _, why) = found.first().cloned().expect("one case");
    assert_eq!(verdict, "fail", "{why}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("json");
    let transcript = report["cases"][0]["transcript"].to_string();
    assert!(
        transcript.contains("left 2 process(es) running outside its process group"),
        "{transcript}"
    );
    let alive: Vec<(String, i32)> = kit
        .recorded_pids()
        .into_iter()
        .filter(|(_, pid)| !is_gone(*pid))
        .collect();
    assert!(alive.is_empty(), "left alive: {alive:?}");
}
