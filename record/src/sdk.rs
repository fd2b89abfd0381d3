//! `dsh-conformance sdk-scenario-from-transcript RECORDING`: turns a `record`ing of an SDK runtime
//! session (the real one, keyed and networked or not) into a keyless fake-dsh scenario: one
//! `sdk` turn per accepted prompt (its receipt), in order, with each model step's reasoning, text
//! and tool calls and the turn's end (kind and error). A background subagent becomes the
//! `background_subagent` of the turn that started it: the child's last text, how long after the
//! root's turn it finished, and the text of the root's wake-up turn (which answers no prompt, so
//! it is no turn of its own; the real runtime's wake-up receipt is the child's settled notice,
//! before `subagent.finished`), and the model's `subagent` call that started it leaves the turn's
//! steps (fake-dsh plays that call itself). Replayed by fake-dsh (`FAKE_DSH_SCENARIO`) with the same client
//! requests, it gives the same wire shapes. Credentials are redacted from every string by
//! `fixture-from-transcript`'s rules ([`redact_scenario`]): from the environment and by token
//! shape, raw or encoded (a token written in base64 too), and split across one turn's steps.
//! The recording is read bounded, and `--out` is never written through a link.

use serde_json::{json, Map, Value};
use std::collections::{HashMap, VecDeque};
use std::path::Path;

/// `sdk-scenario-from-transcript`: the scenario of `recording` (a recording directory, or its
/// stdout.jsonl), redacted, as pretty JSON; every note about what it left out goes to `note`.
pub fn scenario_text(recording: &Path, note: &mut dyn FnMut(&str)) -> Result<String, String> {
    let path = if recording.is_dir() {
        recording.join("stdout.jsonl")
    } else {
        recording.to_path_buf()
    };
    let text = read_recording(&path)?;
    let (scenario, notes) = scenario_from_stdout(&text)
        .map_err(|(line, why)| format!("{}: line {line}: {why}", path.display()))?;
    for line in notes {
        note(&line);
    }
    let scenario = redact_scenario(&scenario, dsh_results::redact::credential_values_from_env());
    Ok(format!("{scenario:#}\n"))
}

/// The runtime's stdout as text, read as `fixture-from-transcript` reads a recording file: a
/// regular file (a FIFO or a device would hang or never end) of at most
/// [`MAX_RECORDING_FILE_BYTES`](super::fixture::MAX_RECORDING_FILE_BYTES), in UTF-8.
pub(crate) fn read_recording(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    super::fixture::open_recording_file(path)?
        .read_to_end(&mut bytes)
        .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    String::from_utf8(bytes).map_err(|error| {
        format!(
            "{}: not UTF-8 (byte {})",
            path.display(),
            error.utf8_error().valid_up_to()
        )
    })
}

/// `scenario` with every credential redacted by the rules `fixture-from-transcript` follows:
/// the credential-named values of `env_secrets` and the token shapes found in the scenario itself,
/// raw or in base64, each in every encoded form (`dsh_protocol::needles`); and a credential split
/// across the steps of one turn (the `text`s, or the `reasoning`s, in order: one stream of the
/// model's) cut out of each step.
pub fn redact_scenario(scenario: &Value, env_secrets: Vec<String>) -> Value {
    use dsh_results::redact::{token_shapes, token_shapes_in_base64, Redactor};
    let mut redactor = Redactor::new(env_secrets);
    let mut texts = Vec::new();
    visit_strings(scenario, &mut |text| texts.push(text.to_string()));
    let streams = streams(scenario);
    for stream in &streams {
        texts.push(stream.iter().map(|(_, text)| text.as_str()).collect());
    }
    for text in &texts {
        for token in token_shapes(text)
            .into_iter()
            .chain(token_shapes_in_base64(text))
        {
            redactor.add_secret(&token);
        }
    }
    let mut scenario = scenario.clone();
    for stream in streams {
        let pieces: Vec<String> = stream.iter().map(|(_, text)| text.clone()).collect();
        for ((pointer, _), redacted) in stream.iter().zip(redactor.redact_pieces(&pieces)) {
            if let Some(slot) = scenario.pointer_mut(pointer) {
                *slot = Value::String(redacted);
            }
        }
    }
    redactor.redact_json(&scenario)
}

/// Each turn's step `text`s, and its step `reasoning`s, in order: (JSON pointer, text).
fn streams(scenario: &Value) -> Vec<Vec<(String, String)>> {
    let mut streams = Vec::new();
    let turns = scenario["sdk"]["turns"].as_array().into_iter().flatten();
    for (turn, value) in turns.enumerate() {
        for field in ["text", "reasoning"] {
            let steps = value["steps"].as_array().into_iter().flatten();
            let stream: Vec<(String, String)> = steps
                .enumerate()
                .filter_map(|(step, value)| {
                    let text = value[field].as_str()?;
                    Some((
                        format!("/sdk/turns/{turn}/steps/{step}/{field}"),
                        text.to_string(),
                    ))
                })
                .collect();
            if stream.len() > 1 {
                streams.push(stream);
            }
        }
    }
    streams
}

/// Calls `visit` on every string in `value`, object keys included.
fn visit_strings(value: &Value, visit: &mut dyn FnMut(&str)) {
    match value {
        Value::String(text) => visit(text),
        Value::Array(items) => items.iter().for_each(|item| visit_strings(item, visit)),
        Value::Object(members) => {
            for (key, item) in members {
                visit(key);
                visit_strings(item, visit);
            }
        }
        _ => {}
    }
}

/// Which scripted turn a root turn plays: a prompt's own, or the wake-up of the turn whose
/// background child finished.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Prompt(usize),
    Wake(usize),
}

/// One root session as the transcript goes.
#[derive(Debug, Default)]
struct Root {
    /// Receipts not yet started as turns, oldest first.
    queued: VecDeque<Slot>,
    current: Option<Slot>,
    steps: Vec<Value>,
    /// A child of this turn finished: the next receipt is the root's wake-up.
    wake_due: Option<usize>,
}

/// One background child: the turn that started it, its last text and event time, whether it
/// did more than the one text step a scenario can replay.
#[derive(Debug, Default)]
struct Child {
    turn: Option<usize>,
    text: Option<String>,
    last_time: Option<u64>,
    more: bool,
    /// The parent already took the child's settled notice (its wake-up receipt).
    settled: bool,
}

/// The transcript's state: the scenario's turns, the root sessions, the children.
#[derive(Debug, Default)]
struct Transcript {
    turns: Vec<Value>,
    /// Each turn's `turn/end` time (epoch ms), for when its child finished.
    ended_at: HashMap<usize, u64>,
    roots: HashMap<String, Root>,
    children: HashMap<String, Child>,
    notes: Vec<String>,
}

/// The scenario (`{"sdk": {"turns": [...]}}`) and notes on what it could not keep, from the
/// runtime's stdout; a line that is not JSON is an error naming it (1-based).
pub fn scenario_from_stdout(text: &str) -> Result<(Value, Vec<String>), (usize, String)> {
    let mut transcript = Transcript::default();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let frame: Value =
            serde_json::from_str(line).map_err(|e| (index + 1, format!("not JSON: {e}")))?;
        transcript.frame(&frame);
    }
    Ok(transcript.finish())
}

impl Transcript {
    fn frame(&mut self, frame: &Value) {
        let params = &frame["params"];
        let text = |name: &str| params[name].as_str().unwrap_or_default().to_string();
        match frame["method"].as_str() {
            Some("subagent.started") => {
                self.child_started(&text("parentSessionId"), text("childSessionId"))
            }
            Some("subagent.finished") => self.child_finished(params),
            Some("session.event") => {
                let session = text("sessionId");
                match self.children.get_mut(&session) {
                    Some(child) => child.event(&params["event"]),
                    None => self.root_event(session, &params["event"]),
                }
            }
            _ => {}
        }
    }

    /// A new scripted turn, answering the next accepted prompt.
    fn new_turn(&mut self) -> usize {
        self.turns.push(json!({"steps": [], "end": "completed"}));
        self.turns.len() - 1
    }

    fn root_event(&mut self, session: String, event: &Value) {
        let mut root = self.roots.remove(&session).unwrap_or_default();
        match event["type"].as_str() {
            Some("agent/inbox/spliced") if is_receipt(event) => {
                let slot = match (self.settled_child(event), root.wake_due.take()) {
                    (Some(turn), _) | (None, Some(turn)) => Slot::Wake(turn),
                    (None, None) => Slot::Prompt(self.new_turn()),
                };
                root.queued.push_back(slot);
            }
            Some("turn/start") => root.current = root.queued.pop_front(),
            Some("assistant/message") => root.steps.push(step(&event["data"]["message"])),
            Some("turn/end") => {
                let slot = match root.current.take().or_else(|| root.queued.pop_front()) {
                    Some(slot) => slot,
                    None => Slot::Prompt(self.new_turn()),
                };
                let steps = std::mem::take(&mut root.steps);
                self.turn_ended(
                    slot,
                    steps,
                    &event["data"]["reason"],
                    event["time"].as_u64(),
                );
            }
            _ => {}
        }
        self.roots.insert(session, root);
    }

    /// The turn whose child a receipt's `subagent-settled` notice reports (the real runtime's
    /// wake-up receipt), marking the child settled.
    fn settled_child(&mut self, event: &Value) -> Option<usize> {
        let source = &event["data"]["inserted"][0]["source"];
        if source["kind"] != "subagent-settled" {
            return None;
        }
        let child = self.children.get_mut(source["senderSessionId"].as_str()?)?;
        child.settled = true;
        child.turn
    }

    /// A root turn's end: a prompt's turn gets its steps and end; a wake-up gives its child's
    /// `background_subagent` the wake-up text.
    fn turn_ended(&mut self, slot: Slot, steps: Vec<Value>, reason: &Value, time: Option<u64>) {
        match slot {
            Slot::Prompt(index) => {
                let background = self.turns[index].get("background_subagent").cloned();
                let steps = if background.is_some() {
                    without_subagent_calls(steps)
                } else {
                    steps
                };
                self.turns[index] = turn(steps, reason);
                if let Some(background) = background {
                    self.turns[index]["background_subagent"] = background;
                }
                if let Some(time) = time {
                    self.ended_at.insert(index, time);
                }
            }
            Slot::Wake(index) => {
                let text = steps.iter().rev().find_map(|step| step["text"].as_str());
                if let Some(text) = text {
                    self.turns[index]["background_subagent"]["wake_text"] = json!(text);
                }
                if steps.len() > 1 || steps.iter().any(|s| s.get("tool_calls").is_some()) {
                    self.notes.push(format!(
                        "turn {}: the root's wake-up turn is replayed as its last text only",
                        index + 1
                    ));
                }
            }
        }
    }

    /// `subagent.started`: the child belongs to its parent's running turn.
    fn child_started(&mut self, parent: &str, child: String) {
        let turn = match self.roots.get(parent).and_then(|root| root.current) {
            Some(Slot::Prompt(index)) => Some(index),
            Some(Slot::Wake(_)) | None => {
                self.notes.push(format!(
                    "child session {child:?} started outside a prompt's turn: left out"
                ));
                None
            }
        };
        if let Some(index) = turn {
            if self.turns[index].get("background_subagent").is_some() {
                self.notes.push(format!(
                    "turn {}: a second background child ({child:?}) is left out",
                    index + 1
                ));
            } else {
                self.turns[index]["background_subagent"] = json!({});
            }
        }
        self.children.insert(
            child,
            Child {
                turn,
                ..Child::default()
            },
        );
    }

    /// `subagent.finished`: the child's last text and finish delay; the parent's next receipt is
    /// its wake-up.
    fn child_finished(&mut self, params: &Value) {
        let id = params["childSessionId"].as_str().unwrap_or_default();
        let Some(child) = self.children.get(id) else {
            return;
        };
        let Some(index) = child.turn else { return };
        let text = last_text(&params["lastAssistantMessage"]).or_else(|| child.text.clone());
        let background = &mut self.turns[index]["background_subagent"];
        if let Some(text) = text {
            background["text"] = json!(text);
        }
        if let (Some(ended), Some(last)) = (self.ended_at.get(&index), child.last_time) {
            background["finish_after_ms"] = json!(last.saturating_sub(*ended));
        }
        if child.more {
            self.notes.push(format!(
                "child session {id:?}: replayed as its last text only (its tool calls and other \
                 steps are left out)"
            ));
        }
        let settled = child.settled;
        if let Some(parent) = params["parentSessionId"].as_str().filter(|_| !settled) {
            self.roots.entry(parent.to_string()).or_default().wake_due = Some(index);
        }
    }

    /// The scenario, and the notes; a turn cut before its end keeps the steps it had.
    fn finish(mut self) -> (Value, Vec<String>) {
        for root in self.roots.values_mut() {
            if let Some(Slot::Prompt(index)) = root.current.take() {
                self.turns[index]["steps"] = Value::Array(std::mem::take(&mut root.steps));
            }
        }
        (json!({"sdk": {"turns": self.turns}}), self.notes)
    }
}

impl Child {
    /// One of the child's session events: its last text and time.
    fn event(&mut self, event: &Value) {
        if let Some(time) = event["time"].as_u64() {
            self.last_time = Some(time);
        }
        if event["type"] != "assistant/message" {
            return;
        }
        let step = step(&event["data"]["message"]);
        if self.text.is_some() || step.get("tool_calls").is_some() {
            self.more = true;
        }
        if let Some(text) = step["text"].as_str() {
            self.text = Some(text.to_string());
        }
    }
}

/// `lastAssistantMessage`'s text: a string (the source's reading), or the last text of its content
/// blocks (observed on 0.1.5 and 0.2.1).
fn last_text(message: &Value) -> Option<String> {
    if let Some(text) = message.as_str() {
        return Some(text.to_string());
    }
    let blocks = message.as_array()?;
    let mut texts = blocks.iter().rev().filter(|b| b["type"] == "text");
    texts.find_map(|b| b["text"].as_str()).map(str::to_string)
}

/// A turn's steps without the model's `subagent` calls (fake-dsh's `background_subagent` plays
/// that call itself); a step left with nothing is dropped.
fn without_subagent_calls(steps: Vec<Value>) -> Vec<Value> {
    steps
        .into_iter()
        .filter_map(|mut step| {
            let Some(calls) = step.get_mut("tool_calls").and_then(Value::as_array_mut) else {
                return Some(step);
            };
            calls.retain(|call| call["name"] != "subagent");
            if calls.is_empty() {
                step.as_object_mut()?.remove("tool_calls");
            }
            (!step.as_object()?.is_empty()).then_some(step)
        })
        .collect()
}

/// A receipt: the inbox splice that inserts a queued message (the one taking it out inserts
/// none).
fn is_receipt(event: &Value) -> bool {
    event["data"]["inserted"]
        .as_array()
        .is_some_and(|inserted| !inserted.is_empty())
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
        let (scenario, notes) = scenario_from_stdout(&lines.join("\n")).unwrap();
        assert!(notes.is_empty(), "{notes:?}");
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
    #[test]
    fn a_key_split_across_steps_encoded_or_only_in_the_environment_is_redacted() {
        let key = "sk-sdkCanary0123456789abcdefghij";
        let env_key = "hunter2-very-secret-value";
        let encoded = dsh_protocol::needles::base64(format!("Bearer {key}").as_bytes());
        let scenario = json!({"sdk": {"turns": [
            {"steps": [{"text": "key: sk-sdkCanary01"}, {"text": "23456789abcdefghij ok"}],
             "end": "completed"},
            {"steps": [{"reasoning": "pw hunter2-very"}, {"reasoning": "-secret-value!"},
                       {"text": format!("b64 {encoded} end")}], "end": "completed"},
        ]}});
        let redacted = redact_scenario(&scenario, vec![env_key.to_string()]);
        let turns = &redacted["sdk"]["turns"];
        assert_eq!(turns[0]["steps"][0]["text"], "key: [redacted]");
        assert_eq!(turns[0]["steps"][1]["text"], " ok");
        assert_eq!(turns[1]["steps"][0]["reasoning"], "pw [redacted]");
        assert_eq!(turns[1]["steps"][1]["reasoning"], "!");
        let text = turns[1]["steps"][2]["text"].as_str().unwrap();
        assert!(
            text.starts_with("b64 ") && text.contains("[redacted]"),
            "{text}"
        );
        assert!(
            dsh_results::redact::token_shapes_in_base64(text).is_empty(),
            "{text}"
        );
        assert_eq!(turns[0]["end"], "completed");
        let untouched = json!({"sdk": {"turns": [{"steps": [{"text": "a"}, {"text": "b"}]}]}});
        assert_eq!(redact_scenario(&untouched, Vec::new()), untouched);
    }

    /// One JSON-RPC notification line.
    fn frame(method: &str, params: Value) -> String {
        json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string()
    }

    /// One `session.event` line of `session`.
    fn event(session: &str, kind: &str, time: u64, data: Value) -> String {
        frame(
            "session.event",
            json!({"sessionId": session, "event": {"type": kind, "seq": 0, "time": time, "data": data}}),
        )
    }

    #[test]
    fn a_background_child_becomes_its_turns_subagent_and_the_wake_up_no_turn_of_its_own() {
        let receipt = json!({"inserted": [{"id": "m"}]});
        let text = |text: &str| json!({"message": {"content": [{"type": "text", "text": text}]}});
        let end = json!({"reason": {"kind": "completed"}});
        let lines = [
            event("s", "agent/inbox/spliced", 1, receipt.clone()),
            event("s", "turn/start", 1, json!({})),
            frame(
                "subagent.started",
                json!({"parentSessionId": "s", "childSessionId": "c"}),
            ),
            event("s", "assistant/message", 2, text("started a child")),
            event("s", "turn/end", 100, end.clone()),
            event("c", "assistant/message", 350, text("child text")),
            frame(
                "subagent.finished",
                json!({"parentSessionId": "s", "childSessionId": "c", "status": "ok"}),
            ),
            event("s", "agent/inbox/spliced", 351, receipt.clone()),
            event("s", "turn/start", 351, json!({})),
            event("s", "assistant/message", 352, text("woke up")),
            event("s", "turn/end", 353, end.clone()),
            event("s", "agent/inbox/spliced", 400, receipt),
            event("s", "turn/start", 400, json!({})),
            event("s", "assistant/message", 401, text("second prompt")),
            event("s", "turn/end", 402, end),
        ];
        let (scenario, notes) = scenario_from_stdout(&lines.join("\n")).unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(
            scenario["sdk"]["turns"],
            json!([
                {"steps": [{"text": "started a child"}], "end": "completed",
                 "background_subagent": {"text": "child text", "finish_after_ms": 250, "wake_text": "woke up"}},
                {"steps": [{"text": "second prompt"}], "end": "completed"}
            ])
        );
    }

    /// The real runtime's order (0.1.5, 0.2.1): the model's `subagent` call, the wake-up receipt
    /// is the child's settled notice and comes before `subagent.finished`, whose last message is
    /// content blocks.
    #[test]
    fn the_real_runtimes_background_child_becomes_the_same_scenario() {
        let receipt = json!({"inserted": [{"id": "m", "source": {"kind": "user"}}]});
        let notice = json!({"inserted": [{"id": "n", "source": {"kind": "subagent-settled",
                                                               "senderSessionId": "c"}}]});
        let text = |text: &str| json!({"message": {"content": [{"type": "text", "text": text}]}});
        let call = json!({"message": {"content": [{"type": "tool-call", "id": "t", "name": "subagent",
                          "arguments": "{\"description\":\"d\",\"prompt\":\"p\"}"}]}});
        let end = json!({"reason": {"kind": "completed"}});
        let lines = [
            event("s", "agent/inbox/spliced", 1, receipt),
            event("s", "turn/start", 1, json!({})),
            event("s", "assistant/message", 2, call),
            frame(
                "subagent.started",
                json!({"parentSessionId": "s", "childSessionId": "c"}),
            ),
            event("s", "assistant/message", 3, text("started a child")),
            event("s", "turn/end", 100, end.clone()),
            event("c", "assistant/message", 300, text("child text")),
            event("s", "agent/inbox/spliced", 301, notice),
            event("s", "turn/start", 301, json!({})),
            frame(
                "subagent.finished",
                json!({"parentSessionId": "s", "childSessionId": "c", "status": "ok",
                       "lastAssistantMessage": [{"type": "text", "text": "child text"}]}),
            ),
            event("s", "assistant/message", 302, text("woke up")),
            event("s", "turn/end", 303, end),
        ];
        let (scenario, notes) = scenario_from_stdout(&lines.join("\n")).unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(
            scenario["sdk"]["turns"],
            json!([
                {"steps": [{"text": "started a child"}], "end": "completed",
                 "background_subagent": {"text": "child text", "finish_after_ms": 200, "wake_text": "woke up"}}
            ])
        );
    }
}
