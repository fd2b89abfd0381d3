//! JUnit XML for CI test-report renderers: one `testsuite` per host x runtime variant, one
//! `testcase` per case (classname = the case's area), rule ids as properties.
//!
//! Verdict mapping: `fail`, `xpass`, `untestable` -> `<failure>`; `error` (the kit's fault) ->
//! `<error>`; `skipped` and `xfail` -> `<skipped>` (as pytest writes xfail); `pass`, `non-strict`
//! and `informational` pass, the latter two with a `<system-out>` note.

use super::escape::{xml_attr, xml_text};
use super::table::rerun_command;
use crate::model::{CaseResult, SuiteReport, Verdict};
use std::io::{self, Write};

/// The case's area: the first dot-separated segment of its id.
pub fn area_of(case_id: &str) -> &str {
    case_id.split('.').next().unwrap_or(case_id)
}

fn seconds(duration_ms: u64) -> String {
    format!("{}.{:03}", duration_ms / 1000, duration_ms % 1000)
}

#[derive(Default)]
struct Counts {
    tests: usize,
    failures: usize,
    errors: usize,
    skipped: usize,
    duration_ms: u64,
}

impl Counts {
    fn of(report: &SuiteReport) -> Counts {
        let mut counts = Counts {
            duration_ms: report.duration_ms,
            ..Counts::default()
        };
        for case in &report.cases {
            counts.tests += 1;
            match case.verdict {
                verdict if verdict.is_failure() => counts.failures += 1,
                Verdict::Error => counts.errors += 1,
                Verdict::Skipped | Verdict::Xfail => counts.skipped += 1,
                _ => {}
            }
        }
        counts
    }

    fn add(&mut self, other: &Counts) {
        self.tests += other.tests;
        self.failures += other.failures;
        self.errors += other.errors;
        self.skipped += other.skipped;
        self.duration_ms += other.duration_ms;
    }

    fn attributes(&self) -> String {
        format!(
            "tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{}\"",
            self.tests,
            self.failures,
            self.errors,
            self.skipped,
            seconds(self.duration_ms)
        )
    }
}

/// `rule: why`, the one-line message of a failure.
fn message(case: &CaseResult) -> String {
    let rule = case.rule.as_deref().unwrap_or("(no rule)");
    match &case.why {
        Some(why) => format!("{rule}: {why}"),
        None => rule.to_string(),
    }
}

fn property(out: &mut dyn Write, indent: &str, name: &str, value: &str) -> io::Result<()> {
    writeln!(
        out,
        "{indent}<property name=\"{}\" value=\"{}\"/>",
        xml_attr(name),
        xml_attr(value)
    )
}

/// The body of a failure or error: the message, the re-run command, the transcript excerpt.
fn failure_body(report: &SuiteReport, case: &CaseResult) -> String {
    let mut body = format!(
        "{}\nre-run: {}\n",
        message(case),
        rerun_command(report, &case.id)
    );
    if !case.transcript.is_empty() {
        body.push_str("transcript:\n");
        for line in &case.transcript {
            body.push_str(line);
            body.push('\n');
        }
    }
    body
}

fn write_case(report: &SuiteReport, case: &CaseResult, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "    <testcase name=\"{}\" classname=\"{}\" time=\"{}\">",
        xml_attr(&case.id),
        xml_attr(area_of(&case.id)),
        seconds(case.duration_ms)
    )?;
    writeln!(out, "      <properties>")?;
    let indent = "        ";
    property(out, indent, "verdict", case.verdict.as_str())?;
    property(out, indent, "blame", super::blame_name(case.blame))?;
    if let Some(rule) = &case.rule {
        property(out, indent, "failed_rule", rule)?;
    }
    for rule in &case.rules {
        property(out, indent, "rule", rule)?;
    }
    for section in &case.spec {
        property(out, indent, "spec_section", section)?;
    }
    if let Some(entry) = &case.interpretation {
        property(out, indent, "interpretation", entry)?;
    }
    if !case.flaky.is_empty() {
        let seen: Vec<&str> = case.flaky.iter().map(|verdict| verdict.as_str()).collect();
        property(out, indent, "flaky", &seen.join(","))?;
    }
    writeln!(out, "      </properties>")?;
    let message = message(case);
    match case.verdict {
        verdict if verdict.is_failure() => writeln!(
            out,
            "      <failure message=\"{}\" type=\"{}\">{}</failure>",
            xml_attr(&message),
            verdict.as_str(),
            xml_text(&failure_body(report, case))
        )?,
        Verdict::Error => writeln!(
            out,
            "      <error message=\"{}\" type=\"error\">{}</error>",
            xml_attr(&message),
            xml_text(&failure_body(report, case))
        )?,
        Verdict::Skipped => writeln!(
            out,
            "      <skipped message=\"{}\"/>",
            xml_attr(
                case.why
                    .as_deref()
                    .unwrap_or("a required capability was not claimed")
            )
        )?,
        Verdict::Xfail => writeln!(
            out,
            "      <skipped message=\"xfail: {}\"/>",
            xml_attr(&message)
        )?,
        Verdict::NonStrict | Verdict::Informational => {
            let mut note = format!("{}: {message}", case.verdict.as_str());
            if let Some(entry) = &case.interpretation {
                note.push_str(&format!(" (interpretation {entry})"));
            }
            writeln!(out, "      <system-out>{}</system-out>", xml_text(&note))?;
        }
        _ => {}
    }
    writeln!(out, "    </testcase>")
}

/// Writes one `testsuites` document with a `testsuite` per report, named `<host>/<variant>`.
pub fn write_junit_suites(reports: &[SuiteReport], out: &mut dyn Write) -> io::Result<()> {
    let mut total = Counts::default();
    for report in reports {
        total.add(&Counts::of(report));
    }
    writeln!(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>")?;
    writeln!(
        out,
        "<testsuites name=\"dsh-conformance\" {}>",
        total.attributes()
    )?;
    for report in reports {
        writeln!(
            out,
            "  <testsuite name=\"{}\" {}>",
            xml_attr(&format!("{}/{}", report.host.name, report.runtime_variant)),
            Counts::of(report).attributes()
        )?;
        writeln!(out, "    <properties>")?;
        let indent = "      ";
        property(out, indent, "kit_version", &report.kit_version)?;
        property(out, indent, "corpus_hash", &report.corpus_hash)?;
        property(out, indent, "host", &report.host.name)?;
        property(
            out,
            indent,
            "host_command",
            &super::escape::shell_join(&report.host.command),
        )?;
        property(out, indent, "runtime_variant", &report.runtime_variant)?;
        writeln!(out, "    </properties>")?;
        for case in &report.cases {
            write_case(report, case, out)?;
        }
        writeln!(out, "  </testsuite>")?;
    }
    writeln!(out, "</testsuites>")
}

/// Writes the JUnit XML of one suite.
pub fn write_junit(report: &SuiteReport, out: &mut dyn Write) -> io::Result<()> {
    write_junit_suites(std::slice::from_ref(report), out)
}
