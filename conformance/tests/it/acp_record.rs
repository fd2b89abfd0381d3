//! Recording an ACP session and replaying it keylessly: `dsh-conformance record -- fake-dsh
//! --profile acp` proxies the session and holds the agent's stdout to the ACP wire live,
//! `acp-scenario-from-transcript` turns the recording into a fake-dsh `acp` scenario, and fake-dsh
//! replaying it under the same client requests shows the same wire shapes; an agent breaking the
//! wire is named in `meta.json` by rule.

use dsh_runtime_check::acp_check::{open, prompt};
use dsh_runtime_check::sdk_check::{drive, request, shapes, Step, Wire, World};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

fn conformance() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_dsh-conformance"))
}

/// initialize, session/new in the world's project, two prompts, EOF.
fn steps(world: &World) -> Vec<Step> {
    let mut steps = open(world);
    steps.extend([
        prompt(3, "Make a landing page"),
        Step::Response(json!(3)),
        prompt(4, "fail please"),
        Step::Response(json!(4)),
        Step::Eof,
    ]);
    steps
}

/// The scripted conversation: a turn that writes a file, then a failed turn.
fn scripted() -> Value {
    json!({"acp": {"turns": [
        {"replies": [{"reasoning": "I will write it.", "tool_calls": [{"name": "write",
            "arguments": {"file_path": "index.html", "content": "<h1>Landing</h1>\n"}}]},
                     {"text": "I wrote index.html."}]},
        {"replies": [{"text": "Trying."}], "fail": "model-server: scripted HTTP 401"}]}})
}

/// `program args` in `world` playing `scenario`, driven through the default steps.
fn run(world: &World, program: &Path, args: &[String], scenario: &Value) -> Wire {
    let file = world.path("scenario.json");
    std::fs::write(&file, scenario.to_string()).unwrap();
    let mut command = world.command(program, args, "http://127.0.0.1:9");
    command.env("FAKE_DSH_SCENARIO", file);
    drive(command, &steps(world), world, LIMIT).unwrap()
}

/// `dsh-conformance record --out <world>/recordings -- AGENT...`: its wire and recording.
fn record(world: &World, agent: &[String], scenario: &Value) -> (Wire, PathBuf) {
    let recordings = world.path("recordings");
    let mut argv = vec!["record".to_string(), "--out".into()];
    argv.push(recordings.to_string_lossy().into_owned());
    argv.push("--".into());
    argv.extend(agent.iter().cloned());
    let wire = run(world, conformance(), &argv, scenario);
    (wire, only_recording(&recordings))
}

/// The one recording `record` made under `recordings`.
fn only_recording(recordings: &Path) -> PathBuf {
    let mut entries = std::fs::read_dir(recordings).unwrap().flatten();
    let recording = entries.next().expect("a recording").path();
    assert!(entries.next().is_none(), "one recording");
    recording
}

fn meta(recording: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(recording.join("meta.json")).unwrap()).unwrap()
}

fn fake_acp() -> Vec<String> {
    let fake = dsh_test_support::binary("fake-dsh");
    vec![
        fake.to_string_lossy().into_owned(),
        "--profile".into(),
        "acp".into(),
    ]
}

#[test]
fn a_recorded_acp_session_is_checked_live_and_replays_to_the_same_wire() {
    let world = World::new().unwrap();
    let (recorded, recording) = record(&world, &fake_acp(), &scripted());
    let meta = meta(&recording);
    assert_eq!(meta["surface"], "acp", "{meta:#}");
    assert_eq!(meta["violations"], json!([]), "{meta:#}");
    assert_eq!(meta["acp"]["requests"], 4, "{meta:#}");
    assert_eq!(meta["acp"]["unanswered"], json!([]), "{meta:#}");
    assert!(meta["acp"]["notifications"].as_u64() > Some(3), "{meta:#}");

    let out = world.path("replay.json");
    let converted = std::process::Command::new(conformance())
        .arg("acp-scenario-from-transcript")
        .arg(&recording)
        .arg("--scenario-file")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&converted.stderr);
    assert!(converted.status.success(), "{stderr}");
    let scenario: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let turns = scenario["acp"]["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2, "{scenario:#}");
    assert_eq!(
        turns[1]["fail"], "model-server: scripted HTTP 401",
        "{scenario:#}"
    );

    let replayed = run(
        &World::new().unwrap(),
        &dsh_test_support::binary("fake-dsh"),
        &fake_acp()[1..],
        &scenario,
    );
    assert_eq!(shapes(&replayed.frames), shapes(&recorded.frames));
}

#[test]
fn an_agent_breaking_the_acp_wire_is_named_by_rule() {
    let world = World::new().unwrap();
    // An "agent" that answers initialize with a frame of the SDK's wire and then asks the client
    // to read a file, which dsh never does.
    let script = world.path("agent.sh");
    std::fs::write(
        &script,
        "read line\n\
         printf '%s\\n' '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"serverInfo\":{\"name\":\"x\"}}}'\n\
         printf '%s\\n' '{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"fs/read_text_file\",\"params\":{}}'\n",
    )
    .unwrap();
    let recordings = world.path("recordings");
    let argv: Vec<String> = ["record", "--surface", "acp", "--out"]
        .into_iter()
        .map(String::from)
        .chain([
            recordings.to_string_lossy().into_owned(),
            "--".into(),
            "/bin/sh".into(),
        ])
        .chain([script.to_string_lossy().into_owned()])
        .collect();
    let command = world.command(conformance(), &argv, "http://127.0.0.1:9");
    let steps = [
        Step::Send(request(
            json!(1),
            "initialize",
            json!({"protocolVersion": 1}),
        )),
        Step::Eof,
    ];
    let wire = drive(command, &steps, &world, LIMIT).unwrap();
    let recording = only_recording(&recordings);
    let meta = meta(&recording);
    let codes: Vec<&Value> = meta["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|violation| &violation["code"])
        .collect();
    assert_eq!(
        codes,
        ["DSH_ACP_BAD_RESULT", "DSH_ACP_UNKNOWN_REQUEST"],
        "{meta:#}"
    );
    assert!(
        wire.stderr.contains("DSH_ACP_UNKNOWN_REQUEST"),
        "{}",
        wire.stderr
    );
}

#[test]
fn a_path_that_is_no_recording_is_refused_by_the_acp_converter() {
    let world = World::new().unwrap();
    let out = std::process::Command::new(conformance())
        .arg("acp-scenario-from-transcript")
        .arg(world.path("no-such-recording"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("acp-scenario-from-transcript")
            && stderr.contains("not a recording directory"),
        "{stderr}"
    );
}
