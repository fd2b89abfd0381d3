//! fake-dsh's journal (docs/journal.md, `schemas/journal.schema.json`): the typed form of one
//! line, as fake-dsh writes it and the harness reads it. Each line is an [`Entry`]: the common
//! members (`v`, `pid`, `t_ms`) and an [`Event`] tagged by its `event` member.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The journal schema's path among the schemas `dsh-protocol` embeds.
pub const JOURNAL_SCHEMA_PATH: &str = "journal.schema.json";

/// What a process was started to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Version,
    Probe,
    Models,
    Stdio,
    Plugin,
    Child,
    Error,
    /// The SDK JSON-RPC runtime (`--profile sdk`, `sdk-minimal`, `dsh-jsonrpc-agent`).
    Sdk,
    /// `--profile headless TASK`.
    Headless,
    /// The Agent Client Protocol agent (`--profile acp`, 0.2.1's `acp`).
    Acp,
}

/// Why a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitReason {
    ScriptEnd,
    ResultSent,
    ExitAction,
    Signal,
    StdinClosed,
    Watchdog,
    Error,
}

/// One journal line without its common members (`v`, `pid`, `t_ms`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    Start {
        ppid: i32,
        pgid: i32,
        sid: i32,
        argv: Vec<String>,
        cwd: String,
        env_names: Vec<String>,
        mode: Mode,
        invocation: Option<u64>,
    },
    Command {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        raw: Option<String>,
    },
    Frame {
        frame_type: String,
        /// On `ready`: whether the host had written to stdin before it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stdin_pending: Option<bool>,
        /// On a `result` with an `error`, and on `protocol_error`: the frame's error code.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
        /// On `thinking` and `text` whose `content` is the empty string: true.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        empty: Option<bool>,
    },
    StdinClosed,
    Signal {
        signal: String,
        ignored: bool,
    },
    Child {
        child_pid: i32,
        ignores_sigterm: bool,
    },
    Exit {
        code: i32,
        reason: ExitReason,
    },
}

impl Event {
    /// The event's `event` member: `start`, `command`, `frame`, `stdin_closed`, `signal`,
    /// `child` or `exit`.
    pub fn name(&self) -> &'static str {
        match self {
            Event::Start { .. } => "start",
            Event::Command { .. } => "command",
            Event::Frame { .. } => "frame",
            Event::StdinClosed => "stdin_closed",
            Event::Signal { .. } => "signal",
            Event::Child { .. } => "child",
            Event::Exit { .. } => "exit",
        }
    }

    /// A `frame` entry with no extra member (raw bytes, or a frame that needs none).
    pub fn frame(frame_type: impl Into<String>) -> Event {
        Event::Frame {
            frame_type: frame_type.into(),
            stdin_pending: None,
            code: None,
            empty: None,
        }
    }
}

/// One whole journal line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub v: u64,
    pub pid: i32,
    pub t_ms: u64,
    #[serde(flatten)]
    pub event: Event,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_entry_flattens_its_event_matches_the_schema_and_round_trips() {
        let entry = Entry {
            v: 1,
            pid: 42,
            t_ms: 7,
            event: Event::Start {
                ppid: 1,
                pgid: 42,
                sid: 1,
                argv: vec!["dsh".into(), "--stdio".into()],
                cwd: "/tmp".into(),
                env_names: vec!["PATH".into()],
                mode: Mode::Stdio,
                invocation: Some(0),
            },
        };
        let line = serde_json::to_value(&entry).unwrap();
        assert_eq!(line["event"], entry.event.name());
        assert_eq!(line["mode"], "stdio");
        let checked = dsh_protocol::schema::validate(JOURNAL_SCHEMA_PATH, &line);
        assert!(checked.is_ok(), "{line}: {checked:?}");
        assert_eq!(serde_json::from_value::<Entry>(line).unwrap(), entry);
        let bare = serde_json::to_value(Event::frame("text")).unwrap();
        assert_eq!(
            bare,
            serde_json::json!({"event": "frame", "frame_type": "text"})
        );
    }
}
