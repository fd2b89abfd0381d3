//! Stdout and stderr as the host sees them: each frame in one `write`, drips in small writes,
//! huge repeats streamed in chunks. A broken stdout pipe ends the process quietly.

use crate::journal::{self, Event, ExitReason};
use crate::process::finish;
use serde_json::Value;
use std::fs::File;
use std::io::Write;
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;
use std::sync::MutexGuard;
use std::time::Duration;

/// The exit code after stdout broke (as if SIGPIPE had ended the process).
pub const BROKEN_PIPE_EXIT_CODE: i32 = 141;
const CHUNK_BYTES: usize = 64 * 1024;

/// Writes straight to file descriptor 1, bypassing std's line buffering, so one call is one
/// `write` (short writes are completed by `write_all`).
pub struct Stdout {
    fd: ManuallyDrop<File>,
}

impl Default for Stdout {
    fn default() -> Self {
        Stdout::new()
    }
}

impl Stdout {
    pub fn new() -> Stdout {
        // SAFETY: fd 1 stays open for the whole process; ManuallyDrop never closes it.
        let fd = ManuallyDrop::new(unsafe { File::from_raw_fd(1) });
        Stdout { fd }
    }

    /// Writes bytes in one call; a failure (EPIPE or any other) ends the process quietly.
    pub fn write_bytes(&mut self, bytes: &[u8]) {
        if let Err(error) = self.fd.write_all(bytes) {
            if error.kind() != std::io::ErrorKind::BrokenPipe {
                eprintln!("fake-dsh: stdout failed: {error}");
            }
            finish(BROKEN_PIPE_EXIT_CODE, ExitReason::Error);
        }
    }

    /// Writes one frame as a JSON line in one `write`, journaling it (see [`FrameEntries`]).
    pub fn write_frame(&mut self, frame: &Value) {
        let entries = FrameEntries::before_writing(&[Some(frame.clone())]);
        self.write_bytes(&frame_line(frame));
        entries.record();
    }

    /// Writes bytes `chunk` at a time with a pause between writes.
    pub fn drip(&mut self, bytes: &[u8], chunk: usize, delay: Duration) {
        for (index, piece) in bytes.chunks(chunk.max(1)).enumerate() {
            if index > 0 && !delay.is_zero() {
                std::thread::sleep(delay);
            }
            self.write_bytes(piece);
        }
    }

    /// Streams `text` repeated up to exactly `bytes` bytes (cut at a byte boundary), in chunks,
    /// then an optional newline.
    pub fn repeat(&mut self, text: &str, bytes: u64, newline: bool) {
        let unit = if text.is_empty() { "x" } else { text };
        let mut chunk = Vec::with_capacity(CHUNK_BYTES + unit.len());
        while chunk.len() < CHUNK_BYTES {
            chunk.extend_from_slice(unit.as_bytes());
        }
        let period = unit.len();
        let mut written: u64 = 0;
        while written < bytes {
            let offset = (written % period as u64) as usize;
            let take = ((bytes - written) as usize).min(chunk.len() - period);
            self.write_bytes(&chunk[offset..offset + take]);
            written += take as u64;
        }
        if newline {
            self.write_bytes(b"\n");
        }
    }
}

/// The journal `frame` entries of bytes about to be written, one per frame (`None`: raw bytes).
/// When one is a `ready`, whether stdin already had input is checked now, and the stdin reader
/// is held off until the entries are recorded (after the write).
pub struct FrameEntries {
    events: Vec<Event>,
    _stdin_gate: Option<MutexGuard<'static, ()>>,
}

impl FrameEntries {
    pub fn before_writing(frames: &[Option<Value>]) -> FrameEntries {
        let mut stdin_gate = None;
        let events = frames
            .iter()
            .map(|frame| match frame {
                None => Event::frame("raw"),
                Some(frame) => {
                    let mut event = frame_event(frame);
                    if let Event::Frame {
                        frame_type,
                        stdin_pending,
                        ..
                    } = &mut event
                    {
                        if frame_type == "ready" && stdin_gate.is_none() {
                            let (pending, gate) = crate::inbox::stdin_pending();
                            *stdin_pending = Some(pending);
                            stdin_gate = Some(gate);
                        }
                    }
                    event
                }
            })
            .collect();
        FrameEntries {
            events,
            _stdin_gate: stdin_gate,
        }
    }

    /// Records the entries (the bytes were written), then lets the stdin reader go on.
    pub fn record(self) {
        for event in self.events {
            journal::record(event);
        }
    }
}

/// The journal entry of one frame: its type, plus its error `code` (a `result` with an `error`,
/// a `protocol_error`) and `empty: true` (a `thinking`/`text` with empty `content`). Never the
/// frame's text.
pub fn frame_event(frame: &Value) -> Event {
    let frame_type = crate::frames::frame_type(frame);
    let code = match frame_type.as_str() {
        "result" => frame.pointer("/error/code"),
        "protocol_error" => frame.get("code"),
        _ => None,
    }
    .and_then(Value::as_str)
    .map(str::to_string);
    let empty = (matches!(frame_type.as_str(), "thinking" | "text")
        && frame.get("content").and_then(Value::as_str) == Some(""))
    .then_some(true);
    Event::Frame {
        frame_type,
        stdin_pending: None,
        code,
        empty,
    }
}

/// A frame serialized as one newline-terminated line.
pub fn frame_line(frame: &Value) -> Vec<u8> {
    let mut line = serde_json::to_vec(frame).expect("JSON values always serialize");
    line.push(b'\n');
    line
}

/// Writes to stderr, ignoring failures (a closed stderr must not end a scripted run).
pub fn stderr_bytes(bytes: &[u8]) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(bytes);
    let _ = stderr.flush();
}

/// Writes `bytes` bytes of filler lines to stderr in chunks (blocking while nobody drains it).
pub fn stderr_flood(bytes: u64) {
    let line =
        b"fake-dsh: stderr flood filler line ..............................................\n";
    let mut chunk = Vec::with_capacity(CHUNK_BYTES + line.len());
    while chunk.len() < CHUNK_BYTES {
        chunk.extend_from_slice(line);
    }
    let mut stderr = std::io::stderr().lock();
    let mut written: u64 = 0;
    while written < bytes {
        let take = ((bytes - written) as usize).min(CHUNK_BYTES);
        if stderr.write_all(&chunk[..take]).is_err() {
            return;
        }
        written += take as u64;
    }
    let _ = stderr.flush();
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_frame_line_is_compact_json_and_one_newline() {
        assert_eq!(frame_line(&json!({"v": 1})), b"{\"v\":1}\n".to_vec());
    }
}
