//! `session/request_permission`, the one request dsh sends its client (facts F7): asked when a
//! tool call wants a wider sandbox than the session's mode, after the call's `tool_call` and
//! before its `tool_call_update`, with ids 0, 1, 2, ... per process; two options only
//! (`allow-once`, `reject-once`); and what each answer does. Only `allow-once` allows.

use super::rpc::Answer;
use super::state::{lock, Agent, Session, Turn, Woken};
use super::wire::wire;
use crate::sdk::session::Persona;
use dsh_formats::acp_scenario::PermissionId;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// How a permission request ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Allowed,
    /// The call fails with this text; the turn goes on.
    Denied(String),
    /// The turn was cancelled while waiting: the call fails with this text, then the turn ends
    /// `cancelled`.
    Cancelled(String),
}

/// What the call asks to widen: `this command` (`bash`) or `this operation`.
fn what(tool: &str) -> &'static str {
    if tool == "bash" {
        "this command"
    } else {
        "this operation"
    }
}

/// Asks the client, waits for its answer (or a cancel), and says what it decided.
pub fn ask(
    agent: &Agent,
    session: &Session,
    turn: &Arc<Turn>,
    tool_call_id: &str,
    tool: &str,
    target: &str,
    id_choice: PermissionId,
) -> Decision {
    let id = match id_choice {
        PermissionId::Counter => json!(agent.next_request_id.fetch_add(1, Ordering::SeqCst)),
        PermissionId::Prompt => turn.prompt_id.clone(),
    };
    lock(&agent.pending).insert(id.to_string(), turn.clone());
    wire().request(
        &id,
        "session/request_permission",
        json!({"sessionId": session.id, "toolCall": {"toolCallId": tool_call_id},
               "options": [
                   {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
                   {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"}]}),
    );
    // The request stays pending until the client answers it, even after a cancel: a late
    // answer is taken silently (F8.1).
    let woken = turn.wait(None);
    let cancelled = format!("Error: approval for escalating to \"{target}\" was cancelled");
    match woken {
        Woken::Cancelled => Decision::Cancelled(cancelled),
        Woken::Answered(Answer::Result(result)) => decide(agent.persona, &result, tool, target),
        Woken::Answered(_) | Woken::Elapsed => Decision::Denied(format!(
            "Error: sandbox escalation to \"{target}\" requires approval, but no approval \
             channel is available"
        )),
    }
}

/// What a result does (F7.3): `allow-once` allows; `cancelled` fails the call as cancelled;
/// anything else is a rejection.
fn decide(persona: Persona, result: &Value, tool: &str, target: &str) -> Decision {
    let outcome = &result["outcome"];
    if outcome["outcome"] == "selected" && outcome["optionId"] == "allow-once" {
        return Decision::Allowed;
    }
    if outcome["outcome"] == "cancelled" {
        return Decision::Denied(format!(
            "Error: approval for escalating to \"{target}\" was cancelled"
        ));
    }
    let tail = match persona {
        Persona::V015 => "",
        _ => "; it stays denied, so stop and explain instead of working around it",
    };
    Decision::Denied(format!(
        "Error: the user rejected escalating {} to \"{target}\"{tail}",
        what(tool)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_answer_does_what_the_real_one_does() {
        let allow = json!({"outcome": {"outcome": "selected", "optionId": "allow-once"}});
        assert_eq!(
            decide(Persona::V021, &allow, "bash", "danger-full-access"),
            Decision::Allowed
        );
        let bogus = json!({"outcome": {"outcome": "selected", "optionId": "no-such-option"}});
        assert_eq!(
            decide(Persona::V021, &bogus, "bash", "danger-full-access"),
            Decision::Denied(
                "Error: the user rejected escalating this command to \"danger-full-access\"; it \
                 stays denied, so stop and explain instead of working around it"
                    .into()
            )
        );
        assert_eq!(
            decide(Persona::V015, &bogus, "write", "workspace-write"),
            Decision::Denied(
                "Error: the user rejected escalating this operation to \"workspace-write\"".into()
            )
        );
        let cancelled = json!({"outcome": {"outcome": "cancelled"}});
        assert_eq!(
            decide(Persona::V021, &cancelled, "bash", "danger-full-access"),
            Decision::Denied(
                "Error: approval for escalating to \"danger-full-access\" was cancelled".into()
            )
        );
    }
}
