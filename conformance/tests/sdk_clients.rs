//! The example SDK clients (`examples/sdk-client-python`, `examples/sdk-client-node`) against
//! fake-dsh's SDK runtime, through their driver contract (`DSH_SDK_COMMAND` names the runtime,
//! the arguments are prompts, one JSON line per settled prompt), over the situations a client
//! must survive (docs/sdk-surfaces.md): notifications before the prompt's response, an error
//! turn followed by a completed one, a root that goes idle while its background child runs and
//! then wakes, `max-tokens`, junk and unknown notifications on stdout, a slow `initialize`, an
//! approval nobody answers. Then the kill matrix: each deliberately buggy variant of the Python
//! client must fail at least one case. A client whose interpreter is missing is skipped, saying so.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// One situation: the fake runtime's scenario, the prompts, what the client must report.
struct Case {
    id: &'static str,
    scenario: Option<Value>,
    prompts: &'static [&'static str],
    /// Per prompt: (turn/end kinds, last assistant text, background children).
    expected: &'static [(&'static [&'static str], &'static str, u64)],
}

fn cases() -> Vec<Case> {
    let error = json!({"end": "error", "error": {"code": "AUTH", "message": "401"}});
    vec![
        Case {
            id: "default-two-prompts",
            scenario: None,
            prompts: &["A landing page", "make it green"],
            expected: &[
                (&["completed"], "I wrote index.html.", 0),
                (&["completed"], "I made index.html green.", 0),
            ],
        },
        Case {
            id: "error-then-completed",
            scenario: Some(json!({"sdk": {"turns": [error, {"steps": [{"text": "recovered"}]}]}})),
            prompts: &["first", "second"],
            expected: &[(&["error"], "", 0), (&["completed"], "recovered", 0)],
        },
        Case {
            id: "background-child-then-wake",
            scenario: Some(
                json!({"sdk": {"turns": [{"steps": [{"text": "started a child"}],
                "background_subagent": {"finish_after_ms": 300, "wake_text": "child is done"}}]}}),
            ),
            prompts: &["delegate"],
            expected: &[(&["completed", "completed"], "child is done", 1)],
        },
        Case {
            id: "max-tokens",
            scenario: Some(
                json!({"sdk": {"turns": [{"steps": [{"text": "cut"}], "end": "max-tokens"}]}}),
            ),
            prompts: &["long"],
            expected: &[(&["max-tokens"], "cut", 0)],
        },
        Case {
            id: "junk-unknown-notifications-slow-initialize",
            scenario: Some(json!({"sdk": {"initialize_delay_ms": 300, "stdout_noise": [
                "not json at all",
                "{\"jsonrpc\":\"2.0\",\"method\":\"x.unknown\",\"params\":{\"t\":\"a\u{2028}b\"}}"]}})),
            prompts: &["A landing page"],
            expected: &[(&["completed"], "I wrote index.html.", 0)],
        },
        Case {
            id: "approval-nobody-answers",
            scenario: Some(json!({"sdk": {"turns": [{"steps": [
                {"tool_calls": [{"name": "write", "needs_approval": true,
                                 "arguments": {"file_path": "x.txt", "content": "x"}}]},
                {"text": "could not write"}]}]}})),
            prompts: &["write x"],
            expected: &[(&["completed"], "could not write", 0)],
        },
    ]
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("examples")
}

/// The clients: (name, interpreter, script).
fn clients() -> Vec<(&'static str, &'static str, PathBuf)> {
    vec![
        (
            "python",
            "python3",
            examples().join("sdk-client-python/dsh_sdk_client.py"),
        ),
        (
            "node",
            "node",
            examples().join("sdk-client-node/dsh-sdk-client.mjs"),
        ),
    ]
}

fn available(interpreter: &str) -> bool {
    let found = Command::new(interpreter)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        eprintln!("skipped: {interpreter} is not on PATH");
    }
    found
}

/// Runs one client on one case; `Err` says how the report differs from the expectation.
fn run_case(interpreter: &str, script: &Path, case: &Case, mutant: &str) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let runtime = json!([fake_dsh::locate::binary("fake-dsh"), "--profile", "sdk"]);
    let mut command = Command::new(interpreter);
    command
        .arg(script)
        .args(case.prompts)
        .current_dir(dir.path())
        .env("DSH_SDK_COMMAND", runtime.to_string())
        .env("DSH_HOME", dir.path().join("dsh-home"))
        .env("DSH_SDK_TIMEOUT", "5")
        .env("DSH_SDK_CLIENT_MUTANT", mutant)
        .env("FAKE_DSH_WATCHDOG_SECS", "60")
        .env_remove("FAKE_DSH_SCENARIO");
    if let Some(scenario) = &case.scenario {
        let file = dir.path().join("scenario.json");
        std::fs::write(&file, scenario.to_string()).unwrap();
        command.env("FAKE_DSH_SCENARIO", file);
    }
    let output = dsh_conformance::check_runtime::output_within(
        command,
        Stdio::null(),
        Duration::from_secs(60),
    )
    .map_err(|e| format!("could not run: {e:?}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let reports: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).map_err(|e| format!("{line:?}: {e}")))
        .collect::<Result<_, _>>()?;
    let expected: Vec<Value> = case
        .expected
        .iter()
        .map(
            |(ends, text, children)| json!({"turn_ends": ends, "text": text, "children": children}),
        )
        .collect();
    let got: Vec<Value> = reports
        .iter()
        .map(|r| json!({"turn_ends": r["turn_ends"], "text": r["text"], "children": r["children"]}))
        .collect();
    if output.status.code() != Some(0) || got != expected {
        return Err(format!(
            "exit {:?}, reported {got:?}, expected {expected:?}; stderr: {}",
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(())
}

#[test]
fn both_example_clients_pass_every_case_against_fake_dsh() {
    let mut failures = Vec::new();
    for (name, interpreter, script) in clients() {
        if !available(interpreter) {
            continue;
        }
        for case in cases() {
            if let Err(why) = run_case(interpreter, &script, &case, "") {
                failures.push(format!("{name} {}: {why}", case.id));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn every_buggy_python_client_fails_at_least_one_case() {
    if !available("python3") {
        return;
    }
    let script = examples().join("sdk-client-python/dsh_sdk_client.py");
    for mutant in [
        "settle-on-response",
        "drop-early-notifications",
        "ignore-children",
    ] {
        let killed_by: Vec<&str> = cases()
            .iter()
            .filter(|case| run_case("python3", &script, case, mutant).is_err())
            .map(|case| case.id)
            .collect();
        eprintln!("kill matrix: {mutant} killed by {killed_by:?}");
        assert!(!killed_by.is_empty(), "mutant {mutant} passes every case");
    }
}
