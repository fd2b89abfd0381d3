//! One tool call of a turn, as the real runtime reports it (facts F5.5, F5.6, F7): its
//! `tool_call` (`kind` always `other`, `status` `in_progress`, `rawInput` the arguments), the
//! permission request when it asks for a wider sandbox, then its `tool_call_update`
//! (`completed` or `failed`, one text content). `write`, `read` and `todo_write` act for real in
//! the session's cwd (writes never outside it, never through a link: [`crate::project`]);
//! `bash` never runs anything: in `workspace-write` it fails as on a host without a sandbox
//! backend, and where the real one would run it, it reports `(no output)`.

use super::permission::{self, Decision};
use super::state::{lock, Agent, SandboxMode, Session, Turn, Woken};
use super::wire::wire;
use crate::sdk::session::{resolve, Persona};
use dsh_formats::acp_scenario::AcpToolCall;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How a tool call ended for the turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The turn goes on.
    Done,
    /// The turn was cancelled during the call.
    Cancelled,
}

/// The text a call cancelled while its tool runs fails with (not observed on the real runtime:
/// fake-dsh's own, docs/surface-acp.md).
pub const CANCELLED_TOOL: &str = "Error: the tool call was cancelled";

const NO_SANDBOX: &str = "Error: sandbox mode \"workspace-write\" is requested but no sandbox \
    backend is usable on this host; refusing to run the command unconfined. Install bubblewrap \
    or run a Landlock-enforcing kernel (Linux), ensure sandbox-exec is usable (macOS), or ensure \
    the ACL restricted-token runner can start (Windows) — otherwise switch the consumer to \
    danger-full-access.";

const READ_ONLY: &str = "Error: [sandbox: file access denied under read-only mode]\n[sandbox: \
    escalation available — retry this exact operation once with sandbox_permissions (the \
    narrowest wider mode that suffices) + justification; the approval prompt asks the user]";

const NOT_READ: &str = "file has not been read — read the file, then retry";

/// Reports and runs one tool call.
pub fn call(
    agent: &Agent,
    session: &Session,
    turn: &Arc<Turn>,
    id: &str,
    call: &AcpToolCall,
) -> Ended {
    update(
        session,
        json!({"sessionUpdate": "tool_call", "toolCallId": id, "title": call.name,
               "kind": "other", "status": "in_progress", "rawInput": call.arguments}),
    );
    let outcome = if !call.arguments.is_object() {
        Some(Err(
            "Error: invalid arguments: \"arguments\" must be an object".to_string(),
        ))
    } else {
        match sandbox(agent, session, turn, id, call) {
            Gate::Run { mode } => run_slowly(session, turn, call, mode),
            Gate::Fail(text) => Some(Err(text)),
            Gate::Cancelled(text) => {
                finish(session, id, Err(text));
                return Ended::Cancelled;
            }
        }
    };
    match outcome {
        Some(outcome) => {
            finish(session, id, outcome);
            Ended::Done
        }
        None => {
            finish(session, id, Err(CANCELLED_TOOL.to_string()));
            Ended::Cancelled
        }
    }
}

/// What the sandbox says about a call.
enum Gate {
    /// Run in this mode (the session's, or the one the client allowed).
    Run {
        mode: SandboxMode,
    },
    Fail(String),
    Cancelled(String),
}

/// Whether the call may run (F7.1): a `sandbox_permissions` wider than the session's mode asks
/// the client; 0.1.5 refuses an escalation that is not wider (`W:r15.danger-escalate`,
/// `W:r15.escwrite-ws`), 0.2.1 runs it.
fn sandbox(
    agent: &Agent,
    session: &Session,
    turn: &Arc<Turn>,
    id: &str,
    call: &AcpToolCall,
) -> Gate {
    let requested = call.arguments["sandbox_permissions"]
        .as_str()
        .and_then(SandboxMode::named);
    match requested {
        Some(target) if target > agent.mode => {
            let decision = permission::ask(
                agent,
                session,
                turn,
                id,
                &call.name,
                target.name(),
                call.permission_id,
            );
            match decision {
                Decision::Allowed => Gate::Run { mode: target },
                Decision::Denied(text) => Gate::Fail(text),
                Decision::Cancelled(text) => Gate::Cancelled(text),
            }
        }
        Some(target) if agent.persona == Persona::V015 => Gate::Fail(format!(
            "Error: sandbox escalation to \"{}\" is not strictly wider than this call's current \
             \"{}\" mode",
            target.name(),
            agent.mode.name()
        )),
        Some(target) => Gate::Run {
            mode: target.max(agent.mode),
        },
        None => Gate::Run { mode: agent.mode },
    }
}

/// Waits the call's `delay_ms` (none when cancelled meanwhile), then runs it.
fn run_slowly(
    session: &Session,
    turn: &Arc<Turn>,
    call: &AcpToolCall,
    mode: SandboxMode,
) -> Option<Result<String, String>> {
    if call.delay_ms > 0
        && turn.wait(Some(Duration::from_millis(call.delay_ms))) == Woken::Cancelled
    {
        return None;
    }
    Some(run(session, call, mode))
}

fn update(session: &Session, update: Value) {
    wire().notify(
        "session/update",
        json!({"sessionId": session.id, "update": update}),
    );
}

/// The call's `tool_call_update`.
fn finish(session: &Session, id: &str, outcome: Result<String, String>) {
    let (status, text) = match outcome {
        Ok(text) => ("completed", text),
        Err(text) => ("failed", text),
    };
    update(
        session,
        json!({"sessionUpdate": "tool_call_update", "toolCallId": id, "status": status,
               "content": [{"type": "content", "content": {"type": "text", "text": text}}]}),
    );
}

/// Runs a tool: its result text, or its error text.
fn run(session: &Session, call: &AcpToolCall, mode: SandboxMode) -> Result<String, String> {
    let arguments = &call.arguments;
    match call.name.as_str() {
        "write" => write(session, arguments, mode),
        "read" => read(session, arguments),
        "todo_write" => Ok(todo_summary(arguments)),
        "bash" if mode == SandboxMode::DangerFullAccess => Ok("(no output)".to_string()),
        "bash" => Err(NO_SANDBOX.to_string()),
        other => Err(format!("Error: unknown tool {}", Value::from(other))),
    }
}

/// The file a call names, absolute.
fn target(session: &Session, arguments: &Value) -> Result<PathBuf, String> {
    let path = arguments["file_path"]
        .as_str()
        .ok_or_else(|| "Error: file_path is required".to_string())?;
    Ok(resolve(&session.cwd, path))
}

fn write(session: &Session, arguments: &Value, mode: SandboxMode) -> Result<String, String> {
    if mode == SandboxMode::ReadOnly {
        return Err(READ_ONLY.to_string());
    }
    let path = target(session, arguments)?;
    let mut state = lock(&session.state);
    let existing = path.symlink_metadata().is_ok_and(|meta| meta.is_file());
    if existing && !state.known_files.contains(&path) {
        return Err(format!(
            "Error: cannot modify {}: {NOT_READ}",
            Value::from(path.display().to_string())
        ));
    }
    let content = arguments["content"].as_str().unwrap_or_default();
    crate::project::write_inside(&session.cwd, &path, content.as_bytes())
        .map_err(|e| format!("Error: cannot write {}: {e}", path.display()))?;
    state.known_files.insert(path.clone());
    let done = if existing { "Updated" } else { "Created" };
    Ok(format!(
        "<path>{}</path>\n<type>file</type>\n<content>\n{done} file\n</content>",
        path.display()
    ))
}

fn read(session: &Session, arguments: &Value) -> Result<String, String> {
    let path = target(session, arguments)?;
    // Both releases: `Error: cannot read "<path>": not found` (observed 2026-12-06).
    let text = std::fs::read_to_string(&path).map_err(|e| {
        let why = match e.kind() {
            std::io::ErrorKind::NotFound => "not found".to_string(),
            _ => e.to_string(),
        };
        format!(
            "Error: cannot read {}: {why}",
            Value::from(path.display().to_string())
        )
    })?;
    lock(&session.state).known_files.insert(path.clone());
    let lines: Vec<String> = text
        .lines()
        .enumerate()
        .map(|(index, line)| format!("{}: {line}", index + 1))
        .collect();
    Ok(format!(
        "<path>{}</path>\n<type>file</type>\n<content>\n{}\n\n(End of file - total {} lines)\n</content>",
        path.display(),
        lines.join("\n"),
        lines.len()
    ))
}

/// `todo_write`'s result: the list's counts (F5.6, `W:tools`).
fn todo_summary(arguments: &Value) -> String {
    let todos = arguments["todos"].as_array().cloned().unwrap_or_default();
    let count = |status: &str| todos.iter().filter(|t| t["status"] == status).count();
    format!(
        "Updated todo list: {} pending, {} in progress, {} completed.",
        count("pending"),
        count("in_progress"),
        count("completed")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_todo_list_is_counted() {
        let todos = json!({"todos": [{"content": "a", "status": "in_progress"},
                                     {"content": "b", "status": "pending"}]});
        assert_eq!(
            todo_summary(&todos),
            "Updated todo list: 1 pending, 1 in progress, 0 completed."
        );
    }
}
