//! Normalization (spec 9): accepted runtime frames become the OpenDesign events of
//! docs/host-driver.md, in order, with thinking blocks opened and closed.

use dsh_protocol::frames::TokenCounts;
use dsh_protocol::RuntimeFrame;
use serde::Serialize;
use serde_json::Value;

/// The structured error of an `error` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorDetail {
    pub code: String,
    pub message: String,
}

/// One normalized OpenDesign event, serialized exactly as the daemon emits it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    Status {
        label: String,
        #[serde(rename = "sessionId")]
        session_id: String,
    },
    ThinkingStart,
    ThinkingDelta {
        delta: String,
    },
    ThinkingEnd,
    TextDelta {
        delta: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        #[serde(rename = "toolUseId")]
        tool_use_id: String,
        content: String,
        #[serde(rename = "isError")]
        is_error: bool,
    },
    Usage {
        provider: String,
        model: String,
        usage: TokenCounts,
    },
    Error {
        message: String,
        error: ErrorDetail,
    },
}

impl Event {
    /// The event's `type` string.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Status { .. } => "status",
            Event::ThinkingStart => "thinking_start",
            Event::ThinkingDelta { .. } => "thinking_delta",
            Event::ThinkingEnd => "thinking_end",
            Event::TextDelta { .. } => "text_delta",
            Event::ToolUse { .. } => "tool_use",
            Event::ToolResult { .. } => "tool_result",
            Event::Usage { .. } => "usage",
            Event::Error { .. } => "error",
        }
    }

    /// The `error` event of a failed run.
    pub fn failure(code: &str, message: &str) -> Self {
        Event::Error {
            message: message.to_string(),
            error: ErrorDetail {
                code: code.to_string(),
                message: message.to_string(),
            },
        }
    }
}

/// Turns one run's accepted frames into events.
#[derive(Debug, Default)]
pub struct Normalizer {
    in_thinking_block: bool,
}

impl Normalizer {
    pub fn new() -> Self {
        Self::default()
    }

    /// The events of one accepted frame (none for `ready`, `result` and frames outside a run).
    pub fn frame(&mut self, frame: &RuntimeFrame) -> Vec<Event> {
        let mut events = Vec::new();
        if let RuntimeFrame::Thinking(delta) = frame {
            if !std::mem::replace(&mut self.in_thinking_block, true) {
                events.push(Event::ThinkingStart);
            }
            events.push(Event::ThinkingDelta {
                delta: delta.content.clone(),
            });
            return events;
        }
        if frame.is_run_scoped() {
            events.extend(self.close_block());
        }
        match frame {
            RuntimeFrame::Session(session) => events.push(Event::Status {
                label: "session".to_string(),
                session_id: session.session_id.clone(),
            }),
            RuntimeFrame::Text(delta) => events.push(Event::TextDelta {
                delta: delta.content.clone(),
            }),
            RuntimeFrame::ToolCall(call) => events.push(Event::ToolUse {
                id: call.call_id.clone(),
                name: call.name.clone(),
                // The checker guarantees JSON; a lenient caller may pass anything, kept as text.
                input: dsh_protocol::arguments::parse(&call.arguments)
                    .unwrap_or_else(|_| Value::String(call.arguments.clone())),
            }),
            RuntimeFrame::ToolResult(result) => events.push(Event::ToolResult {
                tool_use_id: result.call_id.clone(),
                content: result.output.clone(),
                is_error: result.is_error,
            }),
            RuntimeFrame::Usage(usage) => events.push(Event::Usage {
                provider: usage.provider.clone(),
                model: usage.model.clone(),
                usage: usage.tokens,
            }),
            _ => {}
        }
        events
    }

    /// A block-ending point (another frame kind, or the end of the run): close an open block.
    pub fn close_block(&mut self) -> Option<Event> {
        std::mem::take(&mut self.in_thinking_block).then_some(Event::ThinkingEnd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn frame(value: Value) -> RuntimeFrame {
        RuntimeFrame::from_value(&value).unwrap_or_else(|e| panic!("test frame {value}: {e}"))
    }

    fn kinds(events: &[Event]) -> Vec<&'static str> {
        events.iter().map(Event::kind).collect()
    }

    #[test]
    fn thinking_blocks_open_and_close() {
        let mut normalizer = Normalizer::new();
        let mut events = Vec::new();
        for value in [
            json!({"v": 1, "type": "session", "request_id": "r", "session_id": "od-1", "resumed": false}),
            json!({"v": 1, "type": "thinking", "request_id": "r", "content": "a"}),
            json!({"v": 1, "type": "thinking", "request_id": "r", "content": "b"}),
            json!({"v": 1, "type": "text", "request_id": "r", "content": "hi"}),
            json!({"v": 1, "type": "thinking", "request_id": "r", "content": "c"}),
        ] {
            events.extend(normalizer.frame(&frame(value)));
        }
        events.extend(normalizer.close_block());
        assert_eq!(
            kinds(&events),
            [
                "status",
                "thinking_start",
                "thinking_delta",
                "thinking_delta",
                "thinking_end",
                "text_delta",
                "thinking_start",
                "thinking_delta",
                "thinking_end"
            ]
        );
    }

    #[test]
    fn shapes_match_the_driver_contract() {
        let mut normalizer = Normalizer::new();
        let tool = normalizer.frame(&frame(
            json!({"v": 1, "type": "tool_call", "request_id": "r",
            "call_id": "c1", "name": "write_file", "arguments": "{\"path\":\"index.html\"}"}),
        ));
        assert_eq!(
            serde_json::to_value(&tool[0]).ok(),
            Some(
                json!({"type": "tool_use", "id": "c1", "name": "write_file", "input": {"path": "index.html"}})
            )
        );
        let result = normalizer.frame(&frame(
            json!({"v": 1, "type": "tool_result", "request_id": "r",
            "call_id": "c1", "name": "write_file", "output": "ok", "is_error": false}),
        ));
        assert_eq!(
            serde_json::to_value(&result[0]).ok(),
            Some(
                json!({"type": "tool_result", "toolUseId": "c1", "content": "ok", "isError": false})
            )
        );
        let usage = normalizer.frame(&frame(json!({"v": 1, "type": "usage", "request_id": "r",
            "provider": "p", "model": "m", "input_tokens": 3, "output_tokens": 4, "cache_read_tokens": 1})));
        assert_eq!(
            serde_json::to_value(&usage[0]).ok(),
            Some(json!({"type": "usage", "provider": "p", "model": "m",
                "usage": {"input_tokens": 3, "output_tokens": 4, "cache_read_tokens": 1}}))
        );
        assert_eq!(
            serde_json::to_value(Event::ThinkingStart).ok(),
            Some(json!({"type": "thinking_start"}))
        );
    }
}
