//! The driver client: starts a host driver in its own process group with the case's env, speaks
//! the driver protocol (docs/host-driver.md) with it, validates every message against
//! `schemas/driver/`, and bounds everything a hostile driver can do (time, output, exit).

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::transcript::Transcript;

/// The most a driver may write to stdout over its life.
pub const MAX_DRIVER_STDOUT: usize = 16 * 1024 * 1024;
/// The longest single reply line.
pub const MAX_REPLY_LINE: usize = 2 * 1024 * 1024;
/// How much of the driver's stderr the harness keeps (it drains and scans all of it).
pub const KEPT_DRIVER_STDERR: usize = 64 * 1024;
/// The most a driver may write to stderr over its life; more is a host failure (it is still
/// drained, so the driver never blocks on it).
pub const MAX_DRIVER_STDERR: usize = 16 * 1024 * 1024;

/// Whether the run was interrupted (`dsh_engine::interrupt`): the cases that were in flight
/// are interrupted, and no driver starts.
pub fn interrupted() -> bool {
    dsh_engine::interrupt::interrupted()
}

/// How to start a driver.
#[derive(Debug, Clone)]
pub struct DriverSpec {
    pub command: Vec<String>,
    pub cwd: PathBuf,
    /// The driver's whole environment (`dsh_engine::child_env`: the allowed variables of the caller,
    /// then the case's; a later entry wins).
    pub env: Vec<(String, String)>,
    /// Byte strings that must never appear in the driver's stderr: (what it is, the bytes).
    pub stderr_needles: Vec<(String, Vec<u8>)>,
    /// A soft `RLIMIT_FSIZE` for the driver and what it starts (a `crash_mid_save` step): a write
    /// past it fails part-way (`SIGXFSZ`, or `EFBIG` where that is ignored). The runtime takes
    /// its limit back (the world's `bin/dsh`, and fake-dsh itself). Also no core file. `None`: the
    /// limits the harness has.
    pub fsize_limit: Option<u64>,
}

/// What went wrong talking to the driver; always the host's fault except [`DriverError::Kit`].
#[derive(Debug, Clone, PartialEq)]
pub enum DriverError {
    /// No reply before the case's deadline.
    Timeout(String),
    /// The driver's stdout ended (it exited or closed it).
    Exited(String),
    /// A reply that is not JSON, fails reply.schema.json, or breaks the protocol.
    Invalid(String),
    /// The driver could not be started or written to.
    Io(String),
    /// The harness built a request its own schema rejects.
    Kit(String),
    /// The driver exited (or closed its stdout) before its first reply of the case, the
    /// handshake's aside: the driver contract, whatever the case is about.
    ExitedBeforeReply(EarlyExit),
}

/// A driver gone before its first reply: what happened, and the stderr it had written (its first
/// [`KEPT_DRIVER_STDERR`] bytes since the case began; unredacted: the caller redacts it).
#[derive(Debug, Clone, PartialEq)]
pub struct EarlyExit {
    /// `the host exited before its first reply (exit status 1) while waiting for ...`.
    pub why: String,
    pub stderr: Vec<u8>,
}

/// How long a driver that exited has to finish writing its stderr before it is read for an
/// [`EarlyExit`] (a grandchild holding the pipe open is not waited for).
const EARLY_EXIT_STDERR_WAIT: Duration = Duration::from_millis(500);

enum StdoutMessage {
    Line(Vec<u8>),
    TooLong,
    Overflow,
    Eof,
}

/// Everything the stderr reader saw (since the case began, for a reused driver).
#[derive(Debug, Default)]
pub struct StderrCapture {
    pub kept: Vec<u8>,
    pub total: usize,
    /// Labels of the needles found.
    pub hits: Vec<String>,
    /// The reader reached EOF (everything the driver's group wrote has been scanned).
    pub finished: bool,
    /// What the reader looks for: (label, needle as text, the needle's distinct bytes).
    needles: Arc<Vec<(String, String, Vec<u8>)>>,
}

/// Needles (with their encoded forms) prepared for the stderr scan.
fn prepared(needles: &[(String, Vec<u8>)]) -> Arc<Vec<(String, String, Vec<u8>)>> {
    let prepared = with_encoded_forms(needles)
        .into_iter()
        .map(|(label, needle)| {
            let mut bytes = needle.clone();
            bytes.sort_unstable();
            bytes.dedup();
            (label, String::from_utf8_lossy(&needle).into_owned(), bytes)
        })
        .collect();
    Arc::new(prepared)
}

/// A running driver. Dropping it kills its process group and reaps it.
pub struct Driver {
    child: Child,
    pgid: Pid,
    stdin: Option<ChildStdin>,
    stdout: Receiver<StdoutMessage>,
    stderr: Arc<Mutex<StderrCapture>>,
    line_number: usize,
    stdout_ended: bool,
    /// Whether the driver has written a reply (other than a handshake or `case_ready`) since it
    /// started or began its current case.
    replied: bool,
    /// Whether a line the driver wrote held this needle (the canary), by label.
    stdout_needles: Vec<(String, Vec<u8>)>,
    pub stdout_hits: Vec<String>,
    reaped: bool,
}

/// Lowers the child's soft `RLIMIT_FSIZE` to `limit` bytes (never above the hard limit, which
/// stays, so the child may raise it back) and its soft `RLIMIT_CORE` to 0 (a `SIGXFSZ` leaves no
/// core file).
fn limit_file_size(command: &mut Command, limit: u64) {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let lower = |resource: Resource, soft: u64| -> std::io::Result<()> {
        let (_, hard) = getrlimit(resource)?;
        setrlimit(resource, soft.min(hard), hard)?;
        Ok(())
    };
    // SAFETY: the closure runs between fork and exec and makes only async-signal-safe calls
    // (getrlimit, setrlimit).
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(command, move || {
            lower(Resource::RLIMIT_FSIZE, limit)?;
            lower(Resource::RLIMIT_CORE, 0)
        });
    }
}

impl Driver {
    pub fn start(
        spec: &DriverSpec,
        stdout_needles: Vec<(String, Vec<u8>)>,
    ) -> Result<Driver, DriverError> {
        let (program, args) = spec
            .command
            .split_first()
            .ok_or_else(|| DriverError::Kit("empty host command".to_string()))?;
        let mut command = Command::new(program);
        command
            .args(args)
            .current_dir(&spec.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command.env_clear();
        command.envs(spec.env.iter().map(|(k, v)| (k, v)));
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        if let Some(limit) = spec.fsize_limit {
            limit_file_size(&mut command, limit);
        }
        // Under the registry's lock: a stop signal either sees this driver's group or stops it.
        let mut groups = dsh_engine::interrupt::live_groups();
        if groups.interrupted() {
            return Err(DriverError::Kit("the run was interrupted".to_string()));
        }
        let mut child = command
            .spawn()
            .map_err(|e| DriverError::Io(format!("cannot start the driver {}: {e}", program)))?;
        let pgid = Pid::from_raw(child.id() as i32);
        groups.add(pgid.as_raw());
        drop(groups);
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| DriverError::Kit("driver stdout not piped".to_string()))?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| DriverError::Kit("driver stderr not piped".to_string()))?;
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || read_stdout(stdout, sender));
        let capture = Arc::new(Mutex::new(StderrCapture {
            needles: prepared(&spec.stderr_needles),
            ..StderrCapture::default()
        }));
        let stdout_needles = with_encoded_forms(&stdout_needles);
        let sink = Arc::clone(&capture);
        std::thread::spawn(move || read_stderr(stderr, sink));
        Ok(Driver {
            stdin: child.stdin.take(),
            child,
            pgid,
            stdout: receiver,
            stderr: capture,
            line_number: 0,
            stdout_ended: false,
            replied: false,
            stdout_needles,
            stdout_hits: Vec::new(),
            reaped: false,
        })
    }

    /// The driver's process id.
    pub fn pid(&self) -> i32 {
        self.pgid.as_raw()
    }

    /// A reused driver begins serving another case: from now on its stderr and stdout are
    /// scanned for that case's needles, and what was kept or found before is dropped.
    pub fn begin_case(
        &mut self,
        stderr_needles: &[(String, Vec<u8>)],
        stdout_needles: &[(String, Vec<u8>)],
    ) {
        let mut capture = self.stderr();
        capture.kept.clear();
        capture.total = 0;
        capture.hits.clear();
        capture.needles = prepared(stderr_needles);
        drop(capture);
        self.stdout_needles = with_encoded_forms(stdout_needles);
        self.stdout_hits.clear();
        self.replied = false;
    }

    /// The error for a driver whose stdout is gone: before its first reply an [`EarlyExit`]
    /// (`when`: what the harness was doing) with its stderr, after it [`DriverError::Exited`]
    /// saying `after_reply`.
    fn gone(&mut self, when: String, after_reply: String) -> DriverError {
        if self.replied {
            return DriverError::Exited(after_reply);
        }
        let status = self.exit_status_within(Duration::from_millis(200));
        let gone = if status == "still running" {
            "closed its stdout"
        } else {
            "exited"
        };
        self.wait_stderr_drained(EARLY_EXIT_STDERR_WAIT);
        DriverError::ExitedBeforeReply(EarlyExit {
            why: format!("the host {gone} before its first reply ({status}) {when}"),
            stderr: self.stderr().kept.clone(),
        })
    }

    /// Sends one request (checked against request.schema.json first).
    pub fn send(
        &mut self,
        request: &Value,
        transcript: &mut Transcript,
    ) -> Result<(), DriverError> {
        if let Err(errors) = dsh_protocol::schema::validate("driver/request.schema.json", request) {
            let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
            return Err(DriverError::Kit(format!(
                "the harness built an invalid request {request}: {}",
                errors.join("; ")
            )));
        }
        let line = format!("{request}\n");
        transcript.push(format!("> {request}"));
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| DriverError::Io("driver stdin already closed".to_string()))?;
        let written = stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.flush());
        written.map_err(|e| {
            let kind = kind_of(request);
            let when = format!("(the harness could not write {kind} to it: {e})");
            self.gone(when, format!("cannot write {kind} to the driver: {e}"))
        })
    }

    /// The next reply, schema-checked, before `deadline`.
    pub fn recv(
        &mut self,
        deadline: Instant,
        waiting_for: &str,
        transcript: &mut Transcript,
    ) -> Result<Value, DriverError> {
        if self.stdout_ended {
            let after = format!("the driver's stdout had ended while waiting for {waiting_for}");
            return Err(self.gone(format!("while waiting for {waiting_for}"), after));
        }
        let timeout = deadline.saturating_duration_since(Instant::now());
        let message = match self.stdout.recv_timeout(timeout) {
            Ok(message) => message,
            Err(RecvTimeoutError::Timeout) => {
                return Err(DriverError::Timeout(format!(
                    "no reply from the driver while waiting for {waiting_for}"
                )))
            }
            Err(RecvTimeoutError::Disconnected) => StdoutMessage::Eof,
        };
        match message {
            StdoutMessage::Line(bytes) => {
                self.line_number += 1;
                let number = self.line_number;
                let line = leak_scanned_text(&bytes);
                for (label, needle) in &self.stdout_needles {
                    if !self.stdout_hits.contains(label)
                        && line.contains(String::from_utf8_lossy(needle).as_ref())
                    {
                        self.stdout_hits.push(label.clone());
                    }
                }
                let text = String::from_utf8_lossy(&bytes);
                transcript.push(format!("< {text}"));
                let kind = serde_json::from_slice::<Value>(&bytes)
                    .ok()
                    .map(|v| kind_of(&v));
                if !matches!(kind.as_deref(), Some("handshake" | "case_ready")) {
                    self.replied = true;
                }
                let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
                    DriverError::Invalid(format!(
                        "driver stdout line {number} is not JSON ({e}): {}",
                        clip(&text, 120)
                    ))
                })?;
                if let Err(errors) =
                    dsh_protocol::schema::validate("driver/reply.schema.json", &value)
                {
                    let errors: Vec<String> =
                        errors.iter().take(3).map(ToString::to_string).collect();
                    return Err(DriverError::Invalid(format!(
                        "driver stdout line {number} fails driver/reply.schema.json: {}",
                        errors.join("; ")
                    )));
                }
                Ok(value)
            }
            StdoutMessage::TooLong => {
                self.stdout_ended = true;
                Err(DriverError::Invalid(format!(
                    "a driver reply line is longer than {MAX_REPLY_LINE} bytes"
                )))
            }
            StdoutMessage::Overflow => {
                self.stdout_ended = true;
                Err(DriverError::Invalid(format!(
                    "the driver wrote more than {MAX_DRIVER_STDOUT} bytes to stdout"
                )))
            }
            StdoutMessage::Eof => {
                self.stdout_ended = true;
                let when = format!("while waiting for {waiting_for}");
                if !self.replied {
                    return Err(self.gone(when, String::new()));
                }
                let status = self.exit_status_within(Duration::from_millis(200));
                Err(DriverError::Exited(format!(
                    "the driver ended its stdout ({status}) {when}"
                )))
            }
        }
    }

    /// `shutdown` -> `bye` -> exit 0 within `bound`; the group is killed and reaped in any case.
    pub fn shutdown(
        &mut self,
        bound: Duration,
        transcript: &mut Transcript,
    ) -> Result<(), DriverError> {
        let deadline = Instant::now() + bound;
        let result = self.shutdown_inner(deadline, transcript);
        self.kill();
        result
    }

    fn shutdown_inner(
        &mut self,
        deadline: Instant,
        transcript: &mut Transcript,
    ) -> Result<(), DriverError> {
        self.send(&serde_json::json!({"v": 1, "type": "shutdown"}), transcript)?;
        let reply = self.recv(deadline, "bye", transcript)?;
        if reply.get("type").and_then(Value::as_str) != Some("bye") {
            return Err(DriverError::Invalid(format!(
                "the driver answered shutdown with {} instead of bye",
                kind_of(&reply)
            )));
        }
        self.stdin = None;
        match self.wait_exit(deadline) {
            Some(0) => Ok(()),
            Some(code) => Err(DriverError::Invalid(format!(
                "the driver exited with status {code} after bye (expected 0)"
            ))),
            None => Err(DriverError::Timeout(
                "the driver did not exit after bye".to_string(),
            )),
        }
    }

    /// Waits (on Linux without reaping, so the group id stays reserved) for the driver to exit.
    fn wait_exit(&mut self, deadline: Instant) -> Option<i32> {
        loop {
            match self.exit_status_now() {
                Ok(Some(code)) => return Some(code),
                Ok(None) => {}
                Err(()) => return None,
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The driver's exit status (`128 + n` for a signal) if it has exited, leaving it unreaped.
    #[cfg(target_os = "linux")]
    fn exit_status_now(&mut self) -> Result<Option<i32>, ()> {
        use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
        match waitid(
            Id::Pid(self.pgid),
            WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT,
        ) {
            Ok(WaitStatus::Exited(_, code)) => Ok(Some(code)),
            Ok(WaitStatus::Signaled(_, signal, _)) => Ok(Some(128 + signal as i32)),
            Ok(_) => Ok(None),
            Err(_) => Err(()),
        }
    }

    /// The driver's exit status (`128 + n` for a signal) if it has exited. macOS has no
    /// `WNOWAIT` through nix, so the driver is reaped here; the group id stays reserved while any
    /// member of the group lives, which is all the later group kill needs.
    #[cfg(not(target_os = "linux"))]
    fn exit_status_now(&mut self) -> Result<Option<i32>, ()> {
        use std::os::unix::process::ExitStatusExt;
        match self.child.try_wait() {
            Ok(Some(status)) => Ok(status
                .code()
                .or_else(|| status.signal().map(|signal| 128 + signal))),
            Ok(None) => Ok(None),
            Err(_) => Err(()),
        }
    }

    pub fn exit_status_within(&mut self, bound: Duration) -> String {
        match self.wait_exit(Instant::now() + bound) {
            Some(code) => format!("exit status {code}"),
            None => "still running".to_string(),
        }
    }

    /// Kills the whole process group and reaps the driver. The signal comes before its stdin is
    /// closed, so a driver never sees EOF first and exits its own way (a `restart` with `kill` is a
    /// crash: nothing the driver runs at exit may run).
    pub fn kill(&mut self) {
        if self.reaped {
            return;
        }
        let _ = killpg(self.pgid, Signal::SIGKILL);
        self.stdin = None;
        dsh_engine::interrupt::forget_group(self.pgid.as_raw());
        let _ = self.child.wait();
        self.reaped = true;
    }

    /// Waits up to `bound` for the stderr reader to reach EOF (after [`Driver::kill`]).
    pub fn wait_stderr_drained(&self, bound: Duration) {
        let deadline = Instant::now() + bound;
        while !self.stderr().finished && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn stderr(&self) -> std::sync::MutexGuard<'_, StderrCapture> {
        self.stderr
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.kill();
    }
}

fn kind_of(message: &Value) -> String {
    message
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("a message")
        .to_string()
}

pub fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &text[..end], text.len())
}

pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty()
        && haystack
            .windows(needle.len())
            .any(|window| window == needle)
}

fn read_stdout(stdout: impl Read, sender: mpsc::Sender<StdoutMessage>) {
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut total = 0usize;
    let mut line = Vec::new();
    loop {
        let buffer = match reader.fill_buf() {
            Ok([]) | Err(_) => break,
            Ok(buffer) => buffer,
        };
        let (chunk, consumed, complete) = match buffer.iter().position(|b| *b == b'\n') {
            Some(end) => (&buffer[..end], end + 1, true),
            None => (buffer, buffer.len(), false),
        };
        total += consumed;
        if total > MAX_DRIVER_STDOUT {
            let _ = sender.send(StdoutMessage::Overflow);
            return;
        }
        if line.len() + chunk.len() > MAX_REPLY_LINE {
            let _ = sender.send(StdoutMessage::TooLong);
            return;
        }
        line.extend_from_slice(chunk);
        reader.consume(consumed);
        if complete {
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if !line.iter().all(u8::is_ascii_whitespace)
                && sender
                    .send(StdoutMessage::Line(std::mem::take(&mut line)))
                    .is_err()
            {
                return;
            }
            line.clear();
        }
    }
    if !line.iter().all(u8::is_ascii_whitespace) {
        let _ = sender.send(StdoutMessage::Line(line));
    }
    let _ = sender.send(StdoutMessage::Eof);
}

/// The part of a driver stdout line the leak scan reads: all of it, except the `delta` of a
/// `text_delta` or `thinking_delta` event, which relays the runtime's model output (spec 9) and
/// is not the host logging a credential (spec 14 is about logs, stderr and argv): a runtime text
/// frame that contains the key must be relayed, not blamed on the host.
fn leak_scanned_text(bytes: &[u8]) -> String {
    let relayed = |value: &Value| {
        value.get("type").and_then(Value::as_str) == Some("event")
            && matches!(
                value.pointer("/event/type").and_then(Value::as_str),
                Some("text_delta" | "thinking_delta")
            )
    };
    match serde_json::from_slice::<Value>(bytes) {
        Ok(mut value) if relayed(&value) => {
            if let Some(event) = value.get_mut("event").and_then(Value::as_object_mut) {
                event.remove("delta");
            }
            value.to_string()
        }
        _ => String::from_utf8_lossy(bytes).into_owned(),
    }
}

/// Each labelled needle plus its encoded forms (base64 in any alignment, percent, JSON escapes,
/// hex: `dsh_protocol::needles`), labelled `LABEL (ENCODING)`, so a driver that logs the canary
/// or a prompt encoded is caught too. The stderr scan keeps a tail of the longest form between
/// reads, so a form split across two writes is found.
fn with_encoded_forms(needles: &[(String, Vec<u8>)]) -> Vec<(String, Vec<u8>)> {
    let mut expanded = Vec::new();
    for (label, needle) in needles {
        let Ok(text) = std::str::from_utf8(needle) else {
            expanded.push((label.clone(), needle.clone()));
            continue;
        };
        for form in dsh_protocol::needles::encoded_forms(text) {
            let label = match form.encoding {
                "raw" => label.clone(),
                encoding => format!("{label} ({encoding})"),
            };
            expanded.push((label, form.bytes));
        }
    }
    expanded
}

fn read_stderr(mut stderr: impl Read, capture: Arc<Mutex<StderrCapture>>) {
    // Searched as text with std's substring search, fast enough to keep up with a flood of
    // many needle forms (a lossy conversion keeps every valid run, so no match is lost).
    // A needle is searched for only when every byte it is made of occurs in the tail, so a
    // flood of few distinct bytes costs one pass per read, whatever the number of forms.
    let mut tail: Vec<u8> = Vec::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = match stderr.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        let chunk = &buffer[..read];
        tail.extend_from_slice(chunk);
        let mut capture = capture
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let needles = Arc::clone(&capture.needles);
        capture.total += read;
        let room = KEPT_DRIVER_STDERR.saturating_sub(capture.kept.len());
        capture.kept.extend_from_slice(&chunk[..room.min(read)]);
        let mut present = [false; 256];
        tail.iter()
            .for_each(|byte| present[usize::from(*byte)] = true);
        let text = String::from_utf8_lossy(&tail);
        for (label, needle, bytes) in needles.iter() {
            if bytes.iter().all(|byte| present[usize::from(*byte)])
                && !capture.hits.contains(label)
                && text.contains(needle.as_str())
            {
                capture.hits.push(label.clone());
            }
        }
        drop(capture);
        let overlap = needles
            .iter()
            .map(|(_, needle, _)| needle.len())
            .max()
            .unwrap_or(0);
        if tail.len() > overlap {
            tail.drain(..tail.len() - overlap);
        }
    }
    capture
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .finished = true;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_size_limit_stops_a_write_part_way_and_a_child_can_lift_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        // A child under the limit: its write of 1000 bytes stops at the limit, and its own
        // limits (read from /proc) show the soft limit lowered and the hard one untouched, so
        // the child (fake-dsh, the runtime's wrapper) may raise its soft limit back.
        let run = |limit: Option<u64>, name: &str| {
            let file = dir.path().join(name);
            let mut command = Command::new("sh");
            command
                .args([
                    "-c",
                    "head -c 1000 /dev/zero > \"$1\"; cat /proc/self/limits",
                    "sh",
                ])
                .arg(&file);
            if let Some(limit) = limit {
                limit_file_size(&mut command, limit);
            }
            let output = command.output().expect("sh runs");
            let limits = String::from_utf8_lossy(&output.stdout).into_owned();
            let size = std::fs::metadata(&file).map_or(0, |m| m.len());
            (size, file_size_limits(&limits))
        };
        let parent = file_size_limits(&std::fs::read_to_string("/proc/self/limits").unwrap());
        let (free, free_limits) = run(None, "free");
        assert_eq!((free, free_limits), (1000, parent.clone()));
        let (cut, cut_limits) = run(Some(300), "limited");
        assert_eq!(cut, 300, "the write stops at the limit");
        assert_eq!(
            cut_limits,
            ("300".to_string(), parent.1),
            "soft lowered, hard untouched"
        );
    }

    /// The soft and hard "Max file size" of a `/proc/<pid>/limits` text.
    fn file_size_limits(limits: &str) -> (String, String) {
        let line = limits
            .lines()
            .find(|line| line.starts_with("Max file size"))
            .expect("a file size line");
        let mut fields = line["Max file size".len()..].split_whitespace();
        let soft = fields.next().unwrap_or_default().to_string();
        let hard = fields.next().unwrap_or_default().to_string();
        (soft, hard)
    }

    /// A reader that returns one chunk per `read`, like separate writes on a pipe.
    struct Writes(Vec<Vec<u8>>);

    impl Read for Writes {
        fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
            if self.0.is_empty() {
                return Ok(0);
            }
            let chunk = self.0.remove(0);
            buffer[..chunk.len()].copy_from_slice(&chunk);
            Ok(chunk.len())
        }
    }

    fn hits(writes: &[&str]) -> Vec<String> {
        let capture = Arc::new(Mutex::new(StderrCapture {
            needles: prepared(&[(
                "the canary credential".to_string(),
                b"sk-canary-0123456789abcdef".to_vec(),
            )]),
            ..StderrCapture::default()
        }));
        let writes = writes.iter().map(|w| w.as_bytes().to_vec()).collect();
        read_stderr(Writes(writes), Arc::clone(&capture));
        let capture = capture.lock().unwrap();
        assert!(capture.finished);
        capture.hits.clone()
    }

    #[test]
    fn relayed_model_text_is_not_scanned_but_everything_else_is() {
        let key = "sk-canary-0123456789abcdef";
        let relayed = format!(
            r#"{{"v":1,"type":"event","id":"r1","event":{{"type":"text_delta","delta":"the key is {key}"}}}}"#
        );
        assert!(!leak_scanned_text(relayed.as_bytes()).contains(key));
        let logged = format!(
            r#"{{"v":1,"type":"event","id":"r1","event":{{"type":"status","label":"{key}"}}}}"#
        );
        assert!(leak_scanned_text(logged.as_bytes()).contains(key));
        let outcome = format!(r#"{{"v":1,"type":"outcome","id":"r1","stderr":"{key}"}}"#);
        assert!(leak_scanned_text(outcome.as_bytes()).contains(key));
        assert!(leak_scanned_text(format!("not json {key}").as_bytes()).contains(key));
    }

    #[test]
    fn encoded_and_split_secrets_on_stderr_are_found() {
        assert_eq!(
            hits(&["auth: c2stY2FuYXJ5LTAxMjM0NTY3ODlhYmNkZWY=\n"]),
            ["the canary credential (base64)"]
        );
        assert_eq!(
            hits(&["key=sk%2Dcanary%2D0123456789abcdef\n"]),
            ["the canary credential (percent-encoded)"]
        );
        assert_eq!(
            hits(&["key=sk-canary-01234", "56789abcdef\n"]),
            ["the canary credential"]
        );
        assert!(hits(&["nothing to see\n"]).is_empty());
    }
}
