//! The JSON-RPC side of stdout: responses, errors and notifications, each one line in one
//! `write` under one lock, journaled as a `frame` entry named after the notification's method (or
//! `response` / `error`). Once the process has decided to end ([`Wire::end`]), nothing more is
//! written: the last frame is whole and is the last.

use crate::journal::{self, Event, ExitReason};
use crate::output::Stdout;
use crate::process::finish;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// The runtime's one error code, for every failure (unknown methods included).
pub const INTERNAL_ERROR: i64 = -32603;

/// The process's stdout, shared by the request loop and the session threads.
pub struct Wire {
    stdout: Mutex<Stdout>,
}

static WIRE: std::sync::OnceLock<Wire> = std::sync::OnceLock::new();
/// Frames end with `\r\n` (the scenario's `crlf`).
static CRLF: AtomicBool = AtomicBool::new(false);
/// A stray response precedes every response (the scenario's `stray_responses`).
static STRAYS: AtomicBool = AtomicBool::new(false);
/// A decoy success precedes every error response (the scenario's `coerced_id_decoys`).
static DECOYS: AtomicBool = AtomicBool::new(false);
/// The pause between the two writes of a frame split inside a multi-byte character (the
/// scenario's `split_in_char_ms`); `u64::MAX`: frames are written whole.
static SPLIT_MS: AtomicU64 = AtomicU64::new(u64::MAX);

/// The scenario's adversarial shapes of the wire, set before the first frame.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shapes {
    pub crlf: bool,
    pub stray_responses: bool,
    pub coerced_id_decoys: bool,
    pub split_in_char_ms: Option<u64>,
}

/// Sets the scenario's line endings, stray responses, decoys and split writes before the first
/// frame.
pub fn configure(shapes: Shapes) {
    let Shapes {
        crlf,
        stray_responses,
        coerced_id_decoys,
        split_in_char_ms,
    } = shapes;
    CRLF.store(crlf, Ordering::SeqCst);
    STRAYS.store(stray_responses, Ordering::SeqCst);
    DECOYS.store(coerced_id_decoys, Ordering::SeqCst);
    SPLIT_MS.store(split_in_char_ms.unwrap_or(u64::MAX), Ordering::SeqCst);
}

/// Where a line is cut inside its first multi-byte UTF-8 character (after its lead byte), if it
/// has one.
pub fn split_point(line: &[u8]) -> Option<usize> {
    line.iter()
        .position(|byte| *byte >= 0xC0)
        .map(|lead| lead + 1)
}

/// Writes one line: whole, or (the scenario's `split_in_char_ms`) in two writes cut inside its
/// first multi-byte character with the pause between them.
fn write_line(stdout: &mut Stdout, line: &[u8]) {
    let pause = SPLIT_MS.load(Ordering::SeqCst);
    match split_point(line).filter(|_| pause != u64::MAX) {
        Some(cut) => {
            stdout.write_bytes(&line[..cut]);
            std::thread::sleep(std::time::Duration::from_millis(pause));
            stdout.write_bytes(&line[cut..]);
        }
        None => stdout.write_bytes(line),
    }
}

/// One frame's bytes, with its line ending.
fn line_of(value: &Value) -> Vec<u8> {
    let mut line = serde_json::to_vec(value).expect("frames serialize");
    if CRLF.load(Ordering::SeqCst) {
        line.push(b'\r');
    }
    line.push(b'\n');
    line
}

/// The decoy before an error response (the scenario's `coerced_id_decoys`): a success `{}` whose
/// id is the request's id in the other type ([`coerced`]); none for another string id.
fn decoy_for(frame_type: &str, value: &Value) -> Option<Value> {
    if frame_type != "error" || !DECOYS.load(Ordering::SeqCst) {
        return None;
    }
    let id = coerced(&value["id"])?;
    Some(json!({"jsonrpc": "2.0", "id": id, "result": {}}))
}

/// An id in the other type: a number as a string (`4` -> `"4"`), a string holding a number as
/// that number (`"4"` -> `4`); none for another string.
fn coerced(id: &Value) -> Option<Value> {
    match id {
        Value::Number(id) => Some(Value::from(id.to_string())),
        Value::String(id) => serde_json::from_str::<serde_json::Number>(id)
            .ok()
            .filter(|number| number.to_string() == *id)
            .map(Value::Number),
        _ => None,
    }
}

/// The id of a stray response before a response whose id has no form in the other type.
pub const STRAY_ID: &str = "fake-dsh-stray";

/// The stray response before a response (the scenario's `stray_responses`): a success `{}` to an
/// id no request used, the response's id in the other type where it has one (`"1"` before the
/// answer to `1`), else [`STRAY_ID`].
fn stray_before(value: &Value) -> Value {
    let id = coerced(&value["id"]).unwrap_or_else(|| Value::from(STRAY_ID));
    json!({"jsonrpc": "2.0", "id": id, "result": {}})
}

/// The process-wide wire.
pub fn wire() -> &'static Wire {
    WIRE.get_or_init(|| Wire {
        stdout: Mutex::new(Stdout::new()),
    })
}

impl Wire {
    fn write(&self, frame_type: &str, value: &Value) {
        let mut stdout = self.stdout.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(decoy) = decoy_for(frame_type, value) {
            write_line(&mut stdout, &line_of(&decoy));
            journal::record(Event::frame("raw"));
        }
        if matches!(frame_type, "response" | "error") && STRAYS.load(Ordering::SeqCst) {
            stdout.write_bytes(&line_of(&stray_before(value)));
            journal::record(Event::frame("raw"));
        }
        write_line(&mut stdout, &line_of(value));
        journal::record(Event::frame(frame_type));
    }

    /// A notification.
    pub fn notify(&self, method: &str, params: Value) {
        self.write(
            method,
            &json!({"jsonrpc": "2.0", "method": method, "params": params}),
        );
    }

    /// A successful response.
    pub fn respond(&self, id: &Value, result: Value) {
        self.write(
            "response",
            &json!({"jsonrpc": "2.0", "id": id, "result": result}),
        );
    }

    /// An error response (always `-32603`, as the real runtime answers every failure).
    pub fn fail(&self, id: &Value, message: &str) {
        self.write(
            "error",
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": INTERNAL_ERROR, "message": message}}),
        );
    }

    /// Raw bytes (a scenario's junk lines).
    pub fn raw(&self, bytes: &[u8]) {
        let mut stdout = self.stdout.lock().unwrap_or_else(|p| p.into_inner());
        stdout.write_bytes(bytes);
        journal::record(Event::frame("raw"));
    }

    /// Writes `last` (if any) and ends the process with `code`, holding the lock so no other
    /// frame starts after it.
    pub fn end(&self, last: Option<(&Value, Value)>, code: i32, reason: ExitReason) -> ! {
        let mut stdout = self.stdout.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((id, result)) = last {
            let frame = json!({"jsonrpc": "2.0", "id": id, "result": result});
            write_line(&mut stdout, &line_of(&frame));
            journal::record(Event::frame("response"));
        }
        finish(code, reason)
    }
}
