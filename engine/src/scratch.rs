//! The kit's own temp dirs (a case's world and its private files, the embedded corpus a run
//! reads, the pre-flight and check-runtime scratch dirs): created mode 0700 under the system temp
//! dir, each with a marker file naming the process that made it (pid and start time). Journals and
//! recordings in them hold prompts, and a `run` killed with SIGKILL removes nothing, so the first
//! temp dir a process makes sweeps the system temp dir first: every `dsh-conformance-*` dir of
//! this user whose marker names a process that is gone is removed. A dir without the marker (not
//! the kit's), and a dir of a live run, are never touched.

use serde_json::{json, Value};
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Every kit temp dir's name starts with one of these (`run`, `report`; the pre-flight
/// handshake; `check-runtime`).
pub const PREFIXES: [&str; 3] = ["dsh-conformance-", "dsh-preflight-", "dsh-check-runtime-"];
/// The marker file inside each kit temp dir.
pub const MARKER: &str = ".dsh-conformance-owner";

/// A fresh kit temp dir `<prefix>XXXXXX` (0700, marked); removed when dropped. `prefix` starts
/// with one of [`PREFIXES`].
pub fn tempdir(prefix: &str) -> io::Result<tempfile::TempDir> {
    debug_assert!(PREFIXES.iter().any(|kit| prefix.starts_with(kit)));
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| {
        sweep(&std::env::temp_dir());
    });
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .permissions(fs::Permissions::from_mode(0o700))
        .tempdir()?;
    let me = std::process::id() as i32;
    let marker = json!({"pid": me, "start": crate::procfs::start_time(me),
        "pid_namespace": pid_namespace()});
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dir.path().join(MARKER))?;
    file.write_all(format!("{marker}\n").as_bytes())?;
    Ok(dir)
}

/// Removes the kit temp dirs in `dir` whose owner is gone (see the module doc); returns how many.
pub fn sweep(dir: &Path) -> usize {
    // SAFETY: getuid has no preconditions and cannot fail.
    let me = unsafe { nix::libc::getuid() };
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|entry| {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            PREFIXES.iter().any(|prefix| name.starts_with(prefix))
        })
        .filter(|entry| {
            fs::symlink_metadata(entry.path()).is_ok_and(|meta| meta.is_dir() && meta.uid() == me)
        })
        .filter(|entry| owner_is_gone(&entry.path()))
        .filter(|entry| fs::remove_dir_all(entry.path()).is_ok())
        .count()
}

/// Whether `dir`'s marker names a process that no longer runs (false without a readable marker).
fn owner_is_gone(dir: &Path) -> bool {
    let Some(marker) = fs::read(dir.join(MARKER))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
    else {
        return false;
    };
    let Some(pid) = marker["pid"]
        .as_i64()
        .and_then(|pid| i32::try_from(pid).ok())
    else {
        return false;
    };
    if marker["pid_namespace"].as_str() != pid_namespace().as_deref() {
        // Made in another pid namespace (a container sharing this temp dir): its pids mean
        // nothing here, so its owner may well be alive.
        return false;
    }
    if Path::new("/proc/self/stat").exists() {
        let recorded = marker["start"].as_u64();
        return crate::procfs::start_time(pid).is_none_or(|now| Some(now) != recorded);
    }
    // No /proc (macOS): the pid alone; a reused pid keeps the dir until it is free again.
    matches!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
        Err(nix::errno::Errno::ESRCH)
    )
}

/// This process's pid namespace (`pid:[4026531836]`), where `/proc` says.
fn pid_namespace() -> Option<String> {
    let link = fs::read_link("/proc/self/ns/pid").ok()?;
    Some(link.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kit_dir(parent: &Path, name: &str, marker: Option<Value>) -> std::path::PathBuf {
        let dir = parent.join(format!("{}{name}", PREFIXES[0]));
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("journal.jsonl"), "a prompt").unwrap();
        if let Some(marker) = marker {
            fs::write(dir.join(MARKER), marker.to_string()).unwrap();
        }
        dir
    }

    #[test]
    fn only_dirs_of_dead_runs_with_a_marker_are_swept() {
        let temp = tempfile::tempdir().unwrap();
        let me = std::process::id() as i32;
        let mut dead = std::process::Command::new("true").spawn().unwrap();
        let dead_pid = dead.id() as i32;
        dead.wait().unwrap();
        let ns = pid_namespace();
        let live = kit_dir(
            temp.path(),
            "live",
            Some(json!({"pid": me, "start": crate::procfs::start_time(me), "pid_namespace": ns})),
        );
        let stale = kit_dir(
            temp.path(),
            "stale",
            Some(json!({"pid": dead_pid, "start": 1, "pid_namespace": ns})),
        );
        let elsewhere = kit_dir(
            temp.path(),
            "other-namespace",
            Some(json!({"pid": dead_pid, "start": 1, "pid_namespace": "pid:[1]"})),
        );
        let unmarked = kit_dir(temp.path(), "unmarked", None);
        let other_name = temp.path().join("not-the-kit");
        fs::create_dir(&other_name).unwrap();
        fs::write(
            other_name.join(MARKER),
            json!({"pid": dead_pid}).to_string(),
        )
        .unwrap();
        let removed = sweep(temp.path());
        assert_eq!(removed, 1);
        assert!(!stale.exists());
        assert!(live.exists() && unmarked.exists() && other_name.exists() && elsewhere.exists());
    }

    #[test]
    fn a_reused_pid_does_not_keep_a_stale_dir_on_linux() {
        if !Path::new("/proc/self/stat").exists() {
            return;
        }
        let temp = tempfile::tempdir().unwrap();
        let me = std::process::id() as i32;
        let start = crate::procfs::start_time(me).unwrap();
        let marker = json!({"pid": me, "start": start + 1, "pid_namespace": pid_namespace()});
        let reused = kit_dir(temp.path(), "reused", Some(marker));
        assert_eq!(sweep(temp.path()), 1);
        assert!(!reused.exists());
    }

    #[test]
    fn a_kit_temp_dir_is_private_and_marked() {
        let dir = tempdir("dsh-conformance-test-").unwrap();
        let mode = fs::metadata(dir.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let marker = fs::metadata(dir.path().join(MARKER)).unwrap();
        assert_eq!(marker.permissions().mode() & 0o777, 0o600);
        assert!(!owner_is_gone(dir.path()));
    }
}
