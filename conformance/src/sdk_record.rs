//! `dsh-conformance sdk-scenario-from-transcript RECORDING`: turns a `record`ing of an SDK runtime
//! session (the real one, keyed and networked or not) into a keyless fake-dsh scenario: one
//! `sdk` turn per root turn, in order, with each model step's reasoning, text and tool calls and
//! the turn's end (kind and error). Replayed by fake-dsh (`FAKE_DSH_SCENARIO`) with the same
//! client requests, it gives the same wire shapes. Credentials (from the environment and by token
//! shape) are redacted from every string. Child sessions (background subagents) are not turned
//! into turns: a recording with them says so on stderr.

use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A recording directory written by `record` (its stdout.jsonl), or a stdout.jsonl file.
    pub recording: PathBuf,
    /// Write the scenario here instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

pub fn main(args: Args) -> ExitCode {
    match convert(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("dsh-conformance sdk-scenario-from-transcript: {message}");
            ExitCode::from(2)
        }
    }
}

fn convert(args: &Args) -> Result<(), String> {
    let path = if args.recording.is_dir() {
        args.recording.join("stdout.jsonl")
    } else {
        args.recording.clone()
    };
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (scenario, children) = scenario_from_stdout(&text)
        .map_err(|(line, why)| format!("{}: line {line}: {why}", path.display()))?;
    if children > 0 {
        eprintln!(
            "note: {children} child session(s) left out (background subagents are not replayed)"
        );
    }
    let redactor =
        crate::record::redact::Redactor::new(crate::record::redact::credential_values_from_env());
    let scenario = redactor.redact_json(&scenario);
    let rendered = format!("{scenario:#}\n");
    match &args.out {
        Some(out) => std::fs::write(out, rendered).map_err(|e| format!("{}: {e}", out.display())),
        None => {
            print!("{rendered}");
            Ok(())
        }
    }
}

/// The scenario (`{"sdk": {"turns": [...]}}`) and how many child sessions were left out, from the
/// runtime's stdout; a line that is not JSON is an error naming it (1-based).
pub fn scenario_from_stdout(text: &str) -> Result<(Value, usize), (usize, String)> {
    let mut roots: Vec<String> = Vec::new();
    let mut children: Vec<String> = Vec::new();
    let mut turns: Vec<Value> = Vec::new();
    let mut steps: Vec<Value> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let frame: Value =
            serde_json::from_str(line).map_err(|e| (index + 1, format!("not JSON: {e}")))?;
        let params = &frame["params"];
        if frame["method"] == "subagent.started" {
            children.push(
                params["childSessionId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
            if let Some(last) = turns.last_mut() {
                last["background_subagent"] = json!({});
            }
            continue;
        }
        if frame["method"] != "session.event" {
            continue;
        }
        let session = params["sessionId"].as_str().unwrap_or_default().to_string();
        if children.contains(&session) {
            continue;
        }
        if !roots.contains(&session) {
            roots.push(session);
        }
        let event = &params["event"];
        match event["type"].as_str() {
            Some("assistant/message") => steps.push(step(&event["data"]["message"])),
            Some("turn/end") => {
                turns.push(turn(std::mem::take(&mut steps), &event["data"]["reason"]))
            }
            _ => {}
        }
    }
    Ok((json!({"sdk": {"turns": turns}}), children.len()))
}

/// One model step from an `assistant/message`.
fn step(message: &Value) -> Value {
    let mut step = Map::new();
    let mut calls = Vec::new();
    for part in message["content"].as_array().into_iter().flatten() {
        match part["type"].as_str() {
            Some("reasoning") => {
                step.insert("reasoning".into(), part["text"].clone());
            }
            Some("text") => {
                step.insert("text".into(), part["text"].clone());
            }
            Some("tool-call") => {
                let arguments = part["arguments"]
                    .as_str()
                    .and_then(|text| serde_json::from_str(text).ok())
                    .unwrap_or_else(|| part["arguments"].clone());
                calls.push(json!({"name": part["name"], "arguments": arguments}));
            }
            _ => {}
        }
    }
    if !calls.is_empty() {
        step.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(step)
}

/// One turn: its steps and its end.
fn turn(steps: Vec<Value>, reason: &Value) -> Value {
    let mut turn = json!({"steps": steps, "end": reason["kind"].as_str().unwrap_or("completed")});
    if reason["kind"] == "error" {
        turn["error"] = reason["error"].clone();
    }
    turn
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_steps_and_ends_come_from_the_root_events() {
        let event = |session: &str, kind: &str, data: Value| {
            json!({"jsonrpc": "2.0", "method": "session.event",
                   "params": {"sessionId": session, "event": {"type": kind, "seq": 0, "data": data}}})
            .to_string()
        };
        let lines = [
            json!({"jsonrpc": "2.0", "id": 1, "result": {}}).to_string(),
            event(
                "s",
                "assistant/message",
                json!({"message": {"content": [
                {"type": "reasoning", "text": "r"},
                {"type": "tool-call", "id": "c", "name": "write", "arguments": "{\"file_path\":\"a\"}"}]}}),
            ),
            event("s", "turn/end", json!({"reason": {"kind": "completed"}})),
            event(
                "s",
                "turn/end",
                json!({"reason": {"kind": "error", "error": {"code": "AUTH"}}}),
            ),
        ];
        let (scenario, children) = scenario_from_stdout(&lines.join("\n")).unwrap();
        assert_eq!(children, 0);
        let turns = &scenario["sdk"]["turns"];
        assert_eq!(turns[0]["steps"][0]["reasoning"], "r");
        assert_eq!(
            turns[0]["steps"][0]["tool_calls"][0]["arguments"]["file_path"],
            "a"
        );
        assert_eq!(
            turns[1],
            json!({"steps": [], "end": "error", "error": {"code": "AUTH"}})
        );
        assert_eq!(scenario_from_stdout("{}\nnope").unwrap_err().0, 2);
    }
}
