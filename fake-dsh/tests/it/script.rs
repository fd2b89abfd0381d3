//! Scripted `--stdio` processes: every action of the scenario language, placeholders, the
//! per-invocation scripts, signals, grandchildren and the watchdog.

use crate::support;

use nix::sys::signal::Signal;
use serde_json::{json, Value};
use support::{alive, await_death, code, entries, first_entry, stdout_frames, World};

fn script(world: &World, actions: Value) {
    world.scenario(json!({ "stdio": [actions] }));
}

fn run_to_end(world: &World, commands: &[Value]) -> (std::process::Output, Vec<Value>) {
    let mut input = Vec::new();
    for command in commands {
        input.extend_from_slice(format!("{command}\n").as_bytes());
    }
    let output = world
        .cmd(&["--profile", "open-design", "--stdio"])
        .write_stdin(input)
        .output()
        .unwrap();
    (output, world.journal())
}

#[test]
fn frames_carry_the_bound_placeholders() {
    let world = World::new();
    script(
        &world,
        json!([
            {"ready": {"patch": {"plugin_version": "9.9.9"}}},
            {"read_execute": {}},
            {"session": {}},
            {"text": "request {{request_id}} in {{session_id}}"},
            {"frame": {"v": 1, "type": "text", "request_id": "{{foreign_request_id}}", "content": "x"}},
            {"tool_call": {"call_id": "c1", "name": "write_file", "arguments": {"path": "{{request_id}}.html"}}},
            {"tool_result": {"call_id": "c1", "output": "done"}},
            {"usage": {"input_tokens": -1}},
            {"result": {}}
        ]),
    );
    let (output, _) = run_to_end(&world, &[world.execute("req-7", "p", Some("od-resume-me"))]);
    assert_eq!(code(output.status), 0);
    let frames = stdout_frames(&output.stdout);
    assert_eq!(frames[0]["type"], "ready");
    assert_eq!(frames[0]["plugin_version"], "9.9.9");
    assert_eq!(
        frames[1],
        json!({"v": 1, "type": "session", "request_id": "req-7", "session_id": "od-resume-me", "resumed": true})
    );
    assert_eq!(frames[2]["content"], "request req-7 in od-resume-me");
    assert_ne!(frames[3]["request_id"], "req-7");
    assert_eq!(frames[4]["arguments"], "{\"path\":\"req-7.html\"}");
    assert_eq!(frames[5]["call_id"], "c1");
    assert_eq!(frames[5]["output"], "done");
    assert_eq!(frames[6]["input_tokens"], -1);
    assert_eq!(frames[6]["output_tokens"], 300);
    assert_eq!(
        frames[7],
        json!({"v": 1, "type": "result", "request_id": "req-7", "status": "completed",
               "session_id": "od-resume-me", "resume_rejected": false})
    );
    let journal = world.journal();
    assert_eq!(first_entry(&journal, "exit")["reason"], "script_end");
    assert!(
        world.home().join("sessions/od-resume-me.json").is_file(),
        "a scripted session is stored"
    );
}

#[test]
fn raw_and_raw_base64_write_exact_bytes() {
    let world = World::new();
    script(
        &world,
        json!([
            {"raw": "\u{feff}banner \u{1b}[32mgreen\u{1b}[0m\n"},
            {"read_execute": {}},
            {"raw": "{\"v\":1,\"type\":\"text\",\"request_id\":\"{{request_id}}\",\"content\":\"a\u{2028}b\u{0000}\"}\r\n"},
            {"raw_base64": "/+4K"},
            {"raw": "\n   \n"}
        ]),
    );
    let (output, journal) = run_to_end(&world, &[world.execute("r1", "p", None)]);
    let mut expected = "\u{feff}banner \u{1b}[32mgreen\u{1b}[0m\n"
        .as_bytes()
        .to_vec();
    expected.extend_from_slice(
        "{\"v\":1,\"type\":\"text\",\"request_id\":\"r1\",\"content\":\"a\u{2028}b\u{0000}\"}\r\n"
            .as_bytes(),
    );
    expected.extend_from_slice(&[0xff, 0xee, b'\n']);
    expected.extend_from_slice(b"\n   \n");
    assert_eq!(output.stdout, expected);
    let raw_frames = journal
        .iter()
        .filter(|entry| entry["event"] == "frame" && entry["frame_type"] == "raw")
        .count();
    assert_eq!(raw_frames, 4);
}

#[test]
fn repeat_streams_a_64_mib_line_without_newline() {
    let world = World::new();
    script(
        &world,
        json!([{"repeat": {"text": "abc", "bytes": 67_108_864, "newline": false}}]),
    );
    let (output, _) = run_to_end(&world, &[]);
    assert_eq!(code(output.status), 0);
    assert_eq!(output.stdout.len(), 67_108_864);
    assert!(!output.stdout.contains(&b'\n'));
    assert_eq!(&output.stdout[..6], b"abcabc");
    assert_eq!(output.stdout[67_108_863], b"abc"[(67_108_863 % 3) as usize]);
}

#[test]
fn a_reader_that_goes_away_mid_repeat_ends_the_process_quietly() {
    use std::io::Read;
    let world = World::new();
    script(
        &world,
        json!([{"repeat": {"text": "x", "bytes": 67_108_864}}]),
    );
    let (mut dsh, mut stdout) = world.spawn_taking_stdout(&["--profile", "open-design", "--stdio"]);
    let mut first = vec![0u8; 1024 * 1024];
    stdout.read_exact(&mut first).unwrap();
    assert!(first.iter().all(|&byte| byte == b'x'));
    drop(stdout);
    assert_eq!(code(dsh.wait()), 141);
    assert!(
        dsh.stderr().is_empty(),
        "a broken pipe is not worth a diagnostic"
    );
    let exit = world.journal_of(dsh.pid()).pop().unwrap();
    assert_eq!(
        (exit["event"].as_str(), exit["reason"].as_str()),
        (Some("exit"), Some("error"))
    );
}

#[test]
fn drip_and_coalesce_deliver_the_same_bytes_as_plain_frames() {
    let world = World::new();
    script(
        &world,
        json!([
            {"drip": {"action": {"ready": {}}, "chunk": 3, "delay_ms": 0}},
            {"read_execute": {}},
            {"coalesce": [{"session": {"session_id": "od-x", "resumed": false}}, {"text": "one"}, {"text": "two"}]},
            {"drip": {"action": {"result": {"session_id": "od-x"}}}}
        ]),
    );
    let (output, journal) = run_to_end(&world, &[world.execute("r1", "p", None)]);
    let lines = stdout_frames(&output.stdout);
    let kinds: Vec<&str> = lines
        .iter()
        .map(|frame| frame["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["ready", "session", "text", "text", "result"]);
    let journaled: Vec<&str> = entries(&journal, "frame")
        .map(|entry| entry["frame_type"].as_str().unwrap())
        .collect();
    assert_eq!(journaled, kinds);
}

#[test]
fn a_failed_result_gets_a_default_error_and_protocol_error_frames_are_written() {
    let world = World::new();
    script(
        &world,
        json!([
            {"ready": {}}, {"read_execute": {}},
            {"protocol_error": {"code": "BAD", "message": "m"}},
            {"result": {"status": "failed", "resume_rejected": true}},
            {"result": {"status": "completed", "session_id": null}},
            {"exit": 3}
        ]),
    );
    let (output, journal) = run_to_end(&world, &[world.execute("r1", "p", None)]);
    assert_eq!(code(output.status), 3);
    let lines = stdout_frames(&output.stdout);
    assert_eq!(
        lines[1],
        json!({"v": 1, "type": "protocol_error", "request_id": "r1", "code": "BAD", "message": "m"})
    );
    assert_eq!(lines[2]["error"]["code"], "RUN_FAILED");
    assert_eq!(lines[2]["resume_rejected"], true);
    assert_eq!(lines[3]["session_id"], Value::Null);
    let exit = first_entry(&journal, "exit");
    assert_eq!(exit["reason"], "exit_action");
    assert_eq!(exit["code"], 3);
}

#[test]
fn the_agent_action_plays_the_default_turn_inside_a_script() {
    let world = World::new();
    script(
        &world,
        json!([{"stderr": "booting\n"}, {"ready": {}}, {"agent": {}}, {"exit": 1}]),
    );
    let (output, _) = run_to_end(&world, &[world.execute("r1", "Create", None)]);
    assert_eq!(
        code(output.status),
        1,
        "exit non-zero after a completed result"
    );
    let last: Value = serde_json::from_slice(
        output
            .stdout
            .trim_ascii_end()
            .rsplit(|&b| b == b'\n')
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(last["status"], "completed");
    assert_eq!(output.stderr, b"booting\n");
    assert!(world.project().join("index.html").is_file());
}

#[test]
fn each_invocation_plays_its_own_script_and_then_the_default_agent() {
    let world = World::new();
    world.scenario(json!({"stdio": [[{"text": "first"}], [{"text": "second"}]]}));
    let outputs: Vec<Vec<u8>> = (0..3).map(|_| run_to_end(&world, &[]).0.stdout).collect();
    assert!(String::from_utf8_lossy(&outputs[0]).contains("\"first\""));
    assert!(String::from_utf8_lossy(&outputs[1]).contains("\"second\""));
    assert!(
        String::from_utf8_lossy(&outputs[2]).contains("\"ready\""),
        "a third process runs the default agent"
    );
    let journal = world.journal();
    let indexes: Vec<Value> = entries(&journal, "start")
        .map(|entry| entry["invocation"].clone())
        .collect();
    assert_eq!(indexes, [json!(0), json!(1), json!(2)]);
}

#[test]
fn without_a_journal_the_invocation_counter_lives_in_dsh_home() {
    let world = World::new();
    world.scenario(json!({"stdio": [[{"text": "first"}], [{"text": "second"}]]}));
    let run = || {
        world
            .cmd(&["--profile", "open-design", "--stdio"])
            .env_remove("FAKE_DSH_JOURNAL")
            .write_stdin("")
            .output()
            .unwrap()
            .stdout
    };
    assert!(String::from_utf8_lossy(&run()).contains("\"first\""));
    assert!(String::from_utf8_lossy(&run()).contains("\"second\""));
    assert!(world.home().join(".fake-dsh/stdio-invocations").is_file());
    assert!(!world.journal_path().exists());
}

#[test]
fn wait_cancel_returns_on_the_active_cancel_only() {
    let world = World::new();
    script(
        &world,
        json!([
            {"ready": {}}, {"read_execute": {}}, {"text": "waiting"},
            {"wait_cancel": {"timeout_ms": 60000}},
            {"result": {"status": "cancelled"}}
        ]),
    );
    let mut dsh = world.stdio();
    dsh.next_frame();
    dsh.send(&world.execute("r1", "p", None));
    assert_eq!(dsh.next_frame()["content"], "waiting");
    dsh.send(&json!({"v": 1, "type": "cancel", "request_id": "other"}));
    dsh.send(&json!({"v": 1, "type": "cancel", "request_id": "r1"}));
    let result = dsh.next_frame();
    assert_eq!(result["status"], "cancelled");
    assert_eq!(code(dsh.wait()), 0);
    let journal = world.journal_of(dsh.pid());
    let cancels: Vec<&Value> = journal
        .iter()
        .filter(|entry| entry["event"] == "command" && entry["command"]["type"] == "cancel")
        .collect();
    assert_eq!(cancels.len(), 2);
    let cancel_at = journal
        .iter()
        .position(|entry| entry["command"]["request_id"] == "r1")
        .unwrap();
    let result_at = journal
        .iter()
        .position(|entry| entry["frame_type"] == "result")
        .unwrap();
    assert!(cancel_at < result_at);
}

#[test]
fn wait_stdin_close_returns_at_eof_and_read_execute_ends_on_eof() {
    let world = World::new();
    script(
        &world,
        json!([{"ready": {}}, {"wait_stdin_close": {"timeout_ms": 60000}}, {"text": "after eof"}]),
    );
    let mut dsh = world.stdio();
    dsh.next_frame();
    dsh.close_stdin();
    assert_eq!(dsh.next_frame()["content"], "after eof");
    assert_eq!(code(dsh.wait()), 0);

    let world = World::new();
    script(&world, json!([{"read_execute": {}}, {"text": "never"}]));
    let (output, journal) = run_to_end(&world, &[]);
    assert_eq!(code(output.status), 0);
    assert!(output.stdout.is_empty());
    assert_eq!(first_entry(&journal, "exit")["reason"], "stdin_closed");
}

#[test]
fn hang_is_ended_by_the_watchdog() {
    let world = World::new();
    script(&world, json!([{"ready": {}}, {"hang": {}}]));
    let mut dsh = world.spawn(&["--profile", "open-design", "--stdio"], |command| {
        command.env("FAKE_DSH_WATCHDOG_SECS", "0.5");
    });
    dsh.next_frame();
    assert_eq!(code(dsh.wait()), 124);
    let exit = world.journal_of(dsh.pid()).pop().unwrap();
    assert_eq!(exit["event"], "exit");
    assert_eq!(exit["reason"], "watchdog");
}

#[test]
fn sigterm_ends_the_process_with_143_and_is_journaled() {
    let world = World::new();
    script(&world, json!([{"ready": {}}, {"hang": {}}]));
    let mut dsh = world.stdio();
    dsh.next_frame();
    dsh.signal_group(Signal::SIGTERM);
    assert_eq!(code(dsh.wait()), 143);
    let journal = world.journal_of(dsh.pid());
    let signal = first_entry(&journal, "signal");
    assert_eq!(signal["signal"], "SIGTERM");
    assert_eq!(signal["ignored"], false);
    let exit = journal.last().unwrap();
    assert_eq!(
        (
            exit["event"].as_str(),
            exit["code"].as_i64(),
            exit["reason"].as_str()
        ),
        (Some("exit"), Some(143), Some("signal"))
    );
}

#[test]
fn ignore_sigterm_journals_and_survives_sigterm() {
    let world = World::new();
    script(
        &world,
        json!([{"ignore_sigterm": true}, {"ready": {}}, {"wait_stdin_close": {"timeout_ms": 60000}}, {"exit": 7}]),
    );
    let mut dsh = world.stdio();
    dsh.next_frame();
    let pid = dsh.pid();
    dsh.signal_group(Signal::SIGTERM);
    let signal = world.await_journal("signal", |entry| {
        entry["event"] == "signal" && entry["pid"] == pid
    });
    assert_eq!(signal["ignored"], true);
    dsh.close_stdin();
    assert_eq!(
        code(dsh.wait()),
        7,
        "it survived SIGTERM and went on with its script"
    );
}

#[test]
fn spawned_children_share_the_group_and_die_with_it() {
    let world = World::new();
    script(
        &world,
        json!([{"spawn_child": {"ignore_sigterm": true}}, {"spawn_child": {}}, {"ready": {}}, {"hang": {}}]),
    );
    let mut dsh = world.stdio();
    dsh.next_frame();
    let parent = dsh.pid();
    let journal = world.journal_of(parent);
    let children: Vec<&Value> = entries(&journal, "child").collect();
    assert_eq!(children.len(), 2);
    assert_eq!(children[0]["ignores_sigterm"], true);
    assert_eq!(children[1]["ignores_sigterm"], false);
    let stubborn = children[0]["child_pid"].as_i64().unwrap();
    let meek = children[1]["child_pid"].as_i64().unwrap();
    let child_start = world
        .journal_of(stubborn as u32)
        .into_iter()
        .next()
        .unwrap();
    assert_eq!(child_start["mode"], "child");
    assert_eq!(
        child_start["pgid"], parent,
        "the child is in the runtime's process group"
    );
    assert!(alive(stubborn) && alive(meek));

    dsh.signal_group(Signal::SIGTERM);
    assert_eq!(code(dsh.wait()), 143);
    await_death(meek);
    world.await_journal("the stubborn child's ignored SIGTERM", |entry| {
        entry["pid"] == stubborn && entry["event"] == "signal" && entry["ignored"] == true
    });
    assert!(
        alive(stubborn),
        "a grandchild that ignores SIGTERM outlives it"
    );
    dsh.signal_group(Signal::SIGKILL);
    await_death(stubborn);
}

#[test]
fn the_watchdog_also_kills_the_children_it_spawned() {
    let world = World::new();
    script(
        &world,
        json!([{"spawn_child": {"ignore_sigterm": true}}, {"ready": {}}, {"hang": {}}]),
    );
    let mut dsh = world.spawn(&["--profile", "open-design", "--stdio"], |command| {
        command.env("FAKE_DSH_WATCHDOG_SECS", "1");
    });
    dsh.next_frame();
    let child = first_entry(&world.journal_of(dsh.pid()), "child")["child_pid"]
        .as_i64()
        .unwrap();
    assert_eq!(code(dsh.wait()), 124);
    await_death(child);
}

#[test]
fn stderr_actions_write_what_they_say() {
    let world = World::new();
    script(
        &world,
        json!([
            {"read_execute": {}},
            {"stderr": "plain\n"},
            {"stderr_prompt": {}},
            {"stderr_env": "DEEPSEEK_API_KEY"},
            {"stderr_flood": {"bytes": 3_000_000}},
            {"text": "done"}
        ]),
    );
    let (output, _) = run_to_end(&world, &[world.execute("r1", "my secret prompt", None)]);
    assert_eq!(code(output.status), 0);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("plain\n"));
    assert!(stderr.contains("my secret prompt"));
    assert!(stderr.contains("canary-key-value"));
    let flood_start = stderr.find("canary-key-value\n").unwrap() + "canary-key-value\n".len();
    assert_eq!(output.stderr.len() - flood_start, 3_000_000);
    assert!(String::from_utf8_lossy(&output.stdout).contains("\"done\""));
}

#[test]
fn without_stderr_actions_stderr_never_holds_the_prompt_or_env_values() {
    let world = World::new();
    script(&world, json!([{"ready": {}}, {"agent": {}}]));
    let (output, journal) = run_to_end(&world, &[world.execute("r1", "my secret prompt", None)]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("my secret prompt") && !stderr.contains("canary-key-value"));
    let journal_text = journal.iter().map(Value::to_string).collect::<String>();
    assert!(!journal_text.contains("canary-key-value"));
}

#[test]
fn sleep_ms_pauses_and_the_script_continues() {
    let world = World::new();
    script(
        &world,
        json!([{"text": "a"}, {"sleep_ms": 20}, {"text": "b"}]),
    );
    let (output, _) = run_to_end(&world, &[]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.find("\"a\"").unwrap() < text.find("\"b\"").unwrap());
}

#[test]
fn exit_is_each_process_last_whole_entry_even_when_stdin_closes_as_it_exits() {
    const PROCESSES: usize = 30;
    let world = World::new();
    let turn = json!([{"ready": {}}, {"read_execute": {}}, {"session": {}}, {"result": {}}]);
    world.scenario(json!({ "stdio": vec![turn; PROCESSES] }));
    for index in 0..PROCESSES {
        let mut dsh = world.stdio();
        dsh.send(&world.execute(&format!("r{index}"), "p", None));
        dsh.frames_until("result");
        dsh.close_stdin();
        assert_eq!(code(dsh.wait()), 0);
    }
    let text = std::fs::read(world.journal_path()).unwrap();
    assert!(text.ends_with(b"\n"), "the journal ends mid-entry");
    let journal = world.journal();
    let pids: std::collections::BTreeSet<i64> = entries(&journal, "start")
        .map(|start| start["pid"].as_i64().unwrap())
        .collect();
    assert_eq!(pids.len(), PROCESSES);
    for pid in pids {
        let own: Vec<&Value> = journal.iter().filter(|entry| entry["pid"] == pid).collect();
        assert_eq!(
            own.last().unwrap()["event"],
            "exit",
            "an entry of process {pid} follows its exit: {own:#?}"
        );
        assert_eq!(
            entries(&journal, "exit")
                .filter(|e| e["pid"] == pid)
                .count(),
            1
        );
    }
}

#[test]
fn result_on_cancel_answers_a_cancel_and_ends_the_script() {
    let world = World::new();
    script(
        &world,
        json!([
            {"ready": {}}, {"read_execute": {}}, {"session": {}},
            {"result_on_cancel": {"timeout_ms": 60000}},
            {"text": "never written"}
        ]),
    );
    let mut dsh = world.stdio();
    dsh.next_frame();
    dsh.send(&world.execute("r1", "p", None));
    let session = dsh.next_frame();
    dsh.send(&json!({"v": 1, "type": "cancel", "request_id": "other"}));
    dsh.send(&json!({"v": 1, "type": "cancel", "request_id": "r1"}));
    let result = dsh.next_frame();
    assert_eq!(result["status"], "cancelled");
    assert_eq!(result["request_id"], "r1");
    assert_eq!(result["session_id"], session["session_id"]);
    dsh.close_stdin();
    assert!(dsh.rest().is_empty());
    assert_eq!(code(dsh.wait()), 0);
    let journal = world.journal_of(dsh.pid());
    assert_eq!(first_entry(&journal, "exit")["reason"], "result_sent");
}

#[test]
fn result_on_cancel_without_a_cancel_goes_on_with_the_script() {
    let world = World::new();
    script(
        &world,
        json!([
            {"ready": {}}, {"read_execute": {}}, {"session": {}},
            {"result_on_cancel": {"timeout_ms": 50}},
            {"result": {"status": "completed"}}
        ]),
    );
    let (output, journal) = run_to_end(&world, &[world.execute("r1", "p", None)]);
    assert_eq!(code(output.status), 0);
    let lines = stdout_frames(&output.stdout);
    assert_eq!(lines.last().unwrap()["status"], "completed");
    assert_eq!(first_entry(&journal, "exit")["reason"], "script_end");
}
