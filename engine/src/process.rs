//! One runtime process under check: spawned in its own process group, its stdout framed and its
//! stderr drained on threads, and killed with its whole group when dropped. `check-runtime` is a
//! child subreaper (Linux) and runs one runtime at a time, so an orphan re-parented to it (a
//! daemon that left the group with `setsid`/`setpgid`, whatever its environment) belongs to the
//! runtime under check: it counts as a process left behind, and is killed with the group. With
//! `--jobs N` several checks run at once: every process check-runtime starts on purpose is
//! registered ([`spawn_owned`]) and never taken for an orphan, so one check's teardown never
//! kills or reaps another check's runtime (an escaped daemon is then killed by whichever check
//! tears down next, and blamed on the runtime all the same).

use dsh_protocol::{LineEvent, LineFramer};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How much of the runtime's stderr is kept for reports (the whole stream is still counted and
/// searched).
const STDERR_KEEP_BYTES: usize = 64 * 1024;

/// Something the stdout reader saw.
#[derive(Debug)]
pub enum StdoutEvent {
    Line(LineEvent),
    /// stdout reached EOF (after any truncated tail was reported).
    Eof,
}

/// What `next_event` returned.
#[derive(Debug)]
pub enum Next {
    Event(StdoutEvent, Instant),
    /// The deadline passed first.
    Timeout,
    /// Nothing more will come (EOF was already delivered).
    Closed,
}

/// The runtime's stderr so far: counted, searched for needles, and a bounded prefix kept.
#[derive(Debug, Default)]
struct StderrCapture {
    total_bytes: u64,
    kept: Vec<u8>,
    needles: Vec<Vec<u8>>,
    found: Vec<bool>,
    /// The last `longest needle - 1` bytes, so a needle split across reads is still found.
    carry: Vec<u8>,
    finished: bool,
}

impl StderrCapture {
    fn push(&mut self, chunk: &[u8]) {
        self.total_bytes += chunk.len() as u64;
        let room = STDERR_KEEP_BYTES.saturating_sub(self.kept.len());
        self.kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let longest = self.needles.iter().map(Vec::len).max().unwrap_or(0);
        if longest == 0 {
            return;
        }
        let mut window = std::mem::take(&mut self.carry);
        window.extend_from_slice(chunk);
        for (needle, found) in self.needles.iter().zip(self.found.iter_mut()) {
            if !*found && contains(&window, needle) {
                *found = true;
            }
        }
        let keep = (longest - 1).min(window.len());
        self.carry = window[window.len() - keep..].to_vec();
    }
}

/// Whether `needle` occurs in `haystack`.
pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty()
        && haystack
            .windows(needle.len())
            .any(|window| window == needle)
}

/// A snapshot of the runtime's stderr.
#[derive(Debug, Clone)]
pub struct StderrSummary {
    pub total_bytes: u64,
    /// The first 64 KiB.
    pub kept: Vec<u8>,
    /// For each needle given at spawn, whether it appeared anywhere in the stream.
    pub found: Vec<bool>,
    /// Whether stderr reached EOF (else the snapshot may be incomplete).
    pub complete: bool,
}

/// Why a runtime could not be started at all.
#[derive(Debug)]
pub struct SpawnError(pub String);

/// How to start one runtime process.
pub struct Launch<'a> {
    pub program: &'a Path,
    pub args: &'a [&'a str],
    pub cwd: &'a Path,
    pub env: Vec<(String, OsString)>,
    /// Byte strings to look for in stderr (prompt and credential canaries).
    pub stderr_needles: Vec<Vec<u8>>,
}

pub struct RuntimeProcess {
    child: Child,
    pgid: Pid,
    stdin: Option<ChildStdin>,
    stdout_events: Receiver<(StdoutEvent, Instant)>,
    stdout_closed: bool,
    stderr: Arc<Mutex<StderrCapture>>,
    stderr_done: Receiver<()>,
    exit: Option<(ExitStatus, Instant)>,
    pub started: Instant,
}

impl RuntimeProcess {
    pub fn spawn(launch: Launch<'_>) -> Result<Self, SpawnError> {
        let mut command = Command::new(launch.program);
        command
            .args(launch.args)
            .current_dir(launch.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        for (name, value) in &launch.env {
            command.env(name, value);
        }
        let mut child = spawn_owned(&mut command).map_err(|error| {
            SpawnError(format!(
                "cannot start {}: {error}",
                launch.program.display()
            ))
        })?;
        let started = Instant::now();
        let pgid = Pid::from_raw(child.id() as i32);
        let stdin = child.stdin.take();
        let mut stdout = child.stdout.take().expect("stdout was piped");
        let mut stderr_pipe = child.stderr.take().expect("stderr was piped");

        let (events_tx, stdout_events) = mpsc::channel();
        thread::spawn(move || {
            let mut framer = LineFramer::new();
            let mut buffer = vec![0u8; 64 * 1024];
            loop {
                match stdout.read(&mut buffer) {
                    Ok(0) | Err(_) => break,
                    Ok(read) => {
                        let now = Instant::now();
                        for event in framer.push(&buffer[..read]) {
                            if events_tx.send((StdoutEvent::Line(event), now)).is_err() {
                                return;
                            }
                        }
                    }
                }
            }
            if let Some(tail) = framer.finish() {
                let _ = events_tx.send((StdoutEvent::Line(tail), Instant::now()));
            }
            let _ = events_tx.send((StdoutEvent::Eof, Instant::now()));
        });

        let needle_count = launch.stderr_needles.len();
        let stderr = Arc::new(Mutex::new(StderrCapture {
            needles: launch.stderr_needles,
            found: vec![false; needle_count],
            ..StderrCapture::default()
        }));
        let (done_tx, stderr_done) = mpsc::channel();
        let capture = Arc::clone(&stderr);
        thread::spawn(move || {
            let mut buffer = vec![0u8; 64 * 1024];
            loop {
                match stderr_pipe.read(&mut buffer) {
                    Ok(0) | Err(_) => break,
                    Ok(read) => lock(&capture).push(&buffer[..read]),
                }
            }
            lock(&capture).finished = true;
            let _ = done_tx.send(());
        });

        Ok(Self {
            child,
            pgid,
            stdin,
            stdout_events,
            stdout_closed: false,
            stderr,
            stderr_done,
            exit: None,
            started,
        })
    }

    /// Write to the runtime's stdin. A runtime that already closed it is not an error here: the
    /// checks judge what it wrote, not whether it kept listening.
    pub fn write(&mut self, bytes: &[u8]) -> bool {
        match self.stdin.as_mut() {
            Some(stdin) => stdin.write_all(bytes).and_then(|()| stdin.flush()).is_ok(),
            None => false,
        }
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The next stdout event, waiting at most until `deadline`.
    pub fn next_event(&mut self, deadline: Instant) -> Next {
        if self.stdout_closed {
            return Next::Closed;
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        match self.stdout_events.recv_timeout(wait) {
            Ok((event, at)) => {
                if matches!(event, StdoutEvent::Eof) {
                    self.stdout_closed = true;
                }
                Next::Event(event, at)
            }
            Err(RecvTimeoutError::Timeout) => Next::Timeout,
            Err(RecvTimeoutError::Disconnected) => {
                self.stdout_closed = true;
                Next::Closed
            }
        }
    }

    /// Wait until the process exits or `deadline` passes.
    pub fn wait_exit(&mut self, deadline: Instant) -> Option<(ExitStatus, Instant)> {
        loop {
            if self.exit.is_some() {
                return self.exit;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                self.exit = Some((status, Instant::now()));
                continue;
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Whether any process of the runtime's tree is still alive (after its leader was reaped,
    /// these are the processes it left behind): a member of its group, or an orphan adopted here.
    pub fn group_alive(&self) -> bool {
        killpg(self.pgid, None).is_ok() || !self.escaped().is_empty()
    }

    /// The orphans adopted by this process (never a process it started on purpose).
    fn escaped(&self) -> Vec<i32> {
        adopted()
    }

    /// Wait until the group is empty or `deadline` passes; true when it emptied.
    pub fn wait_group_empty(&self, deadline: Instant) -> bool {
        loop {
            if !self.group_alive() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// The stderr captured so far; waits up to `deadline` for stderr to reach EOF first.
    pub fn stderr(&self, deadline: Instant) -> StderrSummary {
        let wait = deadline.saturating_duration_since(Instant::now());
        let _ = self.stderr_done.recv_timeout(wait);
        let capture = lock(&self.stderr);
        StderrSummary {
            total_bytes: capture.total_bytes,
            kept: capture.kept.clone(),
            found: capture.found.clone(),
            complete: capture.finished,
        }
    }

    /// Kill the whole group and every adopted orphan, and reap the leader.
    pub fn kill(&mut self) {
        let _ = killpg(self.pgid, Signal::SIGKILL);
        if self.exit.is_none() {
            if let Ok(status) = self.child.wait() {
                self.exit = Some((status, Instant::now()));
            }
        }
        kill_orphans(Duration::from_secs(2));
        disown(self.pgid.as_raw());
    }
}

/// The processes check-runtime started on purpose and has not reaped yet.
static OWNED: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Whether this process takes every child it did not start through [`spawn_owned`] for an
/// adopted orphan: only the kit's own command does ([`sweep_adopted_orphans`], from `main`).
/// A library caller (a test binary, whose other threads start children of their own) never has
/// its children killed or reaped behind its back.
static SWEEPS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Declares this process the kit's command: a child it did not start through [`spawn_owned`] is
/// an orphan it adopted as a subreaper, which [`adopted`] reports and [`kill_adopted`] kills.
pub fn sweep_adopted_orphans() {
    SWEEPS.store(true, std::sync::atomic::Ordering::SeqCst);
}

fn sweeps() -> bool {
    SWEEPS.load(std::sync::atomic::Ordering::SeqCst)
}

/// Spawns `command` as a process check-runtime owns (registered before any other thread can
/// look for orphans), making check-runtime a child subreaper first (Linux).
pub fn spawn_owned(command: &mut Command) -> std::io::Result<std::process::Child> {
    static SUBREAPER: std::sync::Once = std::sync::Once::new();
    SUBREAPER.call_once(|| {
        crate::procfs::become_subreaper();
    });
    let mut owned = lock(&OWNED);
    let child = command.spawn()?;
    owned.push(child.id() as i32);
    Ok(child)
}

/// Forgets an owned process once it is reaped.
pub fn disown(pid: i32) {
    lock(&OWNED).retain(|owned| *owned != pid);
}

/// SIGKILLs the adopted orphans until none is left or `bound` passes, each round under the
/// registry lock so an owned process started meanwhile is never taken for one.
fn kill_orphans(bound: Duration) {
    kill_adopted(bound, |_| false);
}

/// The orphans this process adopted as a child subreaper and did not start on purpose (dead
/// ones among them are reaped on the way).
pub fn adopted() -> Vec<i32> {
    if !sweeps() {
        return Vec::new();
    }
    let owned = lock(&OWNED);
    crate::procfs::adopted_children(&owned)
}

/// SIGKILLs every adopted orphan but those `spare` names (another case's, say) until none is
/// left or `bound` passes (a killed orphan's own children are adopted next), each round under the
/// registry lock so an owned process started meanwhile is never taken for one, and reaps them.
/// Returns each process it killed, with its command name.
pub fn kill_adopted(
    bound: Duration,
    spare: impl Fn(i32) -> bool,
) -> Vec<crate::leftovers::Leftover> {
    if !sweeps() {
        return Vec::new();
    }
    let deadline = Instant::now() + bound;
    let mut killed: Vec<crate::leftovers::Leftover> = Vec::new();
    loop {
        let live: Vec<i32> = {
            let owned = lock(&OWNED);
            let live: Vec<i32> = crate::procfs::adopted_children(&owned)
                .into_iter()
                .filter(|pid| !spare(*pid))
                .collect();
            for pid in &live {
                if !killed.iter().any(|known| known.pid == *pid) {
                    killed.push(crate::leftovers::Leftover {
                        pid: *pid,
                        command: crate::procfs::command_of(*pid),
                    });
                }
                let _ = nix::sys::signal::kill(Pid::from_raw(*pid), Signal::SIGKILL);
            }
            live
        };
        if live.is_empty() || Instant::now() >= deadline {
            killed.sort_by_key(|leftover| leftover.pid);
            return killed;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

impl Drop for RuntimeProcess {
    fn drop(&mut self) {
        self.stdin = None;
        self.kill();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `exit 0`, `exit 2`, `killed by signal 9`.
pub fn describe_exit(status: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => "an unknown exit status".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needle_split_across_chunks_is_found() {
        let mut capture = StderrCapture {
            needles: vec![b"secret-canary".to_vec()],
            found: vec![false],
            ..StderrCapture::default()
        };
        capture.push(b"noise secret-");
        assert!(!capture.found[0]);
        capture.push(b"canary more");
        assert!(capture.found[0]);
        assert_eq!(capture.total_bytes, 24);
    }

    #[test]
    fn kept_prefix_is_bounded() {
        let mut capture = StderrCapture::default();
        capture.push(&vec![b'x'; STDERR_KEEP_BYTES + 10]);
        capture.push(b"more");
        assert_eq!(capture.kept.len(), STDERR_KEEP_BYTES);
        assert_eq!(capture.total_bytes, STDERR_KEEP_BYTES as u64 + 14);
    }
}
