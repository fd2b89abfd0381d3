//! The client kill matrix (docs/sdk-clients.md and docs/surface-acp.md, "Kill matrix"): each
//! deliberately buggy variant of an example client in `examples/client-mutants.json` (and of an
//! ACP example client in `examples/acp-client-mutants.json`) (the example with its `replace` edits)
//! fails every strict case its entry names, through `dsh-conformance run --surface ...`; an entry
//! whose `find` text no longer occurs exactly once in its example fails here first, so the matrix
//! cannot go stale silently. A client whose interpreter is missing is skipped, saying so.
//!
//! Its own test binary: each variant runs the CLI with a reduced time scale, and the hanging ones
//! take the whole (scaled) case limit.

use crate::node_support::repo_root;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn interpreter_of(client: &str) -> &'static str {
    if client.ends_with(".py") {
        "python3"
    } else {
        "node"
    }
}

/// The example with the mutant's edits, written into `dir`.
fn mutated(mutant: &Value, dir: &Path) -> PathBuf {
    let client = mutant["client"].as_str().unwrap();
    let mut text = std::fs::read_to_string(repo_root().join(client)).unwrap();
    for edit in mutant["replace"].as_array().unwrap() {
        let find = edit["find"].as_str().unwrap();
        assert_eq!(
            text.matches(find).count(),
            1,
            "{client} mutant {}: {find:?} must occur exactly once",
            mutant["name"]
        );
        text = text.replacen(find, edit["with"].as_str().unwrap(), 1);
    }
    let path = dir.join(Path::new(client).file_name().unwrap());
    std::fs::write(&path, text).unwrap();
    // An example on an npm SDK resolves it from beside the copy.
    let modules = repo_root().join(client).with_file_name("node_modules");
    if modules.is_dir() {
        std::os::unix::fs::symlink(modules, dir.join("node_modules")).unwrap();
    }
    path
}

/// The JSON report of the mutant's killing cases.
fn run_killers(mutant: &Value, script: &Path) -> Value {
    let client = mutant["client"].as_str().unwrap();
    let surface = if client.contains("headless") {
        "headless"
    } else if client.starts_with("examples/acp-client-") {
        "acp"
    } else {
        "sdk"
    };
    let mut command = Command::new(env!("CARGO_BIN_EXE_dsh-conformance"));
    command
        .args([
            "run",
            "--surface",
            surface,
            "--format",
            "json",
            "--time-scale",
            // acpx starts several Node processes a case: its bounds need room on a loaded machine.
            if client.contains("acpx") { "2" } else { "0.4" },
        ])
        .arg("--fixtures")
        .arg(repo_root().join("fixtures"))
        .arg("--fake-dsh")
        .arg(dsh_test_support::binary("fake-dsh"))
        .arg("--host")
        .arg(format!("{} {}", interpreter_of(client), script.display()));
    for case in mutant["killed_by"].as_array().unwrap() {
        command.args(["--case", case.as_str().unwrap()]);
    }
    let output = command.output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(1),
        "{client} mutant {}: exit {:?}\n{}",
        mutant["name"],
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Runs one mutant's killing cases and checks each failed (on the named rule, if any); false when
/// its interpreter is missing.
fn check_mutant(mutant: &Value, dir: &Path) -> bool {
    let client = mutant["client"].as_str().unwrap();
    if !dsh_test_support::tool_available(interpreter_of(client)) {
        return false;
    }
    if client.starts_with("examples/acp-client-") {
        let name = if client.ends_with(".py") {
            "python"
        } else if client.contains("acpx") {
            "acpx"
        } else {
            "typescript"
        };
        if !crate::acp_client_corpus::example_runs(name, interpreter_of(client)) {
            return false;
        }
    }
    let script = mutated(mutant, dir);
    let report = run_killers(mutant, &script);
    for case in report["cases"].as_array().unwrap() {
        let why = format!("{client} mutant {}: {case}", mutant["name"]);
        assert_eq!(case["verdict"], "fail", "{why}");
        if let Some(rule) = mutant.get("rule") {
            assert_eq!(&case["rule"], rule, "{why}");
        }
    }
    assert_eq!(
        report["cases"].as_array().unwrap().len(),
        mutant["killed_by"].as_array().unwrap().len(),
        "{client} mutant {}: every killing case ran",
        mutant["name"]
    );
    eprintln!(
        "killed: {client} {} by {}",
        mutant["name"], mutant["killed_by"]
    );
    true
}

#[test]
fn every_client_mutant_fails_the_cases_that_name_it() {
    // The SDK and headless clients' mutants, then the ACP clients'.
    let mut mutants = Vec::new();
    for file in [
        "examples/client-mutants.json",
        "examples/acp-client-mutants.json",
    ] {
        let text = std::fs::read_to_string(repo_root().join(file)).unwrap();
        let matrix: Value = serde_json::from_str(&text).unwrap();
        mutants.extend(matrix["mutants"].as_array().unwrap().iter().cloned());
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let killed = std::sync::atomic::AtomicUsize::new(0);
    // Two at a time: the hanging variants spend most of their limit asleep.
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                while let Some(mutant) =
                    mutants.get(next.fetch_add(1, std::sync::atomic::Ordering::SeqCst))
                {
                    let dir = tempfile::tempdir().unwrap();
                    if check_mutant(mutant, dir.path()) {
                        killed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                }
            });
        }
    });
    assert!(
        killed.into_inner() > 0 || !dsh_test_support::tool_available("python3"),
        "no mutant ran"
    );
}
