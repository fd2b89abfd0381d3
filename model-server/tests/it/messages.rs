//! The Anthropic Messages route (`POST /v1/messages`, what dsh 0.2.1 speaks) over real sockets:
//! the same script as chat completions streamed as Messages events or sent whole, the `max_tokens`
//! stop, errors in the Messages shape, and every bound of the server applying to it.

use crate::support;

use dsh_model_server::script::Script;
use dsh_model_server::{default_script, Limits, ModelServer, Options, DEFAULT_HTML};
use serde_json::{json, Value};
use support::{block_deltas, exchange, json_body, messages_body, named_events, post_messages};

/// The names of a stream's events, in order.
fn names(answer: &support::Answer) -> Vec<String> {
    named_events(answer)
        .into_iter()
        .map(|(name, _)| name)
        .collect()
}

/// The `stop_reason` of a stream's `message_delta`.
fn stop_reason(answer: &support::Answer) -> Value {
    named_events(answer)
        .into_iter()
        .find(|(name, _)| name == "message_delta")
        .map(|(_, data)| data["delta"]["stop_reason"].clone())
        .unwrap_or(Value::Null)
}

#[test]
fn the_default_script_writes_then_finishes_and_titles_over_messages() {
    let server = ModelServer::start(default_script()).unwrap();
    let write = post_messages(server.url(), &messages_body("A page", None, true));
    assert_eq!(write.status, 200);
    let names = names(&write);
    assert_eq!(names.first().map(String::as_str), Some("message_start"));
    assert_eq!(&names[names.len() - 2..], ["message_delta", "message_stop"]);
    let tool_use = named_events(&write)
        .into_iter()
        .find(|(_, data)| data["content_block"]["type"] == "tool_use")
        .map(|(_, data)| data["content_block"].clone())
        .expect("a tool_use block");
    assert_eq!(tool_use["name"], "write");
    assert_eq!(tool_use["id"], "toolu_1_0");
    let input = block_deltas(&write, "input_json_delta", "partial_json");
    let input: Value = serde_json::from_str(&input).unwrap();
    assert_eq!(input["content"], DEFAULT_HTML);
    assert!(!block_deltas(&write, "thinking_delta", "thinking").is_empty());
    assert_eq!(stop_reason(&write), "tool_use");
    let done = post_messages(server.url(), &messages_body("A page", Some("write"), true));
    assert_eq!(
        block_deltas(&done, "text_delta", "text"),
        "I wrote index.html."
    );
    assert_eq!(stop_reason(&done), "end_turn");
    let title = post_messages(server.url(), &messages_body("A page", None, false));
    assert_eq!(block_deltas(&title, "text_delta", "text"), "Landing page");
    let log = server.requests();
    assert_eq!(log.len(), 3);
    assert_eq!(log[0]["path"], "/v1/messages");
    assert_eq!(
        (&log[0]["x_api_key"], &log[0]["authorization"]),
        (&json!(true), &json!(false))
    );
    assert_eq!(log[2]["reply"], 4);
    assert!(!serde_json::to_string(&log).unwrap().contains("canary-key"));
}

#[test]
fn without_stream_true_the_reply_is_one_message() {
    let server = ModelServer::start(default_script()).unwrap();
    let mut body = messages_body("A page", None, true);
    body.as_object_mut().unwrap().remove("stream");
    let answer = post_messages(server.url(), &body);
    assert_eq!(answer.status, 200);
    let message = json_body(&answer);
    assert_eq!(message["type"], "message");
    assert_eq!(message["role"], "assistant");
    assert_eq!(message["stop_reason"], "tool_use");
    let kinds: Vec<&Value> = message["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|block| &block["type"])
        .collect();
    assert_eq!(kinds, ["thinking", "tool_use"]);
    assert_eq!(message["content"][1]["input"]["file_path"], "index.html");
    assert!(message["usage"]["output_tokens"].as_u64().unwrap() >= 1);
}

#[test]
fn a_max_tokens_reply_stops_with_max_tokens_on_both_routes() {
    let script =
        Script::parse(r#"{"replies": [{"text": "cut sh", "max_tokens": true, "reuse": true}]}"#)
            .unwrap();
    let server = ModelServer::start(script).unwrap();
    let streamed = post_messages(server.url(), &messages_body("x", None, true));
    assert_eq!(stop_reason(&streamed), "max_tokens");
    assert_eq!(block_deltas(&streamed, "text_delta", "text"), "cut sh");
    let chat = support::post(
        server.url(),
        "/chat/completions",
        &support::chat("user", "x", true),
    );
    let last: Value = serde_json::from_str(&chat.events[chat.events.len() - 2]).unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "length");
}

/// The status and the Messages error `type` of an answer.
fn messages_error(answer: &support::Answer) -> (u16, String) {
    let body = json_body(answer);
    assert_eq!(body["type"], "error", "{body}");
    let kind = body["error"]["type"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(body["error"]["message"].is_string(), "{body}");
    (answer.status, kind)
}

#[test]
fn errors_take_the_messages_shape_with_their_status() {
    let script = Script::parse(r#"{"replies": [{"status": 429}, {"status": 401}]}"#).unwrap();
    let server = ModelServer::start(script).unwrap();
    let body = messages_body("x", None, true);
    let answer = |body: &Value| messages_error(&post_messages(server.url(), body));
    assert_eq!(answer(&body), (429, "rate_limit_error".into()));
    assert_eq!(answer(&body), (401, "authentication_error".into()));
    let exhausted = post_messages(server.url(), &body);
    assert_eq!(messages_error(&exhausted), (500, "api_error".into()));
    assert!(String::from_utf8_lossy(&exhausted.raw_body).contains("request 3"));
    let mut no_limit = body.clone();
    no_limit.as_object_mut().unwrap().remove("max_tokens");
    let refused = post_messages(server.url(), &no_limit);
    assert_eq!(
        messages_error(&refused),
        (400, "invalid_request_error".into())
    );
    assert!(String::from_utf8_lossy(&refused.raw_body).contains("max_tokens"));
    assert_eq!(answer(&json!([1, 2])).0, 400);
    let elsewhere = support::post_with(server.url(), "/v1/messages/count_tokens", "", &body);
    assert_eq!(messages_error(&elsewhere), (404, "not_found_error".into()));
}

#[test]
fn a_cut_messages_stream_stops_inside_an_event_without_message_stop() {
    let script = Script::parse(
        r#"{"replies": [{"text": "abcdefghij", "chunk_chars": 2, "cut_after_events": 4}]}"#,
    )
    .unwrap();
    let server = ModelServer::start(script).unwrap();
    let answer = post_messages(server.url(), &messages_body("x", None, false));
    let events = named_events(&answer);
    // message_start, content_block_start, 2 whole text deltas, then half of the third.
    assert_eq!(events.len(), 5);
    assert_eq!(events[4].1, Value::Null);
    assert!(!names(&answer).contains(&"message_stop".to_string()));
}

#[test]
fn the_bounds_apply_to_the_messages_route_and_refusals_speak_messages() {
    let limits = Limits {
        max_body_bytes: 1024,
        ..Limits::default()
    };
    let options = Options {
        limits,
        ..Options::default()
    };
    let server = ModelServer::start_with(default_script(), options).unwrap();
    let mut big = messages_body("x", None, true);
    big["system"] = json!("s".repeat(4096));
    let too_big = post_messages(server.url(), &big);
    assert_eq!(messages_error(&too_big), (413, "request_too_large".into()));
    let raw = |headers: &str| {
        let request = format!("POST /v1/messages HTTP/1.1\r\n{headers}Content-Length: 0\r\n\r\n");
        exchange(server.url(), request.into_bytes()).expect("an answer")
    };
    let foreign = raw("Host: evil.example\r\n");
    assert_eq!(
        messages_error(&foreign),
        (400, "invalid_request_error".into())
    );
    let address = server.url().trim_start_matches("http://");
    let origin = raw(&format!(
        "Host: {address}\r\nOrigin: https://evil.example\r\n"
    ));
    assert_eq!(messages_error(&origin), (403, "permission_error".into()));
    let served = post_messages(server.url(), &messages_body("x", None, false));
    assert_eq!(block_deltas(&served, "text_delta", "text"), "Landing page");
}
