//! The real dsh 0.2.1 (the PyPI wheel `deepseek-harness-runtime-bin` 0.2.1rc2, installed by
//! `cargo xtask real-dsh --runtime-bin` as `target/real-dsh-runtime-bin/dsh-0.2.1`) driven through
//! the model server's Messages route, keylessly, with nothing leaving loopback or the test's temp
//! dir (`HOME`, `TMPDIR` and `DSH_HOME` inside it): its headless profile finishes a text turn,
//! a turn that writes a file with a tool call, and a turn the model stops at `max_tokens`; the
//! official Python client 0.2.1 (unpacked beside it) drives it in SDK mode (`--profile sdk`)
//! through a write turn and a `max_tokens` stop. Every request must reach `/v1/messages` with an
//! `x-api-key` and get a scripted reply. The client 0.1.5 with runtime 0.1.5 still writes its file
//! over `/chat/completions`.
//!
//! Skips, saying so, when that runtime (or, for the client, python3 with pydantic 2) is missing.

use dsh_model_server::script::Script;
use dsh_model_server::{default_script, ModelServer, DEFAULT_HTML};
use serde_json::Value;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long one headless run may take before its process group is killed.
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// The 0.2.1 wrapper, or `None` after saying why the test skips.
fn real_runtime() -> Option<PathBuf> {
    let target = dsh_test_support::target_profile_dir()?
        .parent()?
        .to_path_buf();
    let wrapper = target.join("real-dsh-runtime-bin").join("dsh-0.2.1");
    if wrapper.is_file() {
        return Some(wrapper);
    }
    dsh_test_support::skip(format!(
        "the real dsh 0.2.1 is not installed at {} (run `cargo xtask real-dsh \
         --runtime-bin`)",
        wrapper.display()
    ));
    None
}

/// One headless run's world (`project/`, `dsh-home/`, `user-home/`, `tmp/`), removed on drop.
struct World {
    root: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        let root = tempfile::tempdir().unwrap();
        for dir in ["project", "dsh-home", "user-home", "tmp"] {
            std::fs::create_dir(root.path().join(dir)).unwrap();
        }
        World { root }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    /// `program` run in this world: its project as the cwd, its `HOME` and `TMPDIR`, the
    /// endpoint `server` with a dummy key, and no Anthropic endpoint or key from outside.
    fn command(&self, program: &Path, server: &ModelServer) -> Command {
        let mut command = Command::new(program);
        command
            .current_dir(self.path("project"))
            .env("HOME", self.path("user-home"))
            .env("TMPDIR", self.path("tmp"))
            .env("DEEPSEEK_BASE_URL", server.url())
            .env("DEEPSEEK_API_KEY", "keyless-canary")
            .env_remove("ANTHROPIC_BASE_URL")
            .env_remove("ANTHROPIC_API_KEY");
        command
    }

    /// `dsh headless TASK` in this world against `server`.
    fn headless(&self, dsh: &Path, server: &ModelServer, task: &str) -> Output {
        let mut command = self.command(dsh, server);
        command
            .args(["headless", task])
            .env("DSH_HOME", self.path("dsh-home"));
        output_within(command, RUN_LIMIT)
    }
}

/// Runs `command` in a process group of its own, stdin closed, its output collected; the group is
/// killed once the command has ended or `limit` has passed, and the command is always reaped.
fn output_within(mut command: Command, limit: Duration) -> Output {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let child = command.spawn().expect("start the real dsh");
    let group = child.id();
    let waiter = std::thread::spawn(move || child.wait_with_output());
    let deadline = Instant::now() + limit;
    while !waiter.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    kill_group(group);
    waiter
        .join()
        .expect("the waiting thread")
        .expect("the real dsh's output")
}

/// SIGKILL to process group `group` (what is left of it), through `kill(1)`, itself reaped.
fn kill_group(group: u32) {
    Command::new("kill")
        .args(["-KILL", "--", &format!("-{group}")])
        .stderr(Stdio::null())
        .status()
        .ok();
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Prints (seen with `--nocapture`) how a run ended and what the runtime sent each request: its
/// top-level members, its last message's block types, and the reply it got.
fn report(output: &Output, server: &ModelServer) {
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    println!("{}\nstdout: {stdout}\nstderr: {stderr}", output.status);
    for entry in server.requests() {
        let body = &entry["body"];
        let members: Vec<&String> = body
            .as_object()
            .into_iter()
            .flat_map(|o| o.keys())
            .collect();
        let last = &body["messages"].as_array().and_then(|m| m.last()).cloned();
        let last = last.as_ref().unwrap_or(&Value::Null);
        let blocks: Vec<&Value> = last["content"].as_array().into_iter().flatten().collect();
        let kinds: Vec<&Value> = blocks.iter().map(|block| &block["type"]).collect();
        println!(
            "request {} {}: members {members:?}; last message {} {kinds:?}; reply {}, status {}",
            entry["n"], entry["path"], last["role"], entry["reply"], entry["status"]
        );
    }
}

/// Every logged request went to `/v1/messages` with an `x-api-key`, and none was refused.
fn assert_messages_only(server: &ModelServer) -> Vec<Value> {
    let log = server.requests();
    assert!(!log.is_empty(), "the runtime sent the model server nothing");
    for entry in &log {
        assert_eq!(entry["path"], "/v1/messages", "{entry}");
        assert_eq!(entry["x_api_key"], true, "{entry}");
        assert_eq!(entry["status"], 200, "{entry}");
    }
    log
}

#[test]
fn a_text_turn_completes_keylessly() {
    let Some(dsh) = real_runtime() else { return };
    let script = Script::parse(
        r#"{"replies": [{"when": {"tools": true}, "reasoning": "A greeting.",
             "text": "Hello from the model server.", "reuse": true},
            {"when": {"tools": false}, "text": "Greeting", "reuse": true}]}"#,
    )
    .unwrap();
    let server = ModelServer::start(script).unwrap();
    let world = World::new();
    let output = world.headless(&dsh, &server, "Say hello");
    report(&output, &server);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(
        output.status.success(),
        "{}\n{stdout}\n{stderr}",
        output.status
    );
    assert!(
        stdout.contains("Hello from the model server."),
        "{stdout}\n{stderr}"
    );
    let log = assert_messages_only(&server);
    let first = &log[0]["body"];
    assert_eq!(first["stream"], true);
    assert!(first["max_tokens"].as_u64().is_some_and(|max| max >= 1));
}

#[test]
fn a_write_turn_writes_the_file_through_a_tool_use() {
    let Some(dsh) = real_runtime() else { return };
    let server = ModelServer::start(default_script()).unwrap();
    let world = World::new();
    let output = world.headless(&dsh, &server, "Make a landing page");
    report(&output, &server);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(
        output.status.success(),
        "{}\n{stdout}\n{stderr}",
        output.status
    );
    assert!(stdout.contains("I wrote index.html."), "{stdout}\n{stderr}");
    let written = std::fs::read_to_string(world.path("project").join("index.html"));
    assert_eq!(written.ok().as_deref(), Some(DEFAULT_HTML));
    let log = assert_messages_only(&server);
    let results = log.iter().filter(|entry| {
        entry["body"]["messages"]
            .as_array()
            .and_then(|messages| messages.last())
            .is_some_and(|last| last.to_string().contains("\"tool_result\""))
    });
    assert!(
        results.count() >= 1,
        "the tool's result went back to the model"
    );
}

#[test]
fn a_max_tokens_stop_prints_the_partial_text_and_exits_1() {
    let Some(dsh) = real_runtime() else { return };
    let script = Script::parse(
        r#"{"replies": [{"when": {"tools": true}, "text": "Cut off in the mid",
             "max_tokens": true, "reuse": true},
            {"when": {"tools": false}, "text": "Cut", "reuse": true}]}"#,
    )
    .unwrap();
    let server = ModelServer::start(script).unwrap();
    let world = World::new();
    let output = world.headless(&dsh, &server, "Say hello");
    report(&output, &server);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    // 0.2.1's headless profile prints what came and exits 1: the turn did not complete.
    assert_eq!(output.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stdout.contains("Cut off in the mid"), "{stdout}\n{stderr}");
    assert!(!stderr.contains("INVALID_REQUEST"), "{stderr}");
    assert_messages_only(&server);
}

/// The official Python client 0.2.1 (`deepseek_harness`, unpacked beside the runtime) runs one
/// turn in SDK mode (`dsh --profile sdk`, JSON-RPC on stdio) and prints its final response and
/// finish reason as JSON.
const PYTHON_CLIENT_TURN: &str = r#"
import json, sys
from deepseek_harness import DeepSeekHarness
home, cwd, url, prompt = sys.argv[1:5]
with DeepSeekHarness(dsh_home=home, cwd=cwd, base_url=url, api_key="keyless-canary",
                     initialize_timeout_seconds=60, request_timeout_seconds=90) as harness:
    result = harness.run(prompt, session_id="model-server-001")
print(json.dumps({"final_response": result.final_response,
                  "finish_reason": result.finish_reason}))
"#;

/// `PYTHONPATH` for the client of `version` (`0.2.1rc2`, `0.1.5rc1`) and the same version's
/// runtime, or `None` after saying why the test skips (no python3 with pydantic 2, which the
/// client needs, or no client install).
fn python_client_path(dsh: &Path, version: &str) -> Option<String> {
    let dir = dsh.parent()?;
    let client = dir.join(format!("deepseek-harness-sdk-{version}"));
    let runtime = dir.join(version);
    let pydantic = Command::new("python3")
        .args([
            "-c",
            "import pydantic; assert pydantic.VERSION.startswith('2')",
        ])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .is_ok_and(|output| output.status.success());
    if !client.is_dir() || !pydantic {
        dsh_test_support::skip(format!(
            "the Python client {version} or python3 with pydantic 2 is missing"
        ));
        return None;
    }
    Some(format!("{}:{}", client.display(), runtime.display()))
}

/// Runs one turn of `prompt` through the Python client of `version` (with the same version's
/// runtime) against a server of `script`; `None` when the test skips.
fn python_turn(
    version: &str,
    script: Script,
    prompt: &str,
) -> Option<(Output, ModelServer, World)> {
    let dsh = real_runtime()?;
    let python_path = python_client_path(&dsh, version)?;
    let server = ModelServer::start(script).unwrap();
    let world = World::new();
    let mut command = world.command(Path::new("python3"), &server);
    command
        .args(["-c", PYTHON_CLIENT_TURN])
        .arg(world.path("dsh-home"))
        .arg(world.path("project"))
        .arg(server.url())
        .arg(prompt)
        .env("PYTHONPATH", python_path)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("DSH_HOME");
    let output = output_within(command, RUN_LIMIT);
    report(&output, &server);
    Some((output, server, world))
}

/// The client's JSON line, after checking that it ended well.
fn client_result(output: &Output) -> Value {
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(
        output.status.success(),
        "{}\n{stdout}\n{stderr}",
        output.status
    );
    serde_json::from_str(stdout.trim()).expect("the client's JSON line")
}

#[test]
fn the_python_client_0_2_1_writes_a_file_in_sdk_mode() {
    let Some((output, server, world)) =
        python_turn("0.2.1rc2", default_script(), "Make a landing page")
    else {
        return;
    };
    let result = client_result(&output);
    assert_eq!(result["final_response"], "I wrote index.html.");
    assert_eq!(result["finish_reason"], "completed");
    let written = std::fs::read_to_string(world.path("project").join("index.html"));
    assert_eq!(written.ok().as_deref(), Some(DEFAULT_HTML));
    assert_messages_only(&server);
}

#[test]
fn the_python_client_0_2_1_reports_a_max_tokens_stop() {
    let script = Script::parse(
        r#"{"replies": [{"text": "Cut off in the mid", "max_tokens": true, "reuse": true}]}"#,
    )
    .unwrap();
    let Some((output, server, _world)) = python_turn("0.2.1rc2", script, "Say hello") else {
        return;
    };
    let result = client_result(&output);
    assert_eq!(result["final_response"], "Cut off in the mid");
    assert_eq!(result["finish_reason"], "max-tokens");
    assert_messages_only(&server);
}

#[test]
fn the_python_client_0_1_5_still_runs_over_chat_completions() {
    let turn = python_turn("0.1.5rc1", default_script(), "Make a landing page");
    let Some((output, server, world)) = turn else {
        return;
    };
    let result = client_result(&output);
    assert_eq!(result["final_response"], "I wrote index.html.");
    let written = std::fs::read_to_string(world.path("project").join("index.html"));
    assert_eq!(written.ok().as_deref(), Some(DEFAULT_HTML));
    let log = server.requests();
    assert!(!log.is_empty());
    assert!(
        log.iter().all(|entry| entry["path"] == "/chat/completions"),
        "{log:?}"
    );
}
