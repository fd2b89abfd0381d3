//! A report fit for a committed baseline: two runs of the same code give the same report.json.
//! Passing cells keep no transcript; durations are dropped (0); what transcripts remain have
//! the volatile parts of a run (case temp roots, pids, process groups, sessions ids of the
//! process table, journal timestamps) replaced by fixed placeholders. `--full-transcripts`
//! skips all of this.

use super::document::ReportDocument;
use dsh_results::model::{SuiteReport, Verdict};

/// Applies the module's rules to every suite of the document.
pub fn make_stable(document: &mut ReportDocument) {
    for suite in &mut document.suites {
        stable_suite(suite);
    }
}

/// One suite: durations 0, passing transcripts dropped, the rest normalized.
pub fn stable_suite(suite: &mut SuiteReport) {
    suite.duration_ms = 0;
    let temp = std::env::temp_dir().display().to_string();
    for case in &mut suite.cases {
        case.duration_ms = 0;
        if case.verdict == Verdict::Pass {
            case.transcript.clear();
        } else {
            for line in &mut case.transcript {
                *line = stable_line(line, &temp);
            }
        }
    }
}

/// Numeric JSON members whose values differ on every run.
const VOLATILE_NUMBERS: [&str; 5] = [
    "\"pid\":",
    "\"ppid\":",
    "\"pgid\":",
    "\"sid\":",
    "\"t_ms\":",
];
/// The prefix of a case's temp root (after the temp dir).
const ROOT_PREFIX: &str = "/dsh-conformance-";

/// One transcript line with the run-specific parts replaced.
pub fn stable_line(line: &str, temp_dir: &str) -> String {
    let mut out = replace_roots(line, temp_dir.trim_end_matches('/'));
    for key in VOLATILE_NUMBERS {
        out = zero_numbers_after(&out, key);
    }
    out
}

/// `<tmp>/dsh-conformance-XXXXXX` (the random suffix: ASCII alphanumerics) -> `<case-root>`.
fn replace_roots(line: &str, temp_dir: &str) -> String {
    let needle = format!("{temp_dir}{ROOT_PREFIX}");
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find(&needle) {
        out.push_str(&rest[..at]);
        let after = &rest[at + needle.len()..];
        let suffix = after
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(after.len());
        out.push_str("<case-root>");
        rest = &after[suffix..];
    }
    out.push_str(rest);
    out
}

/// Every `key<digits>` -> `key0`.
fn zero_numbers_after(line: &str, key: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find(key) {
        out.push_str(&rest[..at + key.len()]);
        let after = &rest[at + key.len()..];
        let digits = after
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(after.len());
        if digits > 0 {
            out.push('0');
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volatile_parts_are_replaced() {
        let line = r#"journal: {"cwd":"/tmp/dsh-conformance-i2rZ8W/project","pid":26555,"pgid":26555,"t_ms":1796297355708,"v":1}"#;
        assert_eq!(
            stable_line(line, "/tmp/"),
            r#"journal: {"cwd":"<case-root>/project","pid":0,"pgid":0,"t_ms":0,"v":1}"#
        );
        assert_eq!(
            stable_line("no numbers \"pid\":x", "/tmp"),
            "no numbers \"pid\":x"
        );
    }
}
