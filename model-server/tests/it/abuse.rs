//! Hostile clients against an in-process server with small limits: each gets its 4xx (or 503,
//! or 408 when idle too long) and the server goes on serving the next client. The limits are
//! shrunk so the test runs in a moment; the defaults are the same code with larger numbers.
//! (`process_abuse` floods the server as a process of its own and measures its memory.)

use crate::support;

use dsh_model_server::script::Script;
use dsh_model_server::{Limits, ModelServer, Options};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use support::{chat, deltas, exchange, post};

fn small_limits() -> Limits {
    Limits {
        max_connections: 4,
        max_head_bytes: 4096,
        max_body_bytes: 64 * 1024,
        max_parsed_body_bytes: 1024 * 1024,
        max_body_bytes_in_flight: 256 * 1024,
        read_timeout: Duration::from_millis(300),
        write_timeout: Duration::from_secs(5),
        remembered_log_bytes: 16 * 1024,
    }
}

fn start(limits: Limits) -> ModelServer {
    let script = Script::parse(r#"{"replies": [{"text": "served", "reuse": true}]}"#).unwrap();
    ModelServer::start_with(
        script,
        Options {
            limits,
            ..Options::default()
        },
    )
    .unwrap()
}

/// The server still streams a scripted reply to a well-behaved client.
fn still_serves(server: &ModelServer) {
    let answer = post(server.url(), "/chat/completions", &chat("user", "hi", true));
    assert_eq!(
        (answer.status, deltas(&answer, "content").as_str()),
        (200, "served")
    );
}

fn status_of(server: &ModelServer, request: Vec<u8>) -> Option<u16> {
    exchange(server.url(), request).map(|answer| answer.status)
}

fn head(server: &ModelServer, extra: &str) -> String {
    let address = server.url().trim_start_matches("http://");
    format!("POST /chat/completions HTTP/1.1\r\nHost: {address}\r\n{extra}")
}

#[test]
fn oversized_and_malformed_requests_get_their_4xx_and_the_server_keeps_serving() {
    let server = start(small_limits());
    let mut endless_line = b"POST /".to_vec();
    endless_line.extend(std::iter::repeat_n(b'a', 512 * 1024));
    assert_eq!(status_of(&server, endless_line), Some(431));
    still_serves(&server);
    let chunked = head(&server, "Transfer-Encoding: chunked\r\n\r\n");
    let mut endless_size = chunked.clone().into_bytes();
    endless_size.extend(std::iter::repeat_n(b'f', 512 * 1024));
    assert_eq!(status_of(&server, endless_size), Some(400));
    let overflow = format!("{chunked}ffffffffffffffff\r\nabc");
    assert_eq!(status_of(&server, overflow.into_bytes()), Some(413));
    let huge = head(&server, "Content-Length: 99999999999\r\n\r\n");
    assert_eq!(status_of(&server, huge.into_bytes()), Some(413));
    let not_json = head(&server, "Content-Length: 3\r\n\r\nabc");
    assert_eq!(status_of(&server, not_json.into_bytes()), Some(400));
    still_serves(&server);
}

#[test]
fn a_foreign_host_or_origin_is_refused_and_consumes_no_reply() {
    let script = Script::parse(r#"{"replies": [{"text": "only once"}]}"#).unwrap();
    let server = ModelServer::start(script).unwrap();
    let address = server.url().trim_start_matches("http://").to_string();
    let body = chat("user", "hi", true).to_string();
    let request = |headers: &str| {
        format!(
            "POST /chat/completions HTTP/1.1\r\n{headers}Content-Type: text/plain\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    };
    let rebound = request("Host: attacker.example\r\n");
    assert_eq!(exchange(server.url(), rebound).map(|a| a.status), Some(400));
    let cross = request(&format!(
        "Host: {address}\r\nOrigin: https://attacker.example\r\n"
    ));
    assert_eq!(exchange(server.url(), cross).map(|a| a.status), Some(403));
    let answer = post(server.url(), "/chat/completions", &chat("user", "hi", true));
    assert_eq!(deltas(&answer, "content"), "only once");
}

#[test]
fn connections_beyond_the_cap_get_503_and_idle_ones_time_out() {
    let server = start(small_limits());
    let address = server.url().trim_start_matches("http://").to_string();
    // Four slow clients take every slot: each sends half a head, then nothing.
    let mut idle: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut stream = TcpStream::connect(&address).unwrap();
            stream
                .write_all(b"POST /chat/completions HTTP/1.1\r\nHo")
                .unwrap();
            stream
        })
        .collect();
    // A fifth gets 503 at once (once the four are admitted: connect returns before accept).
    let request = head(&server, "Content-Length: 2\r\n\r\n{}").into_bytes();
    let busy = wait_for(|| exchange(server.url(), request.clone()).filter(|a| a.status == 503));
    assert!(String::from_utf8_lossy(&busy.raw_body).contains("4 connections"));
    // The idle four are answered 408 and closed after the read timeout.
    for stream in &mut idle {
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).ok();
        assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 408"));
    }
    // Their slots are free again: a well-behaved client is served.
    wait_for(|| exchange(server.url(), request.clone()).filter(|a| a.status == 200));
    still_serves(&server);
}

#[test]
fn the_log_kept_in_memory_stays_within_its_budget() {
    let server = start(small_limits());
    let big = "x".repeat(4 * 1024);
    for _ in 0..20 {
        post(server.url(), "/chat/completions", &chat("user", &big, true));
    }
    let kept = server.requests();
    let bytes: usize = kept.iter().map(|entry| entry.to_string().len()).sum();
    assert!(bytes <= 16 * 1024, "{bytes} bytes kept");
    assert!(!kept.is_empty() && kept.len() < 20);
    assert_eq!(
        kept.last().unwrap()["n"],
        20,
        "the most recent entries are the ones kept"
    );
}

/// A body of a million small objects (8 MB of `{"a":0},`) costs far more parsed than its bytes: it
/// is refused 413 before it is parsed, on both routes, its log entry holding a truncated copy of
/// its text; the server goes on serving (issue 40 item 2). The memory this keeps flat is measured
/// by `model-server/tests/it/process_abuse.rs` and `cargo xtask bench`.
#[test]
fn a_body_of_many_small_values_is_refused_before_it_is_parsed() {
    let server = start(Limits::default());
    let mut text =
        String::from(r#"{"model":"deepseek-chat","stream":true,"max_tokens":1,"messages":["#);
    text.push_str(&[r#"{"a":0}"#; 1_000_000].join(","));
    text.push_str("]}");
    assert!(text.len() <= Limits::default().max_body_bytes);
    let address = server.url().trim_start_matches("http://").to_string();
    for path in ["/chat/completions", "/v1/messages"] {
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{text}",
            text.len()
        );
        let answer = exchange(server.url(), request.into_bytes()).expect("an answer");
        let said = String::from_utf8_lossy(&answer.raw_body).into_owned();
        assert_eq!(answer.status, 413, "{path}: {said}");
        assert!(said.contains("parsed"), "{path}: {said}");
        let logged = server.requests().pop().expect("the refusal is logged");
        assert_eq!(logged["status"], 413, "{path}");
        assert_eq!(logged["body_bytes"], text.len(), "{path}");
        let copy = logged["body"].as_str().expect("the body's text");
        assert!(
            copy.len() < 8 * 1024 && text.starts_with(copy),
            "{path}: {copy}"
        );
    }
    still_serves(&server);
}

/// Polls `probe` until it yields, failing after a generous bound (a liveness guard, not a timing
/// claim).
fn wait_for<T>(mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(found) = probe() {
            return found;
        }
        assert!(Instant::now() < deadline, "the server never got there");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_client_that_never_reads_its_reply_is_dropped_after_the_write_timeout() {
    // A reply far larger than the socket buffers, to a client that sends its request and then
    // never reads: the server's write waits, times out, and frees the only slot.
    let text = "y".repeat(32 * 1024 * 1024);
    let script = serde_json::json!({"replies": [
        {"when": {"user_contains": "flood"}, "text": text, "chunk_chars": 1_000_000},
        {"text": "served", "reuse": true}]});
    let limits = Limits {
        max_connections: 1,
        write_timeout: Duration::from_millis(300),
        ..small_limits()
    };
    let server = ModelServer::start_with(
        Script::parse(&script.to_string()).unwrap(),
        Options {
            limits,
            ..Options::default()
        },
    )
    .unwrap();
    let body = chat("user", "flood", true).to_string();
    let mut stalled = TcpStream::connect(server.url().trim_start_matches("http://")).unwrap();
    let request = head(
        &server,
        &format!("Content-Length: {}\r\n\r\n{body}", body.len()),
    );
    stalled.write_all(request.as_bytes()).unwrap();
    let probe = head(&server, "Content-Length: 2\r\n\r\n{}").into_bytes();
    let served = wait_for(|| exchange(server.url(), probe.clone()).filter(|a| a.status == 200));
    assert_eq!(deltas(&served, "content"), "served");
    drop(stalled);
}
