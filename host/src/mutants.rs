//! Deliberate bugs for the kit's mutant gallery (issue 7): `DSH_HOST_MUTANT=<name>[,<name>...]`
//! switches each on as a flag inside the one real implementation. Unset, the host is correct.

use std::collections::BTreeSet;

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
}

impl Mutant {
    pub const ALL: [Mutant; 24] = [
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
