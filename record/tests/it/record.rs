//! `record` and `fixture-from-transcript` end to end: a tiny in-test host drives fake-dsh through
//! the proxy; the proxied bytes, the transcript, the live violations, signal forwarding and the
//! redacted, schema-valid, replayable case file are checked.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

const PROMPT_CANARY: &str = "CANARY-PROMPT-7f3a9c2e";
const KEY_CANARY: &str = "sk-canaryKEY0123456789abcdef";

fn kit_binary() -> PathBuf {
    dsh_test_support::binary("dsh-conformance")
}

/// A spawned process in its own group, killed with the group and reaped when dropped.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(self.0.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = self.0.wait();
    }
}

impl Guard {
    fn wait(&mut self, bound: Duration) -> ExitStatus {
        let deadline = Instant::now() + bound;
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the process did not exit within {bound:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A temp world: a Harness home with the profile installed, a project dir, the recordings dir.
struct World {
    root: tempfile::TempDir,
}

impl World {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let profile = root.path().join("home/profiles/open-design");
        std::fs::create_dir_all(&profile).unwrap();
        std::fs::write(
            profile.join("package.json"),
            r#"{"name":"@open-design/dsh-runtime","version":"0.1.0"}"#,
        )
        .unwrap();
        std::fs::create_dir_all(root.path().join("project")).unwrap();
        Self { root }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    fn project(&self) -> PathBuf {
        self.path("project").canonicalize().unwrap()
    }

    /// `dsh-conformance record --out recordings -- fake-dsh --profile open-design --stdio`, or
    /// plain fake-dsh when `through_proxy` is false.
    fn spawn(&self, scenario: Option<&Path>, through_proxy: bool) -> Guard {
        let fake = dsh_test_support::binary("fake-dsh");
        let mut command = if through_proxy {
            let mut command = Command::new(kit_binary());
            command
                .arg("record")
                .arg("--out")
                .arg(self.path("recordings"))
                .arg("--")
                .arg(fake);
            command
        } else {
            Command::new(fake)
        };
        command
            .args(["--profile", "open-design", "--stdio"])
            .current_dir(self.project())
            .env("DSH_HOME", self.path("home"))
            .env("DEEPSEEK_API_KEY", KEY_CANARY)
            .env("FAKE_DSH_JOURNAL", self.path("journal.jsonl"))
            .env("FAKE_DSH_WATCHDOG_SECS", "60")
            .env_remove("FAKE_DSH_SCENARIO")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if let Some(scenario) = scenario {
            command.env("FAKE_DSH_SCENARIO", scenario);
        }
        Guard(command.spawn().unwrap())
    }

    fn execute(&self, request_id: &str) -> String {
        let execute = json!({
            "v": 1, "type": "execute", "request_id": request_id,
            "cwd": self.project().to_string_lossy(),
            "prompt": format!("Create a landing page for {PROMPT_CANARY}, please"),
            "model": {"provider": "deepseek-official", "id": "deepseek-chat"},
            "mcp_servers": [],
        });
        format!("{execute}\n")
    }

    fn recording(&self) -> PathBuf {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(self.path("recordings"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        assert_eq!(dirs.len(), 1, "{dirs:?}");
        dirs.pop().unwrap()
    }
}

/// What the tiny host saw.
struct HostRun {
    stdout: Vec<u8>,
    stdin: Vec<u8>,
    stderr: String,
    status: ExitStatus,
}

/// Read one line (bounded by the fake-dsh watchdog; the guard kills on failure).
fn read_line(reader: &mut BufReader<ChildStdout>, seen: &mut Vec<u8>) -> Option<Value> {
    let mut line = Vec::new();
    if reader.read_until(b'\n', &mut line).unwrap() == 0 {
        return None;
    }
    seen.extend_from_slice(&line);
    serde_json::from_slice(&line).ok()
}

/// The tiny host: wait for ready, write an execute, read to the result, close stdin, read to EOF.
fn drive(process: Guard, world: &World, request_id: &str) -> HostRun {
    drive_with_cancel(process, world, request_id, None)
}

/// `drive`, sending a cancel once a frame of type `cancel_after` arrived.
fn drive_with_cancel(
    mut process: Guard,
    world: &World,
    request_id: &str,
    cancel_after: Option<&str>,
) -> HostRun {
    let mut stdin = process.0.stdin.take().unwrap();
    let mut reader = BufReader::new(process.0.stdout.take().unwrap());
    let mut stderr_pipe = process.0.stderr.take().unwrap();
    let stderr_thread = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr_pipe.read_to_string(&mut text);
        text
    });
    let mut stdout = Vec::new();
    let ready = read_line(&mut reader, &mut stdout);
    assert_eq!(
        ready.as_ref().and_then(|frame| frame["type"].as_str()),
        Some("ready"),
        "{ready:?}"
    );
    let mut sent = world.execute(request_id);
    stdin.write_all(sent.as_bytes()).unwrap();
    stdin.flush().unwrap();
    while let Some(frame) = read_line(&mut reader, &mut stdout) {
        if frame["type"] == "result" {
            break;
        }
        if cancel_after.is_some_and(|kind| frame["type"] == kind) {
            let cancel = format!(
                "{}\n",
                json!({"v": 1, "type": "cancel", "request_id": request_id})
            );
            stdin.write_all(cancel.as_bytes()).unwrap();
            stdin.flush().unwrap();
            sent.push_str(&cancel);
        }
    }
    drop(stdin);
    reader.read_to_end(&mut stdout).unwrap();
    let status = process.wait(Duration::from_secs(30));
    HostRun {
        stdout,
        stdin: sent.into_bytes(),
        stderr: stderr_thread.join().unwrap(),
        status,
    }
}

fn kit(args: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new(kit_binary())
        .args(args)
        .env("DEEPSEEK_API_KEY", KEY_CANARY)
        .output()
        .unwrap()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `fixture-from-transcript <recording> --id <id> --case-file <world>/<id>.json`, which must
/// succeed; returns the case file's path.
fn fixture_from_transcript(world: &World, recording: &Path, id: &str) -> PathBuf {
    // A parent dir that does not exist yet: `--case-file` creates it.
    let case_path = world.path(&format!("new-dir/{id}.json"));
    let convert = kit(&[
        "fixture-from-transcript".as_ref(),
        recording.as_os_str(),
        "--id".as_ref(),
        id.as_ref(),
        "--case-file".as_ref(),
        case_path.as_os_str(),
    ]);
    assert_eq!(
        convert.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&convert.stderr)
    );
    case_path
}

fn frame_types(stdout: &[u8]) -> Vec<String> {
    stdout
        .split(|byte| *byte == b'\n')
        .filter_map(|line| serde_json::from_slice::<Value>(line).ok())
        .map(|frame| frame["type"].as_str().unwrap_or("?").to_string())
        .collect()
}

#[test]
fn a_recorded_default_session_is_byte_exact_valid_and_becomes_a_clean_replayable_fixture() {
    let world = World::new();
    let run = drive(world.spawn(None, true), &world, "run-record-1");
    assert!(
        run.status.success(),
        "{:?}; stderr: {}",
        run.status,
        run.stderr
    );
    assert!(
        !run.stderr.contains("dsh-conformance record:"),
        "unexpected violations: {}",
        run.stderr
    );

    let recording = world.recording();
    assert!(
        run.stderr
            .contains(&format!("recorded to {}", recording.display())),
        "record names the directory it chose: {}",
        run.stderr
    );
    let recorded_stdout = std::fs::read(recording.join("stdout.jsonl")).unwrap();
    assert_eq!(
        recorded_stdout, run.stdout,
        "the transcript holds exactly what the host read"
    );
    assert_eq!(
        std::fs::read(recording.join("stdin.jsonl")).unwrap(),
        run.stdin
    );
    assert!(frame_types(&run.stdout).ends_with(&["usage".to_string(), "result".to_string()]));

    let meta = read_json(&recording.join("meta.json"));
    assert_eq!(meta["exit_code"], 0);
    assert_eq!(meta["violations"], json!([]));
    assert_eq!(meta["run"]["request_id"], "run-record-1");
    assert_eq!(meta["result"]["status"], "completed");
    assert!(meta["argv"]
        .as_array()
        .unwrap()
        .iter()
        .any(|arg| arg == "--stdio"));
    assert!(!meta.to_string().contains(KEY_CANARY));

    let validate = kit(&[
        "validate".as_ref(),
        recording.join("stdout.jsonl").as_os_str(),
    ]);
    assert_eq!(
        validate.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&validate.stdout)
    );

    let case_path = fixture_from_transcript(&world, &recording, "replay.first-turn");
    let case_text = std::fs::read_to_string(&case_path).unwrap();
    let case: Value = serde_json::from_str(&case_text).unwrap();
    if let Err(errors) = dsh_protocol::schema::validate("fixture.schema.json", &case) {
        panic!("{errors:?}");
    }
    // Whole occurrences of the prompt are redacted; text the design merely shares with it
    // (the page's title) is kept, so the replay is not mangled.
    assert!(
        !case_text.contains(&format!("Create a landing page for {PROMPT_CANARY}")),
        "the prompt survived: {case_text}"
    );
    assert!(!case_text.contains(KEY_CANARY));
    assert!(
        !case_text.contains("run-record-1"),
        "the recorded request id survived"
    );
    let session_id = meta["run"]["session_id"].as_str().unwrap();
    assert!(
        !case_text.contains(session_id),
        "the recorded session id survived"
    );
    assert!(
        !case_text.contains(&*world.project().to_string_lossy()),
        "the recorded cwd survived"
    );
    assert!(case_text.contains("{{request_id}}") && case_text.contains("{{session_id}}"));
    assert_eq!(case["steps"][0]["expect"]["status"], "completed");
    assert_eq!(case["steps"][0]["expect"]["session"], "new");
    assert_rules_exist(&case);

    // Replayed by fake-dsh, the case's script writes the same frames again.
    let replay_world = World::new();
    let replay = drive(
        replay_world.spawn(Some(&case_path), false),
        &replay_world,
        "run-replay-1",
    );
    assert!(replay.status.success());
    assert_eq!(frame_types(&replay.stdout), frame_types(&run.stdout));
    let replayed = replay_world.path("replayed.jsonl");
    std::fs::write(&replayed, &replay.stdout).unwrap();
    let validate = kit(&["validate".as_ref(), replayed.as_os_str()]);
    assert_eq!(
        validate.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&validate.stdout)
    );
}

fn assert_rules_exist(case: &Value) {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
    let catalog = dsh_host_corpus::corpus::load_rules(&fixtures).unwrap();
    let ids: Vec<&str> = catalog.iter().map(|rule| rule.id.as_str()).collect();
    for rule in case["rules"].as_array().unwrap() {
        assert!(ids.contains(&rule.as_str().unwrap()), "unknown rule {rule}");
    }
}

fn write_scenario(world: &World, script: Value) -> PathBuf {
    let path = world.path("scenario.json");
    std::fs::write(&path, json!({"stdio": [script]}).to_string()).unwrap();
    path
}

#[test]
fn violations_go_to_stderr_and_meta_never_to_stdout_and_secrets_are_redacted() {
    let world = World::new();
    let scenario = write_scenario(
        &world,
        json!([
            {"ready": {}}, {"read_execute": {}},
            {"text": format!("You asked: create a LANDING page for {PROMPT_CANARY}, please; key {KEY_CANARY}; other sk-live0123456789abcdefghij")},
            {"session": {}},
            {"result": {"status": "completed"}}
        ]),
    );
    let run = drive(world.spawn(Some(&scenario), true), &world, "run-bad-1");
    assert!(
        run.stderr.contains("dsh-conformance record:"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("DSH_PROFILE_CONTENT_BEFORE_SESSION"),
        "{}",
        run.stderr
    );
    assert!(!String::from_utf8_lossy(&run.stdout).contains("dsh-conformance"));

    let recording = world.recording();
    assert_eq!(
        std::fs::read(recording.join("stdout.jsonl")).unwrap(),
        run.stdout
    );
    let meta = read_json(&recording.join("meta.json"));
    assert_eq!(
        meta["violations"][0]["code"],
        "DSH_PROFILE_CONTENT_BEFORE_SESSION"
    );
    assert_eq!(meta["violations"][0]["line"], 2);

    let convert = kit(&[
        "fixture-from-transcript".as_ref(),
        recording.as_os_str(),
        "--id".as_ref(),
        "replay.bad-order".as_ref(),
    ]);
    assert_eq!(
        convert.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&convert.stderr)
    );
    let case_text = String::from_utf8(convert.stdout).unwrap();
    let case: Value = serde_json::from_str(&case_text).unwrap();
    assert!(dsh_protocol::schema::validate("fixture.schema.json", &case).is_ok());
    for secret in [PROMPT_CANARY, KEY_CANARY, "sk-live0123456789abcdefghij"] {
        assert!(
            !case_text.contains(secret),
            "{secret} survived: {case_text}"
        );
    }
    assert!(case_text.contains("[redacted]") && case_text.contains("[recorded prompt]"));
    assert_eq!(case["steps"][0]["expect"]["status"], "failed");
    assert_eq!(
        case["steps"][0]["expect"]["code"],
        "DSH_PROFILE_CONTENT_BEFORE_SESSION"
    );
    assert_eq!(case["rules"][0], "s6.session-before-content");
    assert_rules_exist(&case);
}

#[test]
fn the_runtime_exit_code_passes_through() {
    let world = World::new();
    let scenario = write_scenario(&world, json!([{"ready": {}}, {"exit": 3}]));
    let mut process = world.spawn(Some(&scenario), true);
    drop(process.0.stdin.take());
    let status = process.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(3));
    let meta = read_json(&world.recording().join("meta.json"));
    assert_eq!(meta["exit_code"], 3);
}

#[test]
fn sigterm_to_the_proxy_reaches_the_runtime() {
    let world = World::new();
    let scenario = write_scenario(
        &world,
        json!([{"ready": {}}, {"wait_stdin_close": {"timeout_ms": 30000}}]),
    );
    let mut process = world.spawn(Some(&scenario), true);
    let mut reader = BufReader::new(process.0.stdout.take().unwrap());
    let mut seen = Vec::new();
    assert!(read_line(&mut reader, &mut seen).is_some_and(|frame| frame["type"] == "ready"));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(process.0.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = process.wait(Duration::from_secs(30));
    // fake-dsh journals SIGTERM and exits 143; the proxy ends the same way.
    assert!(
        status.code() == Some(143) || status.signal() == Some(15),
        "{status:?}"
    );
    let journal = std::fs::read_to_string(world.path("journal.jsonl")).unwrap();
    assert!(
        journal
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .any(|entry| entry["event"] == "signal" && entry["signal"] == "SIGTERM"),
        "{journal}"
    );
    let meta = read_json(&world.recording().join("meta.json"));
    assert_eq!(meta["signals_forwarded"], json!(["SIGTERM"]));
}

#[test]
fn a_recording_without_an_execute_is_refused() {
    let world = World::new();
    let mut process = world.spawn(None, true);
    drop(process.0.stdin.take());
    process.wait(Duration::from_secs(30));
    let output = kit(&[
        "fixture-from-transcript".as_ref(),
        world.recording().as_os_str(),
        "--id".as_ref(),
        "replay.none".as_ref(),
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no execute"));
}

#[test]
fn a_cancelled_recording_replays_with_wait_cancel_and_cancel_on() {
    let world = World::new();
    let scenario = world.path("slow-agent.json");
    std::fs::write(
        &scenario,
        json!({"agent": {"step_delay_ms": 150}}).to_string(),
    )
    .unwrap();
    let run = drive_with_cancel(
        world.spawn(Some(&scenario), true),
        &world,
        "run-cancel-1",
        Some("session"),
    );
    assert!(run.status.success(), "{:?}: {}", run.status, run.stderr);
    assert!(
        !run.stderr.contains("dsh-conformance record:"),
        "{}",
        run.stderr
    );
    let recording = world.recording();
    assert_eq!(
        std::fs::read(recording.join("stdin.jsonl")).unwrap(),
        run.stdin
    );
    let meta = read_json(&recording.join("meta.json"));
    assert_eq!(
        meta["result"]["status"],
        "cancelled",
        "{}",
        String::from_utf8_lossy(&run.stdout)
    );
    assert_eq!(meta["run"]["cancels"], 1);

    let case_path = fixture_from_transcript(&world, &recording, "replay.cancelled");
    let case = read_json(&case_path);
    assert!(dsh_protocol::schema::validate("fixture.schema.json", &case).is_ok());
    assert_eq!(case["requires"], json!(["cancel"]));
    assert_eq!(
        case["steps"][0]["run"]["cancel_on"],
        json!({"event": "status"})
    );
    assert_eq!(case["steps"][0]["expect"]["status"], "cancelled");
    let script = case["runtime"]["stdio"][0].as_array().unwrap();
    let position = |name: &str| {
        script
            .iter()
            .position(|action| action.get(name).is_some())
            .unwrap()
    };
    let session = script
        .iter()
        .position(|action| action["frame"]["type"] == "session")
        .unwrap();
    assert!(
        position("read_execute") < session && session < position("wait_cancel"),
        "{script:?}"
    );

    // Replayed, the runtime waits for the cancel and answers it.
    let replay_world = World::new();
    let replay = drive_with_cancel(
        replay_world.spawn(Some(&case_path), false),
        &replay_world,
        "run-replay-2",
        Some("session"),
    );
    assert_eq!(frame_types(&replay.stdout), frame_types(&run.stdout));
    assert!(String::from_utf8_lossy(&replay.stdout).contains(r#""status":"cancelled""#));
}

#[test]
fn fixture_from_transcript_defaults_its_id_and_lays_out_a_corpus_dir() {
    let world = World::new();
    let run = drive(world.spawn(None, true), &world, "run-defaults-1");
    assert!(run.status.success(), "{:?}: {}", run.status, run.stderr);
    let recording = world.recording();
    let slug = recording
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_lowercase()
        .replace(|c: char| !c.is_ascii_alphanumeric(), "-");
    let id = format!("recorded.{}", slug.trim_matches('-'));
    // A directory that does not exist yet, named with a trailing slash: the corpus layout.
    let corpus = world.path("new-corpus");
    let out = format!("{}/", corpus.display());
    let convert = kit(&[
        "fixture-from-transcript".as_ref(),
        recording.as_os_str(),
        "--out".as_ref(),
        out.as_ref(),
    ]);
    let stderr = String::from_utf8_lossy(&convert.stderr);
    assert_eq!(convert.status.code(), Some(0), "{stderr}");
    let case_path = corpus.join("recorded").join(format!("{id}.json"));
    assert!(
        stderr.contains(&format!("wrote case {id} to {}", case_path.display())),
        "{stderr}"
    );
    let case = read_json(&case_path);
    assert_eq!(case["id"], id.as_str(), "the default id");
    assert!(dsh_protocol::schema::validate("fixture.schema.json", &case).is_ok());
    assert_eq!(
        case["steps"][0]["expect"]["status"], "completed",
        "the outcome, the request id, prompt and cwd come from the recording"
    );

    // An existing directory gets the same layout, with an explicit id.
    let convert = kit(&[
        "fixture-from-transcript".as_ref(),
        recording.as_os_str(),
        "--id".as_ref(),
        "replay.named".as_ref(),
        "--out".as_ref(),
        corpus.as_os_str(),
    ]);
    assert_eq!(convert.status.code(), Some(0));
    assert!(corpus.join("replay").join("replay.named.json").is_file());

    // `--out` naming a `.json` path that is no directory keeps its old meaning, `--case-file`.
    let file = world.path("legacy/replay.legacy.json");
    let convert = kit(&[
        "fixture-from-transcript".as_ref(),
        recording.as_os_str(),
        "--id".as_ref(),
        "replay.legacy".as_ref(),
        "--out".as_ref(),
        file.as_os_str(),
    ]);
    assert_eq!(convert.status.code(), Some(0));
    assert_eq!(read_json(&file)["id"], "replay.legacy");
}

#[test]
fn a_daemon_that_left_the_runtime_s_group_is_reported_and_killed() {
    let world = World::new();
    let scenario = write_scenario(
        &world,
        json!([
            {"ready": {}},
            {"spawn_child": {"detach": "setsid", "clear_env": true, "ignore_sigterm": true}},
            {"exit": 0}
        ]),
    );
    let mut process = world.spawn(Some(&scenario), true);
    drop(process.0.stdin.take());
    let status = process.wait(Duration::from_secs(30));
    let journal = std::fs::read_to_string(world.path("journal.jsonl")).unwrap_or_default();
    let daemon = journal
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|entry| entry["event"] == "child")
        .and_then(|entry| entry["child_pid"].as_i64())
        .map(|pid| pid as i32)
        .unwrap_or_else(|| panic!("no daemon journaled: {journal}"));
    let alive = dsh_engine::procfs::is_live(daemon);
    if alive {
        let pid = nix::unistd::Pid::from_raw(daemon);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
    }
    assert!(!alive, "the daemon {daemon} outlived the recording");
    assert_eq!(status.code(), Some(0));
    let meta = read_json(&world.recording().join("meta.json"));
    assert_eq!(meta["processes_left"], true, "{meta:#}");
}
