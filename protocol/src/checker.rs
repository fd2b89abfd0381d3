//! The strict stream checker: one run's stdout, one line at a time (spec sections 6 and 7).
//!
//! Feed it every line the framer produces ([`StreamChecker::check_event`]) and, at EOF, call
//! [`StreamChecker::finish`]. The first violation fails the run for good; later lines are
//! [`Step::Skipped`]. No JSON Schema runs here: [`FrameRef::parse_line`] applies the same
//! rules by hand, so the checker keeps up with plain `serde_json` parsing. An accepted frame is
//! handed out as a [`FrameRef`] borrowing the line's strings: a consumer that keeps it converts
//! it ([`FrameRef::into_owned`], [`Step::into_owned`]); one that only checks allocates nothing.

use crate::frame_ref::FrameRef;
use crate::frames::{FrameErrorKind, Result as RunResult, Status};
use crate::lines::LineEvent;
use std::collections::HashSet;
use std::fmt;

/// The most distinct tool-call ids one run may announce (each is kept to match its result).
pub const MAX_TOOL_CALL_IDS: usize = 100_000;
/// The most bytes of distinct tool-call ids one run may announce.
pub const MAX_TOOL_CALL_ID_BYTES: usize = 8 * 1024 * 1024;

/// What the host asked for in this run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunContext {
    pub request_id: String,
    /// `Some(id)` when the execute asked to resume that session.
    pub resume_session_id: Option<String>,
}

impl RunContext {
    /// A run that starts a new session.
    pub fn new(request_id: impl Into<String>) -> Self {
        RunContext {
            request_id: request_id.into(),
            resume_session_id: None,
        }
    }

    /// A run that resumes `session_id`.
    pub fn resuming(request_id: impl Into<String>, session_id: impl Into<String>) -> Self {
        RunContext {
            request_id: request_id.into(),
            resume_session_id: Some(session_id.into()),
        }
    }
}

/// Stable, machine-readable violation codes (the `DSH_PROFILE_*` vocabulary of OpenDesign's host,
/// plus finer ones where a rule had none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ViolationCode {
    FrameTooLarge,
    MalformedFrame,
    InvalidFrame,
    TruncatedFrame,
    ResumeMismatch,
    /// The result names another session than the one announced (the session frame's, or on a
    /// resume without a session frame the requested one).
    SessionMismatch,
    /// The runtime claims a resume the execute did not ask for (`resumed: true` on a new session,
    /// `resume_rejected: true` without a resume).
    UnrequestedResume,
    /// `result: completed` without a prior session frame: it names a session never announced.
    UnannouncedSession,
    ResumeRejected,
    MissingResult,
    ProtocolError,
    ReadyNotFirst,
    DuplicateReady,
    IncompatibleReady,
    DuplicateSession,
    DuplicateResult,
    ContentBeforeSession,
    UnsolicitedCancelled,
    UnmatchedToolResult,
}

impl ViolationCode {
    /// Every code, in declaration order.
    pub const ALL: [ViolationCode; 19] = [
        ViolationCode::FrameTooLarge,
        ViolationCode::MalformedFrame,
        ViolationCode::InvalidFrame,
        ViolationCode::TruncatedFrame,
        ViolationCode::ResumeMismatch,
        ViolationCode::SessionMismatch,
        ViolationCode::UnrequestedResume,
        ViolationCode::UnannouncedSession,
        ViolationCode::ResumeRejected,
        ViolationCode::MissingResult,
        ViolationCode::ProtocolError,
        ViolationCode::ReadyNotFirst,
        ViolationCode::DuplicateReady,
        ViolationCode::IncompatibleReady,
        ViolationCode::DuplicateSession,
        ViolationCode::DuplicateResult,
        ViolationCode::ContentBeforeSession,
        ViolationCode::UnsolicitedCancelled,
        ViolationCode::UnmatchedToolResult,
    ];

    /// `DSH_PROFILE_FRAME_TOO_LARGE` etc.
    pub fn as_str(self) -> &'static str {
        match self {
            ViolationCode::FrameTooLarge => "DSH_PROFILE_FRAME_TOO_LARGE",
            ViolationCode::MalformedFrame => "DSH_PROFILE_MALFORMED_FRAME",
            ViolationCode::InvalidFrame => "DSH_PROFILE_INVALID_FRAME",
            ViolationCode::TruncatedFrame => "DSH_PROFILE_TRUNCATED_FRAME",
            ViolationCode::ResumeMismatch => "DSH_PROFILE_RESUME_MISMATCH",
            ViolationCode::SessionMismatch => "DSH_PROFILE_SESSION_MISMATCH",
            ViolationCode::UnrequestedResume => "DSH_PROFILE_UNREQUESTED_RESUME",
            ViolationCode::UnannouncedSession => "DSH_PROFILE_UNANNOUNCED_SESSION",
            ViolationCode::ResumeRejected => "DSH_PROFILE_RESUME_REJECTED",
            ViolationCode::MissingResult => "DSH_PROFILE_MISSING_RESULT",
            ViolationCode::ProtocolError => "DSH_PROFILE_PROTOCOL_ERROR",
            ViolationCode::ReadyNotFirst => "DSH_PROFILE_READY_NOT_FIRST",
            ViolationCode::DuplicateReady => "DSH_PROFILE_DUPLICATE_READY",
            ViolationCode::IncompatibleReady => "DSH_PROFILE_INCOMPATIBLE_READY",
            ViolationCode::DuplicateSession => "DSH_PROFILE_DUPLICATE_SESSION",
            ViolationCode::DuplicateResult => "DSH_PROFILE_DUPLICATE_RESULT",
            ViolationCode::ContentBeforeSession => "DSH_PROFILE_CONTENT_BEFORE_SESSION",
            ViolationCode::UnsolicitedCancelled => "DSH_PROFILE_UNSOLICITED_CANCELLED",
            ViolationCode::UnmatchedToolResult => "DSH_PROFILE_UNMATCHED_TOOL_RESULT",
        }
    }

    /// The code spelled `DSH_PROFILE_...`, if it is one of these.
    pub fn from_code(code: &str) -> Option<ViolationCode> {
        Self::ALL.into_iter().find(|known| known.as_str() == code)
    }
}

impl fmt::Display for ViolationCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub code: ViolationCode,
    /// 1-based stdout line, when the violation belongs to one.
    pub line: Option<usize>,
    /// Names the rule broken, e.g. "line 3: session must arrive before content frames (spec 6)".
    pub message: String,
}

impl Violation {
    fn at(code: ViolationCode, line: usize, rule: impl fmt::Display) -> Self {
        Violation {
            code,
            line: Some(line),
            message: format!("line {line}: {rule}"),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Violation {}

/// How the run ended, once it has.
#[derive(Debug, Clone, PartialEq)]
pub enum Terminal {
    /// The single accepted terminal `result`.
    Result(RunResult),
    /// The stream broke a rule; the run fails with this.
    Violation(Violation),
}

/// What one line did; an accepted frame borrows from the line (`'a`).
#[derive(Debug, Clone, PartialEq)]
pub enum Step<'a> {
    /// Empty or whitespace-only line.
    Skipped,
    /// A valid frame for another request: ignored and counted.
    Foreign,
    /// A valid frame of this run (`ready`, `session`, content, tool, usage, the terminal result).
    Accepted(FrameRef<'a>),
    /// This line broke a rule; the run has failed (later lines are ignored: `Step::Skipped`).
    Violation(Violation),
}

impl Step<'_> {
    /// The same step, owning its frame's strings (so it outlives the line).
    pub fn into_owned(self) -> Step<'static> {
        match self {
            Step::Skipped => Step::Skipped,
            Step::Foreign => Step::Foreign,
            Step::Accepted(frame) => Step::Accepted(frame.into_owned().into()),
            Step::Violation(violation) => Step::Violation(violation),
        }
    }
}

/// The per-run state machine.
#[derive(Debug, Clone)]
pub struct StreamChecker {
    context: RunContext,
    ready_seen: bool,
    session_id: Option<String>,
    tool_calls: HashSet<String>,
    /// Bytes of the ids in `tool_calls`.
    tool_call_bytes: usize,
    /// The id of the latest tool call, also in `tool_calls`: a result usually follows its call,
    /// and is matched here without a hash lookup.
    last_call_id: String,
    cancel_sent: bool,
    terminal: Option<Terminal>,
    foreign: usize,
    accepted: usize,
    last_line: usize,
    line_limit: usize,
    /// The active request id is not known yet: the first frame naming one sets it.
    adopt_request_id: bool,
}

impl StreamChecker {
    pub fn new(context: RunContext) -> Self {
        StreamChecker {
            context,
            ready_seen: false,
            session_id: None,
            tool_calls: HashSet::new(),
            tool_call_bytes: 0,
            last_call_id: String::new(),
            cancel_sent: false,
            terminal: None,
            foreign: 0,
            accepted: 0,
            last_line: 0,
            line_limit: crate::MAX_LINE_BYTES,
            adopt_request_id: false,
        }
    }

    /// A checker for a stream whose active request is not known in advance: the `request_id`
    /// of the first frame that names one becomes the active request (what `validate` does
    /// without `--request-id`, reading its input once). Until then the context's id is a
    /// placeholder (it only appears in a `MissingResult` message).
    pub fn adopting_first_request_id(context: RunContext) -> Self {
        let mut checker = Self::new(context);
        checker.adopt_request_id = true;
        checker
    }

    /// Whether the run has failed for good (later lines are skipped).
    pub fn has_failed(&self) -> bool {
        self.failed()
    }

    /// The line limit the framer feeding this checker enforces (only used in messages; the
    /// default is [`crate::MAX_LINE_BYTES`]).
    pub fn set_line_limit(&mut self, bytes: usize) {
        self.line_limit = bytes;
    }

    /// The run being checked.
    pub fn context(&self) -> &RunContext {
        &self.context
    }

    /// Check the next complete line (without its terminator).
    pub fn check_line<'a>(&mut self, number: usize, line: &'a [u8]) -> Step<'a> {
        self.last_line = self.last_line.max(number);
        if self.failed() {
            return Step::Skipped;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            return Step::Skipped;
        }
        let frame = match FrameRef::parse_line(line) {
            Ok(frame) => frame,
            Err(error) => {
                let (code, rule) = match error.kind {
                    FrameErrorKind::Malformed => (
                        ViolationCode::MalformedFrame,
                        "every stdout line must be one JSON frame (spec 6)",
                    ),
                    FrameErrorKind::Invalid => (
                        ViolationCode::InvalidFrame,
                        "every frame must match generation 1 (spec 6)",
                    ),
                };
                return self.fail(Violation::at(code, number, format!("{error}; {rule}")));
            }
        };
        self.check_frame(number, frame)
    }

    /// Feed a framer event (line, too-large line, truncated tail).
    /// Takes owned events ([`crate::LineFramer::push`]) and borrowed ones
    /// ([`crate::LineFramer::push_each`]) alike.
    pub fn check_event<'a, B: AsRef<[u8]>>(&mut self, event: &'a LineEvent<B>) -> Step<'a> {
        match event {
            LineEvent::Line { number, bytes } => self.check_line(*number, bytes.as_ref()),
            LineEvent::TooLarge { number } => {
                self.last_line = self.last_line.max(*number);
                if self.failed() {
                    return Step::Skipped;
                }
                self.fail(Violation::at(
                    ViolationCode::FrameTooLarge,
                    *number,
                    format!(
                        "line exceeds the {} byte limit before its newline (spec 6; frames are bounded)",
                        self.line_limit
                    ),
                ))
            }
            LineEvent::Truncated { number, bytes } => {
                let bytes = bytes.as_ref();
                self.last_line = self.last_line.max(*number);
                if self.failed() || bytes.iter().all(u8::is_ascii_whitespace) {
                    return Step::Skipped;
                }
                // A complete frame that only lacks its final newline is accepted as a frame.
                if FrameRef::parse_line(bytes).is_ok() {
                    return self.check_line(*number, bytes);
                }
                self.fail(Violation::at(
                    ViolationCode::TruncatedFrame,
                    *number,
                    "the stream ended inside a frame (no final newline, incomplete JSON) (spec 6)",
                ))
            }
        }
    }

    /// The host has sent `cancel` for the active request: `result: cancelled` becomes legitimate.
    pub fn note_cancel_sent(&mut self) {
        self.cancel_sent = true;
    }

    /// The stream reached EOF. Returns the run's terminal state: the accepted result, the first
    /// violation, or `MissingResult` when neither happened.
    pub fn finish(&mut self) -> Terminal {
        if let Some(terminal) = &self.terminal {
            return terminal.clone();
        }
        let seen = if self.ready_seen {
            "the ready frame"
        } else {
            "any ready frame"
        };
        let violation = Violation {
            code: ViolationCode::MissingResult,
            line: None,
            message: format!(
                "EOF after line {} without a terminal result for request `{}` (after {seen}); \
                 EOF, exit or text alone never mean success (spec 6)",
                self.last_line, self.context.request_id
            ),
        };
        let terminal = Terminal::Violation(violation);
        self.terminal = Some(terminal.clone());
        terminal
    }

    /// The terminal state so far, if any (result accepted or violation seen).
    pub fn terminal(&self) -> Option<&Terminal> {
        self.terminal.as_ref()
    }

    /// The validated session frame's id, once seen.
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// Whether a compatible `ready` frame has been seen.
    pub fn ready_seen(&self) -> bool {
        self.ready_seen
    }

    pub fn foreign_frames(&self) -> usize {
        self.foreign
    }

    /// Frames of this run accepted so far (`ready` included).
    pub fn accepted_frames(&self) -> usize {
        self.accepted
    }

    fn failed(&self) -> bool {
        matches!(self.terminal, Some(Terminal::Violation(_)))
    }

    fn fail<'a>(&mut self, violation: Violation) -> Step<'a> {
        self.terminal = Some(Terminal::Violation(violation.clone()));
        Step::Violation(violation)
    }

    fn accept<'a>(&mut self, frame: FrameRef<'a>) -> Step<'a> {
        self.accepted += 1;
        Step::Accepted(frame)
    }

    fn check_frame<'a>(&mut self, line: usize, frame: FrameRef<'a>) -> Step<'a> {
        use ViolationCode as Code;
        if self.adopt_request_id {
            if let Some(id) = frame.request_id() {
                self.context.request_id = id.to_string();
                self.adopt_request_id = false;
            }
        }
        if !self.ready_seen {
            return match frame {
                FrameRef::Ready(_) => self.check_ready(line, frame),
                FrameRef::ProtocolError(error)
                    if error
                        .request_id
                        .as_deref()
                        .is_none_or(|id| id == self.context.request_id) =>
                {
                    self.protocol_error(line, &error)
                }
                other => self.fail(Violation::at(
                    Code::ReadyNotFirst,
                    line,
                    format!(
                        "a {} frame arrived before ready; ready must be the first frame (spec 6, 7)",
                        other.type_name()
                    ),
                )),
            };
        }
        if !frame.is_run_scoped() {
            return match frame {
                FrameRef::Ready(_) => self.fail(Violation::at(
                    Code::DuplicateReady,
                    line,
                    "a second ready frame; ready is sent once per process (spec 6, 7)",
                )),
                other => self.fail(Violation::at(
                    Code::InvalidFrame,
                    line,
                    format!(
                        "a {} frame is not part of the --stdio stream (spec 5, 6)",
                        other.type_name()
                    ),
                )),
            };
        }
        if let FrameRef::ProtocolError(error) = &frame {
            if error.request_id.is_none() {
                return self.protocol_error(line, error);
            }
        }
        if frame.request_id() != Some(self.context.request_id.as_str()) {
            self.foreign += 1;
            return Step::Foreign;
        }
        if let Some(Terminal::Result(result)) = &self.terminal {
            let rule = match &frame {
                FrameRef::Result(_) => format!(
                    "a second result (the first was `{}`); only one terminal result is accepted (spec 6)",
                    result.status
                ),
                other => format!(
                    "a {} frame after the terminal result; the result ends the run (spec 6)",
                    other.type_name()
                ),
            };
            return self.fail(Violation::at(Code::DuplicateResult, line, rule));
        }
        match frame {
            FrameRef::Session(_) => self.check_session(line, frame),
            FrameRef::Result(_) => self.check_result(line, frame),
            FrameRef::ProtocolError(error) => self.protocol_error(line, &error),
            content => self.check_content(line, content),
        }
    }

    fn check_ready<'a>(&mut self, line: usize, frame: FrameRef<'a>) -> Step<'a> {
        let FrameRef::Ready(identity) = &frame else {
            unreachable!("check_ready is called with ready frames")
        };
        let mut problems = Vec::new();
        if identity.runtime != crate::RUNTIME_ID {
            problems.push(format!(
                "runtime is `{}`, not `{}`",
                identity.runtime,
                crate::RUNTIME_ID
            ));
        }
        if identity.protocol_version != crate::PROTOCOL_VERSION {
            problems.push(format!(
                "protocol_version is {}, not {}",
                identity.protocol_version,
                crate::PROTOCOL_VERSION
            ));
        }
        let capabilities = identity.capabilities;
        for (name, present) in [
            ("session_resume", capabilities.session_resume),
            ("session_cancel", capabilities.session_cancel),
            ("structured_events", capabilities.structured_events),
        ] {
            if !present {
                problems.push(format!("capability `{name}` is not true"));
            }
        }
        self.ready_seen = true;
        if !problems.is_empty() {
            return self.fail(Violation::at(
                ViolationCode::IncompatibleReady,
                line,
                format!(
                    "incompatible ready: {} (the host requires runtime, protocol and phase-one capabilities: spec 5, 6)",
                    problems.join(", ")
                ),
            ));
        }
        self.accept(frame)
    }

    fn check_session<'a>(&mut self, line: usize, frame: FrameRef<'a>) -> Step<'a> {
        use ViolationCode as Code;
        let FrameRef::Session(session) = &frame else {
            unreachable!("check_session is called with session frames")
        };
        if let Some(existing) = &self.session_id {
            return self.fail(Violation::at(
                Code::DuplicateSession,
                line,
                format!("a second session frame (session `{existing}` was already announced); session arrives once (spec 6)"),
            ));
        }
        match &self.context.resume_session_id {
            Some(requested) if session.session_id != *requested || !session.resumed => {
                return self.fail(Violation::at(
                    Code::ResumeMismatch,
                    line,
                    format!(
                        "resume of `{requested}` answered with session `{}` resumed={}; on resume the id must equal the requested one and resumed must be true (spec 6)",
                        session.session_id, session.resumed
                    ),
                ));
            }
            None if session.resumed => {
                return self.fail(Violation::at(
                    Code::UnrequestedResume,
                    line,
                    format!(
                        "session `{}` claims resumed=true but the execute asked for a new session (spec 6, 7)",
                        session.session_id
                    ),
                ));
            }
            _ => {}
        }
        self.session_id = Some(session.session_id.to_string());
        self.accept(frame)
    }

    fn check_content<'a>(&mut self, line: usize, frame: FrameRef<'a>) -> Step<'a> {
        use ViolationCode as Code;
        if self.session_id.is_none() {
            return self.fail(Violation::at(
                Code::ContentBeforeSession,
                line,
                format!(
                    "a {} frame before the session frame; session must arrive before content or tool frames (spec 6)",
                    frame.type_name()
                ),
            ));
        }
        match &frame {
            FrameRef::ToolCall(call) => {
                if let Err(error) = crate::arguments::check(&call.arguments) {
                    return self.fail(Violation::at(
                        Code::InvalidFrame,
                        line,
                        format!(
                            "tool_call `{}`: `arguments` is not JSON-encoded ({error}); arguments is a JSON string (spec 6)",
                            call.call_id,
                        ),
                    ));
                }
                if let Err(violation) = self.remember_call(line, &call.call_id) {
                    return self.fail(violation);
                }
            }
            FrameRef::ToolResult(result)
                if *result.call_id != self.last_call_id
                    && !self.tool_calls.contains(&*result.call_id) =>
            {
                return self.fail(Violation::at(
                    Code::UnmatchedToolResult,
                    line,
                    format!(
                        "tool_result for call `{}` with no prior tool_call of that id; a tool_result must match a call id (spec 6)",
                        result.call_id
                    ),
                ));
            }
            _ => {}
        }
        self.accept(frame)
    }

    /// Records a tool call's id for matching its result. A repeated id is accepted and takes no
    /// room (interpretation I-17b); the set is bounded by [`MAX_TOOL_CALL_IDS`] ids and
    /// [`MAX_TOOL_CALL_ID_BYTES`] bytes, past which the run fails rather than growing forever.
    fn remember_call(&mut self, line: usize, call_id: &str) -> Result<(), Violation> {
        if call_id == self.last_call_id {
            return Ok(());
        }
        if self.tool_calls.contains(call_id) {
            self.last_call_id.clear();
            self.last_call_id.push_str(call_id);
            return Ok(());
        }
        if self.tool_calls.len() >= MAX_TOOL_CALL_IDS
            || self.tool_call_bytes + call_id.len() > MAX_TOOL_CALL_ID_BYTES
        {
            return Err(Violation::at(
                ViolationCode::InvalidFrame,
                line,
                format!(
                    "tool_call `{call_id}` exceeds the kit's bound of {MAX_TOOL_CALL_IDS} distinct call ids \
                     ({MAX_TOOL_CALL_ID_BYTES} bytes) in one run (interpretation I-17b; spec 6 matches results to call ids)"
                ),
            ));
        }
        self.tool_call_bytes += call_id.len();
        self.tool_calls.insert(call_id.to_string());
        self.last_call_id.clear();
        self.last_call_id.push_str(call_id);
        Ok(())
    }

    fn check_result<'a>(&mut self, line: usize, frame: FrameRef<'a>) -> Step<'a> {
        use ViolationCode as Code;
        let FrameRef::Result(result) = &frame else {
            unreachable!("check_result is called with result frames")
        };
        let resuming = self.context.resume_session_id.as_deref();
        if result.resume_rejected {
            if resuming.is_none() {
                return self.fail(Violation::at(
                    Code::UnrequestedResume,
                    line,
                    "result has resume_rejected=true but the execute did not ask to resume (spec 6)",
                ));
            }
            if let Some(session) = &self.session_id {
                return self.fail(Violation::at(
                    Code::ResumeMismatch,
                    line,
                    format!("result has resume_rejected=true after session `{session}` was confirmed as resumed (spec 6)"),
                ));
            }
        }
        let reported = result.session_id.as_str();
        match (&self.session_id, resuming) {
            (Some(session), _) if reported != session => {
                return self.fail(Violation::at(
                    Code::SessionMismatch,
                    line,
                    format!(
                        "result names session `{reported}` but the session frame said `{session}` (spec 6)"
                    ),
                ));
            }
            (None, Some(requested)) if reported != requested => {
                return self.fail(Violation::at(
                    Code::SessionMismatch,
                    line,
                    format!(
                        "result names session `{reported}` but no session frame arrived and the execute asked to resume `{requested}`; the runtime serves the requested id (spec 6)"
                    ),
                ));
            }
            _ => {}
        }
        if result.status == Status::Completed && self.session_id.is_none() {
            return self.fail(Violation::at(
                Code::UnannouncedSession,
                line,
                "result: completed without a prior session frame; a completed result needs a validated session (spec 6, 7)",
            ));
        }
        if result.status == Status::Cancelled && !self.cancel_sent {
            return self.fail(Violation::at(
                Code::UnsolicitedCancelled,
                line,
                "result: cancelled although the host never sent cancel (spec 6, 10)",
            ));
        }
        self.terminal = Some(Terminal::Result(RunResult::clone(result)));
        self.accept(frame)
    }

    fn protocol_error<'a>(
        &mut self,
        line: usize,
        error: &crate::frames::ProtocolError,
    ) -> Step<'a> {
        self.fail(Violation::at(
            ViolationCode::ProtocolError,
            line,
            format!(
                "the runtime reported protocol_error `{}`: {} (a fatal contract error: spec 6)",
                error.code, error.message
            ),
        ))
    }
}
