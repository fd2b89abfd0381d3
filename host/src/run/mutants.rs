//! The run loop's mutant hooks (the `mutants` feature only; see [`crate::mutants`]). Each is called
//! from one `#[cfg(feature = "mutants")]` statement in `run.rs` and, with its mutant off, hands
//! back what the correct step computed, untouched.

use super::pipes::{StderrDrain, StdinWriter, TreeGuard};
use super::{
    checker_after_ready, execute_command, next_request_id, End, EventSink, Outcome, Prepared,
    RunRequest, Turn,
};
use crate::codes;
use crate::events::Normalizer;
use crate::host::Host;
use crate::mutants::Mutant;
use crate::process::{OwnedTree, Stop};
use crate::redact::Redactor;
use crate::session_store::{CompatibilityKey, SessionMapping, SessionStore};
use dsh_protocol::{LineEvent, RunContext, RuntimeFrame, Step, Violation, ViolationCode};
use std::path::PathBuf;
use tokio::process::Child;

impl Host {
    /// `missing-resume-new-session`: a rejected resume is retried at once as a new session (the
    /// first attempt forgot the mapping). `None`: the mutant is off.
    pub(super) async fn retry_rejected_resume(
        &self,
        request: &RunRequest,
        prepared: &Prepared,
        redactor: &Redactor,
        cancel: &super::CancelSignal,
        emit: EventSink<'_>,
    ) -> Option<Outcome> {
        if !self.mutant(Mutant::MissingResumeNewSession) {
            return None;
        }
        let first = self
            .attempt(request, prepared, redactor, cancel.clone(), &mut *emit)
            .await;
        if first.code.as_deref() != Some(codes::RESUME_REJECTED) {
            return Some(first);
        }
        Some(
            self.attempt(request, prepared, redactor, cancel.clone(), emit)
                .await,
        )
    }

    /// `no-cwd-canonicalize`: the project cwd as given.
    pub(super) fn cwd_as_given(&self, request: &RunRequest, canonical: PathBuf) -> PathBuf {
        if self.mutant(Mutant::NoCwdCanonicalize) {
            request.cwd.clone()
        } else {
            canonical
        }
    }

    /// `key-in-argv`: the credential appended to the runtime's arguments.
    pub(super) fn key_in_argv(&self, command: &mut tokio::process::Command) {
        if let (true, Ok(key)) = (
            self.mutant(Mutant::KeyInArgv),
            std::env::var("DEEPSEEK_API_KEY"),
        ) {
            command.arg(format!("--api-key={key}"));
        }
    }

    /// `execute-before-ready`: `execute` written right after spawning (a new session with the
    /// bootstrap: the compatibility key needs `ready`).
    pub(super) fn execute_before_ready(
        &self,
        stdin: &StdinWriter,
        request: &RunRequest,
        request_id: &str,
        cwd: &str,
    ) {
        if !self.mutant(Mutant::ExecuteBeforeReady) {
            return;
        }
        let prompt = if request.bootstrap.is_empty() {
            request.prompt.clone()
        } else {
            format!("{}\n\n{}", request.bootstrap, request.prompt)
        };
        let route = (request.model.clone(), request.reasoning_effort.clone());
        stdin.send(execute_command(route, request_id, cwd, None, prompt).to_line());
    }

    /// `execute-before-ready`: whether `execute` already went out before `ready`.
    pub(super) fn executed_early(&self) -> bool {
        self.mutant(Mutant::ExecuteBeforeReady)
    }

    /// `sigkill-without-cancel`: whether a cancel skips the protocol steps and SIGKILLs.
    pub(super) fn cancels_by_kill(&self) -> bool {
        self.mutant(Mutant::SigkillWithoutCancel)
    }

    /// `eof-is-success`: whether EOF without a result reports `completed`.
    pub(super) fn eof_is_success(&self) -> bool {
        self.mutant(Mutant::EofIsSuccess)
    }

    /// `kill-direct-child-only`: whether the tree is left alone (signals reach the direct child
    /// only, the tree is not waited for, escaped daemons live on).
    pub(super) fn leader_only(&self) -> bool {
        self.mutant(Mutant::KillDirectChildOnly)
    }

    /// `execute-before-ready`: no resume, and a stored mapping goes stale (the run was already
    /// started as a new session).
    pub(super) fn no_resume_after_early_execute(
        &self,
        resume: Option<String>,
        stale: bool,
    ) -> (Option<String>, bool) {
        if self.executed_early() {
            (None, stale || resume.is_some())
        } else {
            (resume, stale)
        }
    }

    /// `no-stderr-drain`: stderr left alone until the runtime exits (`None`: drained as it should).
    pub(super) fn stderr_left_alone(&self, child: &mut Child) -> Option<StderrDrain> {
        self.mutant(Mutant::NoStderrDrain)
            .then(|| StderrDrain::Late(child.stderr.take()))
    }

    /// `salvage-torn-mapping` (a mapping file that does not parse still yields the `session_id`
    /// in its text, under the current key) and `resume-under-changed-cwd` (the stored key's cwd
    /// is taken to be the current one).
    pub(super) fn worse_mapping(
        &self,
        mapping: Option<SessionMapping>,
        request: &RunRequest,
        current: &CompatibilityKey,
    ) -> Option<SessionMapping> {
        let mapping = match (mapping, &self.config.store) {
            (None, Some(store)) if self.mutant(Mutant::SalvageTornMapping) => {
                let text =
                    std::fs::read(store.file_of(&request.conversation_id)).unwrap_or_default();
                session_id_in(&String::from_utf8_lossy(&text)).map(|session_id| SessionMapping {
                    session_id,
                    key: current.clone(),
                })
            }
            (mapping, _) => mapping,
        };
        mapping.map(|mut mapping| {
            if self.mutant(Mutant::ResumeUnderChangedCwd) {
                mapping.key.cwd.clone_from(&current.cwd);
            }
            mapping
        })
    }

    /// `save-in-place`: the store the run saves its mapping through, which truncates the mapping
    /// file and writes it again where it is (the mutant off: it saves as it should, a temp file
    /// renamed over the old one).
    pub(super) fn saving_store<'s>(&self, store: &'s SessionStore) -> SavingStore<'s> {
        SavingStore {
            store,
            in_place: self.mutant(Mutant::SaveInPlace),
        }
    }

    /// `no-bootstrap-on-new-session`: the turn alone, bootstrap or not.
    pub(super) fn prompt_without_bootstrap(&self, request: &RunRequest, prompt: String) -> String {
        if self.mutant(Mutant::NoBootstrapOnNewSession) {
            request.prompt.clone()
        } else {
            prompt
        }
    }

    /// `log-prompt-to-stderr`: the prompt in the host's own log.
    pub(super) fn log_prompt(&self, prompt: &str) {
        if self.mutant(Mutant::LogPromptToStderr) {
            self.log(&format!("execute prompt: {prompt}"));
        }
    }

    /// `ignore-resume-mismatch`: the checker is not told about the resume.
    pub(super) fn context_without_resume(
        &self,
        context: RunContext,
        request_id: &str,
    ) -> RunContext {
        if self.mutant(Mutant::IgnoreResumeMismatch) {
            RunContext::new(request_id.to_string())
        } else {
            context
        }
    }

    /// `cancel-wrong-request`: the protocol `cancel` names a fresh request id.
    pub(super) fn cancel_target(&self, active: String) -> String {
        if self.mutant(Mutant::CancelWrongRequest) {
            next_request_id()
        } else {
            active
        }
    }

    /// `foreign-frame-leaks`: a frame for another request normalized into this run's events.
    pub(super) fn relay_foreign_frame(
        &self,
        event: &LineEvent,
        normalizer: &mut Normalizer,
        emit: EventSink<'_>,
    ) {
        if !self.mutant(Mutant::ForeignFrameLeaks) {
            return;
        }
        if let Some(frame) = frame_of(event) {
            normalizer.frame(&frame).into_iter().for_each(emit);
        }
    }

    /// `accept-session-after-text` and `ignore-resume-mismatch`: the violation tolerated, with a
    /// replacement checker (and the frame accepted, or the line re-checked with it).
    pub(super) fn tolerate_violation<'e>(
        &self,
        turn: &mut Turn,
        event: &'e LineEvent,
        step: Step<'e>,
    ) -> Step<'e> {
        let Step::Violation(violation) = &step else {
            return step;
        };
        let Some((context, accepted)) = self.tolerated(violation, event, &turn.request_id) else {
            return step;
        };
        turn.checker = checker_after_ready(context, &turn.ready_lines);
        if turn.cancel_sent {
            turn.checker.note_cancel_sent();
        }
        match accepted {
            Some(frame) => Step::Accepted(frame.into()),
            None => turn.checker.check_event(event),
        }
    }

    /// The replacement checker's context for a tolerated violation, and the frame to accept.
    fn tolerated(
        &self,
        violation: &Violation,
        event: &LineEvent,
        request_id: &str,
    ) -> Option<(RunContext, Option<RuntimeFrame>)> {
        let frame = frame_of(event)?;
        match (violation.code, &frame) {
            (ViolationCode::ContentBeforeSession, _)
                if self.mutant(Mutant::AcceptSessionAfterText) =>
            {
                Some((RunContext::new(request_id), Some(frame)))
            }
            (ViolationCode::ResumeMismatch, RuntimeFrame::Session(session))
                if self.mutant(Mutant::IgnoreResumeMismatch) =>
            {
                let context = if session.resumed {
                    RunContext::resuming(request_id, session.session_id.clone())
                } else {
                    RunContext::new(request_id)
                };
                Some((context, None))
            }
            _ => None,
        }
    }

    /// `accept-second-result`: a second `result` replaces the first (`None`: the violation stands).
    pub(super) fn second_result(&self, violation: &Violation, event: &LineEvent) -> Option<End> {
        if !self.mutant(Mutant::AcceptSecondResult)
            || violation.code != ViolationCode::DuplicateResult
        {
            return None;
        }
        match frame_of(event) {
            Some(RuntimeFrame::Result(result)) => Some(End::Result(result)),
            _ => None,
        }
    }

    /// `kill-direct-child-only`: nothing kills the tree after the run.
    pub(super) fn disarm_for_leader_only(&self, guard: &mut TreeGuard) {
        if self.leader_only() {
            guard.armed = false;
        }
    }

    /// `kill-direct-child-only`: the signal goes to the direct child alone. Returns whether the
    /// mutant took the step.
    pub(super) fn signal_leader_only(&self, tree: OwnedTree, how: Stop) -> bool {
        if !self.leader_only() {
            return false;
        }
        if let Err(error) = tree.stop_leader_only(how) {
            self.log(&format!(
                "signalling pid {} failed: {error}",
                tree.leader_pid()
            ));
        }
        true
    }
}

/// The frame a line holds, parsed on its own (for mutants that bypass the checker).
fn frame_of(event: &LineEvent) -> Option<RuntimeFrame> {
    match event {
        LineEvent::Line { bytes, .. } | LineEvent::Truncated { bytes, .. } => {
            RuntimeFrame::parse_line(bytes).ok()
        }
        LineEvent::TooLarge { .. } => None,
    }
}

/// The string after `"session_id":` in a JSON text that may be cut anywhere after it.
fn session_id_in(text: &str) -> Option<String> {
    let (_, after) = text.split_once("\"session_id\"")?;
    let value = after
        .trim_start()
        .strip_prefix(':')?
        .trim_start()
        .strip_prefix('"')?;
    let (id, _) = value.split_once('"')?;
    Some(id.to_string()).filter(|id| !id.is_empty())
}

/// The session store as the `save-in-place` mutant saves through it.
pub(super) struct SavingStore<'s> {
    store: &'s SessionStore,
    in_place: bool,
}

impl SavingStore<'_> {
    pub(super) fn save(&self, mapping: &SessionMapping) -> std::io::Result<()> {
        if !self.in_place {
            return self.store.save(mapping);
        }
        std::fs::create_dir_all(self.store.dir())?;
        let bytes = SessionStore::encode(mapping)?;
        std::fs::write(self.store.file_of(&mapping.key.conversation_id), bytes)
    }
}
