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

/// A case names every rule it broke, not only its verdict's: a host with two bugs that each break
/// their own global rule in the same run shows both in the JSON report, the JUnit XML and the
/// Markdown summary.
#[test]
fn a_case_lists_every_rule_two_bugs_break() {
    let scratch = tempfile::tempdir().expect("temp dir");
    let out = |name: &str| scratch.path().join(name);
    let output = Command::new(dsh_test_support::binary("dsh-conformance"))
        .arg("run")
        .arg("--host-arg")
        .arg(dsh_test_support::binary("dsh-host-mutant-driver"))
        .arg("--host-arg=--mutant=log-prompt-to-stderr,execute-before-ready")
        .arg("--fake-dsh")
        .arg(dsh_test_support::binary("fake-dsh"))
        .arg("--fixtures")
        .arg(repo_root().join("fixtures"))
        .args(["--case", "lifecycle.first-run-new-session", "--jobs", "1"])
        .arg("--json")
        .arg(out("suite.json"))
        .arg("--junit")
        .arg(out("junit.xml"))
        .arg("--markdown")
        .arg(out("summary.md"))
        .output()
        .expect("dsh-conformance runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    let rules = ["s7.validate-ready", "s14.no-prompt-in-stderr"];
    let read = |name: &str| std::fs::read_to_string(out(name)).expect("output written");
    let report: Value = serde_json::from_str(&read("suite.json")).expect("suite JSON parses");
    let case = &report["cases"][0];
    assert_eq!(case["verdict"], "fail", "{case}");
    let mut broken: Vec<&str> = case["also_broken"]
        .as_array()
        .expect("also_broken listed")
        .iter()
        .map(|other| {
            assert!(other["why"].as_str().is_some_and(|why| !why.is_empty()));
            assert!(other.get("interpretation").is_none(), "strict: {other}");
            other["rule"].as_str().expect("a rule id")
        })
        .collect();
    broken.push(case["rule"].as_str().expect("the verdict's rule"));
    for rule in rules {
        assert!(broken.contains(&rule), "{rule} not among {broken:?}");
    }
    let (junit, markdown) = (read("junit.xml"), read("summary.md"));
    for rule in rules {
        assert!(junit.contains(rule), "JUnit lacks {rule}:\n{junit}");
        assert!(
            markdown.contains(rule),
            "Markdown lacks {rule}:\n{markdown}"
        );
    }
    assert!(junit.contains("name=\"also_broken\""), "{junit}");
    assert!(
        junit.contains("also broken:"),
        "the failure body lists them: {junit}"
    );
    assert!(markdown.contains("also broken:"), "{markdown}");
}

/// The outcome of a crash in the middle of a save is judged, not the way the host writes: a host
/// that rewrites its mapping in place (`save-in-place`) is only `informational` on I-C28's
/// mechanism check (`resume.crash-after-save`) but fails `resume.crash-mid-save` strictly, where
/// the driver is crashed part-way through that rewrite and the conversation must still resume;
/// the reference host (a temp file renamed over the old one) passes both.
#[test]
fn a_crash_mid_save_fails_an_in_place_writer_strictly() {
    let scratch = tempfile::tempdir().expect("temp dir");
    let verdicts = |mutant: &str| {
        let json_path = scratch.path().join(format!("{mutant}.json"));
        let output = Command::new(dsh_test_support::binary("dsh-conformance"))
            .arg("run")
            .arg("--host-arg")
            .arg(dsh_test_support::binary("dsh-host-mutant-driver"))
            .arg(format!("--host-arg=--mutant={mutant}"))
            .arg("--fake-dsh")
            .arg(dsh_test_support::binary("fake-dsh"))
            .arg("--fixtures")
            .arg(repo_root().join("fixtures"))
            .args(["--case", "resume.crash-*-save", "--jobs", "2", "--json"])
            .arg(&json_path)
            .output()
            .expect("dsh-conformance runs");
        let report: Value =
            serde_json::from_slice(&std::fs::read(&json_path).expect("suite JSON written"))
                .unwrap_or_else(|e| panic!("{e}\n{}", String::from_utf8_lossy(&output.stdout)));
        let mut seen: Vec<(String, String, String)> = report["cases"]
            .as_array()
            .expect("cases")
            .iter()
            .map(|case| {
                let text = |member: &str| case[member].as_str().unwrap_or("-").to_string();
                (text("id"), text("verdict"), text("rule"))
            })
            .collect();
        seen.sort();
        seen
    };
    let owned = |rows: &[(&str, &str, &str)]| -> Vec<(String, String, String)> {
        rows.iter()
            .map(|(id, verdict, rule)| (id.to_string(), verdict.to_string(), rule.to_string()))
            .collect()
    };
    // No mutant switched on: the reference host.
    assert_eq!(
        verdicts(""),
        owned(&[
            ("resume.crash-after-save", "pass", "-"),
            ("resume.crash-mid-save", "pass", "-"),
        ])
    );
    assert_eq!(
        verdicts("save-in-place"),
        owned(&[
            (
                "resume.crash-after-save",
                "informational",
                "s7.conversation-one-session"
            ),
            (
                "resume.crash-mid-save",
                "fail",
                "s7.conversation-one-session"
            ),
        ])
    );
}
