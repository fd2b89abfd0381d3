//! The two files the server writes where its user says: the request log and the URL file. Both
//! paths are often in a shared directory such as `/tmp`, so neither is ever written through a link
//! someone else planted there: the log is created new (`O_CREAT|O_EXCL`, which also refuses a
//! symbolic link, even a dangling one), the URL file is written to a temporary file beside it and
//! renamed over the path (a rename replaces a link, it never follows one).

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Creates the request log, readable by its owner only. An existing path is refused: a symbolic
/// link, or any file, since appending to a file someone else made is how a planted link or hard
/// link in a shared directory turns the log into a write to the victim's files.
pub fn create_log(path: &Path) -> Result<File, String> {
    refuse_link(path, "log")?;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|error| match error.kind() {
            std::io::ErrorKind::AlreadyExists => format!(
                "{}: the log exists already; model-server creates a new log (remove it, or \
                 name a new file, e.g. in a directory from `mktemp -d`)",
                path.display()
            ),
            _ => format!("{}: cannot create the log: {error}", path.display()),
        })
}

/// Writes `url` and a newline to `path`, atomically: a temporary file in the same directory, then
/// renamed over `path`. A symbolic link at `path` is refused.
pub fn write_url_file(path: &Path, url: &str) -> Result<(), String> {
    refuse_link(path, "URL file")?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let cannot =
        |error: std::io::Error| format!("{}: cannot write the URL file: {error}", path.display());
    let mut temp = tempfile::Builder::new()
        .prefix(".model-url.")
        .tempfile_in(dir)
        .map_err(cannot)?;
    writeln!(temp, "{url}").map_err(cannot)?;
    temp.persist(path).map_err(|error| cannot(error.error))?;
    Ok(())
}

/// A clear error when `path` is a symbolic link.
fn refuse_link(path: &Path, what: &str) -> Result<(), String> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => Err(format!(
            "{}: the {what} path is a symbolic link; model-server never writes through one \
             (name a path in a directory only you can write, e.g. from `mktemp -d`)",
            path.display()
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    #[test]
    fn a_log_through_a_planted_link_is_refused_and_the_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("bashrc");
        std::fs::write(&victim, "untouched").unwrap();
        let planted = dir.path().join("model-log.jsonl");
        symlink(&victim, &planted).unwrap();
        let error = create_log(&planted).unwrap_err();
        assert!(
            error.contains("symbolic link") && error.contains("model-log.jsonl"),
            "{error}"
        );
        let dangling = dir.path().join("dangling.jsonl");
        symlink(dir.path().join("nowhere"), &dangling).unwrap();
        assert!(create_log(&dangling).unwrap_err().contains("symbolic link"));
        assert!(!dir.path().join("nowhere").exists());
        std::fs::write(dir.path().join("old.jsonl"), "").unwrap();
        assert!(create_log(&dir.path().join("old.jsonl"))
            .unwrap_err()
            .contains("exists already"));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
        let fresh = dir.path().join("fresh.jsonl");
        create_log(&fresh).unwrap();
        let mode = std::fs::metadata(&fresh).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn the_url_file_replaces_a_file_and_refuses_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("bashrc");
        std::fs::write(&victim, "untouched").unwrap();
        let planted = dir.path().join("model-url");
        symlink(&victim, &planted).unwrap();
        let error = write_url_file(&planted, "http://127.0.0.1:1").unwrap_err();
        assert!(error.contains("symbolic link"), "{error}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
        let url = dir.path().join("url");
        std::fs::write(&url, "stale").unwrap();
        write_url_file(&url, "http://127.0.0.1:2").unwrap();
        assert_eq!(
            std::fs::read_to_string(&url).unwrap(),
            "http://127.0.0.1:2\n"
        );
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 3, "no temporary file is left behind");
    }
}
