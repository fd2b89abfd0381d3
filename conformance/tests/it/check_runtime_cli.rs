//! `dsh-conformance check-runtime` end to end: its output formats and exit codes (0, 1 when a
//! check fails, 2 when the checks cannot run), the old option spellings, `--list`, `--jobs`
//! refused at parse, `--bundle`, the caller's model URL never reaching the runtime, the daemons
//! it sweeps as the kit's own process (a child subreaper that kills what it adopted), and the
//! ACP, `jsonrpc-agent` and headless surfaces from the command line. What the checks conclude is
//! dsh-runtime-check's own test (`runtime-check/tests/it/`).

use assert_cmd::Command;
use dsh_test_support::check_status as status_of;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn fake_dsh() -> PathBuf {
    dsh_test_support::binary("fake-dsh")
}

fn kit() -> Command {
    let mut command = Command::new(dsh_test_support::binary("dsh-conformance"));
    command
        .timeout(Duration::from_secs(120))
        .env_remove("FAKE_DSH_SCENARIO")
        .env_remove("FAKE_DSH_JOURNAL");
    command
}

/// Run check-runtime (JSON output) with this fake-dsh scenario; returns (exit code, report).
fn check(scenario: Option<&Value>, checks: &[&str]) -> (i32, Value) {
    check_with_env(scenario, checks, &[])
}

fn check_with_env(scenario: Option<&Value>, checks: &[&str], env: &[(&str, &str)]) -> (i32, Value) {
    check_scaled("0.2", scenario, checks, env)
}

/// `check-runtime` with every bound multiplied by `scale` (0.2 keeps the file quick; a check
/// whose pass rests on a short grace gets more room on a loaded machine).
fn check_scaled(
    scale: &str,
    scenario: Option<&Value>,
    checks: &[&str],
    env: &[(&str, &str)],
) -> (i32, Value) {
    let dir = tempfile::tempdir().unwrap();
    let mut command = kit();
    command.envs(env.iter().copied());
    command
        .arg("check-runtime")
        .arg("--runtime")
        .arg(fake_dsh())
        .args(["--format", "json", "--time-scale", scale]);
    for id in checks {
        command.args(["--case", id]);
    }
    if let Some(scenario) = scenario {
        let path = dir.path().join("scenario.json");
        std::fs::write(&path, scenario.to_string()).unwrap();
        command.env("FAKE_DSH_SCENARIO", &path);
    }
    let output = command.output().unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "not a JSON report ({error}); stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.code().unwrap_or(-1), report)
}

#[test]
fn a_failing_check_exits_1_and_the_json_report_says_which() {
    let scenario = json!({"stdio": [[
        {"read_execute": {}}, {"session": {}}, {"text": "hi"}, {"result": {"status": "completed"}}
    ]]});
    let (code, report) = check(Some(&scenario), &["rt.ready-first", "rt.version-shape"]);
    assert_eq!(status_of(&report, "rt.ready-first"), "fail", "{report:#}");
    assert_eq!(status_of(&report, "rt.version-shape"), "pass", "{report:#}");
    assert_eq!(code, 1);
}

#[test]
fn jsonl_prints_one_object_per_check_then_the_summary() {
    let output = kit()
        .arg("check-runtime")
        .arg("--runtime")
        .arg(fake_dsh())
        .args(["--case", "rt.version-shape", "--case", "rt.probe-shape"])
        .args(["--format", "jsonl"])
        .output()
        .unwrap();
    let lines: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON object per line"))
        .collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0]["id"], "rt.version-shape");
    assert_eq!(lines[1]["id"], "rt.probe-shape");
    assert_eq!(lines[2]["summary"]["totals"]["pass"], 2);
    assert_eq!(output.status.code(), Some(0));
}

#[test]
fn table_output_ends_with_a_summary() {
    let output = kit()
        .arg("check-runtime")
        .arg("--runtime")
        .arg(fake_dsh())
        .args(["--case", "rt.version-shape", "--case", "rt.probe-shape"])
        .output()
        .unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.lines().next().unwrap().starts_with("pass"), "{text}");
    assert!(
        text.lines()
            .last()
            .unwrap()
            .starts_with("2 checks: 2 passed, 0 failed, 0 inconclusive"),
        "{text}"
    );
    assert_eq!(output.status.code(), Some(0));
}

#[test]
fn cannot_run_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-dsh");
    let output = kit()
        .arg("check-runtime")
        .arg("--runtime")
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("could not run"));

    let output = kit()
        .arg("check-runtime")
        // The old spellings (`--dsh`, `--check`) are hidden aliases of `--runtime` and `--case`.
        .arg("--dsh")
        .arg(fake_dsh())
        .args(["--check", "rt.no-such-check"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("rt.no-such-check"));
}

#[test]
fn list_names_every_check_without_a_runtime_and_checks_need_one() {
    let missing = kit().arg("check-runtime").output().unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("--runtime"));
    let output = kit().args(["check-runtime", "--list"]).output().unwrap();
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    for check in dsh_runtime_check::checks::CHECKS {
        assert!(text.contains(check.id), "{} missing from --list", check.id);
    }
}

/// A stand-in runtime that, asked `--version`, records its `DEEPSEEK_BASE_URL` and the status
/// line that URL's `/models` answers with (bash's /dev/tcp: no HTTP client needed).
const URL_RECORDER: &str = r#"#!/bin/bash
url="$DEEPSEEK_BASE_URL"
echo "$url" > "$MARKER"
hostport="${url#http://}"
if exec 3<>"/dev/tcp/${hostport%:*}/${hostport#*:}"; then
  printf 'GET /models HTTP/1.1\r\nHost: %s\r\n\r\n' "$hostport" >&3
  head -n 1 <&3 >> "$MARKER"
fi
echo "0.1.0-rc.8"
"#;

#[test]
fn every_runtime_process_gets_the_kits_own_loopback_model_server() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let runtime = dir.path().join("dsh");
    std::fs::write(&runtime, URL_RECORDER).unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o755)).unwrap();
    let marker = dir.path().join("seen");
    let output = kit()
        .arg("check-runtime")
        .arg("--runtime")
        .arg(&runtime)
        .args(["--case", "rt.version-shape", "--format", "json"])
        .env("MARKER", &marker)
        .env("DEEPSEEK_BASE_URL", "https://api.deepseek.com")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let seen = std::fs::read_to_string(&marker).unwrap();
    let mut lines = seen.lines();
    let url = lines.next().unwrap();
    assert!(url.starts_with("http://127.0.0.1:"), "{seen}");
    assert_eq!(
        lines.next().map(str::trim_end),
        Some("HTTP/1.1 200 OK"),
        "{seen}"
    );
}

#[test]
fn a_bundle_is_installed_into_a_fresh_home_that_the_checks_then_use() {
    let dir = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    let tarball = dir.path().join("open-design-runtime.tgz");
    std::fs::write(&tarball, b"packed bundle").unwrap();
    // fake-dsh behind a wrapper that notes each invocation's DSH_HOME.
    let runtime = dir.path().join("dsh");
    std::fs::write(
        &runtime,
        format!(
            "#!/bin/sh\necho \"$DSH_HOME\" >> \"$MARKER\"\nexec '{}' \"$@\"\n",
            fake_dsh().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o755)).unwrap();
    let marker = dir.path().join("homes");
    let output = kit()
        .arg("check-runtime")
        .arg("--runtime")
        .arg(&runtime)
        .arg("--bundle")
        .arg(&tarball)
        .args(["--case", "rt.probe-shape", "--format", "json"])
        .env("MARKER", &marker)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(status_of(&report, "rt.probe-shape"), "pass");
    let homes = std::fs::read_to_string(&marker).unwrap();
    let homes: Vec<&str> = homes.lines().collect();
    assert_eq!(
        homes.len(),
        3,
        "plugin add, the pre-flight start, then the probe: {homes:?}"
    );
    let probe = homes[2];
    assert!(homes[0].contains("dsh-check-runtime-home-"), "{homes:?}");
    // The probe ran in the check's own copy of the installed home (its profile came along, or
    // the probe could not pass).
    assert_ne!(homes[0], probe);
    assert!(probe.contains("dsh-check-runtime-"), "{homes:?}");
    for home in homes {
        assert!(
            !std::path::Path::new(home).exists(),
            "{home}: the homes are removed"
        );
    }

    let missing = dir.path().join("missing.tgz");
    let output = kit()
        .arg("check-runtime")
        .arg("--runtime")
        .arg(fake_dsh())
        .arg("--bundle")
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("missing.tgz"));
}

#[test]
fn jobs_of_0_or_not_a_number_are_refused() {
    for bad in ["0", "x"] {
        let refused = kit()
            .args(["check-runtime", "--jobs", bad, "--runtime"])
            .arg(fake_dsh())
            .output()
            .unwrap();
        assert_eq!(refused.status.code(), Some(2), "--jobs {bad}");
    }
}

/// Live processes whose command line holds `marker` (killed and reaped on drop of the guard).
fn live_with_marker(marker: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| dsh_engine::procfs::is_live(*pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(marker))
        })
        .collect()
}

struct KillMarked(&'static str);

impl Drop for KillMarked {
    fn drop(&mut self) {
        for pid in live_with_marker(self.0) {
            let pid = nix::unistd::Pid::from_raw(pid);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

#[test]
fn a_daemon_that_escapes_the_group_with_no_environment_fails_exit_after_result_and_is_killed() {
    // The daemon's argv carries its watchdog (`--daemon-watchdog-ms 97531`): the marker.
    let _guard = KillMarked("97531");
    let scenario = json!({ "stdio": [[
        {"ready": {}}, {"read_execute": {}},
        {"spawn_child": {"detach": "setsid", "clear_env": true, "ignore_sigterm": true}},
        {"session": {}}, {"text": "done"}, {"result": {"status": "completed"}}
    ]] });
    let (code, report) = check_with_env(
        Some(&scenario),
        &["rt.exit-after-result"],
        &[("FAKE_DSH_WATCHDOG_SECS", "97.531")],
    );
    assert_eq!(
        status_of(&report, "rt.exit-after-result"),
        "fail",
        "{report:#}"
    );
    assert_eq!(code, 1);
    let left = live_with_marker("97531");
    assert!(
        left.is_empty(),
        "check-runtime left its daemons running: {left:?}"
    );
}

/// `check-runtime --surface acp` judges fake-dsh's ACP agent with the ACP checks (each naming its
/// facts), prints each as it ends, selects with `--case`, and a runtime that is no ACP agent
/// fails them.
#[test]
fn the_acp_surface_is_checked_from_the_command_line() {
    let output = kit()
        .args(["check-runtime", "--surface", "acp", "--runtime"])
        .arg(fake_dsh())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    for id in ["acp.initialize", "acp.permission", "acp.cold-resume"] {
        assert!(stdout.contains(&format!("pass  {id}")), "{id}: {stdout}");
    }
    assert!(stdout.contains("0 check(s) failed"), "{stdout}");

    let one = kit()
        .args(["check-runtime", "--surface", "acp", "--format", "json"])
        .args(["--case", "acp.initialize", "--runtime"])
        .arg(fake_dsh())
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&one.stdout).unwrap();
    assert_eq!(
        report["checks"].as_array().map(Vec::len),
        Some(1),
        "{report}"
    );
    assert_eq!(report["surface"], "acp");

    let dir = tempfile::tempdir().unwrap();
    let mute = dir.path().join("mute-dsh");
    std::fs::write(&mute, "#!/bin/sh\nexec cat >/dev/null\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&mute, std::fs::Permissions::from_mode(0o755)).unwrap();
    let failing = kit()
        .args([
            "check-runtime",
            "--surface",
            "acp",
            "--case",
            "acp.initialize",
        ])
        .args(["--time-scale", "0.2", "--runtime"])
        .arg(&mute)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&failing.stdout);
    assert_eq!(failing.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("FAIL  acp.initialize"), "{stdout}");
}

/// `check-runtime --surface SURFACE --dsh DSH` with `DSH_CORDIS_CONFIG` set to `config` (or
/// unset); its exit code and table.
fn sdk_check(surface: &str, dsh: &Path, config: Option<&str>) -> (Option<i32>, String) {
    let mut command = std::process::Command::new(dsh_test_support::binary("dsh-conformance"));
    command
        .args(["check-runtime", "--surface", surface, "--dsh"])
        .arg(dsh);
    match config {
        Some(config) => command.env("DSH_CORDIS_CONFIG", config),
        None => command.env_remove("DSH_CORDIS_CONFIG"),
    };
    let output = command.output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// fake-dsh under the 0.1.1 binary's name, in a temp dir.
fn fake_agent(dir: &Path) -> PathBuf {
    let agent = dir.join("dsh-jsonrpc-agent");
    std::os::unix::fs::symlink(dsh_test_support::binary("fake-dsh"), &agent).unwrap();
    agent
}

#[test]
fn the_jsonrpc_agent_surface_takes_its_config_from_the_callers_environment() {
    let dir = tempfile::tempdir().unwrap();
    let (code, table) = sdk_check("jsonrpc-agent", &fake_agent(dir.path()), Some("cordis.yml"));
    assert_eq!(code, Some(0), "jsonrpc-agent:\n{table}");
    assert!(table.contains("0 check(s) failed"), "{table}");
}

/// A headless runtime that answers a completed turn but leaves two daemons behind (`setsid`, one
/// holding its stdout and stderr) fails `headless.process-hygiene`, and nothing it started
/// outlives `check-runtime` (issue 33 item 6).
#[test]
fn a_runtime_that_daemonizes_fails_process_hygiene_and_leaves_nothing_alive() {
    if !Path::new("/proc/self/stat").exists() {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("daemons.pid");
    let runtime = dir.path().join("daemonizing-dsh");
    std::fs::write(
        &runtime,
        format!(
            "#!/bin/sh\nsetsid sleep 300 </dev/null >/dev/null 2>&1 &\necho $! >> {pids}\n\
             setsid sleep 30 </dev/null &\necho $! >> {pids}\n\
             echo '<html></html>' > index.html\necho 'I wrote index.html.'\n",
            pids = pids.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (code, table) = sdk_check("headless", &runtime, None);
    assert_eq!(code, Some(1), "{table}");
    assert!(table.contains("pass  headless.completed"), "{table}");
    assert!(table.contains("FAIL  headless.process-hygiene"), "{table}");
    assert!(
        table.contains("(sleep)"),
        "the leftovers are named: {table}"
    );
    let started: Vec<i32> = std::fs::read_to_string(&pids)
        .unwrap()
        .lines()
        .map(|pid| pid.trim().parse().unwrap())
        .collect();
    assert!(started.len() >= 4, "every run daemonized: {started:?}");
    let alive: Vec<&i32> = started
        .iter()
        .filter(|pid| dsh_engine::procfs::is_live(**pid))
        .collect();
    assert!(alive.is_empty(), "outlived check-runtime: {alive:?}");
}
