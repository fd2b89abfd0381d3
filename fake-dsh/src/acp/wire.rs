//! The ACP agent's stdout: every frame one line (`JSON.stringify` + `\n`, non-ASCII and
//! U+2028/U+2029 raw, F2.1) in one `write` under one lock, journaled as a `frame` entry named
//! after the method (`session/update`, `session/request_permission`) or `response` / `error`.
//! After a batch line the connection is closed (F2.5): nothing is written any more. Once the
//! process has decided to end ([`Wire::end`]), nothing more is written either.

use crate::journal::{self, Event, ExitReason};
use crate::output::Stdout;
use crate::process::finish;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

/// JSON-RPC's error codes as the agent's SDK uses them.
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
}

/// The process's stdout, shared by the request loop and the turn threads.
pub struct Wire {
    stdout: Mutex<Stdout>,
    closed: AtomicBool,
}

/// The process-wide wire.
pub fn wire() -> &'static Wire {
    static WIRE: OnceLock<Wire> = OnceLock::new();
    WIRE.get_or_init(|| Wire {
        stdout: Mutex::new(Stdout::new()),
        closed: AtomicBool::new(false),
    })
}

/// One frame's bytes, newline-terminated.
fn line_of(value: &Value) -> Vec<u8> {
    let mut line = serde_json::to_vec(value).expect("frames serialize");
    line.push(b'\n');
    line
}

impl Wire {
    fn write(&self, frame_type: &str, value: &Value) {
        let mut stdout = self.stdout.lock().unwrap_or_else(|p| p.into_inner());
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        stdout.write_bytes(&line_of(value));
        journal::record(Event::frame(frame_type));
    }

    /// A notification (`session/update`).
    pub fn notify(&self, method: &str, params: Value) {
        self.write(
            method,
            &json!({"jsonrpc": "2.0", "method": method, "params": params}),
        );
    }

    /// A request of the agent's own (`session/request_permission`).
    pub fn request(&self, id: &Value, method: &str, params: Value) {
        self.write(
            method,
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        );
    }

    /// A successful response.
    pub fn respond(&self, id: &Value, result: Value) {
        self.write(
            "response",
            &json!({"jsonrpc": "2.0", "id": id, "result": result}),
        );
    }

    /// An error response; `data` only when given.
    pub fn fail(&self, id: &Value, code: i64, message: &str, data: Option<Value>) {
        let mut error = json!({"code": code, "message": message});
        if let Some(data) = data {
            error["data"] = data;
        }
        self.write(
            "error",
            &json!({"jsonrpc": "2.0", "id": id, "error": error}),
        );
    }

    /// A raw line (a scenario's injected junk), newline added.
    pub fn raw_line(&self, text: &str) {
        let mut stdout = self.stdout.lock().unwrap_or_else(|p| p.into_inner());
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        stdout.write_bytes(format!("{text}\n").as_bytes());
        journal::record(Event::frame("raw"));
    }

    /// Closes the connection (a batch arrived): nothing is written from now on.
    pub fn close(&self) {
        let _stdout = self.stdout.lock().unwrap_or_else(|p| p.into_inner());
        self.closed.store(true, Ordering::SeqCst);
    }

    /// Whether the connection is closed.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Writes `last` (responses, unless the connection is closed) and ends the process with
    /// `code`, holding the lock so no other frame starts after them.
    pub fn end(&self, last: &[(Value, Value)], code: i32, reason: ExitReason) -> ! {
        let mut stdout = self.stdout.lock().unwrap_or_else(|p| p.into_inner());
        if !self.closed.load(Ordering::SeqCst) {
            for (id, result) in last {
                let frame = json!({"jsonrpc": "2.0", "id": id, "result": result});
                stdout.write_bytes(&line_of(&frame));
                journal::record(Event::frame("response"));
            }
        }
        finish(code, reason)
    }
}
