//! The real `@deepseek-ai/dsh` (installed by `cargo xtask real-dsh` under `target/real-dsh/`)
//! driven through the model server, keylessly, with nothing leaving loopback or the test's temp
//! dir (`HOME`, `TMPDIR` and `DSH_HOME` all inside it):
//! - its built-in `headless` profile writes a file with a tool call and prints the final text; a
//!   scripted 401 fails the turn;
//! - the kit's minimal open-design bundle (`examples/real-dsh-profile`, packed by `--bundle`)
//!   installed with `dsh plugin --profile open-design add` makes it speak the stdio protocol:
//!   every `check-runtime` check passes against it, on the npm rc.8 and on the 0.2.1 runtime
//!   (`deepseek-harness-runtime-bin`);
//! - a real `--stdio` session is recorded, validated, turned into a case, and replayed by fake-dsh.
//!
//! Skips, saying so, when the real dsh is not installed.

use dsh_model_server::script::Script;
use dsh_model_server::{default_script, ModelServer, DEFAULT_HTML};
use dsh_runtime_check::{install_bundle, output_within};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// A throwaway place for one runtime run: `project/` (the cwd), `dsh-home/`, `user-home/`
/// (`HOME`) and `tmp/` (`TMPDIR`), all removed on drop.
struct Sandbox {
    root: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        for dir in ["project", "dsh-home", "user-home", "tmp"] {
            std::fs::create_dir_all(root.path().join(dir)).unwrap();
        }
        Self { root }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    /// `program` with this sandbox's cwd, homes, temp dir and a keyless loopback endpoint.
    fn command(&self, program: &Path, dsh_home: &Path, model_url: &str) -> Command {
        let mut command = Command::new(program);
        command
            .current_dir(self.path("project"))
            .env("DSH_HOME", dsh_home)
            .env("HOME", self.path("user-home"))
            .env("TMPDIR", self.path("tmp"))
            .env("DEEPSEEK_BASE_URL", model_url)
            .env("DEEPSEEK_API_KEY", "keyless-canary")
            // pnpm (in `dsh plugin add`) must not need a registry: a closed loopback port.
            .env("npm_config_registry", "http://127.0.0.1:9/")
            .env_remove("FAKE_DSH_SCENARIO")
            .env_remove("FAKE_DSH_JOURNAL");
        command
    }
}

/// Runs `command` with `stdin` bytes, in its own process group, killed with it after `secs`.
fn run(command: Command, stdin: Option<&[u8]>, secs: u64, sandbox: &Sandbox) -> Output {
    let input = match stdin {
        None => Stdio::null(),
        Some(bytes) => {
            let file = sandbox.path("stdin.jsonl");
            std::fs::write(&file, bytes).unwrap();
            Stdio::from(std::fs::File::open(file).unwrap())
        }
    };
    output_within(command, input, Duration::from_secs(secs)).unwrap()
}

/// Runs the real dsh's headless profile on `task` in a fresh sandbox against `server`.
fn headless(dsh: &Path, server: &ModelServer, task: &str) -> (Output, Sandbox) {
    let sandbox = Sandbox::new();
    let mut command = sandbox.command(dsh, &sandbox.path("dsh-home"), server.url());
    command.args(["--profile", "headless", task]);
    (run(command, None, 90, &sandbox), sandbox)
}

#[test]
fn headless_profile_writes_a_file_with_a_tool_call_then_prints_the_final_text() {
    let Some(dsh) = dsh_test_support::real_dsh() else {
        return;
    };
    let server = ModelServer::start(default_script()).unwrap();
    let (output, sandbox) = headless(&dsh, &server, "Make a landing page");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{:?}: {stderr}", output.status);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "I wrote index.html."
    );
    let written = std::fs::read_to_string(sandbox.path("project/index.html")).unwrap();
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
    // The runtime's spill directory went to the sandbox's TMPDIR, not the system's.
    assert!(std::fs::read_dir(sandbox.path("tmp"))
        .unwrap()
        .flatten()
        .any(|entry| entry
            .file_name()
            .to_string_lossy()
            .starts_with("dsh-spill-")));
}

#[test]
fn headless_turn_fails_when_the_endpoint_answers_401() {
    let Some(dsh) = dsh_test_support::real_dsh() else {
        return;
    };
    let script = Script::parse(r#"{"replies": [{"status": 401, "reuse": true}]}"#).unwrap();
    let server = ModelServer::start(script).unwrap();
    let (output, sandbox) = headless(&dsh, &server, "Make a landing page");
    assert!(!output.status.success(), "a 401 must fail the turn");
    assert!(!sandbox.path("project/index.html").exists());
    assert!(!server.requests().is_empty());
}

/// The kit's open-design bundle, unpacked: `--bundle` and `install_bundle` pack it.
fn bundle_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/real-dsh-profile")
}

#[test]
fn check_runtime_passes_every_check_against_the_real_dsh_with_the_kit_bundle() {
    if let Some(dsh) = dsh_test_support::real_dsh() {
        check_runtime_with_the_kit_bundle(&dsh, &[]);
    }
}

/// The same on the 0.2.1 runtime (`deepseek-harness-runtime-bin`), whose `tool/result` is the
/// tool's own message and whose `dsh plugin add` runs pnpm from `PATH` (the pnpm and Node.js
/// `cargo xtask real-dsh` installs).
#[test]
fn check_runtime_passes_every_check_against_the_0_2_1_runtime_with_the_kit_bundle() {
    let Some(dsh) = dsh_test_support::real_runtime_bin("dsh-0.2.1") else {
        return;
    };
    let tools = dsh_test_support::real_dsh_tool_dirs();
    if tools.is_empty() {
        dsh_test_support::skip("pnpm is not installed (run `cargo xtask real-dsh`)");
        return;
    }
    check_runtime_with_the_kit_bundle(&dsh, &tools);
}

/// Without pnpm on `PATH`, 0.2.1's `plugin add` cannot install the bundle: check-runtime could
/// not run (exit 2), says the runtime's own words, and where the kit's pnpm is.
#[test]
fn check_runtime_on_0_2_1_without_pnpm_says_where_pnpm_comes_from() {
    let Some(dsh) = dsh_test_support::real_runtime_bin("dsh-0.2.1") else {
        return;
    };
    let sandbox = Sandbox::new();
    let kit = dsh_test_support::binary("dsh-conformance");
    let mut command = sandbox.command(&kit, &sandbox.path("dsh-home"), "http://127.0.0.1:9");
    let inherited = std::env::var_os("PATH").unwrap_or_default();
    let without_pnpm = std::env::split_paths(&inherited).filter(|dir| !dir.join("pnpm").exists());
    command
        .env("PATH", std::env::join_paths(without_pnpm).expect("a PATH"))
        .args(["check-runtime", "--check", "rt.version-shape", "--dsh"])
        .arg(&dsh)
        .arg("--bundle")
        .arg(bundle_dir());
    let output = run(command, None, 120, &sandbox);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("pnpm was not found"), "{stderr}");
    assert!(stderr.contains("target/real-dsh/tools/bin"), "{stderr}");
}

/// `check-runtime --bundle examples/real-dsh-profile` against `dsh`, with `path_first` before
/// `PATH`: every check passes (a cancel may be inconclusive) and nothing is left in `TMPDIR`.
fn check_runtime_with_the_kit_bundle(dsh: &Path, path_first: &[PathBuf]) {
    let sandbox = Sandbox::new();
    let kit = dsh_test_support::binary("dsh-conformance");
    // check-runtime starts its own model server; the closed port proves it never uses ours.
    let mut command = sandbox.command(&kit, &sandbox.path("dsh-home"), "http://127.0.0.1:9");
    let inherited = std::env::var_os("PATH").unwrap_or_default();
    let path = std::env::join_paths(
        path_first
            .iter()
            .cloned()
            .chain(std::env::split_paths(&inherited)),
    )
    .expect("a PATH");
    command
        .env("PATH", path)
        .args([
            "check-runtime",
            "--format",
            "json",
            "--time-scale",
            "3",
            "--jobs",
            "2",
        ])
        .arg("--dsh")
        .arg(dsh)
        .arg("--bundle")
        .arg(bundle_dir());
    let output = run(command, None, 600, &sandbox);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {stderr}\n{}", String::from_utf8_lossy(&output.stdout)));
    let checks = report["checks"].as_array().unwrap();
    let catalogue = dsh_runtime_check::checks::CHECKS.len();
    assert_eq!(checks.len(), catalogue, "{report:#}");
    for check in checks {
        // A cancel can only be inconclusive: the result may come before it matters. A cancel
        // answered before the session frame may name an unannounced session: informational.
        let allowed: &[&str] = match check["id"].as_str() {
            Some("rt.cancel-honoured") => &["pass", "inconclusive"],
            Some("rt.cancelled-names-announced-session") => {
                &["pass", "inconclusive", "informational"]
            }
            _ => &["pass"],
        };
        assert!(
            allowed.contains(&check["status"].as_str().unwrap()),
            "{}: {check:#}",
            dsh.display()
        );
    }
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    // Every world (and the runtime's spill dirs inside them) and the bundle home were removed.
    let left: Vec<_> = std::fs::read_dir(sandbox.path("tmp"))
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name())
        .collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
}

/// One `execute` line for a new session in `project`.
fn execute_line(request_id: &str, project: &Path, prompt: &str) -> Vec<u8> {
    let execute = serde_json::json!({
        "v": 1, "type": "execute", "request_id": request_id,
        "cwd": project.to_string_lossy(), "prompt": prompt, "mcp_servers": [],
    });
    format!("{execute}\n").into_bytes()
}

/// The frames of a stdout stream, with the run's request and session ids replaced by
/// placeholders (a replay runs under its own ids).
fn normalized_frames(stdout: &[u8]) -> Vec<Value> {
    let frames: Vec<Value> = stdout
        .split(|byte| *byte == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).unwrap())
        .collect();
    let session = frames
        .iter()
        .find_map(|frame| frame["session_id"].as_str().map(String::from));
    frames
        .into_iter()
        .map(|mut frame| {
            if let Some(object) = frame.as_object_mut() {
                if object.contains_key("request_id") {
                    object.insert("request_id".into(), "REQUEST".into());
                }
                if object.get("session_id").and_then(Value::as_str) == session.as_deref() {
                    object.insert("session_id".into(), "SESSION".into());
                }
            }
            frame
        })
        .collect()
}

#[test]
fn a_recorded_real_session_validates_becomes_a_case_and_replays_with_fake_dsh() {
    let Some(dsh) = dsh_test_support::real_dsh() else {
        return;
    };
    let kit = dsh_test_support::binary("dsh-conformance");
    let sandbox = Sandbox::new();
    let bundle = install_bundle(&dsh, &bundle_dir()).unwrap();
    let server = ModelServer::start(default_script()).unwrap();
    let prompt = "Make a landing page: model server page for the recording";
    let execute = execute_line("real-record-1", &sandbox.path("project"), prompt);

    // 1. record a real --stdio session through the model server.
    let mut record = sandbox.command(&kit, &bundle.home, server.url());
    record
        .args(["record", "--out"])
        .arg(sandbox.path("recordings"))
        .arg("--")
        .arg(&dsh)
        .args(["--profile", "open-design", "--stdio"]);
    let recorded = run(record, Some(&execute), 120, &sandbox);
    let stderr = String::from_utf8_lossy(&recorded.stderr);
    assert!(recorded.status.success(), "{:?}: {stderr}", recorded.status);
    assert!(!stderr.contains("dsh-conformance record: line"), "{stderr}");
    let frames = normalized_frames(&recorded.stdout);
    let types: Vec<&str> = frames.iter().map(|f| f["type"].as_str().unwrap()).collect();
    for wanted in [
        "ready",
        "session",
        "thinking",
        "tool_call",
        "tool_result",
        "text",
    ] {
        assert!(types.contains(&wanted), "{wanted} missing: {types:?}");
    }
    assert_eq!(frames.last().unwrap()["status"], "completed", "{frames:#?}");
    assert_eq!(
        std::fs::read_to_string(sandbox.path("project/index.html")).unwrap(),
        DEFAULT_HTML
    );
    let recording = std::fs::read_dir(sandbox.path("recordings"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    assert_eq!(
        std::fs::read(recording.join("stdout.jsonl")).unwrap(),
        recorded.stdout
    );

    // 2. validate the transcript.
    let mut validate = Command::new(&kit);
    validate.arg("validate").arg(recording.join("stdout.jsonl"));
    let validated = run(validate, None, 60, &sandbox);
    assert_eq!(
        validated.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&validated.stdout)
    );

    // 3. turn it into a case: the prompt is replaced whole, the page the model wrote is kept
    //    even though it shares "model server page" with the prompt.
    let case_path = sandbox.path("real-dsh.recorded-turn.json");
    let mut convert = Command::new(&kit);
    convert
        .arg("fixture-from-transcript")
        .arg(&recording)
        .args(["--id", "real-dsh.recorded-turn", "--out"])
        .arg(&case_path);
    let converted = run(convert, None, 60, &sandbox);
    assert!(
        converted.status.success(),
        "{}",
        String::from_utf8_lossy(&converted.stderr)
    );
    let case_text = std::fs::read_to_string(&case_path).unwrap();
    assert!(!case_text.contains(prompt), "{case_text}");
    assert!(!case_text.contains("keyless-canary"));
    assert!(case_text.contains("Model server page"), "{case_text}");
    let case: Value = serde_json::from_str(&case_text).unwrap();
    assert_eq!(case["steps"][0]["expect"]["status"], "completed");

    // 4. fake-dsh replays the case: the same frames, under the replay's own ids.
    let replay_box = Sandbox::new();
    let manifest = fake_dsh::home::profile_manifest_path(&replay_box.path("dsh-home"));
    std::fs::create_dir_all(manifest.parent().unwrap()).unwrap();
    std::fs::write(&manifest, r#"{"name": "@open-design/dsh-runtime"}"#).unwrap();
    let fake = dsh_test_support::binary("fake-dsh");
    let mut replay = replay_box.command(&fake, &replay_box.path("dsh-home"), "http://127.0.0.1:9");
    replay
        .env("FAKE_DSH_SCENARIO", &case_path)
        .args(["--profile", "open-design", "--stdio"]);
    let execute = execute_line("replay-1", &replay_box.path("project"), "replayed");
    let replayed = run(replay, Some(&execute), 60, &replay_box);
    assert!(
        replayed.status.success(),
        "{}",
        String::from_utf8_lossy(&replayed.stderr)
    );
    let replayed_frames = normalized_frames(&replayed.stdout);
    assert_eq!(replayed_frames.len(), frames.len());
    for (recorded, replayed) in frames.iter().zip(&replayed_frames) {
        assert_eq!(recorded["type"], replayed["type"]);
        if recorded["type"] != "tool_result" {
            // A tool result names the recording's project dir, scrubbed to `.` in the case.
            assert_eq!(recorded, replayed);
        }
    }
}
