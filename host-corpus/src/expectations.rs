//! The host's expectations file: `{"v":1,"xfail":{"case.id":"reason"}}`, read for `--expectations`
//! and written from the current failures by `--write-expectations`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

use dsh_engine::input::{read_bounded, MAX_CONFIG_BYTES};
use dsh_results::model::{SuiteReport, Verdict};

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
            .map(|case| {
                let reason = match (&case.rule, &case.why) {
                    (Some(rule), Some(why)) => format!("{rule}: {why}"),
                    (Some(rule), None) => rule.clone(),
                    (None, Some(why)) => why.clone(),
                    (None, None) => case.verdict.as_str().to_string(),
                };
                (case.id.clone(), reason)
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
}
