//! The live check of a recorded SDK JSON-RPC session (`record --surface sdk`): each line the
//! runtime writes is held to what the SDK runtime's wire allows (docs/surface-sdk.md): a JSON-RPC
//! 2.0 object, either a response to a request the client has pending (with the result shape of
//! its method, every error `-32603`) or one of the four notifications with its params; nothing
//! after the `shutdown` response; a `session/prompt` response only after its receipt.

use super::jsonrpc::{self, request_id, Broken, RpcState};
use super::live::RecordedViolation;
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// The notifications the SDK runtime sends (docs/surface-sdk.md, "Notifications").
const NOTIFICATIONS: [&str; 4] = [
    "session.event",
    "session.status",
    "subagent.started",
    "subagent.finished",
];

/// The one JSON-RPC error code the SDK runtime answers failures with.
const ERROR_CODE: i64 = -32603;

/// The SDK wire's state: the client's pending requests, the receipts seen, the `shutdown` answer.
#[derive(Debug, Default)]
pub struct SdkWire {
    pub rpc: RpcState,
    /// `messageId`s announced by a receipt (`agent/inbox/spliced` inserting a message).
    receipts: HashSet<String>,
    /// The last `seq` per session.
    seqs: HashMap<String, u64>,
    shutdown_answered: bool,
}

impl SdkWire {
    /// One runtime line `number` (1-based, without its newline): the violation, if it breaks the
    /// wire (client lines go to `RpcState::client_line`).
    pub fn runtime_line(&mut self, number: usize, line: &[u8]) -> Option<RecordedViolation> {
        let broken = self.check(line).err()?;
        Some(jsonrpc::violation(number, broken))
    }

    /// The runtime's last line had no newline: no client reads it as a frame.
    pub fn unterminated(number: usize) -> RecordedViolation {
        jsonrpc::unterminated("DSH_SDK_UNTERMINATED_LINE", number)
    }

    fn check(&mut self, line: &[u8]) -> Result<(), Broken> {
        let frame = jsonrpc::frame("DSH_SDK_INVALID_FRAME", line)?;
        if self.shutdown_answered {
            return Err((
                "DSH_SDK_AFTER_SHUTDOWN",
                "a frame after the `shutdown` response, which is the last frame".to_string(),
            ));
        }
        match frame["method"].as_str() {
            Some(method) => self.notification(method, &frame),
            None => self.response(&frame),
        }
    }

    fn notification(&mut self, method: &str, frame: &Value) -> Result<(), Broken> {
        if frame.get("id").is_some_and(|id| !id.is_null()) {
            return Err((
                "DSH_SDK_REQUEST_FROM_RUNTIME",
                format!(
                    "a request ({method}) from the runtime: the SDK runtime only answers and \
                     notifies (approvals never reach the wire as requests)"
                ),
            ));
        }
        if !NOTIFICATIONS.contains(&method) {
            return Err((
                "DSH_SDK_UNKNOWN_NOTIFICATION",
                format!("unknown notification {method:?} (the runtime sends {NOTIFICATIONS:?})"),
            ));
        }
        self.rpc.info.notifications += 1;
        let params = &frame["params"];
        let bad = |what: &str| Err(("DSH_SDK_BAD_PARAMS", format!("{method}: {what}")));
        let strings = |names: &[&str]| names.iter().all(|name| params[name].is_string());
        match method {
            "session.event" => self.session_event(params),
            "session.status" if !strings(&["sessionId"]) => bad("no `sessionId` string"),
            "session.status" if !matches!(params["status"].as_str(), Some("running" | "idle")) => {
                bad("`status` is neither \"running\" nor \"idle\"")
            }
            "subagent.started" | "subagent.finished"
                if !strings(&["parentSessionId", "childSessionId"]) =>
            {
                bad("no `parentSessionId` and `childSessionId` strings")
            }
            "subagent.finished" if !matches!(params["status"].as_str(), Some("ok" | "error")) => {
                bad("`status` is neither \"ok\" nor \"error\"")
            }
            _ => Ok(()),
        }
    }

    /// `session.event {sessionId, event: {type, seq, ...}}`: `seq` rises per session; a receipt's
    /// inserted message ids are remembered.
    fn session_event(&mut self, params: &Value) -> Result<(), Broken> {
        let event = &params["event"];
        let (Some(session), Some(kind), Some(seq)) = (
            params["sessionId"].as_str(),
            event["type"].as_str(),
            event["seq"].as_u64(),
        ) else {
            return Err((
                "DSH_SDK_BAD_PARAMS",
                "session.event: not `{sessionId, event: {type, seq, ...}}` (strings and a \
                 non-negative integer)"
                    .to_string(),
            ));
        };
        if let Some(last) = self.seqs.insert(session.to_string(), seq) {
            if seq <= last {
                return Err((
                    "DSH_SDK_BAD_PARAMS",
                    format!("session.event: session {session:?} seq {seq} after seq {last} (seq rises per session)"),
                ));
            }
        }
        if kind == "agent/inbox/spliced" {
            let inserted = event["data"]["inserted"].as_array().into_iter().flatten();
            let ids = inserted.filter_map(|message| message["id"].as_str());
            self.receipts.extend(ids.map(str::to_string));
        }
        Ok(())
    }

    fn response(&mut self, frame: &Value) -> Result<(), Broken> {
        let invalid = |what: &str| Err(("DSH_SDK_INVALID_FRAME", what.to_string()));
        let Some(id) = request_id(frame) else {
            return invalid(
                "neither a notification (`method`) nor a response (a number or string `id`)",
            );
        };
        let (result, error) = (frame.get("result"), frame.get("error"));
        if result.is_some() == error.is_some() {
            return invalid("a response holds exactly one of `result` and `error`");
        }
        let Some(method) = self.rpc.pending.take(&id) else {
            return Err((
                "DSH_SDK_UNEXPECTED_RESPONSE",
                format!("a response to id {id}, which the client has no request pending for"),
            ));
        };
        self.rpc.info.responses += 1;
        if method == "shutdown" {
            self.shutdown_answered = true;
        }
        match (result, error) {
            (_, Some(error)) => check_error(&method, &id, error),
            (Some(result), _) => self.check_result(&method, &id, result),
            (None, None) => Ok(()),
        }
    }

    /// Each method's result shape (docs/surface-sdk.md, "Methods").
    fn check_result(&self, method: &str, id: &str, result: &Value) -> Result<(), Broken> {
        let bad = |what: String| Err(("DSH_SDK_BAD_RESULT", format!("{method} (id {id}): {what}")));
        match method {
            "initialize" if !result["serverInfo"]["name"].is_string() => {
                bad("no `serverInfo.name` string".to_string())
            }
            "session/prompt" => match result["messageId"].as_str() {
                None => bad("no `messageId` string".to_string()),
                Some(message) if !self.receipts.contains(message) => Err((
                    "DSH_SDK_RESPONSE_BEFORE_RECEIPT",
                    format!(
                        "session/prompt (id {id}): messageId {message:?} before its receipt \
                         (`agent/inbox/spliced` inserting that message comes first)"
                    ),
                )),
                Some(_) => Ok(()),
            },
            "shutdown" if result != &Value::Object(Default::default()) => {
                bad(format!("the result is {result}, not {{}}"))
            }
            "initialize" | "shutdown" => Ok(()),
            _ => bad(format!(
                "a result for an unknown method (the runtime answers it with {ERROR_CODE})"
            )),
        }
    }
}

/// An error response: `{code: -32603, message}`.
fn check_error(method: &str, id: &str, error: &Value) -> Result<(), Broken> {
    match (error["code"].as_i64(), error["message"].as_str()) {
        (Some(ERROR_CODE), Some(_)) => Ok(()),
        (Some(code), Some(_)) => Err((
            "DSH_SDK_BAD_RESULT",
            format!(
                "{method} (id {id}): error code {code}; the SDK runtime answers every failure \
                 with {ERROR_CODE}"
            ),
        )),
        _ => Err((
            "DSH_SDK_INVALID_FRAME",
            format!("{method} (id {id}): the error is not `{{code, message}}`"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn codes(client: &[Value], runtime: &[Value]) -> Vec<String> {
        let mut wire = SdkWire::default();
        for line in client {
            wire.rpc.client_line(line.to_string().as_bytes());
        }
        let mut codes = Vec::new();
        for (index, frame) in runtime.iter().enumerate() {
            if let Some(violation) = wire.runtime_line(index + 1, frame.to_string().as_bytes()) {
                codes.push(violation.code);
            }
        }
        codes
    }

    fn request(id: Value, method: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {}})
    }

    fn event(seq: u64, kind: &str, data: Value) -> Value {
        json!({"jsonrpc": "2.0", "method": "session.event",
               "params": {"sessionId": "s", "event": {"type": kind, "seq": seq, "data": data}}})
    }

    #[test]
    fn a_real_shaped_session_passes() {
        let client = [
            request(json!(1), "initialize"),
            request(json!("p"), "session/prompt"),
            request(json!(3), "bogus"),
            json!([request(json!(9), "shutdown")]),
            json!({"jsonrpc": "2.0", "id": null, "method": "shutdown"}),
            request(json!(4), "shutdown"),
        ];
        let runtime = [
            json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32603, "message": "unknown"}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"serverInfo": {"name": "n"}}}),
            event(
                0,
                "agent/inbox/spliced",
                json!({"inserted": [{"id": "m1"}]}),
            ),
            json!({"jsonrpc": "2.0", "method": "session.status", "params": {"sessionId": "s", "status": "running"}}),
            json!({"jsonrpc": "2.0", "id": "p", "result": {"messageId": "m1"}}),
            event(1, "turn/end", json!({"reason": {"kind": "completed"}})),
            json!({"jsonrpc": "2.0", "method": "subagent.started", "params": {"parentSessionId": "s", "childSessionId": "c"}}),
            json!({"jsonrpc": "2.0", "id": 4, "result": {}}),
        ];
        assert_eq!(codes(&client, &runtime), Vec::<String>::new());
    }

    #[test]
    fn each_broken_rule_is_named() {
        let client = [
            request(json!(1), "initialize"),
            request(json!(2), "session/prompt"),
            request(json!(3), "shutdown"),
        ];
        let runtime = [
            json!({"v": 1, "type": "ready"}),
            json!({"jsonrpc": "2.0", "id": 7, "result": {}}),
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "no"}}),
            json!({"jsonrpc": "2.0", "method": "session.update", "params": {}}),
            json!({"jsonrpc": "2.0", "id": 5, "method": "approval/ask", "params": {}}),
            json!({"jsonrpc": "2.0", "method": "session.status", "params": {"sessionId": "s", "status": "busy"}}),
            event(3, "user/message", json!({})),
            event(2, "user/message", json!({})),
            json!({"jsonrpc": "2.0", "id": 2, "result": {"messageId": "m9"}}),
            json!({"jsonrpc": "2.0", "id": 3, "result": {}}),
            event(4, "turn/end", json!({})),
        ];
        assert_eq!(
            codes(&client, &runtime),
            [
                "DSH_SDK_INVALID_FRAME",
                "DSH_SDK_UNEXPECTED_RESPONSE",
                "DSH_SDK_BAD_RESULT",
                "DSH_SDK_UNKNOWN_NOTIFICATION",
                "DSH_SDK_REQUEST_FROM_RUNTIME",
                "DSH_SDK_BAD_PARAMS",
                "DSH_SDK_BAD_PARAMS",
                "DSH_SDK_RESPONSE_BEFORE_RECEIPT",
                "DSH_SDK_AFTER_SHUTDOWN",
            ]
        );
    }

    #[test]
    fn unanswered_requests_are_summarized() {
        let mut wire = SdkWire::default();
        assert!(wire
            .rpc
            .client_line(request(json!(1), "initialize").to_string().as_bytes()));
        assert!(!wire.rpc.client_line(b"junk"));
        assert_eq!(wire.rpc.summary().unanswered, ["initialize 1"]);
        assert_eq!(wire.rpc.summary().requests, 1);
    }
}
