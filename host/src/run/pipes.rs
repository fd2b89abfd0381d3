//! The plumbing of one turn, kept out of the run loop's reading path: stdout framed without
//! losing data to a cancelled read, stdin written without ever blocking the loop, stderr drained
//! from the spawn on, the guard that kills the tree of an abandoned run, and the two small futures
//! the loop waits on.

use crate::process::{OwnedTree, Stop};
use crate::redact::Redactor;
use crate::stderr_capture::StderrCapture;
use dsh_protocol::{LineEvent, LineFramer};
use std::collections::VecDeque;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::{mpsc, watch};
use tokio::time::{sleep_until, Instant};

/// Resolves when the cancel signal is (or already was) set; never when the sender is gone.
pub async fn cancel_requested(signal: &mut watch::Receiver<bool>) {
    loop {
        if *signal.borrow_and_update() {
            return;
        }
        if signal.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Sleeps until `deadline`; never resolves without one.
pub async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Reads stdout into framer events; cancel-safe (an interrupted read loses nothing).
pub struct FrameReader {
    stdout: Option<ChildStdout>,
    framer: LineFramer,
    pending: VecDeque<LineEvent>,
    finished: bool,
    chunk: Vec<u8>,
}

impl FrameReader {
    pub fn new(stdout: Option<ChildStdout>) -> Self {
        Self {
            stdout,
            framer: LineFramer::new(),
            pending: VecDeque::new(),
            finished: false,
            chunk: vec![0u8; 64 * 1024],
        }
    }

    /// The next line event; `None` once the stream ended and everything was handed out.
    pub async fn next_event(&mut self) -> Option<LineEvent> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
            }
            if self.finished {
                return None;
            }
            let read = match self.stdout.as_mut() {
                Some(stdout) => stdout.read(&mut self.chunk).await.unwrap_or(0),
                None => 0,
            };
            if read == 0 {
                self.finished = true;
                self.pending.extend(self.framer.finish());
            } else {
                let events = self.framer.push(&self.chunk[..read]);
                self.pending.extend(events);
            }
        }
    }

    /// Keep draining stdout in the background (so a writer never blocks) until aborted.
    pub fn drain_in_background(&mut self) -> tokio::task::JoinHandle<()> {
        let stdout = self.stdout.take();
        tokio::spawn(async move {
            if let Some(mut stdout) = stdout {
                let _ = tokio::io::copy(&mut stdout, &mut tokio::io::sink()).await;
            }
        })
    }
}

/// Writes lines to the runtime's stdin without ever blocking the run loop; `close` ends stdin
/// after the lines already queued.
pub struct StdinWriter {
    queue: Option<mpsc::UnboundedSender<Vec<u8>>>,
    task: tokio::task::JoinHandle<()>,
}

impl StdinWriter {
    pub fn new(stdin: Option<ChildStdin>) -> Self {
        let (queue, mut lines) = mpsc::unbounded_channel::<Vec<u8>>();
        let task = tokio::spawn(async move {
            let Some(mut stdin) = stdin else { return };
            while let Some(line) = lines.recv().await {
                if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
                    return;
                }
            }
        });
        Self {
            queue: Some(queue),
            task,
        }
    }

    pub fn send(&self, line: String) {
        if let Some(queue) = &self.queue {
            let _ = queue.send(line.into_bytes());
        }
    }

    pub fn close(&mut self) {
        self.queue = None;
    }

    /// Close and stop writing at once (the tree is gone; nothing queued matters any more).
    pub fn abort(&mut self) {
        self.close();
        self.task.abort();
    }
}

impl Drop for StdinWriter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Kills the tree if the run is abandoned before it was verified gone.
pub struct TreeGuard {
    pub tree: OwnedTree,
    pub armed: bool,
}

impl TreeGuard {
    /// Kill the tree now unless it was verified gone; the guard is spent.
    pub fn settle(&mut self) {
        if self.armed {
            let _ = self.tree.stop(Stop::Kill);
        }
        self.armed = false;
    }
}

impl Drop for TreeGuard {
    fn drop(&mut self) {
        self.settle();
    }
}

/// The runtime's stderr: drained concurrently from the spawn on (a runtime blocked on a full
/// stderr pipe never stalls the run).
pub enum StderrDrain {
    Draining(StderrCapture),
    /// A stream left alone until the end (none: nothing to read).
    Late(Option<ChildStderr>),
}

impl StderrDrain {
    pub fn start(stderr: Option<ChildStderr>, redactor: &Redactor) -> Self {
        match stderr {
            Some(stderr) => Self::Draining(StderrCapture::start(stderr, redactor.longest_secret())),
            None => Self::Late(None),
        }
    }

    /// The bounded, redacted stderr; waits at most `bound` for the stream's end.
    pub async fn finish(self, redactor: &Redactor, bound: Duration) -> String {
        match self {
            Self::Draining(capture) => capture.finish(redactor, bound).await,
            Self::Late(Some(stderr)) => {
                StderrCapture::start(stderr, redactor.longest_secret())
                    .finish(redactor, bound)
                    .await
            }
            Self::Late(None) => String::new(),
        }
    }
}
