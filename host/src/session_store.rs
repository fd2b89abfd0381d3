//! The host's session mapping (spec 7, 8): one file per OD conversation under the host's data
//! directory, holding the opaque Harness session id and the full compatibility key it was made
//! under. Writes are atomic; a corrupt file reads as "no mapping" with a warning.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The OD runtime id of this adapter (distinct from the profile's `open-design`).
pub const RUNTIME_ID: &str = "deepseek-harness";

/// Everything that must be equal for a later run to resume a mapped session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompatibilityKey {
    pub conversation_id: String,
    pub project_id: String,
    /// The canonical project cwd.
    pub cwd: String,
    pub runtime_id: String,
    pub provider: String,
    pub model: String,
    /// The canonical path of the dsh executable.
    pub executable: String,
    /// `major.minor` of `dsh --version`, or `unknown`.
    pub version_family: String,
    pub profile: String,
    pub protocol_generation: u64,
    /// `plugin_version` from `ready`.
    pub plugin_version: String,
    /// `compatibility_generation` from `ready` (the behaviour-affecting composition generation).
    pub compatibility_generation: Option<String>,
}

impl CompatibilityKey {
    /// The names of the members that differ, for a diagnostic.
    pub fn differences(&self, other: &Self) -> Vec<&'static str> {
        let pairs: [(&'static str, bool); 12] = [
            (
                "conversation_id",
                self.conversation_id == other.conversation_id,
            ),
            ("project_id", self.project_id == other.project_id),
            ("cwd", self.cwd == other.cwd),
            ("runtime_id", self.runtime_id == other.runtime_id),
            ("provider", self.provider == other.provider),
            ("model", self.model == other.model),
            ("executable", self.executable == other.executable),
            (
                "version_family",
                self.version_family == other.version_family,
            ),
            ("profile", self.profile == other.profile),
            (
                "protocol_generation",
                self.protocol_generation == other.protocol_generation,
            ),
            (
                "plugin_version",
                self.plugin_version == other.plugin_version,
            ),
            (
                "compatibility_generation",
                self.compatibility_generation == other.compatibility_generation,
            ),
        ];
        pairs
            .into_iter()
            .filter(|(_, same)| !same)
            .map(|(name, _)| name)
            .collect()
    }
}

/// One stored mapping.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionMapping {
    pub session_id: String,
    pub key: CompatibilityKey,
}

#[derive(Serialize, Deserialize)]
struct StoredFile {
    v: u64,
    session_id: String,
    key: CompatibilityKey,
}

const STORE_FORMAT: u64 = 1;

/// What reading a conversation's mapping found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    pub mapping: Option<SessionMapping>,
    /// Set when a file existed but could not be used (it then reads as no mapping).
    pub warning: Option<String>,
}

/// The mapping files under `<data dir>/dsh-host/sessions/`.
#[derive(Debug, Clone)]
pub struct SessionStore {
    dir: PathBuf,
}

impl SessionStore {
    /// The store under `data_dir` (created on first write).
    pub fn new(data_dir: &Path) -> Self {
        Self {
            dir: data_dir.join("dsh-host").join("sessions"),
        }
    }

    /// The store under `RUNTIME_DATA_DIR`, else under `$HOME/.local/share`.
    pub fn from_env() -> Option<Self> {
        if let Some(dir) = std::env::var_os("RUNTIME_DATA_DIR").filter(|dir| !dir.is_empty()) {
            return Some(Self::new(Path::new(&dir)));
        }
        let home = std::env::var_os("HOME").filter(|home| !home.is_empty())?;
        Some(Self::new(&Path::new(&home).join(".local").join("share")))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of one conversation: named by a hash, so any conversation id is a safe name.
    pub fn file_of(&self, conversation_id: &str) -> PathBuf {
        let digest = Sha256::digest(conversation_id.as_bytes());
        let name: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
        self.dir.join(format!("{name}.json"))
    }

    pub fn load(&self, conversation_id: &str) -> Lookup {
        let path = self.file_of(conversation_id);
        let unusable = |why: String| Lookup {
            mapping: None,
            warning: Some(format!(
                "session mapping {} is unusable ({why}); starting a new session",
                path.display()
            )),
        };
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                return Lookup {
                    mapping: None,
                    warning: None,
                }
            }
            Err(error) => return unusable(error.to_string()),
        };
        match serde_json::from_slice::<StoredFile>(&bytes) {
            Ok(stored) if stored.v != STORE_FORMAT => {
                unusable(format!("format {} is not {STORE_FORMAT}", stored.v))
            }
            Ok(stored) if stored.key.conversation_id != conversation_id => {
                unusable("it belongs to another conversation".to_string())
            }
            Ok(stored) if stored.session_id.is_empty() => unusable("empty session id".to_string()),
            Ok(stored) => Lookup {
                mapping: Some(SessionMapping {
                    session_id: stored.session_id,
                    key: stored.key,
                }),
                warning: None,
            },
            Err(error) => unusable(format!("corrupt: {error}")),
        }
    }

    /// A mapping as its file holds it.
    pub(crate) fn encode(mapping: &SessionMapping) -> io::Result<Vec<u8>> {
        let stored = StoredFile {
            v: STORE_FORMAT,
            session_id: mapping.session_id.clone(),
            key: mapping.key.clone(),
        };
        let mut bytes = serde_json::to_vec_pretty(&stored).map_err(io::Error::other)?;
        bytes.push(b'\n');
        Ok(bytes)
    }

    /// Replace the conversation's mapping atomically: a temp file in the same directory, fsync,
    /// rename over the old one, fsync the directory.
    pub fn save(&self, mapping: &SessionMapping) -> io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        let path = self.file_of(&mapping.key.conversation_id);
        let bytes = Self::encode(mapping)?;
        let temp = self.temp_path(&path);
        let written = (|| {
            let mut file = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&temp)?;
            file.write_all(&bytes)?;
            file.sync_all()?;
            fs::rename(&temp, &path)
        })();
        if written.is_err() {
            let _ = fs::remove_file(&temp);
        }
        written?;
        sync_dir(&self.dir);
        Ok(())
    }

    /// Remove the conversation's mapping (no mapping is not an error).
    pub fn forget(&self, conversation_id: &str) -> io::Result<()> {
        match fs::remove_file(self.file_of(conversation_id)) {
            Ok(()) => {
                sync_dir(&self.dir);
                Ok(())
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(error),
        }
    }

    fn temp_path(&self, target: &Path) -> PathBuf {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let unique = NEXT.fetch_add(1, Ordering::Relaxed);
        self.dir
            .join(format!(".{name}.{}-{unique}.tmp", std::process::id()))
    }
}

fn sync_dir(dir: &Path) {
    // Makes the rename durable; not every platform can open a directory, so best effort.
    if let Ok(handle) = fs::File::open(dir) {
        let _ = handle.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn key(conversation: &str) -> CompatibilityKey {
        CompatibilityKey {
            conversation_id: conversation.into(),
            project_id: "proj-1".into(),
            cwd: "/tmp/project".into(),
            runtime_id: RUNTIME_ID.into(),
            provider: "deepseek-official".into(),
            model: "deepseek-chat".into(),
            executable: "/usr/bin/dsh".into(),
            version_family: "0.1".into(),
            profile: "open-design".into(),
            protocol_generation: 1,
            plugin_version: "0.1.0".into(),
            compatibility_generation: Some("g1".into()),
        }
    }

    #[test]
    fn save_load_forget() {
        let temp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let store = SessionStore::new(temp.path());
        assert_eq!(
            store.load("c1"),
            Lookup {
                mapping: None,
                warning: None
            }
        );
        let mapping = SessionMapping {
            session_id: "od-1".into(),
            key: key("c1"),
        };
        store.save(&mapping).unwrap_or_else(|e| panic!("save: {e}"));
        assert_eq!(store.load("c1").mapping, Some(mapping.clone()));
        let replaced = SessionMapping {
            session_id: "od-2".into(),
            key: key("c1"),
        };
        store
            .save(&replaced)
            .unwrap_or_else(|e| panic!("save: {e}"));
        assert_eq!(store.load("c1").mapping, Some(replaced));
        store.forget("c1").unwrap_or_else(|e| panic!("forget: {e}"));
        assert_eq!(store.load("c1").mapping, None);
        store
            .forget("c1")
            .unwrap_or_else(|e| panic!("forget twice: {e}"));
        let leftovers: Vec<_> = fs::read_dir(store.dir())
            .map(|d| d.flatten().collect())
            .unwrap_or_default();
        assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
    }

    #[test]
    fn corrupt_file_reads_as_no_mapping_with_warning() {
        let temp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let store = SessionStore::new(temp.path());
        fs::create_dir_all(store.dir()).unwrap_or_else(|e| panic!("mkdir: {e}"));
        fs::write(store.file_of("c1"), b"{\"v\":1,\"session_id\":\"od-")
            .unwrap_or_else(|e| panic!("write: {e}"));
        let lookup = store.load("c1");
        assert_eq!(lookup.mapping, None);
        assert!(lookup.warning.is_some_and(|w| w.contains("corrupt")));
    }

    #[test]
    fn differences_name_the_members() {
        let mut other = key("c1");
        other.cwd = "/elsewhere".into();
        other.compatibility_generation = None;
        assert_eq!(
            key("c1").differences(&other),
            vec!["cwd", "compatibility_generation"]
        );
    }
}
