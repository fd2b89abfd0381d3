//! One test per strict stream rule (spec sections 6 and 7): each stream is pushed through the
//! framer and the checker, and the run's terminal state is asserted.

use dsh_protocol::frames::Status;
use dsh_protocol::{LineFramer, RunContext, Step, StreamChecker, Terminal, ViolationCode};

const READY: &str = r#"{"v":1,"type":"ready","runtime":"open-design","protocol_version":1,"plugin_version":"0.1.0","capabilities":{"session_resume":true,"session_cancel":true,"structured_events":true}}"#;

fn session(id: &str, resumed: bool) -> String {
    format!(
        r#"{{"v":1,"type":"session","request_id":"r1","session_id":"{id}","resumed":{resumed}}}"#
    )
}

fn text(request_id: &str) -> String {
    format!(r#"{{"v":1,"type":"text","request_id":"{request_id}","content":"hi"}}"#)
}

fn completed(session_id: &str) -> String {
    format!(
        r#"{{"v":1,"type":"result","request_id":"r1","status":"completed","session_id":"{session_id}","resume_rejected":false}}"#
    )
}

/// Runs `lines` (joined with `\n`, plus a final newline) and returns the checker after `finish`.
fn run(context: RunContext, lines: &[&str]) -> (StreamChecker, Terminal) {
    let mut stream = lines.join("\n");
    stream.push('\n');
    run_bytes(context, stream.as_bytes(), false)
}

fn run_bytes(context: RunContext, bytes: &[u8], cancel_sent: bool) -> (StreamChecker, Terminal) {
    let mut checker = StreamChecker::new(context);
    if cancel_sent {
        checker.note_cancel_sent();
    }
    let mut framer = LineFramer::new();
    for event in framer.push(bytes) {
        checker.check_event(&event);
    }
    if let Some(event) = framer.finish() {
        checker.check_event(&event);
    }
    let terminal = checker.finish();
    (checker, terminal)
}

fn new_run() -> RunContext {
    RunContext::new("r1")
}

#[track_caller]
fn assert_violation(terminal: &Terminal, code: ViolationCode, line: Option<usize>) {
    match terminal {
        Terminal::Violation(violation) => {
            assert_eq!(violation.code, code, "{violation}");
            assert_eq!(violation.line, line, "{violation}");
            if let Some(line) = line {
                assert!(
                    violation.message.starts_with(&format!("line {line}: ")),
                    "{violation}"
                );
            }
            assert!(
                violation.message.contains("spec"),
                "names the rule: {violation}"
            );
        }
        other => panic!("expected {code}, got {other:?}"),
    }
}

#[track_caller]
fn assert_completed(terminal: &Terminal) {
    match terminal {
        Terminal::Result(result) => assert_eq!(result.status, Status::Completed),
        other => panic!("expected completed, got {other:?}"),
    }
}

#[test]
fn a_clean_run_completes() {
    let (checker, terminal) = run(
        new_run(),
        &[READY, &session("s1", false), &text("r1"), &completed("s1")],
    );
    assert_completed(&terminal);
    assert_eq!(checker.session_id(), Some("s1"));
    assert_eq!(checker.accepted_frames(), 4);
    assert_eq!(checker.foreign_frames(), 0);
}

#[test]
fn crlf_empty_lines_and_a_final_frame_without_newline_are_accepted() {
    let stream = format!(
        "{READY}\r\n\r\n   \n{}\r\n{}\n{}",
        session("s1", false),
        text("r1"),
        completed("s1")
    );
    let (_, terminal) = run_bytes(new_run(), stream.as_bytes(), false);
    assert_completed(&terminal);
}

#[test]
fn u2028_inside_a_string_is_fine() {
    let line = r#"{"v":1,"type":"text","request_id":"r1","content":"a b\u2028c"}"#;
    let (_, terminal) = run(
        new_run(),
        &[READY, &session("s1", false), line, &completed("s1")],
    );
    assert_completed(&terminal);
}

#[test]
fn not_json_is_malformed() {
    let (_, terminal) = run(new_run(), &[READY, "[info] dsh starting", &completed("s1")]);
    assert_violation(&terminal, ViolationCode::MalformedFrame, Some(2));
}

#[test]
fn a_bom_is_malformed() {
    let line = format!("\u{FEFF}{READY}");
    let (_, terminal) = run(new_run(), &[&line]);
    assert_violation(&terminal, ViolationCode::MalformedFrame, Some(1));
}

#[test]
fn non_utf8_is_malformed() {
    let mut stream = format!("{READY}\n").into_bytes();
    stream.extend_from_slice(
        b"{\"v\":1,\"type\":\"text\",\"request_id\":\"r1\",\"content\":\"\xC3\x28\"}\n",
    );
    let (_, terminal) = run_bytes(new_run(), &stream, false);
    assert_violation(&terminal, ViolationCode::MalformedFrame, Some(2));
}

#[test]
fn shape_errors_are_invalid() {
    for line in [
        "[1]",
        r#"{"v":2,"type":"text","request_id":"r1","content":""}"#,
        r#"{"v":1,"type":"todo","request_id":"r1"}"#,
        r#"{"v":1,"type":"text","request_id":"r1","content":"a","content":"b"}"#,
        r#"{"v":1,"type":"text","content":""}"#,
        r#"{"v":1,"type":"probe","runtime":"open-design","protocol_version":1,"plugin_version":"1","capabilities":{}}"#,
    ] {
        let (_, terminal) = run(new_run(), &[READY, &session("s1", false), line]);
        assert_violation(&terminal, ViolationCode::InvalidFrame, Some(3));
    }
}

#[test]
fn tool_call_arguments_must_hold_json() {
    let call = r#"{"v":1,"type":"tool_call","request_id":"r1","call_id":"c1","name":"write_file","arguments":"{path: x}"}"#;
    let (_, terminal) = run(new_run(), &[READY, &session("s1", false), call]);
    assert_violation(&terminal, ViolationCode::InvalidFrame, Some(3));
}

#[test]
fn too_large_line_fails_at_the_limit() {
    let mut stream = format!("{READY}\n").into_bytes();
    stream.extend(std::iter::repeat_n(b'x', dsh_protocol::MAX_LINE_BYTES + 10));
    let (_, terminal) = run_bytes(new_run(), &stream, false);
    assert_violation(&terminal, ViolationCode::FrameTooLarge, Some(2));
}

#[test]
fn incomplete_tail_is_truncated() {
    let stream = format!(
        "{READY}\n{}\n{{\"v\":1,\"type\":\"res",
        session("s1", false)
    );
    let (_, terminal) = run_bytes(new_run(), stream.as_bytes(), false);
    assert_violation(&terminal, ViolationCode::TruncatedFrame, Some(3));
}

#[test]
fn ready_must_be_first() {
    let (_, terminal) = run(new_run(), &[&session("s1", false), READY]);
    assert_violation(&terminal, ViolationCode::ReadyNotFirst, Some(1));
    let (_, terminal) = run(new_run(), &[&text("other"), READY]);
    assert_violation(&terminal, ViolationCode::ReadyNotFirst, Some(1));
}

#[test]
fn ready_only_once() {
    let (_, terminal) = run(new_run(), &[READY, READY]);
    assert_violation(&terminal, ViolationCode::DuplicateReady, Some(2));
}

#[test]
fn ready_must_be_compatible() {
    for ready in [
        READY.replace("\"open-design\"", "\"multica\""),
        READY.replace("\"protocol_version\":1", "\"protocol_version\":2"),
        READY.replace("\"session_resume\":true", "\"session_resume\":false"),
        READY.replace("\"session_cancel\":true,", ""),
    ] {
        let (_, terminal) = run(new_run(), &[&ready]);
        assert_violation(&terminal, ViolationCode::IncompatibleReady, Some(1));
    }
}

#[test]
fn foreign_frames_are_counted_and_ignored() {
    let foreign_result = r#"{"v":1,"type":"result","request_id":"r0","status":"failed","session_id":"s1","resume_rejected":false,"error":{"code":"X","message":"y"}}"#;
    let foreign_error =
        r#"{"v":1,"type":"protocol_error","request_id":"r0","code":"X","message":"y"}"#;
    let (checker, terminal) = run(
        new_run(),
        &[
            READY,
            &text("r0"),
            &session("s1", false),
            foreign_result,
            foreign_error,
            &completed("s1"),
            &text("r0"),
        ],
    );
    assert_completed(&terminal);
    assert_eq!(checker.foreign_frames(), 4);
}

#[test]
fn content_needs_a_session_first() {
    for line in [
        text("r1"),
        r#"{"v":1,"type":"usage","request_id":"r1","provider":"p","model":"m","input_tokens":1,"output_tokens":1}"#.to_string(),
        r#"{"v":1,"type":"tool_call","request_id":"r1","call_id":"c","name":"n","arguments":"{}"}"#.to_string(),
    ] {
        let (_, terminal) = run(new_run(), &[READY, &line, &session("s1", false)]);
        assert_violation(&terminal, ViolationCode::ContentBeforeSession, Some(2));
    }
}

#[test]
fn session_only_once() {
    let (_, terminal) = run(
        new_run(),
        &[READY, &session("s1", false), &session("s1", false)],
    );
    assert_violation(&terminal, ViolationCode::DuplicateSession, Some(3));
}

#[test]
fn resume_must_return_the_same_id_resumed() {
    let resume = || RunContext::resuming("r1", "s1");
    let (_, terminal) = run(resume(), &[READY, &session("s2", true)]);
    assert_violation(&terminal, ViolationCode::ResumeMismatch, Some(2));
    let (_, terminal) = run(resume(), &[READY, &session("s1", false)]);
    assert_violation(&terminal, ViolationCode::ResumeMismatch, Some(2));
    let (checker, terminal) = run(resume(), &[READY, &session("s1", true), &completed("s1")]);
    assert_completed(&terminal);
    assert_eq!(checker.session_id(), Some("s1"));
}

#[test]
fn a_new_session_must_not_claim_resumed() {
    let (_, terminal) = run(new_run(), &[READY, &session("s1", true)]);
    assert_violation(&terminal, ViolationCode::UnrequestedResume, Some(2));
}

#[test]
fn result_session_must_match_the_session_frame() {
    let (_, terminal) = run(new_run(), &[READY, &session("s1", false), &completed("s2")]);
    assert_violation(&terminal, ViolationCode::SessionMismatch, Some(3));
}

#[test]
fn completed_needs_a_session_frame() {
    let (_, terminal) = run(new_run(), &[READY, &completed("s1")]);
    assert_violation(&terminal, ViolationCode::UnannouncedSession, Some(2));
}

#[test]
fn resume_rejected_is_a_legitimate_terminal_before_session() {
    let rejected = r#"{"v":1,"type":"result","request_id":"r1","status":"failed","session_id":"s1","resume_rejected":true,"error":{"code":"SESSION_NOT_FOUND","message":"gone"}}"#;
    let (_, terminal) = run(RunContext::resuming("r1", "s1"), &[READY, rejected]);
    match terminal {
        Terminal::Result(result) => {
            assert_eq!(result.status, Status::Failed);
            assert!(result.resume_rejected);
        }
        other => panic!("expected the failed result, got {other:?}"),
    }
    let (_, terminal) = run(new_run(), &[READY, rejected]);
    assert_violation(&terminal, ViolationCode::UnrequestedResume, Some(2));
}

#[test]
fn a_result_before_session_names_the_requested_resume_id() {
    let other = r#"{"v":1,"type":"result","request_id":"r1","status":"failed","session_id":"od-fresh","resume_rejected":true,"error":{"code":"SESSION_NOT_FOUND","message":"gone"}}"#;
    let (_, terminal) = run(RunContext::resuming("r1", "s1"), &[READY, other]);
    assert_violation(&terminal, ViolationCode::SessionMismatch, Some(2));
}

#[test]
fn failed_before_session_is_a_legitimate_terminal() {
    let failed = r#"{"v":1,"type":"result","request_id":"r1","status":"failed","session_id":"s1","resume_rejected":false,"error":{"code":"PROVIDER_DOWN","message":"503"}}"#;
    let (_, terminal) = run(new_run(), &[READY, failed]);
    assert!(matches!(terminal, Terminal::Result(result) if result.status == Status::Failed));
}

#[test]
fn only_one_result_and_nothing_after_it() {
    let (_, terminal) = run(
        new_run(),
        &[
            READY,
            &session("s1", false),
            &completed("s1"),
            &completed("s1"),
        ],
    );
    assert_violation(&terminal, ViolationCode::DuplicateResult, Some(4));
    let (_, terminal) = run(
        new_run(),
        &[READY, &session("s1", false), &completed("s1"), &text("r1")],
    );
    assert_violation(&terminal, ViolationCode::DuplicateResult, Some(4));
}

#[test]
fn cancelled_needs_a_cancel() {
    let cancelled = r#"{"v":1,"type":"result","request_id":"r1","status":"cancelled","session_id":"s1","resume_rejected":false}"#;
    let stream = format!("{READY}\n{}\n{cancelled}\n", session("s1", false));
    let (_, terminal) = run_bytes(new_run(), stream.as_bytes(), false);
    assert_violation(&terminal, ViolationCode::UnsolicitedCancelled, Some(3));
    let (_, terminal) = run_bytes(new_run(), stream.as_bytes(), true);
    assert!(matches!(terminal, Terminal::Result(result) if result.status == Status::Cancelled));
}

#[test]
fn tool_result_needs_its_call() {
    let call = r#"{"v":1,"type":"tool_call","request_id":"r1","call_id":"c1","name":"write_file","arguments":"{}"}"#;
    let result = |id: &str| {
        format!(
            r#"{{"v":1,"type":"tool_result","request_id":"r1","call_id":"{id}","name":"write_file","output":"ok","is_error":false}}"#
        )
    };
    let (_, terminal) = run(
        new_run(),
        &[
            READY,
            &session("s1", false),
            call,
            &result("c1"),
            &completed("s1"),
        ],
    );
    assert_completed(&terminal);
    let (_, terminal) = run(
        new_run(),
        &[READY, &session("s1", false), call, &result("c2")],
    );
    assert_violation(&terminal, ViolationCode::UnmatchedToolResult, Some(4));
}

#[test]
fn protocol_error_fails_the_run() {
    for error in [
        r#"{"v":1,"type":"protocol_error","code":"BAD_EXECUTE","message":"no cwd"}"#,
        r#"{"v":1,"type":"protocol_error","request_id":"r1","code":"BAD_EXECUTE","message":"no cwd"}"#,
    ] {
        let (_, terminal) = run(new_run(), &[READY, error]);
        assert_violation(&terminal, ViolationCode::ProtocolError, Some(2));
        let (_, terminal) = run(new_run(), &[error]);
        assert_violation(&terminal, ViolationCode::ProtocolError, Some(1));
    }
}

#[test]
fn eof_without_result_is_missing_result() {
    let (_, terminal) = run(new_run(), &[READY, &session("s1", false), &text("r1")]);
    assert_violation(&terminal, ViolationCode::MissingResult, None);
    let (_, terminal) = run_bytes(new_run(), b"", false);
    assert_violation(&terminal, ViolationCode::MissingResult, None);
}

#[test]
fn the_first_violation_sticks() {
    let mut checker = StreamChecker::new(new_run());
    assert!(matches!(
        checker.check_line(1, READY.as_bytes()),
        Step::Accepted(_)
    ));
    assert!(matches!(
        checker.check_line(2, b"garbage"),
        Step::Violation(_)
    ));
    assert_eq!(
        checker.check_line(3, session("s1", false).as_bytes()),
        Step::Skipped
    );
    assert_eq!(
        checker.check_line(4, completed("s1").as_bytes()),
        Step::Skipped
    );
    assert_violation(&checker.finish(), ViolationCode::MalformedFrame, Some(2));
    assert_violation(&checker.finish(), ViolationCode::MalformedFrame, Some(2));
}

#[test]
fn every_code_has_a_stable_spelling() {
    for code in ViolationCode::ALL {
        assert!(code.as_str().starts_with("DSH_PROFILE_"));
        assert_eq!(ViolationCode::from_code(code.as_str()), Some(code));
    }
}

fn tool_call(call_id: &str, arguments: &str) -> String {
    serde_json::json!({"v":1,"type":"tool_call","request_id":"r1","call_id":call_id,"name":"n","arguments":arguments})
        .to_string()
}

#[test]
fn tool_call_arguments_the_host_cannot_parse_are_invalid() {
    let too_deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    for (arguments, rule) in [
        ("{\"n\":1e400}", "IEEE double"),
        ("\"\\ud800\"", "lone surrogate"),
        (too_deep.as_str(), "nested deeper"),
    ] {
        let call = tool_call("c1", arguments);
        let (_, terminal) = run(new_run(), &[READY, &session("s1", false), &call]);
        assert_violation(&terminal, ViolationCode::InvalidFrame, Some(3));
        let Terminal::Violation(violation) = terminal else {
            unreachable!("asserted above")
        };
        assert!(violation.message.contains(rule), "{}", violation.message);
        assert!(
            dsh_protocol::arguments::parse(arguments).is_err(),
            "the host agrees"
        );
    }
}

#[test]
fn a_repeated_call_id_is_accepted_and_the_set_of_ids_is_bounded() {
    let session = session("s1", false);
    let repeated = tool_call("c1", "{}");
    let (_, terminal) = run(
        new_run(),
        &[READY, &session, &repeated, &repeated, &completed("s1")],
    );
    assert!(matches!(terminal, Terminal::Result(_)), "{terminal:?}");
    let mut checker = StreamChecker::new(new_run());
    let mut number = 0;
    let mut feed = |checker: &mut StreamChecker, line: &str| {
        number += 1;
        checker.check_line(number, line.as_bytes()).into_owned()
    };
    feed(&mut checker, READY);
    feed(&mut checker, &session);
    for index in 0..dsh_protocol::checker::MAX_TOOL_CALL_IDS {
        let step = feed(&mut checker, &tool_call(&format!("c{index}"), "{}"));
        assert!(matches!(step, Step::Accepted(_)), "call {index}: {step:?}");
    }
    let step = feed(&mut checker, &tool_call("one-more", "{}"));
    let Step::Violation(violation) = step else {
        panic!("the bound is enforced: {step:?}")
    };
    assert_eq!(violation.code, ViolationCode::InvalidFrame);
    assert!(violation.message.contains("I-17b"), "{}", violation.message);
}
