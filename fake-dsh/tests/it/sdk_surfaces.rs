//! fake-dsh's SDK surfaces end to end, keylessly (no real runtime needed; the differential test
//! `conformance/tests/sdk_differential.rs` holds them to the real one): the JSON-RPC wire of
//! `--profile sdk`/`sdk-minimal` and the 0.1.1 persona, scripted turns (errors, background
//! subagents, unanswered approvals), the adversarial knobs the client corpus plays (CRLF, stray
//! responses, an ignored shutdown or EOF, a turn that signals itself, megabyte frames), process
//! endings, the journal, and `--profile headless`.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(30);

/// A temp world: `project/` (cwd) and `home/` (`DSH_HOME`).
struct World {
    root: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("project")).unwrap();
        std::fs::create_dir_all(root.path().join("home")).unwrap();
        World { root }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    fn command(&self, args: &[&str], scenario: Option<Value>) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_fake-dsh"));
        command
            .args(args)
            .current_dir(self.path("project"))
            .env("DSH_HOME", self.path("home"))
            .env("FAKE_DSH_JOURNAL", self.path("journal.jsonl"))
            .env("FAKE_DSH_WATCHDOG_SECS", "60")
            .env_remove("FAKE_DSH_SCENARIO")
            .env_remove("FAKE_DSH_PERSONA")
            .env_remove("FAKE_DSH_VERSION")
            .env_remove("DSH_CORDIS_CONFIG");
        if let Some(scenario) = scenario {
            let file = self.path("scenario.json");
            std::fs::write(&file, scenario.to_string()).unwrap();
            command.env("FAKE_DSH_SCENARIO", file);
        }
        command
    }

    fn journal(&self) -> Vec<Value> {
        std::fs::read_to_string(self.path("journal.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }
}

/// A running SDK process, its stdout lines arriving on a channel; killed and reaped on drop.
struct Client {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<Value>,
}

impl Client {
    fn start(mut command: Command) -> Client {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let (send, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = send.send(line);
            }
        });
        Client {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.child.stdin.as_mut().unwrap().write_all(bytes).unwrap();
    }

    fn request(&mut self, value: Value) {
        self.send(format!("{value}\n").as_bytes());
    }

    /// Reads until `done` holds for a line (panics after the limit).
    fn until(&mut self, done: impl Fn(&Value) -> bool) {
        let deadline = Instant::now() + LIMIT;
        loop {
            let line = self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|_| panic!("timed out; seen: {:#?}", self.seen));
            let value: Value = serde_json::from_str(&line).expect("stdout holds only JSON lines");
            self.seen.push(value.clone());
            if done(&value) {
                return;
            }
        }
    }

    fn until_idle(&mut self, session: &str) {
        self.until(|v| {
            v["method"] == "session.status"
                && v["params"]["sessionId"] == session
                && v["params"]["status"] == "idle"
        });
    }

    /// Closes stdin (if still open), reads the rest and returns the exit code.
    fn finish(mut self) -> (Option<i32>, Vec<Value>) {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + LIMIT;
        while let Ok(line) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            self.seen.push(serde_json::from_str(&line).unwrap());
        }
        let status = self.child.wait().unwrap();
        (status.code(), std::mem::take(&mut self.seen))
    }

    fn signal(&self, signal: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, signal).unwrap();
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn request(id: Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn initialize() -> Value {
    request(
        json!(1),
        "initialize",
        json!({"cwd": ".", "provider": "deepseek-official", "model": "deepseek-flash"}),
    )
}

fn prompt(id: u64, session: &str, text: &str) -> Value {
    request(
        json!(id),
        "session/prompt",
        json!({"sessionId": session, "contentBlocks": [{"type": "text", "text": text}]}),
    )
}

/// `event TYPE` / `status S` / `response ID` / `error ID` for each frame.
fn shapes(seen: &[Value]) -> Vec<String> {
    seen.iter()
        .map(|v| match v["method"].as_str() {
            Some("session.event") => {
                format!("event {}", v["params"]["event"]["type"].as_str().unwrap())
            }
            Some("session.status") => format!("status {}", v["params"]["status"].as_str().unwrap()),
            Some(other) => other.to_string(),
            None if v.get("error").is_some() => format!("error {}", v["id"]),
            None => format!("response {}", v["id"]),
        })
        .collect()
}

fn position(shapes: &[String], wanted: &str) -> usize {
    shapes
        .iter()
        .position(|s| s == wanted)
        .unwrap_or_else(|| panic!("no {wanted} in {shapes:#?}"))
}

#[test]
fn a_prompt_gets_its_receipt_and_running_before_the_response_and_shutdown_answers_last() {
    let world = World::new();
    let mut client = Client::start(world.command(&["--profile", "sdk"], None));
    client.request(initialize());
    client.request(prompt(2, "s-1", "Make a landing page"));
    client.until_idle("s-1");
    client.request(request(json!("x"), "bogus", json!({})));
    client.request(request(json!(4), "shutdown", json!({})));
    client.request(prompt(5, "s-1", "too late"));
    client.until(|v| v["id"] == 4);
    let (exit, seen) = client.finish();
    assert_eq!(exit, Some(0));
    let shapes = shapes(&seen);
    let receipt = position(&shapes, "event agent/inbox/spliced");
    assert!(receipt < position(&shapes, "status running"));
    assert!(position(&shapes, "status running") < position(&shapes, "response 2"));
    assert!(position(&shapes, "response 2") < position(&shapes, "event turn/end"));
    assert_eq!(
        shapes.last().unwrap(),
        "response 4",
        "shutdown's response is last"
    );
    let message_id = &seen[position(&shapes, "response 2")]["result"]["messageId"];
    let inserted = &seen[receipt]["params"]["event"]["data"]["inserted"][0]["id"];
    assert_eq!(message_id, inserted, "the receipt carries the messageId");
    let unknown = &seen[position(&shapes, "error \"x\"")]["error"];
    assert_eq!(unknown["code"], -32603);
    assert_eq!(
        unknown["message"],
        "unknown DeepSeek Harness SDK runtime method: bogus"
    );
    assert_eq!(
        seen[position(&shapes, "error 5")]["error"]["message"],
        "SDK server is shutting down"
    );
    let end = &seen[position(&shapes, "event turn/end")]["params"]["event"]["data"];
    assert_eq!(end["reason"], json!({"kind": "completed"}));
    let page = std::fs::read_to_string(world.path("project/index.html")).unwrap();
    assert!(page.contains("<html"), "the write tool wrote a real file");
    let journal = world.journal();
    assert_eq!(journal[0]["mode"], "sdk");
    assert_eq!(journal.last().unwrap()["event"], "exit");
    for entry in &journal {
        let checked = dsh_protocol::schema::validate("journal.schema.json", entry);
        assert!(checked.is_ok(), "{entry}: {checked:?}");
    }
}

#[test]
fn junk_batches_null_ids_and_a_last_line_without_newline_are_never_answered() {
    let world = World::new();
    let mut client = Client::start(world.command(&["--profile", "sdk-minimal"], None));
    let bogus = |id: Value| request(id, "bogus\u{2028}x", json!({}));
    client.send(b"not json\n");
    client.request(json!([bogus(json!(7))]));
    client.request(bogus(Value::Null));
    client.request(json!({"jsonrpc": "2.0", "method": "bogus"}));
    client.send(format!("{}\r\n", bogus(json!(1))).as_bytes());
    client.send(bogus(json!(2)).to_string().as_bytes());
    let (exit, seen) = client.finish();
    assert_eq!(exit, Some(0), "stdin EOF exits 0");
    assert_eq!(
        shapes(&seen),
        ["error 1"],
        "only the CRLF request is answered: {seen:#?}"
    );
}

#[test]
fn a_prompt_before_initialize_is_refused_by_0_1_5_and_accepted_by_the_0_1_1_persona() {
    for (args, refused) in [
        (&["--profile", "sdk-minimal"][..], true),
        (&["--persona", "0.1.1", "cordis.yml"][..], false),
    ] {
        let world = World::new();
        let mut client = Client::start(world.command(args, None));
        client.request(prompt(2, "s-0", "early"));
        client.until(|v| v["id"] == 2);
        let answer = client.seen.last().unwrap().clone();
        if refused {
            assert_eq!(answer["error"]["message"], "SDK server is not initialized");
        } else {
            assert!(answer["result"]["messageId"].is_string(), "{answer}");
            client.until_idle("s-0");
            let chunks = shapes(&client.seen).contains(&"event assistant/chunk".to_string());
            assert!(chunks, "0.1.1 streams assistant/chunk");
        }
    }
}

/// A client that pipelines its session requests behind a slow `initialize` (the variable's
/// latency, or the scenario's) has them refused as the real 0.2.1rc2 and 0.1.5rc1 refuse them: of
/// the lines read together, the unknown methods' errors first, then `SDK server is not
/// initialized` for each session request in the order sent (0.1.5 knows no `session/resume` nor
/// working-directory method), then `initialize`'s response.
#[test]
fn requests_pipelined_behind_a_slow_initialize_are_refused_like_the_real_runtime() {
    let early = [
        initialize(),
        request(json!(2), "session/resume", json!({"sessionId": "s-1"})),
        prompt(3, "s-1", "early"),
        request(
            json!("4"),
            "session/working-directory/get",
            json!({"sessionId": "s-1"}),
        ),
        request(json!(5), "bogus", json!({})),
    ];
    let batch: String = early.iter().map(|line| format!("{line}\n")).collect();
    let slow = json!({"sdk": {"initialize_delay_ms": 300}});
    for (persona, by_variable, order) in [
        (
            "0.2.1",
            true,
            &["error 5", "error 2", "error 3", "error \"4\"", "response 1"][..],
        ),
        (
            "0.2.1",
            false,
            &["error 5", "error 2", "error 3", "error \"4\"", "response 1"][..],
        ),
        (
            "0.1.5",
            true,
            &["error 2", "error \"4\"", "error 5", "error 3", "response 1"][..],
        ),
    ] {
        let world = World::new();
        let args = ["--persona", persona, "--profile", "sdk-minimal"];
        let mut command = world.command(&args, (!by_variable).then(|| slow.clone()));
        if by_variable {
            command.env("FAKE_DSH_INITIALIZE_DELAY_MS", "300");
        }
        let mut client = Client::start(command);
        client.send(batch.as_bytes());
        client.until(|v| v["id"] == 1);
        assert_eq!(shapes(&client.seen), order, "{persona}: {:#?}", client.seen);
        let refused = client
            .seen
            .iter()
            .filter(|v| v["error"]["message"] == "SDK server is not initialized")
            .count();
        assert_eq!(refused, if persona == "0.2.1" { 3 } else { 1 });
    }
}

/// A turn's `idle_before_receipt`: the session's `idle` comes right before the prompt's receipt
/// (an earlier turn's, read late), and the turn then runs as usual to its own `idle`.
#[test]
fn an_idle_before_the_receipt_precedes_a_normal_turn() {
    let world = World::new();
    let scenario = json!({"sdk": {"turns": [{"idle_before_receipt": true,
                                             "steps": [{"text": "late"}]}]}});
    let mut client = Client::start(world.command(&["--profile", "sdk"], Some(scenario)));
    client.request(initialize());
    client.request(prompt(2, "s-1", "hello"));
    client.until(|v| v["params"]["event"]["type"] == "turn/end");
    client.until_idle("s-1");
    let shapes = shapes(&client.seen);
    let receipt = position(&shapes, "event agent/inbox/spliced");
    assert_eq!(shapes[receipt - 1], "status idle", "{shapes:#?}");
    assert_eq!(shapes.last().unwrap(), "status idle");
    assert!(position(&shapes, "status running") > receipt);
}

#[test]
fn signals_mid_turn_end_the_process_like_the_real_runtime() {
    use nix::sys::signal::Signal;
    let slow = json!({"sdk": {"turns": [{"steps": [{"delay_ms": 20000, "text": "never"}]}]}});
    for (signal, code) in [(Signal::SIGTERM, 0), (Signal::SIGINT, 130)] {
        let world = World::new();
        let mut client = Client::start(world.command(&["--profile", "sdk"], Some(slow.clone())));
        client.request(initialize());
        client.request(prompt(2, "s-1", "hello"));
        client.until(|v| v["params"]["event"]["type"] == "request/context");
        client.signal(signal);
        let deadline = Instant::now() + LIMIT;
        let status = loop {
            if let Some(status) = client.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "{signal} did not end the process"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(status.code(), Some(code), "{signal}");
        let (_, seen) = client.finish();
        assert!(
            !shapes(&seen).contains(&"event turn/end".to_string()),
            "{signal}: a cut turn has no turn/end"
        );
    }
}

#[test]
fn scripted_turns_error_then_complete_and_a_background_child_wakes_the_root() {
    let world = World::new();
    let scenario = json!({"sdk": {"turns": [
        {"end": "error"},
        {"steps": [{"text": "started a child", "tool_calls": [
            {"name": "write", "arguments": {"file_path": "x.txt", "content": "x"}, "needs_approval": true}]}],
         "background_subagent": {"finish_after_ms": 50, "wake_text": "child is done"}},
        {"steps": [{"text": "cut short"}], "end": "max-tokens"}]}});
    let mut client = Client::start(world.command(&["--profile", "sdk"], Some(scenario)));
    client.request(initialize());
    client.request(prompt(2, "s-1", "first"));
    client.until_idle("s-1");
    client.request(prompt(3, "s-1", "second"));
    client.until(|v| v["method"] == "subagent.finished");
    client.until_idle("s-1");
    client.request(prompt(4, "s-1", "third"));
    client.until_idle("s-1");
    let (_, seen) = client.finish();
    let ends: Vec<&Value> = seen
        .iter()
        .filter(|v| v["params"]["event"]["type"] == "turn/end" && v["params"]["sessionId"] == "s-1")
        .map(|v| &v["params"]["event"]["data"]["reason"]["kind"])
        .collect();
    assert_eq!(
        ends,
        ["error", "completed", "completed", "max-tokens"],
        "error, child turn, wake turn, max-tokens"
    );
    let shapes = shapes(&seen);
    let started = position(&shapes, "subagent.started");
    let finished = position(&shapes, "subagent.finished");
    let idles: Vec<usize> = shapes
        .iter()
        .enumerate()
        .filter(|(_, s)| *s == "status idle")
        .map(|(i, _)| i)
        .collect();
    assert!(
        idles.iter().any(|&i| started < i && i < finished),
        "the root goes idle before its child finishes"
    );
    let decided = seen
        .iter()
        .find(|v| v["params"]["event"]["type"] == "approval/decided")
        .unwrap();
    assert_eq!(decided["params"]["event"]["data"]["outcome"], "unavailable");
    assert!(
        !world.path("project/x.txt").exists(),
        "the unapproved write did not happen"
    );
}

#[test]
fn a_session_an_earlier_process_made_is_refused_like_the_real_runtime() {
    let world = World::new();
    for attempt in 0..2 {
        let mut client = Client::start(world.command(&["--profile", "sdk-minimal"], None));
        client.request(initialize());
        client.request(prompt(2, "s-1", "hello"));
        client.until(|v| v["id"] == 2);
        let answer = client.seen.last().unwrap().clone();
        if attempt == 0 {
            assert!(answer["result"]["messageId"].is_string());
            client.until_idle("s-1");
        } else {
            assert_eq!(answer["error"]["message"], "session \"s-1\" already exists");
        }
    }
    let log = world.path("home/sessions").join(format!(
        "--{}--",
        world
            .path("project")
            .to_string_lossy()
            .trim_start_matches('/')
            .replace('/', "-")
    ));
    assert!(
        log.join("s-1/session.v4.jsonl").is_file() && log.join("s-1/session.lock").is_file(),
        "the session log is kept like the real 0.2.1 one (plain JSON lines on sdk-minimal)"
    );
}

fn headless(
    world: &World,
    args: &[&str],
    scenario: Option<Value>,
) -> (Option<i32>, String, String) {
    let mut full = vec!["--profile", "headless"];
    full.extend_from_slice(args);
    let output = world
        .command(&full, scenario)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

#[test]
fn headless_prints_the_final_text_streams_reasoning_and_fails_with_exit_1() {
    let world = World::new();
    // The launcher's overlay (the one the 0.1.5rc1 wheel's headless needs), taken and skipped.
    let patch = world.path("p.yml");
    std::fs::write(&patch, "- id: session-title-llm\n  disabled: true\n").unwrap();
    let (exit, stdout, stderr) = headless(
        &world,
        &["--patch", patch.to_str().unwrap(), "Make a", "landing page"],
        None,
    );
    assert_eq!((exit, stdout.as_str()), (Some(0), "I wrote index.html.\n"));
    assert!(stderr.starts_with("dsh: reasoning:\n"), "{stderr}");
    assert!(world.path("project/index.html").is_file());
    assert_eq!(world.journal()[0]["mode"], "headless");
    let failing =
        json!({"sdk": {"turns": [{"end": "error", "error": {"code": "AUTH", "message": "nope"}}]}});
    let (exit, stdout, stderr) = headless(&world, &["say hi"], Some(failing));
    assert_eq!(
        (exit, stdout.as_str(), stderr.as_str()),
        (Some(1), "\n", "dsh: AUTH: nope\n")
    );
    let (exit, stdout, stderr) = headless(&world, &[], None);
    assert_eq!((exit, stdout.is_empty()), (Some(1), true));
    assert!(stderr.starts_with("dsh: a task is required"), "{stderr}");
    let (exit, stdout, stderr) = headless(&world, &["--persona", "0.1.5"], None);
    assert_eq!((exit, stdout.is_empty()), (Some(1), true));
    assert!(stderr.starts_with("error: a task is required"), "{stderr}");
}

/// `fake-dsh ARGS` with `stdin` piped in, its exit code, stdout and stderr.
fn piped(world: &World, args: &[&str], stdin: &str) -> (Option<i32>, String, String) {
    let mut child = world
        .command(args, None)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    (
        output.status.code(),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

#[test]
fn headless_0_2_1_streams_json_events_reads_the_task_from_stdin_and_adopts_a_session() {
    let world = World::new();
    let (exit, stdout, stderr) = piped(&world, &["headless", "--json", "-"], "Make a page\n");
    assert_eq!(exit, Some(0), "{stderr}");
    assert!(stderr.is_empty(), "--json says nothing on stderr: {stderr}");
    let lines: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let kinds: Vec<String> = lines
        .iter()
        .map(|l| match l["phase"].as_str() {
            Some(phase) => phase.to_string(),
            None => l["type"].as_str().unwrap().to_string(),
        })
        .collect();
    assert_eq!(
        kinds.join(" "),
        "session turn_start step_start thinking tool_call tool_result step_end step_start \
         thinking text step_end turn_end final"
    );
    let session = lines[0]["sessionId"].as_str().unwrap().to_string();
    assert!(session.starts_with("session-"), "{session}");
    assert_eq!(lines[0]["cwd"], json!(world.path("project")));
    assert_eq!(lines[4]["tool"], "write");
    assert_eq!(lines[4]["input"]["file_path"], "index.html");
    assert_eq!(lines[5]["status"], "completed");
    assert_eq!(
        lines[12],
        json!({"type": "final", "text": "I wrote index.html."})
    );

    let (exit, stdout, stderr) = piped(
        &world,
        &["--profile", "headless", "--session-id", "nope", "go"],
        "",
    );
    assert_eq!((exit, stdout.as_str()), (Some(1), ""));
    assert_eq!(
        stderr,
        "dsh: session \"nope\" does not exist; omit --session-id to start a new Session\n"
    );
    let (exit, stdout, _) = piped(
        &world,
        &[
            "--profile",
            "headless",
            "--json",
            "--session-id",
            &session,
            "make it green",
        ],
        "",
    );
    assert_eq!(exit, Some(0));
    let turn: Value = serde_json::from_str(stdout.lines().nth(1).unwrap()).unwrap();
    assert_eq!(turn["turn"], 2, "the adopted session's turn count goes on");
    assert!(stdout.ends_with("{\"text\":\"I made index.html green.\",\"type\":\"final\"}\n"));
    let (exit, _, stderr) = piped(&world, &["--profile", "headless", "--session-id"], "");
    assert_eq!(
        (exit, stderr.as_str()),
        (
            Some(1),
            "error: option '--session-id <id>' argument missing\n"
        )
    );
    let (exit, stdout, _) = piped(&world, &["--profile", "headless", "--help"], "");
    assert_eq!(exit, Some(0));
    assert!(stdout.contains("--session-id <id>") && stdout.contains("--json"));
}

#[test]
fn a_bad_sdk_scenario_exits_2_naming_the_file() {
    let world = World::new();
    let scenario = json!({"sdk": {"turns": [{"end": "bored"}]}});
    let output = world
        .command(&["--profile", "sdk"], Some(scenario))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("scenario.json") && stderr.contains("bored"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
}

/// The output of `fake-dsh --profile sdk` given `input` on stdin (then EOF), raw.
fn raw_session(scenario: Value, input: &[Value]) -> (Option<i32>, String) {
    let world = World::new();
    let mut child = world
        .command(&["--profile", "sdk"], Some(scenario))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for value in input {
        stdin.write_all(format!("{value}\n").as_bytes()).unwrap();
    }
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    (
        output.status.code(),
        String::from_utf8(output.stdout).unwrap(),
    )
}

#[test]
fn crlf_and_stray_responses_shape_every_frame() {
    let scenario = json!({"sdk": {"crlf": true, "stray_responses": true}});
    let bogus = |id: Value| request(id, "bogus", json!({}));
    let input = [initialize(), bogus(json!("2")), bogus(json!("s3"))];
    let (code, stdout) = raw_session(scenario, &input);
    assert_eq!(code, Some(0));
    let lines: Vec<&str> = stdout.split_inclusive('\n').collect();
    assert!(lines.iter().all(|l| l.ends_with("\r\n")), "{stdout:?}");
    let ids: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str::<Value>(l.trim_end()).unwrap()["id"].clone())
        .collect();
    // Each stray's id is the response's in the other type, where it has one.
    let strays_then_answers = [
        json!("1"),
        json!(1),
        json!(2),
        json!("2"),
        json!("fake-dsh-stray"),
        json!("s3"),
    ];
    assert_eq!(ids, strays_then_answers, "{stdout:?}");
}

#[test]
fn an_ignored_shutdown_is_never_answered_and_eof_still_ends_the_process() {
    let world = World::new();
    let scenario = json!({"sdk": {"ignore_shutdown": true}});
    let mut client = Client::start(world.command(&["--profile", "sdk"], Some(scenario)));
    client.request(initialize());
    client.request(request(json!(2), "shutdown", json!({})));
    client.request(request(json!(3), "bogus", json!({})));
    client.until(|v| v["id"] == 3);
    let (code, seen) = client.finish();
    assert_eq!(code, Some(0));
    assert!(
        !shapes(&seen).contains(&"response 2".to_string()),
        "{seen:#?}"
    );
}

#[test]
fn an_ignored_eof_leaves_the_process_running_until_a_signal() {
    let world = World::new();
    let scenario = json!({"sdk": {"ignore_stdin_eof": true}});
    let mut client = Client::start(world.command(&["--profile", "sdk"], Some(scenario)));
    client.request(initialize());
    client.until(|v| v["id"] == 1);
    drop(client.child.stdin.take());
    std::thread::sleep(Duration::from_millis(300));
    assert!(client.child.try_wait().unwrap().is_none(), "EOF ended it");
    client.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(client.finish().0, Some(0));
}

#[test]
fn a_turn_that_signals_itself_dies_mid_turn_and_padding_makes_megabyte_frames() {
    use std::os::unix::process::ExitStatusExt;
    for (signal, code, killed) in [("TERM", Some(0), None), ("KILL", None, Some(9))] {
        let world = World::new();
        let scenario = json!({"sdk": {"turns": [{"steps": [{"text": "never", "delay_ms": 5000}],
                                                  "signal_self": {"signal": signal, "after_ms": 100}}]}});
        let mut client = Client::start(world.command(&["--profile", "sdk"], Some(scenario)));
        client.request(initialize());
        client.request(prompt(2, "s-1", "hello"));
        // Not `wait()`: it would close stdin first, and EOF ends the process too.
        let deadline = Instant::now() + LIMIT;
        let status = loop {
            if let Some(status) = client.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "{signal}: still running");
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!((status.code(), status.signal()), (code, killed), "{signal}");
        let (_, seen) = client.finish();
        assert!(
            !shapes(&seen).contains(&"event turn/end".to_string()),
            "{signal}"
        );
    }
    let padded = json!({"sdk": {"turns": [{"steps": [{"text": "long", "pad_bytes": 3_000_000}]}]}});
    let world = World::new();
    let mut client = Client::start(world.command(&["--profile", "sdk"], Some(padded)));
    client.request(initialize());
    client.request(prompt(2, "s-1", "hello"));
    client.until_idle("s-1");
    let text = client.seen.iter().find_map(|v| {
        let event = &v["params"]["event"];
        (event["type"] == "assistant/message")
            .then(|| event["data"]["message"]["content"][0]["text"].clone())
    });
    assert_eq!(text.unwrap().as_str().unwrap().len(), 3_000_004);
}

/// Every file under `dir` (links not followed) with its contents, or the link's target.
fn tree(dir: &std::path::Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
        let (path, kind) = (entry.path(), entry.file_type().unwrap());
        if kind.is_dir() {
            found.extend(tree(&path));
        } else if kind.is_symlink() {
            let target = std::fs::read_link(&path).unwrap();
            found.push((path, target.into_os_string().into_encoded_bytes()));
        } else {
            found.push((path.clone(), std::fs::read(&path).unwrap()));
        }
    }
    found.sort();
    found
}

/// A Harness home the real 0.1.5 runtime has used: its session store and shared packages.
fn real_runtime_home(home: &std::path::Path) {
    let log = home.join("sessions/--w-project--/s-1/session.v3.jsonl");
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    std::fs::write(&log, "{\"type\":\"session\",\"version\":3}\n").unwrap();
    std::fs::create_dir_all(home.join("profiles/node_modules")).unwrap();
}

#[test]
fn the_sdk_surfaces_never_write_into_a_home_holding_files_fake_dsh_did_not_create() {
    let world = World::new();
    let real = world.path("real-home");
    real_runtime_home(&real);
    real_runtime_home(&world.path("user/.dsh"));
    std::os::unix::fs::symlink(&real, world.path("linked-home")).unwrap();
    let before = (tree(&real), tree(&world.path("user")));
    for variant in ["real-home", "linked-home", "unset"] {
        let configure = |command: &mut Command| {
            match variant {
                "unset" => command
                    .env_remove("DSH_HOME")
                    .env("HOME", world.path("user")),
                home => command.env("DSH_HOME", world.path(home)),
            };
        };
        let mut sdk = world.command(&["--profile", "sdk"], None);
        configure(&mut sdk);
        let mut client = Client::start(sdk);
        client.request(initialize());
        client.request(prompt(2, "s-2", "Make a landing page"));
        client.until(|v| v["id"] == 2);
        let refused = client.seen.last().unwrap()["error"]["message"].clone();
        let refused = refused
            .as_str()
            .unwrap_or_else(|| panic!("{variant}: {refused}"));
        assert!(
            refused.contains("will not write into the Harness home")
                && refused.contains("DSH_HOME"),
            "{variant}: {refused}"
        );
        assert_eq!(client.finish().0, Some(0), "{variant}");
        let mut headless = world.command(&["--profile", "headless", "Make a page"], None);
        configure(&mut headless);
        let output = headless.stdin(Stdio::null()).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{variant}: {stderr}");
        assert!(
            stderr.contains("DSH_HOME") && stderr.contains("sessions/--w-project--"),
            "{stderr}"
        );
        assert!(output.stdout.is_empty(), "{variant}");
    }
    assert_eq!(
        (tree(&real), tree(&world.path("user"))),
        before,
        "nothing written"
    );
    assert!(
        !world.path("project/index.html").exists(),
        "no turn was played"
    );
}

/// The text and `isError` of every `tool/result` seen (0.2.1's shape: the message is the tool's;
/// 0.1.5's: a user message holding a `tool-result` block).
fn tool_results(seen: &[Value]) -> Vec<(String, bool)> {
    seen.iter()
        .filter(|v| v["params"]["event"]["type"] == "tool/result")
        .map(|v| {
            let message = &v["params"]["event"]["data"]["message"];
            let result = if message["role"] == "tool" {
                message
            } else {
                &message["content"][0]
            };
            let text = result["content"][0]["text"].as_str().unwrap().to_string();
            (text, result["isError"] == true)
        })
        .collect()
}

/// A session modifies only a file it read or wrote in this process (0.1.5 and 0.2.1, observed:
/// conformance/tests/sdk_differential.rs): another session's write of it is refused until it
/// reads it.
#[test]
fn a_session_modifies_only_a_file_it_read_or_wrote() {
    let call =
        |name: &str| json!({"name": name, "arguments": {"file_path": "page.html", "content": "x"}});
    let turn = |names: &[&str]| json!({"steps": [{"tool_calls": names.iter().map(|name| call(name)).collect::<Vec<_>>()}]});
    for persona in ["0.1.5", "0.2.1"] {
        let world = World::new();
        let scenario = json!({"sdk": {"turns": [
            turn(&["write", "write"]), turn(&["write", "read", "write"])]}});
        let mut client = Client::start(
            world.command(&["--persona", persona, "--profile", "sdk"], Some(scenario)),
        );
        client.request(initialize());
        client.request(prompt(2, "s-1", "create it, then change it"));
        client.until_idle("s-1");
        client.request(prompt(3, "s-2", "change it, read it, change it"));
        client.until_idle("s-2");
        let (_, seen) = client.finish();
        let refused: Vec<bool> = tool_results(&seen)
            .iter()
            .map(|(_, error)| *error)
            .collect();
        assert_eq!(refused, [false, false, true, false, false], "{persona}");
        let error = seen
            .iter()
            .filter(|v| v["params"]["event"]["type"] == "tool/result")
            .nth(2)
            .map(|v| v["params"]["event"]["data"]["error"].clone());
        assert_eq!(
            error,
            Some(json!({"name": "FsError", "code": "FS_NOT_OBSERVED"})),
            "{persona}"
        );
    }
}

#[test]
fn the_write_tool_never_writes_outside_the_cwd_nor_through_a_link() {
    let world = World::new();
    let outside = world.path("outside.html");
    std::fs::write(&outside, "untouched").unwrap();
    std::os::unix::fs::symlink(&outside, world.path("project/index.html")).unwrap();
    let absolute = world.path("absolute.txt");
    let write =
        |path: &str| json!({"name": "write", "arguments": {"file_path": path, "content": "x"}});
    let scenario = json!({"sdk": {"turns": [{"steps": [{"tool_calls": [
        write("../escaped.txt"), write(absolute.to_str().unwrap()), write("inside.txt")]}]}]}});
    let mut client = Client::start(world.command(&["--profile", "sdk"], Some(scenario)));
    client.request(initialize());
    client.request(prompt(2, "s-1", "scripted writes"));
    client.until_idle("s-1");
    client.request(prompt(3, "s-1", "Make a landing page"));
    client.until_idle("s-1");
    let (_, seen) = client.finish();
    let results = tool_results(&seen);
    let refused: Vec<bool> = results.iter().map(|(_, error)| *error).collect();
    assert_eq!(refused, [true, true, false, true], "{results:#?}");
    for (text, _) in [&results[0], &results[1]] {
        assert!(text.contains("outside the project directory"), "{text}");
    }
    assert!(results[3].0.contains("symbolic link"), "{}", results[3].0);
    assert!(!world.path("escaped.txt").exists() && !absolute.exists());
    assert_eq!(
        std::fs::read_to_string(world.path("project/inside.txt")).unwrap(),
        "x"
    );
    let headless = world
        .command(&["--profile", "headless", "Make a page"], None)
        .output()
        .unwrap();
    assert_eq!(
        headless.status.code(),
        Some(0),
        "a failed tool does not fail the turn"
    );
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "untouched");
    let ends = seen
        .iter()
        .filter(|v| v["params"]["event"]["type"] == "turn/end");
    assert!(ends
        .map(|v| &v["params"]["event"]["data"]["reason"]["kind"])
        .all(|k| k == "completed"));
}

#[test]
fn a_request_line_over_1_mib_ends_the_process_with_a_clear_error_and_is_not_kept() {
    let world = World::new();
    let mut child = world
        .command(&["--profile", "sdk"], None)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let padded = |id: u64, bytes: usize| {
        let pad = "x".repeat(bytes);
        format!("{}\n", request(json!(id), "bogus", json!({"pad": pad})))
    };
    let writer = std::thread::spawn(move || {
        // Written whole before the next line: the process answers it, then meets the long one.
        let lines = [
            format!("{}\n", initialize()),
            padded(2, 1_000_000),
            padded(3, 3 * 1024 * 1024),
            format!("{}\n", request(json!(4), "bogus", json!({}))),
        ];
        for line in lines {
            // The process exits part-way through the long line: a broken pipe is expected.
            if stdin.write_all(line.as_bytes()).is_err() {
                return;
            }
        }
    });
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("stdin line 3 is longer than 1048576 bytes"),
        "{stderr}"
    );
    let ids: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["id"].clone())
        .collect();
    assert_eq!(
        ids,
        [json!(1), json!(2)],
        "a line under the bound is answered"
    );
    let journal = std::fs::metadata(world.path("journal.jsonl"))
        .unwrap()
        .len();
    assert!(
        journal < 1_100_000,
        "the journal holds line 2, not line 3: {journal} bytes"
    );
    let entries = world.journal();
    assert_eq!(entries.last().unwrap()["event"], "exit");
    let mut raws = entries.iter().filter_map(|e| e["raw"].as_str());
    assert!(raws.any(|raw| raw == "[stdin line 3: over 1048576 bytes, not kept]"));
}

/// The last response or error to `id` among the frames seen.
fn answer_to(seen: &[Value], id: u64) -> Value {
    seen.iter()
        .rev()
        .find(|v| v["id"] == id && v.get("method").is_none())
        .cloned()
        .unwrap_or_else(|| panic!("no answer to {id} in {seen:#?}"))
}

/// The event types seen for one session, in order.
fn event_types(seen: &[Value]) -> Vec<String> {
    seen.iter()
        .filter(|v| v["method"] == "session.event")
        .map(|v| v["params"]["event"]["type"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_0_2_1_persona_is_the_default_with_its_events_and_tool_result_shape() {
    let world = World::new();
    let mut client = Client::start(world.command(&["sdk"], None));
    client.request(initialize());
    client.request(prompt(2, "s-1", "Make a landing page"));
    client.until_idle("s-1");
    let (code, seen) = client.finish();
    assert_eq!(code, Some(0));
    let types = event_types(&seen);
    let expected = "permission/preset sandbox/mode approval/policy agent/inbox/spliced turn/start \
        agent/inbox/spliced step/start system/message user/message user/message request/header \
        request/context session/title session-log-deepseek/delivery-accepted assistant/message \
        tool/call tool/result step/end step/start session-log-deepseek/delivery-accepted \
        assistant/message step/end turn/end";
    assert_eq!(
        types.join(" "),
        expected.split_whitespace().collect::<Vec<_>>().join(" ")
    );
    let events: Vec<&Value> = seen
        .iter()
        .filter(|v| v["method"] == "session.event")
        .map(|v| &v["params"]["event"])
        .collect();
    for (index, event) in events.iter().enumerate() {
        if event["type"] == "session-log-deepseek/delivery-accepted" {
            assert_eq!(
                event["data"],
                json!({"sessionId": "s-1", "sessionFormatVersion": 4,
                       "throughSeq": events[index - 1]["seq"]})
            );
        }
    }
    let call = events.iter().find(|e| e["type"] == "tool/call").unwrap();
    let result = events.iter().find(|e| e["type"] == "tool/result").unwrap();
    let message = &result["data"]["message"];
    assert_eq!(message["role"], "tool");
    assert_eq!(message["toolCallId"], call["data"]["callId"]);
    assert_eq!(message["isError"], false);
    assert_eq!(result["sourceEventSeqs"], json!([call["seq"]]));
    let page = world.path("project/index.html");
    assert_eq!(
        message["content"][0]["text"],
        format!(
            "<path>{}</path>\n<type>file</type>\n<content>\nCreated file\n</content>",
            page.display()
        )
    );
    assert!(page.is_file());
}

#[test]
fn each_persona_prints_its_version_and_the_sdk_help_without_serving() {
    let world = World::new();
    let run = |args: &[&str], persona_env: Option<&str>| {
        let mut command = world.command(args, None);
        if let Some(persona) = persona_env {
            command.env("FAKE_DSH_PERSONA", persona);
        }
        let output = command.stdin(Stdio::piped()).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{args:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    assert_eq!(
        run(&["--profile", "sdk", "--version"], None),
        "0.2.1-rc.2\n"
    );
    assert_eq!(run(&["sdk", "-V"], None), "0.2.1-rc.2\n");
    assert_eq!(
        run(&["--persona", "0.1.5", "--version"], None),
        "0.1.5-rc.1\n"
    );
    assert_eq!(
        run(&["--profile", "sdk", "--version"], Some("0.1.5")),
        "0.1.5-rc.1\n"
    );
    assert_eq!(run(&["--version"], Some("0.2.1")), "0.2.1-rc.2\n");
    assert_eq!(
        run(&["--profile", "sdk-minimal", "--help"], None),
        "Usage: dsh --profile sdk-minimal [options]\n\nServe DeepSeek Harness SDK clients over \
         stdio JSON-RPC.\n\nOptions:\n  -h, --help  show this help\n\nExample:\n  dsh --profile \
         sdk-minimal     serve one SDK runtime until its client disconnects\n\n"
    );
    let bad = world
        .command(&["--profile", "sdk"], None)
        .env("FAKE_DSH_PERSONA", "9.9")
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("expected 0.2.1, 0.1.5 or 0.1.1"));
}

#[test]
fn the_working_directory_moves_with_the_real_errors_and_the_file_tools_follow_it() {
    let world = World::new();
    std::fs::create_dir_all(world.path("project/sub")).unwrap();
    std::fs::write(world.path("project/afile"), "x").unwrap();
    let mut client = Client::start(world.command(&["--profile", "sdk"], None));
    let wd = |id: u64, method: &str, params: Value| {
        request(
            json!(id),
            &format!("session/working-directory/{method}"),
            params,
        )
    };
    client.request(wd(9, "get", json!({"sessionId": "s-1"})));
    client.until(|v| v["id"] == 9);
    client.request(initialize());
    client.until(|v| v["id"] == 1);
    let project = world.path("project");
    let sub = project.join("sub");
    let cases = [
        (
            wd(2, "get", json!({"sessionId": "s-1"})),
            Ok(project.clone()),
        ),
        (
            wd(3, "set", json!({"sessionId": "s-1", "path": "sub"})),
            Ok(sub.clone()),
        ),
        (
            wd(4, "set", json!({"sessionId": "s-1", "path": "."})),
            Ok(sub.clone()),
        ),
        (
            wd(5, "set", json!({"sessionId": "s-1", "path": "missing"})),
            Err("working-directory: directory does not exist: \"missing\""),
        ),
        (
            wd(6, "set", json!({"sessionId": "s-1", "path": "../afile"})),
            Err("working-directory: directory does not exist: \"../afile\""),
        ),
        (
            wd(7, "set", json!({"sessionId": "s-1", "path": ""})),
            Err("working-directory: cd must not be empty"),
        ),
        (
            wd(8, "set", json!({"sessionId": "s-1", "path": 7})),
            Err("working-directory set requires a path string"),
        ),
        (
            wd(10, "get", json!({})),
            Err("working-directory requests require a non-empty sessionId"),
        ),
        (wd(11, "get", json!({"sessionId": "s-1"})), Ok(sub.clone())),
    ];
    for (call, expected) in &cases {
        let id = call["id"].as_u64().unwrap();
        client.request(call.clone());
        client.until(|v| v["id"] == id);
        let answer = answer_to(&client.seen, id);
        match expected {
            Ok(cwd) => assert_eq!(answer["result"], json!({"cwd": cwd}), "{call}"),
            Err(message) => {
                assert_eq!(
                    answer["error"],
                    json!({"code": -32603, "message": message}),
                    "{call}"
                )
            }
        }
    }
    client.request(prompt(12, "s-1", "Make a landing page"));
    client.until_idle("s-1");
    let (_, seen) = client.finish();
    assert_eq!(
        answer_to(&seen, 9)["error"]["message"],
        "SDK server is not initialized"
    );
    let types = event_types(&seen);
    // One change (the second `set` stays where it is): the change, its notice for the next step,
    // and in the turn: the notice taken, then read as a user message before the prompt.
    let change = position(&types, "working-directory/change");
    assert_eq!(types[change + 1], "agent/inbox/spliced");
    assert_eq!(
        types
            .iter()
            .filter(|t| *t == "working-directory/change")
            .count(),
        1
    );
    let notices: Vec<&Value> = seen
        .iter()
        .map(|v| &v["params"]["event"])
        .filter(|e| {
            e["type"] == "user/message" && e["data"]["source"]["kind"] == "working-directory"
        })
        .collect();
    assert_eq!(notices.len(), 1);
    assert_eq!(
        notices[0]["data"]["content"][0]["text"],
        format!(
            "The working directory changed from {:?} to {:?}.",
            project.display().to_string(),
            sub.display().to_string()
        )
    );
    assert!(
        sub.join("index.html").is_file(),
        "the write followed the new cwd"
    );
    assert!(!project.join("index.html").exists());
}

#[test]
fn a_stored_session_is_resumed_in_a_new_process_and_its_count_goes_on() {
    let world = World::new();
    std::fs::create_dir_all(world.path("project/sub")).unwrap();
    let mut first = Client::start(world.command(&["--profile", "sdk"], None));
    first.request(initialize());
    first.request(prompt(2, "s-1", "Make a landing page"));
    first.until_idle("s-1");
    first.request(request(
        json!(3),
        "session/working-directory/set",
        json!({"sessionId": "s-1", "path": "sub"}),
    ));
    first.until(|v| v["id"] == 3);
    let (_, before) = first.finish();
    let last_seq = before
        .iter()
        .filter_map(|v| v["params"]["event"]["seq"].as_u64())
        .max()
        .unwrap();

    let mut second = Client::start(world.command(&["--profile", "sdk"], None));
    second.request(initialize());
    second.request(prompt(2, "s-1", "without resuming"));
    second.until(|v| v["id"] == 2);
    let resume = |id: u64, session: Value| {
        request(json!(id), "session/resume", json!({"sessionId": session}))
    };
    for (id, session) in [
        (3, json!("nope")),
        (4, json!("")),
        (5, json!("s-1")),
        (6, json!("s-1")),
    ] {
        second.request(resume(id, session));
        second.until(|v| v["id"] == id);
    }
    // While this process holds the session, another one cannot resume it.
    let mut third = Client::start(world.command(&["--profile", "sdk"], None));
    third.request(initialize());
    third.request(resume(2, json!("s-1")));
    third.until(|v| v["id"] == 2);
    let (_, held) = third.finish();
    assert_eq!(
        answer_to(&held, 2)["error"]["message"],
        "session \"s-1\" is already owned by an active write handle"
    );
    second.request(request(
        json!(7),
        "session/working-directory/get",
        json!({"sessionId": "s-1"}),
    ));
    second.until(|v| v["id"] == 7);
    second.request(prompt(8, "s-1", "Make a landing page"));
    second.until_idle("s-1");
    let (code, seen) = second.finish();
    assert_eq!(code, Some(0));
    let error = |id| answer_to(&seen, id)["error"]["message"].clone();
    assert_eq!(error(2), "session \"s-1\" already exists");
    assert_eq!(error(3), "session \"nope\" not found");
    assert_eq!(
        error(4),
        "session/resume requires a non-empty sessionId string"
    );
    assert_eq!(answer_to(&seen, 5)["result"], json!({}));
    assert_eq!(error(6), "SDK session is already open or opening: s-1");
    assert_eq!(
        answer_to(&seen, 7)["result"]["cwd"],
        json!(world.path("project/sub")),
        "the working directory is restored"
    );
    let events: Vec<&Value> = seen
        .iter()
        .filter(|v| v["method"] == "session.event")
        .map(|v| &v["params"]["event"])
        .collect();
    assert_eq!(events[0]["seq"], last_seq + 1, "seq goes on");
    let turn = events.iter().find(|e| e["type"] == "turn/start").unwrap();
    assert_eq!(turn["data"]["turn"], 2, "the turn count goes on");
    let types = event_types(&seen);
    assert!(!types.contains(&"system/message".to_string()));
    assert!(
        types.contains(&"request/header".to_string()),
        "a new process's first request"
    );
    assert!(world.path("project/sub/index.html").is_file());
}

/// The stored log of `session` under `home` (0.2.1's zstd log).
fn session_log(home: &std::path::Path, session: &str) -> PathBuf {
    let sessions = home.join("profiles/sdk/sessions");
    let mut pending = vec![home.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.ends_with(format!("{session}/session.v4.jsonl.zstd")) {
                return path;
            }
        }
    }
    panic!("no log of {session} under {}", sessions.display());
}

/// A stored log replaced by a few KiB of zstd RLE blocks that would decode to gigabytes (issue
/// 40 item 10): the resume is refused with the real runtime's unreadable-session error, naming
/// the bound, and the process goes on and exits cleanly (no abort).
#[test]
fn a_session_log_that_decodes_past_its_bound_is_refused_on_resume_without_an_abort() {
    let world = World::new();
    let mut first = Client::start(world.command(&["--profile", "sdk"], None));
    first.request(initialize());
    first.request(prompt(2, "s-1", "Make a landing page"));
    first.until_idle("s-1");
    first.finish();
    let log = session_log(&world.path("home"), "s-1");
    // 2,000 RLE blocks of 2 MiB each, 8 KiB on disk.
    let mut bomb = vec![0x28, 0xB5, 0x2F, 0xFD, 0x00, 7 << 3];
    for index in 0..2000u32 {
        let header = (((1u32 << 21) - 1) << 3) | (1 << 1) | u32::from(index == 1999);
        bomb.extend_from_slice(&header.to_le_bytes()[..3]);
        bomb.push(b'x');
    }
    std::fs::write(&log, &bomb).unwrap();
    let mut second = Client::start(world.command(&["--profile", "sdk"], None));
    second.request(initialize());
    second.request(request(
        json!(2),
        "session/resume",
        json!({"sessionId": "s-1"}),
    ));
    second.until(|v| v["id"] == 2);
    let (code, seen) = second.finish();
    assert_eq!(code, Some(0));
    let error = answer_to(&seen, 2)["error"]["message"].clone();
    let said = error.as_str().unwrap_or_default();
    assert!(
        said.starts_with("cannot resume session \"s-1\": ") && said.contains("128 KiB"),
        "{error}"
    );
}

#[test]
fn the_older_personas_have_no_0_2_1_methods_and_keep_their_tool_result_shape() {
    let world = World::new();
    let mut client =
        Client::start(world.command(&["--persona", "0.1.5", "--profile", "sdk"], None));
    client.request(initialize());
    client.request(request(
        json!(2),
        "session/resume",
        json!({"sessionId": "s-1"}),
    ));
    client.until(|v| v["id"] == 2);
    client.request(prompt(3, "s-1", "Make a landing page"));
    client.until_idle("s-1");
    let (_, seen) = client.finish();
    assert_eq!(
        answer_to(&seen, 2)["error"]["message"],
        "unknown DeepSeek Harness SDK runtime method: session/resume"
    );
    let types = event_types(&seen);
    assert!(!types.iter().any(|t| t.starts_with("session-log-deepseek/")));
    let result = seen
        .iter()
        .map(|v| &v["params"]["event"])
        .find(|e| e["type"] == "tool/result")
        .unwrap();
    assert_eq!(result["data"]["message"]["role"], "user");
    assert_eq!(
        result["data"]["message"]["content"][0]["type"],
        "tool-result"
    );
    assert!(world.path("project/index.html").is_file());
}

#[test]
fn sdk_minimal_0_2_1_has_its_runtime_context_an_unknown_tool_error_and_a_plain_log_it_resumes() {
    let world = World::new();
    let mut first = Client::start(world.command(&["--profile", "sdk-minimal"], None));
    first.request(initialize());
    first.request(prompt(2, "m-1", "Make a landing page"));
    first.until_idle("m-1");
    let (_, seen) = first.finish();
    let types = event_types(&seen);
    assert!(!types.contains(&"permission/preset".to_string()));
    let events: Vec<&Value> = seen.iter().map(|v| &v["params"]["event"]).collect();
    let context = events
        .iter()
        .find(|e| e["data"]["source"]["kind"] == "runtime-context")
        .expect("0.2.1's sdk-minimal records the runtime context");
    assert_eq!(context["data"]["source"]["form"], "snapshot");
    let result = events.iter().find(|e| e["type"] == "tool/result").unwrap();
    assert_eq!(
        result["data"]["message"]["content"][0]["text"],
        "Error: unknown tool \"write\""
    );
    assert_eq!(result["data"]["message"]["isError"], true);
    assert_eq!(
        result["data"]["error"],
        json!({"name": "ToolNotFoundError", "code": "UNKNOWN_TOOL"})
    );
    assert!(!world.path("project/index.html").exists());

    let mut second = Client::start(world.command(&["--profile", "sdk-minimal"], None));
    second.request(initialize());
    second.request(request(
        json!(2),
        "session/resume",
        json!({"sessionId": "m-1"}),
    ));
    second.until(|v| v["id"] == 2);
    second.request(prompt(3, "m-1", "again"));
    second.until_idle("m-1");
    let (_, seen) = second.finish();
    assert_eq!(answer_to(&seen, 2)["result"], json!({}));
    let turn = seen
        .iter()
        .map(|v| &v["params"]["event"])
        .find(|e| e["type"] == "turn/start")
        .unwrap();
    assert_eq!(turn["data"]["turn"], 2);
}

#[test]
fn a_directory_set_mid_turn_reaches_the_next_step_and_a_vanished_one_falls_back_to_the_origin() {
    let world = World::new();
    std::fs::create_dir_all(world.path("project/sub")).unwrap();
    // Step 1 "thinks" long enough for the set to land before step 2 starts.
    let scenario = json!({"sdk": {"turns": [{"steps": [
        {"delay_ms": 3000, "tool_calls": [{"name": "write",
            "arguments": {"file_path": "a.txt", "content": "x"}}]},
        {"text": "done"}]}]}});
    let mut client = Client::start(world.command(&["--profile", "sdk"], Some(scenario)));
    client.request(initialize());
    client.request(prompt(2, "s-1", "go"));
    client.until(|v| v["id"] == 2);
    client.request(request(
        json!(3),
        "session/working-directory/set",
        json!({"sessionId": "s-1", "path": "sub"}),
    ));
    client.until(|v| v["id"] == 3);
    client.until_idle("s-1");
    assert!(
        world.path("project/sub/a.txt").is_file(),
        "step 1's tool ran after the set: in the new directory"
    );
    std::fs::remove_dir_all(world.path("project/sub")).unwrap();
    client.request(request(
        json!(4),
        "session/working-directory/get",
        json!({"sessionId": "s-1"}),
    ));
    client.until(|v| v["id"] == 4);
    let (_, seen) = client.finish();
    let project = world.path("project");
    let sub = project.join("sub");
    assert_eq!(answer_to(&seen, 4)["result"], json!({"cwd": project}));
    let types = event_types(&seen);
    let second_step = types
        .iter()
        .enumerate()
        .filter(|(_, t)| *t == "step/start")
        .nth(1)
        .unwrap()
        .0;
    assert_eq!(
        types[second_step - 2..second_step + 2].join(" "),
        "step/end agent/inbox/spliced step/start user/message",
        "the notice is taken before step 2 and read in it"
    );
    let events: Vec<&Value> = seen.iter().map(|v| &v["params"]["event"]).collect();
    let notice = events
        .iter()
        .filter(|e| e["type"] == "user/message")
        .find(|e| e["data"]["source"]["kind"] == "working-directory")
        .unwrap();
    assert!(notice["data"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .starts_with("The working directory changed from"));
    // The model's last runtime context before step 2's answer names the new directory (recorded
    // in step 1 when the set came first, else again in step 2).
    let second_answer = events
        .iter()
        .rposition(|e| e["type"] == "assistant/message")
        .unwrap();
    let context = events[..second_answer]
        .iter()
        .rev()
        .find(|e| e["data"]["source"]["kind"] == "runtime-context")
        .unwrap();
    // Its working-directory section (on `sdk` the sandbox and approval sections follow it).
    let sections = context["data"]["source"]["sections"].as_array().unwrap();
    let directory = sections
        .iter()
        .find(|s| s["name"] == "working-directory:current")
        .unwrap();
    assert!(directory["text"]
        .as_str()
        .unwrap()
        .ends_with(&format!("{:?}.", sub.display().to_string())));
    let fallback = events
        .iter()
        .rev()
        .find(|e| e["type"] == "agent/inbox/spliced" && e["data"]["target"] == "next-step")
        .unwrap();
    assert_eq!(
        fallback["data"]["inserted"][0]["content"][0]["text"],
        format!(
            "The working directory {:?} is unavailable. The working directory is now {:?}.",
            sub.display().to_string(),
            project.display().to_string()
        )
    );
    let last_change = events
        .iter()
        .rev()
        .find(|e| e["type"] == "working-directory/change")
        .unwrap();
    assert_eq!(last_change["data"]["cwd"], json!(project));
}
