//! `dsh-conformance diff`: exit 1 exactly on a regression (a case newly failing, or a cell that
//! could no longer run), 0 otherwise, 2 on unreadable or schema-invalid input naming the file.

use crate::report_support;

use assert_cmd::Command;
use dsh_report::diff::{diff, ChangeKind};
use dsh_report::document::{ReportDocument, SuiteError};
use dsh_results::model::{SuiteReport, Verdict};
use report_support::{passing_suite, renamed, sample_suite};
use std::path::{Path, PathBuf};

fn report_of(suites: Vec<SuiteReport>, errors: Vec<SuiteError>) -> ReportDocument {
    ReportDocument::new(Vec::new(), suites, errors, Vec::new())
}

fn write(dir: &Path, name: &str, document: &ReportDocument) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(document).unwrap()).unwrap();
    path
}

struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run_diff(base: &Path, new: &Path, format: &str) -> Outcome {
    let output = Command::new(dsh_test_support::binary("dsh-conformance"))
        .args(["diff", "--format", format])
        .arg(base)
        .arg(new)
        .output()
        .unwrap();
    Outcome {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
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
fn identical_reports_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    let base = write(
        dir.path(),
        "base.json",
        &report_of(vec![sample_suite()], Vec::new()),
    );
    let outcome = run_diff(&base, &base, "text");
    assert_eq!(outcome.code, Some(0), "{}", outcome.stderr);
    assert_eq!(
        outcome.stdout,
        "0 new failures, 0 fixed, 0 changed, 0 added, 0 removed: no regression\n"
    );
}

#[test]
fn a_new_failure_exits_1_and_is_listed_by_cell_and_case() {
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
    assert_eq!(outcome.code, Some(1));
    assert_eq!(
        outcome.stdout,
        "reference / default:\n  new failure  events.text-delta  pass -> fail  (s6.session-before-content: expected failed, got completed)\n\
         1 new failure, 0 fixed, 0 changed, 0 added, 0 removed: REGRESSION\n"
    );
    assert_eq!(
        run_diff(&base, &new, "table").stdout,
        outcome.stdout,
        "`text` is `table`"
    );
    let jsonl = run_diff(&base, &new, "jsonl");
    assert_eq!(jsonl.code, Some(1));
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
    assert_eq!(markdown.code, Some(1));
    assert!(markdown.stdout.contains("**Regression**"));
    assert!(markdown
        .stdout
        .contains("| new failure | `reference` | `default` | `events.text-delta` | pass | fail |"));
}

#[test]
fn fixes_and_changes_that_fail_nothing_exit_0() {
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
    assert_eq!(outcome.code, Some(0), "{}", outcome.stdout);
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
    assert_eq!(outcome.code, Some(1), "{}", outcome.stderr);
    assert!(outcome
        .stdout
        .contains("new failure  cancel.grandchild-ignores-sigterm  pass -> fail"));
}

#[test]
fn unreadable_or_invalid_input_exits_2_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(
        dir.path(),
        "good.json",
        &report_of(vec![sample_suite()], Vec::new()),
    );
    let not_json = dir.path().join("not-json.json");
    std::fs::write(&not_json, "{\"v\":1,\n  oops").unwrap();
    let outcome = run_diff(&good, &not_json, "text");
    assert_eq!(outcome.code, Some(2));
    assert!(
        outcome.stderr.contains("not-json.json:2:"),
        "{}",
        outcome.stderr
    );
    assert!(outcome.stdout.is_empty());

    let mut invalid = serde_json::to_value(report_of(vec![sample_suite()], Vec::new())).unwrap();
    invalid["suites"][0]["cases"][2]["verdict"] = serde_json::json!("green");
    let invalid_path = dir.path().join("invalid.json");
    std::fs::write(&invalid_path, invalid.to_string()).unwrap();
    let outcome = run_diff(&invalid_path, &good, "text");
    assert_eq!(outcome.code, Some(2));
    assert!(
        outcome
            .stderr
            .contains("invalid.json: not valid as a report"),
        "{}",
        outcome.stderr
    );
    assert!(
        outcome.stderr.contains("/suites/0/cases/2/verdict"),
        "{}",
        outcome.stderr
    );

    let missing = dir.path().join("missing.json");
    let outcome = run_diff(&good, &missing, "text");
    assert_eq!(outcome.code, Some(2));
    assert!(
        outcome.stderr.contains("missing.json: cannot read"),
        "{}",
        outcome.stderr
    );
}
