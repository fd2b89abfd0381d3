//! `check-runtime` against fake-dsh: the default agent passes every check, and each adversarial
//! scenario makes the check that guards its rule fail (the checks can fail).

use assert_cmd::Command;
use serde_json::{json, Value};
use std::path::PathBuf;
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

fn status_of<'a>(report: &'a Value, id: &str) -> &'a str {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|check| check["id"] == id)
        .unwrap_or_else(|| panic!("{id} missing from {report:#}"))["status"]
        .as_str()
        .unwrap()
}

#[test]
fn default_fake_dsh_passes_every_check() {
    let (code, report) = check(None, &[]);
    let checks = report["checks"].as_array().unwrap();
    assert_eq!(checks.len(), dsh_runtime_check::checks::CHECKS.len());
    for check in checks {
        assert_eq!(check["status"], "pass", "{check:#}");
        assert!(
            check["rule"]
                .as_str()
                .is_some_and(|rule| rule.starts_with('s')),
            "{check:#}"
        );
    }
    assert_eq!(report["totals"]["pass"], checks.len());
    assert_eq!(code, 0);
}

/// A one-process scenario: `script` is the first `--stdio` process of every check's world.
fn scripted(script: Value) -> Value {
    json!({ "stdio": [script] })
}

/// Each adversarial runtime and the check that must catch it; `passes` are checks it must NOT
/// trip (so a failure is the right one, not a blanket one).
struct Adversary {
    name: &'static str,
    scenario: Value,
    fails: &'static str,
    passes: &'static [&'static str],
}

fn adversaries() -> Vec<Adversary> {
    let turn = |middle: Vec<Value>| {
        let mut script = vec![json!({"ready": {}}), json!({"read_execute": {}})];
        script.extend(middle);
        scripted(Value::Array(script))
    };
    vec![
        Adversary {
            name: "no ready",
            scenario: scripted(json!([
                {"read_execute": {}}, {"session": {}}, {"text": "hi"}, {"result": {"status": "completed"}}
            ])),
            fails: "rt.ready-first",
            passes: &["rt.version-shape"],
        },
        Adversary {
            name: "ready only after the execute",
            scenario: scripted(json!([
                {"read_execute": {}}, {"ready": {}}, {"session": {}}, {"text": "x"}, {"result": {"status": "completed"}}
            ])),
            fails: "rt.ready-before-read",
            passes: &["rt.ready-first"],
        },
        Adversary {
            name: "claims a write but leaves no file",
            scenario: turn(vec![
                json!({"session": {}}),
                json!({"tool_call": {"arguments": {"path": "index.html"}}}),
                json!({"tool_result": {}}),
                json!({"result": {"status": "completed"}}),
            ]),
            fails: "rt.product-writes-html",
            passes: &["rt.stream-strict", "rt.session-before-content"],
        },
        Adversary {
            name: "text before session",
            scenario: turn(vec![
                json!({"text": "early"}),
                json!({"session": {}}),
                json!({"result": {"status": "completed"}}),
            ]),
            fails: "rt.session-before-content",
            passes: &["rt.ready-first", "rt.request-scoped"],
        },
        Adversary {
            name: "a frame without request_id",
            scenario: turn(vec![
                json!({"session": {}}),
                json!({"frame": {"v": 1, "type": "text", "content": "no id"}}),
                json!({"result": {"status": "completed"}}),
            ]),
            fails: "rt.request-scoped",
            passes: &["rt.session-before-content"],
        },
        Adversary {
            name: "ignores cancel",
            scenario: turn(vec![
                json!({"session": {}}),
                json!({"text": "working"}),
                json!({"wait_stdin_close": {"timeout_ms": 20000}}),
                json!({"result": {"status": "completed"}}),
            ]),
            fails: "rt.cancel-honoured",
            passes: &["rt.session-before-content"],
        },
        Adversary {
            name: "never exits after the result",
            scenario: turn(vec![
                json!({"session": {}}),
                json!({"text": "done"}),
                json!({"result": {"status": "completed"}}),
                json!({"hang": {}}),
            ]),
            fails: "rt.exit-after-result",
            passes: &["rt.stream-strict"],
        },
        Adversary {
            name: "refuses an unknown resume, then never exits",
            scenario: turn(vec![
                json!({"result": {"status": "failed", "resume_rejected": true,
                    "error": {"code": "SESSION_NOT_FOUND", "message": "no such session"}}}),
                json!({"hang": {}}),
            ]),
            fails: "rt.exit-after-failed-result",
            passes: &["rt.resume-unknown-refused"],
        },
        Adversary {
            name: "echoes the prompt to stderr",
            scenario: turn(vec![json!({"stderr_prompt": {}}), json!({"agent": {}})]),
            fails: "rt.stderr-no-prompt",
            passes: &["rt.stderr-no-secret", "rt.stream-strict"],
        },
        Adversary {
            name: "echoes the credential to stderr",
            scenario: turn(vec![
                json!({"stderr_env": "DEEPSEEK_API_KEY"}),
                json!({"agent": {}}),
            ]),
            fails: "rt.stderr-no-secret",
            passes: &["rt.stderr-no-prompt"],
        },
        Adversary {
            name: "floods stderr",
            scenario: turn(vec![
                json!({"stderr_flood": {"bytes": 1048576}}),
                json!({"agent": {}}),
            ]),
            fails: "rt.stderr-bounded",
            passes: &["rt.stream-strict"],
        },
        Adversary {
            name: "a resume of an unknown id silently creates a new session",
            scenario: turn(vec![
                json!({"session": {"session_id": "od-11111111-1111-4111-8111-111111111111", "resumed": false}}),
                json!({"text": "fresh start"}),
                json!({"result": {"status": "completed", "session_id": "od-11111111-1111-4111-8111-111111111111"}}),
            ]),
            fails: "rt.resume-unknown-refused",
            passes: &["rt.ready-first"],
        },
        Adversary {
            name: "a non-JSON banner on stdout",
            scenario: scripted(json!([
                {"raw": "DeepSeek Harness v0.1.7 starting...\n"}, {"ready": {}}, {"read_execute": {}}, {"agent": {}}
            ])),
            fails: "rt.stdout-frames-only",
            passes: &["rt.request-scoped"],
        },
        Adversary {
            name: "ignores bad host commands",
            scenario: scripted(json!([{"ready": {}}, {"wait_stdin_close": {"timeout_ms": 20000}}])),
            fails: "rt.malformed-command",
            passes: &["rt.ready-before-read"],
        },
        Adversary {
            name: "silently ignores a second execute",
            scenario: turn(vec![
                json!({"session": {}}),
                json!({"text": "one"}),
                json!({"result": {"status": "completed"}}),
            ]),
            fails: "rt.second-execute",
            passes: &["rt.stream-strict"],
        },
        Adversary {
            name: "an invalid probe frame",
            scenario: json!({"probe": {"patch": {"capabilities": {"session_resume": null}}}}),
            fails: "rt.probe-shape",
            passes: &["rt.version-shape", "rt.ready-first"],
        },
        Adversary {
            name: "an empty model list",
            scenario: json!({"models": {"patch": {"models": []}}}),
            fails: "rt.models-shape",
            passes: &["rt.probe-shape"],
        },
        Adversary {
            name: "two default efforts",
            scenario: json!({"models": {"patch": {"models": [{"provider": "deepseek-official",
                "provider_name": "DeepSeek", "id": "deepseek-v4-pro", "name": "DeepSeek V4 Pro",
                "reasoning_options": [{"id": "low", "name": "Low", "default": true},
                                      {"id": "high", "name": "High", "default": true}]}]}}}),
            fails: "rt.models-shape",
            passes: &["rt.probe-shape"],
        },
        Adversary {
            name: "a listed route the runtime refuses",
            scenario: turn(vec![
                json!({"session": {}}),
                json!({"result": {"status": "failed", "error": {"code": "MODEL_UNKNOWN", "message": "no such model"}}}),
            ]),
            fails: "rt.models-routes-accepted",
            passes: &["rt.models-shape"],
        },
        Adversary {
            name: "an unparseable version",
            scenario: json!({"version": "unknown build"}),
            fails: "rt.version-shape",
            passes: &["rt.probe-shape"],
        },
    ]
}

#[test]
fn each_adversarial_runtime_fails_its_check() {
    for adversary in adversaries() {
        let mut selected = vec![adversary.fails];
        selected.extend(adversary.passes);
        let (code, report) = check(Some(&adversary.scenario), &selected);
        assert_eq!(
            status_of(&report, adversary.fails),
            "fail",
            "{}: {report:#}",
            adversary.name
        );
        for id in adversary.passes {
            assert_eq!(
                status_of(&report, id),
                "pass",
                "{}: {id} should pass: {report:#}",
                adversary.name
            );
        }
        assert_eq!(code, 1, "{}", adversary.name);
    }
}

/// The real open-design bundle answers a cancel that arrives before the session exists with a
/// `cancelled` result naming a session it never announced: allowed, so never a failure, but
/// reported so runtime authors see the interop hazard.
#[test]
fn a_cancel_answered_with_an_unannounced_session_is_an_informational_runtime_finding() {
    let scenario = scripted(json!([
        {"ready": {}}, {"read_execute": {}}, {"wait_cancel": {"timeout_ms": 5000}},
        {"result": {"status": "cancelled"}}
    ]));
    let id = "rt.cancelled-names-announced-session";
    let (code, report) = check_scaled("1", Some(&scenario), &[id, "rt.cancel-honoured"], &[]);
    assert_eq!(status_of(&report, id), "informational", "{report:#}");
    assert_eq!(
        status_of(&report, "rt.cancel-honoured"),
        "pass",
        "{report:#}"
    );
    let detail = report["checks"]
        .as_array()
        .and_then(|checks| checks.iter().find(|check| check["id"] == id))
        .and_then(|check| check["detail"].as_str())
        .unwrap_or_default();
    assert!(
        detail.contains("no session frame announced") && detail.contains("protocol error"),
        "the detail explains the hazard: {detail}"
    );
    assert_eq!(report["totals"]["informational"], 1, "{report:#}");
    assert_eq!(code, 0, "an informational finding is not a failure");
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

#[test]
fn every_check_names_a_rule_of_the_catalog() {
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
    let catalog = dsh_host_corpus::corpus::load_rules(&fixtures).unwrap();
    let ids: Vec<&str> = catalog.iter().map(|rule| rule.id.as_str()).collect();
    for check in dsh_runtime_check::checks::CHECKS {
        assert!(
            ids.contains(&check.rule),
            "{} names unknown rule {}",
            check.id,
            check.rule
        );
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
fn checks_run_in_parallel_with_jobs_and_report_in_catalogue_order() {
    let output = kit()
        .arg("check-runtime")
        .arg("--runtime")
        .arg(fake_dsh())
        .args(["--format", "json", "--jobs", "4"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let ids: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|check| check["id"].as_str().unwrap())
        .collect();
    let catalogue: Vec<&str> = dsh_runtime_check::checks::CHECKS
        .iter()
        .map(|check| check.id)
        .collect();
    assert_eq!(ids, catalogue);
    assert_eq!(report["totals"]["pass"], catalogue.len(), "{report:#}");
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
fn a_bundle_directory_without_a_package_json_cannot_run() {
    let dir = tempfile::tempdir().unwrap();
    let output = kit()
        .args(["check-runtime", "--runtime"])
        .arg(fake_dsh())
        .arg("--bundle")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("needs a package.json"), "{stderr}");
}

#[test]
fn a_runtime_that_cannot_start_is_an_infrastructure_error() {
    let dir = tempfile::tempdir().unwrap();
    let dead = dir.path().join("dead-dsh");
    std::fs::write(
        &dead,
        "#!/bin/sh\necho 'error: profile open-design is not installed' >&2\nexit 4\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dead, std::fs::Permissions::from_mode(0o755)).unwrap();
    let output = kit()
        .arg("check-runtime")
        .arg("--runtime")
        .arg(&dead)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("could not run"), "{stderr}");
    assert!(
        stderr.contains("exited without writing anything on stdout"),
        "{stderr}"
    );
    assert!(stderr.contains("status: exit 4"), "{stderr}");
    assert!(
        stderr.contains("profile open-design is not installed"),
        "{stderr}"
    );
    assert!(
        output.stdout.is_empty(),
        "no check verdict is printed: {}",
        String::from_utf8_lossy(&output.stdout)
    );
}

#[test]
fn a_daemon_that_escapes_the_group_with_no_environment_fails_exit_after_result_and_is_killed() {
    // The daemon's argv carries its watchdog (`--daemon-watchdog-ms 97531`): the marker.
    let _guard = KillMarked("97531");
    let scenario = scripted(json!([
        {"ready": {}}, {"read_execute": {}},
        {"spawn_child": {"detach": "setsid", "clear_env": true, "ignore_sigterm": true}},
        {"session": {}}, {"text": "done"}, {"result": {"status": "completed"}}
    ]));
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

/// How many fake-dsh processes of each mode a check-runtime run with these checks started, and
/// its report.
fn starts_by_mode(checks: &[&str]) -> (std::collections::BTreeMap<String, usize>, Value) {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.jsonl");
    let (code, report) = check_with_env(
        None,
        checks,
        &[("FAKE_DSH_JOURNAL", journal.to_str().unwrap())],
    );
    assert_eq!(code, 0, "{report:#}");
    let mut starts = std::collections::BTreeMap::new();
    for line in std::fs::read_to_string(&journal).unwrap().lines() {
        let entry: Value = serde_json::from_str(line).unwrap();
        if entry["event"] == "start" {
            *starts
                .entry(entry["mode"].as_str().unwrap().to_string())
                .or_insert(0) += 1;
        }
    }
    (starts, report)
}

#[test]
fn the_checks_that_judge_one_turn_share_one_runtime_process() {
    // Twelve checks judge the default turn: one `--stdio` process serves them all.
    let default_turn = [
        "rt.ready-before-read",
        "rt.ready-first",
        "rt.stdout-frames-only",
        "rt.frames-schema-valid",
        "rt.request-scoped",
        "rt.session-before-content",
        "rt.stream-strict",
        "rt.exit-after-result",
        "rt.stderr-bounded",
        "rt.stderr-no-prompt",
        "rt.stderr-no-secret",
        "rt.product-writes-html",
    ];
    let (starts, _) = starts_by_mode(&default_turn);
    assert_eq!(starts.get("stdio"), Some(&1), "{starts:?}");
    // The unknown resume is one more turn for its two checks; `--models` runs once for both of
    // its checks (the routes check then runs its own turn per listed route).
    let (starts, report) = starts_by_mode(&[
        "rt.resume-unknown-refused",
        "rt.exit-after-failed-result",
        "rt.models-shape",
        "rt.models-routes-accepted",
    ]);
    assert_eq!(starts.get("models"), Some(&1), "{starts:?}");
    let routes = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|check| check["id"] == "rt.models-routes-accepted")
        .and_then(|check| check["detail"].as_str())
        .and_then(|detail| detail.split(' ').next())
        .and_then(|count| count.parse::<usize>().ok())
        .unwrap_or_else(|| panic!("no route count in {report:#}"));
    // The pre-flight's default turn, the unknown resume, one turn per route.
    assert_eq!(starts.get("stdio"), Some(&(2 + routes)), "{starts:?}");
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
