//! The host corpus's lint: the real corpus is clean, and broken copies of it are caught, through
//! the library. (`dsh-conformance lint`, which lints both corpora, is the CLI's test:
//! `conformance/tests/it/lint_cli.rs`.)

use dsh_engine::corpus::LintError;
use dsh_host_corpus::corpus;
use dsh_test_support::corpus_copy::CorpusCopy;
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};

fn real_fixtures() -> PathBuf {
    dsh_test_support::workspace_root().join("fixtures")
}

/// The lint's findings on `copy`.
fn lint(copy: &CorpusCopy) -> Vec<LintError> {
    corpus::lint(&copy.fixtures)
}

fn problems(errors: &[LintError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Exactly one problem, naming `file` and containing `needle`.
fn assert_one_problem(errors: &[LintError], file: &Path, needle: &str) {
    let matching: Vec<&LintError> = errors
        .iter()
        .filter(|e| e.problem.contains(needle))
        .collect();
    assert_eq!(
        matching.len(),
        1,
        "expected one problem containing {needle:?}, got:\n{}",
        problems(errors)
    );
    assert_eq!(matching[0].file, file, "{}", matching[0]);
}

#[test]
fn the_real_corpus_lints_clean() {
    // The client corpus beside it is linted by `dsh-conformance lint` (the CLI's test).
    let errors = corpus::lint(&real_fixtures());
    assert!(
        errors.is_empty(),
        "the corpus has lint problems:\n{}",
        problems(&errors)
    );
}

#[test]
fn the_real_corpus_is_big_enough_and_covers_the_harness_rules() {
    let (cases, errors) = corpus::load_cases(&real_fixtures());
    assert!(errors.is_empty(), "{}", problems(&errors));
    assert!(
        cases.len() >= 120,
        "issue 5 asks for at least 120 cases, found {}",
        cases.len()
    );
    let rules = corpus::load_rules(&real_fixtures()).unwrap();
    for harness_rule in [
        "s7.new-process-per-turn",
        "s6.execute-shape",
        "s8.execute-cwd-model-prompt",
        "s10.process-tree-reaped",
        "s14.no-credential-leak",
        "s14.no-prompt-in-stderr",
        "s14.stderr-bounded",
        "s6.driver-reply-valid",
    ] {
        assert!(
            rules.iter().any(|rule| rule.id == harness_rule),
            "rules.json lacks {harness_rule}"
        );
    }
    let untestable = rules
        .iter()
        .filter(|rule| rule.untestable_reason.is_some())
        .count();
    assert!(
        untestable * 10 < rules.len(),
        "{untestable} of {} rules are untestable",
        rules.len()
    );
}

#[test]
fn a_duplicate_id_is_caught() {
    let copy = CorpusCopy::new();
    let original = copy.case_path("strict.session-before-content");
    let twin = copy
        .fixtures
        .join("strict")
        .join("strict.session-before-content.twin.json");
    fs::copy(&original, &twin).unwrap();
    let errors = lint(&copy);
    assert_one_problem(
        &errors,
        &twin,
        "duplicate case id strict.session-before-content",
    );
    assert_one_problem(&errors, &twin, "file name must be the id plus .json");
}

#[test]
fn an_unknown_rule_is_caught() {
    let copy = CorpusCopy::new();
    let id = "strict.duplicate-session";
    let mut case = copy.read(id);
    case["rules"]
        .as_array_mut()
        .unwrap()
        .push(Value::from("s6.no-such-rule"));
    copy.write(&copy.case_path(id), &case);
    assert_one_problem(
        &lint(&copy),
        &copy.case_path(id),
        "rule s6.no-such-rule is not in",
    );
}

#[test]
fn an_uncovered_rule_is_caught() {
    let copy = CorpusCopy::new();
    let rules_file = copy.fixtures.join("rules.json");
    let mut catalog = copy.read_file(&rules_file);
    catalog["rules"].as_array_mut().unwrap().push(serde_json::json!({
        "id": "s6.brand-new-sentence", "section": "6", "kind": "normative", "text": "A sentence no case covers."
    }));
    copy.write(&rules_file, &catalog);
    assert_one_problem(
        &lint(&copy),
        &rules_file,
        "rule s6.brand-new-sentence has no case",
    );
}

#[test]
fn an_untestable_rule_needs_no_case() {
    let copy = CorpusCopy::new();
    let rules_file = copy.fixtures.join("rules.json");
    let mut catalog = copy.read_file(&rules_file);
    catalog["rules"].as_array_mut().unwrap().push(serde_json::json!({
        "id": "s6.only-a-daemon-shows-this", "section": "6", "kind": "normative", "text": "Daemon-only.",
        "untestable_reason": "needs the real daemon"
    }));
    copy.write(&rules_file, &catalog);
    let errors = lint(&copy);
    assert!(errors.is_empty(), "{}", problems(&errors));
}

#[test]
fn a_schema_violation_is_caught_with_its_path() {
    let copy = CorpusCopy::new();
    let id = "cancel.honoured-scripted";
    let mut case = copy.read(id);
    case["steps"][0]["expect"]["status"] = Value::from("finished");
    case["surprise"] = Value::from(true);
    copy.write(&copy.case_path(id), &case);
    let errors = lint(&copy);
    let file_errors: Vec<&LintError> = errors
        .iter()
        .filter(|e| e.file == copy.case_path(id))
        .collect();
    assert!(
        file_errors.iter().any(|e| e.problem.contains("/steps/0")),
        "{}",
        problems(&errors)
    );
    assert!(
        file_errors.iter().any(|e| e.problem.contains("surprise")),
        "{}",
        problems(&errors)
    );
    assert!(
        file_errors
            .iter()
            .all(|e| e.problem.contains("fixture.schema.json")),
        "{}",
        problems(&errors)
    );
}

#[test]
fn a_case_in_the_wrong_area_is_caught() {
    let copy = CorpusCopy::new();
    let id = "events.usage-fields";
    let moved = copy.fixtures.join("strict").join(format!("{id}.json"));
    fs::rename(copy.case_path(id), &moved).unwrap();
    assert_one_problem(&lint(&copy), &moved, "must live in fixtures/events/");
}

#[test]
fn an_unknown_interpretation_is_caught() {
    let copy = CorpusCopy::new();
    let id = "framing.bom-mid-stream";
    let mut case = copy.read(id);
    case["steps"][0]["expect"]["interpretations"] = serde_json::json!({"code": "I-ZZ99"});
    copy.write(&copy.case_path(id), &case);
    assert_one_problem(
        &lint(&copy),
        &copy.case_path(id),
        "interpretation I-ZZ99 is not an entry",
    );
}

#[test]
fn a_file_that_is_not_json_is_caught() {
    let copy = CorpusCopy::new();
    let broken = copy.fixtures.join("framing").join("framing.broken.json");
    fs::write(&broken, "{\"v\": 1,\n").unwrap();
    assert_one_problem(&lint(&copy), &broken, "not JSON");
}

#[test]
fn an_invalid_rule_catalog_is_caught() {
    let copy = CorpusCopy::new();
    let rules_file = copy.fixtures.join("rules.json");
    fs::write(
        &rules_file,
        r#"{"v":1,"rules":[{"id":"s6.x","section":"6","kind":"maybe","text":"t"}]}"#,
    )
    .unwrap();
    let errors = lint(&copy);
    assert_one_problem(&errors, &rules_file, "does not match rules.schema.json");
}

#[test]
fn the_checked_in_rules_table_is_current() {
    let rules = corpus::load_rules(&real_fixtures()).unwrap();
    let (cases, _) = corpus::load_cases(&real_fixtures());
    let expected = corpus::rules_markdown(&rules, &cases);
    let actual = fs::read_to_string(dsh_test_support::workspace_root().join("docs/rules.md"))
        .unwrap_or_default();
    assert!(
        actual == expected,
        "docs/rules.md is stale: run `dsh-conformance lint --write-rules-md docs/rules.md`"
    );
}
