//! fake-dsh's ACP surface beyond the captures (`acp_wire` holds it to the real frames): its
//! command line, the default agent's real file, cold resume across processes, the `acp`
//! scenario's knobs (a failed turn, max tokens, permission requests, a slow model, a cancel
//! mid-tool, an agent that exits mid-turn) and its adversarial plays (a malformed line, an
//! oversized frame, an unknown update kind, a stray response, an id collision, a flood), a
//! malformed scenario, and endings (EOF mid-turn, a batch, an oversized request line).

use crate::support::acp::{call, kinds, open_session, prompt, request, start, until_response};
use crate::support::{code, first_entry, World};
use nix::sys::signal::Signal;
use serde_json::{json, Value};

#[test]
fn the_command_line_answers_like_the_real_launcher() {
    let world = World::without_profile();
    let help = world
        .cmd(&["--profile", "acp", "--help"])
        .assert()
        .success();
    let help = String::from_utf8(help.get_output().stdout.clone()).unwrap();
    assert!(help.starts_with("Usage: dsh --profile acp [options]\n\nServe automation clients"));
    assert!(help.ends_with("serve ACP until the client disconnects\n\n"));
    let failures = [
        (
            vec!["--profile", "acp", "--bogus"],
            "error: unknown option '--bogus'\n",
        ),
        (
            vec!["--profile", "acp", "extra"],
            "error: too many arguments. Expected 0 arguments but got 1: extra.\n",
        ),
        (
            vec!["--persona", "0.1.5", "acp"],
            "error: --profile <name> is required\n",
        ),
    ];
    for (args, stderr) in failures {
        world
            .cmd(&args)
            .assert()
            .code(1)
            .stdout("")
            .stderr(stderr.to_string());
    }
    let mut version = world.cmd(&["--persona", "0.1.5", "--profile", "acp", "-V"]);
    version.assert().success().stdout("0.1.5-rc.1\n");
    // `dsh acp` serves on 0.2.1: the first frame answers initialize.
    let mut running = world.spawn(&["acp"], |_| {});
    let (_, response) = call(&mut running, 1, "initialize", json!({"protocolVersion": 1}));
    assert_eq!(
        response["result"]["agentInfo"]["name"],
        "deepseek-harness-acp"
    );
    let journal = world.journal_of(running.pid());
    assert_eq!(first_entry(&journal, "start")["mode"], "acp");
}

#[test]
fn the_default_agent_writes_the_page_then_reads_and_recolours_it() {
    let world = World::without_profile();
    let mut running = start(&world, "0.2.1", |_| {});
    let session = open_session(&mut running, &world);
    let (updates, response) = call(
        &mut running,
        3,
        "session/prompt",
        prompt(&session, "Make a landing page"),
    );
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(
        kinds(&updates),
        [
            "agent_thought_chunk",
            "usage_update",
            "tool_call",
            "tool_call_update",
            "agent_thought_chunk",
            "agent_message_chunk",
            "usage_update"
        ]
    );
    let page = world.project().join("index.html");
    let first = std::fs::read_to_string(&page).unwrap();
    assert!(first.starts_with("<!doctype html>"), "{first}");
    let written = &updates[3]["params"]["update"];
    assert_eq!(written["status"], "completed");
    assert!(written["content"][0]["content"]["text"]
        .as_str()
        .unwrap()
        .contains("Created file"));
    let (updates, _) = call(
        &mut running,
        4,
        "session/prompt",
        prompt(&session, "Now make it green"),
    );
    let tools: Vec<&Value> = updates
        .iter()
        .filter(|f| f["params"]["update"]["sessionUpdate"] == "tool_call")
        .map(|f| &f["params"]["update"]["title"])
        .collect();
    assert_eq!(tools, [&json!("read"), &json!("write")]);
    let green = std::fs::read_to_string(&page).unwrap();
    assert_ne!(green, first);
    assert!(green.contains("#2f9e44"), "the green accent: {green}");
    // The journal holds what the client sent and what the agent wrote (whole once it exits).
    running.close_stdin();
    assert_eq!(code(running.wait()), 0);
    let journal = world.journal_of(running.pid());
    let methods: Vec<&str> = crate::support::entries(&journal, "command")
        .filter_map(|e| e["command"]["method"].as_str())
        .collect();
    assert_eq!(
        methods,
        [
            "initialize",
            "session/new",
            "session/prompt",
            "session/prompt"
        ]
    );
    let frames: Vec<&str> = crate::support::entries(&journal, "frame")
        .filter_map(|e| e["frame_type"].as_str())
        .collect();
    assert_eq!(frames.iter().filter(|f| **f == "response").count(), 4);
    assert_eq!(
        frames.iter().filter(|f| **f == "session/update").count(),
        7 + 11
    );
}

#[test]
fn a_session_is_resumed_cold_in_a_new_process_and_goes_on() {
    let world = World::without_profile();
    let (session, used) = {
        let mut first = start(&world, "0.1.5", |_| {});
        let session = open_session(&mut first, &world);
        let (updates, _) = call(
            &mut first,
            3,
            "session/prompt",
            prompt(&session, "Make a page"),
        );
        let used = updates.last().unwrap()["params"]["update"]["used"]
            .as_u64()
            .unwrap();
        first.close_stdin();
        assert_eq!(code(first.wait()), 0);
        (session, used)
    };
    let mut second = start(&world, "0.1.5", |_| {});
    let (_, listed) = call(&mut second, 1, "session/list", json!({}));
    assert_eq!(
        listed["result"]["sessions"],
        json!([{"sessionId": session, "cwd": world.project()}])
    );
    let unresumed = call(&mut second, 2, "session/prompt", prompt(&session, "x")).1;
    assert_eq!(
        unresumed["error"]["message"],
        format!("Invalid params: unknown session: {session}")
    );
    let params = json!({"sessionId": session, "cwd": world.project()});
    let (before, resumed) = call(&mut second, 3, "session/resume", params.clone());
    assert!(before.is_empty(), "no history replayed: {before:?}");
    assert!(resumed["result"]["configOptions"].is_array());
    let again = call(&mut second, 4, "session/resume", params).1;
    assert_eq!(
        again["error"]["message"],
        format!("Invalid params: session is already active: {session}")
    );
    let (updates, response) = call(
        &mut second,
        5,
        "session/prompt",
        prompt(&session, "Now make it green"),
    );
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let next_used = updates[1]["params"]["update"]["used"].as_u64().unwrap();
    assert!(
        next_used > used,
        "the context goes on growing: {next_used} after {used}"
    );
    assert_eq!(
        call(&mut second, 6, "session/list", json!({})).1["result"]["sessions"],
        json!([])
    );
}

#[test]
fn a_failed_turn_leaves_the_session_alive_and_max_tokens_is_a_stop_reason() {
    let world = World::without_profile();
    world.scenario(json!({"acp": {"turns": [
        {"replies": [{"reasoning": "Probe first.", "tool_calls": [{"name": "probe", "arguments": {}}]}],
         "fail": "model-server: scripted HTTP 401"},
        {"replies": [{"text": "This answer is cut"}], "stop": "max_tokens"}]}}));
    let mut running = start(&world, "0.2.1", |_| {});
    let session = open_session(&mut running, &world);
    let (updates, failed) = call(&mut running, 3, "session/prompt", prompt(&session, "a"));
    assert_eq!(
        kinds(&updates),
        [
            "agent_thought_chunk",
            "usage_update",
            "tool_call",
            "tool_call_update"
        ]
    );
    assert_eq!(updates[3]["params"]["update"]["status"], "failed");
    assert_eq!(
        failed["error"],
        json!({"code": -32603, "message": "Internal error: turn failed: model-server: scripted HTTP 401"})
    );
    let (updates, cut) = call(&mut running, 4, "session/prompt", prompt(&session, "b"));
    assert_eq!(kinds(&updates), ["agent_message_chunk", "usage_update"]);
    assert_eq!(cut["result"]["stopReason"], "max_tokens");
    let (_, next) = call(&mut running, 5, "session/prompt", prompt(&session, "c"));
    assert_eq!(
        next["result"]["stopReason"], "end_turn",
        "the default agent after the script"
    );
}

/// A turn whose one tool call asks for a wider sandbox.
fn escalating(permission_id: &str) -> Value {
    json!({"replies": [{"tool_calls": [{"name": "bash", "permission_id": permission_id,
        "arguments": {"command": "true", "sandbox_permissions": "danger-full-access"}}]},
        {"text": "Done."}]})
}

#[test]
fn permission_requests_count_from_zero_and_an_id_collision_is_played() {
    let world = World::without_profile();
    world.scenario(
        json!({"acp": {"turns": [escalating("counter"), escalating("counter"),
                                            escalating("prompt")]}}),
    );
    let mut running = start(&world, "0.1.5", |_| {});
    let session = open_session(&mut running, &world);
    let answers = [
        (
            3,
            json!({"outcome": {"outcome": "selected", "optionId": "allow-once"}}),
            "completed",
        ),
        (
            4,
            json!({"outcome": {"outcome": "selected", "optionId": "reject-once"}}),
            "failed",
        ),
    ];
    for (index, (prompt_id, answer, status)) in answers.into_iter().enumerate() {
        running.send(&request(
            prompt_id,
            "session/prompt",
            prompt(&session, "go"),
        ));
        let asked = until_request(&mut running);
        assert_eq!(asked["id"], index, "the agent's own ids: 0, 1, ...");
        let kinds: Vec<&str> = asked["params"]["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["allow_once", "reject_once"]);
        running.send(&json!({"jsonrpc": "2.0", "id": asked["id"], "result": answer}));
        let frames = until_response(&mut running, &json!(prompt_id));
        let update = frames
            .iter()
            .find(|f| f["params"]["update"]["sessionUpdate"] == "tool_call_update")
            .unwrap();
        assert_eq!(update["params"]["update"]["status"], status);
        assert_eq!(frames.last().unwrap()["result"]["stopReason"], "end_turn");
    }
    // (adversarial) the permission request reuses the prompt's id, 5: its answer (id 5 too)
    // goes to the permission, and the prompt is answered after.
    running.send(&request(5, "session/prompt", prompt(&session, "go")));
    let asked = until_request(&mut running);
    assert_eq!(asked["id"], 5);
    running.send(&json!({"jsonrpc": "2.0", "id": 5,
        "result": {"outcome": {"outcome": "selected", "optionId": "allow-once"}}}));
    let frames = until_response(&mut running, &json!(5));
    assert_eq!(frames.last().unwrap()["result"]["stopReason"], "end_turn");
}

/// Reads frames until the agent's `session/request_permission`.
fn until_request(running: &mut crate::support::Running) -> Value {
    loop {
        let frame = running.next_frame();
        if frame["method"] == "session/request_permission" {
            return frame;
        }
    }
}

#[test]
fn a_cancel_ends_a_slow_model_and_a_slow_tool() {
    let world = World::without_profile();
    world.scenario(json!({"acp": {"turns": [
        {"replies": [{"reasoning": "Thinking.", "delay_ms": 600_000, "reasoning_streams_after_ms": 0}]},
        {"replies": [{"tool_calls": [{"name": "read", "arguments": {"file_path": "x"},
                                      "delay_ms": 600_000}]}]}]}}));
    let mut running = start(&world, "0.2.1", |_| {});
    let session = open_session(&mut running, &world);
    running.send(&request(3, "session/prompt", prompt(&session, "a")));
    running.send(
        &json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
    );
    let frames = until_response(&mut running, &json!(3));
    assert_eq!(
        kinds(&frames),
        ["agent_thought_chunk"],
        "the reasoning streamed so far"
    );
    assert_eq!(frames.last().unwrap()["result"]["stopReason"], "cancelled");
    running.send(&request(4, "session/prompt", prompt(&session, "b")));
    let started = running.next_frame();
    assert_eq!(started["params"]["update"]["sessionUpdate"], "usage_update");
    assert_eq!(
        running.next_frame()["params"]["update"]["sessionUpdate"],
        "tool_call"
    );
    running
        .send(&json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 4}}));
    let frames = until_response(&mut running, &json!(4));
    assert_eq!(frames[0]["params"]["update"]["status"], "failed");
    assert_eq!(
        frames[0]["params"]["update"]["content"][0]["content"]["text"],
        fake_dsh::acp::tools::CANCELLED_TOOL
    );
    assert_eq!(frames[1]["result"]["stopReason"], "cancelled");
}

#[test]
fn adversarial_injections_reach_the_wire_as_scripted() {
    let world = World::without_profile();
    world.scenario(json!({"acp": {"turns": [{
        "inject": [{"raw_line": "this is not json"}, {"unknown_update": "mood_update"},
                   {"stray_response": 4242}, {"flood": 50}],
        "replies": [{"text": "big", "pad_bytes": 2_000_000}]}]}}));
    let mut running = start(&world, "0.2.1", |_| {});
    let session = open_session(&mut running, &world);
    running.send(&request(3, "session/prompt", prompt(&session, "a")));
    assert_eq!(running.next_line().unwrap(), b"this is not json\n");
    let unknown = running.next_frame();
    assert_eq!(unknown["params"]["update"]["sessionUpdate"], "mood_update");
    assert_eq!(
        running.next_frame(),
        json!({"jsonrpc": "2.0", "id": 4242, "result": {}})
    );
    let frames = until_response(&mut running, &json!(3));
    assert_eq!(
        frames.len(),
        50 + 3,
        "the flood, the padded chunk, usage, the answer"
    );
    let ids: std::collections::HashSet<&Value> = frames[..50]
        .iter()
        .map(|f| &f["params"]["update"]["messageId"])
        .collect();
    assert_eq!(ids.len(), 1, "one reply's chunks share its messageId");
    let big = frames[50]["params"]["update"]["content"]["text"]
        .as_str()
        .unwrap();
    assert_eq!(big.len(), 2_000_003);
}

#[test]
fn an_agent_that_exits_mid_turn_never_answers_the_prompt() {
    let world = World::without_profile();
    world.scenario(
        json!({"acp": {"turns": [{"replies": [{"text": "Going."}], "exit_mid_turn": 3}]}}),
    );
    let mut running = start(&world, "0.2.1", |_| {});
    let session = open_session(&mut running, &world);
    running.send(&request(3, "session/prompt", prompt(&session, "a")));
    let rest = running.rest();
    assert_eq!(kinds(&rest), ["agent_message_chunk", "usage_update"]);
    assert!(rest.iter().all(|f| f.get("result").is_none()));
    assert_eq!(code(running.wait()), 3);
}

#[test]
fn a_malformed_scenario_exits_2_naming_the_file_and_the_member() {
    let world = World::without_profile();
    world.scenario(json!({"acp": {"turns": [{"replies": [{"text": 7}]}]}}));
    let output = world
        .cmd(&["--profile", "acp"])
        .write_stdin("")
        .assert()
        .code(2);
    let stderr = String::from_utf8(output.get_output().stderr.clone()).unwrap();
    assert!(
        stderr.contains("scenario.json") && stderr.contains("acp/turns/0/replies/0/text"),
        "{stderr}"
    );
}

#[test]
fn eof_mid_turn_exits_0_without_an_answer() {
    let world = World::without_profile();
    world.scenario(json!({"acp": {"turns": [{"replies": [{"delay_ms": 600_000}]}]}}));
    let mut running = start(&world, "0.2.1", |_| {});
    let session = open_session(&mut running, &world);
    running.send(&request(3, "session/prompt", prompt(&session, "a")));
    running.close_stdin();
    assert_eq!(running.rest(), Vec::<Value>::new());
    assert_eq!(code(running.wait()), 0);
}

#[test]
fn a_batch_wedges_the_agent_until_a_signal() {
    let world = World::without_profile();
    let mut running = start(&world, "0.1.5", |_| {});
    running.send_raw(b"[{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}]\n");
    running.send(&request(1, "initialize", json!({"protocolVersion": 1})));
    running.close_stdin();
    world.await_journal("stdin closed", |e| e["event"] == "stdin_closed");
    running.signal_group(Signal::SIGTERM);
    assert_eq!(
        running.rest(),
        Vec::<Value>::new(),
        "nothing answered after the batch"
    );
    assert_eq!(code(running.wait()), 0);
    let journal = world.journal_of(running.pid());
    assert_eq!(
        crate::support::entries(&journal, "exit").next().unwrap()["reason"],
        "signal"
    );
}

#[test]
fn a_2_mib_line_is_answered_and_one_over_64_mib_ends_the_process_naming_it() {
    let world = World::without_profile();
    let mut running = start(&world, "0.2.1", |_| {});
    let long = request(1, "session/list", json!({"cursor": "a".repeat(2 << 20)}));
    running.send(&long);
    let refused = running.next_frame();
    assert_eq!(
        refused["error"]["message"],
        "Invalid params: session/list cursor is invalid"
    );
    let huge = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"x\",\"params\":\"{}\"}}\n",
        "a".repeat(65 << 20)
    );
    // The agent stops reading once the line passes the bound: the write may fail.
    let _ = running.try_send_raw(huge.as_bytes());
    assert_eq!(code(running.wait()), 2);
    let stderr = String::from_utf8(running.stderr()).unwrap();
    assert!(
        stderr.contains("stdin line 2 is longer than 67108864 bytes"),
        "{stderr}"
    );
}

#[test]
fn a_cancel_during_a_permission_request_takes_the_late_answer_silently() {
    let world = World::without_profile();
    world.scenario(json!({"acp": {"turns": [escalating("counter")]}}));
    let mut running = start(&world, "0.2.1", |_| {});
    let session = open_session(&mut running, &world);
    running.send(&request(3, "session/prompt", prompt(&session, "go")));
    let asked = until_request(&mut running);
    running.send(&json!({"jsonrpc": "2.0", "method": "session/cancel",
                         "params": {"sessionId": session}}));
    let frames = until_response(&mut running, &json!(3));
    let failed = &frames[0]["params"]["update"];
    assert_eq!(failed["status"], "failed");
    assert_eq!(
        failed["content"][0]["content"]["text"],
        "Error: approval for escalating to \"danger-full-access\" was cancelled"
    );
    assert_eq!(frames[1]["result"]["stopReason"], "cancelled");
    // What the schema asks of a client that cancels: answer the request `cancelled`.
    running.send(&json!({"jsonrpc": "2.0", "id": asked["id"],
                         "result": {"outcome": {"outcome": "cancelled"}}}));
    let (_, next) = call(&mut running, 4, "session/prompt", prompt(&session, "again"));
    assert_eq!(next["result"]["stopReason"], "end_turn");
    running.close_stdin();
    assert_eq!(code(running.wait()), 0);
    assert_eq!(
        String::from_utf8(running.stderr()).unwrap(),
        "",
        "taken silently"
    );
}

#[test]
fn a_bad_permission_mode_warns_on_0_2_1_and_ends_0_1_5_after_its_first_answer() {
    let world = World::without_profile();
    let bogus = |command: &mut std::process::Command| {
        command.env("DSH_PERMISSION_MODE", "bogus");
    };
    let mut old = start(&world, "0.1.5", bogus);
    let (_, answered) = call(&mut old, 1, "initialize", json!({"protocolVersion": 1}));
    assert_eq!(answered["result"]["protocolVersion"], 1);
    assert_eq!(code(old.wait()), 1);
    let stderr = String::from_utf8(old.stderr()).unwrap();
    assert!(
        stderr.starts_with("Error: dsh: plugin tree failed to load: "),
        "{stderr}"
    );
    assert!(stderr.contains("but got \"bogus\" (at mode)"), "{stderr}");
    let mut new = start(&world, "0.2.1", bogus);
    call(&mut new, 1, "initialize", json!({"protocolVersion": 1}));
    let (_, listed) = call(&mut new, 2, "session/list", json!({}));
    assert_eq!(listed["result"]["sessions"], json!([]), "serves on");
    new.close_stdin();
    assert_eq!(code(new.wait()), 0);
    let stderr = String::from_utf8(new.stderr()).unwrap();
    assert!(
        stderr.starts_with("dsh: warning: 21 entries did not activate\n"),
        "{stderr}"
    );
}

#[test]
fn a_missing_file_an_empty_permission_answer_and_a_slow_start_as_observed() {
    let world = World::without_profile();
    world.scenario(json!({"acp": {"initialize_delay_ms": 200, "turns": [
        {"replies": [{"tool_calls": [{"name": "read", "arguments": {"file_path": "missing.txt"}}]}]},
        escalating("counter")]}}));
    let mut running = start(&world, "0.1.5", |_| {});
    let session = open_session(&mut running, &world);
    let (updates, _) = call(&mut running, 3, "session/prompt", prompt(&session, "a"));
    let missing = world.project().join("missing.txt");
    assert_eq!(
        updates[2]["params"]["update"]["content"][0]["content"]["text"],
        format!("Error: cannot read \"{}\": not found", missing.display())
    );
    running.send(&request(4, "session/prompt", prompt(&session, "b")));
    let asked = until_request(&mut running);
    running.send(&json!({"jsonrpc": "2.0", "id": asked["id"]}));
    let frames = until_response(&mut running, &json!(4));
    assert_eq!(
        frames[0]["params"]["update"]["content"][0]["content"]["text"],
        "Error: sandbox escalation to \"danger-full-access\" requires approval, but no approval \
         channel is available"
    );
    // The start: nothing is read before the scenario's load time has passed.
    let journal = world.journal_of(running.pid());
    let started = first_entry(&journal, "start")["t_ms"].as_u64().unwrap();
    let first_read = first_entry(&journal, "command")["t_ms"].as_u64().unwrap();
    assert!(
        first_read >= started + 200,
        "read at +{} ms",
        first_read - started
    );
}
