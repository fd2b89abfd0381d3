//! Snapshots of the `run` outputs (terminal table, Markdown, JUnit, JSON) for a fixed suite, and
//! their structural guarantees: schema-valid JSON, escaped XML, sanitised terminal text.

use crate::support;

use dsh_report::document::{schema_errors, SchemaPart};
use dsh_results::model::SuiteReport;
use dsh_results::output::{self, TableOptions};
use support::sample_suite;

fn render(write: impl Fn(&SuiteReport, &mut dyn std::io::Write) -> std::io::Result<()>) -> String {
    let mut bytes = Vec::new();
    write(&sample_suite(), &mut bytes).expect("writing to a Vec cannot fail");
    String::from_utf8(bytes).expect("outputs are UTF-8")
}

#[test]
fn table_snapshot() {
    let table = render(|report, out| output::write_table(report, &TableOptions::default(), out));
    insta::assert_snapshot!("table", table);
}

#[test]
fn table_is_ascii_control_free_without_colour_and_coloured_when_asked() {
    let plain =
        render(|report, out| output::write_table(report, &TableOptions { color: false }, out));
    assert!(
        !plain.contains('\u{1b}'),
        "no escape byte may reach the terminal uncoloured"
    );
    assert!(plain.lines().all(|line| !line.contains('\r')));
    assert!(
        plain.contains("\\u{1b}[31mred"),
        "the host's escape sequence is shown, not obeyed"
    );
    let coloured =
        render(|report, out| output::write_table(report, &TableOptions { color: true }, out));
    assert!(coloured.contains("\u{1b}[32mpass"));
    assert!(coloured.contains("\u{1b}[1m\u{1b}[31mfail"));
}

#[test]
fn table_ends_with_the_summary_line_and_a_rerun_per_failure() {
    let table = render(|report, out| output::write_table(report, &TableOptions::default(), out));
    assert_eq!(
        table.lines().last(),
        Some("12 cases: 3 pass, 1 non-strict, 1 informational, 1 skipped, 1 xfail, 1 error, 4 fail (1 xpass, 1 untestable)")
    );
    let reruns: Vec<&str> = table
        .lines()
        .filter(|line| line.trim_start().starts_with("re-run:"))
        .collect();
    assert_eq!(reruns.len(), 5, "fail x2, xpass, untestable, error");
    assert!(reruns.iter().map(|line| line.trim_start()).any(|line| line
        == "re-run: dsh-conformance run --host 'dsh-host-driver '\\''--log level=debug'\\''' --case cancel.grandchild-ignores-sigterm --verbose"));
}

#[test]
fn summary_line_of_an_empty_suite_still_names_pass_and_fail() {
    let mut suite = sample_suite();
    suite.cases.clear();
    assert_eq!(output::summary_line(&suite), "0 cases: 0 pass, 0 fail");
}

#[test]
fn markdown_snapshot() {
    insta::assert_snapshot!("markdown", render(output::write_markdown));
}

#[test]
fn junit_snapshot() {
    insta::assert_snapshot!("junit", render(output::write_junit));
}

#[test]
fn junit_escapes_everything_the_host_controls() {
    let xml = render(output::write_junit);
    assert!(!xml.contains("<script>"));
    assert!(
        xml.contains("&lt;script&gt;alert(&apos;x&apos;)&lt;/script&gt;"),
        "attribute and text form"
    );
    // Read back, the failure holds the host's text as it was, its escapes visible.
    let parsed = quick_junit::Report::deserialize_from_str(&xml).expect("well-formed JUnit XML");
    let case = parsed.test_suites[0]
        .test_cases
        .iter()
        .find(|case| case.name.as_str() == "strict.session-before-content")
        .expect("the hostile case");
    match &case.status {
        quick_junit::TestCaseStatus::NonSuccess {
            message,
            description,
            ..
        } => {
            let message = message.as_deref().unwrap_or_default();
            assert!(
                message
                    .contains("got <script>alert('x')</script> | \"completed\" & \\u{1b}[31mred"),
                "{message}"
            );
            let description = description.as_deref().unwrap_or_default();
            assert!(
                description.contains("re-run: dsh-conformance run --host"),
                "{description}"
            );
            assert!(
                description.contains("\"delta\":\"</script><img src=x>\""),
                "{description}"
            );
        }
        other => panic!("not a failure: {other:?}"),
    }
    assert!(
        !xml.contains('\u{1b}'),
        "XML 1.0 forbids ESC; it is written as text"
    );
    assert!(xml.contains("classname=\"cancel\""));
    assert!(xml.contains("<property name=\"rule\" value=\"s10.force-kill\"/>"));
    let opened = xml.matches("<testcase ").count();
    assert_eq!(opened, 12);
    assert_eq!(xml.matches("</testcase>").count(), opened);
    assert_eq!(
        (parsed.tests, parsed.failures, parsed.errors, parsed.skipped),
        (12, 4, 1, 2),
        "fail/xpass/untestable fail, the kit's error errs, skipped and xfail skip"
    );
}

#[test]
fn json_snapshot_and_schema() {
    let json = render(output::write_json);
    let value: serde_json::Value = serde_json::from_str(&json).expect("write_json writes JSON");
    assert_eq!(
        schema_errors(&value, SchemaPart::Suite),
        Vec::<String>::new()
    );
    let back: SuiteReport = serde_json::from_value(value.clone()).expect("round-trips");
    assert_eq!(back, sample_suite());
    insta::assert_json_snapshot!("json", redact_durations(value));
}

/// Durations vary between real runs; the snapshot keeps only their presence.
fn redact_durations(mut value: serde_json::Value) -> serde_json::Value {
    value["duration_ms"] = serde_json::json!("[duration]");
    for case in value["cases"].as_array_mut().into_iter().flatten() {
        case["duration_ms"] = serde_json::json!("[duration]");
    }
    value
}

#[test]
fn the_suite_schema_rejects_what_the_model_cannot_mean() {
    let mut value = serde_json::to_value(sample_suite()).unwrap();
    value["cases"][0]["verdict"] = serde_json::json!("passed");
    value["cases"][1]["id"] = serde_json::json!("No Dots");
    value["host"]["command"] = serde_json::json!([]);
    let errors = schema_errors(&value, SchemaPart::Suite);
    assert_eq!(errors.len(), 3, "{errors:#?}");
    assert!(errors
        .iter()
        .any(|error| error.starts_with("/cases/0/verdict")));
    assert!(errors.iter().any(|error| error.starts_with("/cases/1/id")));
    assert!(errors
        .iter()
        .any(|error| error.starts_with("/host/command")));
}
