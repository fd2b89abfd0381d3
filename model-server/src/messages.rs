//! The Anthropic Messages dialect (`POST .../v1/messages`), which dsh 0.2.1 speaks to its model
//! (`x-api-key`, `anthropic-version: 2023-06-01`): the same scripted reply as [`crate::sse`], as
//! named server-sent events (`message_start`, a `content_block_start`/`_delta`/`_stop` run per
//! block: `thinking` with `thinking_delta`s and a `signature_delta`, `text` with `text_delta`s,
//! `tool_use` with `input_json_delta`s; then `message_delta` with `stop_reason` and `usage`, and
//! `message_stop`), or as one JSON `message` when the request does not ask for `stream: true`
//! (`drip_ms` and `cut_after_events` shape streams only).
//! Errors take Anthropic's shape `{"type":"error","error":{"type":...,"message":...}}`.
//!
//! A request is matched against the script through [`chat_view`]: its messages in the
//! chat-completions shape that [`crate::script::When`] reads.

use crate::script::Reply;
use crate::sse::{made_up_usage, pieces, DEFAULT_CHUNK_CHARS};
use serde_json::{json, Map, Value};

/// Whether `path` (its query dropped) is a Messages endpoint: `.../messages` or below it (such
/// as `.../messages/count_tokens`), so that its errors take the Messages shape.
pub fn is_messages_path(path: &str) -> bool {
    let path = path.split('?').next().unwrap_or_default();
    path.ends_with("/messages") || path.contains("/messages/")
}

/// Refuses a body the Messages API would refuse: `model` a string, `messages` an array of
/// objects, `max_tokens` a positive integer, `stream` a boolean and `tools` an array when present;
/// the error names the member.
pub fn check_request(body: &Value) -> Result<(), String> {
    if body
        .get("stream")
        .is_some_and(|stream| !stream.is_boolean())
    {
        return Err("`stream` must be a boolean".into());
    }
    if body.get("tools").is_some_and(|tools| !tools.is_array()) {
        return Err("`tools` must be an array".into());
    }
    if !body.get("model").is_some_and(Value::is_string) {
        return Err("`model` must be a string".into());
    }
    let messages_ok = body
        .get("messages")
        .and_then(Value::as_array)
        .is_some_and(|messages| messages.iter().all(Value::is_object));
    if !messages_ok {
        return Err("`messages` must be an array of message objects".into());
    }
    let max_tokens = body.get("max_tokens").and_then(Value::as_u64);
    if max_tokens.is_none_or(|max| max < 1) {
        return Err("`max_tokens` must be an integer of at least 1".into());
    }
    Ok(())
}

/// Whether the request asks for a stream (`"stream": true`).
pub fn wants_stream(body: &Value) -> bool {
    body.get("stream").and_then(Value::as_bool) == Some(true)
}

/// The request as [`crate::script::When`] reads it: `{"messages": [...], "tools": [...]}` in the
/// chat-completions shape, holding only what `When` reads (roles, user text, tool call ids and
/// names, tool names), so a large body is not copied. A user message's text blocks become a
/// `user` message and its `tool_result` blocks `tool` messages after it (so a message carrying a
/// tool result ends with the role `tool`); an assistant message's `tool_use` blocks become its
/// `tool_calls`.
pub fn chat_view(body: &Value) -> Value {
    let messages: Vec<Value> = array(body, "messages")
        .iter()
        .flat_map(chat_messages)
        .collect();
    let tools: Vec<Value> = array(body, "tools")
        .iter()
        .map(|tool| json!({ "name": tool.get("name") }))
        .collect();
    json!({ "messages": messages, "tools": tools })
}

/// The array member `key` of `value`, empty when it is absent or not an array.
fn array<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// One Messages message as chat-completions messages.
fn chat_messages(message: &Value) -> Vec<Value> {
    let role = message.get("role").and_then(Value::as_str).unwrap_or("");
    let text_content;
    let blocks = match message.get("content") {
        Some(Value::String(text)) => {
            text_content = [json!({ "type": "text", "text": text })];
            &text_content[..]
        }
        _ => array(message, "content"),
    };
    let of_type = |kind: &'static str| {
        blocks
            .iter()
            .filter(move |block| block.get("type").and_then(Value::as_str) == Some(kind))
    };
    let text: Vec<&str> = of_type("text")
        .filter_map(|block| block.get("text").and_then(Value::as_str))
        .collect();
    if role == "assistant" {
        let calls: Vec<Value> = of_type("tool_use").map(chat_tool_call).collect();
        return vec![json!({ "role": "assistant", "tool_calls": calls })];
    }
    let mut out = Vec::new();
    if !text.is_empty() {
        out.push(json!({ "role": role, "content": text.join("\n") }));
    }
    out.extend(
        of_type("tool_result")
            .map(|block| json!({ "role": "tool", "tool_call_id": block.get("tool_use_id") })),
    );
    out
}

/// A `tool_use` block as a chat-completions tool call: its id and name (not its input).
fn chat_tool_call(block: &Value) -> Value {
    json!({ "id": block.get("id"), "type": "function", "function": { "name": block.get("name") } })
}

/// The events (each `event: NAME\ndata: JSON\n\n`) that stream `reply` as the answer to request
/// number `n`.
pub fn events(reply: &Reply, n: u64, model: &str) -> Vec<String> {
    let usage = usage(reply);
    let mut start = message_shell(n, model);
    start["usage"] = json!({ "input_tokens": usage["input_tokens"], "output_tokens": 1,
        "cache_creation_input_tokens": usage["cache_creation_input_tokens"],
        "cache_read_input_tokens": usage["cache_read_input_tokens"] });
    let mut out = vec![event(
        "message_start",
        json!({ "type": "message_start", "message": start }),
    )];
    for (index, block) in streamed_blocks(reply, n).into_iter().enumerate() {
        out.push(event(
            "content_block_start",
            json!({ "type": "content_block_start", "index": index, "content_block": block.start }),
        ));
        for delta in block.deltas {
            out.push(event(
                "content_block_delta",
                json!({ "type": "content_block_delta", "index": index, "delta": delta }),
            ));
        }
        out.push(event(
            "content_block_stop",
            json!({ "type": "content_block_stop", "index": index }),
        ));
    }
    out.push(event(
        "message_delta",
        json!({ "type": "message_delta",
                "delta": { "stop_reason": stop_reason(reply), "stop_sequence": null },
                "usage": usage }),
    ));
    out.push(event("message_stop", json!({ "type": "message_stop" })));
    out
}

/// The whole `message` object that answers a request without `stream: true`.
pub fn message(reply: &Reply, n: u64, model: &str) -> Value {
    let mut message = message_shell(n, model);
    message["content"] = Value::Array(whole_blocks(reply, n));
    message["stop_reason"] = json!(stop_reason(reply));
    message["usage"] = usage(reply);
    message
}

/// The JSON body of an HTTP error reply, in the Messages API's error shape.
pub fn error_body(status: u16, message: &str) -> String {
    let kind = match status {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        400..=499 => "invalid_request_error",
        503 | 529 => "overloaded_error",
        _ => "api_error",
    };
    json!({ "type": "error", "error": { "type": kind, "message": message } }).to_string()
}

fn event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// A `message` with no content and no stop reason yet.
fn message_shell(n: u64, model: &str) -> Value {
    json!({ "id": format!("msg_model_server_{n}"), "type": "message", "role": "assistant",
            "model": model, "content": [], "stop_reason": null, "stop_sequence": null })
}

fn stop_reason(reply: &Reply) -> &'static str {
    if reply.max_tokens {
        "max_tokens"
    } else if reply.tool_calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    }
}

/// A made-up signature for a thinking block (the client sends it back; nobody checks it here).
fn signature(n: u64) -> String {
    format!("model-server-signature-{n}")
}

/// The call id of tool call `index`: the scripted one, or `toolu_<n>_<index>`.
fn tool_id(reply: &Reply, n: u64, index: usize) -> String {
    reply.tool_calls[index]
        .id
        .clone()
        .unwrap_or_else(|| format!("toolu_{n}_{index}"))
}

/// One streamed content block: its `content_block_start` block and its deltas.
struct StreamedBlock {
    start: Value,
    deltas: Vec<Value>,
}

/// The reply's blocks in order (thinking, text, tool uses), each as start and deltas.
fn streamed_blocks(reply: &Reply, n: u64) -> Vec<StreamedBlock> {
    let size = reply.chunk_chars.unwrap_or(DEFAULT_CHUNK_CHARS).max(1);
    let mut out = Vec::new();
    if let Some(thinking) = reply.reasoning.as_deref().filter(|text| !text.is_empty()) {
        let mut deltas: Vec<Value> = pieces(thinking, size)
            .into_iter()
            .map(|piece| json!({ "type": "thinking_delta", "thinking": piece }))
            .collect();
        deltas.push(json!({ "type": "signature_delta", "signature": signature(n) }));
        out.push(StreamedBlock {
            start: json!({ "type": "thinking", "thinking": "", "signature": "" }),
            deltas,
        });
    }
    if let Some(text) = reply.text.as_deref().filter(|text| !text.is_empty()) {
        out.push(StreamedBlock {
            start: json!({ "type": "text", "text": "" }),
            deltas: pieces(text, size)
                .into_iter()
                .map(|piece| json!({ "type": "text_delta", "text": piece }))
                .collect(),
        });
    }
    for (index, call) in reply.tool_calls.iter().enumerate() {
        out.push(StreamedBlock {
            start: json!({ "type": "tool_use", "id": tool_id(reply, n, index),
                           "name": call.name, "input": {} }),
            deltas: pieces(&call.arguments_text(), size.max(64))
                .into_iter()
                .map(|piece| json!({ "type": "input_json_delta", "partial_json": piece }))
                .collect(),
        });
    }
    out
}

/// The reply's blocks whole, for a message answered in one piece. A tool call's `input` is its
/// arguments object; scripted arguments that are a string not holding JSON are sent as that
/// string, as malformed as the script made them.
fn whole_blocks(reply: &Reply, n: u64) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(thinking) = reply.reasoning.as_deref().filter(|text| !text.is_empty()) {
        out.push(json!({ "type": "thinking", "thinking": thinking, "signature": signature(n) }));
    }
    if let Some(text) = reply.text.as_deref().filter(|text| !text.is_empty()) {
        out.push(json!({ "type": "text", "text": text }));
    }
    for (index, call) in reply.tool_calls.iter().enumerate() {
        let input = match &call.arguments {
            Value::String(text) => {
                serde_json::from_str(text).unwrap_or(Value::String(text.clone()))
            }
            other => other.clone(),
        };
        out.push(json!({ "type": "tool_use", "id": tool_id(reply, n, index),
                         "name": call.name, "input": input }));
    }
    out
}

/// The reply's usage in the Messages shape: a scripted one with `input_tokens` or
/// `output_tokens` as it is, an OpenAI-style one (scripted or made up) translated.
fn usage(reply: &Reply) -> Value {
    let given = reply.usage.clone().unwrap_or_else(|| made_up_usage(reply));
    if given.get("input_tokens").is_some() || given.get("output_tokens").is_some() {
        return given;
    }
    let count = |key: &str| given.get(key).and_then(Value::as_u64);
    let hit = count("prompt_cache_hit_tokens").unwrap_or(0);
    let input = count("prompt_cache_miss_tokens")
        .or_else(|| count("prompt_tokens").map(|all| all.saturating_sub(hit)))
        .unwrap_or(0);
    let mut usage = Map::new();
    usage.insert("input_tokens".into(), json!(input));
    usage.insert("cache_creation_input_tokens".into(), json!(0));
    usage.insert("cache_read_input_tokens".into(), json!(hit));
    usage.insert(
        "output_tokens".into(),
        json!(count("completion_tokens").unwrap_or(0)),
    );
    Value::Object(usage)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::{ToolCall, When};

    /// The (name, data) of each event.
    fn parsed(events: &[String]) -> Vec<(String, Value)> {
        events
            .iter()
            .map(|event| {
                let (name, data) = event
                    .strip_prefix("event: ")
                    .and_then(|rest| rest.split_once("\ndata: "))
                    .expect("an event: line, then a data: line");
                assert!(data.ends_with("\n\n"), "{data:?}");
                let data: Value = serde_json::from_str(data.trim_end()).unwrap();
                assert_eq!(data["type"], name, "the event name is its data's type");
                (name.to_string(), data)
            })
            .collect()
    }

    fn joined(events: &[(String, Value)], delta: &str, key: &str) -> String {
        events
            .iter()
            .filter(|(_, data)| data["delta"]["type"] == delta)
            .filter_map(|(_, data)| data["delta"][key].as_str())
            .collect()
    }

    #[test]
    fn thinking_text_and_a_tool_use_stream_as_three_blocks_in_order() {
        let reply = Reply {
            reasoning: Some("thinking é about it".into()),
            text: Some("Hello, wörld!".into()),
            tool_calls: vec![ToolCall {
                name: "write".into(),
                arguments: json!({ "file_path": "a.html", "content": "<p>x</p>".repeat(30) }),
                id: None,
            }],
            chunk_chars: Some(5),
            ..Reply::default()
        };
        let events = parsed(&events(&reply, 7, "deepseek-flash"));
        let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names.first(), Some(&"message_start"));
        assert_eq!(&names[names.len() - 2..], ["message_delta", "message_stop"]);
        let starts: Vec<&Value> = events
            .iter()
            .filter(|(name, _)| name == "content_block_start")
            .map(|(_, data)| &data["content_block"])
            .collect();
        let kinds: Vec<&Value> = starts.iter().map(|block| &block["type"]).collect();
        assert_eq!(kinds, ["thinking", "text", "tool_use"]);
        assert_eq!(starts[2]["id"], "toolu_7_0");
        assert_eq!(
            joined(&events, "thinking_delta", "thinking"),
            "thinking é about it"
        );
        assert_eq!(joined(&events, "text_delta", "text"), "Hello, wörld!");
        let input: Value =
            serde_json::from_str(&joined(&events, "input_json_delta", "partial_json")).unwrap();
        assert_eq!(input["file_path"], "a.html");
        let (_, end) = &events[events.len() - 2];
        assert_eq!(end["delta"]["stop_reason"], "tool_use");
        assert!(end["usage"]["output_tokens"].as_u64().unwrap() >= 1);
        assert_eq!(events[0].1["message"]["id"], "msg_model_server_7");
        assert_eq!(events[0].1["message"]["model"], "deepseek-flash");
    }

    #[test]
    fn every_block_starts_and_stops_around_its_own_deltas() {
        let reply = Reply {
            reasoning: Some("r".into()),
            text: Some("t".into()),
            ..Reply::default()
        };
        let mut open: Option<u64> = None;
        for (name, data) in parsed(&events(&reply, 1, "m")) {
            let index = data["index"].as_u64();
            match name.as_str() {
                "content_block_start" => assert_eq!(open.replace(index.unwrap()), None),
                "content_block_delta" => assert_eq!(open, index),
                "content_block_stop" => assert_eq!(open.take(), index),
                _ => assert_eq!(open, None, "{name} inside a block"),
            }
        }
    }

    #[test]
    fn a_max_tokens_reply_stops_with_max_tokens_streamed_and_whole() {
        let reply = Reply {
            text: Some("cut sh".into()),
            max_tokens: true,
            ..Reply::default()
        };
        let events = parsed(&events(&reply, 1, "m"));
        assert_eq!(
            events[events.len() - 2].1["delta"]["stop_reason"],
            "max_tokens"
        );
        let whole = message(&reply, 1, "m");
        assert_eq!(whole["stop_reason"], "max_tokens");
        assert_eq!(
            whole["content"],
            json!([{ "type": "text", "text": "cut sh" }])
        );
    }

    #[test]
    fn a_whole_message_holds_every_block_and_translated_usage() {
        let reply = Reply {
            reasoning: Some("hm".into()),
            tool_calls: vec![ToolCall {
                name: "read".into(),
                arguments: json!("{\"file_path\":\"x\"}"),
                id: Some("toolu_a".into()),
            }],
            usage: Some(json!({ "prompt_tokens": 100, "completion_tokens": 7,
                                "prompt_cache_hit_tokens": 60 })),
            ..Reply::default()
        };
        let whole = message(&reply, 2, "m");
        assert_eq!(whole["type"], "message");
        assert_eq!(whole["content"][0]["type"], "thinking");
        assert_eq!(
            whole["content"][1],
            json!({ "type": "tool_use", "id": "toolu_a", "name": "read",
                    "input": { "file_path": "x" } })
        );
        assert_eq!(whole["stop_reason"], "tool_use");
        assert_eq!(
            whole["usage"],
            json!({ "input_tokens": 40, "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 60, "output_tokens": 7 })
        );
    }

    #[test]
    fn error_bodies_take_the_messages_shape() {
        let body: Value = serde_json::from_str(&error_body(401, "bad key")).unwrap();
        assert_eq!(
            body,
            json!({ "type": "error", "error": { "type": "authentication_error",
                                                "message": "bad key" } })
        );
        let kind = |status| {
            let body: Value = serde_json::from_str(&error_body(status, "m")).unwrap();
            body["error"]["type"].as_str().unwrap().to_string()
        };
        assert_eq!(kind(429), "rate_limit_error");
        assert_eq!(kind(400), "invalid_request_error");
        assert_eq!(kind(529), "overloaded_error");
        assert_eq!(kind(500), "api_error");
    }

    #[test]
    fn requests_missing_a_required_member_are_refused_by_name() {
        let good = json!({ "model": "m", "max_tokens": 10, "messages": [] });
        assert_eq!(check_request(&good), Ok(()));
        for (member, bad) in [
            ("model", json!({ "max_tokens": 10, "messages": [] })),
            (
                "messages",
                json!({ "model": "m", "max_tokens": 10, "messages": [1] }),
            ),
            (
                "max_tokens",
                json!({ "model": "m", "max_tokens": 0, "messages": [] }),
            ),
        ] {
            let error = check_request(&bad).unwrap_err();
            assert!(error.contains(member), "{error}");
        }
    }

    /// The conversation of a write turn as dsh 0.2.1 sends it: the prompt and a runtime-context
    /// block, then the assistant's `tool_use`, then the user message carrying its result.
    fn after_a_write() -> Value {
        json!({ "model": "m", "max_tokens": 10, "tools": [{ "name": "write" }], "messages": [
            { "role": "user", "content": [{ "type": "text", "text": "Make a page" },
                                          { "type": "text", "text": "Current runtime context." }] },
            { "role": "assistant", "content": [
                { "type": "thinking", "thinking": "hm", "signature": "s" },
                { "type": "tool_use", "id": "toolu_1", "name": "write", "input": { "a": 1 } }] },
            { "role": "user", "content": [
                { "type": "tool_result", "tool_use_id": "toolu_1", "content": "ok" }] } ] })
    }

    #[test]
    fn the_chat_view_lets_when_see_roles_tool_results_and_turn_input() {
        let mut body = after_a_write();
        let when = |last_role: &str, after_tool: Option<&str>| When {
            last_role: Some(last_role.into()),
            tools: Some(true),
            after_tool: after_tool.map(String::from),
            ..When::default()
        };
        let view = chat_view(&body);
        assert!(when("tool", Some("write")).matches(&view));
        assert!(!when("tool", Some("read")).matches(&view));
        assert!(!when("user", None).matches(&view));
        body["messages"].as_array_mut().unwrap().truncate(1);
        let view = chat_view(&body);
        assert!(when("user", None).matches(&view));
        let asks = |text: &str| When {
            user_contains: Some(text.into()),
            ..When::default()
        };
        assert!(asks("Make a page").matches(&view));
        assert!(!asks("green").matches(&view));
        body["tools"] = json!([]);
        assert!(!when("user", None).matches(&chat_view(&body)));
    }

    #[test]
    fn paths_under_messages_are_messages_paths() {
        assert!(is_messages_path("/v1/messages"));
        assert!(is_messages_path("/v1/messages?beta=true"));
        assert!(is_messages_path("/v1/messages/count_tokens"));
        assert!(!is_messages_path("/chat/completions"));
        assert!(!is_messages_path("/v1/messagesx"));
    }
}
