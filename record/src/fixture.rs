//! `fixture-from-transcript`: turns a recording into a case file whose `runtime.stdio` script
//! replays the recorded frames (ids as placeholders, prompts and secrets redacted) and whose `run`
//! step expects the recorded outcome.

use super::transcript::{Meta, STDIN_FILE, STDOUT_FILE};
use dsh_formats::case::{
    CancelAfter, CancelOn, Capability, Case, ExecuteExpect, ExpectedCode, ModelRoute, OnEvent,
    ResumeExpect, RunExpect, RunStep, SessionExpect, Step,
};
use dsh_formats::scenario::{Action, NoOptions, OptionalPatch, RepeatSpec, Scenario, Timeout};
use dsh_protocol::frames::Status;
use dsh_protocol::{LineEvent, LineFramer, MAX_LINE_BYTES};
use dsh_results::redact::{map_strings, Redactor};
use serde_json::{Map, Value};
use std::io::Read;
use std::path::Path;

/// The prompt the generated run step sends.
pub const REPLAY_PROMPT: &str = "Replay of a recorded turn (prompt redacted)";
/// How long the replayed runtime waits for the host's execute or cancel.
const REPLAY_WAIT_MS: u64 = 10_000;

/// The execute the host sent, as far as the case needs it.
struct RecordedExecute {
    request_id: String,
    resume_session_id: Option<String>,
    cwd: Option<String>,
    model: Option<Value>,
}

impl RecordedExecute {
    /// Whether a frame belongs to the recorded run (carries its `request_id`).
    fn owns(&self, frame: &Value) -> bool {
        frame.get("request_id").and_then(Value::as_str) == Some(self.request_id.as_str())
    }
}

/// Read the host's commands: the first execute, and every prompt (for redaction).
fn read_commands(dir: &Path, redactor: &mut Redactor) -> Result<RecordedExecute, String> {
    let path = dir.join(STDIN_FILE);
    let mut bytes = Vec::new();
    open_recording_file(&path)?
        .read_to_end(&mut bytes)
        .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    let mut execute = None;
    for line in bytes.split(|byte| *byte == b'\n') {
        let Ok(command) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        if command.get("type").and_then(Value::as_str) != Some("execute") {
            continue;
        }
        if let Some(prompt) = command.get("prompt").and_then(Value::as_str) {
            redactor.add_prompt(prompt);
        }
        if execute.is_none() {
            let text = |name: &str| {
                command
                    .get(name)
                    .and_then(Value::as_str)
                    .map(str::to_string)
            };
            execute = Some(RecordedExecute {
                request_id: text("request_id")
                    .ok_or_else(|| format!("{}: the execute has no request_id", path.display()))?,
                resume_session_id: text("resume_session_id"),
                cwd: text("cwd"),
                model: command.get("model").cloned(),
            });
        }
    }
    execute.ok_or_else(|| {
        format!(
            "{}: the host sent no execute, so there is no turn to replay",
            path.display()
        )
    })
}

/// The most bytes `fixture-from-transcript` reads from one recording file.
pub const MAX_RECORDING_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Opens one file of a recording for a bounded read: a regular file (a FIFO or device would
/// hang or never end) of at most [`MAX_RECORDING_FILE_BYTES`].
pub(crate) fn open_recording_file(path: &Path) -> Result<std::io::Take<std::fs::File>, String> {
    let meta = std::fs::metadata(path)
        .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    if !meta.is_file() {
        return Err(format!(
            "{}: not a regular file (a recording holds regular files only)",
            path.display()
        ));
    }
    if meta.len() > MAX_RECORDING_FILE_BYTES {
        return Err(format!(
            "{}: {} bytes, more than the {MAX_RECORDING_FILE_BYTES} bytes a recording file may hold",
            path.display(),
            meta.len()
        ));
    }
    let file = std::fs::File::open(path)
        .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    Ok(file.take(MAX_RECORDING_FILE_BYTES))
}

/// Every stdout event of the recording, streamed through the framer.
fn read_stdout(dir: &Path) -> Result<Vec<LineEvent>, String> {
    let path = dir.join(STDOUT_FILE);
    let mut file = open_recording_file(&path)?;
    let mut framer = LineFramer::new();
    let mut events = Vec::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = file
            .read(&mut buffer)
            .map_err(|error| format!("reading {}: {error}", path.display()))?;
        if read == 0 {
            break;
        }
        events.extend(framer.push(&buffer[..read]));
    }
    events.extend(framer.finish());
    Ok(events)
}

/// Runs of adjacent `text` (or `thinking`) frames whose joined `content` holds a secret, token or
/// prompt split across frames: their lines re-serialized with the split parts cut out, by index
/// into `parsed` (see [`Redactor::redact_pieces`]); the frame count never changes.
fn redact_split_deltas(
    parsed: &[Option<Value>],
    redactor: &Redactor,
) -> std::collections::BTreeMap<usize, Vec<u8>> {
    let delta_type = |frame: &Option<Value>| {
        let frame = frame.as_ref()?;
        let kind = frame.get("type")?.as_str()?;
        (matches!(kind, "text" | "thinking") && frame.get("content")?.is_string())
            .then(|| kind.to_string())
    };
    let mut replaced = std::collections::BTreeMap::new();
    let mut start = 0;
    while start < parsed.len() {
        let Some(kind) = delta_type(&parsed[start]) else {
            start += 1;
            continue;
        };
        let end = (start..parsed.len())
            .find(|&at| delta_type(&parsed[at]).as_deref() != Some(kind.as_str()))
            .unwrap_or(parsed.len());
        let frames: Vec<&Value> = parsed[start..end].iter().flatten().collect();
        let pieces: Vec<String> = frames
            .iter()
            .map(|frame| frame["content"].as_str().unwrap_or_default().to_string())
            .collect();
        for (offset, (frame, content)) in frames
            .iter()
            .zip(redactor.redact_pieces(&pieces))
            .enumerate()
        {
            if content != redactor.redact(&pieces[offset]) {
                let mut frame = (*frame).clone();
                frame["content"] = Value::String(content);
                replaced.insert(start + offset, frame.to_string().into_bytes());
            }
        }
        start = end;
    }
    replaced
}

/// Makes every token-shaped credential the runtime wrote in base64 a secret of `redactor`, so
/// that it is redacted in every encoded form wherever it appears, though no environment names it.
fn learn_encoded_tokens(events: &[LineEvent], redactor: &mut Redactor) {
    for event in events {
        if let LineEvent::Line { bytes, .. } | LineEvent::Truncated { bytes, .. } = event {
            let text = String::from_utf8_lossy(bytes);
            for token in dsh_results::redact::token_shapes_in_base64(&text) {
                redactor.add_secret(&token);
            }
        }
    }
}

/// Replaces the recorded ids and cwd with placeholders, then redacts.
struct Scrubber<'a> {
    substitutions: Vec<(String, &'static str)>,
    redactor: &'a Redactor,
}

impl Scrubber<'_> {
    fn text(&self, text: &str) -> String {
        let mut text = text.to_string();
        for (recorded, placeholder) in &self.substitutions {
            if !recorded.is_empty() && text.contains(recorded.as_str()) {
                text = text.replace(recorded.as_str(), placeholder);
            }
        }
        self.redactor.redact(&text)
    }

    fn json(&self, value: &Value) -> Value {
        map_strings(value, &|text| self.text(text))
    }
}

/// One stdout line as a replay action, plus its frame (when it was a JSON object).
fn line_action(bytes: &[u8], newline: bool, scrubber: &Scrubber<'_>) -> (Action, Option<Value>) {
    let terminator = if newline { "\n" } else { "" };
    if newline {
        if let Ok(frame @ Value::Object(_)) = serde_json::from_slice::<Value>(bytes) {
            if let Value::Object(scrubbed) = scrubber.json(&frame) {
                return (Action::Frame(scrubbed), Some(frame));
            }
        }
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => (
            Action::Raw(format!("{}{terminator}", scrubber.text(text))),
            None,
        ),
        Err(_) => {
            let lossy = String::from_utf8_lossy(bytes);
            let scrubbed = scrubber.text(&lossy);
            let mut out = if scrubbed == lossy {
                bytes.to_vec()
            } else {
                [scrubbed.as_bytes(), b"\xff"].concat()
            };
            out.extend_from_slice(terminator.as_bytes());
            (Action::RawBase64(dsh_protocol::needles::base64(&out)), None)
        }
    }
}

/// The normalized event a host reports for a frame type (docs/host-driver.md), if any.
fn event_for(frame_type: &str) -> Option<&'static str> {
    Some(match frame_type {
        "session" => "status",
        "thinking" => "thinking_delta",
        "text" => "text_delta",
        "tool_call" => "tool_use",
        "tool_result" => "tool_result",
        "usage" => "usage",
        _ => return None,
    })
}

/// The rules a replayed outcome exercises (ids from fixtures/rules.json).
fn rules_for(code: Option<&str>, status: &str) -> Vec<&'static str> {
    match (code, status) {
        (Some("DSH_PROFILE_RESUME_REJECTED"), _) => vec![
            "s6.missing-resume-target-failure",
            "s6.no-silent-new-session",
        ],
        (Some("DSH_PROFILE_RUN_FAILED"), _) => vec!["s9.failed-structured"],
        (Some(code), _) => vec![rule_for_violation(code)],
        (None, "cancelled") => vec!["s9.cancelled-run", "s10.cancel-grace-for-cancelled"],
        _ => vec!["s9.completed-clean", "s6.one-terminal-result"],
    }
}

/// The rule a strict-checker code enforces.
pub fn rule_for_violation(code: &str) -> &'static str {
    match code {
        "DSH_PROFILE_FRAME_TOO_LARGE" => "s6.frame-size-bounded",
        "DSH_PROFILE_INVALID_FRAME" => "s6.frame-matches-generation-1",
        "DSH_PROFILE_RESUME_MISMATCH" => "s6.resume-same-id",
        "DSH_PROFILE_SESSION_MISMATCH" => "s6.result-session-matches",
        "DSH_PROFILE_UNREQUESTED_RESUME" => "s6.resume-resumed-true",
        "DSH_PROFILE_UNANNOUNCED_SESSION" => "s6.session-before-content",
        "DSH_PROFILE_MISSING_RESULT" => "s6.eof-not-success",
        "DSH_PROFILE_PROTOCOL_ERROR" => "s6.protocol-error-fatal",
        "DSH_PROFILE_READY_NOT_FIRST"
        | "DSH_PROFILE_DUPLICATE_READY"
        | "DSH_PROFILE_INCOMPATIBLE_READY" => "s6.ready-identity",
        "DSH_PROFILE_DUPLICATE_SESSION" => "s6.single-session-frame",
        "DSH_PROFILE_DUPLICATE_RESULT" => "s6.one-terminal-result",
        "DSH_PROFILE_CONTENT_BEFORE_SESSION" => "s6.session-before-content",
        "DSH_PROFILE_UNSOLICITED_CANCELLED" => "s6.cancelled-only-after-cancel",
        "DSH_PROFILE_UNMATCHED_TOOL_RESULT" => "s6.tool-result-matches-call",
        _ => "s6.malformed-fails-deterministically",
    }
}

/// The recorded turn's stdout as a replay script, with what the host should have reported of it.
struct Replay {
    /// One action per stdout line, `read_execute` (and `wait_cancel`) inserted where the host
    /// wrote them, and the recorded exit code.
    script: Vec<Action>,
    /// The normalized events the host reports for the run's own frames, in order.
    event_types: Vec<&'static str>,
    /// The last of those reported before the recorded cancel.
    last_event_before_cancel: Option<&'static str>,
}

/// How long a replayed wait (`read_execute`, `wait_cancel`) lasts at most.
fn replay_wait() -> Timeout {
    Timeout {
        timeout_ms: Some(REPLAY_WAIT_MS),
    }
}

/// The session the recorded turn ran in: its `session` frame's, else its `result`'s, else the
/// one the host asked to resume.
fn recorded_session_id(parsed: &[Option<Value>], execute: &RecordedExecute) -> Option<String> {
    let own_of_type = |kind: &str| {
        parsed.iter().flatten().find(|frame| {
            execute.owns(frame) && frame.get("type").and_then(Value::as_str) == Some(kind)
        })
    };
    own_of_type("session")
        .or_else(|| own_of_type("result"))
        .and_then(|frame| frame.get("session_id"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| execute.resume_session_id.clone())
}

/// The placeholders that replace the recorded ids, cwd and home, longest recorded text first.
fn substitutions(
    execute: &RecordedExecute,
    session_id: Option<&String>,
) -> Vec<(String, &'static str)> {
    let mut substitutions = vec![(execute.request_id.clone(), "{{request_id}}")];
    if let Some(session_id) = session_id {
        substitutions.push((session_id.clone(), "{{session_id}}"));
    }
    if let Some(cwd) = execute.cwd.as_ref().filter(|cwd| cwd.len() > 1) {
        substitutions.push((cwd.trim_end_matches('/').to_string(), "."));
    }
    if let Ok(home) = std::env::var("HOME") {
        if home.len() > 1 {
            substitutions.push((home, "~"));
        }
    }
    substitutions.sort_by_key(|(recorded, _)| std::cmp::Reverse(recorded.len()));
    substitutions
}

/// One recorded stdout event as a replay action, its line number and its frame.
fn event_action(
    event: &LineEvent,
    redacted: Option<&Vec<u8>>,
    scrubber: &Scrubber<'_>,
) -> (usize, Action, Option<Value>) {
    match event {
        LineEvent::Line { number, bytes } => {
            let bytes = redacted.map_or(&bytes[..], Vec::as_slice);
            let (action, frame) = line_action(bytes, true, scrubber);
            (*number, action, frame)
        }
        LineEvent::Truncated { number, bytes } => {
            let (action, frame) = line_action(bytes, false, scrubber);
            (*number, action, frame)
        }
        LineEvent::TooLarge { number } => (
            *number,
            Action::Repeat(RepeatSpec {
                text: "x".to_string(),
                bytes: MAX_LINE_BYTES as u64 + 1,
                newline: true,
            }),
            None,
        ),
    }
}

/// The replay script of the recorded stdout: one action per line, `read_execute` after the lines
/// written before the host's execute, `wait_cancel` where the host cancelled, the exit code last.
fn replay(
    events: &[LineEvent],
    parsed: &[Option<Value>],
    execute: &RecordedExecute,
    scrubber: &Scrubber<'_>,
    meta: &Meta,
) -> Replay {
    let cancel_after = meta.run.cancel_after_stdout_lines;
    let split_redacted = redact_split_deltas(parsed, scrubber.redactor);
    let mut replay = Replay {
        script: Vec::new(),
        event_types: Vec::new(),
        last_event_before_cancel: None,
    };
    let mut read_execute_at: Option<usize> = None;
    let mut cancel_at: Option<usize> = None;
    let mut previous_own_type: Option<String> = None;
    for (index, (event, frame)) in events.iter().zip(parsed).enumerate() {
        let (number, action, frame_value) =
            event_action(event, split_redacted.get(&index), scrubber);
        let frame = frame.as_ref().or(frame_value.as_ref());
        let frame_type = frame
            .and_then(|frame| frame.get("type"))
            .and_then(Value::as_str);
        let is_run_frame =
            frame.is_some_and(|frame| execute.owns(frame)) || frame_type == Some("protocol_error");
        if read_execute_at.is_none() && is_run_frame {
            read_execute_at = Some(replay.script.len());
        }
        replay.script.push(action);
        if read_execute_at.is_none() && frame_type == Some("ready") {
            read_execute_at = Some(replay.script.len());
        }
        if frame.is_some_and(|frame| execute.owns(frame)) {
            let frame_type = frame_type.unwrap_or_default();
            if let Some(event) = event_for(frame_type) {
                if frame_type == "thinking" && previous_own_type.as_deref() != Some("thinking") {
                    replay.event_types.push("thinking_start");
                }
                replay.event_types.push(event);
                if cancel_after.is_some_and(|after| number <= after) {
                    replay.last_event_before_cancel = Some(event);
                }
            }
            previous_own_type = Some(frame_type.to_string());
        }
        if cancel_after == Some(number) {
            cancel_at = Some(replay.script.len());
        }
    }
    let read_execute_at = read_execute_at.unwrap_or(replay.script.len());
    if cancel_after.is_some() {
        let at = cancel_at
            .unwrap_or(replay.script.len())
            .max(read_execute_at);
        replay.script.insert(at, Action::WaitCancel(replay_wait()));
    }
    replay
        .script
        .insert(read_execute_at, Action::ReadExecute(replay_wait()));
    if let Some(code) = meta.exit_code.filter(|code| *code != 0) {
        replay.script.push(Action::Exit(code));
    }
    replay
}

/// The recorded outcome as the host should report it: a status and the code that goes with it.
fn recorded_outcome(meta: &Meta) -> (Status, Option<String>) {
    let violation = meta
        .violations
        .iter()
        .find(|violation| violation.code.starts_with("DSH_PROFILE_"));
    let result = meta.result.as_ref();
    let result_status = result
        .and_then(|result| result.get("status"))
        .and_then(Value::as_str);
    let resume_rejected =
        result.and_then(|result| result.get("resume_rejected")) == Some(&Value::Bool(true));
    let (status, code) = match (violation, result_status) {
        (Some(violation), _) => (Status::Failed, Some(violation.code.as_str())),
        (None, Some("failed")) if resume_rejected => {
            (Status::Failed, Some("DSH_PROFILE_RESUME_REJECTED"))
        }
        (None, Some("failed")) => (Status::Failed, Some("DSH_PROFILE_RUN_FAILED")),
        (None, Some("cancelled")) => (Status::Cancelled, None),
        (None, Some("completed")) => (Status::Completed, None),
        (None, _) => (Status::Failed, Some("DSH_PROFILE_MISSING_RESULT")),
    };
    (status, code.map(str::to_string))
}

/// What the replayed run must end with: the recorded outcome, session and events, and the
/// execute the host sent.
fn run_expect(status: Status, code: Option<&str>, replay: &Replay, resumed: bool) -> RunExpect {
    let session_frame_seen = replay.event_types.first() == Some(&"status");
    let session = match (status, session_frame_seen) {
        (Status::Completed, _) | (Status::Cancelled, true) => Some(if resumed {
            SessionExpect::Resumed
        } else {
            SessionExpect::New
        }),
        (_, false) if code != Some("DSH_PROFILE_RUN_FAILED") => Some(SessionExpect::None),
        _ => None,
    };
    let status_event = || {
        let mut event = Map::new();
        event.insert("type".into(), Value::String("status".into()));
        vec![event]
    };
    RunExpect {
        status: Some(status),
        code: ExpectedCode::Is(code.map(str::to_string)),
        session,
        events: (status == Status::Completed).then(|| {
            replay
                .event_types
                .iter()
                .map(|event| event.to_string())
                .collect()
        }),
        events_include: (status != Status::Completed && session_frame_seen).then(status_event),
        execute: Some(ExecuteExpect {
            resume: Some(if resumed {
                ResumeExpect::Previous
            } else {
                ResumeExpect::None
            }),
            bootstrap: Some(!resumed),
        }),
        ..RunExpect::default()
    }
}

/// The replayed `run` step's action: the recorded model, and a cancel where the host cancelled.
fn replay_run(execute: &RecordedExecute, replay: &Replay, cancelled: bool) -> RunStep {
    let recorded_model = execute.model.as_ref().and_then(|model| {
        Some(ModelRoute {
            provider: model.get("provider")?.as_str()?.to_string(),
            id: model.get("id")?.as_str()?.to_string(),
        })
    });
    let cancel_on = cancelled.then(|| match replay.last_event_before_cancel {
        Some(event) if event != "thinking_delta" => CancelOn::Event(OnEvent {
            event: event.to_string(),
        }),
        Some(_) => CancelOn::Event(OnEvent {
            event: "thinking_start".to_string(),
        }),
        None => CancelOn::AfterMs(CancelAfter { after_ms: 0 }),
    });
    RunStep {
        conversation: "c1".to_string(),
        prompt: REPLAY_PROMPT.to_string(),
        cwd: "project".to_string(),
        model: recorded_model.unwrap_or_default(),
        cancel_on,
        cwd_form: None,
        start_on: None,
        route: None,
        reasoning_effort: None,
    }
}

/// The first turn a resumed recording needs: the default agent makes the session to resume.
fn first_turn(run: &RunStep) -> (Vec<Action>, Step) {
    let script = vec![
        Action::Ready(OptionalPatch::default()),
        Action::ReadExecute(replay_wait()),
        Action::Agent(NoOptions {}),
    ];
    let step = Step::Run {
        run: RunStep {
            cancel_on: None,
            ..run.clone()
        },
        expect: Box::new(RunExpect {
            status: Some(Status::Completed),
            session: Some(SessionExpect::New),
            ..RunExpect::default()
        }),
    };
    (script, step)
}

/// The whole case for the recording in `dir`.
pub fn case_from_recording(dir: &Path, id: &str) -> Result<Case, String> {
    let meta = Meta::read(dir)?;
    match meta.surface {
        super::WireKind::OpenDesign => {}
        super::WireKind::Sdk => {
            return Err(format!(
                "{}: a recording of the SDK wire (`surface: sdk`): `sdk-scenario-from-transcript` \
                 turns it into a fake-dsh scenario",
                dir.display()
            ))
        }
        super::WireKind::Acp => {
            return Err(format!(
                "{}: a recording of the ACP wire (`surface: acp`): `acp-scenario-from-transcript` \
                 turns it into a fake-dsh scenario",
                dir.display()
            ))
        }
        super::WireKind::Headless => {
            return Err(format!(
                "{}: a recording of `--profile headless` (`surface: headless`), which has no \
                 stream to replay as a case",
                dir.display()
            ))
        }
    }
    let mut redactor = Redactor::new(dsh_results::redact::credential_values_from_env());
    let execute = read_commands(dir, &mut redactor)?;
    let events = read_stdout(dir)?;
    learn_encoded_tokens(&events, &mut redactor);
    let parsed: Vec<Option<Value>> = events
        .iter()
        .map(|event| match event {
            LineEvent::Line { bytes, .. } => serde_json::from_slice::<Value>(bytes).ok(),
            _ => None,
        })
        .collect();
    let session_id = recorded_session_id(&parsed, &execute);
    let scrubber = Scrubber {
        substitutions: substitutions(&execute, session_id.as_ref()),
        redactor: &redactor,
    };
    let replay = replay(&events, &parsed, &execute, &scrubber, &meta);
    let (status, code) = recorded_outcome(&meta);
    let resumed = execute.resume_session_id.is_some();
    let cancelled = meta.run.cancel_after_stdout_lines.is_some();
    let run = replay_run(&execute, &replay, cancelled);

    let mut stdio = Vec::new();
    let mut steps = Vec::new();
    if resumed {
        let (script, step) = first_turn(&run);
        stdio.push(script);
        steps.push(step);
    }
    let expect = run_expect(status, code.as_deref(), &replay, resumed);
    stdio.push(replay.script);
    steps.push(Step::Run {
        run,
        expect: Box::new(expect),
    });

    let recorded_on = meta.started_at.get(..10).unwrap_or("an unknown date");
    let mut rules = rules_for(code.as_deref(), status.as_str());
    if resumed && status == Status::Completed {
        rules.push("s7.followup-same-session");
    }
    let code_note = code
        .as_ref()
        .map(|code| format!(", {code}"))
        .unwrap_or_default();
    Ok(Case {
        v: 1,
        id: id.to_string(),
        summary: format!(
            "Replays a turn recorded on {recorded_on} ({}{code_note})",
            status.as_str()
        ),
        spec: vec!["6".to_string(), "7".to_string()],
        rules: rules.into_iter().map(str::to_string).collect(),
        requires: cancelled
            .then_some(Capability::Cancel)
            .into_iter()
            .collect(),
        timeout_ms: None,
        runtime: Scenario {
            stdio,
            ..Scenario::default()
        },
        steps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn recording_files_are_read_bounded_and_only_when_regular() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let error = open_recording_file(&fifo).unwrap_err();
        assert!(error.contains("not a regular file"), "{error}");
        let big = dir.path().join("big");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_RECORDING_FILE_BYTES + 1)
            .unwrap();
        let error = open_recording_file(&big).unwrap_err();
        assert!(error.contains("more than"), "{error}");
        std::os::unix::fs::symlink("/dev/zero", dir.path().join(STDIN_FILE)).unwrap();
        let error = read_commands(dir.path(), &mut Redactor::default())
            .err()
            .expect("a link to /dev/zero is refused");
        assert!(error.contains("not a regular file"), "{error}");
    }

    #[test]
    fn a_key_split_across_two_text_frames_is_redacted_in_both() {
        let frame = |kind: &str, content: &str| {
            Some(json!({"v": 1, "type": kind, "request_id": "r1", "content": content}))
        };
        let parsed = vec![
            Some(json!({"v": 1, "type": "ready"})),
            frame("text", "the key is sk-abcdefgh"),
            frame("text", "ijklmnop1234, keep it"),
            frame("thinking", "unrelated"),
            None,
        ];
        let redactor = Redactor::new(Vec::new());
        let replaced = redact_split_deltas(&parsed, &redactor);
        assert_eq!(replaced.keys().copied().collect::<Vec<_>>(), [1, 2]);
        let content = |index: usize| {
            serde_json::from_slice::<Value>(&replaced[&index]).unwrap()["content"]
                .as_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(content(1), "the key is [redacted]");
        assert_eq!(content(2), ", keep it");
    }

    #[test]
    fn a_key_in_base64_that_no_environment_names_is_redacted() {
        let key = "sk-fixtureCanary0123456789abcdef";
        let encoded = dsh_protocol::needles::base64(format!("Bearer {key}").as_bytes());
        let line = json!({"v": 1, "type": "text", "content": format!("auth {encoded}")});
        let events = vec![LineEvent::Line {
            number: 1,
            bytes: line.to_string().into_bytes(),
        }];
        let mut redactor = Redactor::new(Vec::new());
        learn_encoded_tokens(&events, &mut redactor);
        let scrubber = Scrubber {
            substitutions: Vec::new(),
            redactor: &redactor,
        };
        let (action, _) = line_action(line.to_string().as_bytes(), true, &scrubber);
        let Action::Frame(frame) = action else {
            panic!("a frame: {action:?}")
        };
        let content = frame["content"].as_str().unwrap();
        assert!(
            content.starts_with("auth ") && content.contains("[redacted]"),
            "{content}"
        );
        assert!(
            dsh_results::redact::token_shapes_in_base64(content).is_empty(),
            "{content}"
        );
    }

    #[test]
    fn every_rule_a_replay_names_is_in_the_catalog() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
        let catalog = dsh_host_corpus::corpus::load_rules(&fixtures).unwrap();
        let known: Vec<&str> = catalog.iter().map(|rule| rule.id.as_str()).collect();
        let codes = [
            "DSH_PROFILE_FRAME_TOO_LARGE",
            "DSH_PROFILE_MALFORMED_FRAME",
            "DSH_PROFILE_INVALID_FRAME",
            "DSH_PROFILE_TRUNCATED_FRAME",
            "DSH_PROFILE_RESUME_MISMATCH",
            "DSH_PROFILE_SESSION_MISMATCH",
            "DSH_PROFILE_UNREQUESTED_RESUME",
            "DSH_PROFILE_UNANNOUNCED_SESSION",
            "DSH_PROFILE_MISSING_RESULT",
            "DSH_PROFILE_PROTOCOL_ERROR",
            "DSH_PROFILE_READY_NOT_FIRST",
            "DSH_PROFILE_DUPLICATE_READY",
            "DSH_PROFILE_INCOMPATIBLE_READY",
            "DSH_PROFILE_DUPLICATE_SESSION",
            "DSH_PROFILE_DUPLICATE_RESULT",
            "DSH_PROFILE_CONTENT_BEFORE_SESSION",
            "DSH_PROFILE_UNSOLICITED_CANCELLED",
            "DSH_PROFILE_UNMATCHED_TOOL_RESULT",
            "DSH_PROFILE_RESUME_REJECTED",
            "DSH_PROFILE_RUN_FAILED",
        ];
        let mut named: Vec<&str> = codes
            .iter()
            .flat_map(|code| rules_for(Some(code), "failed"))
            .collect();
        named.extend(rules_for(None, "completed"));
        named.extend(rules_for(None, "cancelled"));
        named.push("s7.followup-same-session");
        for rule in named {
            assert!(
                known.contains(&rule),
                "{rule} is not in fixtures/rules.json"
            );
        }
    }
}
