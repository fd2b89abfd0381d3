//! Turning a case's findings into its verdict: which finding is blamed, when a failure is only
//! `informational` (it breaks an interpretation, not a spec sentence), and the expectations file's
//! `xfail`/`xpass`.

use dsh_results::model::{Blame, BrokenRule, Verdict};

/// The rule id of the harness's own driver contract.
pub const RULE_DRIVER_REPLY_VALID: &str = "s6.driver-reply-valid";
pub const RULE_NEW_PROCESS_PER_TURN: &str = "s7.new-process-per-turn";
pub const RULE_EXECUTE_SHAPE: &str = "s6.execute-shape";
pub const RULE_EXECUTE_CWD_MODEL_PROMPT: &str = "s8.execute-cwd-model-prompt";
pub const RULE_PROCESS_TREE_REAPED: &str = "s10.process-tree-reaped";
pub const RULE_NO_KILL_OTHER_RUNTIME: &str = "s10.no-kill-other-runtime";
/// A process the runtime started and left outside its process group is still owned (spec 6, 10).
pub const RULE_OWNED_PROCESSES_KILLED: &str = "s10.owned-processes-force-killed";
/// What a finding under [`RULE_OWNED_PROCESSES_KILLED`] tells a host to do.
pub const ESCAPED_PROCESS_REMEDY: &str = "owned processes whatever their group, session or environment (spec 10 step 5): on Linux be a child subreaper or use a cgroup; from Node.js spawn the runtime through `dsh-conformance supervise --` (docs/host-driver.md, \"Escaped daemons\")";
pub const RULE_NO_CREDENTIAL_LEAK: &str = "s14.no-credential-leak";
pub const RULE_NO_PROMPT_IN_STDERR: &str = "s14.no-prompt-in-stderr";
pub const RULE_STDERR_BOUNDED: &str = "s14.stderr-bounded";
pub const RULE_VALIDATE_READY: &str = "s7.validate-ready";
pub const RULE_CANCEL_COMMAND_SHAPE: &str = "s6.cancel-command-shape";
pub const RULE_HISTORY_IN_DSH_HOME: &str = "s14.history-in-dsh-home";
pub const RULE_ROUTE_REACHES_EXECUTE: &str = "s12.route-reaches-execute";
pub const RULE_MODELS_REPLY_UNIQUE: &str = "s12.models-reply-unique";
pub const RULE_UNPICKED_OMITTED: &str = "s12.unpicked-omitted";
pub const RULE_ROUTE_INVALID_BEFORE_SPAWN: &str = "s12.route-invalid-before-spawn";
pub const RULE_NO_MCP_PHASE_ONE: &str = "s12.no-mcp-phase-one";
/// A `usage` event carries the frame's provider, model and token accounting (spec 9).
pub const RULE_USAGE_EVENT: &str = "s9.usage-event";
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
    /// One of the case's own expectations (an error code compared under the host's declared
    /// vocabulary included).
    Expectation,
    /// A claimed capability's prerequisite was not met.
    Untestable,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub kind: FindingKind,
    pub rule: String,
    pub why: String,
    /// The interpretation entry (`I-..`) the broken expectation rests on, when it is not a spec
    /// sentence: such a finding makes the case `informational`, never `fail`.
    pub interpretation: Option<String>,
}

impl Finding {
    pub fn new(kind: FindingKind, rule: &str, why: impl Into<String>) -> Finding {
        Finding {
            kind,
            rule: rule.to_string(),
            why: one_line(&why.into()),
            interpretation: None,
        }
    }

    /// The same finding, resting on interpretation entry `entry` (none: unchanged).
    pub fn interpreted(mut self, entry: Option<&str>) -> Finding {
        if self.kind != FindingKind::Kit && self.kind != FindingKind::HostFatal {
            self.interpretation = entry.map(str::to_string).or(self.interpretation);
        }
        self
    }

    fn is_strict(&self) -> bool {
        self.interpretation.is_none()
    }
}

/// A case's verdict before the expectations file, and what it blames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub verdict: Verdict,
    pub blame: Blame,
    pub rule: Option<String>,
    pub why: Option<String>,
    /// The interpretation entry an `informational` verdict rests on.
    pub interpretation: Option<String>,
    /// Every other broken rule, strict or informational ([`others`]).
    pub also_broken: Vec<BrokenRule>,
}

fn one_line(text: &str) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    super::driver::clip(flat.trim(), 400)
}

/// The verdict before the expectations file. A kit finding makes it `error`; a strict finding (a
/// spec sentence or the harness contract) `fail` (or `untestable`); findings that each rest on an
/// interpretation only `informational`. The blamed finding names the verdict's rule; every other
/// finding is kept in `also_broken`.
pub fn decide(findings: &[Finding], skipped: Option<&str>) -> Decision {
    let blamed = |verdict, blame, finding: &Finding| Decision {
        verdict,
        blame,
        rule: Some(finding.rule.clone()),
        why: Some(finding.why.clone()),
        interpretation: finding.interpretation.clone(),
        also_broken: others(findings, finding),
    };
    if let Some(kit) = findings.iter().find(|f| f.kind == FindingKind::Kit) {
        return blamed(Verdict::Error, Blame::Kit, kit);
    }
    if let Some(why) = skipped {
        return Decision {
            verdict: Verdict::Skipped,
            blame: Blame::None,
            rule: None,
            why: Some(why.to_string()),
            interpretation: None,
            also_broken: Vec::new(),
        };
    }
    if let Some(first) = findings.iter().find(|finding| finding.is_strict()) {
        let verdict = if first.kind == FindingKind::Untestable {
            Verdict::Untestable
        } else {
            Verdict::Fail
        };
        return blamed(verdict, Blame::Host, first);
    }
    match findings.first() {
        Some(soft) => blamed(Verdict::Informational, Blame::Host, soft),
        None => Decision {
            verdict: Verdict::Pass,
            blame: Blame::None,
            rule: None,
            why: None,
            interpretation: None,
            also_broken: Vec::new(),
        },
    }
}

/// The broken rules besides the blamed finding's, in the order first broken: one entry per rule
/// and strictness (its first message), the blamed rule itself left out at the blamed strictness.
fn others(findings: &[Finding], blamed: &Finding) -> Vec<BrokenRule> {
    let key = |finding: &Finding| (finding.rule.clone(), finding.interpretation.clone());
    let mut seen = vec![key(blamed)];
    let mut others = Vec::new();
    for finding in findings {
        if seen.contains(&key(finding)) {
            continue;
        }
        seen.push(key(finding));
        others.push(BrokenRule {
            rule: finding.rule.clone(),
            why: finding.why.clone(),
            interpretation: finding.interpretation.clone(),
        });
    }
    others
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
        let soft = |kind| finding(kind).interpreted(Some("I-01"));
        let verdict = |findings: &[Finding]| decide(findings, None).verdict;
        assert_eq!(verdict(&[]), Verdict::Pass);
        assert_eq!(verdict(&[finding(Expectation)]), Verdict::Fail);
        assert_eq!(verdict(&[soft(Expectation)]), Verdict::Informational);
        assert_eq!(verdict(&[soft(Global)]), Verdict::Informational);
        // One open detail never softens the rest of the case.
        assert_eq!(
            verdict(&[soft(Expectation), finding(Global)]),
            Verdict::Fail
        );
        assert_eq!(
            verdict(&[finding(Untestable), finding(Expectation)]),
            Verdict::Untestable
        );
        assert_eq!(verdict(&[finding(HostFatal), finding(Kit)]), Verdict::Error);
        // The driver contract and the kit are never interpretations.
        assert_eq!(verdict(&[soft(HostFatal)]), Verdict::Fail);
        assert_eq!(decide(&[], Some("no cancel")).verdict, Verdict::Skipped);
        let decision = decide(&[soft(Expectation), finding(Global)], None);
        assert_eq!(
            (
                decision.blame,
                decision.rule.as_deref(),
                decision.why.as_deref(),
                decision.interpretation
            ),
            (
                Blame::Host,
                Some("s6.rule"),
                Some("Global second line"),
                None
            )
        );
        let decision = decide(&[soft(Expectation)], None);
        assert_eq!(decision.interpretation.as_deref(), Some("I-01"));
    }

    #[test]
    fn every_other_broken_rule_is_kept() {
        use FindingKind::*;
        let on = |rule: &str, why: &str| Finding::new(Global, rule, why);
        let findings = [
            on("s7.a", "first a").interpreted(Some("I-01")),
            on("s6.b", "first b"),
            on("s6.b", "second b"),
            on("s10.c", "first c"),
            on("s6.b", "soft b").interpreted(Some("I-02")),
            on("s7.a", "second a").interpreted(Some("I-01")),
        ];
        let decision = decide(&findings, None);
        // The first strict finding is the verdict's rule; the others are listed once each.
        assert_eq!(
            (decision.verdict, decision.rule.as_deref()),
            (Verdict::Fail, Some("s6.b"))
        );
        let listed: Vec<(&str, &str, Option<&str>)> = decision
            .also_broken
            .iter()
            .map(|b| (b.rule.as_str(), b.why.as_str(), b.interpretation.as_deref()))
            .collect();
        assert_eq!(
            listed,
            vec![
                ("s7.a", "first a", Some("I-01")),
                ("s10.c", "first c", None),
                ("s6.b", "soft b", Some("I-02")),
            ]
        );
        assert_eq!(decision.also_broken[1].strictness(), "strict");
        assert_eq!(decision.also_broken[0].strictness(), "informational");
        // One broken rule, however often: nothing else to list.
        assert!(decide(&findings[1..3], None).also_broken.is_empty());
        assert!(decide(&[], Some("no cancel")).also_broken.is_empty());
    }
}
