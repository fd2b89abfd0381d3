//! The model server over real sockets: scripted replies in order and by condition, the faults
//! (HTTP errors, a stream cut mid-event, a slow drip) and the request log.

use crate::support;

use dsh_model_server::script::Script;
use dsh_model_server::{default_script, ModelServer, DEFAULT_HTML};
// GREEN_HTML is escaped inside the streamed arguments; the test looks for its marker.
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use support::{chat, deltas, post};

#[test]
fn default_script_writes_then_finishes_and_titles_without_tools() {
    let server = ModelServer::start(default_script()).unwrap();
    assert!(server.url().starts_with("http://127.0.0.1:"));
    let first = post(
        server.url(),
        "/chat/completions",
        &chat("user", "A page", true),
    );
    assert_eq!(first.status, 200);
    assert_eq!(first.events.last().map(String::as_str), Some("[DONE]"));
    let calls: Vec<Value> = first
        .events
        .iter()
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0).cloned())
        .collect();
    assert_eq!(calls[0]["function"]["name"], "write");
    let arguments: String = calls
        .iter()
        .filter_map(|c| c["function"]["arguments"].as_str())
        .collect();
    let arguments: Value = serde_json::from_str(&arguments).unwrap();
    assert_eq!(arguments["content"], DEFAULT_HTML);
    let done = post(
        server.url(),
        "/v1/chat/completions",
        &chat("tool", "A page", true),
    );
    assert_eq!(deltas(&done, "content"), "I wrote index.html.");
    assert!(!deltas(&done, "reasoning_content").is_empty());
    let title = post(
        server.url(),
        "/chat/completions",
        &chat("user", "A page", false),
    );
    assert_eq!(deltas(&title, "content"), "Landing page");
    let log = server.requests();
    assert_eq!(log.len(), 3);
    assert_eq!(log[0]["authorization"], true);
    assert_eq!(log[1]["path"], "/v1/chat/completions");
    assert_eq!(log[2]["reply"], 4);
    // This turn's input asks for green: the edit reads the file first (the real dsh refuses to
    // overwrite an unread file), then writes the green page after the read's result.
    let mut green = chat("user", "Make the page green", true);
    let messages = green["messages"].as_array_mut().unwrap();
    messages.push(json!({"role": "user", "content": "ctx"}));
    let read = post(server.url(), "/chat/completions", &green);
    assert!(read.events.iter().any(|e| e.contains("\"name\":\"read\"")));
    assert!(!read.events.iter().any(|e| e.contains("background:green")));
    let messages = green["messages"].as_array_mut().unwrap();
    messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "r1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}));
    messages.push(json!({"role": "tool", "tool_call_id": "r1", "content": "<html>"}));
    let edit = post(server.url(), "/chat/completions", &green);
    assert!(edit.events.iter().any(|e| e.contains("background:green")));
    // After the edit's own result (a write), the turn finishes.
    let messages = green["messages"].as_array_mut().unwrap();
    messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "w1", "type": "function", "function": {"name": "write", "arguments": "{}"}}]}));
    messages.push(json!({"role": "tool", "tool_call_id": "w1", "content": "ok"}));
    let done = post(server.url(), "/chat/completions", &green);
    assert_eq!(deltas(&done, "content"), "I wrote index.html.");
    assert!(!serde_json::to_string(&log).unwrap().contains("canary-key"));
}

#[test]
fn replies_are_used_up_in_order_and_an_exhausted_script_answers_500() {
    let script = Script::parse(
        r#"{"replies": [{"text": "one"}, {"status": 429}, {"status": 401}, {"text": "two",
            "when": {"user_contains": "second"}}]}"#,
    )
    .unwrap();
    let server = ModelServer::start(script).unwrap();
    let body = chat("user", "first", true);
    assert_eq!(
        deltas(&post(server.url(), "/chat/completions", &body), "content"),
        "one"
    );
    let limited = post(server.url(), "/chat/completions", &body);
    assert_eq!(limited.status, 429);
    let error: Value = serde_json::from_slice(&limited.raw_body).unwrap();
    assert_eq!(error["error"]["type"], "rate_limit_error");
    assert_eq!(post(server.url(), "/chat/completions", &body).status, 401);
    let exhausted = post(server.url(), "/chat/completions", &body);
    assert_eq!(exhausted.status, 500);
    assert!(String::from_utf8_lossy(&exhausted.raw_body).contains("request 4"));
    let second = chat("user", "the second one", true);
    assert_eq!(
        deltas(&post(server.url(), "/chat/completions", &second), "content"),
        "two"
    );
    assert_eq!(post(server.url(), "/nowhere", &body).status, 404);
    let statuses: Vec<Value> = server
        .requests()
        .iter()
        .map(|e| e["status"].clone())
        .collect();
    assert_eq!(statuses, [200, 429, 401, 500, 200, 404]);
}

#[test]
fn a_cut_stream_stops_inside_an_event_and_never_sends_done() {
    let script = Script::parse(
        r#"{"replies": [{"text": "abcdefghij", "chunk_chars": 2,
        "cut_after_events": 3}]}"#,
    )
    .unwrap();
    let server = ModelServer::start(script).unwrap();
    let answer = post(server.url(), "/chat/completions", &chat("user", "x", false));
    assert_eq!(answer.status, 200);
    assert!(!answer.events.iter().any(|e| e.starts_with("[DONE]")));
    // Role chunk + 2 whole content events, then half of the fourth event.
    assert_eq!(answer.events.len(), 4);
    assert!(serde_json::from_str::<Value>(&answer.events[3]).is_err());
    assert_eq!(deltas(&answer, "content"), "abcd");
}

#[test]
fn a_slow_drip_spaces_the_events_out() {
    let script = Script::parse(
        r#"{"replies": [{"text": "abcdef", "chunk_chars": 2,
        "drip_ms": 40}]}"#,
    )
    .unwrap();
    let server = ModelServer::start(script).unwrap();
    let started = Instant::now();
    let answer = post(server.url(), "/chat/completions", &chat("user", "x", false));
    // 1 role + 3 content + 1 finish + DONE = 6 events, each after a 40 ms wait.
    assert_eq!(answer.events.len(), 6);
    assert!(started.elapsed() >= Duration::from_millis(6 * 40));
    assert_eq!(deltas(&answer, "content"), "abcdef");
}

#[test]
fn bad_scripts_are_refused_with_their_position() {
    let error = Script::parse(r#"{"replies": [{"txet": "typo"}]}"#).unwrap_err();
    assert!(
        error.contains("txet") && error.contains("line 1"),
        "{error}"
    );
    let error = Script::parse(r#"{"replies": [{"status": 200}]}"#).unwrap_err();
    assert!(error.contains("replies[0].status"), "{error}");
}
