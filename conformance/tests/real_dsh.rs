//! The real `@deepseek-ai/dsh` (installed by `cargo xtask real-dsh` under `target/real-dsh/`)
//! driven through the model server: its built-in `headless` profile writes a file with a tool call
//! and prints the final text, keylessly; a scripted 401 fails the turn. Skips, saying so, when the
//! real dsh is not installed.

use dsh_conformance::model_server::script::Script;
use dsh_conformance::model_server::{default_script, ModelServer, DEFAULT_HTML};
use serde_json::Value;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs the real dsh's headless profile on `task` in a fresh home and project against `server`,
/// in its own process group, killed with its group after 90 s at most.
fn headless(dsh: &PathBuf, server: &ModelServer, task: &str) -> (Output, tempfile::TempDir) {
    let world = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(world.path().join("home")).unwrap();
    std::fs::create_dir_all(world.path().join("project")).unwrap();
    let child = Command::new(dsh)
        .args(["--profile", "headless", task])
        .current_dir(world.path().join("project"))
        .env("DSH_HOME", world.path().join("home"))
        .env("HOME", world.path())
        .env("DEEPSEEK_BASE_URL", server.url())
        .env("DEEPSEEK_API_KEY", "keyless-canary")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let group = nix::unistd::Pid::from_raw(child.id() as i32);
    let started = Instant::now();
    let waiter = std::thread::spawn(move || child.wait_with_output());
    while !waiter.is_finished() && started.elapsed() < Duration::from_secs(90) {
        std::thread::sleep(Duration::from_millis(50));
    }
    // Whatever is left of the group (a stuck runtime, a grandchild) dies and is reaped.
    nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL).ok();
    (waiter.join().unwrap().unwrap(), world)
}

#[test]
fn headless_profile_writes_a_file_with_a_tool_call_then_prints_the_final_text() {
    let Some(dsh) = fake_dsh::locate::real_dsh() else {
        return;
    };
    let server = ModelServer::start(default_script()).unwrap();
    let (output, world) = headless(&dsh, &server, "Make a landing page");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{:?}: {stderr}", output.status);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "I wrote index.html."
    );
    let written = std::fs::read_to_string(world.path().join("project/index.html")).unwrap();
    assert_eq!(written, DEFAULT_HTML);
    let log = server.requests();
    let turns: Vec<&Value> = log
        .iter()
        .filter(|e| e["body"]["tools"].as_array().is_some_and(|t| !t.is_empty()))
        .collect();
    assert_eq!(
        turns.len(),
        2,
        "a tool-call round and a final round: {log:?}"
    );
    assert!(log.iter().all(|e| e["path"] == "/chat/completions"));
    assert!(log.iter().all(|e| e["authorization"] == true));
    let last = turns[1]["body"]["messages"].as_array().unwrap();
    assert_eq!(last.last().unwrap()["role"], "tool");
    assert!(last.iter().any(|m| m["content"] == "Make a landing page"));
    assert!(!stderr.contains("keyless-canary"));
}

#[test]
fn headless_turn_fails_when_the_endpoint_answers_401() {
    let Some(dsh) = fake_dsh::locate::real_dsh() else {
        return;
    };
    let script = Script::parse(r#"{"replies": [{"status": 401, "reuse": true}]}"#).unwrap();
    let server = ModelServer::start(script).unwrap();
    let (output, world) = headless(&dsh, &server, "Make a landing page");
    assert!(!output.status.success(), "a 401 must fail the turn");
    assert!(!world.path().join("project/index.html").exists());
    assert!(!server.requests().is_empty());
}
