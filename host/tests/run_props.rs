//! Property tests of the reference host's run loop (`Host::run`, issue 8) against adversarial
//! runtime streams generated here and played by fake-dsh: random interleavings of valid frames,
//! mutated frames (bad JSON, wrong types, missing fields), foreign-request frames, oversized lines
//! (over 1 MiB, and a 64 MiB line without newline), early exits, hangs, duplicate results,
//! stderr floods and grandchildren.
//!
//! Properties, for every generated script:
//! - the host never panics (not in the run loop, not in a task it spawned);
//! - its status and code are those the strict rules give for the exact bytes the script writes,
//!   computed independently by feeding them through `dsh_protocol::{LineFramer, StreamChecker}`
//!   (a hang is ended by the host's bounds: `READY_TIMEOUT` / `RUN_TIMEOUT`), so `completed` only
//!   when the rules allow it;
//! - no process the run started (the runtime, its grandchildren) is alive afterwards;
//! - the test process's peak RSS grows by far less than the largest line it was sent.

#[path = "it/support/mod.rs"]
mod support;

use dsh_host::events::Event;
use dsh_host::run::RunBounds;
use dsh_host::{Host, Outcome};
use dsh_protocol::{
    LineEvent, LineFramer, RunContext, RuntimeFrame, Status, Step, StreamChecker, Terminal,
    MAX_LINE_BYTES,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, Once};
use std::time::Duration;
use support::World;

/// The session id every generated session frame announces.
const SESSION: &str = "od-prop-session";
/// A request id that is never the active one.
const FOREIGN: &str = "od-run-foreign-7";
/// The placeholder fake-dsh replaces with the active request id (empty before the execute).
const REQUEST_ID: &str = "{{request_id}}";
const HUGE_LINE: u64 = 64 * 1024 * 1024;
/// The most the test process's peak RSS may grow during one run.
const RSS_GROWTH_BOUND: u64 = 24 * 1024 * 1024;
/// A liveness bound on one run: far above the host's own bounds; reaching it is a host hang.
const RUN_LIVENESS: Duration = Duration::from_secs(60);

/// The host's bounds in these tests: short enough that hangs end quickly, long enough that a
/// loaded 2-core machine does not turn a prompt script into a timeout.
fn bounds() -> RunBounds {
    RunBounds {
        ready: Duration::from_millis(1500),
        run: Duration::from_millis(3000),
        cancel_grace: Duration::from_millis(200),
        stdin_close_grace: Duration::from_millis(200),
        term_grace: Duration::from_millis(300),
        exit_grace: Duration::from_millis(2000),
        kill_wait: Duration::from_secs(2),
    }
}

// ---------------------------------------------------------------------------------------------
// The generated script.

/// Which request a run-scoped frame names.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Rid {
    Own,
    Foreign,
    Absent,
}

#[derive(Debug, Clone, PartialEq)]
enum Frame {
    Ready {
        compatible: bool,
    },
    Session {
        resumed: bool,
    },
    Text(String),
    Thinking(String),
    ToolCall {
        call: u8,
        json_arguments: bool,
    },
    ToolResult {
        call: u8,
    },
    Usage,
    Result {
        status: &'static str,
        session: Option<&'static str>,
    },
    ProtocolError,
}

/// How a frame's JSON is broken.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mutation {
    /// Cut the text after this many per-mille of its length (any proper prefix of an object is
    /// bad JSON).
    Truncate(u16),
    /// A member gets a value of the wrong type.
    WrongType,
    /// A member is removed.
    DropMember(u8),
    WrongVersion,
    UnknownType,
    TrailingGarbage,
}

#[derive(Debug, Clone, PartialEq)]
struct Line {
    frame: Frame,
    rid: Rid,
    mutation: Option<Mutation>,
    crlf: bool,
    /// Written in writes of this many bytes (`drip`), else in one write.
    drip: Option<usize>,
}

#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Line(Line),
    /// Several lines in one write.
    Coalesced(Vec<Line>),
    /// A text frame of the active request whose content is this many bytes (streamed by
    /// `repeat`), around the 1 MiB line limit.
    Big {
        content: usize,
        crlf: bool,
    },
    /// 64 MiB without a newline.
    Huge,
    /// A whitespace-only line.
    Blank(&'static str),
    /// A text frame holding a byte that is not UTF-8.
    NonUtf8,
    Stderr,
    StderrFlood(u64),
    SpawnChild {
        ignore_sigterm: bool,
    },
    IgnoreSigterm,
    Sleep(u64),
    Exit(i32),
    Hang,
}

#[derive(Debug, Clone, PartialEq)]
struct Script {
    /// Written before `read_execute`: the `{{request_id}}` placeholder is still empty.
    opening: Vec<Piece>,
    body: Vec<Piece>,
}

fn small_text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 .,:\"\\\\/\u{e9}\u{2028}\u{1F600}\t]{0,24}"
}

fn valid_content_frame() -> impl Strategy<Value = Frame> {
    prop_oneof![
        3 => small_text().prop_map(Frame::Text),
        2 => small_text().prop_map(Frame::Thinking),
        1 => Just(Frame::Usage),
    ]
}

fn any_frame() -> impl Strategy<Value = Frame> {
    prop_oneof![
        2 => valid_content_frame(),
        1 => any::<bool>().prop_map(|compatible| Frame::Ready { compatible }),
        1 => prop::bool::weighted(0.2).prop_map(|resumed| Frame::Session { resumed }),
        1 => (0u8..3, prop::bool::weighted(0.8))
            .prop_map(|(call, json_arguments)| Frame::ToolCall { call, json_arguments }),
        1 => (0u8..3).prop_map(|call| Frame::ToolResult { call }),
        2 => (
            prop::sample::select(vec!["completed", "failed", "cancelled"]),
            prop::sample::select(vec![Some(SESSION), Some("od-other-session"), None]),
        )
            .prop_map(|(status, session)| Frame::Result { status, session }),
        1 => Just(Frame::ProtocolError),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (1u16..1000).prop_map(Mutation::Truncate),
        Just(Mutation::WrongType),
        (0u8..8).prop_map(Mutation::DropMember),
        Just(Mutation::WrongVersion),
        Just(Mutation::UnknownType),
        Just(Mutation::TrailingGarbage),
    ]
}

fn line_of(frame: impl Strategy<Value = Frame>, rid: Rid) -> impl Strategy<Value = Line> {
    (
        frame,
        prop::bool::weighted(0.15),
        prop::option::weighted(0.15, 1usize..40),
    )
        .prop_map(move |(frame, crlf, drip)| Line {
            frame,
            rid,
            mutation: None,
            crlf,
            drip,
        })
}

fn own_line(frame: impl Strategy<Value = Frame>) -> impl Strategy<Value = Line> {
    line_of(frame, Rid::Own)
}

/// A plausible turn: session, some content and tool frames, a completed result.
fn skeleton() -> impl Strategy<Value = Vec<Piece>> {
    let content = prop::collection::vec(
        prop_oneof![
            3 => own_line(valid_content_frame()).prop_map(|line| vec![Piece::Line(line)]),
            1 => (0u8..3, own_line(Just(Frame::Usage))).prop_map(|(call, template)| {
                let with = |frame| Piece::Line(Line { frame, ..template.clone() });
                vec![
                    with(Frame::ToolCall { call, json_arguments: true }),
                    with(Frame::ToolResult { call }),
                ]
            }),
        ],
        0..4,
    );
    (
        own_line(Just(Frame::Session { resumed: false })),
        content,
        own_line(Just(Frame::Result {
            status: "completed",
            session: Some(SESSION),
        })),
    )
        .prop_map(|(session, content, result)| {
            let mut pieces = vec![Piece::Line(session)];
            pieces.extend(content.into_iter().flatten());
            pieces.push(Piece::Line(result));
            pieces
        })
}

/// Anything a hostile runtime might do at some point of the stream.
fn noise() -> impl Strategy<Value = Piece> {
    let near_limit = (MAX_LINE_BYTES - 160)..(MAX_LINE_BYTES + 40);
    prop_oneof![
        4 => (own_line(any_frame()), mutation())
            .prop_map(|(line, mutation)| Piece::Line(Line { mutation: Some(mutation), ..line })),
        3 => own_line(any_frame()).prop_map(Piece::Line),
        3 => line_of(any_frame(), Rid::Foreign).prop_map(Piece::Line),
        1 => line_of(any_frame(), Rid::Absent).prop_map(Piece::Line),
        1 => prop::collection::vec(
            prop_oneof![
                own_line(any_frame()),
                line_of(valid_content_frame(), Rid::Foreign),
            ]
            .prop_map(|line| Line { drip: None, ..line }),
            2..4,
        )
        .prop_map(Piece::Coalesced),
        2 => (near_limit, any::<bool>()).prop_map(|(content, crlf)| Piece::Big { content, crlf }),
        1 => Just(Piece::Huge),
        2 => prop::sample::select(vec!["\n", "   \n", "\r\n", "\t \r\n"]).prop_map(Piece::Blank),
        1 => Just(Piece::NonUtf8),
        1 => Just(Piece::Stderr),
        1 => (1u64..(8 << 20)).prop_map(Piece::StderrFlood),
        1 => any::<bool>().prop_map(|ignore_sigterm| Piece::SpawnChild { ignore_sigterm }),
        1 => Just(Piece::IgnoreSigterm),
        1 => (0u64..20).prop_map(Piece::Sleep),
        2 => (0i32..4).prop_map(Piece::Exit),
        1 => Just(Piece::Hang),
    ]
}

fn opening() -> impl Strategy<Value = Vec<Piece>> {
    let ready = |compatible| {
        own_line(Just(Frame::Ready { compatible }))
            .prop_map(|line| Piece::Line(Line { drip: None, ..line }))
    };
    prop_oneof![
        12 => ready(true).prop_map(|ready| vec![ready]),
        1 => (prop::sample::select(vec!["\n", " \r\n"]), ready(true))
            .prop_map(|(blank, ready)| vec![Piece::Blank(blank), ready]),
        1 => (own_line(any_frame()), mutation(), ready(true)).prop_map(|(line, mutation, ready)| {
            vec![Piece::Line(Line { mutation: Some(mutation), ..line }), ready]
        }),
        1 => (own_line(valid_content_frame()), ready(true))
            .prop_map(|(line, ready)| vec![Piece::Line(line), ready]),
        1 => ready(false).prop_map(|ready| vec![ready]),
        1 => Just(Vec::new()),
    ]
}

/// What comes after the skeleton's result: usually nothing; else a second result or noise, which
/// the host must still read (within its exit grace) and fail on.
fn trailer() -> impl Strategy<Value = Vec<Piece>> {
    let second_result = own_line(prop::sample::select(vec!["completed", "failed"]).prop_map(
        |status| Frame::Result {
            status,
            session: Some(SESSION),
        },
    ))
    .prop_map(Piece::Line);
    prop_oneof![
        3 => Just(Vec::new()),
        1 => second_result.prop_map(|result| vec![result]),
        1 => prop::collection::vec(noise(), 1..3),
    ]
}

fn script() -> impl Strategy<Value = Script> {
    let body = (
        skeleton(),
        prop_oneof![
            2 => Just(Vec::new()),
            3 => prop::collection::vec((any::<prop::sample::Index>(), noise()), 1..5),
        ],
        trailer(),
    )
        .prop_map(|(mut pieces, noise, trailer)| {
            for (at, piece) in noise {
                let index = at.index(pieces.len() + 1);
                pieces.insert(index, piece);
            }
            pieces.extend(trailer);
            pieces
        });
    (opening(), body).prop_map(|(opening, body)| Script { opening, body })
}

// ---------------------------------------------------------------------------------------------
// Rendering: the scenario fake-dsh plays, and the bytes it writes.

/// What one piece writes on stdout, for the model (`{{request_id}}` still in the text).
enum Written {
    Text(Vec<u8>),
    Repeat(u8, u64),
}

impl Frame {
    fn value(&self, rid: Rid) -> Value {
        let mut frame = match self {
            Frame::Ready { compatible } => json!({
                "v": 1, "type": "ready",
                "runtime": if *compatible { "open-design" } else { "multica" },
                "protocol_version": 1, "plugin_version": "0.1.0",
                "compatibility_generation": "od-profile-1",
                "capabilities": {"session_resume": true, "session_cancel": true, "structured_events": true},
            }),
            Frame::Session { resumed } => {
                json!({"v": 1, "type": "session", "session_id": SESSION, "resumed": resumed})
            }
            Frame::Text(content) => json!({"v": 1, "type": "text", "content": content}),
            Frame::Thinking(content) => json!({"v": 1, "type": "thinking", "content": content}),
            Frame::ToolCall {
                call,
                json_arguments,
            } => json!({
                "v": 1, "type": "tool_call", "call_id": format!("call_{call}"), "name": "write_file",
                "arguments": if *json_arguments { "{\"path\":\"index.html\"}" } else { "{path: index.html" },
            }),
            Frame::ToolResult { call } => json!({
                "v": 1, "type": "tool_result", "call_id": format!("call_{call}"), "name": "write_file",
                "output": "ok", "is_error": false,
            }),
            Frame::Usage => json!({
                "v": 1, "type": "usage", "provider": "deepseek-official", "model": "deepseek-chat",
                "input_tokens": 1200, "output_tokens": 300,
            }),
            Frame::Result { status, session } => {
                let mut result = json!({
                    "v": 1, "type": "result", "status": status, "session_id": session,
                    "resume_rejected": false, "stop_reason": "end_turn",
                });
                if *status == "failed" {
                    result["error"] = json!({"code": "RUN_FAILED", "message": "scripted failure"});
                }
                result
            }
            Frame::ProtocolError => json!({
                "v": 1, "type": "protocol_error", "code": "BAD_COMMAND", "message": "scripted",
            }),
        };
        if !matches!(self, Frame::Ready { .. }) {
            match rid {
                Rid::Own => frame["request_id"] = json!(REQUEST_ID),
                Rid::Foreign => frame["request_id"] = json!(FOREIGN),
                Rid::Absent => {}
            }
        }
        frame
    }
}

impl Line {
    fn text(&self) -> String {
        let mut value = self.frame.value(self.rid);
        let mut text = match self.mutation {
            Some(Mutation::WrongType) => {
                let member = ["content", "session_id", "status", "call_id", "input_tokens"]
                    .into_iter()
                    .find(|member| value.get(member).is_some())
                    .unwrap_or("v");
                value[member] = json!([1]);
                value.to_string()
            }
            Some(Mutation::DropMember(which)) => {
                if let Some(members) = value.as_object_mut() {
                    let names: Vec<String> = members.keys().cloned().collect();
                    if let Some(name) = names.get(usize::from(which) % names.len().max(1)) {
                        members.remove(name);
                    }
                }
                value.to_string()
            }
            Some(Mutation::WrongVersion) => {
                value["v"] = json!(2);
                value.to_string()
            }
            Some(Mutation::UnknownType) => {
                value["type"] = json!("telemetry");
                value.to_string()
            }
            _ => value.to_string(),
        };
        match self.mutation {
            Some(Mutation::Truncate(per_mille)) => {
                let mut cut = (text.len() * usize::from(per_mille) / 1000).min(text.len() - 1);
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                text.truncate(cut);
            }
            Some(Mutation::TrailingGarbage) => text.push_str(" trailing"),
            _ => {}
        }
        text.push_str(if self.crlf { "\r\n" } else { "\n" });
        text
    }

    fn action(&self) -> Value {
        let raw = json!({"raw": self.text()});
        match self.drip {
            Some(chunk) => json!({"drip": {"action": raw, "chunk": chunk, "delay_ms": 0}}),
            None => raw,
        }
    }
}

const BIG_PREFIX: &str =
    "{\"v\":1,\"type\":\"text\",\"request_id\":\"{{request_id}}\",\"content\":\"";

/// The bytes of a text frame for a foreign request with a 0xFF byte in its content.
fn non_utf8_line() -> Vec<u8> {
    let mut bytes =
        format!("{{\"v\":1,\"type\":\"text\",\"request_id\":\"{FOREIGN}\",\"content\":\"ab")
            .into_bytes();
    bytes.push(0xFF);
    bytes.extend_from_slice(b"\"}\n");
    bytes
}

impl Piece {
    /// The scenario actions, and what they write on stdout.
    fn render(&self) -> (Vec<Value>, Vec<Written>) {
        match self {
            Piece::Line(line) => (vec![line.action()], vec![Written::Text(line.text().into())]),
            Piece::Coalesced(lines) => {
                let actions: Vec<Value> = lines
                    .iter()
                    .map(|line| json!({"raw": line.text()}))
                    .collect();
                let bytes: String = lines.iter().map(Line::text).collect();
                (
                    vec![json!({"coalesce": actions})],
                    vec![Written::Text(bytes.into())],
                )
            }
            Piece::Big { content, crlf } => {
                let suffix = if *crlf { "\"}\r\n" } else { "\"}\n" };
                (
                    vec![
                        json!({"raw": BIG_PREFIX}),
                        json!({"repeat": {"text": "a", "bytes": content, "newline": false}}),
                        json!({"raw": suffix}),
                    ],
                    vec![
                        Written::Text(BIG_PREFIX.into()),
                        Written::Repeat(b'a', *content as u64),
                        Written::Text(suffix.into()),
                    ],
                )
            }
            Piece::Huge => (
                vec![json!({"repeat": {"text": "x", "bytes": HUGE_LINE, "newline": false}})],
                vec![Written::Repeat(b'x', HUGE_LINE)],
            ),
            Piece::Blank(blank) => (
                vec![json!({"raw": blank})],
                vec![Written::Text(blank.as_bytes().to_vec())],
            ),
            Piece::NonUtf8 => {
                let bytes = non_utf8_line();
                (
                    vec![json!({"raw_base64": base64(&bytes)})],
                    vec![Written::Text(bytes)],
                )
            }
            Piece::Stderr => (
                vec![json!({"stderr": "fake-dsh: a diagnostic line\n"})],
                vec![],
            ),
            Piece::StderrFlood(bytes) => (vec![json!({"stderr_flood": {"bytes": bytes}})], vec![]),
            Piece::SpawnChild { ignore_sigterm } => (
                vec![json!({"spawn_child": {"ignore_sigterm": ignore_sigterm}})],
                vec![],
            ),
            Piece::IgnoreSigterm => (vec![json!({"ignore_sigterm": true})], vec![]),
            Piece::Sleep(millis) => (vec![json!({"sleep_ms": millis})], vec![]),
            Piece::Exit(code) => (vec![json!({"exit": code})], vec![]),
            Piece::Hang => (vec![json!({"hang": {}})], vec![]),
        }
    }
}

impl Script {
    fn scenario(&self) -> Value {
        let mut actions: Vec<Value> = Vec::new();
        for piece in &self.opening {
            actions.extend(piece.render().0);
        }
        actions.push(json!({"read_execute": {"timeout_ms": 60_000}}));
        for piece in &self.body {
            actions.extend(piece.render().0);
        }
        json!({"stdio": [actions]})
    }

    fn has_huge_line(&self) -> bool {
        self.body.iter().any(|piece| matches!(piece, Piece::Huge))
    }
}

fn base64(bytes: &[u8]) -> String {
    const DIGITS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .fold(0u32, |n, byte| (n << 8) | u32::from(*byte))
            << (8 * (3 - chunk.len()));
        for index in 0..=chunk.len() {
            out.push(char::from(DIGITS[((n >> (18 - 6 * index)) & 63) as usize]));
        }
        out.push_str(&"=".repeat(3 - chunk.len()));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The model: the strict rules applied to the exact bytes, with no knowledge of the host.

#[derive(Debug, Clone, PartialEq)]
struct Expected {
    status: Status,
    code: Option<String>,
    foreign_frames: usize,
    /// Whether the host must have sent an execute (a compatible ready came first).
    execute: bool,
    /// The events the accepted frames stand for, in order (see [`describe_frame`]).
    events: Vec<String>,
}

struct Model {
    framer: LineFramer,
    checker: StreamChecker,
    events: Vec<String>,
}

/// A short description of an event's kind and text: long deltas by length only.
fn describe(kind: &str, delta: Option<&str>) -> String {
    match delta {
        Some(delta) if delta.len() > 64 => format!("{kind}: {} bytes", delta.len()),
        Some(delta) => format!("{kind}: {delta:?}"),
        None => kind.to_string(),
    }
}

/// The event an accepted frame becomes (spec 9), described; `None` for `ready` and `result`.
fn describe_frame(frame: &RuntimeFrame) -> Option<String> {
    match frame {
        RuntimeFrame::Session(_) => Some(describe("status", None)),
        RuntimeFrame::Thinking(delta) => Some(describe("thinking_delta", Some(&delta.content))),
        RuntimeFrame::Text(delta) => Some(describe("text_delta", Some(&delta.content))),
        RuntimeFrame::ToolCall(_) => Some(describe("tool_use", None)),
        RuntimeFrame::ToolResult(_) => Some(describe("tool_result", None)),
        RuntimeFrame::Usage(_) => Some(describe("usage", None)),
        _ => None,
    }
}

/// A host event, described like [`describe_frame`]; `None` for the markers the frames do not
/// map one to one (`thinking_start`, `thinking_end`, the failure's `error`).
fn describe_event(event: &Event) -> Option<String> {
    match event {
        Event::ThinkingStart | Event::ThinkingEnd | Event::Error { .. } => None,
        Event::ThinkingDelta { delta } | Event::TextDelta { delta } => {
            Some(describe(event.kind(), Some(delta)))
        }
        other => Some(describe(other.kind(), None)),
    }
}

impl Model {
    fn new(request_id: &str) -> Model {
        Model {
            framer: LineFramer::new(),
            checker: StreamChecker::new(RunContext::new(request_id)),
            events: Vec::new(),
        }
    }

    fn check(&mut self, event: &LineEvent) {
        if let Step::Accepted(frame) = self.checker.check_event(event) {
            self.events.extend(describe_frame(&frame.into_owned()));
        }
    }

    fn violated(&self) -> bool {
        matches!(self.checker.terminal(), Some(Terminal::Violation(_)))
    }

    fn feed(&mut self, bytes: &[u8]) {
        if self.violated() {
            return;
        }
        for event in self.framer.push(bytes) {
            self.check(&event);
        }
    }

    fn write(&mut self, written: &Written, request_id: &str) {
        match written {
            Written::Text(bytes) => {
                let text = String::from_utf8_lossy(bytes);
                if text.contains(REQUEST_ID) {
                    self.feed(text.replace(REQUEST_ID, request_id).as_bytes());
                } else {
                    self.feed(bytes);
                }
            }
            Written::Repeat(byte, count) => {
                let chunk = vec![*byte; 64 * 1024];
                let mut left = *count;
                while left > 0 && !self.violated() {
                    let take = left.min(chunk.len() as u64) as usize;
                    self.feed(&chunk[..take]);
                    left -= take as u64;
                }
            }
        }
    }

    fn eof(&mut self) -> Terminal {
        if let Some(event) = self.framer.finish() {
            self.check(&event);
        }
        self.checker.finish()
    }
}

/// What the strict rules say about `script` when the host's execute carried `request_id`.
fn expected(script: &Script, request_id: &str) -> Expected {
    let mut model = Model::new(request_id);
    // Before the execute, fake-dsh fills the placeholder with nothing. The host sends its execute
    // as soon as it accepts a ready, so a later opening line (a second ready, say) cannot take it
    // back: the execute is due once a ready was accepted before any violation.
    let mut execute = false;
    for piece in &script.opening {
        let stopped = play(std::slice::from_ref(piece), &mut model, "");
        execute |= model.checker.ready_seen() && model.checker.terminal().is_none();
        if stopped.is_some() {
            break;
        }
    }
    let stop = if execute {
        play(&script.body, &mut model, request_id).unwrap_or(Stop::Eof)
    } else {
        // The script waits in read_execute until the host closes stdin.
        Stop::Blocked
    };
    let terminal = match stop {
        Stop::Eof => Some(model.eof()),
        Stop::Blocked => model.checker.terminal().cloned(),
    };
    let (status, code) = match terminal {
        Some(Terminal::Result(result)) => match result.status {
            status @ (Status::Completed | Status::Cancelled) => (status, None),
            Status::Failed if result.resume_rejected => (
                Status::Failed,
                Some("DSH_PROFILE_RESUME_REJECTED".to_string()),
            ),
            Status::Failed => (Status::Failed, Some("DSH_PROFILE_RUN_FAILED".to_string())),
        },
        Some(Terminal::Violation(violation)) => {
            (Status::Failed, Some(violation.code.as_str().to_string()))
        }
        None if !model.checker.ready_seen() => (
            Status::Failed,
            Some("DSH_PROFILE_READY_TIMEOUT".to_string()),
        ),
        None => (Status::Failed, Some("DSH_PROFILE_RUN_TIMEOUT".to_string())),
    };
    Expected {
        status,
        code,
        foreign_frames: model.checker.foreign_frames(),
        execute,
        events: model.events,
    }
}

/// How the script's stdout ends: EOF (script end or `exit`), or never (a `hang`, or waiting for
/// an execute that does not come), which only the host's bounds end.
enum Stop {
    Eof,
    Blocked,
}

/// Feeds what `pieces` write to the model, up to an `exit` or `hang`.
fn play(pieces: &[Piece], model: &mut Model, request_id: &str) -> Option<Stop> {
    for piece in pieces {
        match piece {
            Piece::Exit(_) => return Some(Stop::Eof),
            Piece::Hang => return Some(Stop::Blocked),
            other => {
                for written in other.render().1 {
                    model.write(&written, request_id);
                }
            }
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Running one script against the host.

/// Any panic anywhere in this process (the run loop or a task it spawned) is counted.
static PANICS: AtomicUsize = AtomicUsize::new(0);
/// One run at a time in this process, so the peak-RSS measurement is this run's.
static SERIAL: Mutex<()> = Mutex::new(());

fn count_panics() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            previous(info);
        }));
    });
}

/// A `/proc/self/status` field in bytes (`VmHWM`, `VmRSS`).
fn status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// The peak RSS so far, after resetting it to the current RSS where the kernel allows
/// (`/proc/self/clear_refs` = 5); without the reset, growth against the old peak is still a bound.
fn reset_peak_rss() -> u64 {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    status_bytes("VmHWM")
}

fn is_alive(pid: u64) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rfind(')')
        .and_then(|end| stat[end + 1..].split_whitespace().next());
    !matches!(state, Some("Z" | "X") | None)
}

/// Every pid fake-dsh journaled as a process: `start` entries and grandchildren.
fn journaled_pids(world: &World) -> Vec<u64> {
    let mut pids: Vec<u64> = world
        .journal()
        .iter()
        .filter_map(|entry| match entry["event"].as_str() {
            Some("start") => entry["pid"].as_u64(),
            Some("child") => entry["child_pid"].as_u64(),
            _ => None,
        })
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// Kills whatever a failing case would otherwise leave behind.
struct Reaper<'a>(&'a World);

impl Drop for Reaper<'_> {
    fn drop(&mut self) {
        for pid in &journaled_pids(self.0) {
            if is_alive(*pid) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(*pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

fn host_for(world: &World) -> Host {
    let mut config = world.config();
    config.run_bounds = bounds();
    Host::new(config)
}

/// Runs `script` once and checks every property.
fn check(runtime: &tokio::runtime::Runtime, script: &Script) -> Result<(), TestCaseError> {
    let scenario = script.scenario();
    if let Err(errors) = dsh_protocol::schema::validate("scenario.schema.json", &scenario) {
        let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
        return Err(TestCaseError::fail(format!(
            "the test generated an invalid scenario: {}",
            errors.join("; ")
        )));
    }
    let world = World::new(scenario);
    let _reaper = Reaper(&world);
    let host = host_for(&world);
    let request = world.request("c1", "Create a landing page");
    let panics_before = PANICS.load(Ordering::SeqCst);
    let mut events: Vec<String> = Vec::new();
    let peak_before = reset_peak_rss();
    let outcome: Option<Outcome> = runtime.block_on(async {
        let (_cancel, signal) = tokio::sync::watch::channel(false);
        let mut collect = |event: Event| events.extend(describe_event(&event));
        tokio::time::timeout(RUN_LIVENESS, host.run(&request, signal, &mut collect))
            .await
            .ok()
    });
    let peak_after = status_bytes("VmHWM");
    let Some(outcome) = outcome else {
        return Err(TestCaseError::fail(format!(
            "Host::run did not return within {RUN_LIVENESS:?}"
        )));
    };
    prop_assert_eq!(
        PANICS.load(Ordering::SeqCst),
        panics_before,
        "a panic happened during the run"
    );

    let executes: Vec<Value> = world
        .commands(0)
        .into_iter()
        .filter(|command| command["type"] == "execute")
        .collect();
    let request_id = executes
        .first()
        .and_then(|execute| execute["request_id"].as_str())
        .unwrap_or("od-run-no-execute")
        .to_string();
    let want = expected(script, &request_id);
    prop_assert_eq!(
        executes.len(),
        usize::from(want.execute),
        "execute commands sent (a compatible ready came first: {})",
        want.execute
    );
    let got = (outcome.status, outcome.code.clone());
    prop_assert_eq!(
        &got,
        &(want.status, want.code.clone()),
        "host outcome {:?} (message {:?}) vs the strict rules",
        outcome.status,
        outcome.message
    );
    if outcome.status == Status::Completed {
        prop_assert_eq!(outcome.session_id.as_deref(), Some(SESSION));
    }
    prop_assert_eq!(
        outcome.foreign_frames,
        want.foreign_frames,
        "foreign frames counted"
    );
    prop_assert_eq!(
        &events,
        &want.events,
        "the events are exactly the accepted frames"
    );

    let alive: Vec<u64> = journaled_pids(&world)
        .into_iter()
        .filter(|pid| is_alive(*pid))
        .collect();
    prop_assert!(
        alive.is_empty(),
        "processes of the run alive after the outcome: {:?}",
        alive
    );

    let growth = peak_after.saturating_sub(peak_before);
    prop_assert!(
        growth < RSS_GROWTH_BOUND,
        "peak RSS grew by {} bytes during the run (huge line: {})",
        growth,
        script.has_huge_line()
    );
    Ok(())
}

/// Panic counting on, the lock that keeps these tests from sharing the machine, and a runtime.
fn serial_runtime() -> (std::sync::MutexGuard<'static, ()>, tokio::runtime::Runtime) {
    count_panics();
    let serial = SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    (serial, runtime)
}

fn run_properties(cases: u32) {
    let (_serial, runtime) = serial_runtime();
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 64,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    if let Err(failure) = runner.run(&script(), |script| check(&runtime, &script)) {
        panic!("{failure}");
    }
}

#[test]
fn the_run_loop_survives_adversarial_streams() {
    run_properties(24);
}

#[test]
#[ignore = "long: cargo test -p dsh-host --test run_props -- --ignored"]
fn the_run_loop_survives_many_adversarial_streams() {
    run_properties(400);
}

/// The memory bound on its own, deterministically: a 64 MiB line without newline and a 64 MiB
/// stderr flood in the same run.
#[test]
fn a_64_mib_line_and_a_64_mib_stderr_flood_keep_memory_bounded() {
    let (_serial, runtime) = serial_runtime();
    let line = |frame: Frame| Line {
        frame,
        rid: Rid::Own,
        mutation: None,
        crlf: false,
        drip: None,
    };
    let script = Script {
        opening: vec![Piece::Line(line(Frame::Ready { compatible: true }))],
        body: vec![
            Piece::Line(line(Frame::Session { resumed: false })),
            Piece::StderrFlood(HUGE_LINE),
            Piece::Line(line(Frame::Text("before the flood of bytes".into()))),
            Piece::Huge,
        ],
    };
    let expected = expected(&script, "any");
    assert_eq!(
        (expected.status, expected.code.as_deref()),
        (Status::Failed, Some("DSH_PROFILE_FRAME_TOO_LARGE"))
    );
    if let Err(failure) = check(&runtime, &script) {
        panic!("{failure}");
    }
}

#[test]
fn the_base64_encoder_round_trips_through_fake_dsh() {
    for bytes in [
        &b""[..],
        b"a",
        b"ab",
        b"abc",
        b"\xff\x00\xfe\x10",
        &non_utf8_line(),
    ] {
        assert_eq!(
            fake_dsh::stdio::decode_base64(&base64(bytes)).as_deref(),
            Some(bytes)
        );
    }
    assert_eq!(base64(b"hello"), "aGVsbG8=");
}
