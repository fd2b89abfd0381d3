//! The typed model of one case file (fixture v1, docs/fixture-format.md) and its loading.
//!
//! Loading is strict: unknown members are rejected, every step has exactly one action, and each
//! step's `expect` must be the kind its action allows. A problem is a [`FixtureError`] naming the
//! file and the rule, never a panic.

use crate::scenario::{self, Scenario};
use dsh_protocol::frames::Status;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// The per-case budget when the case sets no `timeout_ms`.
pub const DEFAULT_TIMEOUT_MS: u64 = 20_000;

/// Why a case file did not load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixtureError {
    pub file: PathBuf,
    pub message: String,
}

impl fmt::Display for FixtureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file.display(), self.message)
    }
}

impl std::error::Error for FixtureError {}

/// One case file.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub v: u64,
    pub id: String,
    pub summary: String,
    pub spec: Vec<String>,
    pub rules: Vec<String>,
    #[serde(default)]
    pub requires: Vec<Capability>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// The fake-dsh scenario, checked against `scenario.schema.json` when the case loads.
    #[serde(default)]
    pub runtime: Scenario,
    pub steps: Vec<Step>,
}

impl Case {
    /// The case's budget before `--time-scale`.
    pub fn timeout_ms(&self) -> u64 {
        self.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS)
    }
    /// Whether the harness pre-installs the open-design profile in `DSH_HOME`.
    pub fn profile_installed(&self) -> bool {
        self.runtime.profile_installed()
    }
    /// The rule blamed when one of the case's own expectations fails.
    pub fn first_rule(&self) -> &str {
        self.rules
            .first()
            .map(String::as_str)
            .unwrap_or("unspecified")
    }
}

/// A driver capability a case may require (docs/host-driver.md, "Capabilities").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    /// The driver implements `discover` (spec 5).
    Discover,
    /// The driver implements `setup` (spec 4).
    Setup,
    /// The host keeps the conversation -> session mapping and the compatibility key itself (spec 7).
    Sessions,
    /// The driver implements `cancel` (spec 10).
    Cancel,
    /// The session mapping survives a driver restart (it persists under `RUNTIME_DATA_DIR`).
    Restart,
    /// The driver runs two conversations' turns at once (spec 10: no operation may kill another
    /// conversation's runtime).
    Concurrent,
    /// The driver implements `models` and takes `route`/`reasoning_effort` in `run` (spec 12).
    Models,
}

impl Capability {
    pub const ALL: [Capability; 7] = [
        Capability::Discover,
        Capability::Setup,
        Capability::Sessions,
        Capability::Cancel,
        Capability::Restart,
        Capability::Concurrent,
        Capability::Models,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Discover => "discover",
            Capability::Setup => "setup",
            Capability::Sessions => "sessions",
            Capability::Cancel => "cancel",
            Capability::Restart => "restart",
            Capability::Concurrent => "concurrent",
            Capability::Models => "models",
        }
    }
}

/// Expectation member -> interpretation entry (`I-..`): the expectations of a step that rest on a
/// reading of the spec rather than on its sentences. Such an expectation that fails makes the case
/// `informational`; the step's other expectations stay strict.
pub type Interpretations = BTreeMap<String, String>;

/// Expectation member -> rule id: the rule a step's expectation checks when it is not the case's
/// first rule (a case about one rule whose step also checks another's sentence). A miss of that
/// member blames this rule, so a dialect's mode for it applies; unnamed members blame the first.
pub type ExpectRules = BTreeMap<String, String>;

/// Checks that every key of `rules` names a member the expectation sets, and every value a rule
/// id of the case's `case_rules`.
fn check_expect_rules(
    step: &str,
    expect: &Value,
    rules: &ExpectRules,
    case_rules: &[String],
) -> Result<(), String> {
    for (member, rule) in rules {
        if member == "rules" || member == "interpretations" || expect.get(member).is_none() {
            return Err(format!(
                "{step} step: rules names {member:?}, which this expect does not set"
            ));
        }
        if !case_rules.contains(rule) {
            return Err(format!(
                "{step} step: rules.{member} is {rule:?}, which is not one of the case's rules {case_rules:?}"
            ));
        }
    }
    Ok(())
}

/// Checks that every key of `interpretations` names a member the expectation sets.
fn check_interpretations(
    step: &str,
    expect: &Value,
    interpretations: &Interpretations,
) -> Result<(), String> {
    for (member, entry) in interpretations {
        if expect.get(member).is_none() {
            return Err(format!(
                "{step} step: interpretations names {member:?}, which this expect does not set"
            ));
        }
        if !entry.starts_with("I-") {
            return Err(format!(
                "{step} step: interpretations.{member} must be an entry id (I-..), got {entry:?}"
            ));
        }
    }
    Ok(())
}

/// One step: an action and what must hold after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawStep", into = "RawStep")]
pub enum Step {
    Discover(DiscoverExpect),
    /// Driver `models`: the host's parsed model catalog (spec 12).
    Models(ModelsExpect),
    Setup {
        bundle: BundleKind,
        expect: SetupExpect,
    },
    Run {
        run: RunStep,
        expect: Box<RunExpect>,
    },
    Restart(RestartAction),
    RuntimeVersion(String),
    CorruptSession {
        conversation: String,
    },
    DeleteSession {
        conversation: String,
    },
    /// Cut every file under `RUNTIME_DATA_DIR` to half its length: what a host that writes its
    /// mapping in place leaves when it crashes mid-save.
    TruncateHostData,
    /// A run sent to a driver restarted with a file-size limit below its saved mapping's size, then
    /// the driver is SIGKILLed and started again without the limit: a crash in the middle of the
    /// run's save, whatever the host writes. Judges nothing itself; the steps after it do.
    CrashMidSave(RunStep),
    /// Runs of different conversations in flight at once (the driver's `concurrent` capability):
    /// the first is sent at once, each later one when the run before it reports its `start_on`
    /// event.
    Concurrent(Vec<ConcurrentRun>),
}

/// One run of a `concurrent` step, with its own expectations.
#[derive(Debug, Clone, PartialEq)]
pub struct ConcurrentRun {
    pub run: RunStep,
    pub expect: Box<RunExpect>,
}

impl Step {
    /// The action's member name, as in the case file.
    pub fn name(&self) -> &'static str {
        match self {
            Step::Discover(_) => "discover",
            Step::Models(_) => "models",
            Step::Setup { .. } => "setup",
            Step::Run { .. } => "run",
            Step::Restart(_) => "restart",
            Step::RuntimeVersion(_) => "runtime_version",
            Step::CorruptSession { .. } => "corrupt_session",
            Step::DeleteSession { .. } => "delete_session",
            Step::TruncateHostData => "truncate_host_data",
            Step::CrashMidSave(_) => "crash_mid_save",
            Step::Concurrent(_) => "concurrent",
        }
    }
}

/// The bundle the harness builds for a `setup` step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BundleKind {
    Valid,
    Tampered,
    MissingFile,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct EmptyObject {}

/// A `restart` step: stop the driver and start a new one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RestartAction {
    /// The new driver gets a new, empty `RUNTIME_DATA_DIR` (the daemon's data root moved).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fresh_data_dir: bool,
    /// SIGKILL the driver's process group instead of shutting it down: a crash right after the
    /// driver's last save.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kill: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct SetupAction {
    bundle: BundleKind,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct SessionAction {
    conversation: String,
}

/// A `run` step's action.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RunStep {
    pub conversation: String,
    pub prompt: String,
    /// Relative to the case root; default `project`.
    #[serde(default = "default_cwd")]
    pub cwd: String,
    #[serde(default)]
    pub model: ModelRoute,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_on: Option<CancelOn>,
    /// How the harness writes the project dir in the driver's `run` (default: canonical).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd_form: Option<CwdForm>,
    /// In a `concurrent` step (every run but the first): send this run when the run before it
    /// reports the first event of this type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_on: Option<OnEvent>,
    /// The route as the host's user picks it (`provider/id` or `default`); replaces `model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    /// The reasoning effort the host's user picked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
}

/// What a run's route asks of the host's `execute` (spec 12).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteChoice {
    /// `default`: `execute` carries no `model`.
    Default,
    /// `provider/id` (or the step's `model`): `execute.model` is exactly this.
    Model(ModelRoute),
    /// Not `provider/id`: the host's error before any spawn.
    Invalid(String),
}

impl RunStep {
    /// The route the host must honour: the step's `route` parsed, else its `model`.
    pub fn route_choice(&self) -> RouteChoice {
        match self.route.as_deref() {
            None => RouteChoice::Model(self.model.clone()),
            Some(route) => parse_route(route),
        }
    }

    /// Whether the step uses the spec-12 members (`route`, `reasoning_effort`).
    pub fn picks_model(&self) -> bool {
        self.route.is_some() || self.reasoning_effort.is_some()
    }
}

/// A picker route: `default`, or `provider/id` split at the first `/` with both halves non-empty
/// and free of whitespace (I-16f); anything else is [`RouteChoice::Invalid`].
pub fn parse_route(route: &str) -> RouteChoice {
    if route == "default" {
        return RouteChoice::Default;
    }
    let clean = |part: &str| !part.is_empty() && !part.chars().any(char::is_whitespace);
    match route.split_once('/') {
        Some((provider, id)) if clean(provider) && clean(id) => RouteChoice::Model(ModelRoute {
            provider: provider.to_string(),
            id: id.to_string(),
        }),
        _ => RouteChoice::Invalid(route.to_string()),
    }
}

/// A non-canonical spelling of the project dir, which the host must canonicalize (spec 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CwdForm {
    /// Through a symlink to the project dir.
    Symlink,
    /// With a `./` segment and a trailing slash.
    DotSegment,
}

fn default_cwd() -> String {
    "project".to_string()
}

/// A provider/model route.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ModelRoute {
    pub provider: String,
    pub id: String,
}

impl Default for ModelRoute {
    fn default() -> Self {
        ModelRoute {
            provider: "deepseek-official".to_string(),
            id: "deepseek-chat".to_string(),
        }
    }
}

/// When the harness sends the driver `cancel` during a run.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum CancelOn {
    /// On the first event of this type the driver reports.
    Event(OnEvent),
    /// This long after the `run` request (scaled by `--time-scale`).
    AfterMs(CancelAfter),
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
/// The first event of this type the driver reports for a run.
pub struct OnEvent {
    pub event: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CancelAfter {
    pub after_ms: u64,
}

/// An expected outcome code: no `code` member (not checked), `"code": null` (no code may be
/// given) or `"code": "..."` (exactly that code).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ExpectedCode {
    #[default]
    Unchecked,
    Is(Option<String>),
}

impl ExpectedCode {
    pub fn is_unchecked(&self) -> bool {
        *self == ExpectedCode::Unchecked
    }
}

impl<'de> Deserialize<'de> for ExpectedCode {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Option::<String>::deserialize(deserializer).map(ExpectedCode::Is)
    }
}

impl Serialize for ExpectedCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ExpectedCode::Unchecked | ExpectedCode::Is(None) => serializer.serialize_none(),
            ExpectedCode::Is(Some(code)) => serializer.serialize_str(code),
        }
    }
}

/// Expectations of a `discover` step.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DiscoverExpect {
    /// Which of these expectations rest on an interpretation (docs/fixture-format.md).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub interpretations: Interpretations,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available: Option<bool>,
    #[serde(default, skip_serializing_if = "ExpectedCode::is_unchecked")]
    pub code: ExpectedCode,
    /// Codes that must each start some warning; `Some(vec![])`: no warning at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warnings: Option<Vec<String>>,
}

/// Expectations of a `models` step (spec 12).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ModelsExpect {
    /// Which of these expectations rest on an interpretation (docs/fixture-format.md).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub interpretations: Interpretations,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available: Option<bool>,
    #[serde(default, skip_serializing_if = "ExpectedCode::is_unchecked")]
    pub code: ExpectedCode,
    /// The catalog, in order, after the host's de-duplication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models: Option<Vec<CatalogModel>>,
}

/// One model of an expected catalog.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogModel {
    pub provider: String,
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasoning_options: Vec<CatalogEffort>,
}

/// One reasoning option of an expected catalog model.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogEffort {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub default: bool,
}

/// Expectations of a `setup` step.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SetupExpect {
    /// Which of these expectations rest on an interpretation (docs/fixture-format.md).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub interpretations: Interpretations,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    #[serde(default, skip_serializing_if = "ExpectedCode::is_unchecked")]
    pub code: ExpectedCode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installed: Option<bool>,
}

/// Which session a run must end up with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionExpect {
    New,
    Resumed,
    None,
}

/// What the host must have sent in its `execute`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ExecuteExpect {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<ResumeExpect>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResumeExpect {
    None,
    Previous,
}

/// A file the run must leave in its cwd.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FileExpect {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
}

/// Expectations of a `run` step.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RunExpect {
    /// Which of these expectations rest on an interpretation (docs/fixture-format.md).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub interpretations: Interpretations,
    /// Which of these expectations check another of the case's rules than its first.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rules: ExpectRules,
    /// The outcome status (the runtime's terminal statuses, `completed`/`cancelled`/`failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    #[serde(default, skip_serializing_if = "ExpectedCode::is_unchecked")]
    pub code: ExpectedCode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionExpect>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_include: Option<Vec<serde_json::Map<String, Value>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreign_frames: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execute: Option<ExecuteExpect>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_order: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_absent: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<BTreeMap<String, FileExpect>>,
    /// How the run may write a saved session mapping under `RUNTIME_DATA_DIR`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mapping_write: Option<MappingWrite>,
}

/// How a host may write a mapping it saved before (a run's `expect.mapping_write`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MappingWrite {
    /// Replaced whole (a new file renamed over it), never modified in place: a crash mid-save
    /// leaves the old mapping or the new one, never a torn file.
    Replace,
}

/// The on-disk shape of a step: every action member optional, checked into [`Step`].
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    discover: Option<EmptyObject>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    models: Option<EmptyObject>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    setup: Option<SetupAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    run: Option<RunStep>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    restart: Option<RestartAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    runtime_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    corrupt_session: Option<SessionAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    delete_session: Option<SessionAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    truncate_host_data: Option<EmptyObject>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    crash_mid_save: Option<RunStep>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    concurrent: Option<Vec<RawConcurrentRun>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expect: Option<Value>,
}

/// The on-disk shape of one run of a `concurrent` step.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawConcurrentRun {
    run: RunStep,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expect: Option<Value>,
}

fn parse_expect<T: serde::de::DeserializeOwned + Default>(
    step: &str,
    expect: Option<Value>,
) -> Result<T, String> {
    let Some(value) = expect else {
        return Ok(T::default());
    };
    if let Some(map) = value.get("interpretations") {
        let interpretations: Interpretations = serde_json::from_value(map.clone())
            .map_err(|e| format!("{step} step: invalid interpretations: {e}"))?;
        check_interpretations(step, &value, &interpretations)?;
    }
    serde_json::from_value(value).map_err(|e| format!("{step} step: invalid expect: {e}"))
}

impl RawStep {
    /// How many action members the step has (exactly one is valid).
    fn action_count(&self) -> usize {
        [
            self.discover.is_some(),
            self.models.is_some(),
            self.setup.is_some(),
            self.run.is_some(),
            self.restart.is_some(),
            self.runtime_version.is_some(),
            self.corrupt_session.is_some(),
            self.delete_session.is_some(),
            self.truncate_host_data.is_some(),
            self.crash_mid_save.is_some(),
            self.concurrent.is_some(),
        ]
        .iter()
        .filter(|present| **present)
        .count()
    }
}

impl TryFrom<RawStep> for Step {
    type Error = String;

    fn try_from(raw: RawStep) -> Result<Self, String> {
        let present = raw.action_count();
        let RawStep {
            discover,
            models,
            setup,
            run,
            restart,
            runtime_version,
            corrupt_session,
            delete_session,
            truncate_host_data,
            crash_mid_save,
            concurrent,
            expect,
        } = raw;
        if present != 1 {
            return Err(format!(
                "a step must have exactly one action member, found {present}"
            ));
        }
        let no_expect = |name: &str, expect: Option<Value>| match expect {
            None => Ok(()),
            Some(_) => Err(format!("a {name} step takes no expect")),
        };
        if discover.is_some() {
            return Ok(Step::Discover(parse_expect("discover", expect)?));
        }
        if models.is_some() {
            return Ok(Step::Models(parse_expect("models", expect)?));
        }
        if let Some(setup) = setup {
            return Ok(Step::Setup {
                bundle: setup.bundle,
                expect: parse_expect("setup", expect)?,
            });
        }
        if let Some(run) = run {
            return Ok(Step::Run {
                run,
                expect: Box::new(parse_expect("run", expect)?),
            });
        }
        if let Some(action) = restart {
            no_expect("restart", expect)?;
            return Ok(Step::Restart(action));
        }
        if truncate_host_data.is_some() {
            no_expect("truncate_host_data", expect)?;
            return Ok(Step::TruncateHostData);
        }
        if let Some(run) = crash_mid_save {
            no_expect("crash_mid_save", expect)?;
            return Ok(Step::CrashMidSave(run));
        }
        if let Some(runs) = concurrent {
            no_expect("concurrent", expect)?;
            return concurrent_step(runs);
        }
        if let Some(version) = runtime_version {
            no_expect("runtime_version", expect)?;
            return Ok(Step::RuntimeVersion(version));
        }
        if let Some(action) = corrupt_session {
            no_expect("corrupt_session", expect)?;
            return Ok(Step::CorruptSession {
                conversation: action.conversation,
            });
        }
        let action = delete_session
            .ok_or_else(|| "a step must have exactly one action member".to_string())?;
        no_expect("delete_session", expect)?;
        Ok(Step::DeleteSession {
            conversation: action.conversation,
        })
    }
}

impl From<Step> for RawStep {
    fn from(step: Step) -> RawStep {
        let to_value = |value: serde_json::Result<Value>| {
            value
                .ok()
                .filter(|v| v.as_object().is_some_and(|o| !o.is_empty()))
        };
        match step {
            Step::Discover(expect) => RawStep {
                discover: Some(EmptyObject {}),
                expect: to_value(serde_json::to_value(expect)),
                ..Default::default()
            },
            Step::Models(expect) => RawStep {
                models: Some(EmptyObject {}),
                expect: to_value(serde_json::to_value(expect)),
                ..Default::default()
            },
            Step::Setup { bundle, expect } => RawStep {
                setup: Some(SetupAction { bundle }),
                expect: to_value(serde_json::to_value(expect)),
                ..Default::default()
            },
            Step::Run { run, expect } => RawStep {
                run: Some(run),
                expect: to_value(serde_json::to_value(*expect)),
                ..Default::default()
            },
            Step::Restart(action) => RawStep {
                restart: Some(action),
                ..Default::default()
            },
            Step::TruncateHostData => RawStep {
                truncate_host_data: Some(EmptyObject {}),
                ..Default::default()
            },
            Step::CrashMidSave(run) => RawStep {
                crash_mid_save: Some(run),
                ..Default::default()
            },
            Step::Concurrent(runs) => RawStep {
                concurrent: Some(
                    runs.into_iter()
                        .map(|one| RawConcurrentRun {
                            run: one.run,
                            expect: to_value(serde_json::to_value(*one.expect)),
                        })
                        .collect(),
                ),
                ..Default::default()
            },
            Step::RuntimeVersion(version) => RawStep {
                runtime_version: Some(version),
                ..Default::default()
            },
            Step::CorruptSession { conversation } => RawStep {
                corrupt_session: Some(SessionAction { conversation }),
                ..Default::default()
            },
            Step::DeleteSession { conversation } => RawStep {
                delete_session: Some(SessionAction { conversation }),
                ..Default::default()
            },
        }
    }
}

/// A `concurrent` step from its runs: at least two, of different conversations, every run but
/// the first started by an event of the run before it (so the runtimes start in a known order).
fn concurrent_step(raw: Vec<RawConcurrentRun>) -> Result<Step, String> {
    if raw.len() < 2 {
        return Err(format!(
            "a concurrent step needs at least two runs, found {}",
            raw.len()
        ));
    }
    let mut runs = Vec::with_capacity(raw.len());
    for (index, one) in raw.into_iter().enumerate() {
        let step = format!("concurrent run {index}");
        match (index, &one.run.start_on) {
            (0, Some(_)) => return Err(format!("{step}: the first run takes no start_on")),
            (1.., None) => {
                return Err(format!(
                    "{step}: needs start_on (an event of the run before it)"
                ))
            }
            _ => {}
        }
        let expect: RunExpect = parse_expect(&step, one.expect)?;
        runs.push(ConcurrentRun {
            run: one.run,
            expect: Box::new(expect),
        });
    }
    let mut conversations: Vec<&str> = runs
        .iter()
        .map(|one| one.run.conversation.as_str())
        .collect();
    conversations.sort_unstable();
    if conversations.windows(2).any(|pair| pair[0] == pair[1]) {
        return Err("the runs of a concurrent step must be of different conversations".to_string());
    }
    Ok(Step::Concurrent(runs))
}

/// Whether `id` has the stable id shape `^[a-z0-9-]+(\.[a-z0-9-]+)+$`.
pub fn is_valid_id(id: &str) -> bool {
    let segments: Vec<&str> = id.split('.').collect();
    segments.len() >= 2
        && segments.iter().all(|segment| {
            !segment.is_empty()
                && segment
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

/// Parses a case from its file's text, checking the rules serde alone cannot.
pub fn parse_case(file: &Path, text: &str) -> Result<Case, FixtureError> {
    let error = |message: String| FixtureError {
        file: file.to_path_buf(),
        message,
    };
    let mut value: Value =
        serde_json::from_str(text).map_err(|e| error(format!("not valid JSON: {e}")))?;
    let runtime = take_runtime(&mut value).map_err(error)?;
    let mut case: Case =
        serde_json::from_value(value).map_err(|e| error(format!("not a fixture v1 case: {e}")))?;
    case.runtime = runtime;
    if case.v != 1 {
        return Err(error(format!(
            "unsupported fixture version v={} (this kit reads v=1)",
            case.v
        )));
    }
    if !is_valid_id(&case.id) {
        return Err(error(format!(
            "id {:?} does not match ^[a-z0-9-]+(\\.[a-z0-9-]+)+$",
            case.id
        )));
    }
    if let Some(stem) = file.file_stem().and_then(|stem| stem.to_str()) {
        if file.extension().is_some_and(|ext| ext == "json") && stem != case.id {
            return Err(error(format!(
                "file name {stem:?}.json does not match the case id {:?}",
                case.id
            )));
        }
    }
    if case.rules.is_empty() {
        return Err(error("a case must name at least one rule".to_string()));
    }
    if case.steps.is_empty() {
        return Err(error("a case must have at least one step".to_string()));
    }
    if case.timeout_ms == Some(0) {
        return Err(error("timeout_ms must be positive".to_string()));
    }
    for (index, step) in case.steps.iter().enumerate() {
        check_step_rules(index, step, &case.rules).map_err(error)?;
        let runs: Vec<&RunStep> = match step {
            Step::Run { run, .. } | Step::CrashMidSave(run) => vec![run],
            Step::Concurrent(runs) => runs.iter().map(|one| &one.run).collect(),
            _ => Vec::new(),
        };
        for run in runs {
            check_relative_cwd(&run.cwd)
                .map_err(|message| error(format!("step {index}: {message}")))?;
            if run.start_on.is_some() && !matches!(step, Step::Concurrent(_)) {
                return Err(error(format!(
                    "step {index}: start_on belongs to the runs of a concurrent step"
                )));
            }
        }
    }
    Ok(case)
}

/// Checks each `expect.rules` of step `index` against what its expect sets and `case_rules`.
fn check_step_rules(index: usize, step: &Step, case_rules: &[String]) -> Result<(), String> {
    let expects: Vec<&RunExpect> = match step {
        Step::Run { expect, .. } => vec![expect],
        Step::Concurrent(runs) => runs.iter().map(|one| &*one.expect).collect(),
        _ => Vec::new(),
    };
    for expect in expects
        .into_iter()
        .filter(|expect| !expect.rules.is_empty())
    {
        let value = serde_json::to_value(expect).map_err(|e| format!("step {index}: {e}"))?;
        check_expect_rules(
            &format!("step {index}: run"),
            &value,
            &expect.rules,
            case_rules,
        )?;
    }
    Ok(())
}

/// Takes the case's `runtime` out of its value, checked as fake-dsh checks it (the scenario schema
/// and its extra rules), so a broken scenario is the case file's error at load, naming the path of
/// every problem. No `runtime` is the default agent.
fn take_runtime(case: &mut Value) -> Result<Scenario, String> {
    let Some(runtime) = case.as_object_mut().and_then(|case| case.remove("runtime")) else {
        return Ok(Scenario::default());
    };
    if !runtime.is_object() {
        return Err("runtime must be a JSON object (a fake-dsh scenario)".to_string());
    }
    scenario::from_value(runtime).map_err(|problems| {
        format!(
            "runtime does not match {}:\n{}",
            scenario::SCENARIO_SCHEMA_PATH,
            scenario::list_problems(&problems, "/runtime")
        )
    })
}

fn check_relative_cwd(cwd: &str) -> Result<(), String> {
    let path = Path::new(cwd);
    let escapes = path
        .components()
        .any(|component| !matches!(component, std::path::Component::Normal(_)));
    if cwd.is_empty() || escapes {
        return Err(format!(
            "run cwd {cwd:?} must be a relative path inside the case root"
        ));
    }
    Ok(())
}

/// Reads and parses one case file.
pub fn load_case(file: &Path) -> Result<Case, FixtureError> {
    let text = std::fs::read_to_string(file).map_err(|e| FixtureError {
        file: file.to_path_buf(),
        message: format!("cannot read: {e}"),
    })?;
    parse_case(file, &text)
}

/// The directories of a fixtures dir that hold no host cases: stdout transcripts, and the client
/// corpus ([`crate::client_case`]).
pub const NOT_CASE_DIRS: &[&str] = &["transcripts", crate::client_case::CLIENTS_DIR];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_code_tells_absent_from_null_from_a_code() {
        let parse = |text: &str| serde_json::from_str::<SetupExpect>(text).unwrap().code;
        assert_eq!(parse("{}"), ExpectedCode::Unchecked);
        assert_eq!(parse(r#"{"code":null}"#), ExpectedCode::Is(None));
        assert_eq!(parse(r#"{"code":"X"}"#), ExpectedCode::Is(Some("X".into())));
    }

    fn parse(text: &str) -> Result<Case, FixtureError> {
        parse_case(Path::new("fixtures/strict/strict.example.json"), text)
    }

    const GOOD: &str = r#"{
      "v": 1, "id": "strict.example", "summary": "s", "spec": ["6"], "rules": ["s6.x"],
      "requires": ["cancel"],
      "runtime": {"stdio": [[{"ready": {}}]]},
      "steps": [
        {"discover": {}, "expect": {"available": true, "warnings": []}},
        {"models": {}, "expect": {"available": true, "models": [{"provider": "p", "id": "m", "reasoning_options": [{"id": "high", "default": true}]}]}},
        {"setup": {"bundle": "tampered"}, "expect": {"ok": false, "code": "DSH_PROFILE_BUNDLE_HASH_MISMATCH"}},
        {"run": {"conversation": "c1", "prompt": "Create", "cancel_on": {"event": "text_delta"}},
         "expect": {"status": "cancelled", "events": ["status"], "events_include": [{"type": "status"}],
                    "execute": {"resume": "none", "bootstrap": true}, "files": {"index.html": {"contains": "<"}}}},
        {"restart": {}},
        {"restart": {"kill": true}},
        {"runtime_version": "0.1.8"},
        {"corrupt_session": {"conversation": "c1"}},
        {"run": {"conversation": "c1", "prompt": "Again", "cwd": "other", "model": {"provider": "p", "id": "m"},
                 "cancel_on": {"after_ms": 200}},
         "expect": {"mapping_write": "replace", "interpretations": {"mapping_write": "I-C28"}}}
      ]
    }"#;

    #[test]
    fn loads_every_step_kind() {
        let case = parse(GOOD).expect("loads");
        assert_eq!(case.requires, vec![Capability::Cancel]);
        assert_eq!(case.steps.len(), 9);
        let Step::Models(models) = &case.steps[1] else {
            panic!("not a models step")
        };
        let catalog = models.models.as_deref().unwrap_or_default();
        assert_eq!(catalog.len(), 1);
        assert!(catalog[0].reasoning_options[0].default);
        assert!(matches!(
            case.steps[2],
            Step::Setup {
                bundle: BundleKind::Tampered,
                ..
            }
        ));
        let Step::Run { run, expect } = &case.steps[3] else {
            panic!("not a run step")
        };
        assert_eq!(run.cwd, "project");
        assert_eq!(run.model, ModelRoute::default());
        assert_eq!(
            run.cancel_on,
            Some(CancelOn::Event(OnEvent {
                event: "text_delta".into()
            }))
        );
        assert_eq!(expect.status, Some(Status::Cancelled));
        assert!(matches!(
            case.steps[5],
            Step::Restart(RestartAction {
                kill: true,
                fresh_data_dir: false
            })
        ));
        let Step::Run { run, expect } = &case.steps[8] else {
            panic!("not a run step")
        };
        assert_eq!(expect.mapping_write, Some(MappingWrite::Replace));
        assert_eq!(
            run.cancel_on,
            Some(CancelOn::AfterMs(CancelAfter { after_ms: 200 }))
        );
        assert_eq!(case.timeout_ms(), DEFAULT_TIMEOUT_MS);
        assert!(case.profile_installed());
    }

    #[test]
    fn round_trips_through_serde() {
        let case = parse(GOOD).expect("loads");
        let text = serde_json::to_string(&case).expect("serializes");
        assert_eq!(parse(&text).expect("reloads"), case);
    }

    #[test]
    fn every_corpus_case_written_back_matches_the_fixture_schema_and_loads_the_same() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
        let mut checked = 0;
        for area in std::fs::read_dir(&fixtures).unwrap() {
            let area = area.unwrap().path();
            if !area.is_dir() || NOT_CASE_DIRS.iter().any(|dir| area.ends_with(dir)) {
                continue;
            }
            for file in std::fs::read_dir(&area).unwrap() {
                let file = file.unwrap().path();
                if file.extension().is_none_or(|ext| ext != "json") {
                    continue;
                }
                let case = load_case(&file).unwrap_or_else(|error| panic!("{error}"));
                let written = serde_json::to_value(&case).unwrap();
                let checked_schema =
                    dsh_protocol::schema::validate("fixture.schema.json", &written);
                assert!(
                    checked_schema.is_ok(),
                    "{}: {checked_schema:?}",
                    file.display()
                );
                assert_eq!(parse_case(&file, &written.to_string()).unwrap(), case);
                checked += 1;
            }
        }
        assert!(checked > 200, "only {checked} cases found");
    }

    #[test]
    fn rejects_what_the_format_forbids() {
        let with = |from: &str, to: &str| GOOD.replacen(from, to, 1);
        let cases = [
            (
                with("\"v\": 1,", "\"v\": 1, \"extra\": 1,"),
                "unknown field",
            ),
            (
                with("{\"restart\": {}}", "{\"restart\": {}, \"discover\": {}}"),
                "exactly one action",
            ),
            (
                with("{\"restart\": {}}", "{\"restart\": {}, \"expect\": {}}"),
                "takes no expect",
            ),
            (
                with("\"available\": true", "\"availble\": true"),
                "invalid expect",
            ),
            (with("\"strict.example\"", "\"Strict\""), "does not match"),
            (with("\"strict.example\"", "\"strict.other\""), "file name"),
            (with("\"tampered\"", "\"broken\""), "unknown variant"),
            (with("\"after_ms\": 200", "\"after\": 200"), "not a fixture"),
            (
                with("\"cwd\": \"other\"", "\"cwd\": \"../escape\""),
                "inside the case root",
            ),
            (
                with("\"v\": 1,", "\"v\": 2,"),
                "unsupported fixture version",
            ),
            ("[1".to_string(), "not valid JSON"),
            (
                with("{\"ready\": {}}", "{\"ready\": {}, \"hang\": {}}"),
                "/runtime/stdio/0/0",
            ),
            (
                with("\"runtime\": {", "\"runtime\": {\"profil\": \"missing\", "),
                "runtime does not match scenario.schema.json",
            ),
        ];
        for (text, needle) in cases {
            let error = parse(&text).expect_err(needle);
            assert!(
                error.to_string().contains(needle),
                "{needle:?} not in {error}"
            );
            assert!(
                error
                    .to_string()
                    .starts_with("fixtures/strict/strict.example.json: "),
                "{error}"
            );
        }
    }

    #[test]
    fn a_concurrent_step_needs_two_runs_of_different_conversations_each_started_by_an_event() {
        let case = |steps: &str| {
            format!(
                r#"{{"v": 1, "id": "strict.example", "summary": "s", "spec": ["10"], "rules": ["s10.x"],
                    "steps": [{steps}]}}"#
            )
        };
        let run = |conversation: &str, start: &str| {
            format!(
                r#"{{"run": {{"conversation": "{conversation}", "prompt": "p"{start}}}, "expect": {{"status": "completed"}}}}"#
            )
        };
        let start = r#", "start_on": {"event": "text_delta"}"#;
        let good = case(&format!(
            r#"{{"concurrent": [{}, {}]}}"#,
            run("c1", ""),
            run("c2", start)
        ));
        let loaded = parse(&good).expect("a good concurrent step");
        let Step::Concurrent(runs) = &loaded.steps[0] else {
            panic!("not concurrent: {:?}", loaded.steps[0]);
        };
        assert_eq!(runs.len(), 2);
        assert_eq!(
            runs[1].run.start_on.as_ref().map(|on| on.event.as_str()),
            Some("text_delta")
        );
        assert_eq!(runs[1].expect.status, Some(Status::Completed));
        let round_trip: Value = serde_json::to_value(&loaded.steps[0]).expect("serializes");
        assert_eq!(
            round_trip["concurrent"][1]["run"]["start_on"]["event"],
            "text_delta"
        );

        let bad = [
            (
                format!(r#"{{"concurrent": [{}]}}"#, run("c1", "")),
                "at least two runs",
            ),
            (
                format!(
                    r#"{{"concurrent": [{}, {}]}}"#,
                    run("c1", ""),
                    run("c2", "")
                ),
                "needs start_on",
            ),
            (
                format!(
                    r#"{{"concurrent": [{}, {}]}}"#,
                    run("c1", start),
                    run("c2", start)
                ),
                "first run takes no start_on",
            ),
            (
                format!(
                    r#"{{"concurrent": [{}, {}]}}"#,
                    run("c1", ""),
                    run("c1", start)
                ),
                "different conversations",
            ),
            (
                run("c1", start),
                "start_on belongs to the runs of a concurrent step",
            ),
        ];
        for (steps, needle) in bad {
            let error = parse(&case(&steps)).expect_err(needle).to_string();
            assert!(error.contains(needle), "{needle:?} not in {error}");
        }
    }

    #[test]
    fn routes_parse_as_the_picker_writes_them() {
        let model = |provider: &str, id: &str| {
            RouteChoice::Model(ModelRoute {
                provider: provider.into(),
                id: id.into(),
            })
        };
        assert_eq!(parse_route("default"), RouteChoice::Default);
        assert_eq!(parse_route("p/m"), model("p", "m"));
        assert_eq!(parse_route("p/org/m"), model("p", "org/m"));
        for bad in ["m", "/m", "p/", "p /m", "", "Default"] {
            assert_eq!(
                parse_route(bad),
                RouteChoice::Invalid(bad.into()),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn expect_rules_name_a_set_member_and_one_of_the_cases_rules() {
        let case = |rules: &str| {
            format!(
                r#"{{"v": 1, "id": "strict.example", "summary": "s", "spec": ["7"],
                "rules": ["s7.a", "s7.b"], "steps": [{{"run": {{"conversation": "c1", "prompt": "p"}},
                "expect": {{"session": "new", "rules": {rules}}}}}]}}"#
            )
        };
        let loaded = parse(&case(r#"{"session": "s7.b"}"#)).expect("loads");
        let Step::Run { expect, .. } = &loaded.steps[0] else {
            panic!("not a run step")
        };
        assert_eq!(
            expect.rules.get("session").map(String::as_str),
            Some("s7.b")
        );
        let unknown = parse(&case(r#"{"session": "s7.c"}"#)).unwrap_err();
        assert!(
            unknown.message.contains("not one of the case's rules"),
            "{unknown}"
        );
        let unset = parse(&case(r#"{"status": "s7.b"}"#)).unwrap_err();
        assert!(unset.message.contains("does not set"), "{unset}");
    }

    #[test]
    fn id_shape() {
        assert!(is_valid_id("cancel.grandchild-ignores-sigterm"));
        assert!(is_valid_id("a.b.c"));
        assert!(!is_valid_id("cancel"));
        assert!(!is_valid_id("cancel."));
        assert!(!is_valid_id("Cancel.x"));
        assert!(is_valid_id("replay.first-turn"));
        assert!(!is_valid_id("replay"));
        assert!(!is_valid_id("Replay.x"));
        assert!(!is_valid_id("replay..x"));
    }
}
