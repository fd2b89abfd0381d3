//! The default agent over `--stdio`: a full turn, cancels (active, early, foreign), stray
//! commands, resume failures (with a scenario-set code), a two-process cold resume that edits the
//! same HTML file, and a turn whose cwd does not exist yet.

use crate::support;

use serde_json::{json, Value};
use support::{code, entries, World};

fn types(frames: &[Value]) -> Vec<String> {
    frames.iter().for_each(support::assert_valid_frame);
    frames
        .iter()
        .map(|frame| frame["type"].as_str().unwrap().to_string())
        .collect()
}

/// The frames of a whole turn of the default agent, after `ready`.
const FULL_TURN: [&str; 9] = [
    "session",
    "thinking",
    "text",
    "text",
    "tool_call",
    "tool_result",
    "text",
    "usage",
    "result",
];

#[test]
fn a_full_turn_writes_the_html_file_and_ends_with_completed() {
    let world = World::new();
    let mut dsh = world.stdio();
    let ready = dsh.next_frame();
    support::assert_valid_frame(&ready);
    assert_eq!(ready["type"], "ready");
    assert_eq!(ready["runtime"], "open-design");
    dsh.send(&world.execute("r1", "Create a landing page called \"Acme\"", None));
    let frames = dsh.rest();
    assert_eq!(types(&frames), FULL_TURN);
    assert!(frames
        .iter()
        .all(|frame| frame["v"] == 1 && frame["request_id"] == "r1"));
    let session_id = frames[0]["session_id"].as_str().unwrap();
    assert!(
        session_id.starts_with("od-") && session_id.len() == 39,
        "{session_id}"
    );
    assert_eq!(frames[0]["resumed"], false);
    let call = &frames[4];
    assert_eq!(call["name"], "write_file");
    let arguments: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments["path"], "index.html");
    assert_eq!(frames[5]["call_id"], call["call_id"]);
    assert_eq!(frames[5]["is_error"], false);
    assert_eq!(frames[7]["provider"], "deepseek-official");
    assert_eq!(frames[7]["model"], "deepseek-chat");
    let result = &frames[8];
    assert_eq!(result["status"], "completed");
    assert_eq!(result["session_id"], session_id);
    assert_eq!(result["resume_rejected"], false);
    assert_eq!(code(dsh.wait()), 0);

    let html = std::fs::read_to_string(world.project().join("index.html")).unwrap();
    assert_eq!(arguments["content"], html);
    assert!(html.contains("<h1>Acme</h1>"));
    let record = support::read_json(&world.home().join(format!("sessions/{session_id}.json")));
    assert_eq!(record["session_id"], session_id);
    assert_eq!(record["turns"][0]["status"], "completed");
    let stored =
        std::fs::read_to_string(world.home().join(format!("sessions/{session_id}.json"))).unwrap();
    assert!(
        !stored.contains("landing page called"),
        "the record keeps no prompt text"
    );
    let stderr = dsh.stderr();
    assert!(!String::from_utf8_lossy(&stderr).contains("Acme"));

    let journal = world.journal_of(dsh.pid());
    let events: Vec<&str> = journal
        .iter()
        .map(|entry| entry["event"].as_str().unwrap())
        .collect();
    assert_eq!(events.first(), Some(&"start"));
    assert_eq!(journal[0]["mode"], "stdio");
    assert_eq!(journal[0]["invocation"], 0);
    assert!(journal
        .iter()
        .any(|entry| entry["event"] == "command" && entry["command"]["type"] == "execute"));
    assert_eq!(entries(&journal, "frame").count(), 10);
    let exit = journal.last().unwrap();
    assert_eq!(exit["event"], "exit");
    assert_eq!(exit["reason"], "result_sent");
}

#[test]
fn two_processes_cold_resume_the_same_session_and_edit_the_same_file() {
    let world = World::new();
    let mut first = world.stdio();
    first.next_frame();
    first.send(&world.execute("turn-1", "Create a landing page", None));
    let frames = first.rest();
    assert_eq!(code(first.wait()), 0);
    let session_id = frames[0]["session_id"].as_str().unwrap().to_string();
    let html_path = world.project().join("index.html");
    let before = std::fs::read_to_string(&html_path).unwrap();

    let mut second = world.stdio();
    assert_ne!(first.pid(), second.pid());
    second.next_frame();
    second.send(&world.execute(
        "turn-2",
        "Make the hero green and call it \"Acme 2\"",
        Some(&session_id),
    ));
    let frames = second.rest();
    types(&frames);
    assert_eq!(code(second.wait()), 0);
    assert_eq!(frames[0]["type"], "session");
    assert_eq!(frames[0]["session_id"], session_id);
    assert_eq!(frames[0]["resumed"], true);
    let call = frames
        .iter()
        .find(|frame| frame["type"] == "tool_call")
        .unwrap();
    assert_eq!(call["name"], "edit_file");
    let arguments: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments["path"], "index.html");
    let result = frames.last().unwrap();
    assert_eq!(result["status"], "completed");
    assert_eq!(result["session_id"], session_id);

    let after = std::fs::read_to_string(&html_path).unwrap();
    assert_ne!(before, after);
    assert!(after.contains("<h1>Acme 2</h1>"));
    assert!(after.contains("--accent: #2f9e44"));
    assert!(before.contains(arguments["old_string"].as_str().unwrap()));
    assert!(after.contains(arguments["new_string"].as_str().unwrap()));
    let record = support::read_json(&world.home().join(format!("sessions/{session_id}.json")));
    assert_eq!(record["turns"].as_array().unwrap().len(), 2);
    let journal = world.journal();
    let starts: Vec<Value> = entries(&journal, "start")
        .map(|entry| entry["invocation"].clone())
        .collect();
    assert_eq!(starts, [json!(0), json!(1)]);
}

#[test]
fn resuming_an_unknown_session_is_a_rejected_failure_without_a_session() {
    let world = World::new();
    let mut dsh = world.stdio();
    dsh.next_frame();
    dsh.send(&world.execute(
        "r1",
        "again",
        Some("od-00000000-0000-4000-8000-000000000000"),
    ));
    let frames = dsh.rest();
    assert_eq!(types(&frames), ["result"]);
    assert_eq!(frames[0]["status"], "failed");
    assert_eq!(frames[0]["resume_rejected"], true);
    assert_eq!(frames[0]["error"]["code"], "SESSION_NOT_FOUND");
    assert_eq!(code(dsh.wait()), 0);
    assert!(
        !world.home().join("sessions").exists()
            || std::fs::read_dir(world.home().join("sessions"))
                .unwrap()
                .next()
                .is_none()
    );
    assert!(!world.project().join("index.html").exists());
}

#[test]
fn resuming_a_corrupt_session_is_a_rejected_failure() {
    let world = World::new();
    let sessions = world.home().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    std::fs::write(
        sessions.join("od-corrupt.json"),
        b"{\"session_id\": \"od-corr",
    )
    .unwrap();
    let mut dsh = world.stdio();
    dsh.next_frame();
    dsh.send(&world.execute("r1", "again", Some("od-corrupt")));
    let frames = dsh.rest();
    assert_eq!(types(&frames), ["result"]);
    assert_eq!(frames[0]["resume_rejected"], true);
    assert_eq!(frames[0]["error"]["code"], "SESSION_CORRUPT");
    assert_eq!(
        std::fs::read_dir(&sessions).unwrap().count(),
        1,
        "no new session was created"
    );
}

#[test]
fn a_cancel_mid_turn_ends_with_cancelled_and_keeps_the_session() {
    let world = World::new();
    world.scenario(json!({"agent": {"step_delay_ms": 1000}}));
    let mut dsh = world.stdio();
    dsh.next_frame();
    dsh.send(&world.execute("r1", "Create a page", None));
    let session = dsh.next_frame();
    assert_eq!(session["type"], "session");
    dsh.send(&json!({"v": 1, "type": "cancel", "request_id": "someone-else"}));
    dsh.send(&json!({"v": 1, "type": "cancel", "request_id": "r1"}));
    let frames = dsh.rest();
    types(&frames);
    let result = frames.last().unwrap();
    assert_eq!(result["type"], "result");
    assert_eq!(result["status"], "cancelled");
    assert_eq!(result["session_id"], session["session_id"]);
    assert_eq!(
        frames
            .iter()
            .filter(|frame| frame["type"] == "result")
            .count(),
        1
    );
    assert!(
        frames.iter().all(|frame| frame["type"] != "protocol_error"),
        "a foreign cancel is ignored"
    );
    assert_eq!(code(dsh.wait()), 0);
    let session_id = session["session_id"].as_str().unwrap();
    let record = support::read_json(&world.home().join(format!("sessions/{session_id}.json")));
    assert_eq!(record["turns"][0]["status"], "cancelled");
}

#[test]
fn a_cancel_before_its_execute_is_remembered() {
    let world = World::new();
    let mut dsh = world.stdio();
    dsh.next_frame();
    dsh.send(&json!({"v": 1, "type": "cancel", "request_id": "r1"}));
    dsh.send(&world.execute("r1", "Create a page", None));
    let frames = dsh.rest();
    assert_eq!(types(&frames), ["result"]);
    assert_eq!(frames[0]["status"], "cancelled");
    assert_eq!(frames[0]["request_id"], "r1");
    assert_eq!(code(dsh.wait()), 0);
    assert!(!world.project().join("index.html").exists());
}

#[test]
fn a_second_execute_and_an_unparseable_command_get_protocol_errors_and_the_turn_goes_on() {
    let world = World::new();
    world.scenario(json!({"agent": {"step_delay_ms": 300}}));
    let mut dsh = world.stdio();
    dsh.next_frame();
    dsh.send(&world.execute("r1", "Create a page", None));
    assert_eq!(dsh.next_frame()["type"], "session");
    dsh.send(&world.execute("r2", "Another", None));
    dsh.send_raw(b"this is not json\n");
    let frames = dsh.rest();
    types(&frames);
    let errors: Vec<&Value> = frames
        .iter()
        .filter(|frame| frame["type"] == "protocol_error")
        .collect();
    assert_eq!(errors.len(), 2, "{frames:#?}");
    assert_eq!(errors[0]["request_id"], "r2");
    assert_eq!(errors[0]["code"], "DUPLICATE_EXECUTE");
    assert!(errors[1].get("request_id").is_none());
    assert_eq!(errors[1]["code"], "MALFORMED_COMMAND");
    assert_eq!(frames.last().unwrap()["status"], "completed");
    assert_eq!(code(dsh.wait()), 0);
    let raw = world
        .journal_of(dsh.pid())
        .into_iter()
        .find(|entry| entry["event"] == "command" && entry.get("raw").is_some())
        .unwrap();
    assert_eq!(raw["raw"], "this is not json");
}

#[test]
fn an_unparseable_command_before_execute_gets_a_protocol_error() {
    let world = World::new();
    let mut dsh = world.stdio();
    dsh.next_frame();
    dsh.send_raw(b"{\"v\":1,\"type\":\n");
    let error = dsh.next_frame();
    assert_eq!(error["type"], "protocol_error");
    assert_eq!(error["code"], "MALFORMED_COMMAND");
    dsh.send(&json!({"v": 1, "type": "status", "request_id": "r0"}));
    let invalid = dsh.next_frame();
    assert_eq!(invalid["code"], "INVALID_COMMAND");
    assert_eq!(invalid["request_id"], "r0");
    dsh.send(&world.execute("r1", "Create a page", None));
    assert_eq!(dsh.rest().last().unwrap()["status"], "completed");
}

#[test]
fn stdin_closing_before_any_execute_exits_zero_without_a_result() {
    let world = World::new();
    let mut dsh = world.stdio();
    assert_eq!(dsh.next_frame()["type"], "ready");
    dsh.close_stdin();
    assert!(dsh.rest().is_empty());
    assert_eq!(code(dsh.wait()), 0);
    let journal = world.journal_of(dsh.pid());
    let events: Vec<&str> = journal
        .iter()
        .map(|entry| entry["event"].as_str().unwrap())
        .collect();
    assert_eq!(events, ["start", "frame", "stdin_closed", "exit"]);
    assert_eq!(journal[3]["reason"], "stdin_closed");
}

#[test]
fn the_agent_writes_the_configured_html_file() {
    let world = World::new();
    world.scenario(json!({"agent": {"html_file": "design.html"}}));
    let mut dsh = world.stdio();
    dsh.next_frame();
    dsh.send(&world.execute("r1", "Create a page", None));
    assert_eq!(dsh.rest().last().unwrap()["status"], "completed");
    assert!(world.project().join("design.html").is_file());
}

#[test]
fn the_default_agent_does_not_write_through_a_symlink_out_of_the_project() {
    let world = World::new();
    let outside = world.root.path().join("outside.html");
    std::fs::write(&outside, "untouched").unwrap();
    std::os::unix::fs::symlink(&outside, world.project().join("index.html")).unwrap();
    let mut dsh = world.stdio();
    assert_eq!(dsh.next_frame()["type"], "ready");
    dsh.send(&world.execute("r1", "A landing page", None));
    let frames = dsh.rest();
    assert_eq!(code(dsh.wait()), 0);
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "untouched");
    let result = frames
        .iter()
        .find(|frame| frame["type"] == "tool_result")
        .expect("a tool_result");
    assert_eq!(result["is_error"], true, "{result}");
    assert!(
        result["output"].as_str().unwrap().contains("cannot write"),
        "{result}"
    );
}

#[test]
fn a_scenario_sets_the_code_of_a_rejected_resume() {
    let world = World::new();
    world.scenario(json!({"agent": {"resume_rejected_code": "DSH_PROFILE_SESSION_NOT_FOUND"}}));
    let sessions = world.home().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    std::fs::write(sessions.join("od-corrupt.json"), b"{").unwrap();
    for resume in ["od-00000000-0000-4000-8000-000000000000", "od-corrupt"] {
        let mut dsh = world.stdio();
        dsh.next_frame();
        dsh.send(&world.execute("r1", "again", Some(resume)));
        let frames = dsh.rest();
        assert_eq!(types(&frames), ["result"], "{resume}");
        assert_eq!(frames[0]["resume_rejected"], true);
        assert_eq!(
            frames[0]["error"]["code"], "DSH_PROFILE_SESSION_NOT_FOUND",
            "{resume}"
        );
        assert_eq!(code(dsh.wait()), 0);
    }
}

#[test]
fn a_turn_whose_cwd_does_not_exist_creates_it_and_completes_as_the_real_dsh_does() {
    let world = World::new();
    let missing = world.project().join("not-yet/made");
    let mut execute = world.execute("r1", "A landing page", None);
    execute["cwd"] = json!(missing.to_string_lossy());
    let mut dsh = world.stdio();
    dsh.next_frame();
    dsh.send(&execute);
    let frames = dsh.rest();
    assert_eq!(types(&frames), FULL_TURN);
    let tool_result = &frames[5];
    assert_eq!(tool_result["is_error"], false, "{tool_result}");
    let result = frames.last().unwrap();
    assert_eq!(result["status"], "completed", "{result}");
    assert!(missing.join("index.html").is_file());
    assert_eq!(code(dsh.wait()), 0);
}
