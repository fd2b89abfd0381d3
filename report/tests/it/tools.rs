//! `merge` and `summary` through the library, on shards of the fixed suite: two shards of one
//! run merge into that run (which `diff` then finds no regression against), a case in two shards
//! or shards of another corpus are refused, a variant cell missing from the candidate regresses
//! unless removed cells are allowed, and `summary` names every failing case with its re-run line.
//! (The commands on real `run --shard` results are the CLI's test:
//! `conformance/tests/it/report_tools.rs`.)

use crate::support::{passing_suite, renamed, sample_suite};

use dsh_report::diff::diff;
use dsh_report::document::ReportDocument;
use dsh_report::tools::{merge, merge_files, write_summary};
use dsh_results::model::SuiteReport;

fn document(suites: Vec<SuiteReport>) -> ReportDocument {
    ReportDocument::new(Vec::new(), suites, Vec::new(), Vec::new())
}

/// The sample suite cut in two: the first `at` cases, and the rest.
fn shards(at: usize) -> (SuiteReport, SuiteReport) {
    let whole = sample_suite();
    let (mut one, mut two) = (whole.clone(), whole);
    one.cases.truncate(at);
    two.cases.drain(..at);
    (one, two)
}

fn ids(suite: &SuiteReport) -> Vec<&str> {
    suite.cases.iter().map(|case| case.id.as_str()).collect()
}

#[test]
fn two_shards_merge_into_the_whole_run_sorted_by_case_id() {
    let (one, two) = shards(5);
    let merged = merge(vec![document(vec![one]), document(vec![two])]).unwrap();
    assert_eq!(merged.suites.len(), 1, "one cell");
    let mut expected: Vec<String> = sample_suite().cases.into_iter().map(|c| c.id).collect();
    expected.sort();
    assert_eq!(ids(&merged.suites[0]), expected);
    let whole = document(vec![sample_suite()]);
    let result = diff(&whole, &merged);
    assert!(!result.is_regression(), "{result:#?}");
    assert!(result.cases.is_empty(), "{result:#?}");
}

#[test]
fn a_case_in_two_shards_or_a_shard_of_another_corpus_is_refused() {
    let (one, _) = shards(5);
    let error = merge(vec![
        document(vec![one.clone()]),
        document(vec![one.clone()]),
    ])
    .unwrap_err();
    assert!(error.contains("is in two shards"), "{error}");
    assert!(error.contains("discovery.tested-version"), "{error}");
    let mut other = shards(5).1;
    other.corpus_hash = "0".repeat(64);
    let error = merge(vec![document(vec![one]), document(vec![other])]).unwrap_err();
    assert!(error.contains("ran another corpus or kit"), "{error}");
}

#[test]
fn merge_files_writes_the_merged_report_and_names_an_unreadable_shard() {
    let dir = tempfile::tempdir().unwrap();
    let (one, two) = shards(7);
    let paths: Vec<_> = [("one.json", one), ("two.json", two)]
        .into_iter()
        .map(|(name, suite)| {
            let path = dir.path().join(name);
            std::fs::write(&path, serde_json::to_string(&suite).unwrap()).unwrap();
            path
        })
        .collect();
    let out = dir.path().join("merged.json");
    let merged = merge_files(&paths, &out).unwrap();
    let written: ReportDocument =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(written, merged);
    assert_eq!(merged.case_count(), sample_suite().cases.len());
    let missing = dir.path().join("missing.json");
    let error = merge_files(&[paths[0].clone(), missing], &dir.path().join("x.json")).unwrap_err();
    assert!(error.contains("missing.json"), "{error}");
    assert!(!dir.path().join("x.json").exists(), "nothing is written");
}

#[test]
fn a_variant_cell_missing_from_the_candidate_regresses_unless_allowed() {
    let both = merge(vec![
        document(vec![passing_suite()]),
        document(vec![renamed(passing_suite(), "reference", "dsh-0.1.8")]),
    ])
    .unwrap();
    assert_eq!(both.suites.len(), 2);
    let mut result = diff(&both, &document(vec![passing_suite()]));
    assert!(
        result.is_regression(),
        "a removed cell regresses by default"
    );
    result.removed_cell_regresses = false;
    assert!(!result.is_regression(), "unless removed cells are allowed");
}

#[test]
fn summary_counts_each_cell_and_lists_every_failing_case_with_its_rerun() {
    let mut text = Vec::new();
    write_summary(&document(vec![sample_suite()]), &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with("reference / default: 12 cases: 3 pass"),
        "{text}"
    );
    let failing = sample_suite()
        .cases
        .iter()
        .filter(|case| case.verdict.is_failure())
        .count();
    assert_eq!(
        text.matches("    re-run: dsh-conformance run").count(),
        failing,
        "{text}"
    );
    assert!(
        text.contains("--case cancel.grandchild-ignores-sigterm"),
        "{text}"
    );
    assert!(
        !text.contains('\u{1b}'),
        "the host's escapes are shown, not obeyed"
    );
    assert!(document(vec![sample_suite()]).has_failures());
    assert!(!document(vec![passing_suite()]).has_failures());
}
