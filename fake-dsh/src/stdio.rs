//! The `--stdio` mode: the per-process context (stdout, inbox, bound execute, placeholders), the
//! default agent's command loop, and the scenario script player.

use crate::agent;
use crate::frames;
use crate::inbox::{remaining, Inbound, Inbox, Wait};
use crate::journal::ExitReason;
use crate::output::{self, FrameEntries, Stdout};
use crate::process::{self, finish};
use crate::profile::Profile;
use crate::scenario::{
    Action, AgentKnobs, ExecuteBranches, ExecuteKind, ProtocolErrorSpec, ResultSpec, SessionSpec,
    TextLineSpec, UsageSpec,
};
use crate::sessions::{self, SessionRecord};
use dsh_protocol::frames::TokenCounts;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The `execute` a process is serving.
#[derive(Debug, Clone, PartialEq)]
pub struct Execute {
    pub request_id: String,
    pub cwd: String,
    pub prompt: String,
    pub resume_session_id: Option<String>,
    pub provider: String,
    pub model: String,
}

/// What a host line turned out to be.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Execute(Execute),
    Cancel(String),
    /// A JSON object that is not a valid command: its request_id (if any) and why.
    Invalid(Option<String>, String),
    Unparseable,
    Closed,
}

/// Classifies an inbound line.
pub fn classify(inbound: &Inbound) -> Command {
    let command = match inbound {
        Inbound::Command(command) => command,
        Inbound::Unparseable(_) => return Command::Unparseable,
        Inbound::Closed => return Command::Closed,
    };
    let request_id = command
        .get("request_id")
        .and_then(Value::as_str)
        .map(str::to_string);
    let invalid = |why: &str| Command::Invalid(request_id.clone(), why.to_string());
    if command.get("v") != Some(&json!(1)) {
        return invalid("command must carry \"v\": 1");
    }
    let Some(id) = request_id.clone().filter(|id| !id.is_empty()) else {
        return invalid("command needs a non-empty string request_id");
    };
    match command.get("type").and_then(Value::as_str) {
        Some("cancel") => Command::Cancel(id),
        Some("execute") => {
            let Some(cwd) = command.get("cwd").and_then(Value::as_str) else {
                return invalid("execute needs a string cwd");
            };
            if !cwd.starts_with('/') {
                return invalid("execute cwd must be an absolute path");
            }
            let Some(prompt) = command.get("prompt").and_then(Value::as_str) else {
                return invalid("execute needs a string prompt");
            };
            let resume_session_id = match command.get("resume_session_id") {
                None | Some(Value::Null) => None,
                Some(Value::String(resume)) if resume.is_empty() => None,
                Some(Value::String(resume)) => Some(resume.clone()),
                Some(_) => return invalid("execute resume_session_id must be a string"),
            };
            let model = command.get("model");
            let provider = model
                .and_then(|model| model.get("provider"))
                .and_then(Value::as_str)
                .unwrap_or(frames::DEFAULT_PROVIDER);
            let model_id = model
                .and_then(|model| model.get("id"))
                .and_then(Value::as_str)
                .unwrap_or(frames::DEFAULT_MODEL);
            Command::Execute(Execute {
                request_id: id,
                cwd: cwd.to_string(),
                prompt: prompt.to_string(),
                resume_session_id,
                provider: provider.to_string(),
                model: model_id.to_string(),
            })
        }
        Some(other) => invalid(&format!("unknown command type {other:?}")),
        None => invalid("command needs a string type"),
    }
}

/// Everything one `--stdio` process knows while it runs.
pub struct Context {
    pub out: Stdout,
    pub inbox: Inbox,
    /// The profile this process plays (its identity frames and extras).
    pub profile: Profile,
    pub dsh_home: PathBuf,
    /// Where session records live: `$DSH_HOME/sessions`, or the profile's session root.
    pub session_dir: PathBuf,
    pub knobs: AgentKnobs,
    pub execute: Option<Execute>,
    /// A fresh id for a new session, drawn at start.
    pub fresh_session_id: String,
    /// The session id a `session` frame of this process announced.
    pub session_sent: Option<String>,
    /// Request ids a cancel arrived for.
    pub cancelled: HashSet<String>,
}

impl Context {
    pub fn new(
        profile: Profile,
        dsh_home: PathBuf,
        session_dir: PathBuf,
        knobs: AgentKnobs,
    ) -> Context {
        Context {
            out: Stdout::new(),
            inbox: Inbox::for_stdin(),
            profile,
            dsh_home,
            session_dir,
            knobs,
            execute: None,
            fresh_session_id: sessions::new_session_id(),
            session_sent: None,
            cancelled: HashSet::new(),
        }
    }

    /// The active request id, or empty before an execute was read.
    pub fn request_id(&self) -> String {
        self.execute
            .as_ref()
            .map(|execute| execute.request_id.clone())
            .unwrap_or_default()
    }

    /// The session this process serves: the resumed id, or the fresh one.
    pub fn session_id(&self) -> String {
        self.execute
            .as_ref()
            .and_then(|execute| execute.resume_session_id.clone())
            .unwrap_or_else(|| self.fresh_session_id.clone())
    }

    /// A request id that is not the active one.
    pub fn foreign_request_id(&self) -> String {
        match self.execute.as_ref() {
            Some(execute) => format!("{}-foreign", execute.request_id),
            None => "foreign-request".to_string(),
        }
    }

    /// Replaces the placeholders in a string: the run's, and the profile's (`{{runtime_id}}`,
    /// `{{profile}}`, see [`Profile::fill`]).
    pub fn fill(&self, text: &str) -> String {
        if !text.contains("{{") {
            return text.to_string();
        }
        let resume = self
            .execute
            .as_ref()
            .and_then(|execute| execute.resume_session_id.clone())
            .unwrap_or_default();
        self.profile
            .fill(text)
            .replace("{{request_id}}", &self.request_id())
            .replace("{{session_id}}", &self.session_id())
            .replace("{{resume_session_id}}", &resume)
            .replace("{{foreign_request_id}}", &self.foreign_request_id())
    }

    /// Replaces the placeholders in every string of a JSON value.
    pub fn fill_value(&self, value: &Value) -> Value {
        match value {
            Value::String(text) => Value::String(self.fill(text)),
            Value::Array(items) => {
                Value::Array(items.iter().map(|item| self.fill_value(item)).collect())
            }
            Value::Object(members) => Value::Object(
                members
                    .iter()
                    .map(|(name, member)| (name.clone(), self.fill_value(member)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// Records what an inbound line means for later waits (cancels, the first execute) without
    /// answering it: what scripted mode does with commands.
    fn note(&mut self, command: &Command) {
        match command {
            Command::Cancel(request_id) => {
                self.cancelled.insert(request_id.clone());
            }
            Command::Execute(execute) if self.execute.is_none() => {
                self.execute = Some(execute.clone())
            }
            _ => {}
        }
    }

    /// Whether a cancel for the active request has arrived.
    pub fn active_cancelled(&self) -> bool {
        self.execute
            .as_ref()
            .is_some_and(|execute| self.cancelled.contains(&execute.request_id))
    }

    /// Stores the record of a session a scripted `session` or `result` frame named, so a later
    /// process can resume it: the active request's turn is added (once) and, for a terminal
    /// `status`, finished with it.
    fn remember_scripted_session(&self, session_id: &str, status: Option<&str>) {
        if !sessions::is_storable_id(session_id) {
            return;
        }
        let (cwd, request_id, prompt) = match self.execute.as_ref() {
            Some(execute) => (
                execute.cwd.clone(),
                execute.request_id.clone(),
                execute.prompt.clone(),
            ),
            None => (String::new(), String::new(), String::new()),
        };
        let mut record = sessions::load(&self.session_dir, session_id)
            .unwrap_or_else(|_| SessionRecord::new(session_id, &cwd));
        if record.turns.last().map(|turn| turn.request_id.as_str()) != Some(request_id.as_str()) {
            record.begin_turn(&request_id, &prompt, &cwd);
        }
        if let Some(status) = status {
            record.finish_turn(status);
        }
        if let Err(error) = sessions::save(&self.session_dir, &record) {
            eprintln!("fake-dsh: cannot store session record: {error}");
        }
    }

    /// What the bound execute asks for: a new session, or the resume of a session the Harness
    /// home holds or does not hold (an unreadable record counts as not held). None before an
    /// execute was read.
    pub fn execute_kind(&self) -> Option<ExecuteKind> {
        let execute = self.execute.as_ref()?;
        Some(match &execute.resume_session_id {
            None => ExecuteKind::New,
            Some(resume) if sessions::load(&self.session_dir, resume).is_ok() => {
                ExecuteKind::Resume
            }
            Some(_) => ExecuteKind::UnknownResume,
        })
    }
}

/// Runs the default agent for a whole process: `ready` at once, then commands until one turn
/// ends (then exit 0) or stdin closes before any execute (exit 0).
pub fn run_default_agent(mut context: Context) -> ! {
    context.out.write_frame(&frames::ready(context.profile));
    process::start_background();
    context.inbox.start();
    loop {
        let Wait::Got(inbound) = context.inbox.next(None) else {
            continue;
        };
        match classify(&inbound) {
            Command::Execute(execute) => {
                context.execute = Some(execute);
                agent::run_turn(&mut context);
                finish(0, ExitReason::ResultSent);
            }
            Command::Closed => finish(0, ExitReason::StdinClosed),
            other => agent::answer_idle(&mut context, &other),
        }
    }
}

/// Plays a script, then exits 0.
pub fn run_script(mut context: Context, script: &[Action]) -> ! {
    process::start_background();
    context.inbox.start();
    for action in script {
        play(&mut context, action);
    }
    finish(0, ExitReason::ScriptEnd)
}

fn play(context: &mut Context, action: &Action) {
    if action.is_frame_writing() {
        let (bytes, frames) = render(context, action);
        let entries = FrameEntries::before_writing(&frames);
        context.out.write_bytes(&bytes);
        entries.record();
        return;
    }
    match action {
        Action::ReadExecute(timeout) => read_execute(context, timeout.duration()),
        Action::Agent(_) => {
            await_execute(context);
            agent::run_turn(context);
        }
        Action::OnExecute(branches) => on_execute(context, branches),
        Action::Repeat(repeat) => {
            context
                .out
                .repeat(&repeat.text, repeat.bytes, repeat.newline);
            FrameEntries::before_writing(&[None]).record();
        }
        Action::Drip(drip) => {
            let (bytes, frames) = render(context, &drip.action);
            let entries = FrameEntries::before_writing(&frames);
            let delay = Duration::from_millis(drip.delay_ms.unwrap_or(1));
            context.out.drip(&bytes, drip.chunk.unwrap_or(1), delay);
            entries.record();
        }
        Action::Coalesce(actions) => {
            let mut bytes = Vec::new();
            let mut frames = Vec::new();
            for inner in actions {
                let (more, rendered) = render(context, inner);
                bytes.extend_from_slice(&more);
                frames.extend(rendered);
            }
            let entries = FrameEntries::before_writing(&frames);
            context.out.write_bytes(&bytes);
            entries.record();
        }
        Action::SleepMs(millis) => std::thread::sleep(Duration::from_millis(*millis)),
        Action::WaitCancel(timeout) => wait_until(context, timeout.duration(), |context| {
            context.active_cancelled()
        }),
        Action::ResultOnCancel(timeout) => result_on_cancel(context, timeout.duration()),
        Action::WaitStdinClose(timeout) => wait_until(context, timeout.duration(), |_| false),
        Action::Hang(_) => process::hang(),
        Action::IgnoreSigterm(ignore) => process::set_ignore_sigterm(*ignore),
        Action::SpawnChild(spawn) => {
            let spawned = match spawn.detach {
                None => process::spawn_child(spawn.ignore_sigterm),
                Some(detach) => process::spawn_daemon(spawn, detach),
            };
            if let Err(error) = spawned {
                eprintln!("fake-dsh: cannot spawn a child: {error}");
            }
        }
        Action::Stderr(text) => output::stderr_bytes(text.as_bytes()),
        Action::StderrFlood(flood) => output::stderr_flood(flood.bytes),
        Action::StderrPrompt(_) => {
            let prompt = context
                .execute
                .as_ref()
                .map(|execute| execute.prompt.clone())
                .unwrap_or_default();
            output::stderr_bytes(format!("fake-dsh: prompt: {prompt}\n").as_bytes());
        }
        Action::StderrEnv(name) => {
            let value = std::env::var(name).unwrap_or_default();
            output::stderr_bytes(format!("fake-dsh: {name}={value}\n").as_bytes());
        }
        Action::Exit(code) => finish(*code, ExitReason::ExitAction),
        _ => unreachable!("frame-writing actions are rendered above"),
    }
}

/// How long a script that wrote its cancelled result waits for the host to close stdin.
const CLOSE_AFTER_RESULT: Duration = Duration::from_secs(10);

/// `result_on_cancel`: when a cancel of the active request comes within `timeout`, answers it
/// with `result: cancelled` and ends the process (exit 0, once stdin closes); else returns.
fn result_on_cancel(context: &mut Context, timeout: Duration) {
    wait_until(context, timeout, Context::active_cancelled);
    if !context.active_cancelled() {
        return;
    }
    let session_id = context
        .session_sent
        .clone()
        .unwrap_or_else(|| context.session_id());
    let frame = frames::result_cancelled(&context.request_id(), &session_id);
    context.out.write_frame(&frame);
    wait_until(context, CLOSE_AFTER_RESULT, |_| false);
    finish(0, ExitReason::ResultSent)
}

/// Reads the execute unless one was read, waiting as long as it takes (stdin closing first ends
/// the process).
fn await_execute(context: &mut Context) {
    if context.execute.is_none() {
        read_execute(context, Duration::from_secs(u64::MAX / 4));
    }
}

/// `on_execute`: plays the branch for what the bound execute asks for (the store is consulted
/// now, so a session an earlier process stored counts).
fn on_execute(context: &mut Context, branches: &ExecuteBranches) {
    await_execute(context);
    let Some(kind) = context.execute_kind() else {
        return;
    };
    for action in branches.branch(kind) {
        play(context, action);
    }
}

fn read_execute(context: &mut Context, timeout: Duration) {
    let deadline = Instant::now().checked_add(timeout);
    while context.execute.is_none() {
        let left = deadline.map(remaining);
        if left == Some(Duration::ZERO) {
            return;
        }
        match context.inbox.next(left) {
            Wait::TimedOut => return,
            Wait::Got(inbound) => {
                let command = classify(&inbound);
                if command == Command::Closed {
                    finish(0, ExitReason::StdinClosed);
                }
                context.note(&command);
            }
        }
    }
}

fn wait_until(context: &mut Context, timeout: Duration, done: impl Fn(&Context) -> bool) {
    let deadline = Instant::now() + timeout;
    while !done(context) && !context.inbox.is_closed() {
        match context.inbox.next(Some(remaining(deadline))) {
            Wait::TimedOut => return,
            Wait::Got(inbound) => {
                let command = classify(&inbound);
                context.note(&command);
            }
        }
    }
}

/// The bytes of a frame-writing action and the frames they stand for (`None`: raw bytes).
fn render(context: &mut Context, action: &Action) -> (Vec<u8>, Vec<Option<Value>>) {
    let frame = match action {
        Action::Raw(text) => return (context.fill(text).into_bytes(), vec![None]),
        Action::RawBase64(encoded) => {
            let bytes = decode_base64(encoded).unwrap_or_else(|| {
                eprintln!("fake-dsh: raw_base64 is not valid base64; writing nothing");
                Vec::new()
            });
            return (bytes, vec![None]);
        }
        Action::TextLine(spec) => return text_line(context, spec),
        other => frame_of(context, other),
    };
    (output::frame_line(&frame), vec![Some(frame)])
}

/// A text frame whose line is exactly `spec.bytes` long before its line end (never shorter than
/// the frame with empty content).
fn text_line(context: &Context, spec: &TextLineSpec) -> (Vec<u8>, Vec<Option<Value>>) {
    let empty = frames::text(&context.request_id(), "");
    let overhead = serde_json::to_vec(&empty).map_or(0, |line| line.len());
    let frame = frames::text(
        &context.request_id(),
        &"a".repeat(spec.bytes.saturating_sub(overhead)),
    );
    let mut line = serde_json::to_vec(&frame).unwrap_or_default();
    line.extend_from_slice(if spec.crlf { b"\r\n" } else { b"\n" });
    (line, vec![Some(frame)])
}

/// The frame a frame-writing action stands for, its placeholders filled from the context.
fn frame_of(context: &mut Context, action: &Action) -> Value {
    match action {
        Action::Ready(ready) => {
            let mut frame = frames::ready(context.profile);
            if let Some(patch) = &ready.patch {
                frames::merge_patch(&mut frame, &context.fill_value(patch));
            }
            frame
        }
        Action::Session(spec) => scripted_session(context, spec),
        Action::Thinking(content) => {
            frames::thinking(&context.request_id(), &context.fill(content))
        }
        Action::Text(content) => frames::text(&context.request_id(), &context.fill(content)),
        Action::ToolCall(spec) => frames::tool_call(
            &explicit_or_bound_request_id(context, &spec.request_id),
            &context.fill(spec.call_id.as_deref().unwrap_or("call_1")),
            &context.fill(spec.name.as_deref().unwrap_or("write_file")),
            &context.fill_value(spec.arguments.as_ref().unwrap_or(&json!({}))),
        ),
        Action::ToolResult(spec) => frames::tool_result(
            &explicit_or_bound_request_id(context, &spec.request_id),
            &context.fill(spec.call_id.as_deref().unwrap_or("call_1")),
            &context.fill(spec.name.as_deref().unwrap_or("write_file")),
            &context.fill(spec.output.as_deref().unwrap_or("ok")),
            spec.is_error.unwrap_or(false),
        ),
        Action::Usage(members) => scripted_usage(context, members),
        Action::Result(spec) => scripted_result(context, spec),
        Action::ProtocolError(spec) => scripted_protocol_error(context, spec),
        Action::Frame(members) => context.fill_value(&Value::Object(members.clone())),
        _ => unreachable!("only frame-writing actions are rendered"),
    }
}

/// Stores the turn a scripted terminal result ends (completed, failed or cancelled, naming a
/// session by a string id, not rejecting a resume), so a later process can resume it.
fn remember_scripted_result(context: &Context, frame: &Value) {
    let status = frame["status"].as_str();
    let terminal = matches!(status, Some("completed" | "failed" | "cancelled"));
    let rejected = frame["resume_rejected"] == json!(true);
    if let (true, false, Some(session_id)) = (terminal, rejected, frame["session_id"].as_str()) {
        context.remember_scripted_session(session_id, status);
    }
}

/// The action's own `request_id` (filled), else the bound execute's.
fn explicit_or_bound_request_id(context: &Context, explicit: &Option<String>) -> String {
    match explicit {
        Some(explicit) => context.fill(explicit),
        None => context.request_id(),
    }
}

/// A `session` frame, remembered as the one this process announced.
fn scripted_session(context: &mut Context, spec: &SessionSpec) -> Value {
    let session_id = spec
        .session_id
        .as_deref()
        .map(|id| context.fill(id))
        .unwrap_or_else(|| context.session_id());
    let asked_to_resume = context
        .execute
        .as_ref()
        .is_some_and(|execute| execute.resume_session_id.is_some());
    let resumed = spec.resumed.unwrap_or(asked_to_resume);
    context.remember_scripted_session(&session_id, None);
    context.session_sent = Some(session_id.clone());
    let request_id = explicit_or_bound_request_id(context, &spec.request_id);
    frames::session(&request_id, &session_id, resumed)
}

/// A `usage` frame for the execute's route, its members overridden by the action's.
fn scripted_usage(context: &Context, members: &UsageSpec) -> Value {
    let (provider, model) = match context.execute.as_ref() {
        Some(execute) => (execute.provider.clone(), execute.model.clone()),
        None => (
            frames::DEFAULT_PROVIDER.to_string(),
            frames::DEFAULT_MODEL.to_string(),
        ),
    };
    let tokens = TokenCounts {
        input_tokens: 1200,
        output_tokens: 300,
        cache_read_tokens: None,
        cache_write_tokens: None,
    };
    let mut frame = frames::usage(&context.request_id(), &provider, &model, &tokens);
    for (name, value) in members {
        frame[name.as_str()] = context.fill_value(value);
    }
    frame
}

/// A `result` frame, written as JSON so a script can make it wrong on purpose.
fn scripted_result(context: &Context, spec: &ResultSpec) -> Value {
    let status = spec.status.as_deref().unwrap_or("completed");
    let session_id = match &spec.session_id {
        Some(explicit) => context.fill_value(explicit),
        None => json!(context
            .session_sent
            .clone()
            .unwrap_or_else(|| context.session_id())),
    };
    let mut frame = json!({
        "v": 1,
        "type": "result",
        "request_id": explicit_or_bound_request_id(context, &spec.request_id),
        "status": status,
        "session_id": session_id,
        "resume_rejected": spec.resume_rejected.unwrap_or(false),
    });
    if let Some(output) = &spec.output {
        frame["output"] = json!(context.fill(output));
    }
    if let Some(stop_reason) = &spec.stop_reason {
        frame["stop_reason"] = json!(context.fill(stop_reason));
    }
    match &spec.error {
        Some(Value::Null) => {}
        Some(error) => frame["error"] = context.fill_value(error),
        None if status == "failed" => {
            frame["error"] = json!({"code": "RUN_FAILED", "message": "scripted failure"});
        }
        None => {}
    }
    remember_scripted_result(context, &frame);
    frame
}

/// A `protocol_error` frame, for the bound run unless the action names one.
fn scripted_protocol_error(context: &Context, spec: &ProtocolErrorSpec) -> Value {
    let request_id = match &spec.request_id {
        Some(explicit) => Some(context.fill(explicit)),
        None => context
            .execute
            .as_ref()
            .map(|execute| execute.request_id.clone()),
    };
    frames::protocol_error(
        request_id.as_deref(),
        &context.fill(spec.code.as_deref().unwrap_or("PROTOCOL_ERROR")),
        &context.fill(spec.message.as_deref().unwrap_or("scripted protocol error")),
    )
}

/// Decodes standard base64 (padding optional); None when it is not base64.
pub fn decode_base64(encoded: &str) -> Option<Vec<u8>> {
    let digits = encoded.trim_end_matches('=');
    let mut bytes = Vec::with_capacity(digits.len() * 3 / 4);
    let mut buffer: u32 = 0;
    let mut bits = 0;
    for c in digits.chars() {
        let value = match c {
            'A'..='Z' => c as u32 - 'A' as u32,
            'a'..='z' => c as u32 - 'a' as u32 + 26,
            '0'..='9' => c as u32 - '0' as u32 + 52,
            '+' => 62,
            '/' => 63,
            _ => return None,
        };
        buffer = (buffer << 6) | value;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            bytes.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    if digits.len() % 4 == 1 {
        return None;
    }
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes_with_and_without_padding() {
        assert_eq!(decode_base64("aGVsbG8="), Some(b"hello".to_vec()));
        assert_eq!(decode_base64("aGVsbG8"), Some(b"hello".to_vec()));
        assert_eq!(decode_base64("/w=="), Some(vec![0xff]));
        assert_eq!(decode_base64(""), Some(vec![]));
        assert_eq!(decode_base64("a"), None);
        assert_eq!(decode_base64("a*"), None);
    }

    #[test]
    fn commands_are_classified() {
        let execute = json!({"v": 1, "type": "execute", "request_id": "r1", "cwd": "/p",
            "prompt": "x", "resume_session_id": null, "model": {"provider": "p", "id": "m"},
            "mcp_servers": []});
        match classify(&Inbound::Command(execute)) {
            Command::Execute(execute) => {
                assert_eq!(execute.request_id, "r1");
                assert_eq!(execute.resume_session_id, None);
                assert_eq!(execute.model, "m");
            }
            other => panic!("{other:?}"),
        }
        let cancel = json!({"v": 1, "type": "cancel", "request_id": "r1"});
        assert_eq!(
            classify(&Inbound::Command(cancel)),
            Command::Cancel("r1".into())
        );
        let relative =
            json!({"v": 1, "type": "execute", "request_id": "r1", "cwd": "p", "prompt": ""});
        assert!(matches!(
            classify(&Inbound::Command(relative)),
            Command::Invalid(Some(_), _)
        ));
        let wrong_version = json!({"v": 2, "type": "cancel", "request_id": "r1"});
        assert!(matches!(
            classify(&Inbound::Command(wrong_version)),
            Command::Invalid(..)
        ));
        assert_eq!(
            classify(&Inbound::Unparseable("x".into())),
            Command::Unparseable
        );
    }
}
