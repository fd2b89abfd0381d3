//! Deliberate bugs for the kit's mutant gallery (issue 7): `DSH_HOST_MUTANT=<name>[,<name>...]`
//! switches each on as a flag inside the one real implementation. Unset, the host is correct.
//!
//! This module is also the one seam through which they reach the run loop (`crate::run`): each
//! deviation point is a named method of [`Mutants`] below whose answer, with no mutant on, is the
//! correct behaviour, so the run loop reads as the spec's steps without the bugs in the way.

use crate::run::{checker_after_ready, frame_of, RunRequest};
use crate::session_store::{CompatibilityKey, Lookup, SessionMapping, SessionStore};
use dsh_protocol::frames::{Execute, ResultFrame as RunResult};
use dsh_protocol::{
    HostCommand, LineEvent, RunContext, RuntimeFrame, StreamChecker, Violation, ViolationCode,
};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// One deliberate bug; [`Mutant::summary`] says which.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mutant {
    EofIsSuccess,
    AcceptSecondResult,
    ForeignFrameLeaks,
    ResumeUnderChangedCwd,
    MissingResumeNewSession,
    NoStderrDrain,
    KillDirectChildOnly,
    SigkillWithoutCancel,
    LogPromptToStderr,
    KeyInArgv,
    SkipProbeGate,
    SkipHashCheck,
    AcceptSessionAfterText,
    IgnoreResumeMismatch,
    NoBootstrapOnNewSession,
    ExecuteBeforeReady,
    MappingInDshHome,
    NoCwdCanonicalize,
    CancelWrongRequest,
    CancelAllRuns,
    AcceptEmptyCatalog,
    ModelForDefault,
    IgnoreReasoningEffort,
    KeepDuplicateModels,
    SalvageTornMapping,
}

impl Mutant {
    pub const ALL: [Mutant; 25] = [
        Mutant::EofIsSuccess,
        Mutant::AcceptSecondResult,
        Mutant::ForeignFrameLeaks,
        Mutant::ResumeUnderChangedCwd,
        Mutant::MissingResumeNewSession,
        Mutant::NoStderrDrain,
        Mutant::KillDirectChildOnly,
        Mutant::SigkillWithoutCancel,
        Mutant::LogPromptToStderr,
        Mutant::KeyInArgv,
        Mutant::SkipProbeGate,
        Mutant::SkipHashCheck,
        Mutant::AcceptSessionAfterText,
        Mutant::IgnoreResumeMismatch,
        Mutant::NoBootstrapOnNewSession,
        Mutant::ExecuteBeforeReady,
        Mutant::MappingInDshHome,
        Mutant::NoCwdCanonicalize,
        Mutant::CancelWrongRequest,
        Mutant::CancelAllRuns,
        Mutant::AcceptEmptyCatalog,
        Mutant::ModelForDefault,
        Mutant::IgnoreReasoningEffort,
        Mutant::KeepDuplicateModels,
        Mutant::SalvageTornMapping,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mutant::EofIsSuccess => "eof-is-success",
            Mutant::AcceptSecondResult => "accept-second-result",
            Mutant::ForeignFrameLeaks => "foreign-frame-leaks",
            Mutant::ResumeUnderChangedCwd => "resume-under-changed-cwd",
            Mutant::MissingResumeNewSession => "missing-resume-new-session",
            Mutant::NoStderrDrain => "no-stderr-drain",
            Mutant::KillDirectChildOnly => "kill-direct-child-only",
            Mutant::SigkillWithoutCancel => "sigkill-without-cancel",
            Mutant::LogPromptToStderr => "log-prompt-to-stderr",
            Mutant::KeyInArgv => "key-in-argv",
            Mutant::SkipProbeGate => "skip-probe-gate",
            Mutant::SkipHashCheck => "skip-hash-check",
            Mutant::AcceptSessionAfterText => "accept-session-after-text",
            Mutant::IgnoreResumeMismatch => "ignore-resume-mismatch",
            Mutant::NoBootstrapOnNewSession => "no-bootstrap-on-new-session",
            Mutant::ExecuteBeforeReady => "execute-before-ready",
            Mutant::MappingInDshHome => "mapping-in-dsh-home",
            Mutant::NoCwdCanonicalize => "no-cwd-canonicalize",
            Mutant::CancelWrongRequest => "cancel-wrong-request",
            Mutant::CancelAllRuns => "cancel-all-runs",
            Mutant::AcceptEmptyCatalog => "accept-empty-catalog",
            Mutant::ModelForDefault => "model-for-default",
            Mutant::IgnoreReasoningEffort => "ignore-reasoning-effort",
            Mutant::KeepDuplicateModels => "keep-duplicate-models",
            Mutant::SalvageTornMapping => "salvage-torn-mapping",
        }
    }

    /// The bug, in one sentence (the kill matrix prints it).
    pub fn summary(self) -> &'static str {
        match self {
            Mutant::EofIsSuccess => "EOF without a result reports `completed`.",
            Mutant::AcceptSecondResult => {
                "A second `result` after the first replaces it instead of failing the run."
            }
            Mutant::ForeignFrameLeaks => {
                "Frames for another request are normalized into this run's events."
            }
            Mutant::ResumeUnderChangedCwd => {
                "The compatibility key ignores the cwd, so a run under another cwd resumes."
            }
            Mutant::MissingResumeNewSession => {
                "A rejected resume is retried silently as a new session in the same run."
            }
            Mutant::NoStderrDrain => "Stderr is read only after the runtime exits.",
            Mutant::KillDirectChildOnly => {
                "Signals go to the direct child only, not its process group."
            }
            Mutant::SigkillWithoutCancel => {
                "Cancellation skips the protocol cancel and SIGKILLs at once."
            }
            Mutant::LogPromptToStderr => "The driver logs the prompt to its stderr.",
            Mutant::KeyInArgv => "The credential is passed to dsh in argv.",
            Mutant::SkipProbeGate => "Discovery skips the probe gate.",
            Mutant::SkipHashCheck => "Setup installs the bundle without checking its hash.",
            Mutant::AcceptSessionAfterText => "A `session` frame after content is accepted.",
            Mutant::IgnoreResumeMismatch => {
                "The checker is not told about the resume, so a mismatching session is accepted."
            }
            Mutant::NoBootstrapOnNewSession => {
                "A new session is started without the bootstrap context."
            }
            Mutant::ExecuteBeforeReady => {
                "`execute` is written right after spawning, before the runtime's `ready` (always a new session)."
            }
            Mutant::MappingInDshHome => {
                "The session mapping is kept under `DSH_HOME` instead of `RUNTIME_DATA_DIR`."
            }
            Mutant::NoCwdCanonicalize => {
                "The project cwd is used as given, not canonicalized, in the key and `execute.cwd`."
            }
            Mutant::CancelWrongRequest => {
                "The protocol `cancel` names another request than the active one."
            }
            Mutant::CancelAllRuns => {
                "A `cancel` ends every run in flight, other conversations' included."
            }
            Mutant::AcceptEmptyCatalog => {
                "An empty `--models` list is offered as an empty picker instead of \"no models\"."
            }
            Mutant::ModelForDefault => {
                "The `default` route sends a fixed `model` instead of leaving it to the runtime."
            }
            Mutant::IgnoreReasoningEffort => "The picked reasoning effort never reaches `execute`.",
            Mutant::KeepDuplicateModels => {
                "A repeated `provider/id` or effort id in `--models` is kept in the catalog."
            }
            Mutant::SalvageTornMapping => {
                "A mapping file that does not parse is salvaged: the `session_id` in its text is resumed."
            }
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|mutant| mutant.name() == name)
    }
}

/// The mutants switched on (empty: the correct host).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mutants(BTreeSet<Mutant>);

impl Mutants {
    /// Parse a comma-separated list; an unknown name is an error, so a typo never runs the
    /// correct host by accident.
    pub fn parse(list: &str) -> Result<Self, String> {
        let mut set = BTreeSet::new();
        for name in list
            .split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
        {
            let mutant = Mutant::from_name(name).ok_or_else(|| {
                let known: Vec<&str> = Mutant::ALL.iter().map(|m| m.name()).collect();
                format!(
                    "unknown DSH_HOST_MUTANT {name:?} (known: {})",
                    known.join(", ")
                )
            })?;
            set.insert(mutant);
        }
        Ok(Self(set))
    }

    /// From `DSH_HOST_MUTANT` (unset or empty: none).
    pub fn from_env() -> Result<Self, String> {
        match std::env::var("DSH_HOST_MUTANT") {
            Ok(list) => Self::parse(&list),
            Err(std::env::VarError::NotPresent) => Ok(Self::default()),
            Err(std::env::VarError::NotUnicode(_)) => {
                Err("DSH_HOST_MUTANT is not UTF-8".to_string())
            }
        }
    }

    pub fn on(&self, mutant: Mutant) -> bool {
        self.0.contains(&mutant)
    }

    pub fn with(mut self, mutant: Mutant) -> Self {
        self.0.insert(mutant);
        self
    }
}

/// The seam: the run loop's deviation points, in the order a turn meets them.
impl Mutants {
    /// Extra runtime arguments (`key-in-argv`: the credential).
    pub fn extra_runtime_args(&self) -> Vec<String> {
        match std::env::var("DEEPSEEK_API_KEY") {
            Ok(key) if self.on(Mutant::KeyInArgv) => vec![format!("--api-key={key}")],
            _ => Vec::new(),
        }
    }

    /// The project cwd as the run uses it: canonical (`no-cwd-canonicalize`: as given).
    pub fn project_cwd(&self, given: &Path) -> std::io::Result<PathBuf> {
        if self.on(Mutant::NoCwdCanonicalize) {
            Ok(given.to_path_buf())
        } else {
            std::fs::canonicalize(given)
        }
    }

    /// Whether stderr is read only after the runtime exits (`no-stderr-drain`).
    pub fn drains_stderr_late(&self) -> bool {
        self.on(Mutant::NoStderrDrain)
    }

    /// `execute-before-ready`: the line written right after spawning (a new session with the
    /// bootstrap: the compatibility key needs `ready`); `None` for the correct host.
    pub fn execute_before_ready(
        &self,
        request: &RunRequest,
        request_id: &str,
        cwd: &str,
    ) -> Option<String> {
        if !self.on(Mutant::ExecuteBeforeReady) {
            return None;
        }
        let prompt = if request.bootstrap.is_empty() {
            request.prompt.clone()
        } else {
            format!("{}\n\n{}", request.bootstrap, request.prompt)
        };
        let execute = HostCommand::Execute(Execute {
            request_id: request_id.to_string(),
            cwd: cwd.to_string(),
            prompt,
            resume_session_id: None,
            model: request.model.clone(),
            reasoning_effort: request.reasoning_effort.clone(),
            mcp_servers: Vec::new(),
        });
        Some(execute.to_line())
    }

    /// Whether `execute` already went out before `ready` (`execute-before-ready`).
    pub fn executed_early(&self) -> bool {
        self.on(Mutant::ExecuteBeforeReady)
    }

    /// Whether a stored key still matches (`resume-under-changed-cwd`: the cwd is ignored).
    pub fn keys_match(&self, stored: &CompatibilityKey, current: &CompatibilityKey) -> bool {
        if self.on(Mutant::ResumeUnderChangedCwd) {
            let mut stored = stored.clone();
            stored.cwd.clone_from(&current.cwd);
            return stored == *current;
        }
        stored == current
    }

    /// The conversation's stored mapping (`salvage-torn-mapping`: a file that does not parse still
    /// yields the `session_id` written in its text, and the key it lost is taken as `current`).
    pub fn lookup(
        &self,
        store: &SessionStore,
        conversation_id: &str,
        current: &CompatibilityKey,
    ) -> Lookup {
        let lookup = store.load(conversation_id);
        if !self.on(Mutant::SalvageTornMapping) || lookup.mapping.is_some() {
            return lookup;
        }
        let text = std::fs::read(store.file_of(conversation_id)).unwrap_or_default();
        let salvaged =
            session_id_in(&String::from_utf8_lossy(&text)).map(|session_id| SessionMapping {
                session_id,
                key: current.clone(),
            });
        Lookup {
            mapping: salvaged,
            warning: lookup.warning,
        }
    }

    /// Whether a new session gets the bootstrap (`no-bootstrap-on-new-session`: it does not).
    pub fn bootstrap_on_new_session(&self) -> bool {
        !self.on(Mutant::NoBootstrapOnNewSession)
    }

    /// Whether the prompt is logged (`log-prompt-to-stderr`).
    pub fn logs_prompt(&self) -> bool {
        self.on(Mutant::LogPromptToStderr)
    }

    /// The checker's context for a resume (`ignore-resume-mismatch`: told nothing).
    pub fn run_context(&self, request_id: &str, resume: Option<&String>) -> RunContext {
        match resume {
            Some(session) if !self.on(Mutant::IgnoreResumeMismatch) => {
                RunContext::resuming(request_id.to_string(), session.clone())
            }
            _ => RunContext::new(request_id.to_string()),
        }
    }

    /// Whether a cancel skips the protocol steps and SIGKILLs (`sigkill-without-cancel`).
    pub fn cancels_by_kill(&self) -> bool {
        self.on(Mutant::SigkillWithoutCancel)
    }

    /// The request the protocol `cancel` names (`cancel-wrong-request`: a fresh one).
    pub fn cancel_target(&self, active: &str, fresh: impl FnOnce() -> String) -> String {
        if self.on(Mutant::CancelWrongRequest) {
            fresh()
        } else {
            active.to_string()
        }
    }

    /// Whether a foreign frame is normalized into this run's events (`foreign-frame-leaks`).
    pub fn relays_foreign_frames(&self) -> bool {
        self.on(Mutant::ForeignFrameLeaks)
    }

    /// The mutants that tolerate a violation: a replacement checker, and the frame to accept
    /// instead (or `None` to re-check the line with the replacement).
    pub fn tolerate(
        &self,
        violation: &Violation,
        event: &LineEvent,
        request_id: &str,
        ready_lines: &[LineEvent],
    ) -> Option<(StreamChecker, Option<RuntimeFrame>)> {
        let rebuild = |context: RunContext| checker_after_ready(context, ready_lines);
        let frame = frame_of(event)?;
        match (violation.code, &frame) {
            (ViolationCode::ContentBeforeSession, _) if self.on(Mutant::AcceptSessionAfterText) => {
                Some((rebuild(RunContext::new(request_id)), Some(frame)))
            }
            (ViolationCode::ResumeMismatch, RuntimeFrame::Session(session))
                if self.on(Mutant::IgnoreResumeMismatch) =>
            {
                let context = if session.resumed {
                    RunContext::resuming(request_id, session.session_id.clone())
                } else {
                    RunContext::new(request_id)
                };
                Some((rebuild(context), None))
            }
            _ => None,
        }
    }

    /// A second `result` that replaces the first (`accept-second-result`); `None`: the
    /// violation stands.
    pub fn second_result(&self, violation: &Violation, event: &LineEvent) -> Option<RunResult> {
        if !self.on(Mutant::AcceptSecondResult) || violation.code != ViolationCode::DuplicateResult
        {
            return None;
        }
        match frame_of(event) {
            Some(RuntimeFrame::Result(result)) => Some(result),
            _ => None,
        }
    }

    /// Whether EOF without a result reports `completed` (`eof-is-success`).
    pub fn eof_is_success(&self) -> bool {
        self.on(Mutant::EofIsSuccess)
    }

    /// Whether signals reach the direct child only, and the tree is not waited for nor its
    /// escaped daemons killed (`kill-direct-child-only`).
    pub fn signals_leader_only(&self) -> bool {
        self.on(Mutant::KillDirectChildOnly)
    }

    /// Whether a rejected resume is retried silently as a new session
    /// (`missing-resume-new-session`).
    pub fn retries_rejected_resume(&self) -> bool {
        self.on(Mutant::MissingResumeNewSession)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_typos_are_refused() {
        for mutant in Mutant::ALL {
            assert_eq!(Mutant::from_name(mutant.name()), Some(mutant));
        }
        let parsed = Mutants::parse("eof-is-success, key-in-argv");
        assert!(parsed
            .as_ref()
            .is_ok_and(|m| m.on(Mutant::EofIsSuccess) && m.on(Mutant::KeyInArgv)));
        assert!(Mutants::parse("eof-is-sucess").is_err());
        assert_eq!(Mutants::parse(""), Ok(Mutants::default()));
    }
}
