//! How a run writes a session mapping it saved before (a run's `expect.mapping_write`, I-C28):
//! watches `RUNTIME_DATA_DIR` with inotify while the run is in flight and names every file that
//! held an earlier session id and was modified in place instead of replaced whole. A crash while
//! such a file is rewritten leaves it torn; a temp file renamed over it leaves the old mapping or
//! the new one. Linux only: elsewhere the watch says why it judged nothing.

use std::path::{Path, PathBuf};

/// What the watch saw over one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// Files that held an earlier session id and were modified in place, relative to the data
    /// dir (empty: none was).
    InPlace(Vec<PathBuf>),
    /// The watch could not judge the run, and why.
    NotJudged(String),
}

/// A watch started when a run is sent; [`MappingWatch::finish`] once it has its outcome.
pub struct MappingWatch {
    dir: PathBuf,
    state: Result<imp::Watch, String>,
}

impl MappingWatch {
    /// Starts watching `data_dir`: the files holding one of `sessions` now are the saved mappings.
    pub fn start(data_dir: &Path, sessions: &[String]) -> Self {
        let held = held_files(data_dir, sessions);
        let state = if held.is_empty() {
            Err(
                "no file under RUNTIME_DATA_DIR held an earlier session id when the run was sent"
                    .to_string(),
            )
        } else {
            imp::Watch::start(data_dir, held)
        };
        MappingWatch {
            dir: data_dir.to_path_buf(),
            state,
        }
    }

    /// Reads what happened since [`MappingWatch::start`].
    pub fn finish(self) -> Seen {
        let MappingWatch { dir, state } = self;
        match state.and_then(imp::Watch::finish) {
            Ok(in_place) => Seen::InPlace(
                in_place
                    .iter()
                    .map(|path| path.strip_prefix(&dir).unwrap_or(path).to_path_buf())
                    .collect(),
            ),
            Err(why) => Seen::NotJudged(why),
        }
    }
}

/// The files under `dir` whose bytes hold one of `sessions`.
pub(crate) fn held_files(dir: &Path, sessions: &[String]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    walk(dir, 0, &mut |path, is_dir| {
        if is_dir {
            return;
        }
        let Ok(bytes) = std::fs::read(path) else {
            return;
        };
        let holds = |id: &String| {
            !id.is_empty()
                && bytes
                    .windows(id.len())
                    .any(|window| window == id.as_bytes())
        };
        if sessions.iter().any(holds) {
            files.push(path.to_path_buf());
        }
    });
    files
}

/// Calls `visit(path, is_dir)` for `dir` itself and everything under it (links not followed,
/// eight levels at most).
fn walk(dir: &Path, depth: usize, visit: &mut dyn FnMut(&Path, bool)) {
    if depth == 0 {
        visit(dir, true);
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        if kind.is_dir() && depth < 8 {
            visit(&path, true);
            walk(&path, depth + 1, visit);
        } else if kind.is_file() {
            visit(&path, false);
        }
    }
}

#[cfg(target_os = "linux")]
mod imp {
    use nix::errno::Errno;
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
    use std::collections::HashMap;
    use std::path::{Path, PathBuf};

    pub struct Watch {
        inotify: Inotify,
        dirs: HashMap<WatchDescriptor, PathBuf>,
        /// Saved mappings not yet replaced, moved away or deleted during the run.
        intact: Vec<PathBuf>,
    }

    impl Watch {
        pub fn start(data_dir: &Path, held: Vec<PathBuf>) -> Result<Watch, String> {
            let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
                .map_err(|e| format!("inotify unavailable: {e}"))?;
            let flags = AddWatchFlags::IN_MODIFY
                | AddWatchFlags::IN_CREATE
                | AddWatchFlags::IN_DELETE
                | AddWatchFlags::IN_MOVED_FROM
                | AddWatchFlags::IN_MOVED_TO;
            let mut dirs = HashMap::new();
            let mut failed = None;
            super::walk(data_dir, 0, &mut |path, is_dir| {
                if !is_dir || failed.is_some() {
                    return;
                }
                match inotify.add_watch(path, flags) {
                    Ok(wd) => {
                        dirs.insert(wd, path.to_path_buf());
                    }
                    Err(e) => failed = Some(format!("cannot watch {}: {e}", path.display())),
                }
            });
            match failed {
                Some(why) => Err(why),
                None => Ok(Watch {
                    inotify,
                    dirs,
                    intact: held,
                }),
            }
        }

        /// The saved mappings modified in place since the watch started, in order.
        pub fn finish(mut self) -> Result<Vec<PathBuf>, String> {
            let mut in_place = Vec::new();
            loop {
                let events = match self.inotify.read_events() {
                    Ok(events) => events,
                    Err(Errno::EAGAIN) => return Ok(in_place),
                    Err(e) => return Err(format!("cannot read inotify events: {e}")),
                };
                for event in events {
                    if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                        return Err("the inotify queue overflowed".to_string());
                    }
                    let (Some(dir), Some(name)) = (self.dirs.get(&event.wd), &event.name) else {
                        continue;
                    };
                    let path = dir.join(name);
                    let Some(at) = self.intact.iter().position(|held| *held == path) else {
                        continue;
                    };
                    if event.mask.contains(AddWatchFlags::IN_MODIFY) {
                        in_place.push(self.intact.remove(at));
                    } else {
                        // Replaced (renamed over or re-created), moved away or deleted: any later
                        // write is to another file.
                        self.intact.remove(at);
                    }
                }
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::path::{Path, PathBuf};

    pub struct Watch;

    impl Watch {
        pub fn start(_data_dir: &Path, _held: Vec<PathBuf>) -> Result<Watch, String> {
            Err("watching file writes needs inotify (Linux only)".to_string())
        }

        pub fn finish(self) -> Result<Vec<PathBuf>, String> {
            Ok(Vec::new())
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::fs;
    use std::io::Write;

    fn saved(dir: &Path) -> PathBuf {
        let sessions = dir.join("store").join("sessions");
        fs::create_dir_all(&sessions).unwrap();
        let file = sessions.join("c1.json");
        fs::write(&file, r#"{"session_id":"sess-old"}"#).unwrap();
        fs::write(sessions.join("log.txt"), "nothing to see").unwrap();
        file
    }

    #[test]
    fn a_mapping_rewritten_in_place_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = saved(dir.path());
        let watch = MappingWatch::start(dir.path(), &["sess-old".to_string()]);
        fs::write(&file, r#"{"session_id":"sess-new"}"#).unwrap();
        fs::OpenOptions::new()
            .append(true)
            .open(file.with_file_name("log.txt"))
            .unwrap()
            .write_all(b"more")
            .unwrap();
        let relative = file.strip_prefix(dir.path()).unwrap().to_path_buf();
        assert_eq!(watch.finish(), Seen::InPlace(vec![relative]));
    }

    #[test]
    fn a_mapping_replaced_by_a_rename_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let file = saved(dir.path());
        let watch = MappingWatch::start(dir.path(), &["sess-old".to_string()]);
        let temp = file.with_extension("tmp");
        fs::write(&temp, r#"{"session_id":"sess-new"}"#).unwrap();
        fs::rename(&temp, &file).unwrap();
        // A later write to the replacement is not a write to the saved mapping.
        fs::write(&file, r#"{"session_id":"sess-newer"}"#).unwrap();
        assert_eq!(watch.finish(), Seen::InPlace(Vec::new()));
    }

    #[test]
    fn nothing_saved_is_not_judged() {
        let dir = tempfile::tempdir().unwrap();
        saved(dir.path());
        let watch = MappingWatch::start(dir.path(), &["sess-other".to_string()]);
        assert!(matches!(watch.finish(), Seen::NotJudged(why) if why.contains("no file")));
    }
}
