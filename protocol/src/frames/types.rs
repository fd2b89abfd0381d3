//! The runtime frames of generation 1 ([`RuntimeFrame`] and the payload of each `type`), why a
//! line is not one ([`FrameError`]), and how frames serialize (`v` and `type` first).

use serde::de::{self, Deserializer};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
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
    Result(ResultFrame),
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
pub struct ResultFrame {
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

impl ResultFrame {
    /// A `completed` result for that session.
    pub fn completed(request_id: impl Into<String>, session_id: impl Into<String>) -> Self {
        ResultFrame {
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
        ResultFrame {
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
        ResultFrame {
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
    pub(super) fn malformed(message: impl Into<String>) -> Self {
        FrameError {
            kind: FrameErrorKind::Malformed,
            message: message.into(),
        }
    }
    pub(super) fn invalid(message: impl Into<String>) -> Self {
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
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
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
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        RuntimeFrame::from_value(&value).map_err(de::Error::custom)
    }
}

/// Writes `{"v":1,"type":<name>, ...body}`.
pub(super) fn serialize_tagged<S: Serializer>(
    serializer: S,
    type_name: &str,
    body: Value,
) -> Result<S::Ok, S::Error> {
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
