//! JUnit XML for CI test-report renderers: one `testsuite` per host x runtime variant, one
//! `testcase` per case (classname = the case's area), rule ids as properties. The XML itself is
//! written by `quick-junit`; every string first goes through [`xml_chars`] so the characters XML
//! forbids (a host's escape sequences, NUL, U+FFFE, U+FFFF) stay visible as `\u{..}` instead of
//! being dropped, and the written document goes through it once more, so none ever reaches the
//! file, whatever the verdict.
//!
//! Verdict mapping: `fail`, `xpass`, `untestable` -> `<failure>`; `error` (the kit's fault) ->
//! `<error>`; `skipped` and `xfail` -> `<skipped>` (as pytest writes xfail); `pass`, `non-strict`
//! and `informational` pass, the latter two with a `<system-out>` note. Every rule a case broke
//! besides its verdict's rule is an `also_broken` property (`rule (strict): why`) and a line in
//! the failure body or note.

use super::escape::{terminal, xml_chars};
use super::table::rerun_command;
use crate::model::{CaseResult, SuiteReport, Verdict};
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};
use std::io::{self, Write};
use std::time::Duration;

/// The case's area: the first dot-separated segment of its id.
pub fn area_of(case_id: &str) -> &str {
    case_id.split('.').next().unwrap_or(case_id)
}

/// `rule: why`, the one-line message of a failure (line breaks and escapes shown as `\u{..}`).
fn message(case: &CaseResult) -> String {
    let rule = case.rule.as_deref().unwrap_or("(no rule)");
    match &case.why {
        Some(why) => terminal(&format!("{rule}: {why}")),
        None => terminal(rule),
    }
}

/// A property whose value keeps every character visible (quick-junit drops what XML forbids).
fn property(name: &str, value: &str) -> Property {
    Property::new(name, xml_chars(value))
}

/// The body of a failure or error: the message, the re-run command, the transcript excerpt.
fn failure_body(report: &SuiteReport, case: &CaseResult) -> String {
    let mut body = format!(
        "{}\nre-run: {}\n",
        message(case),
        rerun_command(report, &case.id)
    );
    body.push_str(&also_broken_lines(case));
    if !case.transcript.is_empty() {
        body.push_str("transcript:\n");
        for line in &case.transcript {
            body.push_str(line);
            body.push('\n');
        }
    }
    xml_chars(&body)
}

/// `also broken:` and one line per other broken rule (`rule (strict): why`), or nothing.
fn also_broken_lines(case: &CaseResult) -> String {
    if case.also_broken.is_empty() {
        return String::new();
    }
    let mut lines = "also broken:\n".to_string();
    for broken in &case.also_broken {
        lines.push_str(&format!("  {}\n", terminal(&broken.line())));
    }
    lines
}

fn case_properties(case: &CaseResult) -> Vec<Property> {
    let mut properties = vec![
        property("verdict", case.verdict.as_str()),
        property("blame", super::blame_name(case.blame)),
    ];
    if let Some(rule) = &case.rule {
        properties.push(property("failed_rule", rule));
    }
    properties.extend(case.rules.iter().map(|rule| property("rule", rule)));
    properties.extend(
        case.spec
            .iter()
            .map(|section| property("spec_section", section)),
    );
    if let Some(entry) = &case.interpretation {
        properties.push(property("interpretation", entry));
    }
    properties.extend(
        case.also_broken
            .iter()
            .map(|broken| property("also_broken", &terminal(&broken.line()))),
    );
    if !case.flaky.is_empty() {
        let seen: Vec<&str> = case.flaky.iter().map(|verdict| verdict.as_str()).collect();
        properties.push(property("flaky", &seen.join(",")));
    }
    properties
}

/// The verdict as a JUnit status (see the module doc), and a `<system-out>` note if any.
fn status(report: &SuiteReport, case: &CaseResult) -> (TestCaseStatus, Option<String>) {
    let non_success = |kind: NonSuccessKind, ty: &str| {
        let mut status = TestCaseStatus::non_success(kind);
        status
            .set_message(message(case))
            .set_type(ty)
            .set_description(failure_body(report, case));
        status
    };
    let skipped = |text: String| {
        let mut status = TestCaseStatus::skipped();
        status.set_message(text);
        status
    };
    match case.verdict {
        verdict if verdict.is_failure() => {
            (non_success(NonSuccessKind::Failure, verdict.as_str()), None)
        }
        Verdict::Error => (non_success(NonSuccessKind::Error, "error"), None),
        Verdict::Skipped => {
            let why = case.why.as_deref();
            (
                skipped(terminal(
                    why.unwrap_or("a required capability was not claimed"),
                )),
                None,
            )
        }
        Verdict::Xfail => (skipped(format!("xfail: {}", message(case))), None),
        Verdict::Interrupted => (skipped(format!("interrupted: {}", message(case))), None),
        Verdict::NonStrict | Verdict::Informational => {
            let mut note = format!("{}: {}", case.verdict.as_str(), message(case));
            if let Some(entry) = &case.interpretation {
                note.push_str(&format!(" (interpretation {entry})"));
            }
            note.push('\n');
            note.push_str(&also_broken_lines(case));
            (TestCaseStatus::success(), Some(xml_chars(note.trim_end())))
        }
        _ => (TestCaseStatus::success(), None),
    }
}

fn test_case(report: &SuiteReport, case: &CaseResult) -> TestCase {
    let (status, note) = status(report, case);
    let mut test_case = TestCase::new(xml_chars(&case.id), status);
    test_case
        .set_classname(xml_chars(area_of(&case.id)))
        .set_time(Duration::from_millis(case.duration_ms))
        .add_properties(case_properties(case));
    if let Some(note) = note {
        test_case.set_system_out(note);
    }
    test_case
}

fn test_suite(report: &SuiteReport) -> TestSuite {
    let name = format!("{}/{}", report.host.name, report.runtime_variant);
    let mut suite = TestSuite::new(xml_chars(&name));
    suite
        .set_time(Duration::from_millis(report.duration_ms))
        .add_properties([
            property("kit_version", &report.kit_version),
            property("corpus_hash", &report.corpus_hash),
            property("host", &report.host.name),
            property(
                "host_command",
                &super::secrets::display_command(&report.host.command),
            ),
            property("runtime_variant", &report.runtime_variant),
        ])
        .add_properties(report.corpus.iter().flat_map(|corpus| {
            [
                property("corpus_source", &corpus.source),
                property("corpus_sha256", &corpus.hash),
                property("corpus_cases", &corpus.cases.to_string()),
                property("corpus_embedded", &corpus.embedded.to_string()),
            ]
        }))
        .add_test_cases(report.cases.iter().map(|case| test_case(report, case)));
    suite
}

/// Writes one `testsuites` document with a `testsuite` per report, named `<host>/<variant>`.
pub fn write_junit_suites(reports: &[SuiteReport], out: &mut dyn Write) -> io::Result<()> {
    let mut document = Report::new("dsh-conformance");
    document
        .set_time(Duration::from_millis(
            reports.iter().map(|report| report.duration_ms).sum(),
        ))
        .add_test_suites(reports.iter().map(test_suite));
    let xml = document
        .to_string()
        .map_err(|error| io::Error::other(format!("writing JUnit XML: {error}")))?;
    // Whatever a string above missed, no character XML 1.0 forbids reaches the file (markup is
    // made of allowed characters only, so this changes nothing but host text).
    let xml = xml_chars(&xml);
    out.write_all(xml.as_bytes())?;
    if !xml.ends_with('\n') {
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// Writes the JUnit XML of one suite.
pub fn write_junit(report: &SuiteReport, out: &mut dyn Write) -> io::Result<()> {
    write_junit_suites(std::slice::from_ref(report), out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Blame, BrokenRule, HostInfo};

    /// Every verdict's case, with the characters XML 1.0 forbids (U+FFFE, U+FFFF, NUL, ESC) in
    /// every string a host controls (issue 40 item 6).
    fn hostile_suite() -> SuiteReport {
        let bad = "\u{fffe}x\u{ffff}y\u{0}\u{1b}";
        let case = |n: usize, verdict: Verdict| CaseResult {
            id: format!("area{bad}.case-{n}"),
            summary: format!("summary {bad}"),
            spec: vec![format!("s{bad}")],
            rules: vec![format!("rule{bad}")],
            verdict,
            blame: Blame::Host,
            rule: Some(format!("rule{bad}")),
            why: Some(format!("the host said {bad}")),
            interpretation: Some(format!("I-{bad}")),
            duration_ms: 1,
            transcript: vec![format!("line {bad}")],
            flaky: Vec::new(),
            also_broken: vec![BrokenRule {
                rule: format!("other{bad}"),
                why: format!("why {bad}"),
                interpretation: None,
            }],
        };
        let verdicts = [
            Verdict::Pass,
            Verdict::NonStrict,
            Verdict::Fail,
            Verdict::Skipped,
            Verdict::Informational,
            Verdict::Xfail,
            Verdict::Xpass,
            Verdict::Untestable,
            Verdict::Error,
            Verdict::Interrupted,
        ];
        SuiteReport {
            kit_version: "0.1.0".into(),
            corpus_hash: "abc".into(),
            host: HostInfo {
                name: format!("host{bad}"),
                command: vec![format!("driver{bad}")],
                handshake: serde_json::Value::Null,
            },
            runtime_variant: format!("variant{bad}"),
            cases: verdicts
                .into_iter()
                .enumerate()
                .map(|(n, verdict)| case(n, verdict))
                .collect(),
            duration_ms: 1,
            rerun_args: vec![format!("--fixtures={bad}")],
            corpus: None,
            surface: None,
            dialect: None,
            rerun_as: None,
        }
    }

    #[test]
    fn no_character_xml_forbids_reaches_the_document_whatever_the_verdict() {
        let mut bytes = Vec::new();
        write_junit(&hostile_suite(), &mut bytes).unwrap();
        let xml = String::from_utf8(bytes).unwrap();
        let forbidden: Vec<char> = xml
            .chars()
            .filter(|c| !super::super::escape::is_xml_char(*c))
            .collect();
        assert!(forbidden.is_empty(), "{forbidden:?} in {xml}");
        assert!(xml.contains("\\u{fffe}x\\u{ffff}y"), "{xml}");
        let parsed = Report::deserialize_from_str(&xml).expect("well-formed JUnit XML");
        assert_eq!(parsed.tests, 10);
    }
}
