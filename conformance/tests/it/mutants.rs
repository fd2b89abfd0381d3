//! The kill matrix stays honest: every mutant of the reference host (`dsh-host-mutant-driver
//! --mutant <name>`, built only with the host's test-only `mutants` feature) has an entry in docs/kill-matrix.json, each entry names at least one case, and the cases it names still
//! fail against that mutant (while the corpus test shows they pass against the correct host).
//! `cargo xtask mutants` regenerates the file from a full corpus run per mutant.

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// How many of a mutant's recorded killers are re-run here (all of them in `cargo xtask mutants`).
const KILLERS_CHECKED: usize = 3;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the conformance crate lives inside the workspace")
        .to_path_buf()
}

fn kill_matrix() -> serde_json::Map<String, Value> {
    let path = repo_root().join("docs/kill-matrix.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run `cargo xtask mutants`)", path.display()));
    let matrix: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    matrix["mutants"]
        .as_object()
        .cloned()
        .expect("kill-matrix.json has a `mutants` object")
}

fn driver_mutants() -> BTreeSet<String> {
    let output = Command::new(dsh_test_support::binary("dsh-host-mutant-driver"))
        .arg("--list-mutants")
        .output()
        .expect("dsh-host-mutant-driver runs");
    assert!(output.status.success(), "--list-mutants failed");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_once('\t').map(|(name, _)| name.to_string()))
        .collect()
}

#[test]
fn every_mutant_has_a_kill_matrix_entry() {
    let recorded: BTreeSet<String> = kill_matrix().keys().cloned().collect();
    assert!(
        driver_mutants().len() >= 15,
        "the gallery has at least 15 mutants"
    );
    assert_eq!(
        recorded,
        driver_mutants(),
        "docs/kill-matrix.json is stale: run `cargo xtask mutants`"
    );
}

#[test]
fn recorded_cases_still_catch_each_mutant() {
    let root = repo_root();
    let scratch = tempfile::tempdir().expect("temp dir");
    let mut uncaught = Vec::new();
    for (mutant, entry) in kill_matrix() {
        let killers: Vec<&str> = entry["killed_by"]
            .as_array()
            .map(|ids| ids.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        assert!(
            !killers.is_empty(),
            "no case catches mutant {mutant}: a hole in the corpus"
        );
        let checked = &killers[..killers.len().min(KILLERS_CHECKED)];
        let json_path = scratch.path().join(format!("{mutant}.json"));
        let mut run = Command::new(dsh_test_support::binary("dsh-conformance"));
        run.arg("run")
            .arg("--host-arg")
            .arg(dsh_test_support::binary("dsh-host-mutant-driver"))
            .arg(format!("--host-arg=--mutant={mutant}"))
            .arg("--fake-dsh")
            .arg(dsh_test_support::binary("fake-dsh"))
            .arg("--fixtures")
            .arg(root.join("fixtures"))
            .arg("--json")
            .arg(&json_path)
            .args(["--jobs", "2"]);
        for id in checked {
            run.arg("--case").arg(id);
        }
        let output = run.output().expect("dsh-conformance runs");
        assert_eq!(
            output.status.code(),
            Some(1),
            "mutant {mutant}: expected failing cases\n{}",
            String::from_utf8_lossy(&output.stdout)
        );
        let report: Value =
            serde_json::from_slice(&std::fs::read(&json_path).expect("suite JSON written"))
                .expect("suite JSON parses");
        for case in report["cases"].as_array().into_iter().flatten() {
            let verdict = case["verdict"].as_str().unwrap_or_default();
            if !matches!(verdict, "fail" | "untestable" | "xpass") {
                uncaught.push(format!("{mutant}: {} is {verdict}", case["id"]));
            }
        }
    }
    assert!(
        uncaught.is_empty(),
        "recorded killers no longer catch their mutant (run `cargo xtask mutants`):\n{}",
        uncaught.join("\n")
    );
}
