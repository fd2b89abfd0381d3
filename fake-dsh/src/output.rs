//! Stdout and stderr as the host sees them: each frame in one `write`, drips in small writes,
//! huge repeats streamed in chunks. A broken stdout pipe ends the process quietly.

use crate::journal::{self, Event, ExitReason};
use crate::process::finish;
use serde_json::Value;
use std::fs::File;
use std::io::Write;
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;
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

    /// Writes one frame as a JSON line in one `write`, journaling its type.
    pub fn write_frame(&mut self, frame: &Value) {
        let line = frame_line(frame);
        self.write_bytes(&line);
        journal::record(Event::Frame {
            frame_type: crate::frames::frame_type(frame),
        });
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
