//! `diff` of two reports: a regression exactly when a case newly fails or a cell could no longer
//! run; unreadable or schema-invalid input is an error naming the file. (The command's exit
//! codes and `--format` names are the CLI's test: `conformance/tests/it/report_cli.rs`.)

use crate::support;

use dsh_report::diff::{diff, write_jsonl, write_markdown, write_text, ChangeKind};
use dsh_report::document::{load_document, ReportDocument, SuiteError};
use dsh_results::model::{SuiteReport, Verdict};
use std::path::{Path, PathBuf};
use support::{passing_suite, renamed, sample_suite};

fn report_of(suites: Vec<SuiteReport>, errors: Vec<SuiteError>) -> ReportDocument {
    ReportDocument::new(Vec::new(), suites, errors, Vec::new())
}

fn write(dir: &Path, name: &str, document: &ReportDocument) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(document).unwrap()).unwrap();
    path
}

/// What `diff` found: `regression` (`None`: a report could not be loaded, `error` says why) and
/// the comparison rendered in the format asked.
struct Outcome {
    regression: Option<bool>,
    stdout: String,
    error: String,
}

/// Both files loaded with [`load_document`], compared, and rendered as `format` (`text`,
/// `markdown`, `json` or `jsonl`).
fn run_diff(base: &Path, new: &Path, format: &str) -> Outcome {
    let loaded = load_document(base).and_then(|base| Ok((base, load_document(new)?)));
    let (base, new) = match loaded {
        Ok(pair) => pair,
        Err(error) => {
            return Outcome {
                regression: None,
                stdout: String::new(),
                error,
            }
        }
    };
    let result = diff(&base, &new);
    let mut out = Vec::new();
    match format {
        "text" => write_text(&result, &mut out).unwrap(),
        "markdown" => write_markdown(&result, &mut out).unwrap(),
        "jsonl" => write_jsonl(&result, &mut out).unwrap(),
        "json" => serde_json::to_writer_pretty(&mut out, &result).unwrap(),
        other => panic!("no diff format {other}"),
    }
    Outcome {
        regression: Some(result.is_regression()),
        stdout: String::from_utf8(out).unwrap(),
        error: String::new(),
    }
}

fn with_verdict(mut suite: SuiteReport, id: &str, verdict: Verdict) -> SuiteReport {
    let case = suite.cases.iter_mut().find(|case| case.id == id).unwrap();
    case.verdict = verdict;
    if verdict.is_failure() {
        case.rule = Some("s6.session-before-content".to_string());
        case.why = Some("expected failed, got completed".to_string());
    }
    suite
}

#[test]
fn identical_reports_are_no_regression() {
    let dir = tempfile::tempdir().unwrap();
    let base = write(
        dir.path(),
        "base.json",
        &report_of(vec![sample_suite()], Vec::new()),
    );
    let outcome = run_diff(&base, &base, "text");
    assert_eq!(outcome.regression, Some(false), "{}", outcome.error);
    assert_eq!(
        outcome.stdout,
        "0 new failures, 0 fixed, 0 changed, 0 added, 0 removed: no regression\n"
    );
}

#[test]
fn a_new_failure_regresses_and_is_listed_by_cell_and_case() {
    let dir = tempfile::tempdir().unwrap();
    let base = write(
        dir.path(),
        "base.json",
        &report_of(vec![passing_suite()], Vec::new()),
    );
    let new_suite = with_verdict(passing_suite(), "events.text-delta", Verdict::Fail);
    let new = write(
        dir.path(),
        "new.json",
        &report_of(vec![new_suite], Vec::new()),
    );
    let outcome = run_diff(&base, &new, "text");
    assert_eq!(outcome.regression, Some(true));
    assert_eq!(
        outcome.stdout,
        "reference / default:\n  new failure  events.text-delta  pass -> fail  (s6.session-before-content: expected failed, got completed)\n\
         1 new failure, 0 fixed, 0 changed, 0 added, 0 removed: REGRESSION\n"
    );
    let jsonl = run_diff(&base, &new, "jsonl");
    assert_eq!(jsonl.regression, Some(true));
    let lines: Vec<serde_json::Value> = jsonl
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON object per line"))
        .collect();
    assert_eq!(
        lines.len(),
        2,
        "one change, then the summary: {}",
        jsonl.stdout
    );
    assert_eq!(lines[0]["change"], "case");
    assert_eq!(lines[1]["summary"]["regression"], true);
    let markdown = run_diff(&base, &new, "markdown");
    assert_eq!(markdown.regression, Some(true));
    assert!(markdown.stdout.contains("**Regression**"));
    assert!(markdown
        .stdout
        .contains("| new failure | `reference` | `default` | `events.text-delta` | pass | fail |"));
}

#[test]
fn fixes_and_changes_that_fail_nothing_are_no_regression() {
    let dir = tempfile::tempdir().unwrap();
    let base = write(
        dir.path(),
        "base.json",
        &report_of(vec![sample_suite()], Vec::new()),
    );
    let mut fixed = sample_suite();
    fixed
        .cases
        .retain(|case| case.id != "setup.tampered-bundle");
    let fixed = with_verdict(fixed, "cancel.grandchild-ignores-sigterm", Verdict::Pass);
    let fixed = with_verdict(fixed, "resume.corrupt-target", Verdict::Pass);
    let new = write(dir.path(), "new.json", &report_of(vec![fixed], Vec::new()));
    let outcome = run_diff(&base, &new, "json");
    assert_eq!(outcome.regression, Some(false), "{}", outcome.stdout);
    let listed: serde_json::Value = serde_json::from_str(&outcome.stdout).unwrap();
    let kinds: Vec<(&str, &str)> = listed["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|change| {
            (
                change["id"].as_str().unwrap(),
                change["kind"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("resume.corrupt-target", "changed"),
            ("cancel.grandchild-ignores-sigterm", "fixed"),
            ("setup.tampered-bundle", "removed")
        ]
    );
}

#[test]
fn added_cases_regress_only_when_they_fail() {
    let base = report_of(vec![passing_suite()], Vec::new());
    let mut grown = passing_suite();
    let mut extra = grown.cases[0].clone();
    extra.id = "framing.nul-byte".to_string();
    grown.cases.push(extra.clone());
    let result = diff(&base, &report_of(vec![grown.clone()], Vec::new()));
    assert_eq!(result.cases.len(), 1);
    assert_eq!(result.cases[0].kind, ChangeKind::Added);
    assert!(!result.is_regression());
    let failing = with_verdict(grown, "framing.nul-byte", Verdict::Untestable);
    let result = diff(&base, &report_of(vec![failing], Vec::new()));
    assert_eq!(result.cases[0].kind, ChangeKind::NewFailure);
    assert!(result.is_regression());
}

#[test]
fn verdict_changes_within_a_side_are_changes_not_regressions() {
    let base = report_of(vec![sample_suite()], Vec::new());
    // fail -> xpass: both failures, so a change; pass -> xfail: neither fails a run.
    let new = with_verdict(
        sample_suite(),
        "cancel.grandchild-ignores-sigterm",
        Verdict::Xpass,
    );
    let new = with_verdict(new, "events.text-delta", Verdict::Xfail);
    let result = diff(&base, &report_of(vec![new], Vec::new()));
    assert!(
        result
            .cases
            .iter()
            .all(|change| change.kind == ChangeKind::Changed),
        "{result:#?}"
    );
    assert_eq!(result.cases.len(), 2);
    assert!(!result.is_regression());
}

#[test]
fn cells_are_matched_by_host_and_variant() {
    let base = report_of(
        vec![
            renamed(passing_suite(), "reference", "dsh-0.1.7-rc.1"),
            renamed(passing_suite(), "node", "dsh-0.1.7-rc.1"),
        ],
        Vec::new(),
    );
    let lost = SuiteError {
        host: "node".to_string(),
        variant: "dsh-0.1.7-rc.1".to_string(),
        message: "driver exited during handshake".to_string(),
    };
    let new = report_of(
        vec![
            renamed(passing_suite(), "reference", "dsh-0.1.7-rc.1"),
            renamed(sample_suite(), "reference", "dsh-0.1.8"),
        ],
        vec![lost],
    );
    let result = diff(&base, &new);
    let cells: Vec<(&str, &str, &str)> = result
        .cells
        .iter()
        .map(|cell| (cell.host.as_str(), cell.variant.as_str(), cell.kind))
        .collect();
    assert_eq!(
        cells,
        [
            ("node", "dsh-0.1.7-rc.1", "lost"),
            ("reference", "dsh-0.1.8", "added")
        ]
    );
    assert!(
        result.is_regression(),
        "a cell that can no longer run hides whatever it would show"
    );
    let new_failures = result
        .cases
        .iter()
        .filter(|change| change.kind == ChangeKind::NewFailure)
        .count();
    assert_eq!(new_failures, 4, "the added cell's failing cases");
}

#[test]
fn a_single_run_json_is_accepted_on_either_side() {
    let dir = tempfile::tempdir().unwrap();
    let suite_path = dir.path().join("run.json");
    std::fs::write(
        &suite_path,
        serde_json::to_string(&passing_suite()).unwrap(),
    )
    .unwrap();
    let report = write(
        dir.path(),
        "report.json",
        &report_of(vec![sample_suite()], Vec::new()),
    );
    let outcome = run_diff(&suite_path, &report, "text");
    assert_eq!(outcome.regression, Some(true), "{}", outcome.error);
    assert!(outcome
        .stdout
        .contains("new failure  cancel.grandchild-ignores-sigterm  pass -> fail"));
}

#[test]
fn unreadable_or_invalid_input_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(
        dir.path(),
        "good.json",
        &report_of(vec![sample_suite()], Vec::new()),
    );
    let not_json = dir.path().join("not-json.json");
    std::fs::write(&not_json, "{\"v\":1,\n  oops").unwrap();
    let outcome = run_diff(&good, &not_json, "text");
    assert_eq!(outcome.regression, None);
    assert!(
        outcome.error.contains("not-json.json:2:"),
        "{}",
        outcome.error
    );
    assert!(outcome.stdout.is_empty());

    let mut invalid = serde_json::to_value(report_of(vec![sample_suite()], Vec::new())).unwrap();
    invalid["suites"][0]["cases"][2]["verdict"] = serde_json::json!("green");
    let invalid_path = dir.path().join("invalid.json");
    std::fs::write(&invalid_path, invalid.to_string()).unwrap();
    let outcome = run_diff(&invalid_path, &good, "text");
    assert_eq!(outcome.regression, None);
    assert!(
        outcome
            .error
            .contains("invalid.json: not valid as a report"),
        "{}",
        outcome.error
    );
    assert!(
        outcome.error.contains("/suites/0/cases/2/verdict"),
        "{}",
        outcome.error
    );

    let missing = dir.path().join("missing.json");
    let outcome = run_diff(&good, &missing, "text");
    assert_eq!(outcome.regression, None);
    assert!(
        outcome.error.contains("missing.json: cannot read"),
        "{}",
        outcome.error
    );
}
