//! The scenario language (docs/fixture-format.md): loading `FAKE_DSH_SCENARIO` (a scenario or a
//! whole case file), checking it against `schemas/scenario.schema.json`, and its typed form.

use serde::Deserialize;
use serde_json::Value;
use std::path::Path;

/// The environment variable naming the scenario file.
pub const SCENARIO_ENV: &str = "FAKE_DSH_SCENARIO";
/// The scenario schema's path among the schemas `dsh-protocol` embeds.
pub const SCENARIO_SCHEMA_PATH: &str = "scenario.schema.json";

/// A whole scenario; `{}` is the default agent.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub version: Option<VersionAnswer>,
    pub probe: Option<FrameAnswer>,
    pub models: Option<FrameAnswer>,
    pub profile: Option<ProfileState>,
    #[serde(default)]
    pub stdio: Vec<Vec<Action>>,
    #[serde(default)]
    pub agent: AgentKnobs,
}

/// Whether the harness pre-installs the profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProfileState {
    Installed,
    Missing,
}

/// The answer to `--version`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum VersionAnswer {
    Text(String),
    Raw(RawAnswer),
}

/// The answer to `--probe` or `--models`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum FrameAnswer {
    Patch(PatchAnswer),
    Raw(RawAnswer),
}

/// A merge patch onto a default frame, optionally late or padded.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchAnswer {
    pub patch: Value,
    /// Sleep this long before answering (a slow `--models`, past the host's bound).
    pub delay_ms: Option<u64>,
    /// Pad the frame with an `x_pad` member so its line is exactly this many bytes.
    pub pad_to_bytes: Option<usize>,
}

/// Stdout and stderr written verbatim, then an exit code.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAnswer {
    pub stdout: Option<String>,
    pub stderr: Option<String>,
    pub exit: Option<i32>,
}

/// Knobs of the default agent.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentKnobs {
    pub html_file: Option<String>,
    pub step_delay_ms: Option<u64>,
}

impl AgentKnobs {
    /// The HTML file name, default `index.html`.
    pub fn html_file(&self) -> &str {
        self.html_file.as_deref().unwrap_or("index.html")
    }
}

/// A wait with an optional timeout.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timeout {
    pub timeout_ms: Option<u64>,
}

impl Timeout {
    /// The timeout, default 10 s.
    pub fn duration(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.timeout_ms.unwrap_or(10_000))
    }
}

/// An optional merge patch.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OptionalPatch {
    pub patch: Option<Value>,
}

/// An object action that takes no options.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoOptions {}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionSpec {
    pub session_id: Option<String>,
    pub resumed: Option<bool>,
    pub request_id: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCallSpec {
    pub call_id: Option<String>,
    pub name: Option<String>,
    pub arguments: Option<Value>,
    pub request_id: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolResultSpec {
    pub call_id: Option<String>,
    pub name: Option<String>,
    pub output: Option<String>,
    pub is_error: Option<bool>,
    pub request_id: Option<String>,
}

/// Usage members that replace the defaults (any JSON, to send invalid counts on purpose).
pub type UsageSpec = serde_json::Map<String, Value>;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultSpec {
    pub status: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub session_id: Option<Value>,
    pub resume_rejected: Option<bool>,
    pub output: Option<String>,
    pub stop_reason: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub error: Option<Value>,
    pub request_id: Option<String>,
}

/// Keeps an explicit `null` as `Some(Value::Null)`, so "absent" and "null" differ.
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProtocolErrorSpec {
    pub code: Option<String>,
    pub message: Option<String>,
    pub request_id: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepeatSpec {
    pub text: String,
    pub bytes: u64,
    #[serde(default)]
    pub newline: bool,
}

/// A text frame padded to an exact line length (its line end not counted).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextLineSpec {
    pub bytes: usize,
    #[serde(default)]
    pub crlf: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DripSpec {
    pub action: Box<Action>,
    pub chunk: Option<usize>,
    pub delay_ms: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpawnChildSpec {
    #[serde(default)]
    pub ignore_sigterm: bool,
    /// Leave the runtime's process tree: a double-forked daemon in a new session or group.
    #[serde(default)]
    pub detach: Option<Detach>,
    /// The daemon starts with an empty environment (so no inherited marker names it).
    #[serde(default)]
    pub clear_env: bool,
    /// The daemon keeps the runtime's stdout and stderr (the host's pipes) open.
    #[serde(default)]
    pub hold_stdio: bool,
}

/// How a daemon leaves its parent's process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Detach {
    /// `setsid()`: a new session and group.
    Setsid,
    /// `setpgid(0, 0)`: a new group in the same session.
    Setpgid,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FloodSpec {
    pub bytes: u64,
}

/// One scripted action.
#[derive(Debug, Clone, Deserialize)]
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

impl Scenario {
    /// The script of the `index`-th `--stdio` process, if the scenario has one.
    pub fn script(&self, index: Option<u64>) -> Option<&[Action]> {
        let index = usize::try_from(index?).ok()?;
        self.stdio.get(index).map(Vec::as_slice)
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
    let violations = schema_violations(&scenario);
    if !violations.is_empty() {
        let listed: Vec<String> = violations
            .iter()
            .take(20)
            .map(|violation| format!("  {prefix}{violation}"))
            .collect();
        return Err(format!(
            "error: scenario {source} does not match scenario.schema.json:\n{}",
            listed.join("\n")
        ));
    }
    let typed: Scenario = serde_json::from_value(scenario)
        .map_err(|error| format!("error: scenario {source}{prefix}: {error}"))?;
    for (process, script) in typed.stdio.iter().enumerate() {
        for (step, action) in script.iter().enumerate() {
            check_nested(action, &format!("{prefix}/stdio/{process}/{step}"), source)?;
        }
    }
    Ok(typed)
}

fn check_nested(action: &Action, path: &str, source: &str) -> Result<(), String> {
    let inner: Vec<&Action> = match action {
        Action::Drip(drip) => vec![drip.action.as_ref()],
        Action::Coalesce(actions) => actions.iter().collect(),
        _ => return Ok(()),
    };
    match inner.iter().find(|inner| !inner.is_frame_writing()) {
        Some(_) => Err(format!(
            "error: scenario {source}: {path}: drip and coalesce may only hold frame-writing actions"
        )),
        None => Ok(()),
    }
}

/// Loads the scenario named by `FAKE_DSH_SCENARIO`; none set means the default `{}`.
pub fn load_from_env() -> Result<Scenario, String> {
    match std::env::var_os(SCENARIO_ENV).filter(|value| !value.is_empty()) {
        Some(path) => load(Path::new(&path)),
        None => Ok(Scenario::default()),
    }
}

/// Loads a scenario file.
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
}
