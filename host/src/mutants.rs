//! Deliberate bugs for the kit's mutant gallery (issue 7), compiled only with the `mutants` cargo
//! feature: the kit's own tests and `cargo xtask mutants` build it (the `dsh-host-mutant-driver`
//! binary takes `--mutant <name>[,<name>...]`); the released `dsh-host-driver` has no mutant in it
//! and no switch for one.
//!
//! The correct host is written inline in its modules. Each bug is one `#[cfg(feature = "mutants")]`
//! statement there that calls a hook here (or in `run/mutants.rs`, the run loop's hooks), and a hook
//! can only make the host worse: with its mutant off it answers exactly what the host computed.

use crate::codes::Diagnostic;
use crate::discovery::{self, Discovery, ProbeInfo};
use crate::host::Host;
use crate::models::{self, CatalogModel};
use crate::run::RunRequest;
use crate::session_store::SessionStore;
use crate::setup;
use dsh_protocol::frames::ModelRoute;
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::Path;

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
    SaveInPlace,
}

impl Mutant {
    pub const ALL: [Mutant; 26] = [
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
        Mutant::SaveInPlace,
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
            Mutant::SaveInPlace => "save-in-place",
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
            Mutant::SaveInPlace => {
                "A session mapping is rewritten in place (truncate, then write) instead of a temp file renamed over it."
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
                format!("unknown mutant {name:?} (known: {})", known.join(", "))
            })?;
            set.insert(mutant);
        }
        Ok(Self(set))
    }

    pub fn on(&self, mutant: Mutant) -> bool {
        self.0.contains(&mutant)
    }

    pub fn with(mut self, mutant: Mutant) -> Self {
        self.0.insert(mutant);
        self
    }
}

/// The model the `model-for-default` mutant sends for the `default` route.
const MUTANT_DEFAULT_MODEL: (&str, &str) = ("deepseek-official", "deepseek-chat");

impl Mutants {
    /// `mapping-in-dsh-home`: the session store the mutant keeps in the user's Harness home
    /// `dsh_home` (`None`: the host's own store stands).
    pub fn session_store_in(&self, dsh_home: Option<&OsStr>) -> Option<SessionStore> {
        match dsh_home {
            Some(home) if self.on(Mutant::MappingInDshHome) => {
                Some(SessionStore::new(Path::new(home)))
            }
            _ => None,
        }
    }
}

impl Host {
    /// This host with `mutants` switched on.
    pub fn with_mutants(mut self, mutants: Mutants) -> Self {
        self.mutants = mutants;
        self
    }

    /// Whether `mutant` is on.
    pub(crate) fn mutant(&self, mutant: Mutant) -> bool {
        self.mutants.on(mutant)
    }

    /// `skip-probe-gate`: discovery without its probe.
    pub(crate) async fn discovery_without_probe(&self) -> Option<Discovery> {
        if !self.mutant(Mutant::SkipProbeGate) {
            return None;
        }
        Some(discovery::locate(&self.config.env, self.config.discovery_bounds).await)
    }

    /// `skip-hash-check`: the bundle installed without checking its hash.
    pub(crate) async fn install_without_hash_check(
        &self,
        executable: &Path,
        tarball: &Path,
        manifest: &Path,
    ) -> Option<Result<ProbeInfo, Diagnostic>> {
        if !self.mutant(Mutant::SkipHashCheck) {
            return None;
        }
        if let Err(diagnostic) = setup::read_manifest(manifest) {
            return Some(Err(diagnostic));
        }
        let (bounds, credentials) = (self.config.setup_bounds, &self.config.credentials);
        Some(setup::install_verified(executable, tarball, bounds, credentials).await)
    }

    /// `keep-duplicate-models` and `accept-empty-catalog`: the catalog with repeats kept or an
    /// empty list offered (`None`: neither is on).
    pub(crate) fn lenient_catalog(
        &self,
        stdout: &[u8],
    ) -> Option<Result<Vec<CatalogModel>, Diagnostic>> {
        let keep_duplicates = self.mutant(Mutant::KeepDuplicateModels);
        let accept_empty = self.mutant(Mutant::AcceptEmptyCatalog);
        if !keep_duplicates && !accept_empty {
            return None;
        }
        let parsed = models::parse_models_frame(stdout).map(|models| {
            if keep_duplicates {
                models
            } else {
                models::without_duplicates(models)
            }
        });
        Some(match parsed {
            Ok(models) if !accept_empty => models::refuse_empty(models),
            parsed => parsed,
        })
    }

    /// `model-for-default`: a fixed `model` for the `default` route.
    pub(crate) fn model_for_default(&self, request: &RunRequest) -> Option<Option<ModelRoute>> {
        (self.mutant(Mutant::ModelForDefault) && request.model.is_none()).then(|| {
            Some(ModelRoute {
                provider: MUTANT_DEFAULT_MODEL.0.to_string(),
                id: MUTANT_DEFAULT_MODEL.1.to_string(),
            })
        })
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
