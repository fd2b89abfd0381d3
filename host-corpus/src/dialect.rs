//! Dialects: a host's documented variant of the stdio protocol, judged by the same corpus
//! (docs/dialects.md). A dialect is data shipped with the kit (`host-corpus/dialects/<name>.json`,
//! checked against `schemas/dialect.schema.json`): the profile the world installs and the runtime
//! is launched with, a mode for each rule group it does not judge strictly, and its policies.
//! `opendesign`, the default, is generation 1 as written: every rule strict, nothing adapted.
//!
//! What a mode does:
//! - `strict`: as generation 1.
//! - `lenient`: the case's own expectations of a run are judged as if the offending line were
//!   absent: the status is the one the runtime's last well-formed `result` for the run gives (none:
//!   `failed`; a line over the dialect's frame-size bound ends the stream), and the run's events
//!   must include those of the scripted good frames, in order. A discover step is judged by the
//!   dialect's discovery policy. The global checks (reaping, execute after ready, credentials)
//!   stay strict, and a driver that dies or breaks its contract on junk still fails.
//! - `not-applicable`: a finding on the rule is dropped with a note; a case left with nothing but
//!   such notes is `skipped`, its reason the dialect's source.
//!
//! No dialect may relax [`NEVER_RELAXED`]: process ownership, credentials, the terminal result.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::checks::Violation;
use crate::verdict::{Finding, FindingKind, RULE_NEW_PROCESS_PER_TURN};
use dsh_engine::journal::Entry;
use dsh_formats::case::{
    Case, DiscoverExpect, ExpectedCode, ResumeExpect, RunExpect, SessionExpect,
};
use dsh_formats::scenario::{Action, FrameAnswer, ProfileState, VersionAnswer};
use dsh_protocol::frames::Status;

/// The dialect schema's path among the schemas `dsh-protocol` embeds.
pub const DIALECT_SCHEMA_PATH: &str = "dialect.schema.json";
/// The default dialect: generation 1 as written.
pub const DEFAULT_DIALECT: &str = "opendesign";

/// The dialects the kit ships, by name, as embedded data.
const SHIPPED: &[(&str, &str)] = &[
    ("opendesign", include_str!("../dialects/opendesign.json")),
    ("multica", include_str!("../dialects/multica.json")),
];

/// Rules no dialect may relax: the host owns and reaps what it started, never leaks a
/// credential or a prompt, and never reports success without a terminal result.
pub const NEVER_RELAXED: &[&str] = &[
    "s10.process-tree-reaped",
    "s10.owned-processes-force-killed",
    "s10.no-kill-other-runtime",
    "s10.cancel-current-run-only",
    "s7.cancelled-child-reaped",
    "s6.host-reaps-after-result",
    "s14.no-credential-leak",
    "s14.no-prompt-in-stderr",
    "s14.credential-api-closed",
    "s6.no-secret-logging",
    "s6.exit-not-success",
    "s6.eof-not-success",
    "s6.idle-not-success",
    "s6.text-not-success",
    "s6.driver-reply-valid",
];

/// How a dialect judges a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    Strict,
    Lenient,
    NotApplicable,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ProfileSpec {
    pub name: String,
    pub runtime_id: String,
    pub stand_in_manifest: Value,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ModeGroup {
    pub group: String,
    pub rules: Vec<String>,
    pub mode: Mode,
    /// A driver capability: a host that claims it is judged strictly on these rules (see
    /// [`Dialect::for_claims`]).
    #[serde(default)]
    pub unless_claimed: Option<String>,
    pub source: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Policies {
    #[serde(default)]
    pub discovery: Option<DiscoveryPolicy>,
    #[serde(default)]
    pub frame_size_bound: Option<FrameSizeBound>,
    #[serde(default)]
    pub stdin: Option<StdinPolicy>,
    #[serde(default)]
    pub session: Option<SessionPolicy>,
    #[serde(default)]
    pub unreported: Vec<Unreported>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct DiscoveryPolicy {
    pub version: String,
    pub probe: String,
    pub source: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct FrameSizeBound {
    pub bytes: u64,
    pub source: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct StdinPolicy {
    pub closed_after_result: bool,
    pub source: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SessionPolicy {
    pub fresh_retry_after_rejected_resume: bool,
    pub source: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Unreported {
    pub field: String,
    pub source: String,
}

/// One dialect, as its data file says.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Dialect {
    pub v: u64,
    pub name: String,
    pub summary: String,
    pub profile: ProfileSpec,
    pub modes: Vec<ModeGroup>,
    pub policies: Policies,
}

/// The generation-1 frame-size bound (the kit's 1 MiB), for a dialect without its own.
const GEN1_FRAME_BOUND: u64 = 1024 * 1024;

impl Dialect {
    /// The names `--dialect` accepts.
    pub fn names() -> Vec<&'static str> {
        SHIPPED.iter().map(|(name, _)| *name).collect()
    }

    /// The shipped dialect of this name.
    pub fn named(name: &str) -> Result<Arc<Dialect>, String> {
        static LOADED: OnceLock<Vec<Result<Arc<Dialect>, String>>> = OnceLock::new();
        let loaded = LOADED.get_or_init(|| {
            SHIPPED
                .iter()
                .map(|(name, text)| parse(name, text).map(Arc::new))
                .collect()
        });
        let index = SHIPPED
            .iter()
            .position(|(shipped, _)| *shipped == name)
            .ok_or_else(|| {
                format!(
                    "unknown dialect {name:?}: the kit ships {}",
                    Dialect::names().join(", ")
                )
            })?;
        loaded[index].clone()
    }

    /// The default dialect (generation 1).
    pub fn gen1() -> Arc<Dialect> {
        Dialect::named(DEFAULT_DIALECT).expect("the embedded opendesign dialect is valid")
    }

    /// Whether this dialect judges nothing differently from generation 1.
    pub fn is_gen1(&self) -> bool {
        self.modes.iter().all(|group| group.mode == Mode::Strict)
            && self.policies == Policies::default()
    }

    /// This dialect as it judges a host claiming `claimed` (its handshake's capabilities): a
    /// group that holds `unless_claimed` a capability the host claims is strict (a host that
    /// offers what the dialect's own host lacks, bundle installation under Multica, is judged on
    /// it). Borrowed when nothing changes.
    pub fn for_claims(&self, claimed: &[String]) -> Cow<'_, Dialect> {
        let claims = |group: &ModeGroup| {
            group.mode != Mode::Strict
                && group
                    .unless_claimed
                    .as_ref()
                    .is_some_and(|capability| claimed.contains(capability))
        };
        if !self.modes.iter().any(claims) {
            return Cow::Borrowed(self);
        }
        let mut judged = self.clone();
        for group in judged.modes.iter_mut().filter(|group| claims(group)) {
            group.mode = Mode::Strict;
        }
        Cow::Owned(judged)
    }

    /// The mode of `rule`, and the group that sets it (none: strict by default).
    pub fn mode(&self, rule: &str) -> (Mode, Option<&ModeGroup>) {
        self.modes
            .iter()
            .find(|group| group.rules.iter().any(|listed| listed == rule))
            .map_or((Mode::Strict, None), |group| (group.mode, Some(group)))
    }

    fn unreported(&self, field: &str) -> bool {
        self.policies
            .unreported
            .iter()
            .any(|unreported| unreported.field == field)
    }

    fn frame_bound(&self) -> u64 {
        self.policies
            .frame_size_bound
            .as_ref()
            .map_or(GEN1_FRAME_BOUND, |bound| bound.bytes)
    }

    /// A run step's expectations as this dialect judges them, over `entries` (the run's own
    /// journal entries: the `--stdio` processes it started, and the script each played);
    /// `after_retry`: the conversation's previous run was a fresh-session retry (the session
    /// policy), so this run resumes the retry's session.
    pub fn run_expect<'e>(
        &self,
        case: &Case,
        expect: &'e RunExpect,
        entries: &[Entry],
        after_retry: bool,
    ) -> RunJudgement<'e> {
        if self.is_gen1() {
            return RunJudgement {
                expect: Cow::Borrowed(expect),
                fresh_retry: false,
            };
        }
        let starts = stdio_starts(entries);
        let invocation = starts.first().and_then(|start| invocation_of(start));
        let retry = self.fresh_retry(entries, &starts);
        let mut adapted = expect.clone();
        if self
            .policies
            .stdin
            .as_ref()
            .is_some_and(|stdin| !stdin.closed_after_result)
        {
            // A runtime that waits for stdin to close is then met with the host's signal: a
            // case that relied on the close no longer forbids it.
            let relied = adapted
                .journal_order
                .as_ref()
                .is_some_and(|order| order.iter().any(|token| token == "stdin_closed"));
            if let Some(order) = &mut adapted.journal_order {
                order.retain(|token| token != "stdin_closed");
            }
            if let (true, Some(absent)) = (relied, &mut adapted.journal_absent) {
                absent.retain(|token| token != "signal:SIGTERM");
            }
        }
        if self.unreported("foreign_frames") {
            adapted.foreign_frames = None;
        }
        if self.unreported("tool_result.isError") {
            for pattern in adapted.events_include.iter_mut().flatten() {
                if pattern.get("type").and_then(Value::as_str) == Some("tool_result") {
                    pattern.remove("isError");
                    pattern.remove("is_error");
                }
            }
        }
        if self.mode(case.first_rule()).0 == Mode::Lenient {
            let script = script_of(case, invocation);
            if let Some(derived) = lenient_outcome(script, self.frame_bound()) {
                adapted.status = Some(derived.status);
                adapted.code = ExpectedCode::Unchecked;
                adapted.session = None;
                adapted.events = None;
                adapted.foreign_frames = None;
                adapted.events_include = Some(
                    derived
                        .events
                        .iter()
                        .map(|kind| {
                            let mut pattern = Map::new();
                            pattern.insert("type".to_string(), Value::from(*kind));
                            pattern
                        })
                        .collect(),
                );
                for member in ["status", "code", "session", "events", "events_include"] {
                    adapted.interpretations.remove(member);
                }
            }
        }
        if let Some(retry) = retry {
            // The run is judged by its retry: a new session, the retry script's outcome; its
            // first process (the rejected resume) is what `execute` expectations see.
            let derived = lenient_outcome(script_of(case, retry), self.frame_bound());
            adapted.status = Some(derived.map_or(Status::Completed, |derived| derived.status));
            adapted.code = ExpectedCode::Unchecked;
            adapted.session = Some(SessionExpect::New);
            adapted.events = None;
            adapted.events_include = None;
            for member in ["status", "code", "session", "events", "events_include"] {
                adapted.interpretations.remove(member);
            }
        } else if after_retry {
            // Where generation 1 starts afresh after a rejected resume, the retry's session is
            // the conversation's now, and this run resumes it.
            if adapted.session == Some(SessionExpect::New) {
                adapted.session = Some(SessionExpect::Resumed);
            }
            if let Some(execute) = &mut adapted.execute {
                if execute.resume == Some(ResumeExpect::None) {
                    execute.resume = Some(ResumeExpect::Previous);
                }
                if execute.bootstrap == Some(true) {
                    execute.bootstrap = Some(false);
                }
            }
        }
        RunJudgement {
            expect: Cow::Owned(adapted),
            fresh_retry: retry.is_some(),
        }
    }

    /// The invocation of a fresh-session retry in `entries`, under the session policy: exactly
    /// two `--stdio` processes, the first sent a resume and failed with an error and no tool call
    /// (`daemon.go` shouldRetryWithFreshSession), the second resumes nothing.
    fn fresh_retry(&self, entries: &[Entry], starts: &[&Entry]) -> Option<Option<u64>> {
        let policy = self.policies.session.as_ref()?;
        if !policy.fresh_retry_after_rejected_resume {
            return None;
        }
        let [first, second] = starts else {
            return None;
        };
        let of = |start: &Entry| -> Vec<&Entry> {
            entries
                .iter()
                .filter(|entry| entry.pid().is_some() && entry.pid() == start.pid())
                .collect()
        };
        let resume_of = |process: &[&Entry]| -> Option<String> {
            process
                .iter()
                .find(|entry| entry.token() == "command:execute")
                .and_then(|entry| entry.command())
                .and_then(|command| command.get("resume_session_id"))
                .and_then(Value::as_str)
                .filter(|id| !id.is_empty())
                .map(str::to_string)
        };
        let (rejected, retried) = (of(first), of(second));
        let failed = rejected
            .iter()
            .any(|entry| entry.token() == "frame:result" && entry.frame_code().is_some());
        let tool = rejected
            .iter()
            .any(|entry| entry.token() == "frame:tool_call");
        let fresh = retried
            .iter()
            .any(|entry| entry.token() == "command:execute")
            && resume_of(&retried).is_none();
        (resume_of(&rejected).is_some() && failed && !tool && fresh).then(|| invocation_of(second))
    }

    /// A discover step's expectations as this dialect judges them: under a lenient rule, the
    /// availability its discovery policy gives the scripted answers, no code or warning checked.
    pub fn discover_expect<'e>(
        &self,
        case: &Case,
        expect: &'e DiscoverExpect,
    ) -> Cow<'e, DiscoverExpect> {
        let Some(policy) = &self.policies.discovery else {
            return Cow::Borrowed(expect);
        };
        if self.mode(case.first_rule()).0 != Mode::Lenient {
            return Cow::Borrowed(expect);
        }
        let mut adapted = expect.clone();
        adapted.available = Some(discoverable(case, policy, &self.profile));
        adapted.code = ExpectedCode::Unchecked;
        adapted.warnings = None;
        for member in ["available", "code", "warnings"] {
            adapted.interpretations.remove(member);
        }
        Cow::Owned(adapted)
    }

    /// The findings this dialect keeps, and a note for each it drops (its rule is
    /// not-applicable). The kit's and the driver contract's findings are always kept.
    pub fn filter(&self, findings: &[Finding]) -> (Vec<Finding>, Vec<String>) {
        let mut kept = Vec::new();
        let mut notes = Vec::new();
        for finding in findings {
            let droppable = !matches!(finding.kind, FindingKind::Kit | FindingKind::HostFatal);
            match self.mode(&finding.rule) {
                (Mode::NotApplicable, Some(group)) if droppable => notes.push(format!(
                    "not applicable under the {} dialect: {} ({}: {}); dropped: {}",
                    self.name, finding.rule, group.group, group.source, finding.why
                )),
                _ => kept.push(finding.clone()),
            }
        }
        (kept, notes)
    }
}

/// A run's expectations under a dialect, and whether the run was a fresh-session retry.
pub struct RunJudgement<'e> {
    pub expect: Cow<'e, RunExpect>,
    pub fresh_retry: bool,
}

impl RunJudgement<'_> {
    /// The global checks' violations this judgement keeps: a fresh-session retry is the session
    /// policy's second process, not a second process for one turn.
    pub(crate) fn keep(&self, violations: &mut Vec<Violation>) {
        if self.fresh_retry {
            violations.retain(|violation| violation.rule != RULE_NEW_PROCESS_PER_TURN);
        }
    }
}

/// The `start` entries of `--stdio` processes.
fn stdio_starts(entries: &[Entry]) -> Vec<&Entry> {
    entries
        .iter()
        .filter(|entry| entry.event() == "start")
        .filter(|entry| {
            entry
                .argv()
                .is_some_and(|argv| argv.iter().any(|arg| arg == "--stdio"))
        })
        .collect()
}

/// fake-dsh's invocation index of a `--stdio` process (its script in the scenario's `stdio`).
fn invocation_of(start: &Entry) -> Option<u64> {
    start.to_json()["invocation"].as_u64()
}

/// Parses and checks one shipped dialect.
fn parse(name: &str, text: &str) -> Result<Dialect, String> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("dialect {name}: not JSON: {e}"))?;
    dsh_protocol::schema::validate(DIALECT_SCHEMA_PATH, &value).map_err(|errors| {
        let errors: Vec<String> = errors.iter().map(|e| format!("{e:?}")).collect();
        format!(
            "dialect {name} does not match {DIALECT_SCHEMA_PATH}: {}",
            errors.join("; ")
        )
    })?;
    let dialect: Dialect =
        serde_json::from_value(value).map_err(|e| format!("dialect {name}: {e}"))?;
    if dialect.name != name {
        return Err(format!("dialect {name} is named {:?}", dialect.name));
    }
    for group in &dialect.modes {
        for rule in &group.rules {
            if group.mode != Mode::Strict && NEVER_RELAXED.contains(&rule.as_str()) {
                return Err(format!(
                    "dialect {name} relaxes {rule}, which no dialect may relax"
                ));
            }
            let listed = dialect
                .modes
                .iter()
                .flat_map(|group| &group.rules)
                .filter(|listed| *listed == rule)
                .count();
            if listed > 1 {
                return Err(format!("dialect {name} gives {rule} more than one mode"));
            }
        }
    }
    Ok(dialect)
}

/// The script the run's `--stdio` process played (none: the default agent).
fn script_of(case: &Case, invocation: Option<u64>) -> Option<&[Action]> {
    let runtime = &case.runtime;
    let scripted = invocation
        .and_then(|index| usize::try_from(index).ok())
        .and_then(|index| runtime.stdio.get(index));
    scripted
        .or(runtime.stdio_default.as_ref())
        .map(Vec::as_slice)
}

/// What a lenient judgement expects of a run: its status and the event types of its good frames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Derived {
    pub status: Status,
    pub events: Vec<&'static str>,
}

/// Walks a script as a lenient host reads it; `None` when the outcome depends on the host (a
/// cancel, a branch on the execute), so the case's own expectations stand.
pub fn lenient_outcome(script: Option<&[Action]>, bound: u64) -> Option<Derived> {
    let Some(script) = script else {
        return Some(Derived {
            status: Status::Completed,
            events: Vec::new(),
        });
    };
    let mut walk = Walk::default();
    walk.actions(script, bound);
    // At EOF a line without its line end still counts (Go's bufio.Scanner hands it over).
    let last = std::mem::take(&mut walk.pending);
    if let (false, Ok(Value::Object(frame))) = (walk.stopped, serde_json::from_str(last.trim())) {
        walk.frame(&frame);
    }
    if walk.unknown {
        return None;
    }
    let status = match walk.status.as_deref() {
        Some("completed") => Status::Completed,
        Some("cancelled") => Status::Cancelled,
        _ => Status::Failed,
    };
    Some(Derived {
        status,
        events: walk.events,
    })
}

#[derive(Default)]
struct Walk {
    /// A well-formed `ready` came before the host was to write `execute`.
    ready: bool,
    status: Option<String>,
    events: Vec<&'static str>,
    /// Raw bytes written after the last line end: they start the next line.
    pending: String,
    unknown: bool,
    stopped: bool,
}

/// A request id another request's frame carries (absent, empty or the active one's is ours).
fn foreign(request_id: Option<&str>) -> bool {
    request_id.is_some_and(|id| !id.is_empty() && id != "{{request_id}}")
}

impl Walk {
    fn actions(&mut self, actions: &[Action], bound: u64) {
        for action in actions {
            if self.stopped || self.unknown {
                return;
            }
            self.action(action, bound);
        }
    }

    fn action(&mut self, action: &Action, bound: u64) {
        // Every frame-writing action but raw bytes, which may hold several lines or none.
        let one_frame =
            action.is_frame_writing() && !matches!(action, Action::Raw(_) | Action::RawBase64(_));
        if one_frame && !std::mem::take(&mut self.pending).trim().is_empty() {
            // Glued to bytes that are no frame (a BOM, a log fragment): the line is lost.
            return;
        }
        match action {
            Action::Thinking(content) if !content.is_empty() => self.events.push("thinking_delta"),
            Action::Text(content) if !content.is_empty() => self.events.push("text_delta"),
            Action::ToolCall(spec)
                if !foreign(spec.request_id.as_deref())
                    && spec.arguments.as_ref().is_none_or(Value::is_string) =>
            {
                self.events.push("tool_use")
            }
            Action::ToolResult(spec) if !foreign(spec.request_id.as_deref()) => {
                self.events.push("tool_result")
            }
            Action::Result(spec) if !foreign(spec.request_id.as_deref()) => {
                self.status = Some(spec.status.clone().unwrap_or_else(|| "completed".into()));
            }
            Action::Ready(_) => self.ready = true,
            // A host that waits for ready never writes execute: the run fails.
            Action::ReadExecute(_) if !self.ready => self.stopped = true,
            Action::Agent(_) => {
                self.ready = true;
                self.status = Some("completed".to_string())
            }
            Action::Frame(frame) => self.frame(frame),
            Action::Raw(text) => {
                let text = std::mem::take(&mut self.pending) + text;
                let mut lines: Vec<&str> = text.split('\n').collect();
                let rest = lines.pop().unwrap_or_default();
                for line in lines {
                    if line.len() as u64 > bound {
                        self.stopped = true;
                        return;
                    }
                    if let Ok(Value::Object(frame)) = serde_json::from_str(line.trim()) {
                        self.frame(&frame);
                    }
                }
                self.pending = rest.to_string();
            }
            Action::TextLine(spec) => match spec.bytes as u64 > bound {
                true => self.stopped = true,
                false => self.events.push("text_delta"),
            },
            Action::Repeat(spec) if spec.bytes > bound => self.stopped = true,
            Action::Drip(spec) => self.action(&spec.action, bound),
            Action::Coalesce(actions) => self.actions(actions, bound),
            Action::OnExecute(_) | Action::WaitCancel(_) | Action::ResultOnCancel(_) => {
                self.unknown = true
            }
            Action::Exit(_) | Action::Hang(_) => self.stopped = true,
            _ => {}
        }
    }

    /// A frame written whole: only a well-formed `result` of this request changes the outcome.
    fn frame(&mut self, frame: &Map<String, Value>) {
        let is_v1 = frame.get("v").and_then(Value::as_u64) == Some(1);
        if is_v1 && frame.get("type").and_then(Value::as_str) == Some("ready") {
            self.ready = true;
        }
        let is_result = frame.get("type").and_then(Value::as_str) == Some("result");
        let request_id = match frame.get("request_id") {
            None | Some(Value::Null) => None,
            Some(Value::String(id)) => Some(id.as_str()),
            Some(_) => return,
        };
        if let (true, true, false, Some(status)) = (
            is_v1,
            is_result,
            foreign(request_id),
            frame.get("status").and_then(Value::as_str),
        ) {
            self.status = Some(status.to_string());
        }
    }
}

/// Whether discovery finds the runtime under `policy`: `--version` exits 0, the profile is
/// installed, and the probe exits 0 with one line of v 1, type probe, `runtime_id`,
/// protocol_version 1.
fn discoverable(case: &Case, policy: &DiscoveryPolicy, profile: &ProfileSpec) -> bool {
    let runtime_id = profile.runtime_id.as_str();
    let runtime = &case.runtime;
    let version_ok = match &runtime.version {
        Some(VersionAnswer::Raw(raw)) if policy.version == "exit-zero" => {
            raw.exit.unwrap_or(0) == 0
        }
        _ => true,
    };
    let installed = runtime.profile != Some(ProfileState::Missing);
    let probe_ok = match &runtime.probe {
        None => true,
        Some(FrameAnswer::Patch(patch)) => {
            let mut frame = serde_json::json!({
                "v": 1, "type": "probe", "runtime": runtime_id, "protocol_version": 1
            });
            merge_patch(&mut frame, &patch.patch);
            probe_line_ok(&frame, runtime_id)
        }
        Some(FrameAnswer::Raw(raw)) => {
            raw.exit.unwrap_or(0) == 0
                && raw.stdout.as_deref().unwrap_or("").split('\n').any(|line| {
                    let line = line
                        .replace("{{runtime_id}}", runtime_id)
                        .replace("{{profile}}", &profile.name);
                    serde_json::from_str::<Value>(line.trim())
                        .is_ok_and(|frame| probe_line_ok(&frame, runtime_id))
                })
        }
    };
    version_ok && installed && probe_ok
}

fn probe_line_ok(frame: &Value, runtime_id: &str) -> bool {
    frame.get("v").and_then(Value::as_u64) == Some(1)
        && frame.get("type").and_then(Value::as_str) == Some("probe")
        && frame.get("runtime").and_then(Value::as_str) == Some(runtime_id)
        && frame.get("protocol_version").and_then(Value::as_u64) == Some(1)
}

/// RFC 7386 merge patch, as fake-dsh applies a scenario's `patch`.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target) = target else {
        return;
    };
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
        } else {
            merge_patch(target.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_shipped_dialect_loads_and_opendesign_is_gen1() {
        for name in Dialect::names() {
            Dialect::named(name).unwrap_or_else(|e| panic!("{e}"));
        }
        assert!(Dialect::gen1().is_gen1());
        let multica = Dialect::named("multica").expect("multica");
        assert!(!multica.is_gen1());
        assert_eq!(multica.profile.name, "multica");
        assert_eq!(multica.profile.runtime_id, "dsh");
        assert!(Dialect::named("nope")
            .unwrap_err()
            .contains("opendesign, multica"));
    }

    #[test]
    fn every_rule_a_dialect_names_is_in_the_catalog_and_never_relaxed_ones_are_refused() {
        let catalog: Value = serde_json::from_str(include_str!("../../fixtures/rules.json"))
            .expect("the rule catalog");
        let ids: Vec<&str> = catalog["rules"]
            .as_array()
            .expect("rules")
            .iter()
            .filter_map(|rule| rule["id"].as_str())
            .collect();
        for name in Dialect::names() {
            for group in &Dialect::named(name).expect("loads").modes {
                for rule in &group.rules {
                    assert!(ids.contains(&rule.as_str()), "{name}: unknown rule {rule}");
                }
            }
        }
        for rule in NEVER_RELAXED {
            assert!(
                ids.contains(rule),
                "NEVER_RELAXED names unknown rule {rule}"
            );
        }
        let relaxing = include_str!("../dialects/multica.json").replacen(
            "\"s6.ready-identity\"",
            "\"s6.ready-identity\", \"s14.no-credential-leak\"",
            1,
        );
        assert!(parse("multica", &relaxing)
            .unwrap_err()
            .contains("no dialect may relax"));
        let unsourced = include_str!("../dialects/multica.json").replacen("\"source\"", "\"x\"", 1);
        assert!(parse("multica", &unsourced).is_err());
    }

    #[test]
    fn not_applicable_findings_are_dropped_with_a_note_and_the_rest_kept() {
        let multica = Dialect::named("multica").expect("multica");
        let findings = vec![
            Finding::new(
                FindingKind::Expectation,
                "s6.ready-identity",
                "ready ignored",
            ),
            Finding::new(FindingKind::HostFatal, "s6.ready-identity", "driver died"),
            Finding::new(FindingKind::Global, "s10.process-tree-reaped", "alive"),
        ];
        let (kept, notes) = multica.filter(&findings);
        assert_eq!(
            kept.iter().map(|f| f.kind).collect::<Vec<_>>(),
            [FindingKind::HostFatal, FindingKind::Global]
        );
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("dsh.go"), "{notes:?}");
        let (kept, notes) = Dialect::gen1().filter(&findings);
        assert_eq!((kept.len(), notes.len()), (3, 0));
    }

    /// Multica's bundle-installation rules are not applicable to a host that does not claim
    /// `setup`, and strict for one that does (issue 40 item 8).
    #[test]
    fn a_group_unless_claimed_is_strict_for_a_host_claiming_its_capability() {
        let multica = Dialect::named("multica").expect("multica");
        let findings = vec![Finding::new(
            FindingKind::Expectation,
            "s14.bundle-pinned-verified",
            "a tampered bundle installed",
        )];
        let (kept, notes) = multica.for_claims(&[]).filter(&findings);
        assert_eq!((kept.len(), notes.len()), (0, 1));
        let claims = ["discover".to_string(), "setup".to_string()];
        let claiming = multica.for_claims(&claims);
        let (kept, notes) = claiming.filter(&findings);
        assert_eq!((kept.len(), notes.len()), (1, 0));
        assert_eq!(
            claiming.mode("s4.hash-verified-before-install").0,
            Mode::Strict
        );
        assert_eq!(claiming.mode("s6.ready-identity").0, Mode::NotApplicable);
        assert!(matches!(multica.for_claims(&claims[..1]), Cow::Borrowed(_)));
    }

    fn actions(value: Value) -> Vec<Action> {
        serde_json::from_value(value).expect("actions")
    }

    #[test]
    fn a_lenient_run_expects_the_last_good_result_and_the_good_frames_events() {
        let script = actions(json!([
            {"ready": {}}, {"read_execute": {}}, {"session": {}},
            {"raw": "not json\n"},
            {"text": "Hi"},
            {"tool_call": {"arguments": {"an": "object"}}},
            {"tool_call": {}},
            {"result": {"status": "failed"}},
            {"raw": "{\"v\":1,\"type\":\"result\",\"request_id\":\"{{request_id}}\",\"status\":\"completed\"}\n"},
            {"raw": "{\"v\":1,\"type\":\"result\",\"request_id\":\"other\",\"status\":\"failed\"}\n"}
        ]));
        let derived = lenient_outcome(Some(&script), 1024).expect("derivable");
        assert_eq!(derived.status, Status::Completed);
        assert_eq!(derived.events, ["text_delta", "tool_use"]);
        let oversized = actions(json!([
            {"ready": {}}, {"text_line": {"bytes": 2048}}, {"result": {}}
        ]));
        assert_eq!(
            lenient_outcome(Some(&oversized), 1024).map(|d| d.status),
            Some(Status::Failed)
        );
        let unready = actions(json!([
            {"raw": "\u{feff}{\"v\":1,\"type\":\"ready\"}\n"}, {"read_execute": {}}, {"result": {}}
        ]));
        assert_eq!(
            lenient_outcome(Some(&unready), 1024).map(|d| d.status),
            Some(Status::Failed)
        );
        let late_ready = actions(json!([
            {"raw": "log line\n"}, {"ready": {}}, {"read_execute": {}}, {"result": {}}
        ]));
        assert_eq!(
            lenient_outcome(Some(&late_ready), 1024).map(|d| d.status),
            Some(Status::Completed)
        );
        let cancelled = actions(json!([{"wait_cancel": {}}, {"result": {}}]));
        assert_eq!(lenient_outcome(Some(&cancelled), 1024), None);
        assert_eq!(
            lenient_outcome(None, 1024).map(|d| d.status),
            Some(Status::Completed)
        );
        let no_result = actions(json!([{"session": {}}, {"protocol_error": {}}]));
        assert_eq!(
            lenient_outcome(Some(&no_result), 1024).map(|d| d.status),
            Some(Status::Failed)
        );
    }

    #[test]
    fn the_probe_policy_takes_any_matching_line_with_exit_zero() {
        let policy = DiscoveryPolicy {
            version: "exit-zero".into(),
            probe: "any-line".into(),
            source: String::new(),
        };
        let case = |runtime: Value| -> Case {
            serde_json::from_value(json!({
                "v": 1, "id": "discovery.x", "summary": "s", "spec": ["5"],
                "rules": ["s5.probe-one-json-line"], "requires": [], "runtime": runtime,
                "steps": [{"discover": {}, "expect": {"available": false}}]
            }))
            .expect("a case")
        };
        let good =
            "{\"v\":1,\"type\":\"probe\",\"runtime\":\"{{runtime_id}}\",\"protocol_version\":1}";
        let multica = Dialect::named("multica").expect("multica");
        let found = |runtime: Value| discoverable(&case(runtime), &policy, &multica.profile);
        assert!(found(json!({})));
        assert!(found(
            json!({"probe": {"stdout": format!("log line\n{good}\r\n")}})
        ));
        assert!(found(
            json!({"probe": {"patch": {"plugin_version": null, "capabilities": null}}})
        ));
        assert!(!found(
            json!({"probe": {"stdout": format!("{good}\n"), "exit": 1}})
        ));
        assert!(!found(json!({"probe": {"stdout": format!("[{good}]\n")}})));
        assert!(!found(
            json!({"probe": {"stdout": format!("\u{feff}{good}\n")}})
        ));
        assert!(!found(json!({"probe": {"patch": {"protocol_version": 2}}})));
        assert!(!found(json!({"version": {"stdout": "", "exit": 2}})));
        assert!(found(json!({"version": {"stdout": "", "exit": 0}})));
        assert!(!found(json!({"profile": "missing"})));
    }

    fn journal(lines: &[String]) -> Vec<Entry> {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("journal.jsonl");
        std::fs::write(&path, lines.join("\n") + "\n").expect("write the journal");
        dsh_engine::journal::Journal::new(&path)
            .read()
            .expect("a journal")
    }

    /// One `--stdio` process in journal lines: its start, its execute, then `frames`.
    fn process(pid: i32, invocation: u64, resume: Option<&str>, frames: &[&str]) -> Vec<String> {
        let execute = match resume {
            Some(id) => json!({"type": "execute", "resume_session_id": id}),
            None => json!({"type": "execute"}),
        };
        let mut lines = vec![
            json!({"v": 1, "event": "start", "pid": pid, "t_ms": 1, "mode": "stdio", "ppid": 1,
                   "pgid": pid, "sid": 1, "argv": ["dsh", "--profile", "multica", "--stdio"],
                   "cwd": "/", "env_names": [], "invocation": invocation})
            .to_string(),
            json!({"v": 1, "event": "command", "pid": pid, "t_ms": 2, "command": execute})
                .to_string(),
        ];
        for frame in frames {
            let mut entry =
                json!({"v": 1, "event": "frame", "pid": pid, "t_ms": 3, "frame_type": frame});
            if *frame == "result" && resume.is_some() {
                entry["code"] = json!("SESSION_NOT_FOUND");
            }
            lines.push(entry.to_string());
        }
        lines
    }

    #[test]
    fn a_fresh_retry_after_a_rejected_resume_is_judged_by_the_session_policy() {
        let multica = Dialect::named("multica").expect("multica");
        let case: Case = serde_json::from_value(json!({
            "v": 1, "id": "resume.x", "summary": "s", "spec": ["6"],
            "rules": ["s6.missing-resume-target-failure"], "requires": [], "runtime": {},
            "steps": [{"run": {"conversation": "c1", "prompt": "p"},
                       "expect": {"status": "failed", "session": "none",
                                  "execute": {"resume": "previous", "bootstrap": false}}}]
        }))
        .expect("a case");
        let dsh_formats::case::Step::Run { expect, .. } = &case.steps[0] else {
            panic!("a run step")
        };
        let mut lines = process(10, 1, Some("s-1"), &["session", "result"]);
        lines.extend(process(11, 2, None, &["session", "text", "result"]));
        let judged = multica.run_expect(&case, expect, &journal(&lines), false);
        assert!(judged.fresh_retry);
        assert_eq!(judged.expect.status, Some(Status::Completed));
        assert_eq!(judged.expect.session, Some(SessionExpect::New));
        let mut violations = vec![
            Violation::new(RULE_NEW_PROCESS_PER_TURN, "two processes"),
            Violation::new("s10.process-tree-reaped", "alive"),
        ];
        judged.keep(&mut violations);
        assert_eq!(violations.len(), 1);

        let mut after_a_tool = process(10, 1, Some("s-1"), &["session", "tool_call", "result"]);
        after_a_tool.extend(process(11, 2, None, &["session", "result"]));
        let judged = multica.run_expect(&case, expect, &journal(&after_a_tool), false);
        assert!(!judged.fresh_retry);
        assert_eq!(judged.expect.status, Some(Status::Failed));
        let judged = Dialect::gen1().run_expect(&case, expect, &journal(&lines), false);
        assert!(!judged.fresh_retry);

        let next: RunExpect = serde_json::from_value(json!({
            "status": "completed", "session": "new", "execute": {"resume": "none", "bootstrap": true}
        }))
        .expect("an expect");
        let judged = multica.run_expect(
            &case,
            &next,
            &journal(&process(12, 3, Some("s-2"), &[])),
            true,
        );
        assert_eq!(judged.expect.session, Some(SessionExpect::Resumed));
        let execute = judged.expect.execute.as_ref().expect("execute");
        assert_eq!(
            (execute.resume, execute.bootstrap),
            (Some(ResumeExpect::Previous), Some(false))
        );
    }
}
