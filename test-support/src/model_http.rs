//! A small loopback HTTP client for the model server's tests (`model-server/tests/it`, and
//! `conformance/tests/it/model_server_cli.rs`, which tests the CLI): a JSON POST read to the end, a raw
//! request whose status is all that matters, and the event-stream helpers. Here, in the test
//! support crate, so neither crate's tests reach into the other's files.

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// What one request got back: status, the raw body bytes after the head, and the `data:`
/// payloads parsed from a (de-chunked) event stream.
pub struct Answer {
    pub status: u16,
    pub raw_body: Vec<u8>,
    pub events: Vec<String>,
}

/// POSTs `body` as JSON to `path` and reads the whole answer.
pub fn post(url: &str, path: &str, body: &Value) -> Answer {
    post_with(url, path, "Authorization: Bearer canary-key\r\n", body)
}

/// POSTs `body` to `/v1/messages` with the headers dsh 0.2.1 sends (`x-api-key`,
/// `anthropic-version`), and reads the whole answer.
pub fn post_messages(url: &str, body: &Value) -> Answer {
    let headers = "x-api-key: canary-key\r\nanthropic-version: 2023-06-01\r\n\
                   Accept: text/event-stream\r\n";
    post_with(url, "/v1/messages", headers, body)
}

/// POSTs `body` as JSON to `path` with extra `headers` (each ending in CRLF).
pub fn post_with(url: &str, path: &str, headers: &str, body: &Value) -> Answer {
    let address = url.trim_start_matches("http://");
    let body = body.to_string();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\n{headers}\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    exchange(url, request.into_bytes()).expect("a response from the model server")
}

/// Sends raw `request` bytes (from a thread of their own, so a server that answers before it has
/// read them all is not deadlocked) and parses what comes back; `None` when the connection ended
/// without a whole response head (closed or reset).
pub fn exchange(url: &str, request: Vec<u8>) -> Option<Answer> {
    let address = url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).expect("connect to the model server");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        writer.write_all(&request).ok();
        writer.shutdown(std::net::Shutdown::Write).ok();
    });
    let mut response = Vec::new();
    let read = stream.read_to_end(&mut response);
    drop(stream);
    sender.join().unwrap();
    if read.is_err() && response.is_empty() {
        return None;
    }
    parse_answer(&response)
}

/// A response's status, body and events.
pub fn parse_answer(response: &[u8]) -> Option<Answer> {
    let split = response.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&response[..split]).to_string();
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let raw_body = response[split + 4..].to_vec();
    let text = if head.contains("Transfer-Encoding: chunked") {
        dechunk(&raw_body)
    } else {
        String::from_utf8_lossy(&raw_body).to_string()
    };
    let events = text
        .split("\n\n")
        .filter_map(|event| event.strip_prefix("data: "))
        .map(String::from)
        .collect();
    Some(Answer {
        status,
        raw_body,
        events,
    })
}

/// The chunks of a chunked body, tolerating a last chunk cut short.
pub fn dechunk(mut raw: &[u8]) -> String {
    let mut out = Vec::new();
    while let Some(end) = raw.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(&String::from_utf8_lossy(&raw[..end]), 16).unwrap();
        let data = &raw[end + 2..];
        out.extend_from_slice(&data[..size.min(data.len())]);
        if size == 0 || data.len() < size + 2 {
            break;
        }
        raw = &data[size + 2..];
    }
    String::from_utf8_lossy(&out).to_string()
}

pub fn chat(last_role: &str, user: &str, tools: bool) -> Value {
    let mut body = json!({
        "model": "deepseek-v4-flash",
        "stream": true,
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": user}],
    });
    if last_role == "tool" {
        body["messages"]
            .as_array_mut()
            .unwrap()
            .push(json!({"role": "tool", "content": "ok", "tool_call_id": "c"}));
    }
    if tools {
        body["tools"] = json!([{"type": "function", "function": {"name": "write"}}]);
    }
    body
}

pub fn deltas(answer: &Answer, key: &str) -> String {
    answer
        .events
        .iter()
        .filter(|e| !e.starts_with("[DONE]"))
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .filter_map(|c| c["choices"][0]["delta"][key].as_str().map(String::from))
        .collect()
}

/// A Messages request body: a `user` turn with the prompt and a runtime-context block (as dsh
/// 0.2.1 sends it), then, with `after_tool`, the assistant's `tool_use` of that tool and the
/// user message carrying its result.
pub fn messages_body(user: &str, after_tool: Option<&str>, tools: bool) -> Value {
    let mut body = json!({
        "model": "deepseek-flash",
        "stream": true,
        "max_tokens": 4096,
        "system": "sys",
        "messages": [{"role": "user", "content": [{"type": "text", "text": user},
                                                 {"type": "text", "text": "Current runtime context."}]}],
    });
    if let Some(tool) = after_tool {
        let messages = body["messages"].as_array_mut().unwrap();
        messages.push(json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_x", "name": tool, "input": {}}]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_x", "content": "ok"}]}));
    }
    if tools {
        body["tools"] = json!([{"name": "write", "input_schema": {"type": "object"}}]);
    }
    body
}

/// The named events (`event: NAME` + `data: JSON`) of a Messages stream; an event cut short has
/// `Value::Null` as its data.
pub fn named_events(answer: &Answer) -> Vec<(String, Value)> {
    dechunk(&answer.raw_body)
        .split("\n\n")
        .filter_map(|event| {
            let (name, data) = event.strip_prefix("event: ")?.split_once("\ndata: ")?;
            let data = serde_json::from_str(data).unwrap_or(Value::Null);
            Some((name.to_string(), data))
        })
        .collect()
}

/// The joined `key` strings of the `kind` deltas of a Messages stream.
pub fn block_deltas(answer: &Answer, kind: &str, key: &str) -> String {
    named_events(answer)
        .iter()
        .filter(|(_, data)| data["delta"]["type"] == kind)
        .filter_map(|(_, data)| data["delta"][key].as_str().map(String::from))
        .collect()
}

/// The body of a whole (not streamed) answer as JSON.
pub fn json_body(answer: &Answer) -> Value {
    serde_json::from_slice(&answer.raw_body).expect("a JSON body")
}
