//! The driver binary end to end over its stdin/stdout: every reply schema-valid, runs and their
//! events, cancel, invalid requests, restart persistence, and `shutdown` -> `bye` + exit 0.

#[path = "it/support/mod.rs"]
mod support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;
use support::{World, CANARY};

/// A safety bound for waiting on a reply (not an assertion on speed).
const PATIENCE: Duration = Duration::from_secs(60);

struct Driver {
    child: Child,
    stdin: Option<ChildStdin>,
    replies: Receiver<Value>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Driver {
    /// The released driver, `dsh-host-driver`.
    fn start(world: &World, extra_env: &[(&str, &str)]) -> Driver {
        Self::start_binary("dsh-host-driver", &[], world, extra_env)
    }

    /// The kit's test-only `dsh-host-mutant-driver --mutant <mutant>`.
    fn mutant(world: &World, mutant: &str) -> Driver {
        Self::start_binary("dsh-host-mutant-driver", &["--mutant", mutant], world, &[])
    }

    fn start_binary(
        binary: &str,
        args: &[&str],
        world: &World,
        extra_env: &[(&str, &str)],
    ) -> Driver {
        let mut command = Command::new(dsh_test_support::binary(binary));
        command
            .args(args)
            .current_dir(world.root.path())
            .env("DSH_BIN", world.dsh())
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    world.path("bin").display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .env("DSH_HOME", world.home())
            .env("RUNTIME_DATA_DIR", world.data_dir())
            .env("DEEPSEEK_API_KEY", CANARY)
            .env("DSH_CONFORMANCE", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (name, value) in extra_env {
            command.env(name, value);
        }
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("spawn driver: {e}"));
        let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        let (sender, replies) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let reply: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("reply is not JSON: {e}: {line}"));
                if sender.send(reply).is_err() {
                    return;
                }
            }
        });
        let mut stderr = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        Driver {
            stdin: child.stdin.take(),
            child,
            replies,
            stderr: Some(stderr),
        }
    }

    fn send(&mut self, request: Value) {
        let stdin = self
            .stdin
            .as_mut()
            .unwrap_or_else(|| panic!("stdin closed"));
        writeln!(stdin, "{request}").unwrap_or_else(|e| panic!("write request: {e}"));
        stdin.flush().unwrap_or_else(|e| panic!("flush: {e}"));
    }

    fn send_raw(&mut self, line: &str) {
        let stdin = self
            .stdin
            .as_mut()
            .unwrap_or_else(|| panic!("stdin closed"));
        writeln!(stdin, "{line}").unwrap_or_else(|e| panic!("write request: {e}"));
    }

    /// The next reply, checked against the driver reply schema.
    fn reply(&mut self) -> Value {
        let reply = self
            .replies
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|e| panic!("no reply: {e}"));
        if let Err(errors) = dsh_protocol::schema::validate("driver/reply.schema.json", &reply) {
            panic!("reply {reply} breaks driver/reply.schema.json: {errors:?}");
        }
        reply
    }

    /// Replies up to and including the run's outcome.
    fn until_outcome(&mut self, id: &str) -> (Vec<Value>, Value) {
        let mut events = Vec::new();
        loop {
            let reply = self.reply();
            assert_eq!(reply["id"], json!(id), "{reply}");
            match reply["type"].as_str() {
                Some("event") => events.push(reply["event"].clone()),
                Some("outcome") => return (events, reply),
                _ => panic!("unexpected reply during a run: {reply}"),
            }
        }
    }

    /// Shut down: expect `bye`, exit 0, and return the driver's stderr.
    fn shutdown(mut self) -> String {
        self.send(json!({"v": 1, "type": "shutdown"}));
        assert_eq!(self.reply(), json!({"v": 1, "type": "bye"}));
        drop(self.stdin.take());
        let status = self.child.wait().unwrap_or_else(|e| panic!("wait: {e}"));
        assert!(status.success(), "driver exited with {status}");
        self.stderr
            .take()
            .and_then(|thread| thread.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn handshake(driver: &mut Driver) -> Value {
    driver.send(
        json!({"v": 1, "type": "handshake", "kit": "dsh-conformance", "kit_version": "0.1.0"}),
    );
    driver.reply()
}

fn run_request(world: &World, id: &str, turn: u64, prompt: &str) -> Value {
    json!({"v": 1, "type": "run", "id": id, "turn": turn, "conversation_id": "conv-1", "project_id": "proj-1",
           "cwd": world.project(), "prompt": prompt, "bootstrap": "OD-BOOTSTRAP context",
           "model": {"provider": "deepseek-official", "id": "deepseek-chat"}, "reasoning_effort": null})
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|event| event["type"].as_str())
        .collect()
}

#[test]
fn handshake_discover_two_runs_and_bye() {
    let world = World::for_driver(json!({}));
    let mut driver = Driver::start(&world, &[]);
    let hello = handshake(&mut driver);
    assert_eq!(hello["driver"], json!("dsh-host-driver"));
    assert_eq!(
        hello["capabilities"],
        json!([
            "discover",
            "setup",
            "sessions",
            "cancel",
            "restart",
            "concurrent",
            "models"
        ])
    );
    assert_eq!(hello["codes"], json!("kit"));

    driver.send(json!({"v": 1, "type": "discover", "id": "d1"}));
    let discovered = driver.reply();
    assert_eq!(discovered["available"], json!(true), "{discovered}");
    assert_eq!(discovered["version"], json!("0.1.7-rc.1"));

    driver.send(run_request(&world, "r1", 0, "Create a landing page"));
    let (events, first) = driver.until_outcome("r1");
    assert_eq!(first["status"], json!("completed"), "{first}");
    assert_eq!(kinds(&events).first(), Some(&"status"));
    assert!(kinds(&events).contains(&"tool_use"));

    driver.send(run_request(&world, "r2", 1, "Make it blue"));
    let (_, second) = driver.until_outcome("r2");
    assert_eq!(second["status"], json!("completed"), "{second}");
    assert_eq!(second["resumed"], json!(true));
    assert_eq!(second["session_id"], first["session_id"]);

    let stderr = driver.shutdown();
    assert!(
        !stderr.contains(CANARY) && !stderr.contains("Create a landing page"),
        "{stderr}"
    );
    for entry in world
        .journal()
        .iter()
        .filter(|entry| entry["event"] == "start")
    {
        assert!(!entry["argv"].to_string().contains(CANARY));
        assert!(entry["env_names"]
            .as_array()
            .is_some_and(|names| names.contains(&json!("DSH_HOME"))));
    }
}

#[test]
fn models_catalog_and_a_route_refused_before_any_spawn() {
    let world = World::for_driver(json!({}));
    let mut driver = Driver::start(&world, &[]);
    handshake(&mut driver);
    driver.send(json!({"v": 1, "type": "models", "id": "m1"}));
    let catalog = driver.reply();
    assert_eq!(catalog["available"], json!(true), "{catalog}");
    assert_eq!(catalog["models"][1]["id"], json!("deepseek-reasoner"));
    assert_eq!(
        catalog["models"][1]["reasoning_options"][1]["default"],
        json!(true)
    );

    let mut request = run_request(&world, "r1", 0, "Create a landing page");
    if let Some(run) = request.as_object_mut() {
        run.remove("model");
        run.insert("route".into(), json!("deepseek-reasoner"));
    }
    driver.send(request);
    let (events, outcome) = driver.until_outcome("r1");
    assert_eq!(
        outcome["code"],
        json!("DSH_PROFILE_INVALID_ROUTE"),
        "{outcome}"
    );
    assert_eq!(kinds(&events), vec!["error"]);
    driver.shutdown();
    let stdio_starts = world
        .journal()
        .iter()
        .filter(|entry| entry["event"] == "start" && entry["mode"] == "stdio")
        .count();
    assert_eq!(stdio_starts, 0);
}

#[test]
fn invalid_requests_get_error_replies_and_the_driver_carries_on() {
    let world = World::for_driver(json!({}));
    let mut driver = Driver::start(&world, &[]);
    driver.send_raw("this is not json");
    let error = driver.reply();
    assert_eq!(
        (error["type"].clone(), error["id"].clone()),
        (json!("error"), Value::Null)
    );
    driver.send(json!({"v": 1, "type": "run", "id": "r9"}));
    let error = driver.reply();
    assert_eq!(
        (error["type"].clone(), error["id"].clone()),
        (json!("error"), json!("r9")),
        "{error}"
    );
    driver.send(json!({"v": 1, "type": "launch", "id": "x1"}));
    assert_eq!(driver.reply()["type"], json!("error"));
    driver.send(json!({"v": 1, "type": "cancel", "id": "not-running"}));
    assert_eq!(
        handshake(&mut driver)["type"],
        json!("handshake"),
        "a stray cancel is a silent no-op"
    );
    driver.shutdown();
}

#[test]
fn cancel_while_a_run_is_active() {
    let world = World::for_driver(json!({
        "stdio": [[{"ready": {}}, {"read_execute": {}}, {"session": {}}, {"text": "working"},
                   {"stderr_env": "DEEPSEEK_API_KEY"}, {"ignore_sigterm": true}, {"hang": {}}]]
    }));
    let mut driver = Driver::start(&world, &[]);
    handshake(&mut driver);
    driver.send(run_request(&world, "r1", 0, "Create a landing page"));
    loop {
        let reply = driver.reply();
        assert_eq!(reply["type"], json!("event"), "{reply}");
        if reply["event"]["type"] == "text_delta" {
            break;
        }
    }
    driver.send(json!({"v": 1, "type": "cancel", "id": "r1"}));
    let (_, outcome) = driver.until_outcome("r1");
    assert_eq!(outcome["status"], json!("cancelled"), "{outcome}");
    assert!(!outcome["stderr"]
        .as_str()
        .unwrap_or_default()
        .contains(CANARY));
    assert!(
        world.live_processes().is_empty(),
        "alive: {:?}",
        world.live_processes()
    );
    driver.shutdown();
}

/// Two conversations' runs in flight at once: the first streams (answering a cancel with
/// `result: cancelled`, should one reach it), the second is cancelled. Returns both outcomes.
/// Two runs in flight, the second cancelled: their outcomes (`mutant`: on the mutant driver).
fn cancel_one_of_two_runs(mutant: Option<&str>) -> (Value, Value) {
    let mut streaming = vec![
        json!({"ready": {}}),
        json!({"read_execute": {}}),
        json!({"session": {}}),
    ];
    for part in 1..=5 {
        streaming.push(json!({"text": format!("part {part}")}));
        streaming.push(json!({"result_on_cancel": {"timeout_ms": 400}}));
    }
    streaming.push(json!({"result": {"status": "completed"}}));
    let world = World::for_driver(json!({"stdio": [streaming, [
        {"ready": {}}, {"read_execute": {}}, {"session": {}}, {"text": "other"},
        {"wait_cancel": {"timeout_ms": 5000}}, {"result": {"status": "cancelled"}}]]}));
    let mut driver = match mutant {
        Some(mutant) => Driver::mutant(&world, mutant),
        None => Driver::start(&world, &[]),
    };
    handshake(&mut driver);
    driver.send(run_request(&world, "a", 0, "Create a landing page"));
    let mut second = run_request(&world, "b", 1, "Create a pricing page");
    second["conversation_id"] = json!("conv-2");
    let mut outcomes: Vec<Value> = Vec::new();
    let (mut b_sent, mut b_cancelled) = (false, false);
    while outcomes.len() < 2 {
        let reply = driver.reply();
        let from = (reply["id"].as_str(), reply["type"].as_str());
        match from {
            (_, Some("outcome")) => outcomes.push(reply),
            (Some("a"), _) if !b_sent && reply["event"]["type"] == "text_delta" => {
                driver.send(second.clone());
                b_sent = true;
            }
            (Some("b"), _) if !b_cancelled && reply["event"]["type"] == "text_delta" => {
                driver.send(json!({"v": 1, "type": "cancel", "id": "b"}));
                b_cancelled = true;
            }
            _ => assert_eq!(reply["type"], json!("event"), "{reply}"),
        }
    }
    driver.shutdown();
    assert!(
        world.live_processes().is_empty(),
        "{:?}",
        world.live_processes()
    );
    outcomes.sort_by_key(|outcome| outcome["id"].as_str().map(str::to_string));
    let second = outcomes.pop().unwrap_or_default();
    let first = outcomes.pop().unwrap_or_default();
    (first, second)
}

#[test]
fn a_cancel_ends_only_the_run_it_names_while_another_is_in_flight() {
    let (first, second) = cancel_one_of_two_runs(None);
    assert_eq!(first["status"], json!("completed"), "{first}");
    assert_eq!(second["status"], json!("cancelled"), "{second}");
}

#[test]
fn the_cancel_all_runs_mutant_ends_the_other_conversations_run_too() {
    let (first, second) = cancel_one_of_two_runs(Some("cancel-all-runs"));
    assert_eq!(first["status"], json!("cancelled"), "{first}");
    assert_eq!(second["status"], json!("cancelled"), "{second}");
}

#[test]
fn the_session_mapping_survives_a_driver_restart() {
    let world = World::for_driver(json!({}));
    let mut driver = Driver::start(&world, &[]);
    handshake(&mut driver);
    driver.send(run_request(&world, "r1", 0, "Create a landing page"));
    let (_, first) = driver.until_outcome("r1");
    driver.shutdown();

    let mut driver = Driver::start(&world, &[]);
    handshake(&mut driver);
    driver.send(run_request(&world, "r2", 1, "Make it blue"));
    let (_, second) = driver.until_outcome("r2");
    assert_eq!(second["resumed"], json!(true), "{second}");
    assert_eq!(second["session_id"], first["session_id"]);
    driver.shutdown();
}

#[test]
fn setup_replies_in_the_documented_shape() {
    let world = World::for_driver(json!({}));
    let mut driver = Driver::start(&world, &[]);
    handshake(&mut driver);
    let manifest = world.path("manifest.json");
    std::fs::write(
        &manifest,
        json!({"package": "@open-design/dsh-runtime", "version": "0.1.0",
        "sha256": "0".repeat(64), "file": "bundle.tgz"})
        .to_string(),
    )
    .unwrap_or_else(|e| panic!("manifest: {e}"));
    std::fs::write(world.path("bundle.tgz"), b"bytes").unwrap_or_else(|e| panic!("tarball: {e}"));
    driver.send(json!({"v": 1, "type": "setup", "id": "s1", "tarball": world.path("bundle.tgz"), "manifest": manifest}));
    let done = driver.reply();
    assert_eq!(done["ok"], json!(false));
    assert_eq!(done["code"], json!("DSH_PROFILE_BUNDLE_HASH_MISMATCH"));
    driver.shutdown();
}

#[test]
fn an_unknown_mutant_name_refuses_to_start() {
    let world = World::for_driver(json!({}));
    let mut driver = Driver::mutant(&world, "no-such-bug");
    let status = driver.child.wait().unwrap_or_else(|e| panic!("wait: {e}"));
    assert_eq!(status.code(), Some(2));
    let stderr = driver
        .stderr
        .take()
        .and_then(|thread| thread.join().ok())
        .unwrap_or_default();
    assert!(stderr.contains("no-such-bug"), "{stderr}");
}

#[test]
fn the_key_in_argv_mutant_leaks_the_canary_into_argv() {
    assert!(
        key_leaked_into_argv(Driver::mutant),
        "the mutant must put the key in argv (the correct host never does)"
    );
}

#[test]
fn the_released_driver_has_no_mutant_switch() {
    let released =
        |world: &World, mutant: &str| Driver::start(world, &[("DSH_HOST_MUTANT", mutant)]);
    assert!(
        !key_leaked_into_argv(released),
        "dsh-host-driver must ignore DSH_HOST_MUTANT"
    );
    // Not even an unknown name is looked at: the driver starts and serves.
    let world = World::for_driver(json!({}));
    let mut driver = released(&world, "no-such-bug");
    assert_eq!(handshake(&mut driver)["driver"], json!("dsh-host-driver"));
    driver.shutdown();
    for args in [&["--list-mutants"][..], &["--mutant", "key-in-argv"]] {
        let output = Command::new(dsh_test_support::binary("dsh-host-driver"))
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("dsh-host-driver: {e}"));
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?} is an unknown argument"
        );
    }
    let help = Command::new(dsh_test_support::binary("dsh-host-driver"))
        .arg("--help")
        .output()
        .unwrap_or_else(|e| panic!("dsh-host-driver: {e}"));
    assert!(!String::from_utf8_lossy(&help.stdout).contains("MUTANT"));
}

/// One run on the driver `start` gives for the mutant `key-in-argv`: whether the credential
/// reached the runtime's argv.
fn key_leaked_into_argv(start: impl Fn(&World, &str) -> Driver) -> bool {
    let world = World::for_driver(json!({}));
    let mut driver = start(&world, "key-in-argv");
    handshake(&mut driver);
    driver.send(run_request(&world, "r1", 0, "Create a landing page"));
    driver.until_outcome("r1");
    driver.shutdown();
    world
        .journal()
        .iter()
        .any(|entry| entry["event"] == "start" && entry["argv"].to_string().contains(CANARY))
}

#[test]
fn a_cancel_right_behind_its_run_request_is_not_lost() {
    let world = World::for_driver(json!({
        "stdio": [[{"ready": {}}, {"read_execute": {}}, {"session": {}}, {"hang": {}}]]
    }));
    let mut driver = Driver::start(&world, &[]);
    handshake(&mut driver);
    let both = format!(
        "{}\n{}",
        run_request(&world, "r1", 0, "Create a landing page"),
        json!({"v": 1, "type": "cancel", "id": "r1"})
    );
    driver.send_raw(&both);
    let (_, outcome) = driver.until_outcome("r1");
    assert_eq!(outcome["status"], json!("cancelled"), "{outcome}");
    assert!(world.live_processes().is_empty());
    driver.shutdown();
}

#[test]
fn closing_stdin_mid_run_cancels_reaps_and_exits() {
    let world = World::for_driver(json!({
        "stdio": [[{"ready": {}}, {"read_execute": {}}, {"session": {}}, {"text": "working"}, {"hang": {}}]]
    }));
    let mut driver = Driver::start(&world, &[]);
    handshake(&mut driver);
    driver.send(run_request(&world, "r1", 0, "Create a landing page"));
    loop {
        if driver.reply()["event"]["type"] == "text_delta" {
            break;
        }
    }
    drop(driver.stdin.take());
    let (_, outcome) = driver.until_outcome("r1");
    assert_eq!(outcome["status"], json!("cancelled"), "{outcome}");
    let status = driver.child.wait().unwrap_or_else(|e| panic!("wait: {e}"));
    assert!(status.success());
    assert!(world.live_processes().is_empty());
}
