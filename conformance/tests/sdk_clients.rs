//! The example SDK clients (`examples/sdk-client-python`, `examples/sdk-client-node`) against
//! the SDK client corpus (`dsh-conformance run --surface sdk --host CMD`, cases in
//! `dsh_conformance::sdk_corpus`): both pass every case, through the CLI; and the kill matrix:
//! each deliberately buggy variant of each client (`DSH_SDK_CLIENT_MUTANT`) fails at least one
//! strict case. A client whose interpreter is missing is skipped, saying so.

use dsh_conformance::sdk_corpus::{cases, run_case, Setup, Strength};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("examples")
}

/// The clients: (interpreter, script).
fn clients() -> Vec<(&'static str, PathBuf)> {
    vec![
        (
            "python3",
            examples().join("sdk-client-python/dsh_sdk_client.py"),
        ),
        (
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

#[test]
fn both_example_clients_pass_the_client_corpus_through_the_cli() {
    for (interpreter, script) in clients() {
        if !available(interpreter) {
            continue;
        }
        let output = Command::new(env!("CARGO_BIN_EXE_dsh-conformance"))
            .args(["run", "--surface", "sdk", "--host"])
            .arg(format!("{interpreter} {}", script.display()))
            .arg("--fake-dsh")
            .arg(dsh_test_support::binary("fake-dsh"))
            .env("DSH_SDK_TIMEOUT", "10")
            .output()
            .unwrap();
        let table = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{interpreter}:\n{table}");
        assert_eq!(
            table.lines().filter(|l| l.starts_with("pass ")).count(),
            cases().len(),
            "{interpreter}: every case, informational ones too:\n{table}"
        );
    }
}

#[test]
fn every_buggy_client_fails_a_strict_case() {
    for (interpreter, script) in clients() {
        if !available(interpreter) {
            continue;
        }
        for mutant in [
            "settle-on-response",
            "drop-early-notifications",
            "ignore-children",
        ] {
            let setup = Setup {
                client: vec![interpreter.into(), script.to_string_lossy().into_owned()],
                fake_dsh: dsh_test_support::binary("fake-dsh"),
                limit: Duration::from_secs(60),
                env: vec![
                    ("DSH_SDK_CLIENT_MUTANT".into(), mutant.into()),
                    ("DSH_SDK_TIMEOUT".into(), "4".into()),
                ],
            };
            let killed_by: Vec<&str> = cases()
                .iter()
                .filter(|case| case.strength == Strength::Strict && run_case(&setup, case).is_err())
                .map(|case| case.id)
                .collect();
            eprintln!("kill matrix: {interpreter} {mutant} killed by {killed_by:?}");
            assert!(
                !killed_by.is_empty(),
                "{interpreter} mutant {mutant} passes every strict case"
            );
        }
    }
}

#[test]
fn a_client_that_cannot_start_fails_every_strict_case_and_the_run() {
    let output = Command::new(env!("CARGO_BIN_EXE_dsh-conformance"))
        .args(["run", "--surface", "sdk", "--host", "/nonexistent/client"])
        .arg("--fake-dsh")
        .arg(dsh_test_support::binary("fake-dsh"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(
        table.contains("FAIL  sdk.client.receipt-before-response"),
        "{table}"
    );
    let missing = Command::new(env!("CARGO_BIN_EXE_dsh-conformance"))
        .args(["run", "--surface", "sdk"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2), "no --host: could not run");
}
