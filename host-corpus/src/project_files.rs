//! Reading a file the runtime wrote into a case's project, for the case's `files` expectation.
//!
//! The runtime under test controls the project directory, so the read is defensive: the key must
//! be a relative path that stays inside the project (no `..`, no absolute path, as `lint`
//! requires), the path is resolved and must still lie inside the project (a symlink pointing out
//! of it is refused, not followed), only a regular file is read (a FIFO never blocks the
//! harness: it is opened non-blocking and refused), and at most [`MAX_PROJECT_FILE_BYTES`] are
//! read (a link to `/dev/zero` costs nothing). Linux and macOS behave alike here (`O_NOFOLLOW`
//! and `O_NONBLOCK` are POSIX).

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

/// The largest project file the harness reads for a `files` expectation.
pub const MAX_PROJECT_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Why a project file could not be read; `Display` names the file and the rule.
#[derive(Debug)]
pub enum ProjectFileError {
    /// The expectation's key is not a relative path inside the project (a corpus error).
    BadKey(String),
    /// The file does not exist (or a path component is missing).
    Missing(String),
    /// The path resolves outside the project (through a symlink).
    Outside(String),
    /// Not a regular file (a directory, FIFO, device, socket).
    NotRegular(String),
    /// Larger than [`MAX_PROJECT_FILE_BYTES`].
    TooLarge(String),
    /// Any other I/O error.
    Io(String, std::io::Error),
}

impl fmt::Display for ProjectFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProjectFileError::BadKey(key) => write!(
                f,
                "the files expectation key {key:?} is not a relative path inside the project (no `..`, not absolute)"
            ),
            ProjectFileError::Missing(key) => {
                write!(f, "expected the file {key} in the run's cwd, it does not exist")
            }
            ProjectFileError::Outside(key) => write!(
                f,
                "the file {key} resolves outside the run's cwd (a symlink out of the project is not followed)"
            ),
            ProjectFileError::NotRegular(key) => {
                write!(f, "the file {key} is not a regular file")
            }
            ProjectFileError::TooLarge(key) => write!(
                f,
                "the file {key} is larger than the {MAX_PROJECT_FILE_BYTES} bytes the harness reads"
            ),
            ProjectFileError::Io(key, error) => write!(f, "cannot read the file {key}: {error}"),
        }
    }
}

impl std::error::Error for ProjectFileError {}

/// Whether `key` is a relative path made only of ordinary components (what `lint` accepts).
pub fn is_project_key(key: &str) -> bool {
    let path = Path::new(key);
    !key.is_empty()
        && !key.contains('\0')
        && !path.is_absolute()
        && path
            .components()
            .all(|component| matches!(component, Component::Normal(_) | Component::CurDir))
}

/// Reads `key` from the `project` directory under the rules in the module doc.
pub fn read_project_file(project: &Path, key: &str) -> Result<Vec<u8>, ProjectFileError> {
    if !is_project_key(key) {
        return Err(ProjectFileError::BadKey(key.to_string()));
    }
    let io = |error: std::io::Error| ProjectFileError::Io(key.to_string(), error);
    let root = project.canonicalize().map_err(io)?;
    let resolved = resolve_inside(&root, key)?;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags((nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits())
        .open(&resolved)
        .map_err(|error| match error.kind() {
            std::io::ErrorKind::NotFound => ProjectFileError::Missing(key.to_string()),
            // ELOOP: the last component became a symlink after it was resolved.
            _ if error.raw_os_error() == Some(nix::libc::ELOOP) => {
                ProjectFileError::Outside(key.to_string())
            }
            _ => io(error),
        })?;
    read_regular_bounded(file, key)
}

/// The canonical path of `root/key`, which must lie inside `root`.
fn resolve_inside(root: &Path, key: &str) -> Result<PathBuf, ProjectFileError> {
    let joined = root.join(key);
    let is_link =
        std::fs::symlink_metadata(&joined).is_ok_and(|meta| meta.file_type().is_symlink());
    match joined.canonicalize() {
        Ok(resolved) if resolved.starts_with(root) => Ok(resolved),
        Ok(_) => Err(ProjectFileError::Outside(key.to_string())),
        // A dangling link is a link to somewhere that is not a project file.
        Err(_) if is_link => Err(ProjectFileError::Outside(key.to_string())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            Err(ProjectFileError::Missing(key.to_string()))
        }
        Err(error) => Err(ProjectFileError::Io(key.to_string(), error)),
    }
}

/// Reads an opened file if it is a regular file of at most [`MAX_PROJECT_FILE_BYTES`].
fn read_regular_bounded(file: File, key: &str) -> Result<Vec<u8>, ProjectFileError> {
    let io = |error: std::io::Error| ProjectFileError::Io(key.to_string(), error);
    let meta = file.metadata().map_err(io)?;
    if !meta.file_type().is_file() {
        return Err(ProjectFileError::NotRegular(key.to_string()));
    }
    if meta.len() > MAX_PROJECT_FILE_BYTES {
        return Err(ProjectFileError::TooLarge(key.to_string()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_PROJECT_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_PROJECT_FILE_BYTES {
        return Err(ProjectFileError::TooLarge(key.to_string()));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn keys_must_stay_inside_the_project() {
        for key in ["index.html", "site/index.html", "./a.html"] {
            assert!(is_project_key(key), "{key}");
        }
        for key in ["", "../../etc/passwd", "/etc/passwd", "a/../../b", "a\0b"] {
            assert!(!is_project_key(key), "{key:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        let error = read_project_file(dir.path(), "../../etc/passwd").unwrap_err();
        assert!(matches!(error, ProjectFileError::BadKey(_)), "{error}");
        let error = read_project_file(dir.path(), "/etc/passwd").unwrap_err();
        assert!(matches!(error, ProjectFileError::BadKey(_)), "{error}");
    }

    #[test]
    fn regular_files_inside_are_read_and_missing_ones_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("site")).unwrap();
        std::fs::write(dir.path().join("site/index.html"), "<h1>").unwrap();
        symlink("site/index.html", dir.path().join("inner-link.html")).unwrap();
        assert_eq!(
            read_project_file(dir.path(), "site/index.html").unwrap(),
            b"<h1>"
        );
        assert_eq!(
            read_project_file(dir.path(), "inner-link.html").unwrap(),
            b"<h1>"
        );
        let error = read_project_file(dir.path(), "nope.html").unwrap_err();
        assert!(matches!(error, ProjectFileError::Missing(_)), "{error}");
        assert!(error.to_string().contains("nope.html"), "{error}");
    }

    #[test]
    fn links_out_devices_and_fifos_are_refused_without_reading() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::NamedTempFile::new().unwrap();
        symlink(outside.path(), dir.path().join("out.html")).unwrap();
        symlink("/dev/zero", dir.path().join("zero.html")).unwrap();
        symlink(dir.path().join("gone"), dir.path().join("dangling.html")).unwrap();
        symlink("/", dir.path().join("rootdir")).unwrap();
        for key in [
            "out.html",
            "zero.html",
            "dangling.html",
            "rootdir/etc/passwd",
        ] {
            let error = read_project_file(dir.path(), key).unwrap_err();
            assert!(
                matches!(error, ProjectFileError::Outside(_)),
                "{key}: {error}"
            );
        }
        nix::unistd::mkfifo(&dir.path().join("fifo.html"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        std::fs::create_dir(dir.path().join("dir.html")).unwrap();
        for key in ["fifo.html", "dir.html"] {
            let error = read_project_file(dir.path(), key).unwrap_err();
            assert!(
                matches!(error, ProjectFileError::NotRegular(_)),
                "{key}: {error}"
            );
        }
    }

    #[test]
    fn a_file_over_the_bound_is_too_large() {
        let dir = tempfile::tempdir().unwrap();
        let file = File::create(dir.path().join("big.html")).unwrap();
        file.set_len(MAX_PROJECT_FILE_BYTES + 1).unwrap();
        let error = read_project_file(dir.path(), "big.html").unwrap_err();
        assert!(matches!(error, ProjectFileError::TooLarge(_)), "{error}");
    }
}
