//! A reply as the server-sent events of an OpenAI-compatible streamed chat completion, with
//! DeepSeek's `reasoning_content` deltas: one `chat.completion.chunk` per event, then
//! `data: [DONE]`.

use super::script::Reply;
use serde_json::{json, Value};

/// Characters per text delta when the reply does not say (`chunk_chars`).
pub(crate) const DEFAULT_CHUNK_CHARS: usize = 24;

/// The events (each `data: ...\n\n`) that stream `reply` as the answer to request number `n`.
pub fn events(reply: &Reply, n: u64, model: &str) -> Vec<String> {
    let id = format!("chatcmpl-model-server-{n}");
    let chunk = |delta: Value, finish: Value, usage: Option<&Value>| {
        let mut chunk = json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": 1_700_000_000u64 + n,
            "model": model,
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }],
        });
        if let Some(usage) = usage {
            chunk["usage"] = usage.clone();
        }
        format!("data: {chunk}\n\n")
    };
    let size = reply.chunk_chars.unwrap_or(DEFAULT_CHUNK_CHARS).max(1);
    let mut out = vec![chunk(
        json!({ "role": "assistant", "content": "" }),
        Value::Null,
        None,
    )];
    for piece in pieces(reply.reasoning.as_deref().unwrap_or_default(), size) {
        out.push(chunk(
            json!({ "reasoning_content": piece }),
            Value::Null,
            None,
        ));
    }
    for piece in pieces(reply.text.as_deref().unwrap_or_default(), size) {
        out.push(chunk(json!({ "content": piece }), Value::Null, None));
    }
    for (index, call) in reply.tool_calls.iter().enumerate() {
        let call_id = call
            .id
            .clone()
            .unwrap_or_else(|| format!("call_{n}_{index}"));
        let arguments = call.arguments_text();
        out.push(chunk(
            json!({ "tool_calls": [{ "index": index, "id": call_id, "type": "function",
                                     "function": { "name": call.name, "arguments": "" } }] }),
            Value::Null,
            None,
        ));
        for piece in pieces(&arguments, size.max(64)) {
            out.push(chunk(
                json!({ "tool_calls": [{ "index": index, "function": { "arguments": piece } }] }),
                Value::Null,
                None,
            ));
        }
    }
    let finish = if reply.max_tokens {
        "length"
    } else if reply.tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    let usage = reply.usage.clone().unwrap_or_else(|| made_up_usage(reply));
    out.push(chunk(json!({}), json!(finish), Some(&usage)));
    out.push("data: [DONE]\n\n".to_string());
    out
}

/// The JSON body of an HTTP error reply, shaped like the OpenAI/DeepSeek error envelope.
pub fn error_body(status: u16, message: &str) -> String {
    let kind = match status {
        401 => "authentication_error",
        429 => "rate_limit_error",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    };
    json!({ "error": { "message": message, "type": kind, "code": status } }).to_string()
}

/// A plausible usage block: token counts of a few characters per token.
pub(crate) fn made_up_usage(reply: &Reply) -> Value {
    let chars = reply.text.as_deref().unwrap_or_default().chars().count()
        + reply
            .reasoning
            .as_deref()
            .unwrap_or_default()
            .chars()
            .count()
        + reply
            .tool_calls
            .iter()
            .map(|call| call.arguments.to_string().len())
            .sum::<usize>();
    let completion = (chars / 4).max(1);
    json!({
        "prompt_tokens": 1000,
        "completion_tokens": completion,
        "total_tokens": 1000 + completion,
        "prompt_cache_hit_tokens": 0,
        "prompt_cache_miss_tokens": 1000,
    })
}

/// `text` cut into runs of at most `size` characters (never inside a character).
pub(crate) fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(size).map(|run| run.iter().collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::{Reply, ToolCall};

    fn payloads(events: &[String]) -> Vec<Value> {
        events
            .iter()
            .filter_map(|event| event.strip_prefix("data: "))
            .filter(|data| !data.starts_with("[DONE]"))
            .map(|data| serde_json::from_str(data.trim_end()).expect("each event is JSON"))
            .collect()
    }

    #[test]
    fn text_and_reasoning_reassemble_in_order_and_end_with_stop_and_done() {
        let reply = Reply {
            reasoning: Some("thinking é about it".into()),
            text: Some("Hello, wörld!".into()),
            chunk_chars: Some(5),
            ..Reply::default()
        };
        let events = events(&reply, 3, "deepseek-chat");
        assert_eq!(events.last().map(String::as_str), Some("data: [DONE]\n\n"));
        let chunks = payloads(&events);
        let joined = |key: &str| -> String {
            chunks
                .iter()
                .filter_map(|c| c["choices"][0]["delta"][key].as_str())
                .collect()
        };
        assert_eq!(joined("reasoning_content"), "thinking é about it");
        assert_eq!(joined("content"), "Hello, wörld!");
        let last = chunks.last().unwrap();
        assert_eq!(last["choices"][0]["finish_reason"], "stop");
        assert!(last["usage"]["completion_tokens"].as_u64().unwrap() >= 1);
        assert!(chunks.iter().all(|c| c["id"] == "chatcmpl-model-server-3"));
    }

    #[test]
    fn tool_call_arguments_reassemble_to_the_scripted_object() {
        let reply = Reply {
            tool_calls: vec![ToolCall {
                name: "write".into(),
                arguments: json!({ "path": "index.html", "content": "<h1>x</h1>".repeat(20) }),
                id: Some("call_a".into()),
            }],
            ..Reply::default()
        };
        let chunks = payloads(&events(&reply, 1, "m"));
        let calls: Vec<&Value> = chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0))
            .collect();
        assert_eq!(calls[0]["id"], "call_a");
        assert_eq!(calls[0]["function"]["name"], "write");
        let arguments: String = calls
            .iter()
            .filter_map(|c| c["function"]["arguments"].as_str())
            .collect();
        let parsed: Value = serde_json::from_str(&arguments).unwrap();
        assert_eq!(parsed["path"], "index.html");
        assert_eq!(
            chunks.last().unwrap()["choices"][0]["finish_reason"],
            "tool_calls"
        );
    }

    #[test]
    fn a_max_tokens_reply_finishes_with_length() {
        let reply = Reply {
            text: Some("cut".into()),
            max_tokens: true,
            ..Reply::default()
        };
        let chunks = payloads(&events(&reply, 1, "m"));
        assert_eq!(
            chunks.last().unwrap()["choices"][0]["finish_reason"],
            "length"
        );
    }

    #[test]
    fn error_bodies_name_the_error_class() {
        let body: Value = serde_json::from_str(&error_body(401, "bad key")).unwrap();
        assert_eq!(body["error"]["type"], "authentication_error");
        let body: Value = serde_json::from_str(&error_body(429, "slow down")).unwrap();
        assert_eq!(body["error"]["type"], "rate_limit_error");
    }
}
