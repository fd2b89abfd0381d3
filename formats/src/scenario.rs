//! The scenario language (docs/fixture-format.md): the typed form of a fake-dsh scenario (a case's
//! `runtime`), its check against `schemas/scenario.schema.json`, and loading one from a scenario
//! or a whole case file.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;

/// The scenario schema's path among the schemas `dsh-protocol` embeds.
pub const SCENARIO_SCHEMA_PATH: &str = "scenario.schema.json";

/// A whole scenario; `{}` is the default agent.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<VersionAnswer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<FrameAnswer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models: Option<FrameAnswer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<ProfileState>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stdio: Vec<Vec<Action>>,
    /// The script of every `--stdio` process without one of its own in `stdio`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdio_default: Option<Vec<Action>>,
    #[serde(default, skip_serializing_if = "AgentKnobs::is_default")]
    pub agent: AgentKnobs,
}

/// Whether the harness pre-installs the profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProfileState {
    Installed,
    Missing,
}

/// The answer to `--version`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum VersionAnswer {
    Text(String),
    Raw(RawAnswer),
}

/// The answer to `--probe` or `--models`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum FrameAnswer {
    Patch(PatchAnswer),
    Raw(RawAnswer),
}

/// A merge patch onto a default frame, optionally late or padded.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PatchAnswer {
    pub patch: Value,
    /// Sleep this long before answering (a slow `--models`, past the host's bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// Pad the frame with an `x_pad` member so its line is exactly this many bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pad_to_bytes: Option<usize>,
    /// Written to stderr before the frame (diagnostics beside a valid answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
}

/// Stdout and stderr written verbatim, then an exit code.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawAnswer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<i32>,
}

/// Knobs of the default agent.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AgentKnobs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub html_file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_delay_ms: Option<u64>,
    /// The `error.code` of a rejected resume, instead of `SESSION_NOT_FOUND` / `SESSION_CORRUPT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_rejected_code: Option<String>,
}

impl AgentKnobs {
    /// Whether no knob is set (the member is then left out when written).
    pub fn is_default(&self) -> bool {
        *self == AgentKnobs::default()
    }

    /// The HTML file name, default `index.html`.
    pub fn html_file(&self) -> &str {
        self.html_file.as_deref().unwrap_or("index.html")
    }
}

/// A wait with an optional timeout.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Timeout {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

impl Timeout {
    /// The timeout, default 10 s.
    pub fn duration(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.timeout_ms.unwrap_or(10_000))
    }
}

/// An optional merge patch.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OptionalPatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<Value>,
}

/// An object action that takes no options.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NoOptions {}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SessionSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCallSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ToolResultSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// Usage members that replace the defaults (any JSON, to send invalid counts on purpose).
pub type UsageSpec = serde_json::Map<String, Value>;

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ResultSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub session_id: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_rejected: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub error: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// Keeps an explicit `null` as `Some(Value::Null)`, so "absent" and "null" differ.
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProtocolErrorSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RepeatSpec {
    pub text: String,
    pub bytes: u64,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub newline: bool,
}

/// A text frame padded to an exact line length (its line end not counted).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TextLineSpec {
    pub bytes: usize,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub crlf: bool,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DripSpec {
    pub action: Box<Action>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SpawnChildSpec {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ignore_sigterm: bool,
    /// Leave the runtime's process tree: a double-forked daemon in a new session or group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detach: Option<Detach>,
    /// The daemon starts with an empty environment (so no inherited marker names it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub clear_env: bool,
    /// The daemon keeps the runtime's stdout and stderr (the host's pipes) open.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hold_stdio: bool,
}

/// How a daemon leaves its parent's process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Detach {
    /// `setsid()`: a new session and group.
    Setsid,
    /// `setpgid(0, 0)`: a new group in the same session.
    Setpgid,
}

/// The scripts `on_execute` chooses from, by what the bound execute asks for.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ExecuteBranches {
    /// Played when the execute starts a new session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new: Option<Vec<Action>>,
    /// Played when the execute resumes a session the Harness home holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<Vec<Action>>,
    /// Played when the execute resumes a session the Harness home does not hold (or cannot read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown_resume: Option<Vec<Action>>,
}

/// What an execute asks for, as `on_execute` tells it apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecuteKind {
    New,
    Resume,
    UnknownResume,
}

impl ExecuteBranches {
    /// The script for an execute of this kind (none: play nothing).
    pub fn branch(&self, kind: ExecuteKind) -> &[Action] {
        let branch = match kind {
            ExecuteKind::New => &self.new,
            ExecuteKind::Resume => &self.resume,
            ExecuteKind::UnknownResume => &self.unknown_resume,
        };
        branch.as_deref().unwrap_or_default()
    }

    /// Every branch's actions, in the order new, resume, unknown_resume.
    pub fn all(&self) -> impl Iterator<Item = &Action> {
        [&self.new, &self.resume, &self.unknown_resume]
            .into_iter()
            .flatten()
            .flatten()
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FloodSpec {
    pub bytes: u64,
}

/// One scripted action.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Ready(OptionalPatch),
    ReadExecute(Timeout),
    Session(SessionSpec),
    Thinking(String),
    Text(String),
    ToolCall(ToolCallSpec),
    ToolResult(ToolResultSpec),
    Usage(UsageSpec),
    Result(ResultSpec),
    ProtocolError(ProtocolErrorSpec),
    Agent(NoOptions),
    /// Plays the branch that matches the bound execute (new, known resume, unknown resume).
    OnExecute(ExecuteBranches),
    Frame(serde_json::Map<String, Value>),
    Raw(String),
    RawBase64(String),
    TextLine(TextLineSpec),
    Repeat(RepeatSpec),
    Drip(DripSpec),
    Coalesce(Vec<Action>),
    SleepMs(u64),
    WaitCancel(Timeout),
    /// Waits for a cancel of the active request; if one came, writes `result: cancelled` and
    /// ends the script, else the script goes on.
    ResultOnCancel(Timeout),
    WaitStdinClose(Timeout),
    Hang(NoOptions),
    IgnoreSigterm(bool),
    SpawnChild(SpawnChildSpec),
    Stderr(String),
    StderrFlood(FloodSpec),
    StderrPrompt(NoOptions),
    StderrEnv(String),
    Exit(i32),
}

impl Action {
    /// Whether this action writes one frame's bytes (what `drip` and `coalesce` may hold).
    pub fn is_frame_writing(&self) -> bool {
        matches!(
            self,
            Action::Ready(_)
                | Action::Session(_)
                | Action::Thinking(_)
                | Action::Text(_)
                | Action::ToolCall(_)
                | Action::ToolResult(_)
                | Action::Usage(_)
                | Action::Result(_)
                | Action::ProtocolError(_)
                | Action::Frame(_)
                | Action::Raw(_)
                | Action::RawBase64(_)
                | Action::TextLine(_)
        )
    }
}

impl Action {
    /// The actions this one holds (`drip`'s action, `coalesce`'s list, `on_execute`'s
    /// branches), none for the others.
    pub fn inner(&self) -> Vec<&Action> {
        match self {
            Action::Drip(drip) => vec![drip.action.as_ref()],
            Action::Coalesce(actions) => actions.iter().collect(),
            Action::OnExecute(branches) => branches.all().collect(),
            _ => Vec::new(),
        }
    }

    /// Whether this action may hold only frame-writing actions (`drip`, `coalesce`).
    fn holds_only_frames(&self) -> bool {
        matches!(self, Action::Drip(_) | Action::Coalesce(_))
    }

    /// A rough count of the host's bounds the action makes a run wait out (for scheduling only):
    /// one for a hang or for ignoring SIGTERM, two for a child (the runtime's end and the
    /// child's own).
    pub fn bounds_waited(&self) -> usize {
        match self {
            Action::Hang(_) | Action::IgnoreSigterm(_) => 1,
            Action::SpawnChild(_) => 2,
            _ => 0,
        }
    }

    /// Whether the action starts a daemon that leaves the runtime's process group.
    pub fn detaches(&self) -> bool {
        matches!(self, Action::SpawnChild(spec) if spec.detach.is_some())
    }
}

impl Scenario {
    /// The script of the `index`-th `--stdio` process: its own in `stdio`, else `stdio_default`,
    /// else none (the default agent).
    pub fn script(&self, index: Option<u64>) -> Option<&[Action]> {
        let own = index
            .and_then(|index| usize::try_from(index).ok())
            .and_then(|index| self.stdio.get(index));
        own.or(self.stdio_default.as_ref()).map(Vec::as_slice)
    }

    /// Every script: the per-process ones, then the default one.
    pub fn scripts(&self) -> impl Iterator<Item = &Vec<Action>> {
        self.stdio.iter().chain(self.stdio_default.iter())
    }

    /// Every action of every script, the ones `drip` and `coalesce` hold included.
    pub fn actions(&self) -> impl Iterator<Item = &Action> {
        fn with_inner(action: &Action) -> Vec<&Action> {
            let mut all = vec![action];
            all.extend(action.inner().into_iter().flat_map(with_inner));
            all
        }
        self.scripts().flatten().flat_map(with_inner)
    }

    /// Whether the harness pre-installs the open-design profile in `DSH_HOME` (default: yes).
    pub fn profile_installed(&self) -> bool {
        self.profile != Some(ProfileState::Missing)
    }
}

/// The schema violations of a scenario value, each as `<json pointer>: <what is wrong>`.
pub fn schema_violations(scenario: &Value) -> Vec<String> {
    match dsh_protocol::schema::validate(SCENARIO_SCHEMA_PATH, scenario) {
        Ok(()) => Vec::new(),
        Err(errors) => errors
            .iter()
            .map(|error| {
                let path = if error.instance_path.is_empty() {
                    "/"
                } else {
                    &error.instance_path
                };
                format!("{path}: {}", error.message)
            })
            .collect(),
    }
}

/// Checks a scenario value and types it: the schema first, then what the schema cannot say. The
/// error lists every problem as `<json pointer>: <what is wrong>`, pointers relative to the
/// scenario.
pub fn from_value(scenario: Value) -> Result<Scenario, Vec<String>> {
    let violations = schema_violations(&scenario);
    if !violations.is_empty() {
        return Err(violations);
    }
    let typed: Scenario =
        serde_json::from_value(scenario).map_err(|error| vec![format!("/: {error}")])?;
    let scripts = typed
        .stdio
        .iter()
        .enumerate()
        .map(|(process, script)| (format!("/stdio/{process}"), script))
        .chain(
            typed
                .stdio_default
                .iter()
                .map(|script| ("/stdio_default".to_string(), script)),
        );
    let nested: Vec<String> = scripts
        .flat_map(|(pointer, script)| {
            script.iter().enumerate().filter_map(move |(step, action)| {
                check_nested(action)
                    .err()
                    .map(|why| format!("{pointer}/{step}: {why}"))
            })
        })
        .collect();
    if nested.is_empty() {
        Ok(typed)
    } else {
        Err(nested)
    }
}

/// The problems of [`from_value`] as one indented list (at most 20), each pointer after `prefix`.
pub fn list_problems(problems: &[String], prefix: &str) -> String {
    let listed: Vec<String> = problems
        .iter()
        .take(20)
        .map(|problem| format!("  {prefix}{problem}"))
        .collect();
    listed.join("\n")
}

/// Parses and checks a scenario (or a case file holding one in `runtime`). The error names the
/// source and every path that is wrong.
pub fn parse(text: &str, source: &str) -> Result<Scenario, String> {
    let document: Value = serde_json::from_str(text).map_err(|error| {
        format!(
            "error: scenario {source}: not JSON (line {}, column {}): {error}",
            error.line(),
            error.column()
        )
    })?;
    let (scenario, prefix) = match document.get("runtime") {
        Some(runtime) if document.get("steps").is_some() || document.get("id").is_some() => {
            (runtime.clone(), "/runtime")
        }
        _ => (document, ""),
    };
    from_value(scenario).map_err(|problems| {
        format!(
            "error: scenario {source} does not match {SCENARIO_SCHEMA_PATH}:\n{}",
            list_problems(&problems, prefix)
        )
    })
}

/// Whether every `drip` or `coalesce` holds only frame-writing actions, also inside an
/// `on_execute` branch.
fn check_nested(action: &Action) -> Result<(), &'static str> {
    let inner = action.inner();
    if action.holds_only_frames() && !inner.iter().all(|inner| inner.is_frame_writing()) {
        return Err("drip and coalesce may only hold frame-writing actions");
    }
    inner.into_iter().try_for_each(check_nested)
}

/// Loads a scenario file (or a case file holding one in `runtime`).
pub fn load(path: &Path) -> Result<Scenario, String> {
    let source = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("error: scenario {source}: cannot read: {error}"))?;
    parse(&text, &source)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_compiles_and_accepts_the_documented_example() {
        let example = r#"{
            "version": "0.1.7-rc.1",
            "probe": { "patch": { "capabilities": { "session_resume": null } } },
            "models": { "stdout": "raw bytes\n", "exit": 0 },
            "profile": "installed",
            "stdio": [[
                {"ready": {}}, {"read_execute": {"timeout_ms": 10000}}, {"session": {}},
                {"thinking": "t"}, {"text": "x"},
                {"tool_call": {"call_id": "c1", "name": "write_file", "arguments": {"path": "a"}}},
                {"tool_result": {"call_id": "c1", "name": "write_file", "output": "ok", "is_error": false}},
                {"usage": {}}, {"result": {"status": "completed"}},
                {"protocol_error": {"code": "X", "message": "m"}}, {"agent": {}},
                {"frame": {"v": 1, "type": "text"}}, {"raw": "{\r\n"}, {"raw_base64": "/w=="},
                {"repeat": {"text": "x", "bytes": 67108864, "newline": false}},
                {"drip": {"action": {"text": "d"}, "chunk": 1, "delay_ms": 1}},
                {"coalesce": [{"text": "a"}, {"raw": "b\n"}]}, {"sleep_ms": 100},
                {"wait_cancel": {"timeout_ms": 10000}}, {"result_on_cancel": {"timeout_ms": 5}},
                {"wait_stdin_close": {}}, {"hang": {}},
                {"ignore_sigterm": true}, {"spawn_child": {"ignore_sigterm": true, "detach": "setsid", "clear_env": true, "hold_stdio": true}},
                {"stderr": "s"}, {"stderr_flood": {"bytes": 8388608}}, {"stderr_prompt": {}},
                {"stderr_env": "DEEPSEEK_API_KEY"}, {"exit": 0}
            ]],
            "agent": { "html_file": "index.html" }
        }"#;
        let scenario = parse(example, "example").unwrap();
        assert_eq!(scenario.stdio[0].len(), 29);
        assert!(parse("{}", "empty").unwrap().stdio.is_empty());
    }

    #[test]
    fn violations_name_the_source_and_the_path() {
        let error = parse(r#"{"stdio": [[{"text": 5}]]}"#, "bad.json").unwrap_err();
        assert!(error.contains("bad.json"), "{error}");
        assert!(error.contains("/stdio/0/0/text"), "{error}");

        let two_members = parse(r#"{"stdio": [[{"text": "a", "raw": "b"}]]}"#, "f").unwrap_err();
        assert!(two_members.contains("/stdio/0/0"), "{two_members}");

        let nested = parse(
            r#"{"stdio": [[{"drip": {"action": {"sleep_ms": 1}}}]]}"#,
            "f",
        )
        .unwrap_err();
        assert!(nested.contains("/stdio/0/0/drip/action"), "{nested}");

        let unknown = parse(r#"{"stdoi": []}"#, "f").unwrap_err();
        assert!(unknown.contains("stdoi"), "{unknown}");

        let escape = parse(r#"{"agent": {"html_file": "../x.html"}}"#, "f").unwrap_err();
        assert!(escape.contains("/agent/html_file"), "{escape}");

        let not_json = parse("{", "f").unwrap_err();
        assert!(not_json.contains("not JSON"), "{not_json}");
    }

    #[test]
    fn a_case_file_contributes_its_runtime() {
        let case = r#"{"v": 1, "id": "a.b", "runtime": {"version": "9.9.9"}, "steps": []}"#;
        let scenario = parse(case, "case.json").unwrap();
        assert!(matches!(scenario.version, Some(VersionAnswer::Text(ref v)) if v == "9.9.9"));
        let bad = r#"{"v": 1, "id": "a.b", "runtime": {"versio": "9"}, "steps": []}"#;
        assert!(parse(bad, "case.json").unwrap_err().contains("/runtime"));
    }

    #[test]
    fn every_corpus_scenario_survives_a_round_trip_through_its_type() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
        let mut pending = vec![fixtures];
        let mut checked = 0;
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    if !path.ends_with(crate::client_case::CLIENTS_DIR) {
                        pending.push(path);
                    }
                    continue;
                }
                if path.extension().is_none_or(|ext| ext != "json") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let Ok(document) = serde_json::from_str::<Value>(&text) else {
                    continue;
                };
                let Some(runtime) = document.get("runtime") else {
                    continue;
                };
                let typed = from_value(runtime.clone())
                    .unwrap_or_else(|problems| panic!("{}: {problems:?}", path.display()));
                let written = serde_json::to_value(&typed).unwrap();
                let again = from_value(written.clone()).unwrap_or_else(|problems| {
                    panic!("{}: rewritten {written}: {problems:?}", path.display())
                });
                assert_eq!(again, typed, "{}", path.display());
                checked += 1;
            }
        }
        assert!(checked > 50, "only {checked} scenarios found");
    }

    #[test]
    fn the_default_script_serves_processes_without_their_own_and_branches_are_walked() {
        let scenario = parse(
            r#"{"stdio": [[{"exit": 1}]], "stdio_default": [{"on_execute": {
                "new": [{"hang": {}}], "unknown_resume": [{"coalesce": [{"text": "a"}]}]}}],
                "agent": {"resume_rejected_code": "X"}}"#,
            "f",
        )
        .unwrap();
        assert_eq!(scenario.script(Some(0)), Some(&[Action::Exit(1)][..]));
        let default = scenario.stdio_default.as_deref();
        assert_eq!(scenario.script(Some(1)), default);
        assert_eq!(scenario.script(None), default);
        assert_eq!(Scenario::default().script(Some(0)), None);
        let Some([Action::OnExecute(branches)]) = default else {
            panic!("{default:?}");
        };
        assert_eq!(
            branches.branch(ExecuteKind::New),
            &[Action::Hang(NoOptions {})]
        );
        assert!(branches.branch(ExecuteKind::Resume).is_empty());
        // exit, on_execute, hang, coalesce, text
        assert_eq!(scenario.actions().count(), 5);
        assert_eq!(
            scenario.actions().map(Action::bounds_waited).sum::<usize>(),
            1
        );

        let nested = parse(
            r#"{"stdio": [[{"on_execute": {"resume": [{"on_execute": {"new": [
                {"coalesce": [{"sleep_ms": 1}]}]}}]}}]]}"#,
            "f",
        )
        .unwrap_err();
        assert!(nested.contains("/stdio/0/0"), "{nested}");
        let unknown_branch = parse(r#"{"stdio_default": [{"on_execute": {"old": []}}]}"#, "f");
        assert!(unknown_branch
            .unwrap_err()
            .contains("/stdio_default/0/on_execute"));
    }

    #[test]
    fn the_walk_sees_nested_actions_and_names_waits_and_daemons() {
        let scenario = parse(
            r#"{"stdio": [[{"hang": {}}], [{"coalesce": [{"text": "a"}]},
                {"spawn_child": {"detach": "setpgid"}}]]}"#,
            "f",
        )
        .unwrap();
        assert_eq!(scenario.actions().count(), 4);
        let waits: usize = scenario.actions().map(Action::bounds_waited).sum();
        assert_eq!(waits, 3);
        assert_eq!(scenario.actions().filter(|a| a.detaches()).count(), 1);
        assert!(scenario.profile_installed());
        assert!(!parse(r#"{"profile": "missing"}"#, "f")
            .unwrap()
            .profile_installed());
    }
}
