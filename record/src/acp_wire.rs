//! The live check of a recorded ACP session (`record --surface acp`, `dsh --profile acp`): each
//! line the agent writes is held to what dsh's ACP surface allows (docs/surface-acp.md): a
//! JSON-RPC 2.0 object, either a response to a request the client has pending (one of `result`
//! and `error`; an error is `{code, message}`; each method's result its shape; `id: null` only
//! for an error the transport answers itself), a `session/update` notification of a kind dsh
//! sends, or the one request dsh makes of a client, `session/request_permission`, numbered from 0.

use super::jsonrpc::{self, request_id, Broken, RpcState};
use super::live::RecordedViolation;
use serde_json::Value;

/// The `sessionUpdate` kinds dsh sends (the five seen on every run, and `config_option_update`,
/// which its source sends on a provider catalogue change).
const UPDATE_KINDS: [&str; 6] = [
    "agent_thought_chunk",
    "agent_message_chunk",
    "usage_update",
    "tool_call",
    "tool_call_update",
    "config_option_update",
];

/// The stop reasons ACP v1 defines.
const STOP_REASONS: [&str; 5] = [
    "end_turn",
    "max_tokens",
    "max_turn_requests",
    "refusal",
    "cancelled",
];

/// The ACP wire's state: the client's pending requests and the agent's own request ids.
#[derive(Debug, Default)]
pub struct AcpWire {
    pub rpc: RpcState,
    /// The id the agent's next request must carry (it numbers them 0, 1, 2, … per process).
    next_agent_id: u64,
}

impl AcpWire {
    /// One agent line `number` (1-based, without its newline): the violation, if it breaks the
    /// wire (client lines go to `RpcState::client_line`).
    pub fn runtime_line(&mut self, number: usize, line: &[u8]) -> Option<RecordedViolation> {
        let broken = self.check(line).err()?;
        Some(jsonrpc::violation(number, broken))
    }

    /// The agent's last line had no newline: no client reads it as a frame.
    pub fn unterminated(number: usize) -> RecordedViolation {
        jsonrpc::unterminated("DSH_ACP_UNTERMINATED_LINE", number)
    }

    fn check(&mut self, line: &[u8]) -> Result<(), Broken> {
        let frame = jsonrpc::frame("DSH_ACP_INVALID_FRAME", line)?;
        match (frame["method"].as_str(), frame.get("id")) {
            (Some(method), None) => self.notification(method, &frame["params"]),
            (Some(method), Some(id)) => self.agent_request(method, id, &frame["params"]),
            (None, _) => self.response(&frame),
        }
    }

    fn notification(&mut self, method: &str, params: &Value) -> Result<(), Broken> {
        if method != "session/update" {
            return Err((
                "DSH_ACP_UNKNOWN_NOTIFICATION",
                format!("notification {method:?}: dsh sends only `session/update`"),
            ));
        }
        self.rpc.info.notifications += 1;
        let kind = params["update"]["sessionUpdate"].as_str();
        match (params["sessionId"].as_str(), kind) {
            (Some(_), Some(kind)) if UPDATE_KINDS.contains(&kind) => {
                check_update(kind, &params["update"])
            }
            (Some(_), Some(kind)) => Err((
                "DSH_ACP_UNKNOWN_UPDATE",
                format!("session/update kind {kind:?}: dsh sends {UPDATE_KINDS:?}"),
            )),
            _ => Err((
                "DSH_ACP_BAD_PARAMS",
                "session/update: not `{sessionId, update: {sessionUpdate, ...}}`".to_string(),
            )),
        }
    }

    /// `session/request_permission`, numbered 0, 1, 2, …; dsh calls no other client method.
    fn agent_request(&mut self, method: &str, id: &Value, params: &Value) -> Result<(), Broken> {
        if method != "session/request_permission" {
            return Err((
                "DSH_ACP_UNKNOWN_REQUEST",
                format!(
                    "a request for {method:?}: dsh asks a client only `session/request_permission` \
                     (it never calls `fs/*` or `terminal/*`)"
                ),
            ));
        }
        let expected = self.next_agent_id;
        self.next_agent_id += 1;
        if id.as_u64() != Some(expected) {
            return Err((
                "DSH_ACP_AGENT_REQUEST_ID",
                format!("{method} with id {id}: the agent numbers its requests 0, 1, 2, … (expected {expected})"),
            ));
        }
        let options = params["options"].as_array().map_or(0, Vec::len);
        if params["sessionId"].is_string()
            && params["toolCall"]["toolCallId"].is_string()
            && options > 0
        {
            return Ok(());
        }
        Err((
            "DSH_ACP_BAD_PARAMS",
            format!(
                "{method} (id {id}): not `{{sessionId, toolCall: {{toolCallId}}, options: [..]}}`"
            ),
        ))
    }

    fn response(&mut self, frame: &Value) -> Result<(), Broken> {
        let invalid = |what: &str| Err(("DSH_ACP_INVALID_FRAME", what.to_string()));
        let (result, error) = (frame.get("result"), frame.get("error"));
        if result.is_some() == error.is_some() {
            return invalid("a response holds exactly one of `result` and `error`");
        }
        if let Some(error) = error {
            if !(error["code"].is_i64() && error["message"].is_string()) {
                return invalid("the error is not `{code, message}` (an integer and a string)");
            }
        }
        let Some(id) = request_id(frame) else {
            // The transport's own answers (parse error, invalid request) carry `id: null`.
            if !(frame.get("id") == Some(&Value::Null) && error.is_some()) {
                return invalid(
                    "neither a notification (`method`) nor a response (a number or string `id`; \
                     `null` only on an error)",
                );
            }
            self.rpc.info.responses += 1;
            return Ok(());
        };
        let Some(method) = self.rpc.pending.take(&id) else {
            return Err((
                "DSH_ACP_UNEXPECTED_RESPONSE",
                format!("a response to id {id}, which the client has no request pending for"),
            ));
        };
        self.rpc.info.responses += 1;
        match result {
            Some(result) => check_result(&method, &id, result),
            None => Ok(()),
        }
    }
}

/// A chunk carries its reply's `messageId` and a text content block; a tool call its id.
fn check_update(kind: &str, update: &Value) -> Result<(), Broken> {
    let well_formed = match kind {
        "agent_thought_chunk" | "agent_message_chunk" => {
            update["messageId"].is_string() && update["content"]["type"].is_string()
        }
        "usage_update" => update["used"].is_u64() && update["size"].is_u64(),
        "tool_call" | "tool_call_update" => update["toolCallId"].is_string(),
        _ => true,
    };
    if well_formed {
        return Ok(());
    }
    Err((
        "DSH_ACP_BAD_PARAMS",
        format!("session/update {kind}: not the shape dsh sends (docs/surface-acp.md)"),
    ))
}

/// Each method's result shape (docs/surface-acp.md).
fn check_result(method: &str, id: &str, result: &Value) -> Result<(), Broken> {
    let well_formed = match method {
        "initialize" => {
            result["protocolVersion"].is_u64() && result["agentCapabilities"].is_object()
        }
        "session/new" => result["sessionId"].is_string(),
        "session/list" => result["sessions"].is_array(),
        "session/prompt" => result["stopReason"]
            .as_str()
            .is_some_and(|reason| STOP_REASONS.contains(&reason)),
        "session/set_config_option" => result["configOptions"].is_array(),
        _ => result.is_object(),
    };
    if well_formed {
        return Ok(());
    }
    Err((
        "DSH_ACP_BAD_RESULT",
        format!("{method} (id {id}): the result {result} is not the shape ACP gives it"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn codes(client: &[Value], agent: &[Value]) -> Vec<String> {
        let mut wire = AcpWire::default();
        for line in client {
            wire.rpc.client_line(line.to_string().as_bytes());
        }
        let lines = agent.iter().enumerate();
        lines
            .filter_map(|(index, frame)| wire.runtime_line(index + 1, frame.to_string().as_bytes()))
            .map(|violation| violation.code)
            .collect()
    }

    fn request(id: Value, method: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {}})
    }

    fn update(kind: &str, extra: Value) -> Value {
        let mut update = json!({"sessionUpdate": kind});
        update
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": update}})
    }

    #[test]
    fn a_real_shaped_session_passes() {
        let client = [
            request(json!(1), "initialize"),
            request(json!(2), "session/new"),
            request(json!("p"), "session/prompt"),
            request(json!(4), "session/load"),
        ];
        let text = json!({"messageId": "m", "content": {"type": "text", "text": "Hi."}});
        let agent = [
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": 1, "agentCapabilities": {}}}),
            json!({"jsonrpc": "2.0", "id": 2, "result": {"sessionId": "s", "configOptions": []}}),
            update("agent_message_chunk", text),
            update("usage_update", json!({"used": 5750, "size": 1000000})),
            update(
                "tool_call",
                json!({"toolCallId": "toolu_1_0", "status": "in_progress"}),
            ),
            json!({"jsonrpc": "2.0", "id": 0, "method": "session/request_permission",
                   "params": {"sessionId": "s", "toolCall": {"toolCallId": "toolu_1_0"}, "options": [{"optionId": "allow"}]}}),
            json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32601, "message": "\"Method not found\": session/load"}}),
            json!({"jsonrpc": "2.0", "id": "p", "result": {"stopReason": "end_turn"}}),
        ];
        assert_eq!(codes(&client, &agent), Vec::<String>::new());
    }

    #[test]
    fn each_broken_rule_is_named() {
        let client = [
            request(json!(1), "initialize"),
            request(json!(2), "session/prompt"),
        ];
        let agent = [
            json!({"v": 1, "type": "ready"}),
            json!({"jsonrpc": "2.0", "id": 7, "result": {}}),
            json!({"jsonrpc": "2.0", "method": "session/notify", "params": {}}),
            update("plan", json!({})),
            update("agent_message_chunk", json!({"content": {"type": "text"}})),
            json!({"jsonrpc": "2.0", "id": 0, "method": "fs/read_text_file", "params": {}}),
            json!({"jsonrpc": "2.0", "id": 5, "method": "session/request_permission", "params": {}}),
            json!({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "done"}}),
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": "x"}}),
        ];
        assert_eq!(
            codes(&client, &agent),
            [
                "DSH_ACP_INVALID_FRAME",
                "DSH_ACP_UNEXPECTED_RESPONSE",
                "DSH_ACP_UNKNOWN_NOTIFICATION",
                "DSH_ACP_UNKNOWN_UPDATE",
                "DSH_ACP_BAD_PARAMS",
                "DSH_ACP_UNKNOWN_REQUEST",
                "DSH_ACP_AGENT_REQUEST_ID",
                "DSH_ACP_BAD_RESULT",
                "DSH_ACP_INVALID_FRAME",
            ]
        );
    }

    #[test]
    fn unanswered_requests_and_answers_to_the_agent_are_told_apart() {
        let mut wire = AcpWire::default();
        assert!(wire
            .rpc
            .client_line(request(json!(0), "initialize").to_string().as_bytes()));
        let answer =
            json!({"jsonrpc": "2.0", "id": 0, "result": {"outcome": {"outcome": "cancelled"}}});
        assert!(!wire.rpc.client_line(answer.to_string().as_bytes()));
        let cancel =
            json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}});
        assert!(!wire.rpc.client_line(cancel.to_string().as_bytes()));
        assert_eq!(wire.rpc.summary().unanswered, ["initialize 0"]);
        assert_eq!(wire.rpc.summary().requests, 1);
    }
}
