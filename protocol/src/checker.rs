//! The strict stream checker: one run's stdout, one line at a time (spec sections 6 and 7).

use crate::frames::{Result as RunResult, RuntimeFrame};

/// What the host asked for in this run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunContext {
    pub request_id: String,
    /// `Some(id)` when the execute asked to resume that session.
    pub resume_session_id: Option<String>,
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
    SessionMismatch,
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
    /// `DSH_PROFILE_FRAME_TOO_LARGE` etc.
    pub fn as_str(self) -> &'static str {
        todo!()
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

/// How the run ended, once it has.
#[derive(Debug, Clone, PartialEq)]
pub enum Terminal {
    /// The single accepted terminal `result`.
    Result(RunResult),
    /// The stream broke a rule; the run fails with this.
    Violation(Violation),
}

/// What one line did.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Empty or whitespace-only line.
    Skipped,
    /// A valid frame for another request: ignored and counted.
    Foreign,
    /// A valid frame of this run (`ready`, `session`, content, tool, usage, the terminal result).
    Accepted(RuntimeFrame),
    /// This line broke a rule; the run has failed (later lines are ignored: `Step::Skipped`).
    Violation(Violation),
}

pub struct StreamChecker {
    context: RunContext,
}

impl StreamChecker {
    pub fn new(context: RunContext) -> Self {
        let _ = context;
        todo!()
    }
    /// Check the next complete line (without its terminator).
    pub fn check_line(&mut self, number: usize, line: &[u8]) -> Step {
        let _ = (number, line, &self.context);
        todo!()
    }
    /// Feed a framer event (line, too-large line, truncated tail).
    pub fn check_event(&mut self, event: &crate::lines::LineEvent) -> Step {
        let _ = event;
        todo!()
    }
    /// The host has sent `cancel` for the active request: `result: cancelled` becomes legitimate.
    pub fn note_cancel_sent(&mut self) {
        todo!()
    }
    /// The stream reached EOF. Returns the run's terminal state: the accepted result, the first
    /// violation, or `MissingResult` when neither happened.
    pub fn finish(&mut self) -> Terminal {
        todo!()
    }
    /// The terminal state so far, if any (result accepted or violation seen).
    pub fn terminal(&self) -> Option<&Terminal> {
        todo!()
    }
    /// The validated session frame's id, once seen.
    pub fn session_id(&self) -> Option<&str> {
        todo!()
    }
    pub fn foreign_frames(&self) -> usize {
        todo!()
    }
}
