//! What the live checks of the JSON-RPC surfaces (the SDK's [`crate::sdk_wire`], ACP's
//! [`crate::acp_wire`]) share: the client's pending requests, matched by id, and the session's
//! summary for `meta.json`.

use super::live::RecordedViolation;
use serde_json::Value;
use std::collections::HashMap;

/// What a JSON-RPC session showed, for `meta.json`.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct RpcSummary {
    /// Requests the client sent (objects with a method and a number or string id).
    pub requests: usize,
    pub responses: usize,
    pub notifications: usize,
    /// Requests the runtime never answered: `method id`.
    pub unanswered: Vec<String>,
    /// Lines over the framer's cap, recorded but not checked.
    pub unchecked_lines: usize,
}

/// The client's requests still waiting for an answer: the id as JSON text -> the methods sent
/// with it, oldest first (a client may reuse an id).
#[derive(Debug, Default)]
pub struct Pending {
    by_id: HashMap<String, Vec<String>>,
}

impl Pending {
    /// A client line (without its newline) that is a request: its method, remembered under its id.
    /// `None` for anything else (a notification, a response, junk).
    pub fn client_request(&mut self, line: &[u8]) -> Option<String> {
        let request: Value = serde_json::from_slice(line).ok()?;
        let method = request["method"].as_str()?;
        let id = request_id(&request)?;
        self.by_id.entry(id).or_default().push(method.to_string());
        Some(method.to_string())
    }

    /// The method of the oldest request pending under `id`, no longer pending.
    pub fn take(&mut self, id: &str) -> Option<String> {
        let methods = self.by_id.get_mut(id)?;
        let method = methods.remove(0);
        if methods.is_empty() {
            self.by_id.remove(id);
        }
        Some(method)
    }

    /// Every request never answered, as `method id`, sorted.
    pub fn unanswered(&self) -> Vec<String> {
        let mut unanswered: Vec<String> = self
            .by_id
            .iter()
            .flat_map(|(id, methods)| methods.iter().map(move |method| format!("{method} {id}")))
            .collect();
        unanswered.sort();
        unanswered
    }
}

/// What every JSON-RPC wire keeps: the client's pending requests and the session's counts.
#[derive(Debug, Default)]
pub struct RpcState {
    pub pending: Pending,
    pub info: RpcSummary,
}

impl RpcState {
    /// One client line (without its newline): a request is remembered as pending (`true`);
    /// anything else (a notification, an answer to the runtime, junk) is no request.
    pub fn client_line(&mut self, line: &[u8]) -> bool {
        let request = self.pending.client_request(line).is_some();
        self.info.requests += usize::from(request);
        request
    }

    /// The summary for `meta.json`, unanswered requests included.
    pub fn summary(&self) -> RpcSummary {
        RpcSummary {
            unanswered: self.pending.unanswered(),
            ..self.info.clone()
        }
    }
}

/// A request's or response's id as JSON text, when it is a number or a string.
pub fn request_id(frame: &Value) -> Option<String> {
    let id = frame.get("id")?;
    (id.is_number() || id.is_string()).then(|| id.to_string())
}

/// A broken rule: its code and what was wrong.
pub type Broken = (&'static str, String);

/// `broken` as the violation of runtime line `number`.
pub fn violation(number: usize, broken: Broken) -> RecordedViolation {
    RecordedViolation {
        code: broken.0.to_string(),
        line: Some(number),
        message: format!("line {number}: {}", broken.1),
    }
}

/// The runtime's last line had no newline: no client reads it as a frame (`code` is the
/// surface's own).
pub fn unterminated(code: &str, number: usize) -> RecordedViolation {
    RecordedViolation {
        code: code.to_string(),
        line: Some(number),
        message: format!(
            "line {number}: stdout ended inside a line (every frame ends with a newline)"
        ),
    }
}

/// A line's JSON-RPC 2.0 object, or why it is none (`code` is the surface's own).
pub fn frame(code: &'static str, line: &[u8]) -> Result<Value, Broken> {
    let frame: Value =
        serde_json::from_slice(line).map_err(|error| (code, format!("not JSON: {error}")))?;
    if !frame.is_object() || frame["jsonrpc"] != "2.0" {
        return Err((
            code,
            "not a JSON-RPC 2.0 object (`\"jsonrpc\": \"2.0\"`)".to_string(),
        ));
    }
    Ok(frame)
}
