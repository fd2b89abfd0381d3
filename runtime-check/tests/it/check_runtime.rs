//! `check-runtime`'s checks on the open-design surface, through the library
//! ([`run_checks`]) against fake-dsh: the default agent passes every check, each adversarial
//! scenario makes the check that guards its rule fail (the checks can fail), the renderers, the
//! catalogue order and the shared turns. fake-dsh gets its scenario from a wrapper script, so
//! no test changes the environment the others share. The command itself (its options, output
//! formats, exit codes, `--bundle`, the daemons it sweeps as the kit's own process) is the CLI's
//! test: `conformance/tests/it/check_runtime_cli.rs`.

use dsh_engine::timing::{Jobs, TimeScale};
use dsh_runtime_check::checks::CHECKS;
use dsh_runtime_check::world::Target;
use dsh_runtime_check::{
    install_bundle, run_checks, select_checks, to_json, to_jsonl, to_table, CannotRun,
};
use dsh_test_support::check_status as status_of;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// fake-dsh behind a wrapper in `dir` that plays `scenario` (none: its default agent) with `env`
/// set: the checks start the runtime as a program, with the environment of this process.
fn fake_dsh_with(dir: &Path, scenario: Option<&Value>, env: &[(&str, &str)]) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let mut script = String::from("#!/bin/sh\nunset FAKE_DSH_SCENARIO FAKE_DSH_JOURNAL\n");
    if let Some(scenario) = scenario {
        let path = dir.join("scenario.json");
        std::fs::write(&path, scenario.to_string()).unwrap();
        script.push_str(&format!("export FAKE_DSH_SCENARIO='{}'\n", path.display()));
    }
    for (name, value) in env {
        script.push_str(&format!("export {name}='{value}'\n"));
    }
    let fake = dsh_test_support::binary("fake-dsh");
    script.push_str(&format!("exec '{}' \"$@\"\n", fake.display()));
    let wrapper = dir.join("dsh");
    std::fs::write(&wrapper, script).unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    wrapper
}

/// The target `check-runtime --runtime RUNTIME --time-scale SCALE` builds.
fn target(runtime: &Path, scale: f64) -> Target {
    Target {
        dsh: runtime.to_path_buf(),
        dsh_home: None,
        home_template: None,
        time_scale: TimeScale::new(scale).unwrap(),
        model_url: None,
        observed: Default::default(),
    }
}

/// The checks `checks` names (every one when empty) against `runtime`, `jobs` at a time; the
/// report (`check-runtime --format json`'s), or why they could not run.
fn run(runtime: &Path, checks: &[&str], scale: f64, jobs: usize) -> Result<Value, CannotRun> {
    let target = target(runtime, scale);
    let cases: Vec<String> = checks.iter().map(|id| id.to_string()).collect();
    let selection = select_checks(CHECKS.iter().map(|check| check.id), &cases, &[])?;
    let results = run_checks(&target, &selection, Jobs::new(jobs).unwrap())?;
    Ok(to_json(&target, &results))
}

/// The checks against fake-dsh playing `scenario` with `env`, every bound x `scale`.
fn check_scaled(
    scale: f64,
    scenario: Option<&Value>,
    checks: &[&str],
    env: &[(&str, &str)],
) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let runtime = fake_dsh_with(dir.path(), scenario, env);
    run(&runtime, checks, scale, 2).unwrap_or_else(|CannotRun(why)| panic!("could not run: {why}"))
}

/// The checks against fake-dsh playing `scenario`, every bound x 0.2 (a check whose pass rests
/// on a short grace gets more room with [`check_scaled`]).
fn check(scenario: Option<&Value>, checks: &[&str]) -> Value {
    check_scaled(0.2, scenario, checks, &[])
}

fn failed(report: &Value) -> u64 {
    report["totals"]["fail"].as_u64().unwrap()
}

#[test]
fn default_fake_dsh_passes_every_check() {
    let report = check(None, &[]);
    let checks = report["checks"].as_array().unwrap();
    assert_eq!(checks.len(), CHECKS.len());
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
    assert_eq!(failed(&report), 0);
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
        let report = check(Some(&adversary.scenario), &selected);
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
        assert!(failed(&report) >= 1, "{}", adversary.name);
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
    let report = check_scaled(1.0, Some(&scenario), &[id, "rt.cancel-honoured"], &[]);
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
    assert_eq!(
        failed(&report),
        0,
        "an informational finding is not a failure"
    );
}

#[test]
fn jsonl_is_one_object_per_check_then_the_summary_and_the_table_ends_with_a_summary() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = fake_dsh_with(dir.path(), None, &[]);
    let target = target(&runtime, 1.0);
    let cases = ["rt.version-shape".to_string(), "rt.probe-shape".to_string()];
    let selection = select_checks(CHECKS.iter().map(|check| check.id), &cases, &[]).unwrap();
    let results = run_checks(&target, &selection, Jobs::new(2).unwrap()).unwrap();
    let lines: Vec<Value> = to_jsonl(&to_json(&target, &results))
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON object per line"))
        .collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0]["id"], "rt.version-shape");
    assert_eq!(lines[1]["id"], "rt.probe-shape");
    assert_eq!(lines[2]["summary"]["totals"]["pass"], 2);
    let text = to_table(&target, &results);
    assert!(text.lines().next().unwrap().starts_with("pass"), "{text}");
    assert!(
        text.lines()
            .last()
            .unwrap()
            .starts_with("2 checks: 2 passed, 0 failed, 0 inconclusive"),
        "{text}"
    );
}

#[test]
fn a_check_that_does_not_exist_cannot_be_selected() {
    let cases = ["rt.no-such-check".to_string()];
    let Err(CannotRun(why)) = select_checks(CHECKS.iter().map(|check| check.id), &cases, &[])
    else {
        panic!("rt.no-such-check was selected");
    };
    assert!(why.contains("rt.no-such-check"), "{why}");
}

#[test]
fn every_check_names_a_rule_of_the_catalog() {
    let fixtures = dsh_test_support::workspace_root().join("fixtures");
    let catalog = dsh_host_corpus::corpus::load_rules(&fixtures).unwrap();
    let ids: Vec<&str> = catalog.iter().map(|rule| rule.id.as_str()).collect();
    for check in CHECKS {
        assert!(
            ids.contains(&check.rule),
            "{} names unknown rule {}",
            check.id,
            check.rule
        );
    }
}

#[test]
fn checks_run_in_parallel_and_report_in_catalogue_order() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = fake_dsh_with(dir.path(), None, &[]);
    let report = run(&runtime, &[], 1.0, 4).unwrap_or_else(|CannotRun(why)| panic!("{why}"));
    let ids: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|check| check["id"].as_str().unwrap())
        .collect();
    let catalogue: Vec<&str> = CHECKS.iter().map(|check| check.id).collect();
    assert_eq!(ids, catalogue);
    assert_eq!(report["totals"]["pass"], catalogue.len(), "{report:#}");
}

#[test]
fn a_bundle_directory_without_a_package_json_cannot_run() {
    let dir = tempfile::tempdir().unwrap();
    let Err(CannotRun(why)) = install_bundle(&dsh_test_support::binary("fake-dsh"), dir.path())
    else {
        panic!("a directory without a package.json was installed");
    };
    assert!(why.contains("needs a package.json"), "{why}");
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
    let Err(CannotRun(why)) = run(&dead, &[], 1.0, 2) else {
        panic!("a runtime that cannot start gave verdicts");
    };
    assert!(
        why.contains("exited without writing anything on stdout"),
        "{why}"
    );
    assert!(why.contains("status: exit 4"), "{why}");
    assert!(
        why.contains("profile open-design is not installed"),
        "{why}"
    );
}

/// How many fake-dsh processes of each mode a run of these checks started, and its report.
fn starts_by_mode(checks: &[&str]) -> (std::collections::BTreeMap<String, usize>, Value) {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.jsonl");
    let report = check_scaled(
        0.2,
        None,
        checks,
        &[("FAKE_DSH_JOURNAL", journal.to_str().unwrap())],
    );
    assert_eq!(failed(&report), 0, "{report:#}");
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
