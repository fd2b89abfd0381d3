//! fake-dsh's ACP surface against wire captures of the real runtime
//! (`tests/data/acp-captures/<release>.<name>.wire.jsonl`: every line in and out of the real
//! `deepseek-harness-runtime-bin` 0.2.1rc2 (`r21`) and 0.1.5rc1 (`r15`), captured on 2026-12-06
//! against the kit's model server; see the README there). Each capture is replayed: its input
//! lines are sent to fake-dsh in order (the world's path and the session ids put in), fake-dsh
//! plays the replies the kit's model script gave the real runtime (an `acp` scenario built from
//! the capture's prompts), and between two inputs fake-dsh must write the frames the real one
//! wrote, member for member, with UUIDs, the world's path and token counts as placeholders;
//! notifications and requests in order, responses matched by id (the real runtime answers out
//! of request order, F2.4). Signals, EOF, the exit status, stderr and the project's files are
//! compared too.

use crate::support::acp::Labels;
use crate::support::{code, Running, World};
use nix::sys::signal::Signal;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::PathBuf;

/// One line of a capture.
#[derive(Debug, Clone)]
enum Entry {
    In(String),
    Out(Value),
    Err(String),
    Note(Value),
}

fn capture(name: &str) -> Vec<Entry> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/acp-captures")
        .join(format!("{name}.wire.jsonl"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    text.lines()
        .map(|line| {
            let entry: Value = serde_json::from_str(line).unwrap();
            let text = entry["line"].as_str().unwrap_or_default().to_string();
            match entry["dir"].as_str() {
                Some("in") => Entry::In(text),
                Some("out") => Entry::Out(serde_json::from_str(&text).unwrap()),
                Some("err") => Entry::Err(text),
                _ => Entry::Note(entry),
            }
        })
        .collect()
}

/// The kit's model script (the one the captures ran against) as the fake's turn for one
/// accepted prompt: the same replies, keyed by the same words, in the script's order.
fn script_turn(prompt: &str, timing: &Timing) -> Value {
    let done = json!({"reasoning": "The file is written.", "text": "I wrote index.html."});
    let page = "<!doctype html><title>Landing</title><h1>Landing page</h1>\n";
    let write = |reasoning: &str| {
        json!({"reasoning": reasoning, "tool_calls": [{"name": "write",
            "arguments": {"file_path": "index.html", "content": page}}]})
    };
    let has = |word: &str| prompt.contains(word);
    let replies = if has("textonly") {
        json!([{"text": "Hi."}])
    } else if has("escwrite") {
        json!([{"reasoning": "I will write the page with a wider sandbox.",
                "tool_calls": [{"name": "write", "arguments": {"file_path": "index.html",
                    "content": page, "sandbox_permissions": "workspace-write",
                    "justification": "The page must be written."}}]}, done])
    } else if has("escalate") {
        json!([{"tool_calls": [{"name": "bash", "arguments": {"description": "Write a file",
                "command": "echo escalated > esc.txt", "sandbox_permissions": "danger-full-access",
                "justification": "The test needs it."}}]}, done])
    } else if has("twotools") {
        json!([{"reasoning": "Two files.", "tool_calls": [
            {"name": "write", "arguments": {"file_path": "a.txt", "content": "a\n"}},
            {"name": "write", "arguments": {"file_path": "b.txt", "content": "b\n"}}]}, done])
    } else if has("badjson") {
        json!([{"tool_calls": [{"name": "write", "arguments": "{not json"}]}, done])
    } else if has("nosuchtool") {
        json!([{"tool_calls": [{"name": "no_such_tool", "arguments": {"x": 1}}]}, done])
    } else if has("unicodesep") {
        json!([{"text": "line one\u{2028}line two\u{2029}para \u{e9}\u{4e2d}\u{1f600} end"}])
    } else if has("textandtool") {
        let mut first = write("Plan first.");
        first["text"] = json!("I will write the page now.");
        json!([first, done])
    } else if has("longtext") {
        json!([{"reasoning": "I think about this for a while before answering the question.",
                "text": "Hello from the scripted model: this answer comes in several deltas."}])
    } else if has("maxtok") {
        return json!({"replies": [{"text": "This answer is cut"}], "stop": "max_tokens"});
    } else if has("fail401") {
        return json!({"fail": "model-server: scripted HTTP 401"});
    } else if has("failaftertool") {
        return json!({"replies": [{"reasoning": "Probe first.", "tool_calls":
            [{"name": "probe_then_fail", "arguments": {"x": 1}}]}],
            "fail": "model-server: scripted HTTP 401"});
    } else if has("slow") {
        let mut slow = write("I will write the page.");
        slow["delay_ms"] = json!(if timing.slow_finishes { 1000 } else { 600_000 });
        if timing.streamed {
            slow["reasoning_streams_after_ms"] = json!(0);
        }
        json!([slow, done])
    } else if has("green") {
        json!([{"reasoning": "I read the page first.", "tool_calls": [{"name": "read",
                "arguments": {"file_path": "index.html"}}]},
               {"reasoning": "Now I make it green.", "tool_calls": [{"name": "write",
                "arguments": {"file_path": "index.html", "content":
                "<!doctype html><title>Landing</title><body style=\"background: green\"><h1>Landing page</h1>\n"}}]},
               done])
    } else {
        json!([write("I will write the page."), done])
    };
    json!({"replies": replies})
}

/// What a capture's timing shows about the model, for the fake to play alike.
struct Timing {
    /// A cancel found reasoning already streamed: a thought chunk came just before `cancelled`.
    streamed: bool,
    /// A slow reply ran to its end (two sessions at once) instead of being cut.
    slow_finishes: bool,
}

impl Timing {
    fn of(entries: &[Entry]) -> Timing {
        let outs: Vec<&Value> = entries
            .iter()
            .filter_map(|entry| match entry {
                Entry::Out(frame) => Some(frame),
                _ => None,
            })
            .collect();
        let streamed = outs.windows(2).any(|pair| {
            pair[0]["params"]["update"]["sessionUpdate"] == "agent_thought_chunk"
                && pair[1]["result"]["stopReason"] == "cancelled"
        });
        let slow_ids: Vec<Value> = entries
            .iter()
            .filter_map(|entry| match entry {
                Entry::In(line) => serde_json::from_str::<Value>(line).ok(),
                _ => None,
            })
            .filter(|f| {
                f["params"]["prompt"][0]["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("slow"))
            })
            .map(|f| f["id"].clone())
            .collect();
        let slow_finishes = outs
            .iter()
            .any(|f| slow_ids.contains(&f["id"]) && f["result"]["stopReason"] == "end_turn");
        Timing {
            streamed,
            slow_finishes,
        }
    }
}

/// The `acp` scenario for a capture: one scripted turn per prompt the real runtime accepted
/// (answered with a result or a turn failure, not refused with `-32602`). On 0.2.1 a prompt
/// after a turn that ended (cancelled, or failed) right after a tool result got the script's
/// after-that-tool reply: 0.2.1's Messages request folds the old tool result into the new
/// prompt (facts §12), a model-side difference the fake needs no copy of.
fn scenario_for(name: &str, entries: &[Entry]) -> Value {
    let timing = Timing::of(entries);
    let refused: std::collections::HashSet<String> = entries
        .iter()
        .filter_map(|entry| match entry {
            Entry::Out(frame) if frame["error"]["code"] == -32602 => Some(frame["id"].to_string()),
            _ => None,
        })
        .collect();
    let mut turns = Vec::new();
    // The tool whose result was the last thing of the turn so far, and the one a turn that
    // ended right after it leaves for the next prompt (0.2.1 only).
    let (mut last_tool, mut after_tool): (Option<String>, Option<String>) = (None, None);
    for entry in entries {
        match entry {
            Entry::Out(frame) => {
                let update = &frame["params"]["update"];
                match update["sessionUpdate"].as_str() {
                    Some("tool_call") => last_tool = update["title"].as_str().map(String::from),
                    Some("agent_thought_chunk" | "agent_message_chunk") => last_tool = None,
                    _ => {}
                }
                let cut = frame["result"]["stopReason"] == "cancelled"
                    || frame["error"]["code"] == -32603;
                if cut && name.starts_with("r21") {
                    after_tool = last_tool.take();
                }
            }
            Entry::In(line) => {
                let Ok(frame) = serde_json::from_str::<Value>(line) else {
                    continue;
                };
                if frame["method"] != "session/prompt" || refused.contains(&frame["id"].to_string())
                {
                    continue;
                }
                let text = frame["params"]["prompt"][0]["text"].as_str().unwrap_or("");
                turns.push(match after_tool.take().as_deref() {
                    Some("probe_then_fail") => json!({"fail": "model-server: scripted HTTP 401"}),
                    Some(_) => json!({"replies": [
                        {"reasoning": "The file is written.", "text": "I wrote index.html."}]}),
                    None => script_turn(text, &timing),
                });
                last_tool = None;
            }
            _ => {}
        }
    }
    let overlapping = entries.iter().any(|entry| {
        matches!(entry, Entry::Out(frame)
            if frame["error"]["message"].as_str().is_some_and(|m| m.contains("already in flight")))
    });
    if overlapping {
        // The real model took its time (about 200 ms) while the second prompt was refused:
        // the fake's first reply takes a second, so the second prompt finds the first in flight.
        turns[0]["replies"][0]["delay_ms"] = json!(1000);
    }
    json!({"acp": {"turns": turns}})
}

/// What the project held before a capture ran: `write-unread` found the page an earlier
/// process had made green.
fn setup(name: &str, world: &World) {
    if name.ends_with("write-unread") {
        let page = "<!doctype html><title>Landing</title><body style=\"background: green\"><h1>Landing page</h1>\n";
        std::fs::write(world.project().join("index.html"), page).unwrap();
    }
}

/// The environment a capture ran with (its name says; F1.2).
fn environment(name: &str) -> Vec<(&'static str, Option<&'static str>)> {
    if name.contains("readonly")
        || name.contains("escwrite-allow")
        || name.contains("escwrite-reject")
    {
        vec![("DSH_PERMISSION_MODE", Some("read-only"))]
    } else if name.contains("danger") {
        vec![("DSH_PERMISSION_MODE", Some("danger-full-access"))]
    } else if name.contains("no-key") {
        vec![("DEEPSEEK_API_KEY", None)]
    } else {
        vec![]
    }
}

/// The differences a capture's replay allows, each with its reason: (capture name suffix,
/// member masked on both sides, why).
const ALLOWED: &[(&str, &str, &str)] = &[(
    "concurrent",
    "toolCallId",
    "the model numbers its tool call ids by request arrival, and the two sessions' requests race: \
     0.1.5 numbered the slow session's call 1, 0.2.1 numbered it 2",
)];

/// A frame with the members the capture's allowed differences name masked.
fn masked(name: &str, frame: Value) -> Value {
    let members: Vec<&str> = ALLOWED
        .iter()
        .filter(|(capture, ..)| name.ends_with(capture))
        .map(|(_, member, _)| *member)
        .collect();
    fn walk(value: Value, members: &[&str]) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(k, v)| {
                        let v = if members.contains(&k.as_str()) {
                            json!("<allowed difference>")
                        } else {
                            walk(v, members)
                        };
                        (k, v)
                    })
                    .collect(),
            ),
            Value::Array(items) => {
                Value::Array(items.into_iter().map(|i| walk(i, members)).collect())
            }
            other => other,
        }
    }
    walk(frame, &members)
}

/// A replay across the processes of one world: the session ids seen, by captured id.
struct Replay<'w> {
    world: &'w World,
    ids: HashMap<String, String>,
    real: Labels,
    fake: Labels,
}

impl<'w> Replay<'w> {
    fn new(world: &'w World) -> Replay<'w> {
        Replay {
            world,
            ids: HashMap::new(),
            real: Labels::default(),
            fake: Labels::default(),
        }
    }

    fn world_path(&self) -> String {
        self.world.root.path().to_string_lossy().into_owned()
    }

    /// An input line with the world's path and the fake's session ids put in.
    fn input(&self, line: &str) -> String {
        let mut line = line.replace("<world>", &self.world_path());
        for (real, fake) in &self.ids {
            line = line.replace(real.as_str(), fake);
        }
        line
    }

    /// Replays one capture in a new process of this world.
    fn run(&mut self, name: &str) {
        let entries = capture(name);
        self.world.scenario(scenario_for(name, &entries));
        setup(name, self.world);
        let persona = if name.starts_with("r15") {
            "0.1.5"
        } else {
            "0.2.1"
        };
        let mut running = crate::support::acp::start(self.world, persona, |command| {
            for (variable, value) in environment(name) {
                match value {
                    Some(value) => command.env(variable, value),
                    None => command.env_remove(variable),
                };
            }
        });
        let mut expected: Vec<Value> = Vec::new();
        let mut errs: Vec<String> = Vec::new();
        // Inputs the real runtime answered nothing between go out in one write, as the
        // capture's client sent them at once (two prompts overlapping, F5.1).
        let mut pending: Vec<u8> = Vec::new();
        for entry in &entries {
            match entry {
                Entry::Out(frame) => expected.push(frame.clone()),
                Entry::Err(line) => errs.push(line.clone()),
                Entry::In(line) => {
                    if !expected.is_empty() {
                        flush(&mut running, &mut pending);
                        self.expect(name, &mut running, std::mem::take(&mut expected));
                    }
                    pending.extend_from_slice(format!("{}\n", self.input(line)).as_bytes());
                }
                Entry::Note(note) => {
                    flush(&mut running, &mut pending);
                    self.expect(name, &mut running, std::mem::take(&mut expected));
                    self.note(name, &mut running, note);
                }
            }
        }
        flush(&mut running, &mut pending);
        self.expect(name, &mut running, expected);
        let stderr = String::from_utf8_lossy(&running.stderr()).into_owned();
        let mut seen: Vec<&str> = stderr.lines().collect();
        let mut want: Vec<&str> = errs.iter().map(String::as_str).collect();
        seen.sort_unstable();
        want.sort_unstable();
        assert_eq!(seen, want, "{name}: stderr");
    }

    /// Waits until fake-dsh has handled every line sent so far: it reads lines in order, so
    /// once it journals a notification sent now (one no method takes: no frame answers it,
    /// F2.3), the lines before it are handled (a prompt is in flight before a signal is sent).
    fn sync(&mut self, running: &mut Running) {
        let marker = json!({"jsonrpc": "2.0", "method": "test/sync",
                            "params": {"pid": running.pid()}});
        running.send(&marker);
        self.world.await_journal("the sync notification", |entry| {
            entry["event"] == "command" && entry["command"] == marker
        });
    }

    /// A capture's note: stdin closed, a signal, the exit status, the project's files.
    fn note(&mut self, name: &str, running: &mut Running, note: &Value) {
        let message = note["msg"].as_str().unwrap_or_default();
        match message {
            "close stdin" => running.close_stdin(),
            "sigterm" => {
                self.sync(running);
                running.signal_group(Signal::SIGTERM)
            }
            "sigint" => {
                self.sync(running);
                running.signal_group(Signal::SIGINT)
            }
            "project files" => {
                let files = note["files"].as_object().into_iter().flatten();
                // fake-dsh runs no command: what the real one's allowed `bash` wrote is not
                // written (docs/surface-acp.md, "What differs").
                let written_by_bash = |file: &str| file == "esc.txt";
                for (file, content) in files.filter(|(file, _)| !written_by_bash(file)) {
                    let path = self.world.project().join(file);
                    let written = std::fs::read_to_string(&path).unwrap_or_default();
                    assert_eq!(Some(written.as_str()), content.as_str(), "{name}: {file}");
                }
            }
            still if still.starts_with("still running") => {
                // The process outlived stdin's EOF (a batch wedged it, F2.5): once it has read
                // the EOF it must still be running; then it is killed, as the capture did.
                let pid = running.pid();
                self.world.await_journal("stdin closed", |entry| {
                    entry["pid"] == pid && entry["event"] == "stdin_closed"
                });
                assert!(
                    running.child.try_wait().unwrap().is_none(),
                    "{name}: ended at EOF"
                );
                running.signal_group(Signal::SIGKILL);
            }
            "exit -9" => {
                use std::os::unix::process::ExitStatusExt;
                assert_eq!(running.wait().signal(), Some(9), "{name}: killed");
                assert_eq!(
                    running.rest(),
                    Vec::<Value>::new(),
                    "{name}: frames after the end"
                );
            }
            exit if exit.starts_with("exit ") => {
                let status = running.wait();
                assert_eq!(code(status).to_string(), &exit[5..], "{name}: exit status");
                assert_eq!(
                    running.rest(),
                    Vec::<Value>::new(),
                    "{name}: frames after the end"
                );
            }
            _ => {}
        }
    }

    /// Reads as many frames as the real runtime wrote here and compares them: notifications
    /// and requests in order, responses by id. Session ids are learned from `session/new`.
    fn expect(&mut self, name: &str, running: &mut Running, expected: Vec<Value>) {
        if expected.is_empty() {
            return;
        }
        let got: Vec<Value> = (0..expected.len()).map(|_| running.next_frame()).collect();
        for (real, fake) in expected.iter().zip(&got) {
            if let (Some(real), Some(fake)) = (
                real["result"]["sessionId"].as_str(),
                fake["result"]["sessionId"].as_str(),
            ) {
                self.ids.insert(real.to_string(), fake.to_string());
            }
        }
        let world = self.world_path();
        let split = |frames: &[Value], labels: &mut Labels, world: &str| {
            let mut ordered = Vec::new();
            let mut responses = Vec::new();
            for frame in frames {
                let normalized = masked(name, labels.normalize(frame, world));
                if frame.get("method").is_some() {
                    ordered.push(normalized);
                } else {
                    responses.push(normalized);
                }
            }
            responses.sort_by_key(|r| r["id"].to_string());
            (ordered, responses)
        };
        let real = split(&expected, &mut self.real, "");
        let fake = split(&got, &mut self.fake, &world);
        let text =
            |frames: &[Value]| -> Vec<String> { frames.iter().map(Value::to_string).collect() };
        assert_eq!(
            text(&fake.0),
            text(&real.0),
            "{name}: notifications and requests (fake, real)"
        );
        assert_eq!(
            text(&fake.1),
            text(&real.1),
            "{name}: responses (fake, real)"
        );
    }
}

/// Sends the inputs held back, if any.
fn flush(running: &mut Running, pending: &mut Vec<u8>) {
    if !pending.is_empty() {
        running.send_raw(&std::mem::take(pending));
    }
}

/// Replays each capture of both releases (0.1.5's where it was captured) in a fresh world.
fn replay_each(names: &[&str]) {
    for name in names {
        let mut replayed = 0;
        for release in ["r21", "r15"] {
            let file = format!("{release}.{name}");
            let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join(format!("tests/data/acp-captures/{file}.wire.jsonl"));
            if path.exists() {
                let world = World::without_profile();
                Replay::new(&world).run(&file);
                replayed += 1;
            }
        }
        assert!(replayed > 0, "no capture named {name}");
    }
}

#[test]
fn turns_updates_and_tools_match_the_real_frames() {
    replay_each(&[
        "basic",
        "textandtool",
        "twotools",
        "longtext",
        "maxtok",
        "fail401",
        "nosuchtool",
        "unicodesep",
        "badjson",
        "nocaps",
        "no-key",
        "overlap",
        "failaftertool",
        "write-unread",
        "proc-cwd",
        "concurrent",
        "readonly-reject",
    ]);
}

#[test]
fn permission_requests_and_every_answer_match_the_real_frames() {
    replay_each(&[
        "perm-allow",
        "perm-reject",
        "perm-cancel",
        "perm-error",
        "perm-bogus",
        "perm-twice",
        "readonly-write",
        "escwrite-allow",
        "escwrite-reject",
        "escwrite-ws",
        "danger-escalate",
    ]);
}

#[test]
fn cancels_closes_signals_and_eof_match_the_real_frames() {
    replay_each(&[
        "cancel-model",
        "cancel-req",
        "cancel-idle",
        "cancel-perm",
        "close-mid",
        "sigterm-mid",
        "sigint-mid",
        "eof-mid",
        "err-batch",
    ]);
}

#[test]
fn initialize_sessions_config_and_errors_match_the_real_frames() {
    replay_each(&[
        "err-init",
        "err-init2",
        "err-session",
        "err-preinit",
        "preinit-prompt",
        "framing",
        "list",
        "mcp",
        "config",
        "config-back",
    ]);
}

#[test]
fn a_session_is_listed_and_resumed_cold_by_later_processes_as_the_real_one() {
    for release in ["r21", "r15"] {
        let world = World::without_profile();
        let mut replay = Replay::new(&world);
        for name in ["res-basic", "res-list", "res-resume"] {
            replay.run(&format!("{release}.{name}"));
        }
        let world = World::without_profile();
        let mut replay = Replay::new(&world);
        for name in ["res-basic", "res-load"] {
            replay.run(&format!("{release}.{name}"));
        }
    }
}
