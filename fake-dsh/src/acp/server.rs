//! The ACP agent's request loop (facts F2, F8, F9): newline-delimited JSON-RPC read through the
//! kit's bounded line framer (a line over 64 MiB ends the process, exit 2, naming the line), each
//! line journaled and classified (bytes after the last newline are never handled) ([`super::rpc`]); requests dispatched at once (a prompt's turn
//! on its own thread, so responses come out of request order), notifications (`session/cancel`,
//! `$/cancel_request`) and responses to the agent's own requests handed to the waiting turn. A
//! batch closes the connection: nothing is answered again and EOF no longer ends the process.
//! EOF ends it with 0 (a prompt in flight never answered); SIGTERM answers every prompt in flight
//! `cancelled` and exits 0, SIGINT the same with 130.

use super::methods::{self, RpcError};
use super::rpc::{Answer, Incoming};
use super::state::{lock, Agent, Session, Turn};
use super::turn::{self, Outcome};
use super::wire::{code, wire};
use crate::journal::{self, Event, ExitReason};
use dsh_formats::acp_scenario::AcpTurn;
use serde_json::{json, Value};
use std::io::BufRead;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

static AGENT: OnceLock<Agent> = OnceLock::new();

/// The running agent.
pub fn agent() -> &'static Agent {
    AGENT.get().expect("the agent is set before any request")
}

/// Serves ACP on stdin/stdout; never returns.
pub fn run(state: Agent) -> ! {
    let _ = AGENT.set(state);
    let delay = agent().scenario.initialize_delay_ms;
    if delay > 0 {
        // The real runtime loads its plugin tree before it reads a request (F1.5).
        std::thread::sleep(std::time::Duration::from_millis(delay));
    }
    read_lines()
}

/// The signal thread and the watchdog. Signals stay blocked until the signal thread runs, so
/// one sent before is handled the moment it starts.
fn start_background() {
    start_signal_thread();
    crate::process::start_watchdog();
}

/// SIGTERM (0), SIGINT (130) and SIGHUP (129) answer every prompt in flight `cancelled`, then
/// end the process (F9.1); no frame starts after those answers.
fn start_signal_thread() {
    use nix::sys::signal::Signal;
    let set = crate::process::handled_signals();
    std::thread::spawn(move || loop {
        let Ok(signal) = set.wait() else { continue };
        journal::record(Event::Signal {
            signal: signal.as_str().to_string(),
            ignored: false,
        });
        let code = if signal == Signal::SIGTERM {
            0
        } else {
            128 + signal as i32
        };
        let _answering = lock(&agent().answering);
        let cancelled: Vec<(Value, Value)> = lock(&agent().sessions)
            .values()
            .filter_map(|session| lock(&session.turn).clone())
            .map(|turn| (turn.prompt_id.clone(), json!({"stopReason": "cancelled"})))
            .collect();
        wire().end(&cancelled, code, ExitReason::Signal);
    });
}

/// The longest line read: 64 MiB. The real runtime answered a 2 MiB line as any other
/// (observed 2026-12-06; longer ones were not tried); fake-dsh bounds what it holds.
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// Reads lines until EOF. The lines already waiting at start (a client writes `initialize` as
/// it spawns the agent) are answered before the signal thread and the watchdog start, so
/// neither delays that answer.
fn read_lines() -> ! {
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, std::io::stdin().lock());
    let mut framer = dsh_protocol::LineFramer::with_limit(MAX_LINE_BYTES);
    let mut open = true;
    if crate::process::stdin_ready() {
        open = feed(&mut reader, &mut framer);
    }
    start_background();
    while open {
        open = feed(&mut reader, &mut framer);
    }
    journal::record(Event::StdinClosed);
    if wire().is_closed() {
        // F2.5: after a batch, EOF no longer ends the process; a signal (or the watchdog) does.
        crate::process::hang();
    }
    let _answering = lock(&agent().answering);
    wire().end(&[], 0, ExitReason::StdinClosed)
}

/// Reads what stdin has (one buffer) and handles the lines it completes; false at EOF or on a
/// read error.
fn feed(reader: &mut impl BufRead, framer: &mut dsh_protocol::LineFramer) -> bool {
    crate::process::feed_lines(reader, framer, handle_line, too_long)
}

/// A line past the bound, as soon as it passes it: journaled as a `command` whose `raw` says
/// so, said on stderr naming the line and the bound, exit 2 (fake-dsh's status for its own
/// limits).
fn too_long(number: usize) -> ! {
    journal::record(Event::Command {
        command: None,
        raw: Some(format!(
            "[stdin line {number}: over {MAX_LINE_BYTES} bytes, not kept]"
        )),
    });
    crate::output::stderr_bytes(
        format!(
            "fake-dsh: stdin line {number} is longer than {MAX_LINE_BYTES} bytes (64 MiB), \
             fake-dsh's limit of an ACP message line; exiting\n"
        )
        .as_bytes(),
    );
    wire().end(&[], 2, ExitReason::Error)
}

/// One line: journaled, classified, handled.
fn handle_line(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    // The journal keeps a JSON object as the command, anything else as the raw line.
    let parsed: Option<Value> = serde_json::from_str(text.trim())
        .ok()
        .filter(Value::is_object);
    journal::record(match &parsed {
        Some(value) => Event::Command {
            command: Some(value.clone()),
            raw: None,
        },
        None => Event::Command {
            command: None,
            raw: Some(text.trim_end_matches(['\n', '\r']).to_string()),
        },
    });
    if wire().is_closed() {
        return;
    }
    match super::rpc::classify(bytes) {
        Incoming::Blank => {}
        Incoming::Batch => wire().close(),
        Incoming::Refused {
            code,
            message,
            data,
        } => wire().fail(&Value::Null, code, message, data),
        Incoming::Request { id, method, params } => request(&id, &method, params.as_ref()),
        Incoming::Notification { method, params } => notification(&method, params.as_ref()),
        Incoming::Response { id, answer } => response(&id, answer),
    }
}

/// A request: answered now, or (a prompt) when its turn ends.
fn request(id: &Value, method: &str, params: Option<&Value>) {
    let agent = agent();
    let handler: fn(&Agent, &Value) -> methods::Answer = match method {
        "initialize" => |_, params| methods::initialize(params),
        "authenticate" => |_, _| Ok(json!({})),
        "session/new" => methods::new_session,
        "session/list" => methods::list,
        "session/resume" => methods::resume,
        "session/close" => methods::close,
        "session/set_config_option" => methods::set_config_option,
        "session/prompt" => {
            // Answered when its turn ends, or now when refused.
            if let Err(error) = methods::object_params(params).and_then(|p| prompt(id, p)) {
                fail(id, error);
            }
            return;
        }
        other => return fail(id, methods::not_found(other)),
    };
    match methods::object_params(params).and_then(|params| handler(agent, params)) {
        Ok(result) => wire().respond(id, result),
        Err(error) => fail(id, error),
    }
    if let Some(error) = &agent.fatal_after_answer {
        crate::output::stderr_bytes(error.as_bytes());
        wire().end(&[], 1, ExitReason::Error);
    }
}

fn fail(id: &Value, error: RpcError) {
    wire().fail(id, error.code, &error.message, error.data);
}

/// `session/cancel {sessionId}` and `$/cancel_request {requestId}` cancel a prompt in flight
/// (F8); anything else, and a cancel with nothing in flight, does nothing.
fn notification(method: &str, params: Option<&Value>) {
    let params = params.cloned().unwrap_or(Value::Null);
    let sessions: Vec<Arc<Session>> = lock(&agent().sessions).values().cloned().collect();
    let in_flight = sessions
        .iter()
        .filter_map(|s| lock(&s.turn).clone().map(|t| (s, t)));
    let targets: Vec<Arc<Turn>> = match method {
        "session/cancel" => in_flight
            .filter(|(session, _)| params["sessionId"] == session.id.as_str())
            .map(|(_, turn)| turn)
            .collect(),
        "$/cancel_request" => in_flight
            .filter(|(_, turn)| turn.prompt_id == params["requestId"])
            .map(|(_, turn)| turn)
            .collect(),
        _ => Vec::new(),
    };
    for turn in targets {
        turn.cancel();
    }
}

/// A response: to the permission request it answers, else said on stderr as the real one does.
fn response(id: &Value, answer: Answer) {
    // An answer to a request the turn stopped waiting for (it was cancelled) is taken
    // silently, as the real one does (F8.1).
    let waiting = lock(&agent().pending).remove(&id.to_string());
    match waiting {
        Some(turn) => turn.answer(answer),
        None => {
            let shown = match id {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            crate::output::stderr_bytes(
                format!("Got response to unknown request {shown}\n").as_bytes(),
            );
        }
    }
}

/// `session/prompt {sessionId, prompt}` (F5.1): checked, then its turn starts on its own
/// thread; the response comes when the turn ends.
fn prompt(id: &Value, params: &Value) -> Result<(), RpcError> {
    let agent = agent();
    let blocks = match (params.get("sessionId"), params.get("prompt")) {
        (Some(Value::String(_)), Some(Value::Array(blocks))) => blocks.clone(),
        (session_id, blocks) => {
            let mut problems = Vec::new();
            if !session_id.is_some_and(Value::is_string) {
                problems.push(("sessionId", super::rpc::expected("string", session_id)));
            }
            if !blocks.is_some_and(Value::is_array) {
                problems.push(("prompt", super::rpc::expected("array", blocks)));
            }
            return Err(methods::zod(super::rpc::tree(&problems)));
        }
    };
    let session = methods::named_session(agent, params)?;
    let text = prompt_text(&blocks)?;
    let turn = {
        let mut slot = lock(&session.turn);
        if slot.is_some() {
            return Err(methods::invalid(
                "a prompt is already in flight for this session",
            ));
        }
        let turn = Arc::new(Turn::new(id.clone()));
        *slot = Some(turn.clone());
        turn
    };
    let script = next_script(agent, &session, &text);
    std::thread::spawn(move || run_turn(&session, &turn, &text, &script));
    Ok(())
}

/// The prompt's text as the model gets it, or the refusal of its content (F5.1).
fn prompt_text(blocks: &[Value]) -> Result<String, RpcError> {
    let mut text = String::new();
    for block in blocks {
        match block["type"].as_str() {
            Some("text") => text.push_str(block["text"].as_str().unwrap_or_default()),
            Some("resource_link") => text.push_str(&format!(
                "\n[resource_link name={} uri={}]\n",
                Value::from(block["name"].as_str().unwrap_or_default()),
                Value::from(block["uri"].as_str().unwrap_or_default())
            )),
            Some("image") => {
                return Err(methods::invalid(
                    "inline image prompts were not advertised by this connection",
                ))
            }
            Some("audio") => return Err(methods::invalid("audio prompt content is not supported")),
            Some("resource") => {
                return Err(methods::invalid(
                    "embedded resource prompt content is not supported",
                ))
            }
            _ => {}
        }
    }
    if text.trim().is_empty() {
        return Err(methods::invalid("empty prompt"));
    }
    Ok(text)
}

/// The scenario's turn for this prompt, else the default agent's.
fn next_script(agent: &Agent, session: &Session, prompt: &str) -> AcpTurn {
    let index = agent.prompts.fetch_add(1, Ordering::SeqCst);
    if let Some(script) = agent.scenario.turns.get(index) {
        return script.clone();
    }
    let page = session.cwd.join("index.html");
    let green = prompt.to_lowercase().contains("green");
    let must_read = page.is_file() && (green || !lock(&session.state).known_files.contains(&page));
    super::agent::default_turn(prompt, must_read)
}

/// Plays the turn and writes its answer: the stop reason, `cancelled`, or the `-32603` of a
/// failed turn (the session lives on); the turn is recorded in the session's log first.
fn run_turn(session: &Session, turn: &Arc<Turn>, prompt: &str, script: &AcpTurn) {
    let agent = agent();
    let outcome = turn::play(agent, session, turn, prompt, script);
    let _answering = lock(&agent.answering);
    if let Outcome::Exit(code) = outcome {
        wire().end(&[], code, ExitReason::ScriptEnd);
    }
    {
        let mut state = lock(&session.state);
        state.turns += 1;
        let used = state.used;
        if let Some(stored) = state.stored.as_mut() {
            stored.append(&json!({"type": "turn", "prompt": prompt, "used": used,
                                  "outcome": format!("{outcome:?}")}));
        }
    }
    *lock(&session.turn) = None;
    let id = &turn.prompt_id;
    match outcome {
        Outcome::Stop(stop) => wire().respond(id, json!({"stopReason": stop.name()})),
        Outcome::Cancelled => wire().respond(id, json!({"stopReason": "cancelled"})),
        Outcome::Failed(message) => wire().fail(
            id,
            code::INTERNAL_ERROR,
            &format!("Internal error: turn failed: {message}"),
            None,
        ),
        Outcome::Exit(_) => unreachable!("ended above"),
    }
    turn.finish();
}
