//! The SDK surfaces' scenario language (`schemas/sdk-scenario.schema.json`): what each prompt's
//! turn does when fake-dsh plays `--profile sdk`, `sdk-minimal`, `dsh-jsonrpc-agent` or
//! `headless`, read from the `sdk` member of the file `FAKE_DSH_SCENARIO` names; a client case's
//! `runtime` (docs/sdk-clients.md). Kept apart from the open-design scenario types.
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
//! list get the default agent. Knobs marked "(adversarial)" make fake-dsh do what the real runtime
//! does not, for the client corpus's teardown and tolerance cases.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The `sdk` member of a scenario file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
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
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stdout_noise: Vec<String>,
    /// (adversarial) `shutdown` requests are journaled and never answered.
    #[serde(default, skip_serializing_if = "is_false")]
    pub ignore_shutdown: bool,
    /// (adversarial) stdin's EOF does not end the process (only a signal or the watchdog does).
    #[serde(default, skip_serializing_if = "is_false")]
    pub ignore_stdin_eof: bool,
    /// Every frame ends with `\r\n` instead of `\n` (a client must split on `\n` and trim `\r`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub crlf: bool,
    /// (adversarial) before each response, a success `{}` to an id no request used: the
    /// response's id in the other type where it has one (`"1"` before the answer to `1`, `1`
    /// before the answer to `"1"`), else `fake-dsh-stray`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub stray_responses: bool,
    /// (adversarial) before each error response, a success response `{}` whose id is the
    /// request's id in the other type (`4` -> `"4"`, `"4"` -> `4`; another string id gets none):
    /// the real runtime
    /// echoes ids exactly, so only a client matching responses loosely (a type-coerced id, or
    /// whatever response comes while it waits) takes it for the answer.
    #[serde(default, skip_serializing_if = "is_false")]
    pub coerced_id_decoys: bool,
    /// (adversarial) SIGTERM is journaled as ignored and does not end the process (only SIGKILL
    /// or the watchdog does): a client closing a stuck runtime must escalate to SIGKILL.
    #[serde(default, skip_serializing_if = "is_false")]
    pub ignore_sigterm: bool,
    /// Every frame holding a multi-byte UTF-8 character is written in two `write`s split inside
    /// its first such character, this many milliseconds apart (what a reader meets when a long
    /// frame crosses the pipe's buffer: a write over `PIPE_BUF` is not atomic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_in_char_ms: Option<u64>,
}

fn is_false(value: &bool) -> bool {
    !value
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// How a turn ends: the `turn/end` reason's `kind`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
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
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background_subagent: Option<SubagentScript>,
    /// (adversarial) the runtime signals itself during the turn, after its steps' pauses began:
    /// it dies mid-turn with no `turn/end` (SIGTERM: exit 0, as the real runtime's drain; SIGKILL:
    /// killed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal_self: Option<SelfSignal>,
    /// The prompt is refused as the real runtime refuses one in that situation: a `-32603` error
    /// response with its message, and nothing else (no receipt, no turn); the rest of the turn
    /// script is not played.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refuse: Option<Refusal>,
    /// Bytes of log lines written to stderr as the turn starts, before its first event (blocking
    /// while nobody drains the pipe: a pipe holds 64 KiB).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stderr_bytes: u64,
    /// A `session.status idle` for the prompt's session right before the prompt's receipt: the
    /// idle of an earlier turn, read late (an `idle` ends a prompt only after its receipt).
    #[serde(default, skip_serializing_if = "is_false")]
    pub idle_before_receipt: bool,
}

/// The real runtime's refusals of a `session/prompt` (docs/surface-sdk.md, "Methods").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Refusal {
    /// `SDK server is not initialized` (0.1.5 and 0.2.1, a prompt before `initialize` answered).
    NotInitialized,
    /// `session "ID" already exists` (0.1.5 and 0.2.1, a session id an earlier process stored).
    AlreadyExists,
    /// `SDK server is shutting down` (a prompt after `shutdown`).
    ShuttingDown,
}

impl Refusal {
    /// The real runtime's message for a prompt to session `session_id`.
    pub fn message(self, session_id: &str) -> String {
        match self {
            Refusal::NotInitialized => "SDK server is not initialized".to_string(),
            Refusal::AlreadyExists => format!("session {} already exists", Value::from(session_id)),
            Refusal::ShuttingDown => "SDK server is shutting down".to_string(),
        }
    }
}

/// A signal the runtime sends itself mid-turn.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SelfSignal {
    /// `TERM` or `KILL`.
    pub signal: SignalName,
    /// How long after the turn started.
    #[serde(default)]
    pub after_ms: u64,
}

/// The signals a scenario may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum SignalName {
    #[serde(rename = "TERM")]
    Term,
    #[serde(rename = "KILL")]
    Kill,
}

/// One model step: reasoning, text and tool calls, after an optional pause.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StepScript {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallScript>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub delay_ms: u64,
    /// The text padded with this many `x` (output bounds: one frame of megabytes).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pad_bytes: u64,
    /// The reasoning padded with this many `r` (headless streams it to stderr).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_pad_bytes: u64,
    /// The step's text is the prompt's text as the runtime received it (headless: the task),
    /// before `text` and the padding: a case can see what reached the runtime.
    #[serde(default, skip_serializing_if = "is_false")]
    pub echo_prompt: bool,
}

impl StepScript {
    /// The text with its padding, if the step has text or padding.
    pub fn padded_text(&self) -> Option<String> {
        pad(self.text.as_deref(), self.pad_bytes, 'x')
    }
    /// The reasoning with its padding.
    pub fn padded_reasoning(&self) -> Option<String> {
        pad(self.reasoning.as_deref(), self.reasoning_pad_bytes, 'r')
    }
}

fn pad(text: Option<&str>, bytes: u64, with: char) -> Option<String> {
    if bytes == 0 {
        return text.map(str::to_string);
    }
    let mut padded = text.unwrap_or_default().to_string();
    padded.extend(std::iter::repeat_n(
        with,
        usize::try_from(bytes).unwrap_or(usize::MAX),
    ));
    Some(padded)
}

/// One tool call: `write {file_path, content}` and `read {file_path}` act on real files in the
/// session's cwd; any other name fails as an unknown tool. `needs_approval` asks an approval
/// nobody on this wire can answer: the outcome is `unavailable` and the tool fails.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCallScript {
    pub name: String,
    #[serde(default)]
    pub arguments: Value,
    #[serde(default, skip_serializing_if = "is_false")]
    pub needs_approval: bool,
}

/// A background child session.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
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

/// The `sdk` member of a scenario document, typed; the error names what is wrong.
pub fn from_document(document: &Value) -> Result<SdkScenario, String> {
    let Some(sdk) = document.get("sdk") else {
        return Err("has no \"sdk\" member (the SDK surfaces play only that)".to_string());
    };
    serde_json::from_value(sdk.clone()).map_err(|e| format!("sdk: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn knobs_parse_and_a_scenario_round_trips() {
        let document = json!({"sdk": {"crlf": true, "ignore_shutdown": true,
            "turns": [{"steps": [{"text": "a", "pad_bytes": 3}],
                       "signal_self": {"signal": "KILL", "after_ms": 5}}]}});
        let scenario = from_document(&document).unwrap();
        assert!(scenario.crlf && scenario.ignore_shutdown && !scenario.ignore_stdin_eof);
        let turn = &scenario.turns[0];
        assert_eq!(turn.steps[0].padded_text().as_deref(), Some("axxx"));
        assert_eq!(turn.signal_self.as_ref().unwrap().signal, SignalName::Kill);
        let back = serde_json::to_value(&scenario).unwrap();
        assert_eq!(
            from_document(&json!({"sdk": back})).unwrap().turns[0].steps[0].pad_bytes,
            3
        );
        assert!(
            from_document(&json!({"sdk": {"turns": [{"end": "bored"}]}}))
                .unwrap_err()
                .contains("bored")
        );
        let deeper = json!({"sdk": {"ignore_sigterm": true, "coerced_id_decoys": true,
            "split_in_char_ms": 5, "turns": [{"refuse": "already-exists", "stderr_bytes": 9,
            "idle_before_receipt": true, "steps": [{"echo_prompt": true}]}]}});
        let deeper = from_document(&deeper).unwrap();
        assert!(deeper.ignore_sigterm && deeper.coerced_id_decoys);
        assert_eq!(deeper.split_in_char_ms, Some(5));
        let refusal = deeper.turns[0].refuse.unwrap();
        assert_eq!(refusal.message("s-1"), "session \"s-1\" already exists");
        assert_eq!(
            Refusal::NotInitialized.message("x"),
            "SDK server is not initialized"
        );
        assert!(deeper.turns[0].steps[0].echo_prompt && deeper.turns[0].idle_before_receipt);
        assert!(from_document(&json!({}))
            .unwrap_err()
            .contains("no \"sdk\""));
    }
}
