//! Session records under a session directory, `$DSH_HOME/sessions/<session_id>.json` unless the
//! profile's session root moves them (multica: `MULTICA_DSH_SESSION_ROOT/<session_id>.json`):
//! what a later process needs to cold-resume a session (its cwd, its turns, the HTML file it
//! owns), written atomically.

use crate::home::{hex, write_atomically};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// One turn served in a session. The prompt is kept as a hash and a length, never as text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnRecord {
    pub request_id: String,
    pub prompt_sha256: String,
    pub prompt_chars: usize,
    pub cwd: String,
    /// `completed`, `cancelled` or `in_progress`.
    pub status: String,
    pub t_ms: u64,
}

/// A stored session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    pub v: u64,
    pub session_id: String,
    pub cwd: String,
    /// The absolute path of the HTML design file this session writes and edits.
    pub html_file: Option<String>,
    pub created_ms: u64,
    pub turns: Vec<TurnRecord>,
}

/// Why a stored session could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// No record with that id (or the id cannot name a record).
    NotFound,
    /// The record exists but is not a readable session.
    Corrupt(String),
}

/// A fresh session id: `od-` and a random UUID v4 (`uuid`, from the OS's random source).
pub fn new_session_id() -> String {
    format!("od-{}", uuid::Uuid::new_v4())
}

/// Whether an id can safely name a record file (no path separators, no leading dot).
pub fn is_storable_id(session_id: &str) -> bool {
    !session_id.is_empty()
        && session_id.len() <= 200
        && !session_id.starts_with('.')
        && session_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The session directory of a home when no session root moves it: `$DSH_HOME/sessions`.
pub fn home_session_dir(dsh_home: &Path) -> PathBuf {
    dsh_home.join("sessions")
}

/// `<session dir>/<session_id>.json`.
pub fn record_path(session_dir: &Path, session_id: &str) -> PathBuf {
    session_dir.join(format!("{session_id}.json"))
}

/// Makes sure fake-dsh may store sessions in a session root it was handed (multica's
/// `MULTICA_DSH_SESSION_ROOT`, a directory the host made for the runtime): a missing root is
/// made; an existing one may hold only session records (`*.json` files) and the temp files of
/// [`write_atomically`]. Anything else (a real dsh's session history, say) is refused before
/// anything is written, naming the root and what in it fake-dsh did not create.
pub fn claim_session_root(root: &Path) -> Result<(), String> {
    let refuse = |why: String| {
        format!(
            "error: fake-dsh will not store sessions in {}: {why}",
            root.display()
        )
    };
    match std::fs::symlink_metadata(root) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return std::fs::create_dir_all(root).map_err(|error| refuse(error.to_string()));
        }
        Err(error) => return Err(refuse(error.to_string())),
        Ok(meta) if !meta.is_dir() => return Err(refuse("it is not a directory".to_string())),
        Ok(_) => {}
    }
    let entries = std::fs::read_dir(root).map_err(|error| refuse(error.to_string()))?;
    let mut foreign: Vec<String> = entries
        .flatten()
        .filter(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let is_file = entry.file_type().is_ok_and(|kind| kind.is_file());
            let temp = name.starts_with('.') && name.ends_with(".tmp");
            !(is_file && (name.ends_with(".json") || temp))
        })
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    foreign.sort();
    if foreign.is_empty() {
        return Ok(());
    }
    let shown: Vec<&str> = foreign.iter().take(3).map(String::as_str).collect();
    Err(refuse(format!(
        "it holds entries fake-dsh did not create ({}{})",
        shown.join(", "),
        if foreign.len() > shown.len() {
            ", ..."
        } else {
            ""
        }
    )))
}

/// The sha256 of a prompt, hex.
pub fn prompt_hash(prompt: &str) -> String {
    hex(&Sha256::digest(prompt.as_bytes()))
}

/// Loads a stored session from a session directory.
pub fn load(session_dir: &Path, session_id: &str) -> Result<SessionRecord, LoadError> {
    if !is_storable_id(session_id) {
        return Err(LoadError::NotFound);
    }
    let path = record_path(session_dir, session_id);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(LoadError::NotFound)
        }
        Err(error) => return Err(LoadError::Corrupt(format!("{}: {error}", path.display()))),
    };
    let record: SessionRecord = serde_json::from_slice(&bytes)
        .map_err(|error| LoadError::Corrupt(format!("{}: {error}", path.display())))?;
    if record.session_id != session_id {
        return Err(LoadError::Corrupt(format!(
            "{}: holds session {:?}",
            path.display(),
            record.session_id
        )));
    }
    Ok(record)
}

/// Stores a session record atomically in a session directory.
pub fn save(session_dir: &Path, record: &SessionRecord) -> std::io::Result<()> {
    if !is_storable_id(&record.session_id) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "session id {:?} cannot name a record file",
                record.session_id
            ),
        ));
    }
    let mut contents = serde_json::to_vec_pretty(record).expect("records always serialize");
    contents.push(b'\n');
    write_atomically(&record_path(session_dir, &record.session_id), &contents)
}

impl SessionRecord {
    /// A new, empty session rooted in `cwd`.
    pub fn new(session_id: &str, cwd: &str) -> SessionRecord {
        SessionRecord {
            v: 1,
            session_id: session_id.to_string(),
            cwd: cwd.to_string(),
            html_file: None,
            created_ms: crate::journal::now_ms(),
            turns: Vec::new(),
        }
    }

    /// Appends a turn in progress.
    pub fn begin_turn(&mut self, request_id: &str, prompt: &str, cwd: &str) {
        self.turns.push(TurnRecord {
            request_id: request_id.to_string(),
            prompt_sha256: prompt_hash(prompt),
            prompt_chars: prompt.chars().count(),
            cwd: cwd.to_string(),
            status: "in_progress".to_string(),
            t_ms: crate::journal::now_ms(),
        });
    }

    /// Sets the status of the latest turn.
    pub fn finish_turn(&mut self, status: &str) {
        if let Some(turn) = self.turns.last_mut() {
            turn.status = status.to_string();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_uuid_v4_shaped_and_distinct() {
        let first = new_session_id();
        let second = new_session_id();
        assert_ne!(first, second);
        assert_eq!(first.len(), 3 + 36);
        assert_eq!(&first[17..18], "4");
        assert!(is_storable_id(&first));
    }

    #[test]
    fn records_round_trip_and_bad_ones_are_told_apart() {
        let home = tempfile::tempdir().unwrap();
        let mut record = SessionRecord::new("od-abc", "/tmp/p");
        record.begin_turn("r1", "secret prompt", "/tmp/p");
        save(home.path(), &record).unwrap();
        assert_eq!(load(home.path(), "od-abc").unwrap(), record);
        let stored = std::fs::read_to_string(record_path(home.path(), "od-abc")).unwrap();
        assert!(!stored.contains("secret prompt"));

        assert_eq!(load(home.path(), "od-missing"), Err(LoadError::NotFound));
        assert_eq!(load(home.path(), "../etc/passwd"), Err(LoadError::NotFound));
        std::fs::write(record_path(home.path(), "od-bad"), b"{not json").unwrap();
        assert!(matches!(
            load(home.path(), "od-bad"),
            Err(LoadError::Corrupt(_))
        ));
    }

    #[test]
    fn a_session_root_is_made_or_holds_only_records() {
        let dir = tempfile::tempdir().unwrap();
        let fresh = dir.path().join("dsh-sessions/dsh/agent-1");
        claim_session_root(&fresh).unwrap();
        assert!(fresh.is_dir(), "a missing root is made");
        save(&fresh, &SessionRecord::new("od-1", "/p")).unwrap();
        claim_session_root(&fresh).expect("records are fake-dsh's own");

        std::fs::write(fresh.join("history.jsonl"), b"{}\n").unwrap();
        let refused = claim_session_root(&fresh).unwrap_err();
        assert!(refused.contains("history.jsonl"), "{refused}");
        assert!(refused.contains(&fresh.display().to_string()), "{refused}");

        let file = dir.path().join("a-file");
        std::fs::write(&file, b"").unwrap();
        let refused = claim_session_root(&file).unwrap_err();
        assert!(refused.contains("not a directory"), "{refused}");
    }
}
