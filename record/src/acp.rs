//! A `record`ing of an ACP session (`dsh --profile acp`: the client's stdin and the agent's
//! stdout) turned into the keyless `acp` scenario fake-dsh replays (docs/surface-acp.md): one
//! turn per prompt the agent accepted, in the order the client sent them, each with the model's
//! replies as the updates show them (a reply's thought and message chunks share its
//! `messageId`; a `usage_update` or a chunk after its tool calls starts the next one; a tool call
//! is its `title` and `rawInput`) and how the turn ended (`stopReason`, or the `-32603` turn
//! failure's message). Tool results and permission requests are not kept: fake-dsh runs the
//! tools itself and asks where the arguments ask for a wider sandbox. [`redacted`] takes the
//! credentials out as `sdk-scenario-from-transcript` does ([`crate::sdk::redact_scenario`]);
//! [`scenario_text`] is `acp-scenario-from-transcript`.

use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::path::Path;

/// The prefix of a turn failure's message (facts F5.8).
const TURN_FAILED: &str = "Internal error: turn failed: ";

/// One prompt's turn as the transcript goes.
#[derive(Debug, Default)]
struct Turn {
    replies: Vec<Map<String, Value>>,
    /// The current reply's `messageId`, once a chunk named it.
    message_id: Option<String>,
    /// The current reply has had its tool calls (or its usage): the next chunk or usage starts
    /// another reply.
    closed: bool,
    end: Option<Value>,
}

impl Turn {
    /// The reply an update belongs to: the current one, or a new one.
    fn reply(&mut self, starts_new: bool) -> &mut Map<String, Value> {
        if starts_new || self.replies.is_empty() {
            self.replies.push(Map::new());
            self.message_id = None;
            self.closed = false;
        }
        self.replies.last_mut().expect("a reply was just pushed")
    }

    fn update(&mut self, update: &Value, notes: &mut Vec<String>) {
        let kind = update["sessionUpdate"].as_str().unwrap_or_default();
        match kind {
            "agent_thought_chunk" | "agent_message_chunk" => {
                let id = update["messageId"].as_str().map(str::to_string);
                let other_message = self.message_id.is_some() && self.message_id != id;
                let reply = self.reply(self.closed || other_message);
                let field = if kind == "agent_thought_chunk" {
                    "reasoning"
                } else {
                    "text"
                };
                let text = update["content"]["text"].as_str().unwrap_or_default();
                let joined = format!(
                    "{}{text}",
                    reply.get(field).and_then(Value::as_str).unwrap_or("")
                );
                reply.insert(field.to_string(), json!(joined));
                self.message_id = id;
            }
            "usage_update" => {
                self.reply(self.closed);
                self.closed = true;
            }
            "tool_call" => {
                let call = json!({"name": update["title"], "arguments": update["rawInput"]});
                let reply = self.reply(false);
                let calls = reply.entry("tool_calls").or_insert_with(|| json!([]));
                if let Some(calls) = calls.as_array_mut() {
                    calls.push(call);
                }
                self.closed = true;
            }
            "tool_call_update" => {}
            other => notes.push(format!("an update of kind {other:?} is not kept")),
        }
    }

    /// The scenario turn.
    fn finish(self) -> Value {
        let mut turn = json!({"replies": self.replies});
        if let Some(Value::Object(end)) = self.end {
            for (key, value) in end {
                turn[key] = value;
            }
        }
        turn
    }
}

/// `acp-scenario-from-transcript`: the scenario of the recording directory `recording` (its
/// stdin.jsonl and stdout.jsonl, read bounded), redacted, as pretty JSON; every note about what
/// it left out goes to `note`.
pub fn scenario_text(recording: &Path, note: &mut dyn FnMut(&str)) -> Result<String, String> {
    if !recording.is_dir() {
        return Err(format!(
            "{}: not a recording directory (an ACP scenario needs the client's stdin.jsonl as well \
             as the agent's stdout.jsonl)",
            recording.display()
        ));
    }
    let stdin = crate::sdk::read_recording(&recording.join("stdin.jsonl"))?;
    let stdout_path = recording.join("stdout.jsonl");
    let stdout = crate::sdk::read_recording(&stdout_path)?;
    let (scenario, notes) = scenario_from_recording(&stdin, &stdout)
        .map_err(|(line, why)| format!("{}: line {line}: {why}", stdout_path.display()))?;
    for line in notes {
        note(&line);
    }
    let scenario = redacted(&scenario, dsh_results::redact::credential_values_from_env());
    Ok(format!("{scenario:#}\n"))
}

/// The scenario (`{"acp": {"turns": [...]}}`) and notes on what it could not keep, from the
/// client's stdin and the agent's stdout; a stdout line that is not JSON is an error naming it
/// (1-based).
pub fn scenario_from_recording(
    stdin: &str,
    stdout: &str,
) -> Result<(Value, Vec<String>), (usize, String)> {
    let mut notes = Vec::new();
    let prompts = prompts_of(stdin);
    let mut turns: HashMap<String, Turn> = HashMap::new();
    let mut current: HashMap<String, String> = HashMap::new();
    let mut refused = std::collections::HashSet::new();
    let mut waiting = prompts.clone();
    for (index, line) in stdout.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let frame: Value = serde_json::from_str(line)
            .map_err(|e| (index + 1, format!("not a JSON-RPC frame: {e}")))?;
        if frame["method"] == "session/update" {
            let session = frame["params"]["sessionId"].as_str().unwrap_or_default();
            let Some(prompt) = current.get(session).cloned().or_else(|| {
                let (id, _) = waiting.iter().find(|(_, s)| s == session)?;
                current.insert(session.to_string(), id.clone());
                Some(id.clone())
            }) else {
                notes.push(format!("line {}: an update outside any prompt", index + 1));
                continue;
            };
            let turn = turns.entry(prompt).or_default();
            turn.update(&frame["params"]["update"], &mut notes);
        } else if frame.get("method").is_none() {
            let id = frame["id"].to_string();
            let Some(at) = waiting.iter().position(|(prompt, _)| *prompt == id) else {
                continue;
            };
            let (_, session) = waiting.remove(at);
            current.remove(&session);
            let end = ending(&frame, &mut notes);
            match end {
                Some(end) => turns.entry(id).or_default().end = Some(end),
                None => {
                    refused.insert(id);
                }
            }
        }
    }
    for (id, _) in &waiting {
        notes.push(format!(
            "prompt {id} was never answered: its turn is kept as far as it went"
        ));
    }
    let turns: Vec<Value> = prompts
        .iter()
        .filter(|(id, _)| !refused.contains(id))
        .map(|(id, _)| turns.remove(id).unwrap_or_default().finish())
        .collect();
    Ok((json!({"acp": {"turns": turns}}), notes))
}

/// The prompts in the order the client sent them: (id as JSON text, session id).
fn prompts_of(stdin: &str) -> Vec<(String, String)> {
    stdin
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line.trim()).ok())
        .filter(|frame| frame["method"] == "session/prompt" && frame.get("id").is_some())
        .map(|frame| {
            let session = frame["params"]["sessionId"].as_str().unwrap_or_default();
            (frame["id"].to_string(), session.to_string())
        })
        .collect()
}

/// The scenario with every credential taken out: the credential-named values of `env_secrets`
/// and the token shapes found in it, raw or encoded.
pub fn redacted(scenario: &Value, env_secrets: Vec<String>) -> Value {
    crate::sdk::redact_scenario(scenario, env_secrets)
}

/// How a prompt's response ends its turn: the stop reason or failure as scenario members, or
/// none for a refused prompt (no turn).
fn ending(response: &Value, notes: &mut Vec<String>) -> Option<Value> {
    if let Some(stop) = response["result"]["stopReason"].as_str() {
        return Some(match stop {
            "max_tokens" => json!({"stop": "max_tokens"}),
            "cancelled" => {
                notes.push(format!(
                    "prompt {} was cancelled: replayed as its replies so far, ending end_turn",
                    response["id"]
                ));
                json!({})
            }
            _ => json!({}),
        });
    }
    let message = response["error"]["message"].as_str().unwrap_or_default();
    match response["error"]["code"].as_i64() {
        Some(-32603) => {
            let reason = message.strip_prefix(TURN_FAILED).unwrap_or(message);
            Some(json!({"fail": reason}))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(session: &str, update: Value) -> String {
        json!({"jsonrpc": "2.0", "method": "session/update",
               "params": {"sessionId": session, "update": update}})
        .to_string()
    }

    #[test]
    fn replies_stop_reasons_failures_and_refusals_come_from_the_wire() {
        let prompt = |id: i64, text: &str| {
            json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
                   "params": {"sessionId": "S", "prompt": [{"type": "text", "text": text}]}})
            .to_string()
        };
        let stdin = [
            prompt(3, "a"),
            prompt(4, "b"),
            prompt(5, "c"),
            prompt(6, "d"),
        ]
        .join("\n");
        let chunk = |kind: &str, id: &str, text: &str| {
            update(
                "S",
                json!({"sessionUpdate": kind, "messageId": id,
                               "content": {"type": "text", "text": text}}),
            )
        };
        let usage = update(
            "S",
            json!({"sessionUpdate": "usage_update", "used": 1, "size": 9}),
        );
        let stdout = [
            chunk("agent_thought_chunk", "m1", "Plan."),
            chunk("agent_message_chunk", "m1", "Writing."),
            usage.clone(),
            update(
                "S",
                json!({"sessionUpdate": "tool_call", "toolCallId": "t", "title": "write",
                               "kind": "other", "status": "in_progress",
                               "rawInput": {"file_path": "a.txt", "content": "x"}}),
            ),
            update(
                "S",
                json!({"sessionUpdate": "tool_call_update", "toolCallId": "t",
                               "status": "completed", "content": []}),
            ),
            chunk("agent_message_chunk", "m2", "Done."),
            usage.clone(),
            json!({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}}).to_string(),
            json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32602,
                   "message": "Invalid params: empty prompt"}})
            .to_string(),
            chunk("agent_message_chunk", "m3", "Cut"),
            usage,
            json!({"jsonrpc": "2.0", "id": 5, "result": {"stopReason": "max_tokens"}}).to_string(),
            json!({"jsonrpc": "2.0", "id": 6, "error": {"code": -32603,
                   "message": "Internal error: turn failed: model-server: scripted HTTP 401"}})
            .to_string(),
        ]
        .join("\n");
        let (scenario, notes) = scenario_from_recording(&stdin, &stdout).unwrap();
        assert_eq!(
            scenario,
            json!({"acp": {"turns": [
                {"replies": [{"reasoning": "Plan.", "text": "Writing.", "tool_calls":
                    [{"name": "write", "arguments": {"file_path": "a.txt", "content": "x"}}]},
                    {"text": "Done."}]},
                {"replies": [{"text": "Cut"}], "stop": "max_tokens"},
                {"replies": [], "fail": "model-server: scripted HTTP 401"}]}})
        );
        assert!(notes.is_empty(), "{notes:?}");
        dsh_formats::acp_scenario::from_document(&scenario).unwrap();
        assert_eq!(scenario_from_recording("", "{not json").unwrap_err().0, 1);
        let keyed = json!({"acp": {"turns": [{"replies": [{"text": "key sk-live-canary-123"}]}]}});
        let clean = redacted(&keyed, vec!["sk-live-canary-123".into()]);
        assert!(!clean.to_string().contains("sk-live-canary-123"), "{clean}");
    }

    /// A capture of the real 0.2.1rc2 (fake-dsh's test data): its two turns, as the kit's model
    /// played them.
    #[test]
    fn a_real_session_becomes_the_scenario_of_its_model() {
        let capture = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fake-dsh/tests/data/acp-captures/r21.basic.wire.jsonl"
        );
        let (mut stdin, mut stdout) = (String::new(), String::new());
        for line in std::fs::read_to_string(capture).unwrap().lines() {
            let entry: Value = serde_json::from_str(line).unwrap();
            let side = match entry["dir"].as_str() {
                Some("in") => &mut stdin,
                Some("out") => &mut stdout,
                _ => continue,
            };
            side.push_str(entry["line"].as_str().unwrap());
            side.push('\n');
        }
        let (scenario, _) = scenario_from_recording(&stdin, &stdout).unwrap();
        let turns = scenario["acp"]["turns"].as_array().unwrap();
        let shape = |turn: &Value| -> Vec<String> {
            turn["replies"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    let tools: Vec<&str> = r["tool_calls"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|c| c["name"].as_str())
                        .collect();
                    format!("{} / {} / {tools:?}", r["reasoning"], r["text"])
                })
                .collect()
        };
        assert_eq!(
            shape(&turns[0]),
            [
                "\"I will write the page.\" / null / [\"write\"]",
                "\"The file is written.\" / \"I wrote index.html.\" / []"
            ]
        );
        assert_eq!(
            shape(&turns[1]),
            [
                "\"I read the page first.\" / null / [\"read\"]",
                "\"Now I make it green.\" / null / [\"write\"]",
                "\"The file is written.\" / \"I wrote index.html.\" / []"
            ]
        );
        dsh_formats::acp_scenario::from_document(&scenario).unwrap();
    }
}
