//! A driver that claims `reuse` serves many cases in one process (docs/host-driver.md, "Serving
//! many cases"): one driver per worker instead of one per case, every case still judged on its
//! own world, and a runtime a case leaves running still found (by the case token the case's
//! `dsh` wrapper exports) and blamed, with the driver kept alive.

use dsh_test_support::shell_driver as shell_driver_support;
use serde_json::Value;

use shell_driver_support::ShellDriverKit;

/// A shell driver claiming `reuse`: it answers `case` (taking the case's `DSH_BIN`, `DSH_HOME` and
/// root from it) and `discover`; in a case whose scenario says `leave-runtime` its discover also
/// starts a runtime in a new session (its stdin a FIFO that never ends), waits until it runs and
/// leaves it running; in one whose scenario says `log-key` it writes the case's credential to its
/// stderr. Its own pid goes to `$HOSTILE_PID_DIR`.
const REUSING_DRIVER: &str = r#"#!/bin/sh
echo "$$" >> "$HOSTILE_PID_DIR/driver.pids"
dsh= home= root= key=
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
  case "$line" in
    *'"type":"handshake"'*)
      printf '%s\n' '{"v":1,"type":"handshake","driver":"sh-reuse","version":"0.0.1","capabilities":["discover","reuse"]}' ;;
    *'"type":"case"'*)
      dsh=$(printf '%s' "$line" | sed -n 's/.*"DSH_BIN":"\([^"]*\)".*/\1/p')
      home=$(printf '%s' "$line" | sed -n 's/.*"DSH_HOME":"\([^"]*\)".*/\1/p')
      root=$(printf '%s' "$line" | sed -n 's/.*"cwd":"\([^"]*\)".*/\1/p')
      key=$(printf '%s' "$line" | sed -n 's/.*"DEEPSEEK_API_KEY":"\([^"]*\)".*/\1/p')
      printf '{"v":1,"type":"case_ready","id":"%s"}\n' "$id" ;;
    *'"type":"discover"'*)
      if grep -q '"leave-runtime"' "$root/scenario.json" 2>/dev/null; then
        mkfifo "$root/never-ends"
        DSH_HOME="$home" setsid "$dsh" --profile open-design --stdio <>"$root/never-ends" >/dev/null 2>&1 &
        pid=$!
        echo "$pid" >> "$HOSTILE_PID_DIR/runtime.pids"
        # Answered once the runtime is running (the case's dsh has exec'd fake-dsh), not while
        # the fork is still starting: on a loaded machine the case could end before then.
        tries=0
        until readlink "/proc/$pid/exe" 2>/dev/null | grep -q 'fake-dsh$' || [ "$tries" -ge 1000 ]; do
          tries=$((tries + 1)); sleep 0.01
        done
      fi
      if grep -q '"log-key"' "$root/scenario.json" 2>/dev/null; then
        echo "using key $key" >&2
      fi
      printf '{"v":1,"type":"discovered","id":"%s","available":true,"version":"0.1.7-rc.1","warnings":[],"diagnostic":null,"code":null}\n' "$id" ;;
    *'"type":"shutdown"'*)
      printf '%s\n' '{"v":1,"type":"bye"}'
      exit 0 ;;
  esac
done
"#;

fn discover_case(kit: &ShellDriverKit, id: &str, version: &str) {
    kit.write_case(
        id,
        &format!(
            r#"{{"v":1,"id":"{id}","summary":"{id}","spec":["5"],"rules":["s10.process-tree-reaped"],
               "timeout_ms":5000,"runtime":{{"version":"{version}"}},
               "steps":[{{"discover":{{}},"expect":{{"available":true}}}}]}}"#
        ),
    );
}

/// (id, verdict, rule) of every case of a `--format json` run.
fn verdicts(output: &std::process::Output) -> Vec<(String, String, String)> {
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "not a JSON report ({error}): {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let cases = report["cases"].as_array().cloned().unwrap_or_default();
    cases
        .iter()
        .map(|case| {
            let text = |member: &str| case[member].as_str().unwrap_or("").to_string();
            (text("id"), text("verdict"), text("rule"))
        })
        .collect()
}

fn pids_of(kit: &ShellDriverKit, mode: &str) -> Vec<i32> {
    kit.recorded_pids()
        .into_iter()
        .filter(|(recorded, _)| recorded == mode)
        .map(|(_, pid)| pid)
        .collect()
}

#[test]
fn one_driver_serves_a_workers_cases_unless_a_driver_per_case_is_asked_for() {
    let kit = ShellDriverKit::new(REUSING_DRIVER);
    for id in ["hygiene.first", "hygiene.second", "hygiene.third"] {
        discover_case(&kit, id, "0.1.7-rc.1");
    }
    let output = kit
        .run()
        .args(["--format", "json", "--jobs", "1"])
        .output()
        .expect("runs");
    let all_pass = verdicts(&output)
        .iter()
        .all(|(_, verdict, _)| verdict == "pass");
    assert!(all_pass, "{:?}", verdicts(&output));
    // The pre-flight handshake's driver, then one for the worker's three cases.
    assert_eq!(
        pids_of(&kit, "driver").len(),
        2,
        "{:?}",
        kit.recorded_pids()
    );

    let output = kit
        .run()
        .args(["--format", "json", "--jobs", "1", "--driver-per-case"])
        .output()
        .expect("runs");
    assert_eq!(verdicts(&output).len(), 3);
    assert_eq!(pids_of(&kit, "driver").len(), 2 + 1 + 3);
}

/// A bad case then a good one, in one driver: the bad case fails on `rule`, the good one passes.
fn bad_then_good(kit: &ShellDriverKit, bad: &str, mode: &str, rule: &str) {
    discover_case(kit, bad, mode);
    discover_case(kit, "hygiene.then-a-good-case", "0.1.7-rc.1");
    let output = kit
        .run()
        .args(["--format", "json", "--jobs", "1"])
        .output()
        .expect("runs");
    let found = verdicts(&output);
    let verdict_of = |wanted: &str| {
        found
            .iter()
            .find(|(id, ..)| id == wanted)
            .map(|(_, verdict, rule)| (verdict.clone(), rule.clone()))
    };
    let expected = ("fail".to_string(), rule.to_string());
    assert_eq!(verdict_of(bad), Some(expected), "{found:?}");
    let good = verdict_of("hygiene.then-a-good-case").map(|(verdict, _)| verdict);
    assert_eq!(good.as_deref(), Some("pass"), "{found:?}");
    assert_eq!(
        pids_of(kit, "driver").len(),
        2,
        "one driver served both cases"
    );
}

#[test]
fn a_runtime_a_case_leaves_running_in_a_reused_driver_is_found_killed_and_blamed() {
    let kit = ShellDriverKit::new(REUSING_DRIVER);
    bad_then_good(
        &kit,
        "hygiene.leaves-a-runtime",
        "leave-runtime",
        "s10.process-tree-reaped",
    );
    let runtimes = pids_of(&kit, "runtime");
    assert_eq!(runtimes.len(), 1, "{:?}", kit.recorded_pids());
    let alive: Vec<i32> = runtimes
        .into_iter()
        .chain(pids_of(&kit, "driver"))
        .filter(|pid| dsh_engine::procfs::is_live(*pid))
        .collect();
    for pid in &alive {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(alive.is_empty(), "left alive: {alive:?}");
}

#[test]
fn a_reused_driver_is_scanned_for_each_cases_own_secrets() {
    let kit = ShellDriverKit::new(REUSING_DRIVER);
    bad_then_good(
        &kit,
        "hygiene.logs-the-key",
        "log-key",
        "s14.no-credential-leak",
    );
}
