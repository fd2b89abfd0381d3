//! The model server over real sockets: scripted replies in order and by condition, the faults
//! (HTTP errors, a stream cut mid-event, a slow drip), the request log, and the CLI's URL file and
//! bad-script handling.

use dsh_conformance::model_server::script::Script;
use dsh_conformance::model_server::{default_script, ModelServer, DEFAULT_HTML};
// GREEN_HTML is escaped inside the streamed arguments; the test looks for its marker.
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// What one request got back: status, the raw body bytes after the head, and the `data:`
/// payloads parsed from a (de-chunked) event stream.
struct Answer {
    status: u16,
    raw_body: Vec<u8>,
    events: Vec<String>,
}

fn post(url: &str, path: &str, body: &Value) -> Answer {
    let address = url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).expect("connect to the model server");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let body = body.to_string();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer canary-key\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    let head = String::from_utf8_lossy(&response[..split]).to_string();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
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
    Answer {
        status,
        raw_body,
        events,
    }
}

/// The chunks of a chunked body, tolerating a last chunk cut short.
fn dechunk(mut raw: &[u8]) -> String {
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

fn chat(last_role: &str, user: &str, tools: bool) -> Value {
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

fn deltas(answer: &Answer, key: &str) -> String {
    answer
        .events
        .iter()
        .filter(|e| !e.starts_with("[DONE]"))
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .filter_map(|c| c["choices"][0]["delta"][key].as_str().map(String::from))
        .collect()
}

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

#[test]
fn cli_prints_and_writes_its_url_logs_requests_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let url_file = dir.path().join("url");
    let log = dir.path().join("log.jsonl");
    let mut child = std::process::Command::new(fake_dsh::locate::binary("dsh-conformance"))
        .arg("model-server")
        .arg("--url-file")
        .arg(&url_file)
        .arg("--log")
        .arg(&log)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let url = line.trim().to_string();
    assert_eq!(std::fs::read_to_string(&url_file).unwrap().trim(), url);
    let answer = post(&url, "/chat/completions", &chat("user", "hello", false));
    assert_eq!(deltas(&answer, "content"), "Landing page");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(child.wait().unwrap().success());
    let logged: Value = serde_json::from_str(
        std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(logged["body"]["messages"][1]["content"], "hello");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"replies\": 3}").unwrap();
    let output = std::process::Command::new(fake_dsh::locate::binary("dsh-conformance"))
        .args(["model-server", "--script"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("bad.json"));
}
