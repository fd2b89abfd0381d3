//! The host's expectations file: `{"v":1,"xfail":{"case.id":"reason"}}`, read for `--expectations`
//! and written from the current failures by `--write-expectations`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

use dsh_engine::input::{read_bounded, MAX_CONFIG_BYTES};
use dsh_results::model::{CaseResult, SuiteReport, Verdict};

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

    /// A baseline from the report's failures: `fail`, `untestable`, and cases already `xfail`.
    /// A reason names the verdict's rule and why, then every other rule the case broke (sorted
    /// rule ids, so regenerating against an unchanged host changes nothing).
    pub fn from_failures(report: &SuiteReport) -> Expectations {
        let xfail = report
            .cases
            .iter()
            .filter(|case| {
                matches!(
                    case.verdict,
                    Verdict::Fail | Verdict::Untestable | Verdict::Xfail
                )
            })
            .map(|case| (case.id.clone(), reason(case)))
            .collect();
        Expectations { v: 1, xfail }
    }

    pub fn write(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())? + "\n";
        dsh_engine::files::write_file(path, text.as_bytes())
            .map_err(|e| format!("cannot write the expectations file: {e}"))
    }
}

/// Why a case is expected to fail: `rule: why`, then ` (also broken: rule, rule (informational))`
/// naming the case's other broken rules, sorted (nothing when it broke one rule).
fn reason(case: &CaseResult) -> String {
    let reason = match (&case.rule, &case.why) {
        (Some(rule), Some(why)) => format!("{rule}: {why}"),
        (Some(rule), None) => rule.clone(),
        (None, Some(why)) => why.clone(),
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
