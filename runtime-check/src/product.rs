//! The product proof of spec 8 as runtime checks: a first turn writes an HTML file in the
//! project, and a second process cold-resumes the same session and edits the same file. They are
//! judged only when the runtime's model calls tools (a `tool_call` frame in the turn); a turn that
//! calls none, or does not complete, makes them inconclusive. With a real dsh the calls come from
//! check-runtime's own model server (`default_script`: on a "green" prompt it reads the file,
//! then rewrites it).

use super::observed::Observed;
use super::turn::{self, Plan, TurnRecord};
use super::verdict::{fail, inconclusive, no_result, pass, Outcome};
use super::world::{Target, World};
use dsh_engine::process::SpawnError;
use serde_json::Value;

/// The second turn's request (the prompt canary stays in it, so the stderr checks still hold).
fn second_prompt(world: &World) -> String {
    format!("Make the page green. {}", world.prompt_canary)
}

/// Why a turn cannot prove anything about files, if it cannot.
fn unusable(record: &TurnRecord, which: &str) -> Option<Outcome> {
    let Some(result) = record.result_frame() else {
        return Some(inconclusive(format!("{which} turn: {}", no_result(record))));
    };
    let status = result.get("status").and_then(Value::as_str).unwrap_or("?");
    if status != "completed" {
        return Some(inconclusive(format!(
            "{which} turn ended {status}, so no file can be expected"
        )));
    }
    let calls_tools = record
        .own_frames()
        .any(|line| line.frame_type() == Some("tool_call"));
    (!calls_tools).then(|| {
        inconclusive(format!(
            "{which} turn completed without any tool_call: the model called no tool"
        ))
    })
}

/// The session id the turn's `session` frame announced.
fn session_id(record: &TurnRecord) -> Option<String> {
    record
        .own_frames()
        .find(|line| line.frame_type() == Some("session"))
        .and_then(|line| line.object())
        .and_then(|frame| frame.get("session_id"))
        .and_then(Value::as_str)
        .map(String::from)
}

/// `rt.product-writes-html`, judged on the default turn.
pub fn writes_html(target: &Target) -> Result<Outcome, SpawnError> {
    let Observed {
        world,
        record,
        html,
    } = target.observed.default_turn(target)?;
    if let Some(outcome) = unusable(record, "the") {
        return Ok(outcome);
    }
    Ok(match html.first() {
        Some((file, _)) => pass(format!(
            "wrote {}",
            file.strip_prefix(&world.project).unwrap_or(file).display()
        )),
        None => fail("the turn completed with tool calls but left no .html file in the project"),
    })
}

/// `rt.product-cold-resume-edits`: a second process resumes the default turn's session, in its
/// world.
pub fn cold_resume_edits(target: &Target) -> Result<Outcome, SpawnError> {
    let Observed {
        world,
        record: first,
        html,
    } = target.observed.default_turn(target)?;
    if let Some(outcome) = unusable(first, "first") {
        return Ok(outcome);
    }
    let Some((file, before)) = html.first() else {
        return Ok(inconclusive("the first turn left no .html file to edit"));
    };
    let Some(session) = session_id(first) else {
        return Ok(fail("the first turn completed without a session frame"));
    };
    let plan = Plan {
        resume: Some(session.clone()),
        request_id: Some(format!("{}-resume", world.request_id)),
        prompt: Some(second_prompt(world)),
        ..Plan::default()
    };
    let second = turn::run(target, world, &plan)?;
    if let Some(outcome) = unusable(&second, "the resumed") {
        return Ok(outcome);
    }
    let resumed = session_id(&second);
    if resumed.as_deref() != Some(session.as_str()) {
        return Ok(fail(format!(
            "the resumed turn announced session {resumed:?}, not {session}"
        )));
    }
    let name = file.strip_prefix(&world.project).unwrap_or(file).display();
    match std::fs::read(file) {
        Err(error) => Ok(fail(format!(
            "{name} is gone after the resumed turn: {error}"
        ))),
        Ok(after) if &after == before => {
            Ok(fail(format!("the resumed turn left {name} unchanged")))
        }
        Ok(_) => Ok(pass(format!(
            "a second process resumed {session} and edited {name}"
        ))),
    }
}
