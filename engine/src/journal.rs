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
    /// under way), which [`Journal::read_with_cut_off_tail`] reports.
    pub fn read(&self) -> Result<Vec<Entry>, String> {
        self.read_with_cut_off_tail().map(|(entries, _)| entries)
    }

    /// Every entry so far, and the last line as text when it stops mid-entry without a newline.
    pub fn read_with_cut_off_tail(&self) -> Result<(Vec<Entry>, Option<String>), String> {
        let bytes = std::fs::read(&self.path)
            .map_err(|e| format!("cannot read the journal {}: {e}", self.path.display()))?;
        let complete = complete_part(&bytes);
        let tail = &bytes[complete.len()..];
        let mut entries = Vec::new();
        for (line, raw) in complete.split(|b| *b == b'\n').enumerate() {
            if raw.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let entry: format::Entry = serde_json::from_slice(raw).map_err(|e| {
                format!(
                    "journal {} line {}: not a journal entry ({e})",
                    self.path.display(),
                    line + 1
                )
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
        let error = Journal::new(&path).read().expect_err("not JSON");
        assert!(error.contains("line 2"), "{error}");
        std::fs::write(&path, "{\"v\":1}\n").expect("write");
        let error = Journal::new(&path).read().expect_err("JSON, but no entry");
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
        let error = journal.read().expect_err("a cut-off line before others");
        assert!(error.contains("line 1"), "{error}");

        std::fs::write(&path, format!("{whole}\nnot json")).expect("write");
        let error = journal
            .read()
            .expect_err("an unterminated line that is no entry's prefix");
        assert!(error.contains("line 2"), "{error}");
    }

    #[test]
    fn a_process_outside_the_case_is_not_alive_for_it() {
        let journal = Path::new("/nonexistent/journal.jsonl");
        assert!(!is_alive(std::process::id() as i32, journal));
        assert!(!is_alive(i32::MAX, journal));
    }
}
