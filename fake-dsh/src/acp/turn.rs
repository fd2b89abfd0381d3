//! One prompt's turn as `session/update`s (facts F5.3-F5.8, F8.1): each model reply is its
//! thought chunk, message chunk (both whole blocks sharing the reply's `messageId`),
//! `usage_update`, then each tool call in order; then the stop reason, a `-32603` turn failure,
//! or `cancelled` when a cancel interrupts a wait (the reasoning streamed so far first, as a
//! thought chunk). A scenario's injections (adversarial) come before the first reply.

use super::state::{lock, Agent, Session, Turn, Woken};
use super::tools::{self, Ended};
use super::wire::wire;
use crate::sdk::session::Persona;
use dsh_formats::acp_scenario::{AcpStop, AcpTurn, Injection, Reply};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Stop(AcpStop),
    Cancelled,
    /// `-32603 "Internal error: turn failed: <message>"`.
    Failed(String),
    /// (adversarial) the process exits with this status, the prompt unanswered.
    Exit(i32),
}

/// The message of 0.2.1's failure on tool arguments that are not JSON (F5.8).
const BAD_TOOL_JSON: &str = "DeepSeek Messages stream: tool input is invalid JSON";

/// The failure of every prompt when `DEEPSEEK_API_KEY` is unset (F1.2, `W:r21.no-key`).
pub const NO_KEY: &str = "llm-deepseek: no API key for provider route \"deepseek-official\"; \
    store DEEPSEEK_API_KEY through the credentials service (the web Models page writes it), or \
    export DEEPSEEK_API_KEY in the launching environment";

/// Plays a turn to its end.
pub fn play(
    agent: &Agent,
    session: &Session,
    turn: &Arc<Turn>,
    prompt: &str,
    script: &AcpTurn,
) -> Outcome {
    if !agent.has_key {
        return Outcome::Failed(NO_KEY.to_string());
    }
    grow(session, prompt.len());
    for injection in &script.inject {
        inject(session, injection);
    }
    for (index, reply) in script.replies.iter().enumerate() {
        // The first model request goes out as the prompt is accepted, even when a cancel is
        // already on its way (it counts for the tool call ids); a later one only if the turn
        // still runs.
        if index > 0 && turn.is_cancelled() {
            return Outcome::Cancelled;
        }
        if let Some(ended) = play_reply(agent, session, turn, reply) {
            return ended;
        }
    }
    if turn.is_cancelled() {
        return Outcome::Cancelled;
    }
    if let Some(code) = script.exit_mid_turn {
        return Outcome::Exit(code);
    }
    if let Some(message) = &script.fail {
        agent.model_request();
        return Outcome::Failed(message.clone());
    }
    Outcome::Stop(script.stop)
}

/// One reply: the model's time, its chunks and usage, its tool calls. `Some` when the turn
/// ends in it.
fn play_reply(
    agent: &Agent,
    session: &Session,
    turn: &Arc<Turn>,
    reply: &Reply,
) -> Option<Outcome> {
    let request = agent.model_request();
    if reply.delay_ms > 0 {
        let started = Instant::now();
        if turn.wait(Some(Duration::from_millis(reply.delay_ms))) == Woken::Cancelled {
            let streamed = reply
                .reasoning_streams_after_ms
                .is_some_and(|after| started.elapsed() >= Duration::from_millis(after));
            if let Some(reasoning) = reply.reasoning.as_deref().filter(|_| streamed) {
                chunk(session, "agent_thought_chunk", &new_message_id(), reasoning);
            }
            return Some(Outcome::Cancelled);
        }
    }
    let bad_json = reply
        .tool_calls
        .iter()
        .any(|call| call.arguments.is_string());
    if bad_json && agent.persona == Persona::V021 {
        return Some(Outcome::Failed(BAD_TOOL_JSON.to_string()));
    }
    let message_id = new_message_id();
    let text = reply.padded_text();
    if let Some(reasoning) = reply.reasoning.as_deref().filter(|r| !r.is_empty()) {
        chunk(session, "agent_thought_chunk", &message_id, reasoning);
    }
    if let Some(text) = text.as_deref().filter(|t| !t.is_empty()) {
        chunk(session, "agent_message_chunk", &message_id, text);
    }
    let reply_size = reply.reasoning.as_deref().map_or(0, str::len)
        + text.as_deref().map_or(0, str::len)
        + reply
            .tool_calls
            .iter()
            .map(|c| c.arguments.to_string().len())
            .sum::<usize>();
    let used = grow(session, reply_size);
    update(
        session,
        json!({"sessionUpdate": "usage_update", "used": used, "size": 1_000_000}),
    );
    for (index, call) in reply.tool_calls.iter().enumerate() {
        let id = agent.tool_id(request, index);
        if tools::call(agent, session, turn, &id, call) == Ended::Cancelled {
            return Some(Outcome::Cancelled);
        }
    }
    None
}

/// The session's context grows by about a token per four bytes: the new `used`.
fn grow(session: &Session, bytes: usize) -> u64 {
    let mut state = lock(&session.state);
    state.used += 10 + (bytes as u64).div_ceil(4);
    state.used
}

fn new_message_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn update(session: &Session, update: Value) {
    wire().notify(
        "session/update",
        json!({"sessionId": session.id, "update": update}),
    );
}

fn chunk(session: &Session, kind: &str, message_id: &str, text: &str) {
    update(
        session,
        json!({"sessionUpdate": kind, "messageId": message_id,
               "content": {"type": "text", "text": text}}),
    );
}

/// (adversarial) One injected frame.
fn inject(session: &Session, injection: &Injection) {
    match injection {
        Injection::RawLine(line) => wire().raw_line(line),
        Injection::UnknownUpdate(kind) => update(
            session,
            json!({"sessionUpdate": kind,
                   "content": {"type": "text", "text": "an update kind no ACP client knows"}}),
        ),
        Injection::StrayResponse(id) => wire().respond(id, json!({})),
        Injection::Flood(count) => {
            let message_id = new_message_id();
            for _ in 0..*count {
                chunk(session, "agent_message_chunk", &message_id, ".");
            }
        }
    }
}
