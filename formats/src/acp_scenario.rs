//! The ACP surface's scenario language (`schemas/acp-scenario.schema.json`): what each prompt's
//! turn does when fake-dsh plays `dsh --profile acp` (docs/surface-acp.md), read from the `acp`
//! member of the file `FAKE_DSH_SCENARIO` names. Kept apart from the open-design and SDK
//! scenario types.
//!
//! ```json
//! {"acp": {"turns": [
//!   {"replies": [{"reasoning": "r", "text": "Part one.",
//!                 "tool_calls": [{"name": "write",
//!                                 "arguments": {"file_path": "a.txt", "content": "x"}}]},
//!                {"text": "Part two."}]},
//!   {"replies": [{"text": "This answer is cut"}], "stop": "max_tokens"},
//!   {"fail": "model-server: scripted HTTP 401"}]}}
//! ```
//!
//! The n-th accepted `session/prompt` (counted over the whole process) plays `turns[n]`; prompts
//! beyond the list get the default agent. A turn is the model's replies in order: each reply is
//! one model request, sent as the real runtime sends it (thought, message, `usage_update`, then
//! each tool call). Whether a tool call asks `session/request_permission` follows from its
//! arguments as on the real runtime (a `sandbox_permissions` wider than the session's mode).
//! Members marked "(adversarial)" make fake-dsh do what the real runtime does not, for the ACP
//! client corpus's tolerance cases.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The schema of the `acp` member, among the schemas `dsh-protocol` embeds.
pub const ACP_SCENARIO_SCHEMA_PATH: &str = "acp-scenario.schema.json";

/// The `acp` member of a scenario file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AcpScenario {
    /// One turn per accepted prompt, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<AcpTurn>,
    /// How long the first `initialize` takes to answer (the real one loads its plugin tree
    /// first: 1-10 s); requests read meanwhile are answered after it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub initialize_delay_ms: u64,
}

/// How a turn that neither fails nor is cancelled ends: its `stopReason`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AcpStop {
    #[default]
    EndTurn,
    MaxTokens,
}

impl AcpStop {
    fn is_end_turn(&self) -> bool {
        *self == AcpStop::EndTurn
    }

    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            AcpStop::EndTurn => "end_turn",
            AcpStop::MaxTokens => "max_tokens",
        }
    }
}

/// One prompt's turn.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AcpTurn {
    /// (adversarial) frames written as the turn starts, before its first reply, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inject: Vec<Injection>,
    /// The model's replies, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replies: Vec<Reply>,
    /// The stop reason when the turn ends normally.
    #[serde(default, skip_serializing_if = "AcpStop::is_end_turn")]
    pub stop: AcpStop,
    /// After the replies, one more model request fails with this message: the prompt is
    /// answered `-32603 "Internal error: turn failed: <fail>"` and the session lives on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail: Option<String>,
    /// (adversarial) after the replies the process exits with this status, the prompt never
    /// answered: an agent that dies mid-turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_mid_turn: Option<i32>,
}

/// One model reply: its updates come in the real order (thought, message, usage, tool calls).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<AcpToolCall>,
    /// How long the model takes before the reply's updates (a slow model; a cancel meanwhile
    /// ends the turn `cancelled`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub delay_ms: u64,
    /// With `delay_ms`: the reasoning has streamed this far into the delay, so a cancel after it
    /// is preceded by an `agent_thought_chunk` of the reasoning (as the real runtime does once
    /// reasoning has arrived).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_streams_after_ms: Option<u64>,
    /// The text padded with this many `x` (one frame of megabytes: a client's line bound).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pad_bytes: u64,
}

impl Reply {
    /// The text with its padding, if the reply has text or padding.
    pub fn padded_text(&self) -> Option<String> {
        if self.pad_bytes == 0 {
            return self.text.clone();
        }
        let mut padded = self.text.clone().unwrap_or_default();
        padded.extend(std::iter::repeat_n(
            'x',
            usize::try_from(self.pad_bytes).unwrap_or(usize::MAX),
        ));
        Some(padded)
    }
}

/// One tool call of a reply. `write {file_path, content}`, `read {file_path}` and `todo_write
/// {todos}` act for real in the session's cwd; `bash` never runs anything (see
/// docs/surface-acp.md); any other name fails as an unknown tool.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AcpToolCall {
    pub name: String,
    /// The arguments object (or, as a model may send, a string that is not JSON).
    #[serde(default)]
    pub arguments: Value,
    /// How long the tool runs (a cancel meanwhile fails the call and ends the turn).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub delay_ms: u64,
    /// Which id the call's `session/request_permission` (if it asks) carries.
    #[serde(default, skip_serializing_if = "PermissionId::is_counter")]
    pub permission_id: PermissionId,
}

/// The id of an agent request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionId {
    /// The process's next agent request id (0, 1, 2, ...), as the real runtime numbers them.
    #[default]
    Counter,
    /// (adversarial) the id of the `session/prompt` request in flight: the two directions'
    /// ids collide on purpose.
    Prompt,
}

impl PermissionId {
    fn is_counter(&self) -> bool {
        *self == PermissionId::Counter
    }
}

/// (adversarial) A frame the real runtime never writes, injected at the start of a turn.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Injection {
    /// This line as it is (not JSON, or JSON of any shape), newline added.
    RawLine(String),
    /// A `session/update` whose `sessionUpdate` is this kind (no ACP v1 kind), with a text
    /// `content`.
    UnknownUpdate(String),
    /// A response, `{"result": {}}`, to this id, which no request of the client used.
    StrayResponse(Value),
    /// This many `agent_message_chunk` updates of one character each, in one burst.
    Flood(u64),
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// The `acp` member of a scenario document, checked against its schema and typed; the error
/// names the member (`acp/turns/0/stop: ...`) and the rule broken.
pub fn from_document(document: &Value) -> Result<AcpScenario, String> {
    let Some(acp) = document.get("acp") else {
        return Err("has no \"acp\" member (the ACP surface plays only that)".to_string());
    };
    if let Err(errors) = dsh_protocol::schema::validate(ACP_SCENARIO_SCHEMA_PATH, acp) {
        let problems: Vec<String> = errors
            .iter()
            .map(|error| format!("acp{}: {}", error.instance_path, error.message))
            .collect();
        return Err(problems.join("; "));
    }
    serde_json::from_value(acp.clone()).map_err(|e| format!("acp: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_scenario_parses_round_trips_and_agrees_with_its_schema() {
        let document = json!({"acp": {"initialize_delay_ms": 5, "turns": [
            {"inject": [{"raw_line": "junk"}, {"unknown_update": "mood"},
                        {"stray_response": 99}, {"flood": 3}],
             "replies": [{"reasoning": "r", "text": "a", "pad_bytes": 2, "delay_ms": 9,
                          "reasoning_streams_after_ms": 4,
                          "tool_calls": [{"name": "bash", "arguments": {"command": "x"},
                                          "delay_ms": 1, "permission_id": "prompt"}]}],
             "stop": "max_tokens"},
            {"fail": "boom", "exit_mid_turn": 3}]}});
        let scenario = from_document(&document).unwrap();
        assert_eq!(scenario.initialize_delay_ms, 5);
        let turn = &scenario.turns[0];
        assert_eq!(turn.stop, AcpStop::MaxTokens);
        assert_eq!(turn.inject[3], Injection::Flood(3));
        assert_eq!(turn.replies[0].padded_text().as_deref(), Some("axx"));
        assert_eq!(
            turn.replies[0].tool_calls[0].permission_id,
            PermissionId::Prompt
        );
        assert_eq!(scenario.turns[1].fail.as_deref(), Some("boom"));
        let back = serde_json::to_value(&scenario).unwrap();
        assert_eq!(back, document["acp"], "serializes to exactly its input");
        assert_eq!(from_document(&json!({"acp": back})).unwrap(), scenario);
    }

    #[test]
    fn a_malformed_scenario_names_the_member_and_the_rule() {
        let error = from_document(&json!({"acp": {"turns": [{"stop": "bored"}]}})).unwrap_err();
        assert!(
            error.contains("acp/turns/0/stop") && error.contains("bored"),
            "{error}"
        );
        let error =
            from_document(&json!({"acp": {"turns": [{"replies": [{"txt": "a"}]}]}})).unwrap_err();
        assert!(
            error.contains("acp/turns/0/replies/0") && error.contains("txt"),
            "{error}"
        );
        let error =
            from_document(&json!({"acp": {"turns": [{"inject": [{"flood": -1}]}]}})).unwrap_err();
        assert!(error.contains("acp/turns/0/inject/0"), "{error}");
        assert!(from_document(&json!({"sdk": {}}))
            .unwrap_err()
            .contains("no \"acp\" member"));
    }
}
