//! `dsh-conformance lint` end to end: it lints both corpora (the host cases and the client
//! corpus) of a copy of the real one, exits 0 clean, 1 with problems, 2 without a corpus, writes
//! the rules table, and finds the interpretations beside the corpus from any directory. The
//! host corpus's lint rules are dsh-host-corpus's own test (`host-corpus/tests/it/corpus_lint.rs`).

use assert_cmd::Command;
use dsh_test_support::corpus_copy::CorpusCopy;
use std::fs;

#[test]
fn the_cli_exits_0_clean_1_with_problems_2_without_a_dir() {
    let clean = CorpusCopy::new();
    Command::cargo_bin("dsh-conformance")
        .unwrap()
        .args(["lint", "--fixtures"])
        .arg(&clean.fixtures)
        .assert()
        .code(0)
        .stdout(predicates::str::starts_with("ok: "));

    let broken = CorpusCopy::new();
    let id = "strict.duplicate-session";
    let mut case = broken.read(id);
    case["rules"] = serde_json::json!(["s6.not-a-rule"]);
    broken.write(&broken.case_path(id), &case);
    Command::cargo_bin("dsh-conformance")
        .unwrap()
        .args(["lint", "--fixtures"])
        .arg(&broken.fixtures)
        .assert()
        .code(1)
        .stdout(predicates::str::contains("rule s6.not-a-rule is not in"));

    let empty = tempfile::tempdir().unwrap();
    Command::cargo_bin("dsh-conformance")
        .unwrap()
        .args(["lint", "--fixtures"])
        .arg(empty.path().join("missing"))
        .assert()
        .code(2);
}

#[test]
fn the_cli_writes_the_rules_table() {
    let copy = CorpusCopy::new();
    let target = copy.fixtures.parent().unwrap().join("rules.md");
    Command::cargo_bin("dsh-conformance")
        .unwrap()
        .args(["lint", "--fixtures"])
        .arg(&copy.fixtures)
        .arg("--write-rules-md")
        .arg(&target)
        .assert()
        .code(0);
    let table = fs::read_to_string(&target).unwrap();
    assert!(table.contains("## Section 6"), "{table}");
    assert!(table.contains("`strict.session-before-content`"), "{table}");
    assert!(table.contains("untestable: "), "{table}");
}

#[test]
fn the_cli_finds_interpretations_next_to_the_corpus_from_any_directory() {
    let elsewhere = tempfile::tempdir().unwrap();
    let copy = CorpusCopy::new();
    Command::cargo_bin("dsh-conformance")
        .unwrap()
        .current_dir(elsewhere.path())
        .args(["lint", "--fixtures"])
        .arg(&copy.fixtures)
        .assert()
        .code(0)
        .stdout(predicates::str::starts_with("ok: "));

    let interpretations = copy
        .fixtures
        .parent()
        .unwrap()
        .join("docs/interpretations.md");
    fs::remove_file(&interpretations).unwrap();
    Command::cargo_bin("dsh-conformance")
        .unwrap()
        .current_dir(elsewhere.path())
        .args(["lint", "--fixtures"])
        .arg(&copy.fixtures)
        .assert()
        .code(1)
        .stdout(predicates::str::contains(
            interpretations.display().to_string(),
        ));
}
