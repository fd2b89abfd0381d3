//! Recording an SDK session and replaying it keylessly: `dsh-conformance record -- RUNTIME`
//! proxies the session, `sdk-scenario-from-transcript` turns the recording into a fake-dsh
//! scenario, and fake-dsh replaying it under the same client requests shows the same wire
//! shapes. Recorded from fake-dsh itself (always) and from the real SDK runtime (skipped, saying
//! so, when `cargo xtask real-dsh --runtime-bin` has not installed it).

use dsh_runtime_check::sdk_check::{
    drive, initialize, prompt, request, shapes, ModelServer, Step, World,
};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// The kit's binary, whose `record` runs the proxy as its own process.
fn conformance() -> PathBuf {
    dsh_test_support::binary("dsh-conformance")
}

/// The real SDK runtime's wrapper `name`, or `None` (saying so) when it is not installed.
fn real_runtime(name: &str) -> Option<PathBuf> {
    dsh_test_support::real_runtime_bin(name)
}

fn steps() -> Vec<Step> {
    vec![
        Step::Send(initialize()),
        Step::Response(json!(1)),
        Step::Send(prompt(2, "s-1", "Make a landing page")),
        Step::Idle("s-1"),
        Step::Send(prompt(3, "s-1", "fail please")),
        Step::Idle("s-1"),
        Step::Send(request(json!(4), "shutdown", json!({}))),
    ]
}

/// One recorded session: its world (kept alive), recording directory and wire.
struct Recorded {
    world: World,
    recording: PathBuf,
    wire: dsh_runtime_check::sdk_check::Wire,
}

/// How to record: the runtime, its arguments, `record`'s own flags, the model script and
/// fake-dsh's scenario.
struct Session<'a> {
    runtime: PathBuf,
    args: &'a [&'a str],
    record_flags: &'a [&'a str],
    model: Option<Value>,
    fake: Option<Value>,
    /// The runtime's API key (default: the world's short dummy).
    key: Option<&'a str>,
}

impl<'a> Session<'a> {
    /// fake-dsh `--profile sdk` playing `scenario`, recorded with `record_flags`.
    fn fake_sdk(record_flags: &'a [&'a str], scenario: Option<Value>) -> Session<'a> {
        Session {
            runtime: dsh_test_support::binary("fake-dsh"),
            args: &["--profile", "sdk"],
            record_flags,
            model: None,
            fake: scenario,
            key: None,
        }
    }

    /// Records the session under the client `steps`.
    fn record(self, steps: &[Step]) -> Recorded {
        let world = World::new().unwrap();
        let server =
            ModelServer::start(&conformance(), self.model.as_ref(), world.root.path()).unwrap();
        let recordings = world.path("recordings");
        let mut argv = vec!["record".to_string(), "--out".into()];
        argv.push(recordings.to_string_lossy().into_owned());
        argv.extend(self.record_flags.iter().map(|a| a.to_string()));
        argv.push("--".into());
        argv.push(self.runtime.to_string_lossy().into_owned());
        argv.extend(self.args.iter().map(|a| a.to_string()));
        let mut command = world.command(&conformance(), &argv, &server.url);
        if let Some(key) = self.key {
            command.env("DEEPSEEK_API_KEY", key);
        }
        if let Some(scenario) = self.fake {
            let file = world.path("scenario.json");
            std::fs::write(&file, scenario.to_string()).unwrap();
            command.env("FAKE_DSH_SCENARIO", file);
        }
        let wire = drive(command, steps, &world, LIMIT).unwrap();
        let recording = std::fs::read_dir(&recordings)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        Recorded {
            world,
            recording,
            wire,
        }
    }
}

impl Recorded {
    fn meta(&self) -> Value {
        let text = std::fs::read_to_string(self.recording.join("meta.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    /// The live check's complaints on stderr (`dsh-conformance record: line N: CODE: ...`).
    fn complaints(&self) -> Vec<&str> {
        let stderr = self.wire.stderr.lines();
        stderr
            .filter(|line| line.starts_with("dsh-conformance record: line"))
            .collect()
    }

    /// Asserts the live check found nothing and held the stream to the SDK wire.
    fn assert_clean_sdk(&self) {
        let meta = self.meta();
        assert_eq!(meta["surface"], "sdk", "{meta:#}");
        assert_eq!(meta["violations"], json!([]), "{meta:#}");
        assert!(self.complaints().is_empty(), "{}", self.wire.stderr);
        assert!(meta["sdk"]["notifications"].as_u64() > Some(0), "{meta:#}");
    }

    /// `sdk-scenario-from-transcript` on the recording.
    fn scenario(&self) -> Value {
        let out = self.world.path("replay.json");
        let converted = std::process::Command::new(conformance())
            .arg("sdk-scenario-from-transcript")
            .arg(&self.recording)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            converted.status.success(),
            "{}",
            String::from_utf8_lossy(&converted.stderr)
        );
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap()
    }

    fn shapes(&self) -> Vec<String> {
        shapes(&self.wire.frames)
    }
}

/// Records `runtime args` under the default client steps; returns the scenario and the recorded
/// shapes, after checking that the live check held it to the SDK wire without a complaint.
fn record(
    runtime: &Path,
    args: &[&str],
    model: Option<Value>,
    fake: Option<Value>,
) -> (Value, Vec<String>) {
    let session = Session {
        runtime: runtime.to_path_buf(),
        args,
        record_flags: &[],
        model,
        fake,
        key: None,
    };
    let recorded = session.record(&steps());
    recorded.assert_clean_sdk();
    (recorded.scenario(), recorded.shapes())
}

/// fake-dsh `args` replaying `scenario` under the default client steps.
fn replay(args: &[&str], scenario: &Value) -> Vec<String> {
    replay_with(args, scenario, &steps())
}

/// fake-dsh `args` replaying `scenario` under the client `steps`.
fn replay_with(args: &[&str], scenario: &Value, steps: &[Step]) -> Vec<String> {
    let world = World::new().unwrap();
    let file = world.path("scenario.json");
    std::fs::write(&file, scenario.to_string()).unwrap();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let mut command = world.command(
        &dsh_test_support::binary("fake-dsh"),
        &args,
        "http://127.0.0.1:9",
    );
    command.env("FAKE_DSH_SCENARIO", file);
    shapes(&drive(command, steps, &world, LIMIT).unwrap().frames)
}

#[test]
fn a_recorded_fake_dsh_session_replays_to_the_same_wire() {
    let scripted = json!({"sdk": {"turns": [
        {"steps": [{"reasoning": "r", "tool_calls": [{"name": "write", "arguments": {"file_path": "a.txt", "content": "a"}}]},
                   {"text": "wrote a.txt"}]},
        {"end": "error", "error": {"code": "AUTH", "message": "401", "status": 401}}]}});
    let fake = dsh_test_support::binary("fake-dsh");
    let (scenario, recorded) = record(&fake, &["--profile", "sdk"], None, Some(scripted.clone()));
    assert_eq!(
        scenario["sdk"]["turns"][0]["steps"][1]["text"],
        "wrote a.txt"
    );
    assert_eq!(scenario["sdk"]["turns"][1]["end"], "error");
    assert_eq!(replay(&["--profile", "sdk"], &scenario), recorded);
}

#[test]
fn a_recorded_real_runtime_session_replays_keylessly_to_the_same_wire() {
    let Some(real) = real_runtime("dsh") else {
        return;
    };
    // The default model conversation, then a 401 (used once: a 401 is not retried).
    let model = json!({"replies": [
        {"when": {"user_contains": "fail"}, "status": 401},
        {"when": {"tools": true, "last_role": "user"}, "reasoning": "writing", "text": "",
         "tool_calls": [{"name": "write", "arguments": {"file_path": "index.html", "content": "<html></html>"}}]},
        {"when": {"last_role": "tool"}, "text": "I wrote index.html."}]});
    let (scenario, recorded) = record(&real, &["--profile", "sdk"], Some(model), None);
    // The recording is of the real 0.1.5 `dsh`: fake-dsh replays it as that release.
    assert_eq!(
        replay(&["--persona", "0.1.5", "--profile", "sdk"], &scenario),
        recorded,
        "scenario: {scenario:#}"
    );
}

#[test]
fn the_real_jsonrpc_agent_is_recorded_as_the_sdk_wire_from_its_name() {
    let Some(real) = real_runtime("dsh-jsonrpc-agent") else {
        return;
    };
    let session = Session {
        runtime: real,
        args: &[],
        record_flags: &[],
        model: None,
        fake: None,
        key: None,
    };
    let recorded = session.record(&steps());
    recorded.assert_clean_sdk();
    assert_eq!(recorded.meta()["sdk"]["unanswered"], json!([]));
}

#[test]
fn a_malformed_sdk_frame_is_named_on_stderr_and_in_meta() {
    // Junk after `initialize`'s response: a line that is not JSON, and a notification the SDK
    // wire does not have.
    let noise = json!({"sdk": {"stdout_noise": [
        "not a frame",
        "{\"jsonrpc\":\"2.0\",\"method\":\"session.update\",\"params\":{}}"]}});
    let session = Session::fake_sdk(&[], Some(noise));
    let recorded = session.record(&steps());
    let complaints = recorded.complaints();
    assert_eq!(complaints.len(), 2, "{}", recorded.wire.stderr);
    assert!(
        complaints[0]
            .starts_with("dsh-conformance record: line 2: DSH_SDK_INVALID_FRAME: not JSON"),
        "{complaints:?}"
    );
    assert!(
        complaints[1].starts_with("dsh-conformance record: line 3: DSH_SDK_UNKNOWN_NOTIFICATION"),
        "{complaints:?}"
    );
    let codes: Vec<Value> = recorded.meta()["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|violation| json!([violation["line"], violation["code"]]))
        .collect();
    assert_eq!(
        codes,
        [
            json!([2, "DSH_SDK_INVALID_FRAME"]),
            json!([3, "DSH_SDK_UNKNOWN_NOTIFICATION"])
        ]
    );
    // An SDK recording is no open-design case: the converter says which command to use.
    let refused = std::process::Command::new(conformance())
        .arg("fixture-from-transcript")
        .arg(&recorded.recording)
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("sdk-scenario-from-transcript"), "{stderr}");
}

#[test]
fn an_explicit_surface_overrides_the_one_the_command_names() {
    let session = Session::fake_sdk(&["--surface", "open-design"], None);
    let recorded = session.record(&[
        Step::Send(initialize()),
        Step::Response(json!(1)),
        Step::Eof,
    ]);
    assert_eq!(recorded.meta()["surface"], "open-design");
    let complaints = recorded.complaints();
    assert!(
        complaints
            .first()
            .is_some_and(|line| line.contains("DSH_PROFILE_INVALID_FRAME")),
        "{}",
        recorded.wire.stderr
    );
}

#[test]
fn a_background_child_recorded_from_fake_dsh_replays_to_the_same_wire() {
    let scripted = json!({"sdk": {"turns": [
        {"steps": [{"text": "I started a background task."}],
         "background_subagent": {"finish_after_ms": 200, "text": "The child's answer.",
                                 "wake_text": "The child finished: all good."}},
        {"steps": [{"reasoning": "r", "text": "second"}]}]}});
    let client = [
        Step::Send(initialize()),
        Step::Response(json!(1)),
        Step::Send(prompt(2, "s-1", "Start a background task")),
        Step::Idle("s-1"),
        // The root's wake-up after its child finished.
        Step::Idle("s-1"),
        Step::Send(prompt(3, "s-1", "And now?")),
        Step::Idle("s-1"),
        Step::Send(request(json!(4), "shutdown", json!({}))),
    ];
    let session = Session::fake_sdk(&[], Some(scripted));
    let recorded = session.record(&client);
    recorded.assert_clean_sdk();
    let recorded_shapes = recorded.shapes();
    assert!(
        recorded_shapes.contains(&"notify subagent.finished".to_string()),
        "{recorded_shapes:#?}"
    );
    let scenario = recorded.scenario();
    let turns = &scenario["sdk"]["turns"];
    assert_eq!(turns.as_array().map(Vec::len), Some(2), "{scenario:#}");
    let background = &turns[0]["background_subagent"];
    assert_eq!(background["text"], "The child's answer.", "{scenario:#}");
    assert_eq!(background["wake_text"], "The child finished: all good.");
    assert_eq!(turns[1]["steps"][0]["text"], "second");
    assert_eq!(
        replay_with(&["--profile", "sdk"], &scenario, &client),
        recorded_shapes,
        "scenario: {scenario:#}"
    );
}

#[test]
fn a_headless_run_is_recorded_unchecked() {
    let session = Session {
        runtime: dsh_test_support::binary("fake-dsh"),
        args: &["--profile", "headless", "Make a landing page"],
        record_flags: &[],
        model: None,
        fake: None,
        key: None,
    };
    let recorded = session.record(&[Step::Eof]);
    assert_eq!(recorded.wire.exit, Some(0), "{}", recorded.wire.stderr);
    let meta = recorded.meta();
    assert_eq!(meta["surface"], "headless");
    assert_eq!(meta["violations"], json!([]), "{meta:#}");
    assert!(recorded.complaints().is_empty(), "{}", recorded.wire.stderr);
    let stdout = std::fs::read_to_string(recorded.recording.join("stdout.jsonl")).unwrap();
    assert_eq!(stdout, "I wrote index.html.\n");
}

/// A key in the runtime's environment, echoed by the runtime into a frame, stays out of the
/// recording's `meta.json` and out of the scenario made from it (the raw `stdout.jsonl` and
/// `stdin.jsonl` are exact bytes by design, in a 0700 directory: docs/runtime-checks.md).
#[test]
fn an_sdk_recordings_meta_and_its_scenario_never_hold_the_key() {
    use std::os::unix::fs::PermissionsExt;
    const KEY: &str = "sk-sdkCanary0123456789abcdefghij";
    let echo = json!({"sdk": {"turns": [{"steps": [{"text": format!("your key is {KEY}")}]}]}});
    let mut session = Session::fake_sdk(&[], Some(echo));
    session.key = Some(KEY);
    let recorded = session.record(&steps());
    recorded.assert_clean_sdk();
    assert!(!recorded.meta().to_string().contains(KEY));
    let mode = std::fs::metadata(&recorded.recording)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
    let scenario = recorded.scenario().to_string();
    assert!(
        !scenario.contains(KEY) && scenario.contains("your key is"),
        "{scenario}"
    );
}

/// `sdk-scenario-from-transcript RECORDING --out OUT` with no credential in its environment.
fn convert(recording: &Path, out: &Path) -> std::process::Output {
    let mut command = std::process::Command::new(conformance());
    command
        .arg("sdk-scenario-from-transcript")
        .arg(recording)
        .arg("--out")
        .arg(out);
    for (name, _) in std::env::vars_os() {
        if dsh_results::redact::is_credential_name(&name.to_string_lossy()) {
            command.env_remove(name);
        }
    }
    command.output().unwrap()
}

/// A key the converter does not know (it is in no environment of its) still stays out of the
/// scenario when the runtime wrote it split across two steps of a turn, or in base64: the same
/// redaction `fixture-from-transcript` applies (token shapes, raw and encoded, and across the
/// pieces of one stream).
#[test]
fn a_key_split_across_two_steps_or_in_base64_never_reaches_the_scenario() {
    const KEY: &str = "sk-sdkSplitCanary0123456789abcdefgh";
    let (head, tail) = KEY.split_at(15);
    let encoded = dsh_protocol::needles::base64(format!("Bearer {KEY}").as_bytes());
    let echo = json!({"sdk": {"turns": [
        {"steps": [{"text": format!("the key is {head}")}, {"text": format!("{tail}, split")}]},
        {"steps": [{"text": format!("encoded: {encoded} done")}]}
    ]}});
    let recorded = Session::fake_sdk(&[], Some(echo)).record(&steps());
    recorded.assert_clean_sdk();
    let out = recorded.world.path("redacted.json");
    let converted = convert(&recorded.recording, &out);
    assert!(
        converted.status.success(),
        "{}",
        String::from_utf8_lossy(&converted.stderr)
    );
    let scenario: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let texts: Vec<&str> = scenario["sdk"]["turns"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|turn| turn["steps"].as_array().unwrap())
        .filter_map(|step| step["text"].as_str())
        .collect();
    assert_eq!(texts.len(), 3, "{scenario:#}");
    assert!(texts[0].starts_with("the key is [redacted]"), "{texts:?}");
    assert_eq!(texts[1], ", split", "{texts:?}");
    assert!(
        texts[2].starts_with("encoded: ") && texts[2].contains("[redacted]"),
        "{texts:?}"
    );
    let text = scenario.to_string();
    for kept in [KEY, head, tail, &encoded[4..encoded.len() - 4]] {
        assert!(!text.contains(kept), "{kept:?} in {scenario:#}");
    }
    assert!(
        dsh_results::redact::token_shapes_in_base64(&text).is_empty(),
        "{scenario:#}"
    );
}

/// `sdk-scenario-from-transcript` never writes `--out` through a link (planted or dangling) and
/// reads the recording bounded, as `fixture-from-transcript` does: a stdout.jsonl over the bound
/// or not a regular file is refused unread, exit 2, naming it; nothing is written.
#[test]
fn sdk_scenario_from_transcript_refuses_a_linked_out_and_an_unbounded_recording() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("recording");
    std::fs::create_dir(&recording).unwrap();
    let stdout = recording.join("stdout.jsonl");
    std::fs::write(&stdout, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n").unwrap();

    let victim = dir.path().join("victim");
    std::fs::write(&victim, "untouched").unwrap();
    let linked = dir.path().join("linked.json");
    symlink(&victim, &linked).unwrap();
    let dangling = dir.path().join("dangling.json");
    let nowhere = dir.path().join("would-be-created");
    symlink(&nowhere, &dangling).unwrap();
    for out in [&linked, &dangling] {
        let output = convert(&recording, out);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("is a symbolic link"), "{stderr}");
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
    assert!(!nowhere.exists());
    let out = dir.path().join("scenario.json");
    assert!(
        convert(&recording, &out).status.success(),
        "a regular --out"
    );

    let out = dir.path().join("never.json");
    std::fs::File::create(&stdout)
        .unwrap()
        .set_len(dsh_record::fixture::MAX_RECORDING_FILE_BYTES + 1)
        .unwrap();
    let output = convert(&recording, &out);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("stdout.jsonl") && stderr.contains("more than the 67108864 bytes"),
        "{stderr}"
    );
    std::fs::remove_file(&stdout).unwrap();
    std::fs::create_dir(&stdout).unwrap();
    let output = convert(&recording, &out);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("not a regular file"), "{stderr}");
    assert!(!out.exists(), "nothing written");
}
