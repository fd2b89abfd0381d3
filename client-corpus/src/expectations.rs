//! `--expectations FILE` on a client run: a client's known deviations, in the host run's format
//! (`{"v":1,"xfail":{"case.id":"reason"}}`, docs/sdk-clients.md, "Known deviations"). A listed
//! case that fails is `xfail` (not a failure of the run), one that does not fail is `xpass` (a
//! failure: the entry is stale), a skipped or interrupted case keeps its verdict.

use dsh_engine::input::{read_bounded, MAX_CONFIG_BYTES};
use dsh_results::model::{CaseResult, Verdict};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expectations {
    pub v: u64,
    /// Case id -> why the client is known to fail it.
    pub xfail: BTreeMap<String, String>,
}

impl Expectations {
    /// Reads the file; a file that is no expectations file is an error naming it.
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

    /// The case's verdict under the file.
    pub fn apply(&self, case: &mut CaseResult) {
        let Some(reason) = self.xfail.get(&case.id) else {
            return;
        };
        case.verdict = match case.verdict {
            Verdict::Fail | Verdict::Untestable => Verdict::Xfail,
            Verdict::Pass | Verdict::NonStrict | Verdict::Informational => {
                case.why = Some(format!(
                    "listed as xfail ({reason}) but did not fail: remove the entry"
                ));
                Verdict::Xpass
            }
            kept => kept,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(verdict: Verdict) -> CaseResult {
        let mut result = crate::judge::skipped(
            &serde_json::from_value(serde_json::json!({
                "id": "sdk.x", "surface": "sdk", "summary": "s", "rules": ["sdk.r"],
                "prompts": ["p"], "expect": {"reports": [{}]}
            }))
            .unwrap(),
            "nothing",
        );
        result.verdict = verdict;
        result.why = Some("report 1: text".into());
        result
    }

    #[test]
    fn a_listed_failure_is_xfail_a_listed_pass_xpass_and_bad_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("expectations.json");
        std::fs::write(
            &file,
            r#"{"v":1,"xfail":{"sdk.x":"settles on the first idle"}}"#,
        )
        .unwrap();
        let expectations = Expectations::load(&file).unwrap();
        let mut failed = case(Verdict::Fail);
        expectations.apply(&mut failed);
        assert_eq!(failed.verdict, Verdict::Xfail);
        assert_eq!(
            failed.why.as_deref(),
            Some("report 1: text"),
            "the finding stays"
        );
        let mut passed = case(Verdict::Pass);
        expectations.apply(&mut passed);
        assert_eq!(passed.verdict, Verdict::Xpass);
        assert!(passed.verdict.is_failure());
        let mut skipped = case(Verdict::Skipped);
        expectations.apply(&mut skipped);
        assert_eq!(skipped.verdict, Verdict::Skipped);
        assert_eq!(expectations.unselected(&["sdk.y"]), ["sdk.x"]);
        std::fs::write(&file, r#"{"v":2,"xfail":{}}"#).unwrap();
        assert!(Expectations::load(&file).unwrap_err().contains("v=2"));
        std::fs::write(&file, r#"{"xfail":[]}"#).unwrap();
        let error = Expectations::load(&file).unwrap_err();
        assert!(
            error.contains("expectations.json: not an expectations file"),
            "{error}"
        );
    }
}
