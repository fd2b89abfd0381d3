//! A driver gone before its first reply of a case (it crashed on its first request, or closed
//! its stdout): whatever the case is about, that is the driver contract broken, not a rule of the
//! spec. The case gets one finding on [`RULE_DRIVER_REPLY_VALID`] (before any the crash causes,
//! so it is the one blamed) with the end of the driver's stderr (the case's canary redacted), and
//! a note the run says once, first, with the stderr's tail ([`super::CaseRun::early_exit`]).

use super::super::driver::{clip, EarlyExit};
use super::super::preflight::STDERR_TAIL_LINES;
use super::super::verdict::{Finding, FindingKind, RULE_DRIVER_REPLY_VALID};
use super::Runner;
use dsh_results::output::escape::stderr_tail;
use dsh_results::redact::Redactor;

/// How many of the stderr's last lines a case's why shows (the run's note shows
/// [`STDERR_TAIL_LINES`]).
const WHY_LINES: usize = 3;

impl<'a> Runner<'a> {
    /// Records `exit` (during `during`, e.g. `run r0`) as a finding on the driver contract and
    /// keeps the run's note of it.
    pub(super) fn exited_before_reply(&mut self, exit: EarlyExit, during: &str) {
        let stderr =
            Redactor::new(vec![self.canary.clone()]).redact(&String::from_utf8_lossy(&exit.stderr));
        let why = format!("{during}: {}; {}", exit.why, stderr_end(&stderr));
        let finding = Finding::new(FindingKind::HostFatal, RULE_DRIVER_REPLY_VALID, &why);
        self.findings.push(finding);
        if self.early_exit.is_none() {
            self.early_exit = Some(note(&exit.why, during, &stderr));
        }
    }
}

/// `its stderr ends: A / B / C` (its last non-empty lines), or `its stderr is empty`.
fn stderr_end(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    match lines.len() {
        0 => "its stderr is empty".to_string(),
        n => {
            let tail = lines[n.saturating_sub(WHY_LINES)..].join(" / ");
            format!("its stderr ends: {}", clip(&tail, 300))
        }
    }
}

/// The run's note: what happened, which rule every such case fails on, and the stderr's tail.
fn note(why: &str, during: &str, stderr: &str) -> String {
    let tail = stderr_tail(stderr.as_bytes(), STDERR_TAIL_LINES);
    let stderr = if tail.is_empty() {
        "  stderr: (empty)".to_string()
    } else {
        format!("  stderr (last {STDERR_TAIL_LINES} lines at most):\n{tail}")
    };
    format!(
        "{during}: {why}\n  a case whose driver does so fails on {RULE_DRIVER_REPLY_VALID} (the \
         driver contract), not on a rule of the spec: fix the driver first\n{stderr}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_why_ends_with_the_last_lines_and_the_note_with_the_tail() {
        let stderr =
            "\nTraceback (most recent call last):\n  File \"d.py\", line 3\n\nTypeError: x\n";
        assert_eq!(
            stderr_end(stderr),
            "its stderr ends: Traceback (most recent call last): /   File \"d.py\", line 3 / TypeError: x"
        );
        assert_eq!(stderr_end(" \n"), "its stderr is empty");
        let said = note(
            "the host exited before its first reply (exit status 1)",
            "run r0",
            stderr,
        );
        assert!(said.starts_with("run r0: the host exited"), "{said}");
        assert!(said.contains(RULE_DRIVER_REPLY_VALID), "{said}");
        assert!(said.ends_with("    TypeError: x"), "{said}");
        assert!(note("gone", "run r0", "").ends_with("stderr: (empty)"));
    }
}
