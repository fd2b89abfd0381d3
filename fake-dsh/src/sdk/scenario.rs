//! The SDK surfaces' scenario language: what each prompt's turn does, read from
//! `FAKE_DSH_SCENARIO` when that file holds an `sdk` member (`{"sdk": {...}}`). Kept apart from
//! the open-design scenario types (docs/sdk-surfaces.md, "fake-dsh's SDK surfaces").
//!
//! ```json
//! {"sdk": {"initialize_delay_ms": 200,
//!          "turns": [{"steps": [{"reasoning": "r", "tool_calls": [{"name": "write",
//!                       "arguments": {"file_path": "a.txt", "content": "x"}}]},
//!                               {"text": "done"}],
//!                     "end": "completed"}]}}
//! ```
//!
//! The n-th accepted prompt (counted over the whole process) plays `turns[n]`; prompts beyond the
//! list get the default agent.

use serde::Deserialize;
use serde_json::Value;
use std::path::Path;

/// The `sdk` member of a scenario file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SdkScenario {
    /// One turn per accepted prompt, in order.
    #[serde(default)]
    pub turns: Vec<TurnScript>,
    /// How long `initialize` takes to answer (the real one loads its plugin tree first), so
    /// requests sent after it may be answered before it.
    #[serde(default)]
    pub initialize_delay_ms: u64,
    /// How long after a `shutdown` request its response comes (requests read meanwhile are
    /// answered first, as by the real runtime's asynchronous disposal).
    #[serde(default)]
    pub shutdown_drain_ms: u64,
    /// Bytes written to stderr right after start (a runtime that logs to stderr).
    #[serde(default)]
    pub stderr: Option<String>,
    /// Lines written to stdout right after `initialize`'s response: junk a client must tolerate
    /// (the real runtime never writes them; for client tolerance cases).
    #[serde(default)]
    pub stdout_noise: Vec<String>,
}

/// How a turn ends: the `turn/end` reason's `kind`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EndKind {
    #[default]
    Completed,
    Error,
    Aborted,
    Interrupted,
    MaxTokens,
}

impl EndKind {
    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            EndKind::Completed => "completed",
            EndKind::Error => "error",
            EndKind::Aborted => "aborted",
            EndKind::Interrupted => "interrupted",
            EndKind::MaxTokens => "max-tokens",
        }
    }
}

/// One prompt's turn.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnScript {
    /// The model steps, in order.
    #[serde(default)]
    pub steps: Vec<StepScript>,
    /// The `turn/end` reason.
    #[serde(default)]
    pub end: EndKind,
    /// With `end: error`: the reason's `error` (default an AUTH failure like a 401's).
    #[serde(default)]
    pub error: Option<Value>,
    /// A background subagent started during the turn: the root goes idle before it finishes,
    /// then wakes for another turn.
    #[serde(default)]
    pub background_subagent: Option<SubagentScript>,
}

/// One model step: reasoning, text and tool calls, after an optional pause.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepScript {
    #[serde(default)]
    pub reasoning: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub tool_calls: Vec<ToolCallScript>,
    #[serde(default)]
    pub delay_ms: u64,
}

/// One tool call: `write {file_path, content}` and `read {file_path}` act on real files in the
/// session's cwd; any other name fails as an unknown tool. `needs_approval` asks an approval
/// nobody on this wire can answer: the outcome is `unavailable` and the tool fails.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCallScript {
    pub name: String,
    #[serde(default)]
    pub arguments: Value,
    #[serde(default)]
    pub needs_approval: bool,
}

/// A background child session.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubagentScript {
    /// How long after the root's `idle` the child finishes.
    #[serde(default)]
    pub finish_after_ms: u64,
    /// The child's last assistant text.
    #[serde(default = "default_child_text")]
    pub text: String,
    /// The root's wake-up turn after the child finished.
    #[serde(default = "default_wake_text")]
    pub wake_text: String,
}

fn default_child_text() -> String {
    "Child done.".to_string()
}

fn default_wake_text() -> String {
    "The background task finished.".to_string()
}

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
    let Some(sdk) = value.get("sdk") else {
        return Err(format!(
            "fake-dsh: scenario {} has no \"sdk\" member (the SDK surfaces play only that)",
            path.display()
        ));
    };
    serde_json::from_value(sdk.clone())
        .map_err(|e| format!("fake-dsh: scenario {}: sdk: {e}", path.display()))
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
