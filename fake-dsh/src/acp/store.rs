//! The ACP sessions kept in the Harness home, so a later process lists and resumes them (facts
//! F1.6, F4.3, F4.4): `$DSH_HOME/sessions/--<cwd with / as ->--/<uuid>/` holding `session.lock`
//! (held, an exclusive `flock`, while a process has the session open) and the log,
//! `session.v4.jsonl.zstd` (0.2.1) or `session.v3.jsonl.zstd` (0.1.5). The log's lines are
//! fake-dsh's own (a header, then one line per finished turn), in zstd frames any zstd reader
//! decodes. A session is stored before `session/new` answers. The home is claimed
//! ([`crate::home::claim`]) before the first session is stored.

use crate::sdk::session::Persona;
use crate::sdk::session::{cwd_slug, zstd_raw};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};

/// An open stored session: its log (appended to) and its lock.
pub struct Stored {
    log: std::fs::File,
    _lock: nix::fcntl::Flock<std::fs::File>,
    /// The turns an earlier process recorded.
    pub turns: u64,
    /// The token count the last recorded turn reached.
    pub used: u64,
}

impl Stored {
    /// Appends one line to the log (a zstd frame).
    pub fn append(&mut self, value: &Value) {
        let mut line = value.to_string().into_bytes();
        line.push(b'\n');
        let _ = self.log.write_all(&zstd_raw::frame(&line));
    }
}

/// A session found in the home.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub id: String,
    pub cwd: String,
    pub created_at: u64,
    log: PathBuf,
}

/// The sessions root of a Harness home, for one release.
pub struct Store {
    root: PathBuf,
    persona: Persona,
}

impl Store {
    pub fn new(dsh_home: &Path, persona: Persona) -> Store {
        Store {
            root: dsh_home.join("sessions"),
            persona,
        }
    }

    fn log_name(&self) -> &'static str {
        match self.persona {
            Persona::V015 => "session.v3.jsonl.zstd",
            _ => "session.v4.jsonl.zstd",
        }
    }

    /// Stores a new session and opens it.
    pub fn create(&self, id: &str, cwd: &Path) -> Result<Stored, String> {
        let dir = self.root.join(cwd_slug(cwd)).join(id);
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create session {}: {e}", dir.display()))?;
        let lock = lock(&dir.join("session.lock"))
            .map_err(|e| format!("cannot lock session {id}: {e}"))?;
        let path = dir.join(self.log_name());
        let log = std::fs::OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(|e| format!("cannot create session {}: {e}", path.display()))?;
        let mut stored = Stored {
            log,
            _lock: lock,
            turns: 0,
            used: 0,
        };
        stored.append(
            &json!({"type": "session", "id": id, "cwd": cwd.to_string_lossy(),
            "createdAt": crate::journal::now_ms(), "writer": "fake-dsh"}),
        );
        Ok(stored)
    }

    /// Every stored session of this release, newest first.
    pub fn list(&self) -> Vec<Found> {
        let mut found: Vec<Found> = std::fs::read_dir(&self.root)
            .into_iter()
            .flatten()
            .flatten()
            .flat_map(|slug| {
                std::fs::read_dir(slug.path())
                    .into_iter()
                    .flatten()
                    .flatten()
            })
            .filter_map(|dir| read_header(&dir.path().join(self.log_name())))
            .collect();
        found.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
        found
    }

    /// The stored session of this id, if any.
    pub fn find(&self, id: &str) -> Option<Found> {
        if !crate::sessions::is_storable_id(id) {
            return None;
        }
        self.list().into_iter().find(|found| found.id == id)
    }

    /// Opens a stored session for this process (its turns counted); another live process
    /// holding it is an error.
    pub fn open(&self, found: &Found) -> Result<Stored, String> {
        let lock = lock(&found.log.with_file_name("session.lock"))
            .map_err(|_| format!("session is already active: {}", found.id))?;
        let text = std::fs::read(&found.log)
            .map_err(|e| e.to_string())
            .and_then(|bytes| zstd_raw::decode(&bytes))
            .map_err(|e| format!("session is not resumable: {}: {e}", found.id))?;
        let turns: Vec<Value> = text
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|line| line["type"] == "turn")
            .collect();
        let log = std::fs::OpenOptions::new()
            .append(true)
            .open(&found.log)
            .map_err(|e| format!("session is not resumable: {}: {e}", found.id))?;
        Ok(Stored {
            log,
            _lock: lock,
            turns: turns.len() as u64,
            used: turns.last().and_then(|t| t["used"].as_u64()).unwrap_or(0),
        })
    }
}

/// A session log's header, if the file is one.
fn read_header(log: &Path) -> Option<Found> {
    let bytes = std::fs::read(log).ok()?;
    let text = zstd_raw::decode(&bytes).ok()?;
    let header: Value = serde_json::from_str(text.lines().next()?).ok()?;
    (header["type"] == "session").then(|| Found {
        id: header["id"].as_str().unwrap_or_default().to_string(),
        cwd: header["cwd"].as_str().unwrap_or_default().to_string(),
        created_at: header["createdAt"].as_u64().unwrap_or(0),
        log: log.to_path_buf(),
    })
}

/// Takes a session's lock file (created when missing), without waiting.
fn lock(path: &Path) -> Result<nix::fcntl::Flock<std::fs::File>, String> {
    use nix::fcntl::{Flock, FlockArg};
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| e.to_string())?;
    Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, e)| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_session_is_listed_found_and_reopened_with_its_turns() {
        let home = tempfile::tempdir().unwrap();
        let store = Store::new(home.path(), Persona::V021);
        let cwd = Path::new("/w/project");
        let mut stored = store.create("a-1", cwd).unwrap();
        stored.append(&json!({"type": "turn", "used": 5809}));
        let found = store.find("a-1").unwrap();
        assert_eq!(found.cwd, "/w/project");
        assert!(found
            .log
            .ends_with("--w-project--/a-1/session.v4.jsonl.zstd"));
        assert!(
            store.open(&found).is_err(),
            "held while the first one is open"
        );
        drop(stored);
        let reopened = store.open(&found).unwrap();
        assert_eq!((reopened.turns, reopened.used), (1, 5809));
        assert!(Store::new(home.path(), Persona::V015).find("a-1").is_none());
        assert!(store.find("../a-1").is_none());
    }
}
