//! The model server's script: which reply each model request gets, chat completions and
//! Anthropic Messages alike (a Messages request is matched through [`crate::messages::chat_view`],
//! its messages in the chat-completions shape).
//!
//! A script is `{"replies": [REPLY, ...]}`. Each request gets the first reply, in order, that is
//! not used up and whose `when` holds for the request; a reply is used up after one request unless
//! it says `"reuse": true`. A request no reply fits gets a 500 naming the request number, so an
//! exhausted script never passes silently. A reply streams, in this order, its `reasoning`
//! (`reasoning_content` deltas, or a `thinking` block), its `text` (`content` deltas, or a `text`
//! block), its `tool_calls` (or `tool_use` blocks) and the end (`finish_reason` and `usage`, or
//! `message_delta` with `stop_reason` and `usage`); `max_tokens` ends it as cut off by the token
//! limit. With `status` it answers that HTTP error instead. `drip_ms` waits between events,
//! `cut_after_events` closes the connection in the middle of the next event.

use serde::Deserialize;
use serde_json::Value;

/// A whole script.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    pub replies: Vec<Reply>,
}

/// One scripted answer to one request.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    /// Only requests this matches get the reply.
    #[serde(default)]
    pub when: When,
    /// Answer every matching request, not just the first.
    #[serde(default)]
    pub reuse: bool,
    /// Thinking, streamed as `reasoning_content`.
    pub reasoning: Option<String>,
    /// The answer text, streamed as `content`.
    pub text: Option<String>,
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    /// The last chunk's `usage`; a small made-up one when absent. On the Messages route an
    /// OpenAI-style usage (`prompt_tokens`, ...) is translated, an Anthropic one sent as it is.
    pub usage: Option<Value>,
    /// End as cut off by the request's token limit: `finish_reason` `length`, `stop_reason`
    /// `max_tokens` (instead of `stop`/`end_turn` or `tool_calls`/`tool_use`).
    #[serde(default)]
    pub max_tokens: bool,
    /// Characters per `content`/`reasoning_content` delta (default 24).
    pub chunk_chars: Option<usize>,
    /// An HTTP error status (401, 429, 500, ...) answered with an error body instead of a stream.
    pub status: Option<u16>,
    /// Milliseconds between events (a slow drip).
    pub drip_ms: Option<u64>,
    /// Write this many whole events, then half of the next one, then close the connection.
    pub cut_after_events: Option<usize>,
}

/// A condition on the request.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct When {
    /// The role of the request's last message (`user`, `tool`, ...).
    pub last_role: Option<String>,
    /// A substring of this turn's user input: the `user` messages after the last `assistant`
    /// message (the real dsh follows the prompt with a runtime-context message).
    pub user_contains: Option<String>,
    /// Whether the request offers tools (the real dsh's session-title request offers none).
    pub tools: Option<bool>,
    /// The request's last message is the result of a call to this tool (matched through the
    /// `tool_call_id` of that message and the `tool_calls` of the assistant message before it).
    pub after_tool: Option<String>,
}

/// One tool call of a reply.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    pub name: String,
    /// The arguments: an object (serialized for the wire) or a ready-made JSON string.
    pub arguments: Value,
    /// The call id; `call_<request>_<index>` (`toolu_<request>_<index>` on the Messages route)
    /// when absent.
    pub id: Option<String>,
}

impl ToolCall {
    /// The arguments as the wire's JSON text: an object serialized, a string as it is.
    pub fn arguments_text(&self) -> String {
        match &self.arguments {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        }
    }
}

impl Script {
    /// Parses a script file's text; the error names the line and column and what is wrong.
    pub fn parse(text: &str) -> Result<Script, String> {
        let script: Script = serde_json::from_str(text).map_err(|error| error.to_string())?;
        for (index, reply) in script.replies.iter().enumerate() {
            if reply.chunk_chars == Some(0) {
                return Err(format!("replies[{index}].chunk_chars must be at least 1"));
            }
            if reply
                .status
                .is_some_and(|status| !(400..600).contains(&status))
            {
                return Err(format!("replies[{index}].status must be 400-599"));
            }
        }
        Ok(script)
    }

    /// The script check-runtime and the end-to-end tests use, every reply reusable: a request
    /// that offers tools and ends with a user message gets a `write` (the real dsh's tool:
    /// `file_path`, `content`) of `file` with `html`; one that ends with a tool result gets
    /// `done_text`; one that offers no tools (the real dsh's session-title request) gets a title.
    pub fn write_then_finish(file: &str, html: &str, done_text: &str) -> Script {
        Script::write_edit_finish(file, html, None, done_text)
    }

    /// [`Script::write_then_finish`], plus: a request whose turn input holds `edit.0` gets a
    /// `read` of `file` instead (placed first, so it wins), and the request that follows that
    /// `read`'s result gets a `write` of `file` with `edit.1`. The real dsh refuses to overwrite a
    /// file its session has not read, so an edit reads first.
    pub fn write_edit_finish(
        file: &str,
        html: &str,
        edit: Option<(&str, &str)>,
        done_text: &str,
    ) -> Script {
        let when = |last_role: &str, tools: bool| When {
            last_role: Some(last_role.into()),
            tools: Some(tools),
            ..When::default()
        };
        let write = Reply {
            when: when("user", true),
            reuse: true,
            reasoning: Some(format!("The user wants a page: I will write {file}.")),
            tool_calls: vec![ToolCall {
                name: "write".into(),
                arguments: serde_json::json!({ "file_path": file, "content": html }),
                id: None,
            }],
            ..Reply::default()
        };
        let finish = Reply {
            when: when("tool", true),
            reuse: true,
            reasoning: Some("The file is written; I will say so.".into()),
            text: Some(done_text.into()),
            ..Reply::default()
        };
        let title = Reply {
            when: when("user", false),
            reuse: true,
            text: Some("Landing page".into()),
            ..Reply::default()
        };
        let mut replies = vec![write, finish, title];
        if let Some((trigger, edited)) = edit {
            let mut read = replies[0].clone();
            read.when.user_contains = Some(trigger.into());
            read.reasoning = Some(format!("An edit: I will read {file} first."));
            read.tool_calls[0].name = "read".into();
            read.tool_calls[0].arguments = serde_json::json!({ "file_path": file });
            let mut rewrite = replies[0].clone();
            rewrite.when = When {
                last_role: Some("tool".into()),
                tools: Some(true),
                after_tool: Some("read".into()),
                ..When::default()
            };
            rewrite.tool_calls[0].arguments =
                serde_json::json!({ "file_path": file, "content": edited });
            replies.splice(0..0, [read, rewrite]);
        }
        Script { replies }
    }
}

impl When {
    /// Whether the request body's messages satisfy this condition.
    pub fn matches(&self, body: &Value) -> bool {
        let messages = body
            .get("messages")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let role_ok = self.last_role.as_deref().is_none_or(|wanted| {
            messages
                .last()
                .and_then(|message| message.get("role"))
                .and_then(Value::as_str)
                == Some(wanted)
        });
        let role = |message: &Value| {
            message
                .get("role")
                .and_then(Value::as_str)
                .map(String::from)
        };
        let user_ok = self.user_contains.as_deref().is_none_or(|wanted| {
            messages
                .iter()
                .rev()
                .take_while(|message| role(message).as_deref() != Some("assistant"))
                .filter(|message| role(message).as_deref() == Some("user"))
                .any(|message| message_text(message).contains(wanted))
        });
        let offers_tools = body
            .get("tools")
            .and_then(Value::as_array)
            .is_some_and(|tools| !tools.is_empty());
        let tools_ok = self.tools.is_none_or(|wanted| wanted == offers_tools);
        let after_ok = self
            .after_tool
            .as_deref()
            .is_none_or(|wanted| last_tool_name(messages) == Some(wanted));
        role_ok && user_ok && tools_ok && after_ok
    }
}

/// The name of the tool whose result is the last message, if it is one.
fn last_tool_name(messages: &[Value]) -> Option<&str> {
    let last = messages.last()?;
    let call_id = last.get("tool_call_id")?.as_str()?;
    messages
        .iter()
        .rev()
        .filter_map(|message| message.get("tool_calls")?.as_array())
        .flatten()
        .find(|call| call.get("id").and_then(Value::as_str) == Some(call_id))?
        .get("function")?
        .get("name")?
        .as_str()
}

/// A message's text: a string `content`, or the `text` parts of an array one.
fn message_text(message: &Value) -> String {
    match message.get("content") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}
