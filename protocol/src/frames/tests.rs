//! Unit tests of frame and command parsing and serialization.

use super::*;

fn parse(line: &str) -> Result<RuntimeFrame, FrameError> {
    RuntimeFrame::parse_line(line.as_bytes())
}

/// One line of every frame type (and both result shapes).
const SAMPLE_LINES: [&str; 12] = [
    r#"{"v":1,"type":"probe","runtime":"open-design","protocol_version":1,"plugin_version":"0.1.0","capabilities":{"session_resume":true,"session_cancel":true,"structured_events":true}}"#,
    r#"{"v":1,"type":"ready","runtime":"open-design","protocol_version":1,"plugin_version":"0.1.0","compatibility_generation":"g1","capabilities":{"session_resume":true,"session_cancel":true,"structured_events":true}}"#,
    r#"{"v":1,"type":"models","runtime":"open-design","models":[{"provider":"deepseek-official","provider_name":"DeepSeek","id":"deepseek-chat","name":"DeepSeek Chat","reasoning_options":[{"id":"high","name":"High","default":true}]}]}"#,
    r#"{"v":1,"type":"session","request_id":"r1","session_id":"s1","resumed":false}"#,
    r#"{"v":1,"type":"thinking","request_id":"r1","content":""}"#,
    r#"{"v":1,"type":"text","request_id":"r1","content":"hi\u2028there"}"#,
    r#"{"v":1,"type":"tool_call","request_id":"r1","call_id":"c1","name":"write_file","arguments":"{\"path\":\"index.html\"}"}"#,
    r#"{"v":1,"type":"tool_result","request_id":"r1","call_id":"c1","name":"write_file","output":"ok","is_error":false}"#,
    r#"{"v":1,"type":"usage","request_id":"r1","provider":"deepseek-official","model":"deepseek-chat","input_tokens":10,"output_tokens":2.0,"cache_read_tokens":0}"#,
    r#"{"v":1,"type":"result","request_id":"r1","status":"completed","session_id":"s1","resume_rejected":false,"stop_reason":"end_turn"}"#,
    r#"{"v":1,"type":"result","request_id":"r1","status":"failed","session_id":"s1","resume_rejected":true,"error":{"code":"SESSION_NOT_FOUND","message":"no such session"}}"#,
    r#"{"v":1,"type":"protocol_error","code":"BAD_COMMAND","message":"unknown command"}"#,
];

#[test]
fn parses_every_frame_type_and_round_trips() {
    for line in SAMPLE_LINES {
        let frame = parse(line).unwrap_or_else(|error| panic!("{line}: {error}"));
        let again = parse(frame.to_line().trim_end()).expect("re-parses");
        assert_eq!(frame, again, "{line}");
        assert!(frame.to_line().starts_with("{\"v\":1,\"type\":"));
    }
}

#[test]
fn frame_type_lists_agree_with_the_typed_frames() {
    let mut seen: Vec<&str> = Vec::new();
    for line in SAMPLE_LINES {
        let frame = parse(line).unwrap_or_else(|error| panic!("{line}: {error}"));
        let kind = frame.type_name();
        seen.push(kind);
        let carries_run_id = RUN_FRAME_TYPES.contains(&kind);
        assert_eq!(carries_run_id, frame.request_id().is_some(), "{kind}");
        assert_eq!(
            frame.is_run_scoped(),
            carries_run_id || kind == "protocol_error",
            "{kind}"
        );
        if CONTENT_FRAME_TYPES.contains(&kind) {
            assert!(carries_run_id, "{kind}");
        }
    }
    seen.sort();
    seen.dedup();
    let mut every = FRAME_TYPES.to_vec();
    every.sort();
    assert_eq!(seen, every, "the samples hold one frame of every type");
}

#[test]
fn classifies_malformed_and_invalid() {
    let malformed = [
        "not json",
        "\u{1b}[32mdsh starting\u{1b}[0m",
        "\u{FEFF}{\"v\":1,\"type\":\"text\",\"request_id\":\"r\",\"content\":\"\"}",
        "{\"v\":1,",
        "{\"v\":1}{\"v\":1}",
    ];
    for line in malformed {
        assert_eq!(
            parse(line).unwrap_err().kind,
            FrameErrorKind::Malformed,
            "{line}"
        );
    }
    assert_eq!(
        RuntimeFrame::parse_line(b"{\"v\":1,\"type\":\"text\",\"content\":\"\xff\"}")
            .unwrap_err()
            .kind,
        FrameErrorKind::Malformed
    );
    let invalid = [
        "[1,2]",
        "\"text\"",
        "{}",
        r#"{"v":2,"type":"text","request_id":"r","content":""}"#,
        r#"{"type":"text","request_id":"r","content":""}"#,
        r#"{"v":1,"type":"shout","request_id":"r"}"#,
        r#"{"v":1,"type":"text","request_id":"r","content":"a","content":"b"}"#,
        r#"{"v":1,"type":"text","request_id":"r","x":1,"x":2,"content":""}"#,
        r#"{"v":1,"type":"text","request_id":"","content":""}"#,
        r#"{"v":1,"type":"text","request_id":"r","content":5}"#,
        r#"{"v":1,"type":"usage","request_id":"r","provider":"p","model":"m","input_tokens":-1,"output_tokens":0}"#,
        r#"{"v":1,"type":"usage","request_id":"r","provider":"p","model":"m","input_tokens":1.5,"output_tokens":0}"#,
        r#"{"v":1,"type":"result","request_id":"r","status":"failed","session_id":"s","resume_rejected":false}"#,
        r#"{"v":1,"type":"result","request_id":"r","status":"completed","session_id":null,"resume_rejected":false}"#,
        r#"{"v":1,"type":"result","request_id":"r","status":"failed","session_id":null,"resume_rejected":false,"error":{"code":"E","message":"m"}}"#,
        r#"{"v":1,"type":"result","request_id":"r","status":"cancelled","session_id":"","resume_rejected":false}"#,
        r#"{"v":1,"type":"result","request_id":"r","status":"completed","session_id":"s","resume_rejected":false,"output":null}"#,
        r#"{"v":1,"type":"result","request_id":"r","status":"completed","session_id":"s","resume_rejected":false,"stop_reason":null}"#,
        r#"{"v":1,"type":"result","request_id":"r","status":"completed","session_id":"s","resume_rejected":false,"error":null}"#,
        r#"{"v":1,"type":"result","request_id":"r","status":"completed","session_id":"s","resume_rejected":true}"#,
        r#"{"v":1,"type":"result","request_id":"r","status":"completed","resume_rejected":false}"#,
        r#"{"v":1,"type":"result","request_id":"r","status":"completed","session_id":"s","resume_rejected":false,"output":""}"#,
        r#"{"v":1,"type":"ready","runtime":"open-design","protocol_version":1,"plugin_version":"1","compatibility_generation":"a b","capabilities":{}}"#,
    ];
    for line in invalid {
        assert_eq!(
            parse(line).unwrap_err().kind,
            FrameErrorKind::Invalid,
            "{line}"
        );
    }
}

#[test]
fn unknown_members_are_tolerated_with_any_type() {
    let frame = parse(
        r#"{"v":1,"type":"text","request_id":"r","content":"x","call_id":5,"future":{"a":[1]}}"#,
    )
    .expect("unknown members are tolerated");
    assert_eq!(frame, RuntimeFrame::text("r", "x"));
}

#[test]
fn duplicates_inside_nested_protocol_objects_are_invalid() {
    let lines = [
        (
            r#"{"v":1,"type":"ready","runtime":"open-design","protocol_version":1,"plugin_version":"1","capabilities":{"session_resume":false,"session_resume":true,"session_cancel":true,"structured_events":true}}"#,
            "ready frame: `capabilities` has a duplicate key `session_resume`",
        ),
        (
            r#"{"v":1,"type":"result","request_id":"r","status":"failed","session_id":"s","resume_rejected":false,"error":{"code":"A","message":"m","code":"B"}}"#,
            "result frame: `error` has a duplicate key `code`",
        ),
        (
            r#"{"v":1,"type":"models","runtime":"open-design","models":[{"provider":"p","provider_name":"P","id":"a","id":"b","name":"n"}]}"#,
            "models frame: `models` has a duplicate key `id`",
        ),
    ];
    for (line, message) in lines {
        let error = parse(line).unwrap_err();
        assert_eq!(error.kind, FrameErrorKind::Invalid, "{line}");
        assert_eq!(error.message, message, "{line}");
    }
    let execute = r#"{"v":1,"type":"execute","request_id":"r","cwd":"/p","prompt":"x","model":{"provider":"p","id":"a","id":"b"},"mcp_servers":[]}"#;
    let error = HostCommand::parse_line(execute.as_bytes()).unwrap_err();
    assert_eq!(
        error.message,
        "execute command: `model` has a duplicate key `id`"
    );
}

#[test]
fn a_lone_surrogate_is_malformed_in_every_member() {
    for line in [
        r#"{"v":1,"type":"text","request_id":"r","content":"\ud800"}"#,
        r#"{"v":1,"type":"text","request_id":"r","content":"a","x":"\uDBFF"}"#,
        r#"{"v":1,"type":"text","request_id":"r","content":"a","x":{"y":["\udc00x"]}}"#,
        r#"{"v":1,"type":"text","request_id":"r","content":"a","\ud800":1}"#,
        r#"{"v":1,"type":"result","request_id":"r","status":"failed","session_id":null,"resume_rejected":false,"error":{"code":"A","message":"\ud800"}}"#,
    ] {
        let error = parse(line).unwrap_err();
        assert_eq!(error.kind, FrameErrorKind::Malformed, "{line}: {error}");
    }
    for line in [
        r#"{"v":1,"type":"text","request_id":"r","content":"\ud83d\ude00"}"#,
        r#"{"v":1,"type":"text","request_id":"r","content":"\\ud800"}"#,
    ] {
        assert!(parse(line).is_ok(), "{line}");
    }
}

#[test]
fn many_unknown_members_are_checked_for_duplicates_past_the_linear_list() {
    let mut line = String::from(r#"{"v":1,"type":"text","request_id":"r","content":"c""#);
    for index in 0..5_000 {
        line.push_str(&format!(",\"u{index}\":0"));
    }
    let mut duplicated = line.clone();
    line.push('}');
    assert!(parse(&line).is_ok());
    duplicated.push_str(",\"u4321\":1}");
    assert_eq!(
        parse(&duplicated).unwrap_err().message,
        "duplicate key `u4321`"
    );
    let early = line.replacen(",\"u0\":0", ",\"request_id\":\"s\"", 1);
    assert_eq!(
        parse(&early).unwrap_err().message,
        "duplicate key `request_id`"
    );
    let late = line.replacen(",\"u4999\":0", ",\"v\":1", 1);
    assert_eq!(parse(&late).unwrap_err().message, "duplicate key `v`");
}

#[test]
fn errors_name_the_member() {
    let error = parse(r#"{"v":1,"type":"session","request_id":"r","session_id":"s"}"#).unwrap_err();
    assert_eq!(error.message, "session frame: missing required `resumed`");
    let error =
        parse(r#"{"v":1,"type":"text","request_id":"r","content":"a","content":"b"}"#).unwrap_err();
    assert_eq!(error.message, "duplicate key `content`");
}

#[test]
fn commands_round_trip() {
    let execute = HostCommand::execute(
        "r1",
        "/tmp/project",
        "Create a landing page",
        Some("s1".to_string()),
        ModelRoute {
            provider: "deepseek-official".into(),
            id: "deepseek-chat".into(),
        },
    );
    let line = execute.to_line();
    assert!(line.contains("\"mcp_servers\":[]"));
    assert_eq!(
        HostCommand::parse_line(line.trim_end().as_bytes()),
        Ok(execute)
    );
    let cancel = HostCommand::cancel("r1");
    assert_eq!(
        cancel.to_line(),
        "{\"v\":1,\"type\":\"cancel\",\"request_id\":\"r1\"}\n"
    );
    assert_eq!(
        serde_json::from_str::<HostCommand>(cancel.to_line().trim_end()).unwrap(),
        cancel
    );
    let relative = r#"{"v":1,"type":"execute","request_id":"r","cwd":"project","prompt":"p","model":{"provider":"p","id":"m"},"mcp_servers":[]}"#;
    assert!(HostCommand::parse_line(relative.as_bytes()).is_err());
    let no_mcp = r#"{"v":1,"type":"execute","request_id":"r","cwd":"/p","prompt":"p","model":{"provider":"p","id":"m"}}"#;
    assert!(HostCommand::parse_line(no_mcp.as_bytes()).is_err());
}
