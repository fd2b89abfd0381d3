//! `install-fake-dsh --dir DIR`: puts fake-dsh at `DIR/dsh` without ever harming what is there.
//!
//! `DIR/dsh` is replaced only when it is a fake-dsh this task installed: a regular file whose
//! sha256 the record `DIR/.fake-dsh-install.json` holds. Anything else there (the real dsh, npm's
//! bin symlink to its `dsh.js`, a file of unknown origin) is refused with exit 2 unless `--force`
//! is given. Even then nothing is written through a symlink: the new file is written beside it
//! and renamed over the name, which replaces the link itself.

use sha2::{Digest, Sha256};
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The record of what this task installed in a directory.
pub const RECORD: &str = ".fake-dsh-install.json";

/// An error when installing into `dir` would replace something that is not this task's
/// (always fine with `force`); checked before building, and again by [`install`].
pub fn check(dir: &Path, force: bool) -> Result<(), String> {
    if force {
        return Ok(());
    }
    refuse_foreign(&target_in(dir), &dir.join(RECORD))
}

fn target_in(dir: &Path) -> PathBuf {
    dir.join(format!("dsh{}", std::env::consts::EXE_SUFFIX))
}

/// Installs `binary` as `dir/dsh` (see the module doc); returns the installed path.
pub fn install(binary: &Path, dir: &Path, force: bool) -> Result<PathBuf, String> {
    check(dir, force)?;
    let target = target_in(dir);
    let record = dir.join(RECORD);
    for path in [&target, &record] {
        if fs::symlink_metadata(path).is_ok_and(|meta| meta.is_dir()) {
            return Err(format!("{} is a directory", path.display()));
        }
    }
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let bytes = fs::read(binary).map_err(|e| format!("cannot read {}: {e}", binary.display()))?;
    replace(&target, &bytes, 0o755)?;
    let note = serde_json::json!({
        "installed": target.file_name().map(|name| name.to_string_lossy().into_owned()),
        "by": "cargo xtask install-fake-dsh",
        "sha256": sha256(&bytes),
    });
    replace(&record, format!("{note:#}\n").as_bytes(), 0o644)?;
    Ok(target)
}

/// An error unless `target` is missing or a fake-dsh this task installed (per `record`).
fn refuse_foreign(target: &Path, record: &Path) -> Result<(), String> {
    let Ok(meta) = fs::symlink_metadata(target) else {
        return Ok(());
    };
    let why = if meta.file_type().is_symlink() {
        let points_to = fs::read_link(target).unwrap_or_default();
        format!("it is a symbolic link (to {})", points_to.display())
    } else if !meta.is_file() {
        "it is not a regular file".to_string()
    } else if installed_by_us(target, record) {
        return Ok(());
    } else {
        format!("it is not a fake-dsh this task installed (no matching {RECORD} beside it)")
    };
    Err(format!(
        "refusing to replace {}: {why}; it may be the real dsh. Choose another --dir, or pass --force to replace the name (a symlink is replaced, never written through)",
        target.display()
    ))
}

/// Whether `record` holds the sha256 of `target`'s bytes (a record that is a link counts for
/// nothing).
fn installed_by_us(target: &Path, record: &Path) -> bool {
    let Ok(meta) = fs::symlink_metadata(record) else {
        return false;
    };
    if !meta.is_file() {
        return false;
    }
    let recorded = fs::read(record)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .and_then(|note| note["sha256"].as_str().map(str::to_string));
    recorded.is_some() && fs::read(target).ok().map(|bytes| sha256(&bytes)) == recorded
}

/// Writes `bytes` to a new temp file beside `path`, then renames it over `path`.
fn replace(path: &Path, bytes: &[u8], mode: u32) -> Result<(), String> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)
        .and_then(|mut file| file.write_all(bytes))
        .and_then(|()| fs::set_permissions(&temp, fs::Permissions::from_mode(mode)))
        .and_then(|()| fs::rename(&temp, path));
    written.map_err(|error| {
        let _ = fs::remove_file(&temp);
        format!("cannot write {}: {error}", path.display())
    })
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    struct Setup {
        _temp: tempfile::TempDir,
        binary: PathBuf,
        dir: PathBuf,
    }

    fn setup() -> Setup {
        let temp = tempfile::tempdir().unwrap();
        let binary = temp.path().join("fake-dsh");
        fs::write(&binary, b"\x7fELF fake-dsh v1").unwrap();
        let dir = temp.path().join("bin");
        fs::create_dir(&dir).unwrap();
        Setup {
            binary,
            dir,
            _temp: temp,
        }
    }

    #[test]
    fn installs_then_replaces_only_its_own_install() {
        let s = setup();
        let target = install(&s.binary, &s.dir, false).unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"\x7fELF fake-dsh v1");
        assert_eq!(
            fs::metadata(&target).unwrap().permissions().mode() & 0o777,
            0o755
        );
        fs::write(&s.binary, b"\x7fELF fake-dsh v2").unwrap();
        install(&s.binary, &s.dir, false).expect("its own install is replaced");
        assert_eq!(fs::read(&target).unwrap(), b"\x7fELF fake-dsh v2");
    }

    #[test]
    fn a_real_dsh_file_is_refused_unless_forced() {
        let s = setup();
        let target = s.dir.join("dsh");
        fs::write(&target, b"#!/usr/bin/env node\n// the real dsh\n").unwrap();
        let error = install(&s.binary, &s.dir, false).unwrap_err();
        assert!(error.contains("refusing to replace"), "{error}");
        assert!(error.contains("--force"), "{error}");
        assert_eq!(
            fs::read(&target).unwrap(),
            b"#!/usr/bin/env node\n// the real dsh\n"
        );
        assert!(!s.dir.join(RECORD).exists());
        install(&s.binary, &s.dir, true).expect("--force replaces it");
        assert_eq!(fs::read(&target).unwrap(), b"\x7fELF fake-dsh v1");
    }

    #[test]
    fn npm_s_bin_symlink_is_never_written_through() {
        let s = setup();
        let real = s.dir.join("dsh.js");
        fs::write(&real, b"real dsh.js").unwrap();
        symlink(&real, s.dir.join("dsh")).unwrap();
        let error = install(&s.binary, &s.dir, false).unwrap_err();
        assert!(error.contains("symbolic link"), "{error}");
        install(&s.binary, &s.dir, true).expect("--force replaces the link");
        assert_eq!(
            fs::read(&real).unwrap(),
            b"real dsh.js",
            "the link's target is untouched"
        );
        let meta = fs::symlink_metadata(s.dir.join("dsh")).unwrap();
        assert!(meta.is_file(), "the link itself was replaced");
    }

    #[test]
    fn a_record_that_does_not_match_or_is_a_link_proves_nothing() {
        let s = setup();
        install(&s.binary, &s.dir, false).unwrap();
        fs::write(s.dir.join("dsh"), b"replaced by the real dsh since").unwrap();
        assert!(install(&s.binary, &s.dir, false).is_err());
        let forged = s.dir.join("forged.json");
        fs::rename(s.dir.join(RECORD), &forged).unwrap();
        symlink(&forged, s.dir.join(RECORD)).unwrap();
        assert!(install(&s.binary, &s.dir, false).is_err());
    }
}
