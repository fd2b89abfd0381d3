//! The journal members the harness judges hosts by: `stdin_pending` on `ready` (did the host
//! write before the runtime's ready?), the error `code` of failed results and protocol errors, and
//! `empty` on empty thinking/text deltas.

use crate::support;

use serde_json::{json, Value};
use std::io::Write;
use std::process::{Command, Stdio};
use support::{code, entries, World};

fn frame_entry<'a>(journal: &'a [Value], frame_type: &str) -> &'a Value {
    entries(journal, "frame")
        .find(|entry| entry["frame_type"] == frame_type)
        .unwrap_or_else(|| panic!("no {frame_type} frame entry in {journal:#?}"))
}

#[test]
fn ready_after_which_the_host_wrote_has_stdin_pending_false() {
    let world = World::new();
    let mut dsh = world.stdio();
    assert_eq!(dsh.next_frame()["type"], "ready");
    dsh.send(&world.execute("r1", "p", None));
    assert_eq!(
        dsh.frames_until("result").last().unwrap()["status"],
        "completed"
    );
    assert_eq!(code(dsh.wait()), 0);
    let journal = world.journal_of(dsh.pid());
    assert_eq!(frame_entry(&journal, "ready")["stdin_pending"], false);
    assert!(frame_entry(&journal, "text").get("stdin_pending").is_none());
}

#[test]
fn an_execute_waiting_in_the_pipe_before_ready_is_stdin_pending() {
    let world = World::new();
    let (reader, mut writer) = std::io::pipe().unwrap();
    writer
        .write_all(format!("{}\n", world.execute("r1", "p", None)).as_bytes())
        .unwrap();
    drop(writer);
    let output = Command::new(env!("CARGO_BIN_EXE_fake-dsh"))
        .args(["--profile", "open-design", "--stdio"])
        .current_dir(world.root.path())
        .env("DSH_HOME", world.home())
        .env("FAKE_DSH_JOURNAL", world.journal_path())
        .env("FAKE_DSH_WATCHDOG_SECS", "60")
        .env_remove("FAKE_DSH_SCENARIO")
        .stdin(Stdio::from(reader))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(code(output.status), 0);
    let journal = world.journal();
    assert_eq!(frame_entry(&journal, "ready")["stdin_pending"], true);
}

#[test]
fn an_execute_the_reader_took_before_a_late_ready_is_stdin_pending() {
    let world = World::new();
    world.scenario(json!({"stdio": [[
        {"read_execute": {"timeout_ms": 30000}},
        {"ready": {}},
        {"result": {"status": "completed"}}
    ]]}));
    let mut dsh = world.stdio();
    dsh.send(&world.execute("r1", "p", None));
    assert_eq!(dsh.next_frame()["type"], "ready");
    assert_eq!(dsh.next_frame()["type"], "result");
    dsh.close_stdin();
    assert_eq!(code(dsh.wait()), 0);
    let journal = world.journal_of(dsh.pid());
    assert_eq!(frame_entry(&journal, "ready")["stdin_pending"], true);
}

#[test]
fn error_codes_and_empty_deltas_are_journaled_without_content() {
    let world = World::new();
    world.scenario(json!({"stdio": [[
        {"ready": {}}, {"read_execute": {}}, {"session": {}},
        {"thinking": ""}, {"text": ""}, {"text": "not empty"},
        {"protocol_error": {"code": "UNSUPPORTED_FIELD", "message": "protocol-said-no"}},
        {"result": {"status": "failed", "error": {"code": "PROVIDER_DOWN", "message": "upstream-said-no"}}}
    ]]}));
    let mut dsh = world.stdio();
    dsh.next_frame();
    dsh.send(&world.execute("r1", "a secret prompt", None));
    dsh.frames_until("result");
    dsh.close_stdin();
    assert_eq!(code(dsh.wait()), 0);
    let journal = world.journal_of(dsh.pid());
    let frames: Vec<&Value> = entries(&journal, "frame").collect();
    let members = |entry: &Value| {
        (
            entry["frame_type"].clone(),
            entry["code"].clone(),
            entry["empty"].clone(),
        )
    };
    let seen: Vec<(Value, Value, Value)> = frames.iter().map(|entry| members(entry)).collect();
    assert_eq!(
        seen[2..],
        [
            (json!("thinking"), Value::Null, json!(true)),
            (json!("text"), Value::Null, json!(true)),
            (json!("text"), Value::Null, Value::Null),
            (
                json!("protocol_error"),
                json!("UNSUPPORTED_FIELD"),
                Value::Null
            ),
            (json!("result"), json!("PROVIDER_DOWN"), Value::Null),
        ]
    );
    let text = std::fs::read_to_string(world.journal_path()).unwrap();
    assert!(
        !["not empty", "protocol-said-no", "upstream-said-no"]
            .iter()
            .any(|content| text.contains(content)),
        "{text}"
    );
    assert!(!text.contains("canary-key-value"));
}
