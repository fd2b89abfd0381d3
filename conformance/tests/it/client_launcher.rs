//! The client corpus's runtime launcher (docs/sdk-clients.md, "The driver contract"; issue 31
//! item 4): a client that starts the runtime it is given by its one path, passing it only an
//! allowlisted environment (PATH, HOME, DSH_HOME, the key, DEEPSEEK_BASE_URL: production
//! practice) still configures fake-dsh, and passes every case; a client whose runtime never got
//! the case's configuration is told exactly that under the configuration rule, and no other rule
//! is blamed. A client whose interpreter is missing is skipped, saying so.

use crate::node_support::repo_root;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(surface: &str, host: &str, extra: &[&str]) -> Output {
    run_in(None, surface, host, extra)
}

/// `run` with the case dirs (and so the launcher's path) under `tmpdir` when given.
fn run_in(tmpdir: Option<&Path>, surface: &str, host: &str, extra: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_dsh-conformance"));
    if let Some(dir) = tmpdir {
        command.env("TMPDIR", dir);
    }
    command
        .args([
            "run",
            "--surface",
            surface,
            "--format",
            "json",
            "--host",
            host,
        ])
        .arg("--fake-dsh")
        .arg(dsh_test_support::binary("fake-dsh"))
        .args(extra)
        .current_dir(repo_root())
        .output()
        .unwrap()
}

/// The Python expression of the environment a production client gives its runtime.
const ALLOWLIST: &str = "env={k: v for k, v in os.environ.items() if k in \
     (\"PATH\", \"HOME\", \"DSH_HOME\", \"DEEPSEEK_API_KEY\", \"DEEPSEEK_BASE_URL\")}";

/// The example client `script` with its runtime's `Popen` given only [`ALLOWLIST`], written
/// into `dir`: `popen_args` must occur exactly once in it (else the example changed and this
/// test must follow).
fn allowlisted(script: &str, popen_args: &str, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(repo_root().join(script)).unwrap();
    assert_eq!(
        text.matches(popen_args).count(),
        1,
        "{script}: {popen_args:?} must occur exactly once"
    );
    let path = dir.join(Path::new(script).file_name().unwrap());
    std::fs::write(
        &path,
        text.replacen(popen_args, &format!("{popen_args}, {ALLOWLIST}"), 1),
    )
    .unwrap();
    path
}

fn cases(output: &Output) -> Vec<Value> {
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&output.stderr)));
    report["cases"].as_array().unwrap().clone()
}

#[test]
fn a_client_passing_only_an_allowlisted_environment_passes_every_case() {
    if !dsh_test_support::tool_available("python3") {
        dsh_test_support::skip("python3 is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let clients = [
        (
            "sdk",
            "examples/sdk-client-python/dsh_sdk_client.py",
            "stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL",
        ),
        (
            "headless",
            "examples/headless-client-python/dsh_headless_client.py",
            "stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE",
        ),
    ];
    for (surface, script, popen_args) in clients {
        let client = allowlisted(script, popen_args, dir.path());
        let output = run(surface, &format!("python3 {}", client.display()), &[]);
        let cases = cases(&output);
        let failed: Vec<String> = cases
            .iter()
            .filter(|case| case["verdict"] != "pass")
            .map(|case| format!("{}: {} {}", case["id"], case["rule"], case["why"]))
            .collect();
        assert!(failed.is_empty(), "{script}: {failed:#?}");
        assert!(cases.len() >= 6, "{script}: {}", cases.len());
        assert_eq!(output.status.code(), Some(0), "{script}");
    }
}

/// The launcher's path and the values it carries hold every character a shell minds (a quote,
/// `$`, a backquote, a newline: the case dirs are made under this `TMPDIR`), and reach fake-dsh
/// unchanged: the scenario is played, the journal written, the key found only where it belongs.
#[test]
fn a_launcher_under_a_hostile_temp_path_still_configures_the_runtime() {
    if !dsh_test_support::tool_available("python3") {
        dsh_test_support::skip("python3 is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let hostile = dir.path().join("it's a \"$dir\" `x`\nand a line");
    std::fs::create_dir(&hostile).unwrap();
    let client = allowlisted(
        "examples/sdk-client-python/dsh_sdk_client.py",
        "stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL",
        dir.path(),
    );
    let output = run_in(
        Some(&hostile),
        "sdk",
        &format!("python3 {}", client.display()),
        &[
            "--case",
            "sdk.receipt-before-response",
            "--case",
            "sdk.sigterm-mid-turn",
            "--case",
            "sdk.key-only-in-env",
        ],
    );
    let cases = cases(&output);
    assert_eq!(cases.len(), 3);
    for case in &cases {
        assert_eq!(case["verdict"], "pass", "{case}");
    }
    assert_eq!(output.status.code(), Some(0));
}

/// Each client reports what the case expects (or fails as it expects) but its runtime never got
/// the case's configuration: it never starts one, or starts fake-dsh itself with only the
/// journal's variable, so it plays the default agent instead of the case's scenario. Each case
/// fails under the configuration rule alone, saying so.
#[test]
fn a_runtime_the_configuration_never_reached_is_said_under_its_own_rule_alone() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dsh_test_support::binary("fake-dsh");
    let sdk_report = r#"{"turn_ends": ["completed"], "text": "I wrote index.html."}"#;
    let clients = [
        (
            "never-starts-it",
            "sdk",
            format!("echo '{sdk_report}'\necho '{sdk_report}'"),
            "fake-dsh's journal of the case was never written",
        ),
        (
            "starts-fake-dsh-itself",
            "sdk",
            format!(
                "env -i PATH=\"$PATH\" FAKE_DSH_JOURNAL=\"$FAKE_DSH_JOURNAL\" '{}' --profile sdk \
                 </dev/null >/dev/null 2>&1\necho '{sdk_report}'\necho '{sdk_report}'",
                fake.display()
            ),
            "started without FAKE_DSH_WATCHDOG_SECS, DSH_CONFORMANCE_CASE",
        ),
        (
            "never-starts-it",
            "headless",
            r#"echo '{"ok": true, "text": "Autumn moon rises", "error": null}'"#.to_string(),
            "fake-dsh's journal of the case was never written",
        ),
    ];
    for (name, surface, body, said) in clients {
        let client = dir.path().join(format!("{surface}-{name}"));
        std::fs::write(&client, format!("#!/bin/sh\n{body}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&client, std::fs::Permissions::from_mode(0o755)).unwrap();
        let selection: &[&str] = if surface == "sdk" {
            &[
                "--case",
                "sdk.receipt-before-response",
                "--case",
                "sdk.sigterm-mid-turn",
            ]
        } else {
            &["--case", "headless.completed"]
        };
        let output = run(surface, client.to_str().unwrap(), selection);
        assert_eq!(output.status.code(), Some(1), "{surface} {name}");
        let cases = cases(&output);
        assert_eq!(cases.len(), selection.len() / 2, "{surface} {name}");
        for case in cases {
            assert_eq!(case["verdict"], "fail", "{surface} {name}: {case}");
            assert_eq!(
                case["rule"],
                format!("{surface}.start-the-given-runtime"),
                "{surface} {name}: {case}"
            );
            let why = case["why"].as_str().unwrap();
            assert!(
                why.starts_with("the configuration did not reach the runtime: ")
                    && why.contains(said),
                "{surface} {name}: {why}"
            );
            assert!(
                case["also_broken"]
                    .as_array()
                    .is_none_or(|others| others.is_empty()),
                "{surface} {name}: no other rule is blamed: {case}"
            );
        }
    }
}
