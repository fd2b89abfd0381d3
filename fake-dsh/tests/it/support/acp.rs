//! An ACP client for the tests: fake-dsh `--profile acp` in a [`World`], its frames read one at
//! a time, requests numbered, and the normalization the capture comparisons use (UUIDs labelled
//! by first appearance, the world's path as `<world>`, token counts as `<used>`).

use super::{Running, World};
use serde_json::{json, Value};
use std::collections::HashMap;

/// fake-dsh serving ACP as `persona`, with extra environment settings.
pub fn start(
    world: &World,
    persona: &str,
    extra: impl FnOnce(&mut std::process::Command),
) -> Running {
    world.spawn(&["--persona", persona, "--profile", "acp"], extra)
}

/// A request frame.
pub fn request(id: impl Into<Value>, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id.into(), "method": method, "params": params})
}

/// Reads frames until the response to `id` (a frame with that id and no method), returning
/// every frame read, the response last.
pub fn until_response(running: &mut Running, id: &Value) -> Vec<Value> {
    let mut frames = Vec::new();
    loop {
        let frame = running.next_frame();
        let done = frame.get("method").is_none() && frame["id"] == *id;
        frames.push(frame);
        if done {
            return frames;
        }
    }
}

/// Sends a request and reads until its response: (the frames before it, the response).
pub fn call(running: &mut Running, id: i64, method: &str, params: Value) -> (Vec<Value>, Value) {
    running.send(&request(id, method, params));
    let mut frames = until_response(running, &json!(id));
    let response = frames.pop().expect("a response");
    (frames, response)
}

/// `initialize` then `session/new` in the world's project: the session id.
pub fn open_session(running: &mut Running, world: &World) -> String {
    call(running, 1, "initialize", json!({"protocolVersion": 1}));
    let (_, response) = call(
        running,
        2,
        "session/new",
        json!({"cwd": world.project(), "mcpServers": []}),
    );
    response["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no session: {response}"))
        .to_string()
}

/// A text prompt's params.
pub fn prompt(session: &str, text: &str) -> Value {
    json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})
}

/// The `sessionUpdate` kinds of a turn's notifications, in order.
pub fn kinds(frames: &[Value]) -> Vec<String> {
    frames
        .iter()
        .filter(|f| f["method"] == "session/update")
        .map(|f| {
            f["params"]["update"]["sessionUpdate"]
                .as_str()
                .unwrap_or("?")
                .to_string()
        })
        .collect()
}

/// Labels UUIDs by first appearance (`<uuid-1>`, ...), shared across the frames of one run.
#[derive(Default)]
pub struct Labels {
    seen: HashMap<String, String>,
}

impl Labels {
    fn label(&mut self, text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some((start, len)) = find_uuid(rest) {
            out.push_str(&rest[..start]);
            let uuid = &rest[start..start + len];
            let next = self.seen.len() + 1;
            let label = self
                .seen
                .entry(uuid.to_string())
                .or_insert_with(|| format!("<uuid-{next}>"));
            out.push_str(label);
            rest = &rest[start + len..];
        }
        out.push_str(rest);
        out
    }

    /// A frame with its UUIDs labelled, `world` (a path) as `<world>`, and every `used` member
    /// as `<used>`.
    pub fn normalize(&mut self, frame: &Value, world: &str) -> Value {
        match frame {
            Value::String(text) => {
                let text = if world.is_empty() {
                    text.clone()
                } else {
                    text.replace(world, "<world>")
                };
                Value::String(self.label(&text))
            }
            Value::Array(items) => {
                Value::Array(items.iter().map(|i| self.normalize(i, world)).collect())
            }
            Value::Object(members) => Value::Object(
                members
                    .iter()
                    .map(|(key, value)| {
                        let value = if key == "used" && value.is_number() {
                            json!("<used>")
                        } else {
                            self.normalize(value, world)
                        };
                        (key.clone(), value)
                    })
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// The first UUID (8-4-4-4-12 hex) in a text: (offset, length).
fn find_uuid(text: &str) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let shape = [8, 4, 4, 4, 12];
    (0..bytes.len().saturating_sub(35)).find_map(|start| {
        let mut at = start;
        for (index, len) in shape.iter().enumerate() {
            if index > 0 {
                if bytes.get(at) != Some(&b'-') {
                    return None;
                }
                at += 1;
            }
            let hex = bytes.get(at..at + len)?;
            if !hex
                .iter()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            {
                return None;
            }
            at += len;
        }
        let boundary = |b: Option<&u8>| b.is_none_or(|b| !b.is_ascii_hexdigit());
        (start == 0 || boundary(bytes.get(start - 1)))
            .then_some(())
            .filter(|()| boundary(bytes.get(at)))
            .map(|()| (start, at - start))
    })
}
