//! Host commands from stdin: a background thread reads lines (bounded), journals each one, and
//! hands them to the main thread, which waits on them with timeouts. The lines one read of stdin
//! completes are handed over together, so a command the host wrote with another (a second
//! `execute` in the same write as the first) is there as soon as the first is, however late the
//! reader thread runs on a busy machine.

use crate::journal::{self, Event};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use serde_json::Value;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::mem::ManuallyDrop;
use std::os::fd::{AsFd, FromRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The longest command line kept; the rest of a longer line is discarded.
pub const MAX_COMMAND_BYTES: usize = 16 * 1024 * 1024;

/// One thing that arrived on stdin.
#[derive(Debug, Clone, PartialEq)]
pub enum Inbound {
    /// A line that parsed as a JSON object.
    Command(Value),
    /// A line that did not (lossily decoded, line ending removed).
    Unparseable(String),
    /// Stdin reached EOF (or failed).
    Closed,
}

/// What waiting for the next command produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Wait {
    Got(Inbound),
    TimedOut,
}

/// The main thread's end of the stdin reader.
pub struct Inbox {
    receiver: Option<Receiver<Vec<Inbound>>>,
    /// The rest of the last batch received.
    arrived: std::collections::VecDeque<Inbound>,
    closed: bool,
}

/// Parses one stdin line (without its terminator) into what the inbox reports and the journal
/// records.
pub fn classify_line(line: &[u8]) -> Inbound {
    match serde_json::from_slice::<Value>(line) {
        Ok(command @ Value::Object(_)) => Inbound::Command(command),
        _ => Inbound::Unparseable(String::from_utf8_lossy(line).into_owned()),
    }
}

fn strip_line_ending(mut line: &[u8]) -> &[u8] {
    if let Some(rest) = line.strip_suffix(b"\n") {
        line = rest;
    }
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn journal_inbound(inbound: &Inbound) {
    match inbound {
        Inbound::Command(command) => journal::record(Event::Command {
            command: Some(command.clone()),
            raw: None,
        }),
        Inbound::Unparseable(raw) => journal::record(Event::Command {
            command: None,
            raw: Some(raw.clone()),
        }),
        Inbound::Closed => journal::record(Event::StdinClosed),
    }
}

/// Reads `input` line by line until EOF, journaling each line and sending, as one batch, the
/// lines one read completed (the first line, and every further whole line already buffered);
/// blank lines are skipped.
fn pump(input: impl Read, sender: mpsc::Sender<Vec<Inbound>>) {
    let mut reader = BufReader::new(input);
    while let Some(line) = read_line(&mut reader) {
        let mut batch = vec![line];
        while reader.buffer().contains(&b'\n') {
            match read_line(&mut reader) {
                Some(line) => batch.push(line),
                None => break,
            }
        }
        let inbound: Vec<Inbound> = batch
            .iter()
            .map(|line| strip_line_ending(line))
            .filter(|content| !content.iter().all(u8::is_ascii_whitespace))
            .map(classify_line)
            .collect();
        inbound.iter().for_each(journal_inbound);
        if !inbound.is_empty() && sender.send(inbound).is_err() {
            return;
        }
    }
    journal_inbound(&Inbound::Closed);
    let _ = sender.send(vec![Inbound::Closed]);
}

/// The next line (with its ending), at most [`MAX_COMMAND_BYTES`] of it (the rest of a longer
/// line is read and dropped); `None` at EOF or on a read error.
fn read_line(reader: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut line = Vec::new();
    match reader
        .take(MAX_COMMAND_BYTES as u64)
        .read_until(b'\n', &mut line)
    {
        Ok(0) | Err(_) => return None,
        Ok(_) => {}
    }
    if line.len() == MAX_COMMAND_BYTES && !line.ends_with(b"\n") {
        let mut rest = Vec::new();
        while let Ok(more) = reader.take(64 * 1024).read_until(b'\n', &mut rest) {
            if more == 0 || rest.ends_with(b"\n") {
                break;
            }
            rest.clear();
        }
    }
    Some(line)
}

/// Held by the reader thread while it takes bytes from fd 0, and by the writer of `ready` while
/// it checks for pending input and writes: so the check sees bytes either still in the pipe or
/// already consumed, never in between.
static STDIN_GATE: Mutex<()> = Mutex::new(());
/// Whether the reader thread has taken any byte from fd 0.
static STDIN_CONSUMED: AtomicBool = AtomicBool::new(false);

/// Fd 0, read without std's buffer: waits until readable (or EOF) before taking the gate, so the
/// gate is only held while bytes are actually being taken.
struct GatedStdin {
    fd: ManuallyDrop<File>,
}

impl GatedStdin {
    fn new() -> GatedStdin {
        // SAFETY: fd 0 stays open for the whole process; ManuallyDrop never closes it.
        GatedStdin {
            fd: ManuallyDrop::new(unsafe { File::from_raw_fd(0) }),
        }
    }
}

impl Read for GatedStdin {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
        while let Err(nix::errno::Errno::EINTR) = poll(&mut fds, PollTimeout::NONE) {}
        let _gate = lock_gate();
        let read = self.fd.read(buffer)?;
        if read > 0 {
            STDIN_CONSUMED.store(true, Ordering::SeqCst);
        }
        Ok(read)
    }
}

fn lock_gate() -> MutexGuard<'static, ()> {
    STDIN_GATE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether the host has written bytes to stdin by now: bytes wait in fd 0 or the reader thread
/// already took some. A closed stdin (EOF, `/dev/null`) is not pending. Returns the gate guard:
/// no byte is taken from fd 0 until it is dropped, so what the caller writes next follows this
/// answer.
pub fn stdin_pending() -> (bool, MutexGuard<'static, ()>) {
    let gate = lock_gate();
    (
        bytes_waiting_on_stdin() || STDIN_CONSUMED.load(Ordering::SeqCst),
        gate,
    )
}

/// Bytes waiting in fd 0: `FIONREAD` where the descriptor answers it (pipes, sockets, ttys), else
/// a zero-timeout `poll` for `POLLIN` (a hang-up alone is EOF, not bytes).
fn bytes_waiting_on_stdin() -> bool {
    let mut count: nix::libc::c_int = 0;
    // SAFETY: FIONREAD writes one int to the pointer given; fd 0 stays open for the whole process.
    if unsafe { nix::libc::ioctl(0, nix::libc::FIONREAD, &mut count) } == 0 {
        return count > 0;
    }
    // SAFETY: fd 0 stays open for the whole process.
    let stdin = unsafe { std::os::fd::BorrowedFd::borrow_raw(0) };
    let mut fds = [PollFd::new(stdin, PollFlags::POLLIN)];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(ready) if ready > 0)
        && fds[0].revents().is_some_and(|events| {
            events.contains(PollFlags::POLLIN) && !events.contains(PollFlags::POLLHUP)
        })
}

impl Inbox {
    /// An inbox for this process's stdin that has not started reading yet.
    pub fn for_stdin() -> Inbox {
        Inbox {
            receiver: None,
            arrived: Default::default(),
            closed: false,
        }
    }

    /// Starts reading stdin in a background thread (once; waiting also starts it).
    pub fn start(&mut self) -> &Receiver<Vec<Inbound>> {
        self.receiver.get_or_insert_with(|| {
            let (sender, receiver) = mpsc::channel();
            std::thread::spawn(move || pump(GatedStdin::new(), sender));
            receiver
        })
    }

    /// Whether stdin has reached EOF.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Waits up to `timeout` (None: forever) for the next line. After EOF it reports `Closed`
    /// once and then only sleeps out the timeout.
    pub fn next(&mut self, timeout: Option<Duration>) -> Wait {
        if self.closed {
            match timeout {
                Some(timeout) => std::thread::sleep(timeout),
                None => crate::process::hang(),
            }
            return Wait::TimedOut;
        }
        let received = match self.arrived.pop_front() {
            Some(inbound) => Ok(inbound),
            None => self.receive(timeout),
        };
        match received {
            Ok(inbound) => {
                if inbound == Inbound::Closed {
                    self.closed = true;
                }
                Wait::Got(inbound)
            }
            Err(RecvTimeoutError::Timeout) => Wait::TimedOut,
            Err(RecvTimeoutError::Disconnected) => {
                self.closed = true;
                Wait::Got(Inbound::Closed)
            }
        }
    }

    /// The first line of the next batch, the rest kept for the following calls.
    fn receive(&mut self, timeout: Option<Duration>) -> Result<Inbound, RecvTimeoutError> {
        let receiver = self.start();
        let batch = match timeout {
            Some(timeout) => receiver.recv_timeout(timeout)?,
            None => receiver
                .recv()
                .map_err(|_| RecvTimeoutError::Disconnected)?,
        };
        self.arrived.extend(batch);
        self.arrived.pop_front().ok_or(RecvTimeoutError::Timeout)
    }

    /// Takes what has already arrived, without waiting.
    pub fn poll(&mut self) -> Option<Inbound> {
        if self.closed {
            return None;
        }
        match self.next(Some(Duration::ZERO)) {
            Wait::Got(inbound) => Some(inbound),
            Wait::TimedOut => None,
        }
    }
}

/// The time left until `deadline` (zero once passed).
pub fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_classified_and_blank_lines_skipped() {
        let (sender, receiver) = mpsc::channel();
        let input: &[u8] = b"{\"type\":\"cancel\"}\r\n\n   \nnot json\n42\n";
        pump(input, sender);
        let got: Vec<Inbound> = receiver.iter().flatten().collect();
        assert_eq!(
            got,
            vec![
                Inbound::Command(serde_json::json!({"type": "cancel"})),
                Inbound::Unparseable("not json".into()),
                Inbound::Unparseable("42".into()),
                Inbound::Closed,
            ]
        );
    }

    #[test]
    fn the_lines_of_one_read_arrive_together() {
        let (sender, receiver) = mpsc::channel();
        // `&[u8]` reads whole: one read, three lines, one batch.
        let input: &[u8] = b"{\"type\":\"execute\"}\n{\"type\":\"execute\",\"n\":2}\nnot json\n";
        pump(input, sender);
        let batches: Vec<Vec<Inbound>> = receiver.iter().collect();
        assert_eq!(batches.len(), 2, "{batches:?}");
        assert_eq!(batches[0].len(), 3, "{batches:?}");
        assert_eq!(batches[1], [Inbound::Closed]);
    }
}
