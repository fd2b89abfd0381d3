//! Recording an SDK session and replaying it keylessly: `dsh-conformance record -- RUNTIME`
//! proxies the session, `sdk-scenario-from-transcript` turns the recording into a fake-dsh
//! scenario, and fake-dsh replaying it under the same client requests shows the same wire
//! shapes. Recorded from fake-dsh itself (always) and from the real SDK runtime (skipped, saying
//! so, when `cargo xtask real-dsh --runtime-bin` has not installed it).

use dsh_conformance::sdk_check::{
    drive, initialize, prompt, request, shapes, ModelServer, Step, World,
};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

fn conformance() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_dsh-conformance"))
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

/// Records `runtime args` under the client steps; returns the scenario and the recorded shapes.
fn record(
    runtime: &Path,
    args: &[&str],
    model: Option<Value>,
    fake: Option<Value>,
) -> (Value, Vec<String>) {
    let world = World::new().unwrap();
    let server = ModelServer::start(conformance(), model.as_ref(), world.root.path()).unwrap();
    let recordings = world.path("recordings");
    let mut argv = vec![
        "record".to_string(),
        "--out".into(),
        recordings.to_string_lossy().into_owned(),
        "--".into(),
    ];
    argv.push(runtime.to_string_lossy().into_owned());
    argv.extend(args.iter().map(|a| a.to_string()));
    let mut command = world.command(conformance(), &argv, &server.url);
    if let Some(scenario) = fake {
        let file = world.path("scenario.json");
        std::fs::write(&file, scenario.to_string()).unwrap();
        command.env("FAKE_DSH_SCENARIO", file);
    }
    let wire = drive(command, &steps(), &world, LIMIT).unwrap();
    let recording: PathBuf = std::fs::read_dir(&recordings)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let out = world.path("replay.json");
    let converted = std::process::Command::new(conformance())
        .arg("sdk-scenario-from-transcript")
        .arg(&recording)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        converted.status.success(),
        "{}",
        String::from_utf8_lossy(&converted.stderr)
    );
    let scenario = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    (scenario, shapes(&wire.frames))
}

/// fake-dsh `args` replaying `scenario` under the same client steps.
fn replay(args: &[&str], scenario: &Value) -> Vec<String> {
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
    shapes(&drive(command, &steps(), &world, LIMIT).unwrap().frames)
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
    let Some(target) =
        dsh_test_support::target_profile_dir().and_then(|d| d.parent().map(Path::to_path_buf))
    else {
        return;
    };
    let real = target.join("real-dsh-runtime-bin/dsh");
    if !real.is_file() {
        eprintln!(
            "skipped: the real SDK runtime is not installed at {}",
            real.display()
        );
        return;
    }
    // The default model conversation, then a 401 (used once: a 401 is not retried).
    let model = json!({"replies": [
        {"when": {"user_contains": "fail"}, "status": 401},
        {"when": {"tools": true, "last_role": "user"}, "reasoning": "writing", "text": "",
         "tool_calls": [{"name": "write", "arguments": {"file_path": "index.html", "content": "<html></html>"}}]},
        {"when": {"last_role": "tool"}, "text": "I wrote index.html."}]});
    let (scenario, recorded) = record(&real, &["--profile", "sdk"], Some(model), None);
    assert_eq!(
        replay(&["--profile", "sdk"], &scenario),
        recorded,
        "scenario: {scenario:#}"
    );
}
