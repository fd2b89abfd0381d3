//! Serde types for generation-1 runtime frames and host commands, agreeing with `schemas/`.
//!
//! [`FrameRef::parse_line`] is the hot-path parser the checker uses (borrowing the line's strings;
//! [`RuntimeFrame::parse_line`] is its owned form): the fast path of [`crate::scan`] for the common
//! flat line, else one pass of `serde_json` over the line that captures each top-level member as
//! a raw slice (rejecting duplicate keys), then typed extraction of the members the frame's `type`
//! defines. Members a frame does not define are tolerated and dropped (forward compatibility).
//! Its acceptance is exactly that of `schemas/frame.schema.json`; rules that need more than one
//! frame, or that the schema cannot say (`arguments` holding JSON), belong to the checker.

use crate::frame_ref::{DeltaRef, FrameRef, SessionRef, ToolCallRef, ToolResultRef, UsageRef};
use crate::scan::{Scalar, ScalarDeserializer};
use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::fmt;

/// Every frame type of generation 1, as spelled in `type`.
pub const FRAME_TYPES: [&str; 11] = [
    "probe",
    "ready",
    "models",
    "session",
    "thinking",
    "text",
    "tool_call",
    "tool_result",
    "usage",
    "result",
    "protocol_error",
];

/// The frame types that belong to one run and must carry its `request_id` (`protocol_error`
/// belongs to a run too, but may have none).
pub const RUN_FRAME_TYPES: [&str; 7] = [
    "session",
    "thinking",
    "text",
    "tool_call",
    "tool_result",
    "usage",
    "result",
];

/// The content and tool frame types, which a `session` frame must precede (spec 6).
pub const CONTENT_FRAME_TYPES: [&str; 5] =
    ["thinking", "text", "tool_call", "tool_result", "usage"];

/// A frame the runtime writes on stdout (or, for `probe` and `models`, answers a CLI flag with).
#[derive(Debug, Clone, PartialEq)]
pub enum RuntimeFrame {
    /// `dsh --profile open-design --probe`.
    Probe(RuntimeIdentity),
    /// First frame of every `--stdio` process.
    Ready(RuntimeIdentity),
    /// Answer to `--models`.
    Models(Models),
    Session(Session),
    Thinking(Delta),
    Text(Delta),
    ToolCall(ToolCall),
    ToolResult(ToolResult),
    Usage(Usage),
    Result(Result),
    ProtocolError(ProtocolError),
}

/// The identity fields shared by `probe` and `ready`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeIdentity {
    pub runtime: String,
    pub protocol_version: u64,
    pub plugin_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compatibility_generation: Option<String>,
    pub capabilities: Capabilities,
}

/// Capability flags; an absent flag reads as `false`. Unknown flags are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Capabilities {
    #[serde(default)]
    pub session_resume: bool,
    #[serde(default)]
    pub session_cancel: bool,
    #[serde(default)]
    pub structured_events: bool,
}

impl Capabilities {
    /// All three phase-one capabilities.
    pub fn all() -> Self {
        Capabilities {
            session_resume: true,
            session_cancel: true,
            structured_events: true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Models {
    pub runtime: String,
    pub models: Vec<ModelInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelInfo {
    pub provider: String,
    pub provider_name: String,
    pub id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_options: Option<Vec<ReasoningOption>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasoningOption {
    pub id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Session {
    pub request_id: String,
    pub session_id: String,
    pub resumed: bool,
}

/// A `thinking` or `text` delta; `content` may be empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Delta {
    pub request_id: String,
    pub content: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolCall {
    pub request_id: String,
    pub call_id: String,
    pub name: String,
    /// JSON-encoded arguments (the checker requires that it parses as JSON).
    pub arguments: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolResult {
    pub request_id: String,
    pub call_id: String,
    pub name: String,
    pub output: String,
    pub is_error: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub request_id: String,
    pub provider: String,
    pub model: String,
    /// Written as top-level members of the frame.
    #[serde(flatten)]
    pub tokens: TokenCounts,
}

/// The token accounting of a `usage` frame; also the `usage` member of the normalized event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TokenCounts {
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
}

/// The terminal status of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Completed,
    Cancelled,
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Completed => "completed",
            Status::Cancelled => "cancelled",
            Status::Failed => "failed",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The structured error of a failed result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunError {
    pub code: String,
    pub message: String,
}

/// The terminal `result` frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Result {
    pub request_id: String,
    pub status: Status,
    /// The session this run served: the runtime assigns it (a fresh id, or the requested resume
    /// id) before it writes anything, so every result names one.
    pub session_id: String,
    pub resume_rejected: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// Required when `status` is `failed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<RunError>,
}

impl Result {
    /// A `completed` result for that session.
    pub fn completed(request_id: impl Into<String>, session_id: impl Into<String>) -> Self {
        Result {
            request_id: request_id.into(),
            status: Status::Completed,
            session_id: session_id.into(),
            resume_rejected: false,
            output: None,
            stop_reason: None,
            error: None,
        }
    }

    /// A `failed` result with its structured error.
    pub fn failed(
        request_id: impl Into<String>,
        session_id: impl Into<String>,
        code: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Result {
            request_id: request_id.into(),
            status: Status::Failed,
            session_id: session_id.into(),
            resume_rejected: false,
            output: None,
            stop_reason: None,
            error: Some(RunError {
                code: code.into(),
                message: message.into(),
            }),
        }
    }

    /// A `cancelled` result.
    pub fn cancelled(request_id: impl Into<String>, session_id: impl Into<String>) -> Self {
        Result {
            request_id: request_id.into(),
            status: Status::Cancelled,
            session_id: session_id.into(),
            resume_rejected: false,
            output: None,
            stop_reason: None,
            error: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProtocolError {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    pub code: String,
    pub message: String,
}

/// Why a line or document is not a generation-1 frame (or command).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameError {
    pub kind: FrameErrorKind,
    /// What is wrong, without a line number (the checker adds it).
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameErrorKind {
    /// Not UTF-8, a byte-order mark, or not JSON at all.
    Malformed,
    /// JSON, but not a generation-1 frame: not an object, a duplicate key, a missing or ill-typed
    /// member, an unknown `type`, `v` other than 1.
    Invalid,
}

impl FrameError {
    fn malformed(message: impl Into<String>) -> Self {
        FrameError {
            kind: FrameErrorKind::Malformed,
            message: message.into(),
        }
    }
    fn invalid(message: impl Into<String>) -> Self {
        FrameError {
            kind: FrameErrorKind::Invalid,
            message: message.into(),
        }
    }
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for FrameError {}

/// The text of one line of `what` ("a frame", "a command"): UTF-8 without a byte-order mark.
fn line_text<'a>(line: &'a [u8], what: &str) -> std::result::Result<&'a str, FrameError> {
    if line.starts_with(b"\xEF\xBB\xBF") {
        return Err(FrameError::malformed(format!(
            "starts with a UTF-8 byte-order mark ({what} is a bare JSON object)"
        )));
    }
    std::str::from_utf8(line).map_err(|error| {
        FrameError::malformed(format!(
            "not UTF-8 (invalid byte at offset {})",
            error.valid_up_to()
        ))
    })
}

/// The accessors [`RuntimeFrame`] and [`FrameRef`] share, written once: the two enums have the
/// same variants, and every run-scoped variant's frame has a `request_id` that derefs to `str`.
macro_rules! frame_accessors {
    ($frame:ident) => {
        /// The `type` this frame is written with.
        pub fn type_name(&self) -> &'static str {
            match self {
                $frame::Probe(_) => "probe",
                $frame::Ready(_) => "ready",
                $frame::Models(_) => "models",
                $frame::Session(_) => "session",
                $frame::Thinking(_) => "thinking",
                $frame::Text(_) => "text",
                $frame::ToolCall(_) => "tool_call",
                $frame::ToolResult(_) => "tool_result",
                $frame::Usage(_) => "usage",
                $frame::Result(_) => "result",
                $frame::ProtocolError(_) => "protocol_error",
            }
        }

        /// The run this frame belongs to, for run-scoped frames (`protocol_error` may have none).
        pub fn request_id(&self) -> Option<&str> {
            match self {
                $frame::Probe(_) | $frame::Ready(_) | $frame::Models(_) => None,
                $frame::Session(frame) => Some(&frame.request_id),
                $frame::Thinking(frame) | $frame::Text(frame) => Some(&frame.request_id),
                $frame::ToolCall(frame) => Some(&frame.request_id),
                $frame::ToolResult(frame) => Some(&frame.request_id),
                $frame::Usage(frame) => Some(&frame.request_id),
                $frame::Result(frame) => Some(&frame.request_id),
                $frame::ProtocolError(frame) => frame.request_id.as_deref(),
            }
        }

        /// Whether the frame belongs to a run (everything except `probe`, `ready` and `models`).
        pub fn is_run_scoped(&self) -> bool {
            !matches!(
                self,
                $frame::Probe(_) | $frame::Ready(_) | $frame::Models(_)
            )
        }
    };
}
pub(crate) use frame_accessors;

impl RuntimeFrame {
    /// Parse one stdout line (without its terminator) as a generation-1 frame: the owned form of
    /// [`FrameRef::parse_line`] (same acceptance, same errors).
    pub fn parse_line(line: &[u8]) -> std::result::Result<RuntimeFrame, FrameError> {
        FrameRef::parse_line(line).map(FrameRef::into_owned)
    }

    /// Parse one frame from text (see [`FrameRef::parse_str`]).
    pub fn parse_str(text: &str) -> std::result::Result<RuntimeFrame, FrameError> {
        FrameRef::parse_str(text).map(FrameRef::into_owned)
    }

    /// [`FrameRef::parse_str_fast`], owned.
    pub fn parse_str_fast(text: &str) -> Option<RuntimeFrame> {
        FrameRef::parse_str_fast(text).map(FrameRef::into_owned)
    }

    /// [`FrameRef::parse_str_general`], owned.
    pub fn parse_str_general(text: &str) -> std::result::Result<RuntimeFrame, FrameError> {
        FrameRef::parse_str_general(text).map(FrameRef::into_owned)
    }

    /// Interpret a parsed JSON document as a frame (same rules as [`RuntimeFrame::parse_line`],
    /// except that duplicate keys have already been merged by whoever parsed it).
    pub fn from_value(value: &Value) -> std::result::Result<RuntimeFrame, FrameError> {
        match value {
            Value::Object(map) => build_frame(&map).map(FrameRef::into_owned),
            other => Err(FrameError::invalid(format!(
                "a frame must be a JSON object, not {}",
                json_kind(other)
            ))),
        }
    }

    frame_accessors!(RuntimeFrame);

    /// The frame as a JSON document (`v` and `type` included).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("frames always serialize")
    }

    /// The frame as one protocol line: compact JSON plus `"\n"`.
    pub fn to_line(&self) -> String {
        let mut line = serde_json::to_string(self).expect("frames always serialize");
        line.push('\n');
        line
    }

    /// The `ready` (or, with [`RuntimeFrame::Probe`], probe) identity of this crate's profile.
    pub fn ready(plugin_version: impl Into<String>) -> RuntimeFrame {
        RuntimeFrame::Ready(RuntimeIdentity::open_design(plugin_version))
    }

    pub fn session(
        request_id: impl Into<String>,
        session_id: impl Into<String>,
        resumed: bool,
    ) -> RuntimeFrame {
        RuntimeFrame::Session(Session {
            request_id: request_id.into(),
            session_id: session_id.into(),
            resumed,
        })
    }

    pub fn text(request_id: impl Into<String>, content: impl Into<String>) -> RuntimeFrame {
        RuntimeFrame::Text(Delta {
            request_id: request_id.into(),
            content: content.into(),
        })
    }

    pub fn thinking(request_id: impl Into<String>, content: impl Into<String>) -> RuntimeFrame {
        RuntimeFrame::Thinking(Delta {
            request_id: request_id.into(),
            content: content.into(),
        })
    }
}

impl<'a> FrameRef<'a> {
    /// Parse one stdout line (without its terminator) as a generation-1 frame, borrowing its
    /// strings from `line` (see [`crate::frame_ref`]).
    pub fn parse_line(line: &'a [u8]) -> std::result::Result<FrameRef<'a>, FrameError> {
        Self::parse_str(line_text(line, "a frame")?)
    }

    /// Parse one frame from text (see [`FrameRef::parse_line`]).
    /// Most lines take the fast path ([`crate::scan`]: one flat object, no allocation but for
    /// strings with escapes); the rest, and every error, [`FrameRef::parse_str_general`].
    pub fn parse_str(text: &'a str) -> std::result::Result<FrameRef<'a>, FrameError> {
        match Self::parse_str_fast(text) {
            Some(frame) => Ok(frame),
            None => Self::parse_str_general(text),
        }
    }

    /// The fast path alone: the frame, or `None` when [`crate::scan`] declines the line or the
    /// frame it describes is not valid (the general parser then names the error). Public so the
    /// equivalence tests can show it is taken and agrees with the general parser.
    pub fn parse_str_fast(text: &'a str) -> Option<FrameRef<'a>> {
        crate::scan::object(text, |members| {
            build_scanned(members).or_else(|| build_frame(members).ok())
        })
    }

    /// The general parser alone, without the fast path of [`crate::scan`]: every line the fast
    /// path declines or cannot build a frame from is read here, and every error comes from here.
    /// Public so the equivalence tests can hold both paths side by side.
    pub fn parse_str_general(text: &'a str) -> std::result::Result<FrameRef<'a>, FrameError> {
        if text.starts_with('\u{FEFF}') {
            return Err(FrameError::malformed(
                "starts with a UTF-8 byte-order mark (a frame is a bare JSON object)",
            ));
        }
        let members = parse_members(text)?;
        reject_lone_surrogates(text)?;
        build_frame(&members)
    }
}

impl RuntimeIdentity {
    /// runtime `open-design`, protocol 1, every phase-one capability.
    pub fn open_design(plugin_version: impl Into<String>) -> Self {
        RuntimeIdentity {
            runtime: crate::RUNTIME_ID.to_string(),
            protocol_version: crate::PROTOCOL_VERSION,
            plugin_version: plugin_version.into(),
            compatibility_generation: None,
            capabilities: Capabilities::all(),
        }
    }
}

impl Serialize for RuntimeFrame {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let body = match self {
            RuntimeFrame::Probe(frame) | RuntimeFrame::Ready(frame) => serde_json::to_value(frame),
            RuntimeFrame::Models(frame) => serde_json::to_value(frame),
            RuntimeFrame::Session(frame) => serde_json::to_value(frame),
            RuntimeFrame::Thinking(frame) | RuntimeFrame::Text(frame) => {
                serde_json::to_value(frame)
            }
            RuntimeFrame::ToolCall(frame) => serde_json::to_value(frame),
            RuntimeFrame::ToolResult(frame) => serde_json::to_value(frame),
            RuntimeFrame::Usage(frame) => serde_json::to_value(frame),
            RuntimeFrame::Result(frame) => serde_json::to_value(frame),
            RuntimeFrame::ProtocolError(frame) => serde_json::to_value(frame),
        }
        .map_err(serde::ser::Error::custom)?;
        serialize_tagged(serializer, self.type_name(), body)
    }
}

impl<'de> Deserialize<'de> for RuntimeFrame {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        RuntimeFrame::from_value(&value).map_err(de::Error::custom)
    }
}

/// Writes `{"v":1,"type":<name>, ...body}`.
fn serialize_tagged<S: Serializer>(
    serializer: S,
    type_name: &str,
    body: Value,
) -> std::result::Result<S::Ok, S::Error> {
    let Value::Object(body) = body else {
        return Err(serde::ser::Error::custom("frame body is not an object"));
    };
    let mut map = serializer.serialize_map(Some(body.len() + 2))?;
    map.serialize_entry("v", &crate::PROTOCOL_VERSION)?;
    map.serialize_entry("type", type_name)?;
    for (key, value) in &body {
        map.serialize_entry(key, value)?;
    }
    map.end()
}

// ---------------------------------------------------------------------------------------------
// Host commands

/// A command the host writes on the runtime's stdin.
#[derive(Debug, Clone, PartialEq)]
pub enum HostCommand {
    Execute(Execute),
    Cancel(Cancel),
}

/// The `model` route of an execute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelRoute {
    pub provider: String,
    pub id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Execute {
    pub request_id: String,
    /// Absolute project directory.
    pub cwd: String,
    pub prompt: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume_session_id: Option<String>,
    /// The model route; optional (OpenDesign's host and bundle omit it to use the default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelRoute>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// MCP server entries (phase one sends none); always present.
    pub mcp_servers: Vec<Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cancel {
    pub request_id: String,
}

impl HostCommand {
    /// An execute with a model route, without MCP servers or reasoning effort.
    pub fn execute(
        request_id: impl Into<String>,
        cwd: impl Into<String>,
        prompt: impl Into<String>,
        resume_session_id: Option<String>,
        model: ModelRoute,
    ) -> HostCommand {
        HostCommand::Execute(Execute {
            request_id: request_id.into(),
            cwd: cwd.into(),
            prompt: prompt.into(),
            resume_session_id,
            model: Some(model),
            reasoning_effort: None,
            mcp_servers: Vec::new(),
        })
    }

    pub fn cancel(request_id: impl Into<String>) -> HostCommand {
        HostCommand::Cancel(Cancel {
            request_id: request_id.into(),
        })
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            HostCommand::Execute(_) => "execute",
            HostCommand::Cancel(_) => "cancel",
        }
    }

    pub fn request_id(&self) -> &str {
        match self {
            HostCommand::Execute(command) => &command.request_id,
            HostCommand::Cancel(command) => &command.request_id,
        }
    }

    /// Parse one stdin line as a command (same parsing rules as frames).
    pub fn parse_line(line: &[u8]) -> std::result::Result<HostCommand, FrameError> {
        let members = parse_members(line_text(line, "a command")?)?;
        build_command(&members)
    }

    pub fn from_value(value: &Value) -> std::result::Result<HostCommand, FrameError> {
        match value {
            Value::Object(map) => build_command(&map),
            other => Err(FrameError::invalid(format!(
                "a command must be a JSON object, not {}",
                json_kind(other)
            ))),
        }
    }

    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("commands always serialize")
    }

    /// The command as one line: compact JSON plus `"\n"`.
    pub fn to_line(&self) -> String {
        let mut line = serde_json::to_string(self).expect("commands always serialize");
        line.push('\n');
        line
    }
}

impl Serialize for HostCommand {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let body = match self {
            HostCommand::Execute(command) => serde_json::to_value(command),
            HostCommand::Cancel(command) => serde_json::to_value(command),
        }
        .map_err(serde::ser::Error::custom)?;
        serialize_tagged(serializer, self.type_name(), body)
    }
}

impl<'de> Deserialize<'de> for HostCommand {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        HostCommand::from_value(&value).map_err(de::Error::custom)
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing: members of one object, then typed extraction per `type`.

/// The members of one JSON object: raw (unparsed) from a line, scanned from a line, or a parsed
/// [`Map`]; `'a` is the lifetime of the text (or map) that strings may be borrowed from.
trait Members<'a> {
    fn raw_get(&self, name: &str) -> Option<MemberRef<'_, 'a>>;
}

enum MemberRef<'m, 'a> {
    Raw(&'a RawValue),
    Value(&'a Value),
    Scanned(&'m Scalar<'a>),
}

impl<'a> Members<'a> for crate::scan::Members<'a> {
    fn raw_get(&self, name: &str) -> Option<MemberRef<'_, 'a>> {
        self.get(name).map(MemberRef::Scanned)
    }
}

impl<'a> Members<'a> for &'a Map<String, Value> {
    fn raw_get(&self, name: &str) -> Option<MemberRef<'_, 'a>> {
        let map: &'a Map<String, Value> = self;
        map.get(name).map(MemberRef::Value)
    }
}

/// Top-level members of a line, each captured as a raw JSON slice; duplicate keys are an error.
struct RawMembers<'a> {
    entries: Vec<(Cow<'a, str>, &'a RawValue)>,
}

impl<'a> Members<'a> for RawMembers<'a> {
    fn raw_get(&self, name: &str) -> Option<MemberRef<'_, 'a>> {
        self.entries
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, raw)| MemberRef::Raw(raw))
    }
}

impl<'de> Deserialize<'de> for RawMembers<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct ObjectVisitor;
        impl<'de> Visitor<'de> for ObjectVisitor {
            type Value = RawMembers<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Self::Value, A::Error> {
                let mut entries: Vec<(Cow<'de, str>, &'de RawValue)> = Vec::with_capacity(8);
                let mut seen = SeenKeys::default();
                while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
                    if !seen.insert(&key) {
                        return Err(de::Error::custom(format!("duplicate key `{key}`")));
                    }
                    let raw: &'de RawValue = map.next_value()?;
                    entries.push((key, raw));
                }
                Ok(RawMembers { entries })
            }
        }
        deserializer.deserialize_map(ObjectVisitor)
    }
}

/// The keys of one object seen so far: a short list scanned linearly (frames have a handful of
/// members), switching to a hash set once it grows, so the duplicate check stays linear for an
/// object with many thousands of unknown members.
#[derive(Default)]
struct SeenKeys {
    few: Vec<String>,
    many: Option<std::collections::HashSet<String>>,
}

impl SeenKeys {
    const LINEAR_UP_TO: usize = 16;

    /// Records `key`; false when it was already seen.
    fn insert(&mut self, key: &str) -> bool {
        if let Some(many) = &mut self.many {
            return many.insert(key.to_string());
        }
        if self.few.iter().any(|seen| seen == key) {
            return false;
        }
        self.few.push(key.to_string());
        if self.few.len() > Self::LINEAR_UP_TO {
            self.many = Some(self.few.drain(..).collect());
        }
        true
    }
}

/// A JSON value parsed with every object's keys checked for duplicates at any depth (plain
/// `serde_json::Value` keeps the last duplicate silently). Used for the protocol's nested objects
/// (`capabilities`, `error`, `model`, `models` entries) read from a line.
struct UniqueValue(Value);

impl<'de> Deserialize<'de> for UniqueValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        deserializer.deserialize_any(UniqueValueVisitor)
    }
}

struct UniqueValueVisitor;

impl<'de> Visitor<'de> for UniqueValueVisitor {
    type Value = UniqueValue;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> std::result::Result<UniqueValue, E> {
        Ok(UniqueValue(Value::Bool(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<UniqueValue, E> {
        Ok(UniqueValue(Value::from(v)))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<UniqueValue, E> {
        Ok(UniqueValue(Value::from(v)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<UniqueValue, E> {
        Ok(UniqueValue(Value::from(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<UniqueValue, E> {
        Ok(UniqueValue(Value::String(v.to_string())))
    }
    fn visit_string<E: de::Error>(self, v: String) -> std::result::Result<UniqueValue, E> {
        Ok(UniqueValue(Value::String(v)))
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<UniqueValue, E> {
        Ok(UniqueValue(Value::Null))
    }
    fn visit_none<E: de::Error>(self) -> std::result::Result<UniqueValue, E> {
        Ok(UniqueValue(Value::Null))
    }
    fn visit_some<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> std::result::Result<UniqueValue, D::Error> {
        UniqueValue::deserialize(deserializer)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<UniqueValue, A::Error> {
        let mut items = Vec::new();
        while let Some(UniqueValue(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(UniqueValue(Value::Array(items)))
    }
    fn visit_map<A: MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<UniqueValue, A::Error> {
        let mut object = Map::new();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            let UniqueValue(value) = map.next_value()?;
            if object.insert(key.clone().into_owned(), value).is_some() {
                return Err(de::Error::custom(format!("duplicate key `{key}`")));
            }
        }
        Ok(UniqueValue(Value::Object(object)))
    }
}

/// Reads a string as a `Cow`: borrowed from the line when it has no escapes, decoded otherwise;
/// `expecting` names what was wanted in the error of a non-string.
struct CowStrVisitor(&'static str);

impl<'de> Visitor<'de> for CowStrVisitor {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> std::result::Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> std::result::Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

/// A string member (`expecting` and so every error message are those of `String`).
struct Text<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        deserializer
            .deserialize_string(CowStrVisitor("a string"))
            .map(Text)
    }
}

/// An object key.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        deserializer
            .deserialize_str(CowStrVisitor("a string key"))
            .map(Key)
    }
}

/// Parses the top-level members of `text`, telling malformed (not JSON) from invalid (JSON of
/// the wrong shape). A shape error can be raised before the parser reaches a syntax error
/// (`[info] ...` is rejected as "not an object" at `[`), so shape errors are re-checked for syntax.
fn parse_members(text: &str) -> std::result::Result<RawMembers<'_>, FrameError> {
    use serde_json::error::Category;
    serde_json::from_str(text).map_err(|error| {
        let shape_error = error.classify() == Category::Data;
        let error = if shape_error {
            match serde_json::from_str::<Value>(text) {
                Ok(value) if !value.is_object() => {
                    return FrameError::invalid(format!(
                        "a frame must be a JSON object, not {}",
                        json_kind(&value)
                    ))
                }
                Ok(_) => return FrameError::invalid(strip_position(&error.to_string())),
                Err(syntax) => syntax,
            }
        } else {
            error
        };
        FrameError::malformed(format!("not JSON: {}", strip_position(&error.to_string())))
    })
}

/// A lone surrogate escape anywhere in the line (known member, unknown member, key, nested) is
/// `Malformed`: one code whatever member holds it. Only lines with a `\uD800`-`\uDFFF`-looking
/// escape pay for the second, value-free pass.
fn reject_lone_surrogates(text: &str) -> std::result::Result<(), FrameError> {
    let suspicious = text.match_indices("\\u").any(|(at, _)| {
        let hex = text.as_bytes().get(at + 2..at + 4).unwrap_or_default();
        matches!(hex, [b'd' | b'D', b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F'])
    });
    if !suspicious {
        return Ok(());
    }
    crate::arguments::check(text).map_err(|error| {
        FrameError::malformed(format!(
            "not JSON: {error} (spec 6: every line is one JSON frame)"
        ))
    })
}

/// `serde_json` messages end with " at line L column C"; a frame is one line, so drop it.
pub(crate) fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(index) => message[..index].to_string(),
        None => message.to_string(),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Typed access to the members of one object, naming the frame in every error.
struct Reader<'m, M> {
    members: &'m M,
    what: &'static str,
}

impl<'a, M: Members<'a>> Reader<'_, M> {
    fn optional<T: Deserialize<'a>>(
        &self,
        name: &str,
        expected: &str,
    ) -> std::result::Result<Option<T>, FrameError> {
        let Some(member) = self.members.raw_get(name) else {
            return Ok(None);
        };
        let parsed = match member {
            MemberRef::Raw(raw) => serde_json::from_str::<T>(raw.get()),
            MemberRef::Value(value) => T::deserialize(value),
            MemberRef::Scanned(scalar) => T::deserialize(ScalarDeserializer(scalar)),
        };
        parsed.map(Some).map_err(|error| {
            FrameError::invalid(format!(
                "{}: `{name}` must be {expected} ({})",
                self.what,
                strip_position(&error.to_string())
            ))
        })
    }

    /// A member parsed as a JSON value whose objects, at any depth, have no duplicate keys.
    fn optional_unique(
        &self,
        name: &str,
        expected: &str,
    ) -> std::result::Result<Option<Value>, FrameError> {
        let raw = match self.members.raw_get(name) {
            None => return Ok(None),
            Some(MemberRef::Value(value)) => return Ok(Some(value.clone())),
            Some(MemberRef::Scanned(scalar)) => {
                return Ok(Some(
                    Value::deserialize(ScalarDeserializer(scalar)).map_err(|error| {
                        FrameError::invalid(format!("{}: `{name}`: {error}", self.what))
                    })?,
                ))
            }
            Some(MemberRef::Raw(raw)) => raw,
        };
        let parsed = serde_json::from_str::<UniqueValue>(raw.get());
        parsed.map(|unique| Some(unique.0)).map_err(|error| {
            let error = strip_position(&error.to_string());
            if error.starts_with("duplicate key") {
                FrameError::invalid(format!("{}: `{name}` has a {error}", self.what))
            } else {
                FrameError::invalid(format!(
                    "{}: `{name}` must be {expected} ({error})",
                    self.what
                ))
            }
        })
    }

    fn required<T: Deserialize<'a>>(
        &self,
        name: &str,
        expected: &str,
    ) -> std::result::Result<T, FrameError> {
        self.optional(name, expected)?
            .ok_or_else(|| self.missing(name))
    }

    /// A required string, borrowed from the line when it has no escapes.
    fn text(&self, name: &str, expected: &str) -> std::result::Result<Cow<'a, str>, FrameError> {
        Ok(self.required::<Text<'a>>(name, expected)?.0)
    }

    fn missing(&self, name: &str) -> FrameError {
        FrameError::invalid(format!("{}: missing required `{name}`", self.what))
    }

    /// An optional member that, when present, must be a JSON object (serde would also build a
    /// struct from an array; `null` is refused).
    fn object<T: DeserializeOwned>(
        &self,
        name: &str,
        expected: &str,
    ) -> std::result::Result<Option<T>, FrameError> {
        let Some(value) = self.optional_unique(name, expected)? else {
            return Ok(None);
        };
        if !value.is_object() {
            return Err(FrameError::invalid(format!(
                "{}: `{name}` must be {expected}, not {}",
                self.what,
                json_kind(&value)
            )));
        }
        T::deserialize(&value).map(Some).map_err(|error| {
            FrameError::invalid(format!(
                "{}: `{name}` must be {expected} ({})",
                self.what,
                strip_position(&error.to_string())
            ))
        })
    }

    fn id(&self, name: &str) -> std::result::Result<String, FrameError> {
        self.text_id(name).map(Cow::into_owned)
    }

    /// A required non-empty string, borrowed from the line when it has no escapes.
    fn text_id(&self, name: &str) -> std::result::Result<Cow<'a, str>, FrameError> {
        let value = self.text(name, "a non-empty string")?;
        self.non_empty(name, value)
    }

    fn non_empty<S: AsRef<str>>(&self, name: &str, value: S) -> std::result::Result<S, FrameError> {
        if value.as_ref().is_empty() {
            Err(FrameError::invalid(format!(
                "{}: `{name}` must be a non-empty string",
                self.what
            )))
        } else {
            Ok(value)
        }
    }

    /// An optional member that may also be `null`; when a string, it must not be empty.
    fn optional_non_empty(&self, name: &str) -> std::result::Result<Option<String>, FrameError> {
        match self.optional::<Option<String>>(name, "a non-empty string or null")? {
            Some(Some(value)) => self.non_empty(name, value).map(Some),
            _ => Ok(None),
        }
    }

    /// An optional member that, when present, must be a non-empty string (never `null`).
    fn present_non_empty(&self, name: &str) -> std::result::Result<Option<String>, FrameError> {
        match self.optional::<String>(name, "a non-empty string (omitted, never null)")? {
            Some(value) => self.non_empty(name, value).map(Some),
            None => Ok(None),
        }
    }

    fn count(&self, name: &str) -> std::result::Result<u64, FrameError> {
        Ok(self.required::<Count>(name, "a non-negative integer")?.0)
    }

    fn optional_count(&self, name: &str) -> std::result::Result<Option<u64>, FrameError> {
        Ok(self
            .optional::<Count>(name, "a non-negative integer")?
            .map(|count| count.0))
    }
}

/// The largest count accepted: JavaScript's `Number.MAX_SAFE_INTEGER`, so a TypeScript host reads
/// every accepted count exactly.
pub const MAX_COUNT: u64 = (1 << 53) - 1;

/// A non-negative integer up to [`MAX_COUNT`]; like JSON Schema's `integer`, `3.0` counts as 3.
#[derive(Debug, Clone, Copy)]
struct Count(u64);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct CountVisitor;
        impl Visitor<'_> for CountVisitor {
            type Value = Count;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a non-negative integer up to 2^53-1")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Count, E> {
                if v <= MAX_COUNT {
                    Ok(Count(v))
                } else {
                    Err(E::invalid_value(de::Unexpected::Unsigned(v), &self))
                }
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Count, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::invalid_value(de::Unexpected::Signed(v), &self)),
                }
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<Count, E> {
                if v.fract() == 0.0 && (0.0..=MAX_COUNT as f64).contains(&v) {
                    Ok(Count(v as u64))
                } else {
                    Err(E::invalid_value(de::Unexpected::Float(v), &self))
                }
            }
        }
        deserializer.deserialize_any(CountVisitor)
    }
}

/// A `type` member: a string, borrowed from [`FRAME_TYPES`] or the command types when it is one of
/// them (no allocation on the hot path), owned otherwise.
struct TypeName(Cow<'static, str>);

impl<'de> Deserialize<'de> for TypeName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct TypeVisitor;
        impl Visitor<'_> for TypeVisitor {
            type Value = TypeName;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<TypeName, E> {
                let known = FRAME_TYPES.iter().chain(&["execute", "cancel"]);
                Ok(TypeName(match known.into_iter().find(|name| **name == v) {
                    Some(name) => Cow::Borrowed(name),
                    None => Cow::Owned(v.to_string()),
                }))
            }
            fn visit_string<E: de::Error>(self, v: String) -> std::result::Result<TypeName, E> {
                self.visit_str(&v)
            }
        }
        deserializer.deserialize_string(TypeVisitor)
    }
}

/// Reads `v` (must be 1) and `type` (a string), the header every frame and command carries.
fn header<'a, M: Members<'a>>(
    members: &M,
    what: &'static str,
) -> std::result::Result<Cow<'static, str>, FrameError> {
    let reader = Reader { members, what };
    let version = reader.optional::<Count>("v", "the integer 1")?;
    match version {
        None => return Err(FrameError::invalid(format!("{what}: missing required `v`"))),
        Some(Count(1)) => {}
        Some(Count(other)) => {
            return Err(FrameError::invalid(format!(
                "{what}: `v` is {other}, but this is generation 1 (`v` must be 1)"
            )))
        }
    }
    Ok(reader.required::<TypeName>("type", "a string")?.0)
}

/// The frames a run writes many of (`session`, `thinking`, `text`, `tool_call`, `tool_result`,
/// `usage`), built straight from scanned members without the typed extraction of
/// [`build_frame`]: the same rules, and no error to name, because `None` (any other type, or any
/// member missing or ill-typed) sends the line on to [`build_frame`] and the general parser, which
/// decide. `tests/fast_path.rs` holds it to the general parser, frame for frame.
fn build_scanned<'a>(members: &crate::scan::Members<'a>) -> Option<FrameRef<'a>> {
    let get = |name: &str| members.get(name);
    let (Scalar::UInt(1), Scalar::Str(type_name)) = (get("v")?, get("type")?) else {
        return None;
    };
    let string = |name: &str| -> Option<Cow<'a, str>> {
        match get(name)? {
            Scalar::Str(text) => Some(Cow::Borrowed(*text)),
            Scalar::Escaped(text) => text.take().map(Cow::Owned),
            _ => None,
        }
    };
    // Matched in place rather than `string(name).filter(..)`, whose move of the fresh `Cow`
    // stalled store forwarding.
    let id = |name: &str| -> Option<Cow<'a, str>> {
        match get(name)? {
            Scalar::Str(text) if !text.is_empty() => Some(Cow::Borrowed(*text)),
            Scalar::Escaped(text) => text.take().filter(|id| !id.is_empty()).map(Cow::Owned),
            _ => None,
        }
    };
    let boolean = |name: &str| match get(name)? {
        Scalar::True => Some(true),
        Scalar::False => Some(false),
        _ => None,
    };
    let count = |scalar: &Scalar<'_>| match scalar {
        Scalar::UInt(count) if *count <= MAX_COUNT => Some(*count),
        _ => None,
    };
    let optional_count = |name: &str| match get(name) {
        None => Some(None),
        Some(scalar) => count(scalar).map(Some),
    };
    Some(match *type_name {
        "session" => FrameRef::Session(SessionRef {
            request_id: id("request_id")?,
            session_id: id("session_id")?,
            resumed: boolean("resumed")?,
        }),
        "thinking" => FrameRef::Thinking(DeltaRef {
            request_id: id("request_id")?,
            content: string("content")?,
        }),
        "text" => FrameRef::Text(DeltaRef {
            request_id: id("request_id")?,
            content: string("content")?,
        }),
        "tool_call" => FrameRef::ToolCall(ToolCallRef {
            request_id: id("request_id")?,
            call_id: id("call_id")?,
            name: id("name")?,
            arguments: string("arguments")?,
        }),
        "tool_result" => FrameRef::ToolResult(ToolResultRef {
            request_id: id("request_id")?,
            call_id: id("call_id")?,
            name: id("name")?,
            output: string("output")?,
            is_error: boolean("is_error")?,
        }),
        "usage" => FrameRef::Usage(UsageRef {
            request_id: id("request_id")?,
            provider: string("provider")?,
            model: string("model")?,
            tokens: TokenCounts {
                input_tokens: count(get("input_tokens")?)?,
                output_tokens: count(get("output_tokens")?)?,
                cache_read_tokens: optional_count("cache_read_tokens")?,
                cache_write_tokens: optional_count("cache_write_tokens")?,
            },
        }),
        _ => return None,
    })
}

fn build_frame<'a, M: Members<'a>>(members: &M) -> std::result::Result<FrameRef<'a>, FrameError> {
    let type_name = header(members, "frame")?;
    let Some(what) = FRAME_WHAT.iter().find(|(name, _)| *name == type_name) else {
        return Err(FrameError::invalid(format!(
            "unknown frame type `{type_name}` (generation 1 has {})",
            FRAME_TYPES.join(", ")
        )));
    };
    let r = Reader {
        members,
        what: what.1,
    };
    let frame = match type_name.as_ref() {
        "probe" | "ready" => {
            let compatibility_generation =
                r.optional::<String>("compatibility_generation", "a string")?;
            if let Some(generation) = &compatibility_generation {
                if !valid_compatibility_generation(generation) {
                    return Err(FrameError::invalid(format!(
                        "{}: `compatibility_generation` must match [A-Za-z0-9._:-]{{1,128}}",
                        r.what
                    )));
                }
            }
            let identity = RuntimeIdentity {
                runtime: r.required("runtime", "a string")?,
                protocol_version: r.count("protocol_version")?,
                plugin_version: r.id("plugin_version")?,
                compatibility_generation,
                capabilities: r
                    .object("capabilities", "an object of booleans")?
                    .ok_or_else(|| r.missing("capabilities"))?,
            };
            if type_name == "probe" {
                FrameRef::Probe(identity)
            } else {
                FrameRef::Ready(identity)
            }
        }
        "models" => FrameRef::Models(build_models(&r)?),
        "session" => FrameRef::Session(SessionRef {
            request_id: r.text_id("request_id")?,
            session_id: r.text_id("session_id")?,
            resumed: r.required("resumed", "a boolean")?,
        }),
        "thinking" | "text" => {
            let delta = DeltaRef {
                request_id: r.text_id("request_id")?,
                content: r.text("content", "a string")?,
            };
            if type_name == "text" {
                FrameRef::Text(delta)
            } else {
                FrameRef::Thinking(delta)
            }
        }
        "tool_call" => FrameRef::ToolCall(ToolCallRef {
            request_id: r.text_id("request_id")?,
            call_id: r.text_id("call_id")?,
            name: r.text_id("name")?,
            arguments: r.text("arguments", "a string holding JSON")?,
        }),
        "tool_result" => FrameRef::ToolResult(ToolResultRef {
            request_id: r.text_id("request_id")?,
            call_id: r.text_id("call_id")?,
            name: r.text_id("name")?,
            output: r.text("output", "a string")?,
            is_error: r.required("is_error", "a boolean")?,
        }),
        "usage" => FrameRef::Usage(UsageRef {
            request_id: r.text_id("request_id")?,
            provider: r.text("provider", "a string")?,
            model: r.text("model", "a string")?,
            tokens: TokenCounts {
                input_tokens: r.count("input_tokens")?,
                output_tokens: r.count("output_tokens")?,
                cache_read_tokens: r.optional_count("cache_read_tokens")?,
                cache_write_tokens: r.optional_count("cache_write_tokens")?,
            },
        }),
        "result" => FrameRef::Result(Box::new(build_result(&r)?)),
        "protocol_error" => FrameRef::ProtocolError(ProtocolError {
            request_id: r.optional_non_empty("request_id")?,
            code: r.id("code")?,
            message: r.required("message", "a string")?,
        }),
        _ => unreachable!("FRAME_WHAT lists exactly FRAME_TYPES"),
    };
    Ok(frame)
}

/// Each frame type and how errors name it.
const FRAME_WHAT: [(&str, &str); 11] = [
    ("probe", "probe frame"),
    ("ready", "ready frame"),
    ("models", "models frame"),
    ("session", "session frame"),
    ("thinking", "thinking frame"),
    ("text", "text frame"),
    ("tool_call", "tool_call frame"),
    ("tool_result", "tool_result frame"),
    ("usage", "usage frame"),
    ("result", "result frame"),
    ("protocol_error", "protocol_error frame"),
];

fn build_result<'a, M: Members<'a>>(r: &Reader<'_, M>) -> std::result::Result<Result, FrameError> {
    let request_id = r.id("request_id")?;
    let status: Status = r.required("status", "one of completed, cancelled, failed")?;
    let session_id = r.id("session_id")?;
    let resume_rejected: bool = r.required("resume_rejected", "a boolean")?;
    if resume_rejected && status != Status::Failed {
        return Err(FrameError::invalid(format!(
            "{}: `resume_rejected: true` requires status `failed`, not `{status}`",
            r.what
        )));
    }
    let error = r.object::<RunError>("error", "an object {code, message} (omitted, never null)")?;
    let error = match error {
        Some(error) if error.code.is_empty() => {
            return Err(FrameError::invalid(format!(
                "{}: `error.code` must be a non-empty string",
                r.what
            )))
        }
        other => other,
    };
    if status == Status::Failed && error.is_none() {
        return Err(FrameError::invalid(format!(
            "{}: a failed result requires `error` {{code, message}}",
            r.what
        )));
    }
    Ok(Result {
        request_id,
        status,
        session_id,
        resume_rejected,
        output: r.present_non_empty("output")?,
        stop_reason: r.present_non_empty("stop_reason")?,
        error,
    })
}

fn build_models<'a, M: Members<'a>>(r: &Reader<'_, M>) -> std::result::Result<Models, FrameError> {
    const EXPECTED: &str =
        "an array of objects {provider, provider_name, id, name, reasoning_options?}";
    let runtime: String = r.required("runtime", "a string")?;
    let models = r
        .optional_unique("models", EXPECTED)?
        .ok_or_else(|| r.missing("models"))?;
    let entries_are_objects = |value: &Value| {
        value
            .as_array()
            .is_some_and(|entries| entries.iter().all(Value::is_object))
    };
    let well_shaped = entries_are_objects(&models)
        && models.as_array().into_iter().flatten().all(|model| {
            model
                .get("reasoning_options")
                .is_none_or(entries_are_objects)
        });
    if !well_shaped {
        return Err(FrameError::invalid(format!(
            "{}: `models` must be {EXPECTED}",
            r.what
        )));
    }
    let models = Vec::<ModelInfo>::deserialize(&models).map_err(|error| {
        FrameError::invalid(format!(
            "{}: `models` must be {EXPECTED} ({})",
            r.what,
            strip_position(&error.to_string())
        ))
    })?;
    Ok(Models { runtime, models })
}

fn build_command<'a, M: Members<'a>>(members: &M) -> std::result::Result<HostCommand, FrameError> {
    let type_name = header(members, "command")?;
    match type_name.as_ref() {
        "execute" => {
            let r = Reader {
                members,
                what: "execute command",
            };
            let cwd: String = r.id("cwd")?;
            if !is_absolute_path(&cwd) {
                return Err(FrameError::invalid(format!(
                    "execute command: `cwd` must be an absolute path, not `{cwd}`"
                )));
            }
            let model: Option<ModelRoute> =
                r.object("model", "an object {provider, id} (or omitted)")?;
            if model
                .as_ref()
                .is_some_and(|model| model.provider.is_empty() || model.id.is_empty())
            {
                return Err(FrameError::invalid(
                    "execute command: `model.provider` and `model.id` must be non-empty strings",
                ));
            }
            let mcp_servers: Vec<Value> = r.required("mcp_servers", "an array of objects")?;
            if mcp_servers.iter().any(|entry| !entry.is_object()) {
                return Err(FrameError::invalid(
                    "execute command: every `mcp_servers` entry must be an object",
                ));
            }
            Ok(HostCommand::Execute(Execute {
                request_id: r.id("request_id")?,
                cwd,
                prompt: r.required("prompt", "a string")?,
                resume_session_id: r.optional_non_empty("resume_session_id")?,
                model,
                reasoning_effort: r.optional_non_empty("reasoning_effort")?,
                mcp_servers,
            }))
        }
        "cancel" => {
            let r = Reader {
                members,
                what: "cancel command",
            };
            Ok(HostCommand::Cancel(Cancel {
                request_id: r.id("request_id")?,
            }))
        }
        other => Err(FrameError::invalid(format!(
            "unknown command type `{other}` (generation 1 has execute, cancel)"
        ))),
    }
}

/// `[A-Za-z0-9._:-]{1,128}`.
pub fn valid_compatibility_generation(value: &str) -> bool {
    (1..=128).contains(&value.len())
        && value
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"._:-".contains(&byte))
}

/// POSIX absolute (`/x`), a Windows drive path (`C:\x`, `C:/x`) or a UNC path (`\\server\x`).
pub fn is_absolute_path(path: &str) -> bool {
    let bytes = path.as_bytes();
    path.starts_with('/')
        || path.starts_with("\\\\")
        || (bytes.len() >= 3
            && bytes[0].is_ascii_alphabetic()
            && bytes[1] == b':'
            && (bytes[2] == b'\\' || bytes[2] == b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> std::result::Result<RuntimeFrame, FrameError> {
        RuntimeFrame::parse_line(line.as_bytes())
    }

    /// One line of every frame type (and both result shapes).
    const SAMPLE_LINES: [&str; 12] = [
        r#"{"v":1,"type":"probe","runtime":"open-design","protocol_version":1,"plugin_version":"0.1.0","capabilities":{"session_resume":true,"session_cancel":true,"structured_events":true}}"#,
        r#"{"v":1,"type":"ready","runtime":"open-design","protocol_version":1,"plugin_version":"0.1.0","compatibility_generation":"g1","capabilities":{"session_resume":true,"session_cancel":true,"structured_events":true}}"#,
        r#"{"v":1,"type":"models","runtime":"open-design","models":[{"provider":"deepseek-official","provider_name":"DeepSeek","id":"deepseek-chat","name":"DeepSeek Chat","reasoning_options":[{"id":"high","name":"High","default":true}]}]}"#,
        r#"{"v":1,"type":"session","request_id":"r1","session_id":"s1","resumed":false}"#,
        r#"{"v":1,"type":"thinking","request_id":"r1","content":""}"#,
        r#"{"v":1,"type":"text","request_id":"r1","content":"hi\u2028there"}"#,
        r#"{"v":1,"type":"tool_call","request_id":"r1","call_id":"c1","name":"write_file","arguments":"{\"path\":\"index.html\"}"}"#,
        r#"{"v":1,"type":"tool_result","request_id":"r1","call_id":"c1","name":"write_file","output":"ok","is_error":false}"#,
        r#"{"v":1,"type":"usage","request_id":"r1","provider":"deepseek-official","model":"deepseek-chat","input_tokens":10,"output_tokens":2.0,"cache_read_tokens":0}"#,
        r#"{"v":1,"type":"result","request_id":"r1","status":"completed","session_id":"s1","resume_rejected":false,"stop_reason":"end_turn"}"#,
        r#"{"v":1,"type":"result","request_id":"r1","status":"failed","session_id":"s1","resume_rejected":true,"error":{"code":"SESSION_NOT_FOUND","message":"no such session"}}"#,
        r#"{"v":1,"type":"protocol_error","code":"BAD_COMMAND","message":"unknown command"}"#,
    ];

    #[test]
    fn parses_every_frame_type_and_round_trips() {
        for line in SAMPLE_LINES {
            let frame = parse(line).unwrap_or_else(|error| panic!("{line}: {error}"));
            let again = parse(frame.to_line().trim_end()).expect("re-parses");
            assert_eq!(frame, again, "{line}");
            assert!(frame.to_line().starts_with("{\"v\":1,\"type\":"));
        }
    }

    #[test]
    fn frame_type_lists_agree_with_the_typed_frames() {
        let mut seen: Vec<&str> = Vec::new();
        for line in SAMPLE_LINES {
            let frame = parse(line).unwrap_or_else(|error| panic!("{line}: {error}"));
            let kind = frame.type_name();
            seen.push(kind);
            let carries_run_id = RUN_FRAME_TYPES.contains(&kind);
            assert_eq!(carries_run_id, frame.request_id().is_some(), "{kind}");
            assert_eq!(
                frame.is_run_scoped(),
                carries_run_id || kind == "protocol_error",
                "{kind}"
            );
            if CONTENT_FRAME_TYPES.contains(&kind) {
                assert!(carries_run_id, "{kind}");
            }
        }
        seen.sort();
        seen.dedup();
        let mut every = FRAME_TYPES.to_vec();
        every.sort();
        assert_eq!(seen, every, "the samples hold one frame of every type");
    }

    #[test]
    fn classifies_malformed_and_invalid() {
        let malformed = [
            "not json",
            "\u{1b}[32mdsh starting\u{1b}[0m",
            "\u{FEFF}{\"v\":1,\"type\":\"text\",\"request_id\":\"r\",\"content\":\"\"}",
            "{\"v\":1,",
            "{\"v\":1}{\"v\":1}",
        ];
        for line in malformed {
            assert_eq!(
                parse(line).unwrap_err().kind,
                FrameErrorKind::Malformed,
                "{line}"
            );
        }
        assert_eq!(
            RuntimeFrame::parse_line(b"{\"v\":1,\"type\":\"text\",\"content\":\"\xff\"}")
                .unwrap_err()
                .kind,
            FrameErrorKind::Malformed
        );
        let invalid = [
            "[1,2]",
            "\"text\"",
            "{}",
            r#"{"v":2,"type":"text","request_id":"r","content":""}"#,
            r#"{"type":"text","request_id":"r","content":""}"#,
            r#"{"v":1,"type":"shout","request_id":"r"}"#,
            r#"{"v":1,"type":"text","request_id":"r","content":"a","content":"b"}"#,
            r#"{"v":1,"type":"text","request_id":"r","x":1,"x":2,"content":""}"#,
            r#"{"v":1,"type":"text","request_id":"","content":""}"#,
            r#"{"v":1,"type":"text","request_id":"r","content":5}"#,
            r#"{"v":1,"type":"usage","request_id":"r","provider":"p","model":"m","input_tokens":-1,"output_tokens":0}"#,
            r#"{"v":1,"type":"usage","request_id":"r","provider":"p","model":"m","input_tokens":1.5,"output_tokens":0}"#,
            r#"{"v":1,"type":"result","request_id":"r","status":"failed","session_id":"s","resume_rejected":false}"#,
            r#"{"v":1,"type":"result","request_id":"r","status":"completed","session_id":null,"resume_rejected":false}"#,
            r#"{"v":1,"type":"result","request_id":"r","status":"failed","session_id":null,"resume_rejected":false,"error":{"code":"E","message":"m"}}"#,
            r#"{"v":1,"type":"result","request_id":"r","status":"cancelled","session_id":"","resume_rejected":false}"#,
            r#"{"v":1,"type":"result","request_id":"r","status":"completed","session_id":"s","resume_rejected":false,"output":null}"#,
            r#"{"v":1,"type":"result","request_id":"r","status":"completed","session_id":"s","resume_rejected":false,"stop_reason":null}"#,
            r#"{"v":1,"type":"result","request_id":"r","status":"completed","session_id":"s","resume_rejected":false,"error":null}"#,
            r#"{"v":1,"type":"result","request_id":"r","status":"completed","session_id":"s","resume_rejected":true}"#,
            r#"{"v":1,"type":"result","request_id":"r","status":"completed","resume_rejected":false}"#,
            r#"{"v":1,"type":"result","request_id":"r","status":"completed","session_id":"s","resume_rejected":false,"output":""}"#,
            r#"{"v":1,"type":"ready","runtime":"open-design","protocol_version":1,"plugin_version":"1","compatibility_generation":"a b","capabilities":{}}"#,
        ];
        for line in invalid {
            assert_eq!(
                parse(line).unwrap_err().kind,
                FrameErrorKind::Invalid,
                "{line}"
            );
        }
    }

    #[test]
    fn unknown_members_are_tolerated_with_any_type() {
        let frame = parse(r#"{"v":1,"type":"text","request_id":"r","content":"x","call_id":5,"future":{"a":[1]}}"#)
            .expect("unknown members are tolerated");
        assert_eq!(frame, RuntimeFrame::text("r", "x"));
    }

    #[test]
    fn duplicates_inside_nested_protocol_objects_are_invalid() {
        let lines = [
            (
                r#"{"v":1,"type":"ready","runtime":"open-design","protocol_version":1,"plugin_version":"1","capabilities":{"session_resume":false,"session_resume":true,"session_cancel":true,"structured_events":true}}"#,
                "ready frame: `capabilities` has a duplicate key `session_resume`",
            ),
            (
                r#"{"v":1,"type":"result","request_id":"r","status":"failed","session_id":"s","resume_rejected":false,"error":{"code":"A","message":"m","code":"B"}}"#,
                "result frame: `error` has a duplicate key `code`",
            ),
            (
                r#"{"v":1,"type":"models","runtime":"open-design","models":[{"provider":"p","provider_name":"P","id":"a","id":"b","name":"n"}]}"#,
                "models frame: `models` has a duplicate key `id`",
            ),
        ];
        for (line, message) in lines {
            let error = parse(line).unwrap_err();
            assert_eq!(error.kind, FrameErrorKind::Invalid, "{line}");
            assert_eq!(error.message, message, "{line}");
        }
        let execute = r#"{"v":1,"type":"execute","request_id":"r","cwd":"/p","prompt":"x","model":{"provider":"p","id":"a","id":"b"},"mcp_servers":[]}"#;
        let error = HostCommand::parse_line(execute.as_bytes()).unwrap_err();
        assert_eq!(
            error.message,
            "execute command: `model` has a duplicate key `id`"
        );
    }

    #[test]
    fn a_lone_surrogate_is_malformed_in_every_member() {
        for line in [
            r#"{"v":1,"type":"text","request_id":"r","content":"\ud800"}"#,
            r#"{"v":1,"type":"text","request_id":"r","content":"a","x":"\uDBFF"}"#,
            r#"{"v":1,"type":"text","request_id":"r","content":"a","x":{"y":["\udc00x"]}}"#,
            r#"{"v":1,"type":"text","request_id":"r","content":"a","\ud800":1}"#,
            r#"{"v":1,"type":"result","request_id":"r","status":"failed","session_id":null,"resume_rejected":false,"error":{"code":"A","message":"\ud800"}}"#,
        ] {
            let error = parse(line).unwrap_err();
            assert_eq!(error.kind, FrameErrorKind::Malformed, "{line}: {error}");
        }
        for line in [
            r#"{"v":1,"type":"text","request_id":"r","content":"\ud83d\ude00"}"#,
            r#"{"v":1,"type":"text","request_id":"r","content":"\\ud800"}"#,
        ] {
            assert!(parse(line).is_ok(), "{line}");
        }
    }

    #[test]
    fn many_unknown_members_are_checked_for_duplicates_past_the_linear_list() {
        let mut line = String::from(r#"{"v":1,"type":"text","request_id":"r","content":"c""#);
        for index in 0..5_000 {
            line.push_str(&format!(",\"u{index}\":0"));
        }
        let mut duplicated = line.clone();
        line.push('}');
        assert!(parse(&line).is_ok());
        duplicated.push_str(",\"u4321\":1}");
        assert_eq!(
            parse(&duplicated).unwrap_err().message,
            "duplicate key `u4321`"
        );
        let early = line.replacen(",\"u0\":0", ",\"request_id\":\"s\"", 1);
        assert_eq!(
            parse(&early).unwrap_err().message,
            "duplicate key `request_id`"
        );
        let late = line.replacen(",\"u4999\":0", ",\"v\":1", 1);
        assert_eq!(parse(&late).unwrap_err().message, "duplicate key `v`");
    }

    #[test]
    fn errors_name_the_member() {
        let error =
            parse(r#"{"v":1,"type":"session","request_id":"r","session_id":"s"}"#).unwrap_err();
        assert_eq!(error.message, "session frame: missing required `resumed`");
        let error = parse(r#"{"v":1,"type":"text","request_id":"r","content":"a","content":"b"}"#)
            .unwrap_err();
        assert_eq!(error.message, "duplicate key `content`");
    }

    #[test]
    fn commands_round_trip() {
        let execute = HostCommand::execute(
            "r1",
            "/tmp/project",
            "Create a landing page",
            Some("s1".to_string()),
            ModelRoute {
                provider: "deepseek-official".into(),
                id: "deepseek-chat".into(),
            },
        );
        let line = execute.to_line();
        assert!(line.contains("\"mcp_servers\":[]"));
        assert_eq!(
            HostCommand::parse_line(line.trim_end().as_bytes()),
            Ok(execute)
        );
        let cancel = HostCommand::cancel("r1");
        assert_eq!(
            cancel.to_line(),
            "{\"v\":1,\"type\":\"cancel\",\"request_id\":\"r1\"}\n"
        );
        assert_eq!(
            serde_json::from_str::<HostCommand>(cancel.to_line().trim_end()).unwrap(),
            cancel
        );
        let relative = r#"{"v":1,"type":"execute","request_id":"r","cwd":"project","prompt":"p","model":{"provider":"p","id":"m"},"mcp_servers":[]}"#;
        assert!(HostCommand::parse_line(relative.as_bytes()).is_err());
        let no_mcp = r#"{"v":1,"type":"execute","request_id":"r","cwd":"/p","prompt":"p","model":{"provider":"p","id":"m"}}"#;
        assert!(HostCommand::parse_line(no_mcp.as_bytes()).is_err());
    }
}
