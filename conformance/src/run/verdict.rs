//! Turning a case's findings into its verdict: which finding is blamed, when a failure is only
//! `non-strict` or `informational`, and the expectations file's `xfail`/`xpass`.

use crate::model::{Blame, Verdict};

/// The rule id of the harness's own driver contract.
pub const RULE_DRIVER_REPLY_VALID: &str = "s6.driver-reply-valid";
pub const RULE_NEW_PROCESS_PER_TURN: &str = "s7.new-process-per-turn";
pub const RULE_EXECUTE_SHAPE: &str = "s6.execute-shape";
pub const RULE_EXECUTE_CWD_MODEL_PROMPT: &str = "s8.execute-cwd-model-prompt";
pub const RULE_PROCESS_TREE_REAPED: &str = "s10.process-tree-reaped";
pub const RULE_NO_CREDENTIAL_LEAK: &str = "s14.no-credential-leak";
pub const RULE_NO_PROMPT_IN_STDERR: &str = "s14.no-prompt-in-stderr";
pub const RULE_STDERR_BOUNDED: &str = "s14.stderr-bounded";
/// Blamed for kit faults (invalid fixture, harness error).
pub const RULE_KIT: &str = "kit";

/// What kind of problem a finding is; decides the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FindingKind {
    /// The kit failed: the case's verdict is `error`.
    Kit,
    /// The driver broke the harness contract or its bounds (timeout, exit, invalid reply).
    HostFatal,
    /// One of the per-run global checks.
    Global,
    /// One of the case's own expectations.
    Expectation,
    /// The right status (or availability) with another error code.
    CodeMismatch,
    /// A claimed capability's prerequisite was not met.
    Untestable,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub kind: FindingKind,
    pub rule: String,
    pub why: String,
}

impl Finding {
    pub fn new(kind: FindingKind, rule: &str, why: impl Into<String>) -> Finding {
        Finding {
            kind,
            rule: rule.to_string(),
            why: one_line(&why.into()),
        }
    }
}

fn one_line(text: &str) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    super::driver::clip(flat.trim(), 400)
}

/// The verdict before the expectations file: (verdict, blame, rule, why).
pub fn decide(
    findings: &[Finding],
    skipped: Option<&str>,
    interpretation: Option<&str>,
) -> (Verdict, Blame, Option<String>, Option<String>) {
    if let Some(kit) = findings
        .iter()
        .find(|finding| finding.kind == FindingKind::Kit)
    {
        return (
            Verdict::Error,
            Blame::Kit,
            Some(kit.rule.clone()),
            Some(kit.why.clone()),
        );
    }
    if let Some(why) = skipped {
        return (Verdict::Skipped, Blame::None, None, Some(why.to_string()));
    }
    let failures: Vec<&Finding> = findings
        .iter()
        .filter(|finding| finding.kind != FindingKind::CodeMismatch)
        .collect();
    let Some(first) = failures.first() else {
        return match findings.first() {
            Some(mismatch) => (
                Verdict::NonStrict,
                Blame::Host,
                Some(mismatch.rule.clone()),
                Some(mismatch.why.clone()),
            ),
            None => (Verdict::Pass, Blame::None, None, None),
        };
    };
    let verdict = if first.kind == FindingKind::Untestable {
        Verdict::Untestable
    } else if interpretation.is_some()
        && failures
            .iter()
            .all(|finding| finding.kind == FindingKind::Expectation)
    {
        Verdict::Informational
    } else {
        Verdict::Fail
    };
    (
        verdict,
        Blame::Host,
        Some(first.rule.clone()),
        Some(first.why.clone()),
    )
}

/// Applies an `xfail` entry: a failure becomes `xfail`; anything that is not one becomes `xpass`.
/// Skipped and error cases keep their verdict (they say nothing about the host's known failures).
pub fn apply_xfail(verdict: Verdict, reason: &str, why: &mut Option<String>) -> Verdict {
    match verdict {
        Verdict::Skipped | Verdict::Error | Verdict::Xfail | Verdict::Xpass => verdict,
        Verdict::Fail | Verdict::Untestable => Verdict::Xfail,
        Verdict::Pass | Verdict::NonStrict | Verdict::Informational => {
            *why = Some(format!(
                "listed as xfail ({reason}) but did not fail: remove the entry"
            ));
            Verdict::Xpass
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(kind: FindingKind) -> Finding {
        Finding::new(kind, "s6.rule", format!("{kind:?}\nsecond line"))
    }

    #[test]
    fn verdict_table() {
        use FindingKind::*;
        let verdict = |findings: &[Finding], interpretation: Option<&str>| {
            decide(findings, None, interpretation).0
        };
        assert_eq!(verdict(&[], None), Verdict::Pass);
        assert_eq!(verdict(&[finding(CodeMismatch)], None), Verdict::NonStrict);
        assert_eq!(
            verdict(&[finding(CodeMismatch), finding(Expectation)], None),
            Verdict::Fail
        );
        assert_eq!(
            verdict(&[finding(Expectation)], Some("I-01")),
            Verdict::Informational
        );
        assert_eq!(
            verdict(&[finding(Expectation), finding(Global)], Some("I-01")),
            Verdict::Fail
        );
        assert_eq!(
            verdict(&[finding(Untestable), finding(Expectation)], None),
            Verdict::Untestable
        );
        assert_eq!(
            verdict(&[finding(HostFatal), finding(Kit)], None),
            Verdict::Error
        );
        assert_eq!(decide(&[], Some("no cancel"), None).0, Verdict::Skipped);
        let (_, blame, rule, why) = decide(&[finding(Global)], None, None);
        assert_eq!(
            (blame, rule.as_deref(), why.as_deref()),
            (Blame::Host, Some("s6.rule"), Some("Global second line"))
        );
    }

    #[test]
    fn xfail_is_strict() {
        let mut why = None;
        assert_eq!(
            apply_xfail(Verdict::Fail, "known", &mut why),
            Verdict::Xfail
        );
        assert_eq!(
            apply_xfail(Verdict::Pass, "known", &mut why),
            Verdict::Xpass
        );
        assert!(why.is_some_and(|why| why.contains("remove the entry")));
        assert_eq!(
            apply_xfail(Verdict::Skipped, "known", &mut None),
            Verdict::Skipped
        );
    }
}
