//! Reading fake-dsh's journal (docs/journal.md) and asking the process table about the pids it
//! names: which are still alive, and ending the ones a host left behind.

use crate::procfs;
use dsh_formats::journal::{self as format, Event, Mode};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// One journal line, parsed; `line` is its 0-based index in the file.
#[derive(Debug, Clone)]
pub struct Entry {
    pub line: usize,
    /// The line in the journal's shared model.
    pub entry: format::Entry,
}

impl Entry {
    /// The `event` member.
    pub fn event(&self) -> &'static str {
        self.entry.event.name()
    }
    pub fn pid(&self) -> Option<i32> {
        Some(self.entry.pid)
    }
    /// A `start` entry's mode.
    pub fn mode(&self) -> Option<Mode> {
        match &self.entry.event {
            Event::Start { mode, .. } => Some(*mode),
            _ => None,
        }
    }
    /// A `start` entry's argv.
    pub fn argv(&self) -> Option<&[String]> {
        match &self.entry.event {
            Event::Start { argv, .. } => Some(argv),
            _ => None,
        }
    }
    /// A `start` entry's working directory.
    pub fn cwd(&self) -> Option<&str> {
        match &self.entry.event {
            Event::Start { cwd, .. } => Some(cwd),
            _ => None,
        }
    }
    /// A `command` entry's command, when the host's line was JSON.
    pub fn command(&self) -> Option<&Value> {
        match &self.entry.event {
            Event::Command { command, .. } => command.as_ref(),
            _ => None,
        }
    }
    /// A `frame` entry's error code (a `result` error's or a `protocol_error`'s).
    pub fn frame_code(&self) -> Option<&str> {
        match &self.entry.event {
            Event::Frame { code, .. } => code.as_deref(),
            _ => None,
        }
    }
    /// Whether a `frame` entry (a `ready`) says the host had written to stdin before it.
    pub fn stdin_pending(&self) -> bool {
        matches!(
            self.entry.event,
            Event::Frame {
                stdin_pending: Some(true),
                ..
            }
        )
    }
    /// The token `journal_order` / `journal_absent` name this entry by: `command:cancel`,
    /// `stdin_closed`, `signal:SIGTERM`, `exit`, `start`, `frame:text`, `child`.
    pub fn token(&self) -> String {
        match &self.entry.event {
            Event::Command { .. } => {
                let kind = self
                    .command()
                    .and_then(|command| command.get("type"))
                    .and_then(Value::as_str)
                    .unwrap_or("raw");
                format!("command:{kind}")
            }
            Event::Signal { signal, .. } => format!("signal:{signal}"),
            Event::Frame { frame_type, .. } => format!("frame:{frame_type}"),
            other => other.name().to_string(),
        }
    }
    /// The line as JSON, for the transcript.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(&self.entry).unwrap_or(Value::Null)
    }
}

/// The most of a journal the harness reads. fake-dsh writes a few hundred bytes per event, so a
/// case's journal stays in kilobytes; but whatever can write at its path (a client of the client
/// corpus is told it in `FAKE_DSH_JOURNAL`) can make it anything, so a larger file is refused
/// unread.
pub const MAX_JOURNAL_BYTES: u64 = 64 * 1024 * 1024;

/// Why a journal could not be read; `Display` says exactly what was found at its path.
#[derive(Debug)]
pub enum JournalError {
    /// Nothing at the path.
    Missing(PathBuf),
    /// The path is a symbolic link: never followed.
    Link(PathBuf),
    /// Something other than a regular file (a directory, a FIFO, a device, a socket): `kind`.
    NotAFile { path: PathBuf, kind: &'static str },
    /// Over [`MAX_JOURNAL_BYTES`]: not read.
    TooLarge(PathBuf),
    /// The file could not be opened or read.
    Unreadable {
        path: PathBuf,
        error: std::io::Error,
    },
    /// A line (1-based) that is not a journal entry.
    NotAnEntry {
        path: PathBuf,
        line: usize,
        error: String,
    },
}

impl std::fmt::Display for JournalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JournalError::Missing(path) => {
                write!(f, "fake-dsh's journal is missing: {} does not exist", path.display())
            }
            JournalError::Link(path) => write!(
                f,
                "fake-dsh's journal is a link: {} is a symbolic link (not followed)",
                path.display()
            ),
            JournalError::NotAFile { path, kind } => write!(
                f,
                "fake-dsh's journal is not a regular file: {} is a {kind}",
                path.display()
            ),
            JournalError::TooLarge(path) => write!(
                f,
                "fake-dsh's journal is over the {MAX_JOURNAL_BYTES}-byte bound ({} MiB): {} (not read)",
                MAX_JOURNAL_BYTES >> 20,
                path.display()
            ),
            JournalError::Unreadable { path, error } => {
                write!(f, "cannot read fake-dsh's journal {}: {error}", path.display())
            }
            JournalError::NotAnEntry { path, line, error } => write!(
                f,
                "journal {} line {line}: not a journal entry ({error})",
                path.display()
            ),
        }
    }
}

impl std::error::Error for JournalError {}

impl From<JournalError> for String {
    fn from(error: JournalError) -> String {
        error.to_string()
    }
}

/// What a file type is, for [`JournalError::NotAFile`].
fn kind_of(file_type: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_dir() {
        "directory"
    } else if file_type.is_fifo() {
        "FIFO"
    } else if file_type.is_char_device() {
        "character device"
    } else if file_type.is_block_device() {
        "block device"
    } else if file_type.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

/// The bytes of the journal at `path`: opened without following a link (`O_NOFOLLOW`) nor
/// blocking on a FIFO (`O_NONBLOCK`), a regular file only, at most [`MAX_JOURNAL_BYTES`].
fn read_bounded(path: &Path) -> Result<Vec<u8>, JournalError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let unreadable = |error| JournalError::Unreadable {
        path: path.to_path_buf(),
        error,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits())
        .open(path)
        .map_err(|error| {
            let found = std::fs::symlink_metadata(path).map(|meta| meta.file_type());
            match found {
                Err(_) if error.kind() == std::io::ErrorKind::NotFound => {
                    JournalError::Missing(path.to_path_buf())
                }
                Ok(kind) if kind.is_symlink() => JournalError::Link(path.to_path_buf()),
                Ok(kind) if !kind.is_file() => JournalError::NotAFile {
                    path: path.to_path_buf(),
                    kind: kind_of(kind),
                },
                _ => unreadable(error),
            }
        })?;
    let meta = file.metadata().map_err(unreadable)?;
    if !meta.is_file() {
        return Err(JournalError::NotAFile {
            path: path.to_path_buf(),
            kind: kind_of(meta.file_type()),
        });
    }
    if meta.len() > MAX_JOURNAL_BYTES {
        return Err(JournalError::TooLarge(path.to_path_buf()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize + 1);
    file.take(MAX_JOURNAL_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() as u64 > MAX_JOURNAL_BYTES {
        return Err(JournalError::TooLarge(path.to_path_buf()));
    }
    Ok(bytes)
}

/// The journal file of one case.
pub struct Journal {
    path: PathBuf,
}

impl Journal {
    pub fn new(path: &Path) -> Journal {
        Journal {
            path: path.to_path_buf(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every entry so far. A line that is not a journal entry is a kit fault (fake-dsh wrote it), except a
    /// last line without its newline that stops mid-entry: a write cut off by SIGKILL (or still
    /// under way), which [`Journal::read_with_cut_off_tail`] reports. The file is read as
    /// [`read_bounded`] says: a link, a FIFO or a device at the path, or a file over
    /// [`MAX_JOURNAL_BYTES`], is an error saying so, never followed nor read.
    pub fn read(&self) -> Result<Vec<Entry>, JournalError> {
        self.read_with_cut_off_tail().map(|(entries, _)| entries)
    }

    /// Every entry so far, and the last line as text when it stops mid-entry without a newline.
    pub fn read_with_cut_off_tail(&self) -> Result<(Vec<Entry>, Option<String>), JournalError> {
        let bytes = read_bounded(&self.path)?;
        let complete = complete_part(&bytes);
        let tail = &bytes[complete.len()..];
        let mut entries = Vec::new();
        for (line, raw) in complete.split(|b| *b == b'\n').enumerate() {
            if raw.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let entry: format::Entry =
                serde_json::from_slice(raw).map_err(|e| JournalError::NotAnEntry {
                    path: self.path.clone(),
                    line: line + 1,
                    error: e.to_string(),
                })?;
            entries.push(Entry { line, entry });
        }
        let tail = (!tail.is_empty()).then(|| String::from_utf8_lossy(tail).into_owned());
        Ok((entries, tail))
    }
}

/// `bytes` without a last, unterminated line that is a cut-off JSON entry (a prefix of one).
fn complete_part(bytes: &[u8]) -> &[u8] {
    let tail_start = bytes
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |newline| newline + 1);
    let tail = &bytes[tail_start..];
    let cut_off = !tail.iter().all(u8::is_ascii_whitespace)
        && serde_json::from_slice::<Value>(tail).is_err_and(|error| error.is_eof());
    if cut_off {
        &bytes[..tail_start]
    } else {
        bytes
    }
}

/// The process an entry names and its parent: a `start` entry's own pid and `ppid`, a `child`
/// entry's `child_pid` and the pid that spawned it.
fn process_named(entry: &Entry) -> Option<(i32, Option<i32>)> {
    let (pid, parent) = match &entry.entry.event {
        Event::Start { ppid, .. } => (entry.entry.pid, Some(*ppid)),
        Event::Child { child_pid, .. } => (*child_pid, Some(entry.entry.pid)),
        _ => return None,
    };
    (pid > 0).then_some((pid, parent))
}

/// Every pid the entries name as a process: `start` entries' pids and `child` entries' child pids.
pub fn pids(entries: &[Entry]) -> Vec<i32> {
    let mut pids: Vec<i32> = Vec::new();
    for (pid, _) in entries.iter().filter_map(process_named) {
        if !pids.contains(&pid) {
            pids.push(pid);
        }
    }
    pids
}

/// The process tree rooted at `root` as the entries show it: `root`, every journaled process
/// whose `ppid` is in the tree, and every `child` a process of the tree reported.
pub fn tree_of(entries: &[Entry], root: i32) -> BTreeSet<i32> {
    let links: Vec<(i32, i32)> = entries
        .iter()
        .filter_map(process_named)
        .filter_map(|(pid, parent)| parent.map(|parent| (pid, parent)))
        .collect();
    let mut tree = BTreeSet::from([root]);
    loop {
        let before = tree.len();
        for (pid, parent) in &links {
            if tree.contains(parent) {
                tree.insert(*pid);
            }
        }
        if tree.len() == before {
            return tree;
        }
    }
}

/// Whether the entries show `pid` outside the process group of the process that started it (a
/// daemon that called `setsid` or `setpgid`): its own `start` names another `pgid` than its
/// parent's, or it journaled no `start` at all although its parent reported it as a `child` (a
/// daemon that cleared its environment, and with it the journal's path).
pub fn left_its_group(entries: &[Entry], pid: i32) -> bool {
    let pgid_of = |of: i32| {
        entries.iter().find_map(|entry| match &entry.entry.event {
            Event::Start { pgid, .. } if entry.entry.pid == of => Some(*pgid),
            _ => None,
        })
    };
    let parent = entries.iter().find_map(|entry| match process_named(entry) {
        Some((child, parent)) if child == pid && entry.event() == "child" => parent,
        _ => None,
    });
    let Some(parent) = parent else {
        return false;
    };
    match (pgid_of(pid), pgid_of(parent)) {
        (Some(own), Some(parents)) => own != parents,
        (None, _) => true,
        (Some(_), None) => false,
    }
}

/// Whether `pid` is a live (not zombie) process of this case: one whose environment names this
/// case's journal, so a recycled pid is never mistaken for a leftover. An environment that cannot
/// be read does not rule a live process out.
pub fn is_alive(pid: i32, journal: &Path) -> bool {
    let entry = format!("FAKE_DSH_JOURNAL={}", journal.display());
    procfs::is_live(pid) && procfs::environ_has(pid, &entry).unwrap_or(true)
}

/// SIGKILLs every still-alive process of this case among `pids` (harness cleanup after a case).
pub fn kill_leftovers(pids: &[i32], journal: &Path) {
    for pid in pids {
        if is_alive(*pid, journal) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(*pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_pids() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("journal.jsonl");
        let lines = [
            r#"{"v":1,"event":"start","pid":10,"t_ms":1,"mode":"stdio","ppid":1,"pgid":10,"sid":1,"argv":["dsh"],"cwd":"/","env_names":[],"invocation":0}"#,
            r#"{"v":1,"event":"command","pid":10,"t_ms":2,"command":{"type":"cancel"}}"#,
            r#"{"v":1,"event":"command","pid":10,"t_ms":2,"raw":"garbage"}"#,
            r#"{"v":1,"event":"signal","pid":10,"t_ms":3,"signal":"SIGTERM","ignored":true}"#,
            r#"{"v":1,"event":"child","pid":10,"t_ms":3,"child_pid":11,"ignores_sigterm":true}"#,
            "",
            r#"{"v":1,"event":"exit","pid":10,"t_ms":4,"code":0,"reason":"signal"}"#,
        ];
        std::fs::write(&path, lines.join("\n")).expect("write");
        let entries = Journal::new(&path).read().expect("reads");
        let tokens: Vec<String> = entries.iter().map(Entry::token).collect();
        assert_eq!(
            tokens,
            [
                "start",
                "command:cancel",
                "command:raw",
                "signal:SIGTERM",
                "child",
                "exit"
            ]
        );
        assert_eq!(pids(&entries), vec![10, 11]);
        assert!(
            left_its_group(&entries, 11),
            "a child that journaled no start"
        );
        assert!(!left_its_group(&entries, 10), "the runtime itself");
        std::fs::write(&path, format!("{}\nnot json\n", lines[0])).expect("write");
        let error = Journal::new(&path)
            .read()
            .expect_err("not JSON")
            .to_string();
        assert!(error.contains("line 2"), "{error}");
        std::fs::write(&path, "{\"v\":1}\n").expect("write");
        let error = Journal::new(&path)
            .read()
            .expect_err("JSON, but no entry")
            .to_string();
        assert!(error.contains("line 1: not a journal entry"), "{error}");
    }

    #[test]
    fn a_tree_follows_ppid_and_child_entries_and_nothing_else() {
        let start = |pid: i32, ppid: i32, mode: Mode| Event::Start {
            ppid,
            pgid: pid,
            sid: 1,
            argv: Vec::new(),
            cwd: "/".into(),
            env_names: Vec::new(),
            mode,
            invocation: None,
        };
        let entries: Vec<Entry> = [
            (10, start(10, 1, Mode::Stdio)),
            (20, start(20, 1, Mode::Stdio)),
            (
                10,
                Event::Child {
                    child_pid: 11,
                    ignores_sigterm: false,
                },
            ),
            (12, start(12, 11, Mode::Child)),
            (21, start(21, 20, Mode::Child)),
            (
                30,
                Event::Exit {
                    code: 0,
                    reason: format::ExitReason::ScriptEnd,
                },
            ),
        ]
        .into_iter()
        .enumerate()
        .map(|(line, (pid, event))| Entry {
            line,
            entry: format::Entry {
                v: 1,
                pid,
                t_ms: 0,
                event,
            },
        })
        .collect();
        assert_eq!(tree_of(&entries, 10), BTreeSet::from([10, 11, 12]));
        assert_eq!(tree_of(&entries, 20), BTreeSet::from([20, 21]));
        assert_eq!(tree_of(&entries, 99), BTreeSet::from([99]));
    }

    /// Entries from JSON lines, numbered from 0.
    /// Typed entries from compact lines: the members a test does not care about get defaults.
    fn entries_of(lines: &[&str]) -> Vec<Entry> {
        let defaults = serde_json::json!({"v": 1, "t_ms": 0, "sid": 1, "argv": [], "cwd": "/",
            "env_names": [], "ignores_sigterm": false});
        lines
            .iter()
            .enumerate()
            .map(|(line, text)| {
                let mut value: Value = serde_json::from_str(text).expect("JSON");
                let event = value["event"].as_str().unwrap_or_default().to_string();
                for (key, default) in defaults.as_object().expect("object") {
                    let applies = match key.as_str() {
                        "sid" | "argv" | "cwd" | "env_names" => event == "start",
                        "ignores_sigterm" => event == "child",
                        _ => true,
                    };
                    if applies && value.get(key).is_none() {
                        value[key] = default.clone();
                    }
                }
                let entry = serde_json::from_value(value).expect("a journal entry");
                Entry { line, entry }
            })
            .collect()
    }

    #[test]
    fn a_child_in_another_group_than_its_parent_left_it() {
        let entries = entries_of(&[
            r#"{"event":"start","pid":10,"ppid":1,"pgid":10,"mode":"stdio"}"#,
            r#"{"event":"child","pid":10,"child_pid":11}"#,
            r#"{"event":"start","pid":11,"ppid":10,"pgid":10,"mode":"child"}"#,
            r#"{"event":"child","pid":10,"child_pid":12}"#,
            r#"{"event":"start","pid":12,"ppid":1,"pgid":12,"mode":"child"}"#,
        ]);
        assert!(!left_its_group(&entries, 11), "a grandchild in the group");
        assert!(left_its_group(&entries, 12), "a setsid daemon");
        assert!(
            !left_its_group(&entries, 99),
            "a pid the journal never names"
        );
    }

    #[test]
    fn a_cut_off_last_entry_is_set_apart_but_a_cut_off_middle_line_is_a_fault() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("journal.jsonl");
        let whole = r#"{"v":1,"event":"exit","pid":10,"t_ms":4,"code":0,"reason":"script_end"}"#;
        let cut = r#"{"v":1,"event":"stdin_closed","pid":10,"t_ms":17"#;
        std::fs::write(&path, format!("{whole}\n{cut}")).expect("write");
        let journal = Journal::new(&path);
        let (entries, tail) = journal
            .read_with_cut_off_tail()
            .expect("the whole entry reads");
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].token(), "exit");
        assert_eq!(tail.as_deref(), Some(cut));
        assert_eq!(journal.read().expect("reads").len(), 1);

        std::fs::write(&path, format!("{whole}\n")).expect("write");
        let (entries, tail) = journal.read_with_cut_off_tail().expect("reads");
        assert_eq!((entries.len(), tail), (1, None));

        std::fs::write(&path, format!("{cut}\n{whole}\n")).expect("write");
        let error = journal
            .read()
            .expect_err("a cut-off line before others")
            .to_string();
        assert!(error.contains("line 1"), "{error}");

        std::fs::write(&path, format!("{whole}\nnot json")).expect("write");
        let error = journal
            .read()
            .expect_err("an unterminated line that is no entry's prefix")
            .to_string();
        assert!(error.contains("line 2"), "{error}");
    }

    #[test]
    fn a_journal_that_is_missing_a_link_no_regular_file_or_over_the_bound_is_never_read() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("journal.jsonl");
        let error = |path: &Path| Journal::new(path).read().expect_err("refused").to_string();
        assert_eq!(
            error(&path),
            format!(
                "fake-dsh's journal is missing: {} does not exist",
                path.display()
            )
        );
        symlink("/dev/zero", &path).expect("link");
        assert_eq!(
            error(&path),
            format!(
                "fake-dsh's journal is a link: {} is a symbolic link (not followed)",
                path.display()
            )
        );
        std::fs::remove_file(&path).expect("unlink");
        let real = dir.path().join("real.jsonl");
        std::fs::write(&real, "").expect("write");
        symlink(&real, &path).expect("link");
        assert!(error(&path).contains("is a link"), "even to a regular file");
        std::fs::remove_file(&path).expect("unlink");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).expect("fifo");
        assert!(error(&path).ends_with("is a FIFO"), "{}", error(&path));
        std::fs::remove_file(&path).expect("unlink");
        std::fs::create_dir(&path).expect("dir");
        assert!(error(&path).ends_with("is a directory"), "{}", error(&path));
        std::fs::remove_dir(&path).expect("rmdir");
        std::fs::File::create(&path)
            .expect("create")
            .set_len(MAX_JOURNAL_BYTES + 1)
            .expect("sparse");
        assert!(
            error(&path).starts_with("fake-dsh's journal is over the 67108864-byte bound (64 MiB)"),
            "{}",
            error(&path)
        );
        std::fs::File::create(&path).expect("truncate");
        assert!(Journal::new(&path).read().expect("empty").is_empty());
    }

    #[test]
    fn a_process_outside_the_case_is_not_alive_for_it() {
        let journal = Path::new("/nonexistent/journal.jsonl");
        assert!(!is_alive(std::process::id() as i32, journal));
        assert!(!is_alive(i32::MAX, journal));
    }
}
