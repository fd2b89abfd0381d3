//! `--profile multica`: Multica's probe and ready identity (runtime `dsh`), its `--list-models`
//! catalog, `output` and `acceptance` on the result, `progress` frames, the session root
//! (`MULTICA_DSH_SESSION_ROOT`) that moves only session persistence, `plugin --profile multica
//! add`, and the `{{runtime_id}}` / `{{profile}}` templates that let one raw scenario play on
//! either profile. The facts are Multica's (`server/pkg/agent/dsh.go` and its tests).

use crate::support;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use support::{code, stdout_frames, World};

/// An `execute` as Multica's daemon writes it: a task id, no `resume_session_id` when empty,
/// `mcp_servers` always present.
fn execute(world: &World, request_id: &str, resume: Option<&str>) -> Value {
    let mut execute = json!({
        "v": 1, "type": "execute", "request_id": request_id,
        "cwd": world.project().to_string_lossy(), "prompt": "A landing page",
        "model": {"provider": "deepseek-official", "id": "deepseek-chat"},
        "mcp_servers": []
    });
    if let Some(resume) = resume {
        execute["resume_session_id"] = json!(resume);
    }
    execute
}

/// One `--stdio` process of `profile` fed one execute (stdin then closes), with `env` set: its
/// exit code, its frames, its stderr.
fn turn(
    world: &World,
    profile: &str,
    execute: &Value,
    env: &[(&str, &Path)],
) -> (i32, Vec<Value>, String) {
    let mut command = world.cmd(&["--profile", profile, "--stdio"]);
    command.env_remove("MULTICA_DSH_SESSION_ROOT");
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command
        .write_stdin(format!("{execute}\n"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (code(output.status), stdout_frames(&output.stdout), stderr)
}

fn of_type<'a>(frames: &'a [Value], frame_type: &str) -> Vec<&'a Value> {
    frames
        .iter()
        .filter(|frame| frame["type"] == frame_type)
        .collect()
}

fn only<'a>(frames: &'a [Value], frame_type: &str) -> &'a Value {
    let found = of_type(frames, frame_type);
    assert_eq!(found.len(), 1, "one {frame_type} frame in {frames:#?}");
    found[0]
}

/// Multica's probe acceptance (agents_probe.go probeDshMulticaProfile): a line decoding to
/// `v == 1`, `type == "probe"`, `runtime == "dsh"`, `protocol_version == 1`.
fn multica_accepts_probe(frame: &Value) -> bool {
    frame["v"] == 1
        && frame["type"] == "probe"
        && frame["runtime"] == "dsh"
        && frame["protocol_version"] == 1
}

#[test]
fn probe_and_ready_carry_multica_s_identity() {
    let world = World::with_profile("multica");
    let output = world
        .cmd(&["--profile", "multica", "--probe"])
        .output()
        .unwrap();
    assert_eq!(code(output.status), 0);
    let probes = stdout_frames(&output.stdout);
    assert_eq!(probes.len(), 1, "{probes:?}");
    let probe = &probes[0];
    assert!(multica_accepts_probe(probe), "{probe}");
    assert!(probe["plugin_version"].is_string());
    assert!(probe.get("compatibility_generation").is_none());
    let capabilities = &probe["capabilities"];
    for flag in ["resume", "cancel", "progress", "acceptance"] {
        assert_eq!(capabilities[flag], true, "{flag} in {capabilities}");
    }
    for unused in ["issue_id", "task_contract"] {
        assert_eq!(capabilities[unused], false, "{unused} in {capabilities}");
    }

    let mut dsh = world.spawn(&["--profile", "multica", "--stdio"], |_| {});
    let ready = dsh.next_frame();
    assert_eq!(ready["v"], 1);
    assert_eq!(ready["type"], "ready");
    assert_eq!(ready["runtime"], "dsh");
    assert_eq!(ready["capabilities"], *capabilities);
    dsh.close_stdin();
    assert_eq!(code(dsh.wait()), 0, "stdin closed before any execute");

    world
        .cmd(&["--profile", "open-design", "--probe"])
        .assert()
        .code(1)
        .stdout("");
}

#[test]
fn list_models_prints_multica_s_catalog_shape() {
    let world = World::with_profile("multica");
    let output = world
        .cmd(&["--profile", "multica", "--list-models"])
        .output()
        .unwrap();
    assert_eq!(code(output.status), 0);
    let frames = stdout_frames(&output.stdout);
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0]["v"], 1);
    assert_eq!(frames[0]["type"], "models");
    let models = frames[0]["models"].as_array().expect("a models array");
    assert!(!models.is_empty());
    let defaults = models
        .iter()
        .filter(|model| model["default"] == true)
        .count();
    assert_eq!(defaults, 1, "{models:#?}");
    for model in models {
        let id = model["id"].as_str().unwrap();
        let (provider, name) = id.split_once('/').expect("a provider/model id");
        assert!(!provider.is_empty() && !name.is_empty(), "{id}");
        assert!(model["label"].is_string() && model["provider"].is_string());
        assert!(model["default"].is_boolean());
        let levels = model["thinking"]["supported_levels"].as_array().unwrap();
        assert!(!levels.is_empty(), "{model}");
        let values: Vec<&str> = levels
            .iter()
            .map(|level| {
                assert!(level["label"].is_string(), "{level}");
                level["value"].as_str().unwrap()
            })
            .collect();
        let default_level = model["thinking"]["default_level"].as_str().unwrap();
        assert!(values.contains(&default_level), "{model}");
    }

    world
        .cmd(&["--profile", "multica", "--models"])
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicates::str::contains("--models"));
}

#[test]
fn a_default_turn_ends_with_output_and_acceptance() {
    let world = World::with_profile("multica");
    let (exit, frames, _) = turn(&world, "multica", &execute(&world, "task-1", None), &[]);
    assert_eq!(exit, 0);
    assert_eq!(only(&frames, "ready")["runtime"], "dsh");
    let session = only(&frames, "session");
    let result = only(&frames, "result");
    assert_eq!(frames.last(), Some(result), "the result is the last frame");
    assert_eq!(result["status"], "completed");
    assert_eq!(result["request_id"], "task-1");
    assert_eq!(result["session_id"], session["session_id"]);
    let output = result["output"].as_str().expect("a string output");
    assert!(output.contains("index.html"), "{output}");
    let acceptance = &result["acceptance"];
    assert_eq!(acceptance["passed"], true, "{acceptance}");
    let checks = acceptance["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 1);
    assert_eq!(checks[0]["passed"], true);
    assert_eq!(checks[0]["exit_code"], 0);
    assert!(checks[0]["command"].is_string() && checks[0]["truncated"] == false);
    let html = std::fs::read(world.project().join("index.html")).unwrap();
    assert!(!html.is_empty());
    let usage = only(&frames, "usage");
    assert_eq!(
        (&usage["provider"], &usage["model"]),
        (&json!("deepseek-official"), &json!("deepseek-chat"))
    );
}

#[test]
fn progress_frames_belong_to_the_multica_profile_only() {
    let world = World::with_profile("multica");
    let (_, frames, _) = turn(&world, "multica", &execute(&world, "task-1", None), &[]);
    let progress = of_type(&frames, "progress");
    let phases: Vec<&str> = progress
        .iter()
        .map(|frame| {
            assert_eq!(frame["request_id"], "task-1");
            assert!(frame["message"].is_string(), "{frame}");
            assert!(frame["data"].is_object(), "{frame}");
            frame["phase"].as_str().unwrap()
        })
        .collect();
    assert_eq!(phases, ["planning", "verifying"]);
    let position = |frame: &Value| frames.iter().position(|each| each == frame).unwrap();
    let session_at = position(only(&frames, "session"));
    let result_at = position(only(&frames, "result"));
    for frame in progress {
        assert!((session_at..result_at).contains(&position(frame)));
    }

    let open_design = World::new();
    let command = execute(&open_design, "r1", None);
    let (exit, frames, _) = turn(&open_design, "open-design", &command, &[]);
    assert_eq!(exit, 0);
    assert!(of_type(&frames, "progress").is_empty(), "{frames:#?}");
    let result = only(&frames, "result");
    assert_eq!(result["status"], "completed");
    assert!(result.get("acceptance").is_none(), "{result}");
}

/// Multica's root for one runtime and agent (daemon.go prepareDshTaskSessionRoot).
/// A patched `models` answer with diagnostics: the noise on stderr, the patch's gen-1 items in
/// each profile's own item shape on stdout (so `models.stderr-noise` plays on both profiles).
#[test]
fn a_patched_models_answer_writes_its_stderr_and_fits_each_profile() {
    let patch = json!({"models": {
        "patch": {"models": [{"provider": "p", "id": "m", "name": "M",
                              "reasoning_options": [{"id": "high", "name": "High", "default": true}]}]},
        "stderr": "warn: telemetry disabled\n"
    }});
    for (profile, flag, id) in [
        ("open-design", "--models", "m"),
        ("multica", "--list-models", "p/m"),
    ] {
        let world = World::with_profile(profile);
        world.scenario(patch.clone());
        let output = world.cmd(&["--profile", profile, flag]).output().unwrap();
        assert_eq!(code(output.status), 0, "{profile}");
        assert_eq!(output.stderr, b"warn: telemetry disabled\n", "{profile}");
        let frames = stdout_frames(&output.stdout);
        assert_eq!(frames[0]["models"][0]["id"], id, "{profile}: {frames:?}");
    }
}

fn session_root(world: &World) -> PathBuf {
    world.root.path().join("multica/dsh-sessions/dsh/agent-1")
}

#[test]
fn the_session_root_moves_only_session_persistence() {
    let world = World::with_profile("multica");
    let root = session_root(&world);
    let env = [("MULTICA_DSH_SESSION_ROOT", root.as_path())];
    let (exit, frames, _) = turn(&world, "multica", &execute(&world, "task-1", None), &env);
    assert_eq!(exit, 0);
    let session_id = only(&frames, "session")["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(root.join(format!("{session_id}.json")).is_file());
    assert!(
        !world.home().join("sessions").exists(),
        "nothing stored in DSH_HOME"
    );

    let resume = execute(&world, "task-2", Some(&session_id));
    let (exit, frames, _) = turn(&world, "multica", &resume, &env);
    assert_eq!(exit, 0);
    let session = only(&frames, "session");
    assert_eq!(session["session_id"], session_id.as_str());
    assert_eq!(session["resumed"], true);
    assert_eq!(only(&frames, "tool_call")["name"], "edit_file");
    assert_eq!(only(&frames, "result")["status"], "completed");

    let (_, frames, _) = turn(&world, "multica", &resume, &[]);
    let result = only(&frames, "result");
    assert_eq!(result["status"], "failed", "the home holds no such session");
    assert_eq!(result["resume_rejected"], true);

    let open_design = World::new();
    let elsewhere = open_design.root.path().join("unused-root");
    let env = [("MULTICA_DSH_SESSION_ROOT", elsewhere.as_path())];
    let command = execute(&open_design, "r1", None);
    let (exit, frames, _) = turn(&open_design, "open-design", &command, &env);
    assert_eq!(exit, 0);
    let session_id = only(&frames, "session")["session_id"].as_str().unwrap();
    let record = open_design
        .home()
        .join(format!("sessions/{session_id}.json"));
    assert!(record.is_file(), "open-design keeps sessions in DSH_HOME");
    assert!(!elsewhere.exists());
}

#[test]
fn a_session_root_fake_dsh_did_not_make_is_refused() {
    let world = World::with_profile("multica");
    let root = session_root(&world);
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("history.jsonl"), b"{}\n").unwrap();
    let env = [("MULTICA_DSH_SESSION_ROOT", root.as_path())];
    let (exit, frames, stderr) = turn(&world, "multica", &execute(&world, "t", None), &env);
    assert_eq!(exit, 2, "fake-dsh could not run");
    assert!(frames.is_empty(), "{frames:?}");
    assert!(stderr.contains("history.jsonl"), "{stderr}");
    assert!(stderr.contains(&root.display().to_string()), "{stderr}");
    let entries: Vec<_> = std::fs::read_dir(&root).unwrap().flatten().collect();
    assert_eq!(entries.len(), 1, "nothing written into the root");

    let env = [("MULTICA_DSH_SESSION_ROOT", Path::new("relative/root"))];
    let (exit, frames, stderr) = turn(&world, "multica", &execute(&world, "t", None), &env);
    assert_eq!(exit, 2);
    assert!(frames.is_empty());
    assert!(stderr.contains("MULTICA_DSH_SESSION_ROOT"), "{stderr}");
}

#[test]
fn plugin_add_installs_the_multica_profile() {
    let world = World::without_profile();
    let tarball = world.root.path().join("dsh-multica-runtime.tgz");
    std::fs::write(&tarball, b"a bundle").unwrap();
    let tarball_arg = tarball.to_string_lossy().into_owned();
    world
        .cmd(&["plugin", "--profile", "multica", "add", &tarball_arg])
        .assert()
        .success()
        .stdout("Installed dsh-multica-runtime@0.1.0 into profile multica\n");
    let manifest = support::read_json(&world.home().join("profiles/multica/package.json"));
    assert_eq!(manifest["name"], "dsh-multica-runtime");
    assert_eq!(manifest["profile"], "multica");
    assert_eq!(manifest["sha256"].as_str().map(str::len), Some(64));
    let output = world
        .cmd(&["--profile", "multica", "--probe"])
        .output()
        .unwrap();
    assert_eq!(code(output.status), 0);
    assert!(multica_accepts_probe(&stdout_frames(&output.stdout)[0]));
    world
        .cmd(&["--profile", "open-design", "--probe"])
        .assert()
        .code(1);

    let fresh = World::without_profile();
    let missing = fresh.root.path().join("missing.tgz");
    fresh
        .cmd(&[
            "plugin",
            "--profile",
            "multica",
            "add",
            &missing.to_string_lossy(),
        ])
        .assert()
        .code(254);
    assert!(!fresh.home().join("profiles/multica").exists());
}

/// A scenario whose raw bytes hold the runtime id as a template.
fn templated_scenario() -> Value {
    json!({
        "probe": {"stdout": "{\"v\":1,\"type\":\"probe\",\"runtime\":\"{{runtime_id}}\",\"protocol_version\":1}\n"},
        "stdio_default": [
            {"raw": "{\"v\":1,\"type\":\"ready\",\"runtime\":\"{{runtime_id}}\",\"x_profile\":\"{{profile}}\"}\n"},
            {"read_execute": {}},
            {"session": {}},
            {"result": {"output": "done on {{runtime_id}} for {{request_id}}"}}
        ]
    })
}

#[test]
fn raw_lines_and_answers_template_the_runtime_id() {
    for (profile, runtime) in [("multica", "dsh"), ("open-design", "open-design")] {
        let world = World::with_profile(profile);
        world.scenario(templated_scenario());
        let output = world
            .cmd(&["--profile", profile, "--probe"])
            .output()
            .unwrap();
        assert_eq!(code(output.status), 0);
        assert_eq!(stdout_frames(&output.stdout)[0]["runtime"], runtime);
        let (exit, frames, _) = turn(&world, profile, &execute(&world, "t1", None), &[]);
        assert_eq!(exit, 0);
        let ready = only(&frames, "ready");
        assert_eq!(ready["runtime"], runtime);
        assert_eq!(ready["x_profile"], profile);
        let result = only(&frames, "result");
        assert_eq!(result["output"], format!("done on {runtime} for t1"));
    }
}

#[test]
fn a_scripted_scenario_plays_on_multica_as_on_open_design() {
    let world = World::with_profile("multica");
    world.scenario(json!({"stdio_default": [
        {"ready": {}},
        {"on_execute": {
            "new": [{"session": {}}, {"text": "new"}, {"result": {"output": "a comment"}}],
            "resume": [{"session": {}}, {"text": "resumed"}, {"result": {}}],
            "unknown_resume": [
                {"result": {"status": "failed", "resume_rejected": true,
                    "error": {"code": "SESSION_NOT_FOUND", "message": "no {{resume_session_id}}"}}},
                {"exit": 0}
            ]
        }}
    ]}));
    let root = session_root(&world);
    let env = [("MULTICA_DSH_SESSION_ROOT", root.as_path())];
    let (_, frames, _) = turn(&world, "multica", &execute(&world, "t1", None), &env);
    assert_eq!(only(&frames, "ready")["runtime"], "dsh");
    assert_eq!(only(&frames, "text")["content"], "new");
    assert_eq!(only(&frames, "result")["output"], "a comment");
    let session_id = only(&frames, "session")["session_id"].as_str().unwrap();
    assert!(root.join(format!("{session_id}.json")).is_file());

    let resume = execute(&world, "t2", Some(session_id));
    let (_, frames, _) = turn(&world, "multica", &resume, &env);
    assert_eq!(only(&frames, "text")["content"], "resumed");
    assert_eq!(only(&frames, "session")["resumed"], true);

    let unknown = execute(&world, "t3", Some("od-unknown"));
    let (exit, frames, _) = turn(&world, "multica", &unknown, &env);
    assert_eq!(exit, 0);
    let result = only(&frames, "result");
    assert_eq!(result["resume_rejected"], true);
    assert_eq!(result["error"]["message"], "no od-unknown");
}

#[test]
fn a_cancel_ends_the_turn_and_the_process_with_stdin_still_open() {
    let world = World::with_profile("multica");
    world.scenario(json!({"agent": {"step_delay_ms": 1000}}));
    let root = session_root(&world);
    let env_root = root.clone();
    let mut dsh = world.spawn(&["--profile", "multica", "--stdio"], move |command| {
        command.env("MULTICA_DSH_SESSION_ROOT", &env_root);
    });
    assert_eq!(dsh.next_frame()["runtime"], "dsh");
    dsh.send(&execute(&world, "task-1", None));
    let session = dsh.next_frame();
    assert_eq!(session["type"], "session");
    dsh.send(&json!({"v": 1, "type": "cancel", "request_id": "task-1"}));
    let frames = dsh.rest();
    let result = only(&frames, "result");
    assert_eq!(result["status"], "cancelled");
    assert_eq!(result["session_id"], session["session_id"]);
    assert!(result.get("acceptance").is_none(), "{result}");
    assert_eq!(
        code(dsh.wait()),
        0,
        "it exits on its own: Multica never closes stdin"
    );
    let session_id = session["session_id"].as_str().unwrap();
    let record = support::read_json(&root.join(format!("{session_id}.json")));
    assert_eq!(record["turns"][0]["status"], "cancelled");
}
