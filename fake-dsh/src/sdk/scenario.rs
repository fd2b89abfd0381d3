//! Reads the SDK surfaces' scenario from `FAKE_DSH_SCENARIO` when that file holds an `sdk`
//! member (`{"sdk": {...}}`). The language itself, its example and what each member does, is the
//! typed model [`dsh_formats::sdk_scenario`] (schema `schemas/sdk-scenario.schema.json`).

pub use dsh_formats::sdk_scenario::{
    EndKind, Refusal, SdkScenario, SelfSignal, SignalName, StepScript, SubagentScript,
    ToolCallScript, TurnScript,
};
use serde_json::Value;
use std::path::Path;

/// Reads the `sdk` member of the scenario file named by `FAKE_DSH_SCENARIO`; none when the
/// variable is unset or empty. A file that cannot be read or parsed, or holds no `sdk` member,
/// is an error naming the file (and the line and column for bad JSON).
pub fn load_from_env() -> Result<SdkScenario, String> {
    match std::env::var_os(crate::scenario::SCENARIO_ENV).filter(|v| !v.is_empty()) {
        None => Ok(SdkScenario::default()),
        Some(path) => load(Path::new(&path)),
    }
}

/// Reads the `sdk` member of one scenario file.
pub fn load(path: &Path) -> Result<SdkScenario, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("fake-dsh: cannot read scenario {}: {e}", path.display()))?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| format!("fake-dsh: scenario {}: {e}", path.display()))?;
    dsh_formats::sdk_scenario::from_document(&value)
        .map_err(|e| format!("fake-dsh: scenario {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scenario_parses_and_a_bad_one_names_the_file_and_the_rule() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.json");
        std::fs::write(
            &good,
            r#"{"sdk": {"turns": [{"steps": [{"text": "hi"}], "end": "max-tokens"}]}}"#,
        )
        .unwrap();
        let scenario = load(&good).unwrap();
        assert_eq!(scenario.turns[0].end, EndKind::MaxTokens);
        assert_eq!(scenario.turns[0].steps[0].text.as_deref(), Some("hi"));
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, r#"{"sdk": {"turns": [{"end": "bored"}]}}"#).unwrap();
        let error = load(&bad).unwrap_err();
        assert!(
            error.contains("bad.json") && error.contains("bored"),
            "{error}"
        );
        let other = dir.path().join("other.json");
        std::fs::write(&other, r#"{"stdio": []}"#).unwrap();
        assert!(load(&other).unwrap_err().contains("no \"sdk\" member"));
        let junk = dir.path().join("junk.json");
        std::fs::write(&junk, "{\n nope").unwrap();
        assert!(load(&junk).unwrap_err().contains("line 2"));
    }
}
