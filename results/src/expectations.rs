//! The expectations file both corpora read for `--expectations`: `{"v":1,"xfail":{"case.id":
//! "reason"}}`, a host's or a client's known failures (docs/sdk-clients.md, "Known deviations").
//! A listed case that fails is `xfail` (not a failure of the run), one that does not fail is
//! `xpass` (a failure: the entry is stale); a skipped, errored or interrupted case keeps its
//! verdict. A host run writes it from its current failures (`--write-expectations`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

use crate::model::{CaseResult, SuiteReport, Verdict};
use dsh_engine::input::{read_bounded, MAX_CONFIG_BYTES};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expectations {
    pub v: u64,
    /// Case id -> why it is known to fail.
    pub xfail: BTreeMap<String, String>,
}

impl Expectations {
    pub fn load(path: &Path) -> Result<Expectations, String> {
        let text = read_bounded(path, "the expectations file", MAX_CONFIG_BYTES)?;
        let expectations: Expectations = serde_json::from_str(&text).map_err(|e| {
            format!(
                "{}: not an expectations file ({{\"v\":1,\"xfail\":{{...}}}}): {e}",
                path.display()
            )
        })?;
        if expectations.v != 1 {
            return Err(format!(
                "{}: unsupported expectations version v={}",
                path.display(),
                expectations.v
            ));
        }
        Ok(expectations)
    }

    /// The listed ids that are not among `selected`.
    pub fn unselected<'a>(&'a self, selected: &[&str]) -> Vec<&'a str> {
        self.xfail
            .keys()
            .map(String::as_str)
            .filter(|id| !selected.contains(id))
            .collect()
    }

    /// A warning for every listed id that is not among `selected`.
    pub fn unselected_warnings(&self, selected: &[&str]) -> Vec<String> {
        let ids = self.unselected(selected).into_iter();
        ids.map(|id| {
            format!("warning: the expectations file lists {id}, which is not selected or does not exist")
        })
        .collect()
    }

    /// The case's verdict under the file (unchanged when the case is not listed).
    pub fn apply(&self, case: &mut CaseResult) {
        if let Some(reason) = self.xfail.get(&case.id) {
            case.verdict = apply_xfail(case.verdict, reason, &mut case.why);
        }
    }

    /// A baseline from the report's failures: `fail`, `untestable`, and cases already `xfail`
    /// (which keep the reason `previous`, the file the run was given, has for them: a reviewer's
    /// words survive a regeneration). A new entry's reason names the verdict's rule and a stable
    /// phrase ([`stable_reason`]), then every other rule the case broke (sorted), so writing it
    /// again for an unchanged host gives the same file.
    pub fn from_failures(report: &SuiteReport, previous: Option<&Expectations>) -> Expectations {
        let xfail = report
            .cases
            .iter()
            .filter(|case| {
                matches!(
                    case.verdict,
                    Verdict::Fail | Verdict::Untestable | Verdict::Xfail
                )
            })
            .map(|case| {
                let kept = previous
                    .filter(|_| case.verdict == Verdict::Xfail)
                    .and_then(|previous| previous.xfail.get(&case.id));
                (
                    case.id.clone(),
                    kept.cloned().unwrap_or_else(|| reason(case)),
                )
            })
            .collect();
        Expectations { v: 1, xfail }
    }

    pub fn write(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())? + "\n";
        dsh_engine::files::write_file(path, text.as_bytes())
            .map_err(|e| format!("cannot write the expectations file: {e}"))
    }
}

/// A verdict under an `xfail` entry: a failure is expected (`xfail`), anything that did not fail
/// is a stale entry (`xpass`, `why` says so); what was not judged keeps its verdict.
pub fn apply_xfail(verdict: Verdict, reason: &str, why: &mut Option<String>) -> Verdict {
    match verdict {
        Verdict::Skipped
        | Verdict::Error
        | Verdict::Interrupted
        | Verdict::Xfail
        | Verdict::Xpass => verdict,
        Verdict::Fail | Verdict::Untestable => Verdict::Xfail,
        Verdict::Pass | Verdict::NonStrict | Verdict::Informational => {
            *why = Some(format!(
                "listed as xfail ({reason}) but did not fail: remove the entry"
            ));
            Verdict::Xpass
        }
    }
}

/// The longest reason kept whole; a longer one is cut at the end of a sentence, never inside one.
const REASON_CHARS: usize = 200;

/// A failure's message as a reason a reviewer can keep: what changes from run to run (pids, paths,
/// ids, durations) replaced by a placeholder, and a long message cut after its first sentence.
pub fn stable_reason(why: &str) -> String {
    let mut words: Vec<String> = Vec::new();
    for word in why.split_whitespace() {
        let after_pid = words
            .last()
            .is_some_and(|last| matches!(last.as_str(), "pid" | "pids" | "process" | "ppid"));
        words.push(stable_word(word, after_pid));
    }
    let text = words.join(" ");
    if text.chars().count() <= REASON_CHARS {
        return text;
    }
    match text.find(". ") {
        Some(end) => text[..=end].to_string(),
        None => text,
    }
}

/// One word of a message with its run-specific core replaced, punctuation around it kept.
fn stable_word(word: &str, after_pid: bool) -> String {
    let core = word.trim_matches(|c: char| "()[]{},;:.\"'`".contains(c));
    if core.is_empty() {
        return word.to_string();
    }
    let digits = core.chars().all(|c| c.is_ascii_digit());
    let hex_run = core.chars().filter(|c| c.is_ascii_hexdigit()).count() >= 12
        && core
            .chars()
            .all(|c| c.is_ascii_hexdigit() || c == '-' || c.is_ascii_lowercase());
    let placeholder = if core.starts_with('/') {
        "<path>"
    } else if digits && (after_pid || word.starts_with('[') || word.ends_with(']')) {
        "<pid>"
    } else if core
        .strip_suffix("ms")
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
    {
        "<n>ms"
    } else if hex_run {
        "<id>"
    } else {
        return word.to_string();
    };
    word.replacen(core, placeholder, 1)
}

/// Why a case is expected to fail: `rule: why`, then ` (also broken: rule, rule (informational))`
/// naming the case's other broken rules, sorted (nothing when it broke one rule).
fn reason(case: &CaseResult) -> String {
    let reason = match (&case.rule, &case.why) {
        (Some(rule), Some(why)) => format!("{rule}: {}", stable_reason(why)),
        (Some(rule), None) => rule.clone(),
        (None, Some(why)) => stable_reason(why),
        (None, None) => case.verdict.as_str().to_string(),
    };
    let mut rules: Vec<String> = case
        .also_broken
        .iter()
        .map(|broken| match broken.interpretation {
            None => broken.rule.clone(),
            Some(_) => format!("{} (informational)", broken.rule),
        })
        .collect();
    rules.sort();
    rules.dedup();
    match rules.is_empty() {
        true => reason,
        false => format!("{reason} (also broken: {})", rules.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn unselected_lists_entries_outside_the_selection() {
        let expectations = Expectations {
            v: 1,
            xfail: [("sdk.x".to_string(), "known".to_string())].into(),
        };
        assert_eq!(expectations.unselected(&["sdk.y"]), ["sdk.x"]);
        assert!(expectations.unselected(&["sdk.x"]).is_empty());
    }

    #[test]
    fn reasons_drop_what_changes_between_runs() {
        let why =
            "process(es) [22472] of run r0.1 were gone; pid 4242 left /tmp/dsh-conformance-Ab3/x \
                   after 1200ms, session od-3f2a9c1e-77aa-4b1e-9f00-1234567890ab";
        let reason = stable_reason(why);
        assert_eq!(
            reason,
            "process(es) [<pid>] of run r0.1 were gone; pid <pid> left <path> after <n>ms, session <id>"
        );
        assert_eq!(stable_reason(why), reason, "the same text every time");
        let long = format!("First sentence. {}", "word ".repeat(60));
        assert_eq!(
            stable_reason(&long),
            "First sentence.",
            "cut after a sentence, never inside"
        );
    }

    #[test]
    fn a_listed_failure_keeps_the_reviewers_reason() {
        use crate::model::Blame;
        let case = |id: &str, verdict| CaseResult {
            id: id.into(),
            summary: String::new(),
            spec: vec![],
            rules: vec![],
            verdict,
            blame: Blame::Host,
            rule: Some("s6.rule".into()),
            why: Some("pid 77 left behind".into()),
            interpretation: None,
            duration_ms: 0,
            transcript: vec![],
            flaky: vec![],
            also_broken: vec![],
        };
        let report = SuiteReport {
            kit_version: "0".into(),
            corpus_hash: String::new(),
            host: crate::model::HostInfo {
                name: "h".into(),
                command: vec![],
                handshake: serde_json::Value::Null,
            },
            runtime_variant: "default".into(),
            cases: vec![
                case("a.known", Verdict::Xfail),
                case("a.new", Verdict::Fail),
            ],
            duration_ms: 0,
            rerun_args: vec![],
            corpus: None,
            surface: None,
            dialect: None,
            rerun_as: None,
        };
        let mut previous = Expectations {
            v: 1,
            ..Default::default()
        };
        previous
            .xfail
            .insert("a.known".into(), "we kill only the group".into());
        let written = Expectations::from_failures(&report, Some(&previous));
        assert_eq!(written.xfail["a.known"], "we kill only the group");
        assert_eq!(written.xfail["a.new"], "s6.rule: pid <pid> left behind");
    }

    #[test]
    fn reads_what_it_writes_and_rejects_junk() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("expectations.json");
        let mut expectations = Expectations {
            v: 1,
            ..Default::default()
        };
        expectations.xfail.insert("cancel.x".into(), "known".into());
        expectations.write(&path).expect("writes");
        assert_eq!(Expectations::load(&path).expect("loads"), expectations);
        std::fs::write(&path, r#"{"v":1,"xfail":{},"extra":1}"#).expect("write");
        assert!(Expectations::load(&path)
            .expect_err("unknown member")
            .contains("expectations.json"));
        std::fs::write(&path, r#"{"v":2,"xfail":{}}"#).expect("write");
        assert!(Expectations::load(&path)
            .expect_err("version")
            .contains("v=2"));
    }

    #[test]
    fn a_reason_names_every_broken_rule_in_a_stable_order() {
        // Built from JSON, as an old or new report loads: absent members take their defaults.
        let reason = |also_broken: serde_json::Value| {
            let case: CaseResult = serde_json::from_value(serde_json::json!({
                "id": "strict.x", "summary": "", "spec": [], "rules": [], "verdict": "fail",
                "blame": "host", "rule": "s7.validate-ready", "why": "execute before ready",
                "interpretation": null, "duration_ms": 0, "transcript": [],
                "also_broken": also_broken
            }))
            .expect("a case result");
            reason(&case)
        };
        assert_eq!(
            reason(serde_json::json!([])),
            "s7.validate-ready: execute before ready"
        );
        let tree = serde_json::json!({"rule": "s10.process-tree-reaped", "why": "left"});
        let shape =
            serde_json::json!({"rule": "s6.execute-shape", "why": "x", "interpretation": "I-01"});
        let one_order = reason(serde_json::json!([tree, shape]));
        assert_eq!(
            one_order,
            "s7.validate-ready: execute before ready (also broken: s10.process-tree-reaped, \
             s6.execute-shape (informational))"
        );
        assert_eq!(one_order, reason(serde_json::json!([shape, tree])));
    }
}
