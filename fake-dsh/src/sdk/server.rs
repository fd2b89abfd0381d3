//! The SDK runtime's request loop, as the real one behaves on the wire (docs/surface-sdk.md):
//! newline-terminated JSON-RPC requests on stdin (junk, batches, notifications and `null` ids
//! dropped; a last line without its newline never processed; a line over 1 MiB ends the process
//! with exit 2), three methods, `-32603` for every failure, one thread per running session so
//! turns overlap, the receipt and `running` before the `session/prompt` response, `shutdown`
//! answered last, stdin EOF and SIGTERM exit 0, SIGINT 130.

use super::scenario::{self, SdkScenario, SubagentScript, TurnScript};
use super::session::{self, Flavor, Session, Sink};
use super::wire::wire;
use crate::journal::{self, Event, ExitReason};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::BufRead;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// One live session.
type Live = Arc<Mutex<Session>>;

/// The server's state, shared by the request loop and the session threads.
struct Server {
    flavor: Flavor,
    scenario: SdkScenario,
    initialized: AtomicBool,
    shutting_down: AtomicBool,
    /// Accepted prompts so far: the index of the next scripted turn.
    prompts: AtomicUsize,
    cwd: Mutex<PathBuf>,
    /// The model settings `initialize` asked for; sessions opened after it use them.
    config: Mutex<session::ModelConfig>,
    sessions: Mutex<HashMap<String, Live>>,
    /// Background children started by a parent's `subagent` call, by parent id, with the task
    /// they were given: played after the parent's turn.
    children: Mutex<HashMap<String, (Live, Value)>>,
    /// Where session logs live (`$DSH_HOME/sessions`, or 0.1.1's `./.sessions`).
    log_root: Option<PathBuf>,
    /// 0.1.5's Harness home, claimed ([`crate::home::claim`]) before the first session is stored.
    home: Option<PathBuf>,
    /// The outcome of that claim, once made.
    claimed: OnceLock<Result<(), String>>,
}

static SERVER: OnceLock<Server> = OnceLock::new();

fn server() -> &'static Server {
    SERVER.get().expect("the server is set before any request")
}

/// Serves the SDK runtime on stdin/stdout; never returns.
pub fn run(flavor: Flavor) -> ! {
    let scenario = scenario::load_from_env().unwrap_or_else(|message| {
        crate::output::stderr_bytes(format!("{message}\n").as_bytes());
        crate::process::finish(2, ExitReason::Error)
    });
    if let Some(text) = &scenario.stderr {
        crate::output::stderr_bytes(text.as_bytes());
    }
    super::wire::configure(super::wire::Shapes {
        crlf: scenario.crlf,
        stray_responses: scenario.stray_responses,
        coerced_id_decoys: scenario.coerced_id_decoys,
        split_in_char_ms: scenario.split_in_char_ms,
    });
    let cwd = std::env::current_dir().unwrap_or_default();
    let home = match flavor.persona {
        session::Persona::V011 => None,
        session::Persona::V015 | session::Persona::V021 => crate::home::dsh_home().ok(),
    };
    let log_root = match flavor.persona {
        session::Persona::V011 => std::env::var_os("DSH_SESSION_ROOT")
            .map(PathBuf::from)
            .or_else(|| Some(cwd.join(".sessions"))),
        session::Persona::V015 | session::Persona::V021 => {
            home.as_ref().map(|h| h.join("sessions"))
        }
    };
    let _ = SERVER.set(Server {
        flavor,
        scenario,
        initialized: AtomicBool::new(false),
        shutting_down: AtomicBool::new(false),
        prompts: AtomicUsize::new(0),
        cwd: Mutex::new(cwd),
        config: Mutex::new(session::ModelConfig::default()),
        sessions: Mutex::new(HashMap::new()),
        children: Mutex::new(HashMap::new()),
        log_root,
        home,
        claimed: OnceLock::new(),
    });
    read_requests()
}

/// The signal thread and the watchdog (signals stay blocked, so one sent before they start is
/// obeyed the moment the signal thread runs).
fn start_background() {
    start_signal_thread();
    crate::process::start_watchdog();
}

/// SIGTERM ends the process with 0 (the real runtime drains, then exits 0; with the scenario's
/// `ignore_sigterm` it is journaled as ignored and nothing happens), SIGINT with 130, SIGHUP with
/// 129; the frame being written is finished first.
fn start_signal_thread() {
    use nix::sys::signal::Signal;
    let set = crate::process::handled_signals();
    let ignore_sigterm = server().scenario.ignore_sigterm;
    std::thread::spawn(move || loop {
        let Ok(signal) = set.wait() else { continue };
        let ignored = ignore_sigterm && signal == Signal::SIGTERM;
        journal::record(Event::Signal {
            signal: signal.as_str().to_string(),
            ignored,
        });
        if ignored {
            // (adversarial) the scenario's `ignore_sigterm`: only SIGKILL ends it now.
            continue;
        }
        let code = if signal == Signal::SIGTERM {
            0
        } else {
            128 + signal as i32
        };
        wire().end(None, code, ExitReason::Signal);
    });
}

/// The longest request line read, without its line ending: the kit's line bound,
/// [`dsh_protocol::MAX_LINE_BYTES`] (1 MiB). A longer line ends the process ([`too_long`]).
pub const MAX_REQUEST_LINE_BYTES: usize = dsh_protocol::MAX_LINE_BYTES;

/// Reads newline-terminated lines until EOF through the kit's bounded line framer
/// ([`dsh_protocol::LineFramer`]); the bytes after the last newline are never handled. The lines
/// already waiting at start (a client writes `initialize` as it spawns the runtime) are answered
/// before the signal thread and the watchdog start, so neither delays that answer (as `ready` on
/// the open-design surface); nothing blocks before they run.
fn read_requests() -> ! {
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, std::io::stdin().lock());
    let mut framer = dsh_protocol::LineFramer::with_limit(MAX_REQUEST_LINE_BYTES);
    if crate::process::stdin_ready() {
        feed(&mut reader, &mut framer);
        refuse_early_requests();
    }
    start_background();
    while feed(&mut reader, &mut framer) {
        refuse_early_requests();
    }
    journal::record(Event::StdinClosed);
    if server().shutting_down.load(Ordering::SeqCst) || server().scenario.ignore_stdin_eof {
        // The shutdown thread writes the response and ends the process (or, with the scenario's
        // `ignore_stdin_eof`, only a signal or the watchdog does).
        crate::process::hang();
    }
    wire().end(None, 0, ExitReason::StdinClosed)
}

/// Reads what stdin has (one buffer) and handles the lines it completes; false at EOF or on a
/// read error.
fn feed(reader: &mut impl BufRead, framer: &mut dsh_protocol::LineFramer) -> bool {
    let more = crate::process::feed_lines(reader, framer, handle_line, too_long);
    run_deferred();
    more
}

/// The prompts of the lines one read brought, handled after the rest of those lines: the real
/// runtime (0.1.5 and 0.2.1) answers an unknown method at once and handles `session/prompt` a
/// tick later, so a later request's error can come before an earlier prompt's answer (observed:
/// a prompt and an unknown method written together are answered unknown method first).
static DEFERRED: Mutex<Vec<(Value, Value)>> = Mutex::new(Vec::new());

/// Handles the prompts [`DEFERRED`] holds, in the order they came.
fn run_deferred() {
    let prompts = std::mem::take(&mut *DEFERRED.lock().unwrap_or_else(|p| p.into_inner()));
    for (id, params) in prompts {
        if let Err(message) = prompt(&id, &params) {
            refuse(&id, &message);
        }
    }
}

/// A request line past [`MAX_REQUEST_LINE_BYTES`], as soon as it passes the bound (the rest is
/// never read): journaled as a `command` whose `raw` says so (none of its bytes), said on stderr
/// naming the line and the bound, and the process ends with exit 2, fake-dsh's status for its
/// own limits. No frame follows.
fn too_long(number: usize) -> ! {
    let limit = MAX_REQUEST_LINE_BYTES;
    journal::record(Event::Command {
        command: None,
        raw: Some(format!(
            "[stdin line {number}: over {limit} bytes, not kept]"
        )),
    });
    crate::output::stderr_bytes(
        format!(
            "fake-dsh: stdin line {number} is longer than {limit} bytes (1 MiB), the limit of an \
             SDK request line; exiting\n"
        )
        .as_bytes(),
    );
    wire().end(None, 2, ExitReason::Error)
}

/// One line: journaled, then handled when it is a request (an object with a method and a
/// non-null id); anything else is dropped, as the real runtime does.
fn handle_line(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_end_matches(['\n', '\r']);
    let parsed: Option<Value> = serde_json::from_str(text).ok();
    journal::record(match &parsed {
        Some(value) => Event::Command {
            command: Some(value.clone()),
            raw: None,
        },
        None => Event::Command {
            command: None,
            raw: Some(text.to_string()),
        },
    });
    let Some(request) = parsed.filter(Value::is_object) else {
        return;
    };
    let id = &request["id"];
    let (Some(method), true) = (request["method"].as_str(), id.is_number() || id.is_string())
    else {
        return;
    };
    let params = &request["params"];
    match method {
        "initialize" => initialize(id.clone(), params.clone()),
        // Before `initialize` has answered, a prompt is refused in the order sent, with the
        // other session requests ([`refuse`]); after, it waits for the rest of its read.
        "session/prompt"
            if server().flavor.rejects_early_prompt()
                && server().initialized.load(Ordering::SeqCst) =>
        {
            DEFERRED
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((id.clone(), params.clone()))
        }
        "session/prompt" => {
            if let Err(message) = prompt(id, params) {
                refuse(id, &message);
            }
        }
        "shutdown" => shutdown(id.clone()),
        "session/resume" | "session/working-directory/get" | "session/working-directory/set"
            if server().flavor.v021() =>
        {
            let answer = match method {
                "session/resume" => resume(params),
                get_or_set => working_directory(params, get_or_set.ends_with("set")),
            };
            match answer {
                Ok(result) => wire().respond(id, result),
                Err(message) => refuse(id, &message),
            }
        }
        other => wire().fail(
            id,
            &format!("unknown DeepSeek Harness SDK runtime method: {other}"),
        ),
    }
}

/// The message the real runtime refuses a session request with before `initialize` has answered.
const NOT_INITIALIZED: &str = "SDK server is not initialized";

/// The ids of the requests refused as [`NOT_INITIALIZED`] whose refusal is not written yet.
static EARLY: Mutex<Vec<Value>> = Mutex::new(Vec::new());

/// Answers a refused request: at once, but a refusal for coming before `initialize` answered,
/// which waits for [`refuse_early_requests`] (observed on 0.2.1rc2 and 0.1.5rc1, docs/
/// surface-sdk.md "Methods": of the requests read together, an unknown method's error comes
/// first, then the `not initialized` refusals in the order they were sent, then `initialize`'s
/// response).
fn refuse(id: &Value, message: &str) {
    if message == NOT_INITIALIZED {
        EARLY
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(id.clone());
    } else {
        wire().fail(id, message);
    }
}

/// Writes the refusals [`refuse`] held: once the lines read together are handled, and before
/// `initialize`'s response.
fn refuse_early_requests() {
    let early = std::mem::take(&mut *EARLY.lock().unwrap_or_else(|p| p.into_inner()));
    for id in early {
        wire().fail(&id, NOT_INITIALIZED);
    }
}

/// How long `initialize` takes: the scenario's `initialize_delay_ms`, else
/// `FAKE_DSH_INITIALIZE_DELAY_MS` (the real runtime's boot: 1.5 to 5 s on 0.1.5 and 0.2.1), else
/// none. A value that is not a number of milliseconds is said on stderr and ignored.
fn initialize_delay_ms() -> u64 {
    let scripted = server().scenario.initialize_delay_ms;
    if scripted > 0 {
        return scripted;
    }
    let Some(value) = std::env::var_os(INITIALIZE_DELAY_ENV).filter(|v| !v.is_empty()) else {
        return 0;
    };
    value
        .to_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            crate::output::stderr_bytes(
                format!(
                "fake-dsh: {INITIALIZE_DELAY_ENV}={} is not a number of milliseconds; ignored\n",
                value.to_string_lossy()
            )
                .as_bytes(),
            );
            0
        })
}

/// The variable giving `initialize` a latency when the scenario gives none.
pub const INITIALIZE_DELAY_ENV: &str = "FAKE_DSH_INITIALIZE_DELAY_MS";

/// `initialize`: validated like the real one, answered after [`initialize_delay_ms`] (requests
/// read meanwhile are handled first: the session requests among them refused as
/// [`NOT_INITIALIZED`]).
fn initialize(id: Value, params: Value) {
    if let Err(message) = check_initialize(&params) {
        return wire().fail(&id, &message);
    }
    let answer = move || {
        refuse_early_requests();
        let base = server()
            .cwd
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(cwd) = params["cwd"].as_str() {
            *server().cwd.lock().unwrap_or_else(|p| p.into_inner()) = resolve(&base, cwd);
        }
        *server().config.lock().unwrap_or_else(|p| p.into_inner()) =
            session::ModelConfig::from_initialize(&params);
        server().initialized.store(true, Ordering::SeqCst);
        wire().respond(
            &id,
            json!({"serverInfo": {"name": "deepseek-harness-sdk-runtime", "version": "0.0.1"}}),
        );
        for line in &server().scenario.stdout_noise {
            wire().raw(format!("{line}\n").as_bytes());
        }
    };
    match initialize_delay_ms() {
        0 => answer(),
        delay => {
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(delay));
                answer();
            });
        }
    }
}

/// `path.resolve(base, cwd)`: `cwd` made absolute against `base`, `.` and `..` folded away.
fn resolve(base: &std::path::Path, cwd: &str) -> PathBuf {
    session::resolve(base, cwd)
}

/// What 0.2.1 answers any session request with while it is shutting down or not yet initialized.
fn ready() -> Result<(), String> {
    if server().shutting_down.load(Ordering::SeqCst) {
        return Err("SDK server is shutting down".to_string());
    }
    if !server().initialized.load(Ordering::SeqCst) {
        return Err(NOT_INITIALIZED.to_string());
    }
    Ok(())
}

/// 0.2.1's `session/resume {sessionId}`: a cold resume of a session an earlier process stored
/// (in this Harness home: [`Session::resume`]), with the model settings `initialize` gave this
/// process; `{}` and no event. A session open in this process and an unknown one are refused
/// with the real runtime's messages.
fn resume(params: &Value) -> Result<Value, String> {
    ready()?;
    let id = params["sessionId"]
        .as_str()
        .filter(|id| !id.is_empty())
        .ok_or("session/resume requires a non-empty sessionId string")?;
    let server = server();
    let mut sessions = server.sessions.lock().unwrap_or_else(|p| p.into_inner());
    if sessions.contains_key(id) {
        return Err(format!("SDK session is already open or opening: {id}"));
    }
    let mut session = Session::resume(id, server.flavor, server.log_root.as_deref(), sink())?;
    claim_home()?;
    // Its turns use this process's model settings, like a new session's (observed).
    session.config = server
        .config
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    session.spawn = Some(Box::new(start_child));
    sessions.insert(id.to_string(), Arc::new(Mutex::new(session)));
    Ok(json!({}))
}

/// 0.2.1's `session/working-directory/get|set {sessionId, path?}`: `{cwd}`. Like a prompt, an
/// id no session has yet opens a new one (a stored one is refused as already existing).
fn working_directory(params: &Value, set: bool) -> Result<Value, String> {
    ready()?;
    let id = params["sessionId"]
        .as_str()
        .filter(|id| !id.is_empty())
        .ok_or("working-directory requests require a non-empty sessionId")?;
    let path = match (set, params["path"].as_str()) {
        (false, _) => None,
        (true, Some(path)) => Some(path),
        (true, None) => return Err("working-directory set requires a path string".to_string()),
    };
    let live = live_session(Some(id))?;
    let mut session = live.lock().unwrap_or_else(|p| p.into_inner());
    let cwd = match path {
        Some(path) => session.set_working_directory(path)?,
        None => session.working_directory(),
    };
    Ok(json!({"cwd": cwd.to_string_lossy()}))
}

/// The real runtime's checks, with its messages.
fn check_initialize(params: &Value) -> Result<(), String> {
    let effort = &params["reasoningEffort"];
    if !effort.is_null() && effort.as_str().is_none_or(str::is_empty) {
        return Err("initialize reasoningEffort must be a non-empty string".to_string());
    }
    let max = &params["maxTokens"];
    if !max.is_null() && max.as_u64().is_none_or(|n| n == 0 || n > (1 << 53) - 1) {
        return Err("initialize maxTokens must be a positive safe integer".to_string());
    }
    if !params["cwd"].is_string() {
        return Err(format!(
            "The \"paths[0]\" argument must be of type string. Received {}",
            if params["cwd"].is_null() {
                "undefined".to_string()
            } else {
                params["cwd"].to_string()
            }
        ));
    }
    match params["provider"].as_str() {
        Some("deepseek-official") => Ok(()),
        other => Err(format!(
            "no adapter registered for provider \"{}\"",
            other.unwrap_or("undefined")
        )),
    }
}

/// `session/prompt`: queues one user message and answers with its id. The receipt, and for an
/// idle session `running` and the new turn's start, are written before the response.
fn prompt(id: &Value, params: &Value) -> Result<(), String> {
    let server = server();
    if server.shutting_down.load(Ordering::SeqCst) {
        return Err("SDK server is shutting down".to_string());
    }
    if server.flavor.rejects_early_prompt() && !server.initialized.load(Ordering::SeqCst) {
        return Err(NOT_INITIALIZED.to_string());
    }
    if let Some(refusal) = scripted_refusal() {
        let session_id = params["sessionId"].as_str().unwrap_or("undefined");
        return Err(refusal.message(session_id));
    }
    let live = live_session(params["sessionId"].as_str())?;
    let content = params["contentBlocks"].clone();
    if server.flavor.rejects_early_prompt() && !content.is_array() {
        return Err(blocks_refused(params.get("contentBlocks")));
    }
    let message = session::user_message(if content.is_array() {
        content
    } else {
        json!([])
    });
    let script = next_script(&session::message_text(&message), &live);
    if script.idle_before_receipt {
        // An earlier turn's `idle`, as a client reading behind the runtime meets it.
        status(&live.lock().unwrap_or_else(|p| p.into_inner()), "idle");
    }
    let message_id = message["id"].clone();
    enqueue(live, message, script, || {
        wire().respond(id, json!({"messageId": message_id}))
    });
    Ok(())
}

/// What 0.1.5 and 0.2.1 answer a prompt whose `contentBlocks` is not an array (observed: the
/// runtime's own TypeError).
fn blocks_refused(content: Option<&Value>) -> String {
    match content {
        None => "Cannot read properties of undefined (reading 'filter')".to_string(),
        Some(Value::Null) => "Cannot read properties of null (reading 'filter')".to_string(),
        Some(_) => "blocks.filter is not a function".to_string(),
    }
}

/// Claims 0.1.5's Harness home once, on the first new session (a process that stores nothing
/// writes nothing): a home holding files fake-dsh did not create refuses every new session with
/// the claim's error (naming the home and `DSH_HOME`), also said once on stderr.
fn claim_home() -> Result<(), String> {
    let Some(home) = &server().home else {
        return Ok(());
    };
    server()
        .claimed
        .get_or_init(|| {
            crate::home::claim(home).inspect_err(|message| {
                crate::output::stderr_bytes(format!("{message}\n").as_bytes());
            })
        })
        .clone()
}

/// The session for an id, created on first use; a session a previous process left in the log
/// root is refused like the real runtime refuses it.
fn live_session(id: Option<&str>) -> Result<Live, String> {
    let server = server();
    let mut sessions = server.sessions.lock().unwrap_or_else(|p| p.into_inner());
    let Some(id) = id else {
        return Err(format!(
            "agent id \"undefined\" does not match session id \"session-{}\"",
            sessions.len() + 1
        ));
    };
    if let Some(live) = sessions.get(id) {
        return Ok(live.clone());
    }
    claim_home()?;
    let cwd = server.cwd.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut session = Session::create(id, &cwd, server.flavor, server.log_root.as_deref(), sink())?;
    session.config = server
        .config
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    session.spawn = Some(Box::new(start_child));
    let live = Arc::new(Mutex::new(session));
    sessions.insert(id.to_string(), live.clone());
    Ok(live)
}

/// Session events as `session.event` notifications.
fn sink() -> Sink {
    Box::new(|session_id, event| {
        wire().notify(
            "session.event",
            json!({"sessionId": session_id, "event": event}),
        )
    })
}

fn status(session: &Session, status: &str) {
    wire().notify(
        "session.status",
        json!({"sessionId": session.id, "status": status}),
    );
}

/// The scenario's refusal of this prompt, if its turn is one (the turn is used up by it).
fn scripted_refusal() -> Option<scenario::Refusal> {
    let server = server();
    let index = server.prompts.load(Ordering::SeqCst);
    let refusal = server.scenario.turns.get(index)?.refuse?;
    server.prompts.fetch_add(1, Ordering::SeqCst);
    Some(refusal)
}

/// The scenario's turn for this prompt, else the default agent's.
fn next_script(prompt: &str, live: &Live) -> TurnScript {
    let index = server().prompts.fetch_add(1, Ordering::SeqCst);
    match server().scenario.turns.get(index) {
        Some(script) => script.clone(),
        None => {
            let cwd = live.lock().unwrap_or_else(|p| p.into_inner()).cwd.clone();
            session::default_turn(prompt, &cwd)
        }
    }
}

/// Writes the receipt; an idle session starts the turn on its own thread, a running one queues it.
/// `accepted` runs under the session lock once the turn is started or queued (the response).
fn enqueue(live: Live, message: Value, script: TurnScript, accepted: impl FnOnce()) {
    let mut session = live.lock().unwrap_or_else(|p| p.into_inner());
    session.receipt(&message);
    if session.running {
        session.queue.push_back((message, script));
        accepted();
        return;
    }
    session.running = true;
    status(&session, "running");
    session.start_turn();
    accepted();
    drop(session);
    std::thread::spawn(move || play_turns(live, message, script));
}

fn stopping() -> bool {
    server().shutting_down.load(Ordering::SeqCst)
}

/// Plays turns until the queue is empty, then reports `idle` (and lets a background subagent
/// finish after that).
fn play_turns(live: Live, mut message: Value, mut script: TurnScript) {
    loop {
        if let Some(signal) = script.signal_self.clone() {
            signal_self_later(signal);
        }
        if script.background_subagent.is_some() {
            // The model's first step delegates (observed: a `subagent` call, then the turn goes on).
            script.steps.insert(0, delegating_step());
        }
        if !session::play_turn(&live, &message, &script, &stopping) {
            return;
        }
        let background = script.background_subagent.clone();
        let mut session = live.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((next_message, next_script)) = session.queue.pop_front() {
            session.start_turn();
            (message, script) = (next_message, next_script);
            continue;
        }
        session.running = false;
        status(&session, "idle");
        drop(session);
        if let Some(child) = background {
            finish_subagent(live, child);
        }
        return;
    }
}

/// (adversarial) The scenario's signal to this process, `after_ms` from now: the runtime dies
/// mid-turn (SIGTERM through the signal thread, exit 0; SIGKILL at once).
fn signal_self_later(signal: scenario::SelfSignal) {
    use nix::sys::signal::Signal;
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(signal.after_ms));
        let which = match signal.signal {
            scenario::SignalName::Term => Signal::SIGTERM,
            scenario::SignalName::Kill => Signal::SIGKILL,
        };
        let _ = nix::sys::signal::kill(nix::unistd::getpid(), which);
    });
}

/// The step that starts a scenario's background child: a `subagent` call.
fn delegating_step() -> scenario::StepScript {
    scenario::StepScript {
        tool_calls: vec![scenario::ToolCallScript {
            name: "subagent".into(),
            arguments: json!({"description": "background task", "prompt": "background task"}),
            needs_approval: false,
        }],
        ..Default::default()
    }
}

/// The parent's instruction the real runtime appends to a child's task (observed).
fn child_instruction(parent: &str) -> String {
    format!(
        "Your parent agent id is {}. Before you finish, send your result to that agent with \
         send_message({{ agent_id: {}, message: \"<self-contained result>\" }}). The parent shares \
         your workspace but does not automatically receive your transcript, tool output, or \
         reasoning. Send earlier messages as well when a finding changes what the parent should \
         do next; sending a message does not end your turn.",
        Value::from(parent),
        Value::from(parent)
    )
}

/// The `subagent` tool's spawn (observed): `subagent.started`, then the child (a UUID session
/// id) takes its task and starts its turn (receipt, `running`, `turn/start`); it plays after the
/// parent's turn ([`finish_subagent`]).
fn start_child(parent: &Session, _label: &str, prompt: &str) -> Option<String> {
    let child_id = uuid::Uuid::new_v4().to_string();
    wire().notify(
        "subagent.started",
        json!({"parentSessionId": parent.id, "childSessionId": child_id}),
    );
    let mut child = Session::child(&child_id, parent, sink());
    let task = session::user_message(json!([{"type": "text", "text": prompt},
        {"type": "text", "text": child_instruction(&parent.id)}]));
    child.receipt(&task);
    child.running = true;
    status(&child, "running");
    child.start_turn();
    server()
        .children
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(parent.id.clone(), (Arc::new(Mutex::new(child)), task));
    Some(child_id)
}

/// The background child's turn and `idle`, then the parent's wake-up turn on the
/// `subagent-settled` notice, with `subagent.finished` once that turn has started (observed).
fn finish_subagent(live: Live, script: SubagentScript) {
    std::thread::sleep(std::time::Duration::from_millis(script.finish_after_ms));
    if stopping() {
        return;
    }
    let parent = live.lock().unwrap_or_else(|p| p.into_inner()).id.clone();
    let started = server()
        .children
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&parent);
    let Some((child, task)) = started else {
        return;
    };
    let reply = TurnScript {
        steps: vec![scenario::StepScript {
            text: Some(script.text.clone()),
            ..Default::default()
        }],
        ..Default::default()
    };
    if !session::play_turn(&child, &task, &reply, &stopping) {
        return;
    }
    let child_id = {
        let mut child = child.lock().unwrap_or_else(|p| p.into_inner());
        child.running = false;
        status(&child, "idle");
        child.id.clone()
    };
    let summary = format!(
        "Background subagent {child_id} finished and will do no further work unless you send it \
         more."
    );
    let closing = json!([{"type": "text", "text": script.text}]);
    let mut notice = session::user_message(json!([{"type": "text", "text": summary},
        {"type": "text", "text": "Its closing message:"}, {"type": "text", "text": script.text}]));
    notice["source"] = json!({"kind": "subagent-settled", "form": "notice", "summary": summary,
                              "senderSessionId": child_id});
    let wake = TurnScript {
        steps: vec![scenario::StepScript {
            text: Some(script.wake_text),
            ..Default::default()
        }],
        ..Default::default()
    };
    enqueue(live, notice, wake, move || {
        wire().notify(
            "subagent.finished",
            json!({"provider": "spawn", "agentId": child_id, "parentSessionId": parent,
                   "childSessionId": child_id, "status": "ok", "stopReason": "completed",
                   "lastAssistantMessage": closing}),
        );
    });
}

/// `shutdown`: from now on prompts fail; after the scenario's drain the `{}` response is the last
/// frame and the process exits 0 (a running turn gets no `turn/end`).
fn shutdown(id: Value) {
    if server().scenario.ignore_shutdown {
        // (adversarial) never answered; prompts still work.
        return;
    }
    if server().shutting_down.swap(true, Ordering::SeqCst) {
        // A racing second shutdown: the first one's response ends the process.
        return;
    }
    let drain = server().scenario.shutdown_drain_ms;
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(drain.max(20)));
        wire().end(Some((&id, json!({}))), 0, ExitReason::ScriptEnd)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initialize_is_checked_like_the_real_runtime() {
        let ok = json!({"cwd": ".", "provider": "deepseek-official", "model": "m"});
        assert!(check_initialize(&ok).is_ok());
        let mut bad = ok.clone();
        bad["reasoningEffort"] = json!("");
        assert!(check_initialize(&bad)
            .unwrap_err()
            .contains("reasoningEffort"));
        let mut bad = ok.clone();
        bad["maxTokens"] = json!(0);
        assert!(check_initialize(&bad)
            .unwrap_err()
            .contains("positive safe integer"));
        let mut bad = ok.clone();
        bad["provider"] = json!("openai");
        assert_eq!(
            check_initialize(&bad).unwrap_err(),
            "no adapter registered for provider \"openai\""
        );
        assert!(check_initialize(&json!({}))
            .unwrap_err()
            .contains("Received undefined"));
        let base = std::path::Path::new("/w/project");
        assert_eq!(resolve(base, "."), PathBuf::from("/w/project"));
        assert_eq!(resolve(base, "../other/./x"), PathBuf::from("/w/other/x"));
        assert_eq!(resolve(base, "/abs"), PathBuf::from("/abs"));
    }
}
