//! Borrowed frames ([`FrameRef`]): what the checker hands out per line, strings borrowed from it.
//!
//! [`FrameRef`] mirrors [`RuntimeFrame`] variant for variant. The frames a run writes many of
//! (`session`, `thinking`, `text`, `tool_call`, `tool_result`, `usage`) hold their strings as
//! `Cow<'a, str>`: borrowed from the line, or owned when the JSON string had escapes that had to
//! be decoded. The frames that come once per process or end the run (`probe`, `ready`, `models`,
//! `result`, `protocol_error`) are carried owned, exactly as in [`RuntimeFrame`], so a host keeps
//! them without converting. [`FrameRef::into_owned`] gives the owned frame; a consumer that only
//! checks never pays for it.

use crate::frames::{
    Delta, Models, ProtocolError, ResultFrame, RuntimeFrame, RuntimeIdentity, Session, TokenCounts,
    ToolCall, ToolResult, Usage,
};
use std::borrow::Cow;

/// A generation-1 frame read from one line, borrowing what it can from that line.
#[derive(Debug, Clone, PartialEq)]
pub enum FrameRef<'a> {
    Probe(RuntimeIdentity),
    Ready(RuntimeIdentity),
    Models(Models),
    Session(SessionRef<'a>),
    Thinking(DeltaRef<'a>),
    Text(DeltaRef<'a>),
    ToolCall(ToolCallRef<'a>),
    ToolResult(ToolResultRef<'a>),
    Usage(UsageRef<'a>),
    /// Boxed: the largest frame, once per run (it keeps every step small to move).
    Result(Box<ResultFrame>),
    ProtocolError(ProtocolError),
}

/// A borrowed [`Session`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRef<'a> {
    pub request_id: Cow<'a, str>,
    pub session_id: Cow<'a, str>,
    pub resumed: bool,
}

/// A borrowed [`Delta`] (`thinking` or `text`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeltaRef<'a> {
    pub request_id: Cow<'a, str>,
    pub content: Cow<'a, str>,
}

/// A borrowed [`ToolCall`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallRef<'a> {
    pub request_id: Cow<'a, str>,
    pub call_id: Cow<'a, str>,
    pub name: Cow<'a, str>,
    /// JSON-encoded arguments (the checker requires that it parses as JSON).
    pub arguments: Cow<'a, str>,
}

/// A borrowed [`ToolResult`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResultRef<'a> {
    pub request_id: Cow<'a, str>,
    pub call_id: Cow<'a, str>,
    pub name: Cow<'a, str>,
    pub output: Cow<'a, str>,
    pub is_error: bool,
}

/// A borrowed [`Usage`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageRef<'a> {
    pub request_id: Cow<'a, str>,
    pub provider: Cow<'a, str>,
    pub model: Cow<'a, str>,
    pub tokens: TokenCounts,
}

impl FrameRef<'_> {
    /// The owned frame (the strings still borrowed are copied; decoded ones move).
    pub fn into_owned(self) -> RuntimeFrame {
        match self {
            FrameRef::Probe(identity) => RuntimeFrame::Probe(identity),
            FrameRef::Ready(identity) => RuntimeFrame::Ready(identity),
            FrameRef::Models(models) => RuntimeFrame::Models(models),
            FrameRef::Session(frame) => RuntimeFrame::Session(Session {
                request_id: frame.request_id.into_owned(),
                session_id: frame.session_id.into_owned(),
                resumed: frame.resumed,
            }),
            FrameRef::Thinking(frame) => RuntimeFrame::Thinking(frame.into_owned()),
            FrameRef::Text(frame) => RuntimeFrame::Text(frame.into_owned()),
            FrameRef::ToolCall(frame) => RuntimeFrame::ToolCall(ToolCall {
                request_id: frame.request_id.into_owned(),
                call_id: frame.call_id.into_owned(),
                name: frame.name.into_owned(),
                arguments: frame.arguments.into_owned(),
            }),
            FrameRef::ToolResult(frame) => RuntimeFrame::ToolResult(ToolResult {
                request_id: frame.request_id.into_owned(),
                call_id: frame.call_id.into_owned(),
                name: frame.name.into_owned(),
                output: frame.output.into_owned(),
                is_error: frame.is_error,
            }),
            FrameRef::Usage(frame) => RuntimeFrame::Usage(Usage {
                request_id: frame.request_id.into_owned(),
                provider: frame.provider.into_owned(),
                model: frame.model.into_owned(),
                tokens: frame.tokens,
            }),
            FrameRef::Result(result) => RuntimeFrame::Result(*result),
            FrameRef::ProtocolError(error) => RuntimeFrame::ProtocolError(error),
        }
    }

    crate::frames::frame_accessors!(FrameRef);
}

impl DeltaRef<'_> {
    fn into_owned(self) -> Delta {
        Delta {
            request_id: self.request_id.into_owned(),
            content: self.content.into_owned(),
        }
    }
}

impl From<FrameRef<'_>> for RuntimeFrame {
    fn from(frame: FrameRef<'_>) -> Self {
        frame.into_owned()
    }
}

/// An owned frame as a [`FrameRef`] that owns its strings (nothing is copied).
impl From<RuntimeFrame> for FrameRef<'static> {
    fn from(frame: RuntimeFrame) -> Self {
        let delta = |delta: Delta| DeltaRef {
            request_id: delta.request_id.into(),
            content: delta.content.into(),
        };
        match frame {
            RuntimeFrame::Probe(identity) => FrameRef::Probe(identity),
            RuntimeFrame::Ready(identity) => FrameRef::Ready(identity),
            RuntimeFrame::Models(models) => FrameRef::Models(models),
            RuntimeFrame::Session(frame) => FrameRef::Session(SessionRef {
                request_id: frame.request_id.into(),
                session_id: frame.session_id.into(),
                resumed: frame.resumed,
            }),
            RuntimeFrame::Thinking(frame) => FrameRef::Thinking(delta(frame)),
            RuntimeFrame::Text(frame) => FrameRef::Text(delta(frame)),
            RuntimeFrame::ToolCall(frame) => FrameRef::ToolCall(ToolCallRef {
                request_id: frame.request_id.into(),
                call_id: frame.call_id.into(),
                name: frame.name.into(),
                arguments: frame.arguments.into(),
            }),
            RuntimeFrame::ToolResult(frame) => FrameRef::ToolResult(ToolResultRef {
                request_id: frame.request_id.into(),
                call_id: frame.call_id.into(),
                name: frame.name.into(),
                output: frame.output.into(),
                is_error: frame.is_error,
            }),
            RuntimeFrame::Usage(frame) => FrameRef::Usage(UsageRef {
                request_id: frame.request_id.into(),
                provider: frame.provider.into(),
                model: frame.model.into(),
                tokens: frame.tokens,
            }),
            RuntimeFrame::Result(result) => FrameRef::Result(Box::new(result)),
            RuntimeFrame::ProtocolError(error) => FrameRef::ProtocolError(error),
        }
    }
}
