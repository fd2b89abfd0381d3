//! The journal (docs/journal.md): one JSON line per event, each appended with a single `write` on
//! an `O_APPEND` descriptor so lines from concurrent fake-dsh processes never interleave. Within
//! a process the writes are serialized, and the final `exit` entry is written under the same lock
//! right before `_exit`, so no thread is ever cut off mid-line by the process ending. The entries'
//! typed form is `dsh_formats::journal`, shared with the harness that reads them.
//!
//! When `FAKE_DSH_JOURNAL_COPY` names an abstract Unix socket (Linux), every line is also sent
//! there as it is written: the kit's own copy, which a client that edits the journal file in
//! place cannot reach (docs/journal.md, "The kit's copy").

pub use dsh_formats::journal::{Entry, Event, ExitReason, Mode};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

/// The environment variable naming the journal file.
pub const JOURNAL_ENV: &str = "FAKE_DSH_JOURNAL";
/// The environment variable naming the abstract Unix socket the kit receives a copy of every
/// line on (the name without its leading NUL).
pub const JOURNAL_COPY_ENV: &str = "FAKE_DSH_JOURNAL_COPY";
/// How long one line's copy may wait for a kit that does not read (then the copy is dropped).
#[cfg(target_os = "linux")]
const COPY_WRITE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Milliseconds since the Unix epoch, wall clock.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis() as u64)
        .unwrap_or(0)
}

/// The journal of this process: appends entries when `FAKE_DSH_JOURNAL` is set, else does nothing.
pub struct Journal {
    path: Option<PathBuf>,
    file: Option<File>,
    /// The kit's copy (`FAKE_DSH_JOURNAL_COPY`), while it takes what is sent.
    copy: Mutex<Option<std::os::unix::net::UnixStream>>,
    writing: Mutex<()>,
}

impl Journal {
    /// A journal appending to `path`; an unopenable file is reported once on stderr and disables
    /// journaling rather than failing the run.
    pub fn open(path: Option<PathBuf>) -> Journal {
        let file = path.as_ref().and_then(|path| {
            match OpenOptions::new().create(true).append(true).open(path) {
                Ok(file) => Some(file),
                Err(error) => {
                    eprintln!("fake-dsh: cannot open journal {}: {error}", path.display());
                    None
                }
            }
        });
        let copy = file.as_ref().and_then(|_| connect_copy());
        Journal {
            path,
            file,
            copy: Mutex::new(copy),
            writing: Mutex::new(()),
        }
    }

    /// The journal path, when one is configured.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Appends one entry with a single `write`.
    pub fn record(&self, event: Event) {
        drop(self.record_and_hold(event));
    }

    /// Appends one entry and keeps the write lock: no other thread of this process writes an
    /// entry until the guard is dropped.
    fn record_and_hold(&self, event: Event) -> MutexGuard<'_, ()> {
        let writing = self
            .writing
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(mut file) = self.file.as_ref() {
            let line = entry_line(event);
            let _ = file.write_all(&line);
            let mut copy = self.copy.lock().unwrap_or_else(|p| p.into_inner());
            if copy
                .as_mut()
                .is_some_and(|kit| kit.write_all(&line).is_err())
            {
                *copy = None;
            }
        }
        writing
    }
}

/// The kit's copy of the journal, when `FAKE_DSH_JOURNAL_COPY` names a socket that accepts.
#[cfg(target_os = "linux")]
fn connect_copy() -> Option<std::os::unix::net::UnixStream> {
    use std::os::linux::net::SocketAddrExt;
    let name = std::env::var_os(JOURNAL_COPY_ENV)?;
    let address =
        std::os::unix::net::SocketAddr::from_abstract_name(name.as_encoded_bytes()).ok()?;
    let stream = std::os::unix::net::UnixStream::connect_addr(&address).ok()?;
    stream.set_write_timeout(Some(COPY_WRITE_TIMEOUT)).ok()?;
    Some(stream)
}

/// No abstract sockets: no copy.
#[cfg(not(target_os = "linux"))]
fn connect_copy() -> Option<std::os::unix::net::UnixStream> {
    None
}

/// Serializes an entry of this process, stamped now, as one newline-terminated line.
pub fn entry_line(event: Event) -> Vec<u8> {
    let entry = Entry {
        v: 1,
        pid: std::process::id() as i32,
        t_ms: now_ms(),
        event,
    };
    let mut line = serde_json::to_vec(&entry).expect("journal entries always serialize");
    line.push(b'\n');
    line
}

static GLOBAL: OnceLock<Journal> = OnceLock::new();

/// Installs the process-wide journal (first call wins) and returns it.
pub fn install(journal: Journal) -> &'static Journal {
    GLOBAL.get_or_init(|| journal)
}

/// Records into the process-wide journal, if one is installed.
pub fn record(event: Event) {
    if let Some(journal) = GLOBAL.get() {
        journal.record(event);
    }
}

/// Records the process's last entry into the process-wide journal (if any) and ends the process
/// with `_exit(code)` still holding the write lock: another thread's entry is either whole or
/// never started.
pub fn record_last_and_exit(event: Event, code: i32) -> ! {
    let _writing = GLOBAL.get().map(|journal| journal.record_and_hold(event));
    // SAFETY: _exit ends the process at once; nothing runs after it.
    unsafe { nix::libc::_exit(code) }
}

/// Counts `start` entries with mode `stdio` in a journal file.
pub fn count_stdio_starts(file: &File) -> u64 {
    BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .filter_map(|line| serde_json::from_str::<Entry>(&line).ok())
        .filter(|entry| {
            matches!(
                entry.event,
                Event::Start {
                    mode: Mode::Stdio,
                    ..
                }
            )
        })
        .count() as u64
}

/// Reads every parseable entry of a journal file, for tests and tools.
pub fn read_entries(path: &Path) -> std::io::Result<Vec<Entry>> {
    let file = File::open(path)?;
    Ok(BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .filter_map(|line| serde_json::from_str(&line).ok())
        .collect())
}

/// Holds an exclusive `flock` on `file` while `body` runs, so processes that count and append
/// (the `stdio` invocation index) do it one at a time.
pub fn with_exclusive_lock<T>(file: &File, body: impl FnOnce(&File) -> T) -> std::io::Result<T> {
    use nix::fcntl::{Flock, FlockArg};
    let handle = file.try_clone()?;
    let locked = Flock::lock(handle, FlockArg::LockExclusive)
        .map_err(|(_, errno)| std::io::Error::from(errno))?;
    let outcome = body(&locked);
    drop(locked);
    Ok(outcome)
}

/// Records a `start` entry whose `invocation` is the number of earlier `stdio` starts in the
/// journal, counted and appended under one lock. Returns that index (None when not journaling).
pub fn record_stdio_start(
    journal: &Journal,
    start: impl FnOnce(Option<u64>) -> Event,
) -> Option<u64> {
    let Some(path) = journal.path() else {
        journal.record(start(None));
        return None;
    };
    let Ok(reader) = File::open(path) else {
        journal.record(start(None));
        return None;
    };
    let counted = with_exclusive_lock(&reader, |locked| {
        let index = count_stdio_starts(locked);
        journal.record(start(Some(index)));
        index
    });
    counted.ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn entries_flatten_their_event_and_round_trip() {
        let line = entry_line(Event::Exit {
            code: 0,
            reason: ExitReason::ScriptEnd,
        });
        let value: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(value["event"], "exit");
        assert_eq!(value["reason"], "script_end");
        assert_eq!(value["v"], 1);
        let entry: Entry = serde_json::from_slice(&line).unwrap();
        assert!(matches!(entry.event, Event::Exit { code: 0, .. }));
        let closed: Value = serde_json::from_slice(&entry_line(Event::StdinClosed)).unwrap();
        assert_eq!(closed["event"], "stdin_closed");
    }

    #[test]
    fn every_event_matches_the_journal_schema_and_bad_ones_do_not() {
        let events = [
            crate::process::start_event(Mode::Stdio, Some(0)),
            Event::Command {
                command: Some(serde_json::json!({"type": "cancel"})),
                raw: None,
            },
            Event::Command {
                command: None,
                raw: Some("junk".into()),
            },
            Event::Frame {
                frame_type: "ready".into(),
                stdin_pending: Some(true),
                code: None,
                empty: None,
            },
            Event::Frame {
                frame_type: "protocol_error".into(),
                stdin_pending: None,
                code: Some("INVALID_COMMAND".into()),
                empty: None,
            },
            Event::Frame {
                frame_type: "text".into(),
                stdin_pending: None,
                code: None,
                empty: Some(true),
            },
            Event::StdinClosed,
            Event::Signal {
                signal: "SIGTERM".into(),
                ignored: true,
            },
            Event::Child {
                child_pid: 42,
                ignores_sigterm: false,
            },
            Event::Exit {
                code: 143,
                reason: ExitReason::Signal,
            },
        ];
        for event in events {
            let entry: Value = serde_json::from_slice(&entry_line(event)).unwrap();
            let checked =
                dsh_protocol::schema::validate(dsh_formats::journal::JOURNAL_SCHEMA_PATH, &entry);
            assert!(checked.is_ok(), "{entry}: {checked:?}");
        }
        let bad = serde_json::json!({"v": 1, "event": "exit", "pid": 1, "t_ms": 0, "code": 0, "reason": "bored"});
        assert!(
            dsh_protocol::schema::validate(dsh_formats::journal::JOURNAL_SCHEMA_PATH, &bad)
                .is_err()
        );
        let both = serde_json::json!({"v": 1, "event": "command", "pid": 1, "t_ms": 0, "command": {}, "raw": "x"});
        assert!(
            dsh_protocol::schema::validate(dsh_formats::journal::JOURNAL_SCHEMA_PATH, &both)
                .is_err()
        );
    }
}
