//! The SDK scenario knobs the deeper client corpus plays (docs/sdk-clients.md), each on the wire:
//! a prompt refused with the real runtime's message, a turn that logs megabytes to stderr first,
//! SIGTERM ignored until SIGKILL, frames written in two pieces cut inside a multi-byte character,
//! a step whose text is the prompt as received (the headless task's shell metacharacters reach
//! the runtime untouched), and a decoy success before each error response.

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(30);

/// fake-dsh in a temp world (`project/` its cwd, `home/` its `DSH_HOME`) with `scenario`.
fn fake_dsh(root: &Path, args: &[&str], scenario: &Value) -> Command {
    for dir in ["project", "home"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    let file = root.join("scenario.json");
    std::fs::write(&file, json!({ "sdk": scenario }).to_string()).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_fake-dsh"));
    command
        .args(args)
        .current_dir(root.join("project"))
        .env("DSH_HOME", root.join("home"))
        .env("FAKE_DSH_JOURNAL", root.join("journal.jsonl"))
        .env("FAKE_DSH_WATCHDOG_SECS", "60")
        .env("FAKE_DSH_SCENARIO", file)
        .env_remove("FAKE_DSH_PERSONA")
        .env_remove("FAKE_DSH_VERSION");
    command
}

fn journal(root: &Path) -> Vec<Value> {
    std::fs::read_to_string(root.join("journal.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn line(value: Value) -> String {
    format!("{value}\n")
}

fn initialize() -> String {
    line(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"cwd": ".", "provider": "deepseek-official", "model": "m"}}))
}

fn prompt(id: u64, text: &str) -> String {
    line(
        json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
                "params": {"sessionId": "s-1", "contentBlocks": [{"type": "text", "text": text}]}}),
    )
}

/// Reads `child`'s stdout chunk by chunk (as `read` returns them) until `done` holds for what
/// came so far; the chunks.
fn read_until(child: &mut Child, done: impl Fn(&[u8]) -> bool) -> Vec<Vec<u8>> {
    let stdout = child.stdout.as_mut().unwrap();
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    let mut buffer = [0u8; 64 * 1024];
    while !done(&chunks.concat()) {
        let read = stdout.read(&mut buffer).unwrap();
        assert!(
            read > 0,
            "stdout ended: {:?}",
            String::from_utf8_lossy(&chunks.concat())
        );
        chunks.push(buffer[..read].to_vec());
    }
    chunks
}

fn frames(bytes: &[u8]) -> Vec<Value> {
    String::from_utf8(bytes.to_vec())
        .expect("whole frames are UTF-8")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn idle(bytes: &[u8]) -> bool {
    frames_so_far(bytes)
        .iter()
        .any(|v| v["params"]["status"] == "idle")
}

/// The whole lines of `bytes` as frames.
fn frames_so_far(bytes: &[u8]) -> Vec<Value> {
    let end = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    frames(&bytes[..end])
}

fn spawn(mut command: Command, stderr: Stdio) -> Child {
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap()
}

fn send(child: &mut Child, text: &str) {
    child
        .stdin
        .as_mut()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
}

/// Waits (bounded) for `child` to exit.
fn exited(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "still running");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_refused_prompt_gets_the_real_error_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = json!({"turns": [{"steps": [{"text": "one"}]}, {"refuse": "already-exists"},
                                    {"steps": [{"text": "three"}]}]});
    let mut child = spawn(
        fake_dsh(dir.path(), &["--profile", "sdk"], &scenario),
        Stdio::null(),
    );
    send(&mut child, &(initialize() + &prompt(2, "a")));
    read_until(&mut child, idle);
    send(&mut child, &prompt(3, "b"));
    let refused = |bytes: &[u8]| frames_so_far(bytes).iter().any(|v| v["id"] == 3);
    let after = frames(&read_until(&mut child, refused).concat());
    assert_eq!(after.len(), 1, "only the error: {after:#?}");
    assert_eq!(after[0]["error"]["code"], -32603);
    assert_eq!(
        after[0]["error"]["message"],
        "session \"s-1\" already exists"
    );
    // The refusal used its turn: the next prompt plays the third.
    send(&mut child, &prompt(4, "c"));
    let text = read_until(&mut child, idle);
    assert!(String::from_utf8_lossy(&text.concat()).contains("\"three\""));
    drop(child.stdin.take());
    assert_eq!(exited(&mut child).code(), Some(0));
}

#[test]
fn a_turn_logs_megabytes_to_stderr_before_its_events() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = json!({"turns": [{"stderr_bytes": 1_000_000, "steps": [{"text": "done"}]}]});
    let mut child = spawn(
        fake_dsh(dir.path(), &["--profile", "sdk"], &scenario),
        Stdio::piped(),
    );
    let mut stderr = child.stderr.take().unwrap();
    let drained = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        stderr.read_to_end(&mut bytes).unwrap();
        bytes
    });
    send(&mut child, &(initialize() + &prompt(2, "a")));
    let seen = frames(&read_until(&mut child, idle).concat());
    assert!(seen
        .iter()
        .any(|v| v["params"]["event"]["type"] == "turn/end"));
    drop(child.stdin.take());
    assert_eq!(exited(&mut child).code(), Some(0));
    let logged = drained.join().unwrap();
    assert_eq!(logged.len(), 1_000_000);
    assert!(logged.starts_with(b"fake-dsh: "));
}

#[test]
fn an_ignored_sigterm_is_journaled_and_only_sigkill_ends_the_process() {
    use nix::sys::signal::{kill, Signal};
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let scenario =
        json!({"ignore_sigterm": true, "ignore_stdin_eof": true, "ignore_shutdown": true});
    let mut child = spawn(
        fake_dsh(dir.path(), &["--profile", "sdk"], &scenario),
        Stdio::null(),
    );
    send(&mut child, &initialize());
    read_until(&mut child, |bytes| {
        frames_so_far(bytes).iter().any(|v| v["id"] == 1)
    });
    drop(child.stdin.take());
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    kill(pid, Signal::SIGTERM).unwrap();
    let deadline = Instant::now() + LIMIT;
    while !journal(dir.path()).iter().any(|e| e["event"] == "signal") {
        assert!(Instant::now() < deadline, "SIGTERM never journaled");
        std::thread::sleep(Duration::from_millis(10));
    }
    let signal = journal(dir.path())
        .into_iter()
        .find(|e| e["event"] == "signal")
        .unwrap();
    assert_eq!(
        (&signal["signal"], &signal["ignored"]),
        (&json!("SIGTERM"), &json!(true))
    );
    assert!(child.try_wait().unwrap().is_none(), "SIGTERM ended it");
    kill(pid, Signal::SIGKILL).unwrap();
    assert_eq!(exited(&mut child).signal(), Some(9));
}

#[test]
fn frames_are_split_inside_a_multi_byte_character_and_stay_whole_in_sum() {
    let dir = tempfile::tempdir().unwrap();
    let text = "naïve café — 日本語 🎉";
    let scenario = json!({"split_in_char_ms": 400, "turns": [{"steps": [{"text": text}]}]});
    let mut child = spawn(
        fake_dsh(dir.path(), &["--profile", "sdk"], &scenario),
        Stdio::null(),
    );
    send(&mut child, &(initialize() + &prompt(2, "a")));
    let chunks = read_until(&mut child, idle);
    // The pause comes after a lead byte: the read that ends there ends inside the character.
    assert!(
        chunks
            .iter()
            .any(|chunk| chunk.last().is_some_and(|b| *b >= 0xC0)),
        "no read ended inside a character"
    );
    let seen = frames(&chunks.concat());
    let said = seen.iter().find_map(|v| {
        let event = &v["params"]["event"];
        (event["type"] == "assistant/message").then(|| event["data"]["message"]["content"].clone())
    });
    assert!(said.unwrap().to_string().contains(text));
    drop(child.stdin.take());
    assert_eq!(exited(&mut child).code(), Some(0));
}

#[test]
fn an_echoed_step_answers_the_task_exactly_as_the_runtime_received_it() {
    let dir = tempfile::tempdir().unwrap();
    let task = "say $(id) `id` 'quoted' \"double\"; echo done & | > x";
    let scenario = json!({"turns": [{"steps": [{"echo_prompt": true, "text": "!"}]}]});
    let output = fake_dsh(dir.path(), &["--profile", "headless", task], &scenario)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        format!("{task}!\n")
    );
    let files: Vec<PathBuf> = std::fs::read_dir(dir.path().join("project"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(files.is_empty(), "nothing ran: {files:?}");
}

#[test]
fn an_error_response_follows_a_decoy_success_to_the_id_in_the_other_type() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = json!({"coerced_id_decoys": true});
    let mut child = spawn(
        fake_dsh(dir.path(), &["--profile", "sdk"], &scenario),
        Stdio::null(),
    );
    let resume = |id: Value| {
        line(
            json!({"jsonrpc": "2.0", "id": id, "method": "session/resume",
                    "params": {"sessionId": "never-stored"}}),
        )
    };
    send(
        &mut child,
        &(initialize() + &resume(json!(2)) + &resume(json!("4")) + &resume(json!("s3"))),
    );
    let answered = |bytes: &[u8]| frames_so_far(bytes).iter().any(|v| v["id"] == "s3");
    let seen = frames(&read_until(&mut child, answered).concat());
    let ids: Vec<(Value, bool)> = seen
        .iter()
        .map(|v| (v["id"].clone(), v.get("error").is_some()))
        .collect();
    // initialize succeeds with no decoy; the number id's refusal has one as a string, the
    // numeric string id's one as a number; another string id's none.
    assert_eq!(
        ids,
        [
            (json!(1), false),
            (json!("2"), false),
            (json!(2), true),
            (json!(4), false),
            (json!("4"), true),
            (json!("s3"), true)
        ],
        "{seen:#?}"
    );
    assert_eq!(seen[1]["result"], json!({}));
    assert_eq!(
        seen[2]["error"]["message"],
        "session \"never-stored\" not found"
    );
    drop(child.stdin.take());
    assert_eq!(exited(&mut child).code(), Some(0));
}
