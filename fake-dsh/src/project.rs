//! The one rule for the files fake-dsh's agents write in a project (the open-design default
//! agent's design file, the SDK surfaces' `write` tool): never outside the project directory
//! (the run's or session's cwd), never through a link.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Writes `contents` to `path` (relative to `cwd`, or absolute) only where it stays inside `cwd`
/// once `..` and the links of its directories are resolved, and never through a link: a path
/// resolving outside `cwd` (`../x`, `/etc/x`, a directory link pointing out), a path ending in
/// `..`, and a file that is a symbolic link (wherever it points, dangling too) or a hard link (a
/// regular file with more than one name) are refused with `PermissionDenied` naming the rule. The
/// file is opened with `O_NOFOLLOW`, so a link planted after the check is refused as well. A
/// `cwd` that does not exist is created first, as the real dsh's `write` tool creates a missing
/// directory (docs/fake-dsh.md, "A missing cwd"); a missing directory inside it is not. Returns
/// the path written.
pub fn write_inside(cwd: &Path, path: &Path, contents: &[u8]) -> io::Result<PathBuf> {
    if fs::symlink_metadata(cwd).is_err() {
        fs::create_dir_all(cwd)?;
    }
    let root = cwd.canonicalize()?;
    let joined = cwd.join(path);
    let name = joined
        .file_name()
        .ok_or_else(|| refused(format!("{} names no file", path.display())))?;
    let parent = joined.parent().unwrap_or(cwd).canonicalize()?;
    let resolved = parent.join(name);
    if !resolved.starts_with(&root) {
        return Err(refused(format!(
            "{} is outside the project directory {}",
            resolved.display(),
            root.display()
        )));
    }
    if fs::symlink_metadata(&resolved).is_ok_and(|meta| meta.file_type().is_symlink()) {
        return Err(refused(format!(
            "{} is a symbolic link",
            resolved.display()
        )));
    }
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&resolved)
        .map_err(|error| match error.raw_os_error() {
            Some(nix::libc::ELOOP) => refused(format!("{} is a symbolic link", resolved.display())),
            _ => error,
        })?;
    if file.metadata()?.nlink() > 1 {
        return Err(refused(format!(
            "{} is a hard link (it has other names)",
            resolved.display()
        )));
    }
    file.set_len(0)?;
    file.write_all(contents)?;
    Ok(resolved)
}

fn refused(reason: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("refusing to write: {reason}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_stay_inside_the_project_and_never_follow_a_link() {
        let root = tempfile::tempdir().unwrap();
        let project = root.path().join("project");
        let outside = root.path().join("outside.html");
        fs::write(&outside, "untouched").unwrap();
        let written = write_inside(&project, Path::new("index.html"), b"page").unwrap();
        assert_eq!(
            fs::read(&written).unwrap(),
            b"page",
            "a missing cwd is made"
        );

        let refusals = [
            ("../outside.html", "outside the project directory"),
            (outside.to_str().unwrap(), "outside the project directory"),
            ("sub/..", "names no file"),
        ];
        for (path, reason) in refusals {
            let error = write_inside(&project, Path::new(path), b"x").unwrap_err();
            assert!(error.to_string().contains(reason), "{path}: {error}");
        }
        let inner = project.join("inner.html");
        fs::write(&inner, "inner").unwrap();
        for (name, target) in [("out.html", &outside), ("in.html", &inner)] {
            std::os::unix::fs::symlink(target, project.join(name)).unwrap();
            let error = write_inside(&project, Path::new(name), b"x").unwrap_err();
            assert!(error.to_string().contains("symbolic link"), "{error}");
        }
        std::os::unix::fs::symlink(root.path(), project.join("up")).unwrap();
        let error = write_inside(&project, Path::new("up/outside.html"), b"x").unwrap_err();
        assert!(error.to_string().contains("outside"), "{error}");
        fs::hard_link(&outside, project.join("hard.html")).unwrap();
        let error = write_inside(&project, Path::new("hard.html"), b"x").unwrap_err();
        assert!(error.to_string().contains("hard link"), "{error}");
        assert_eq!(fs::read_to_string(&outside).unwrap(), "untouched");
        assert_eq!(fs::read_to_string(&inner).unwrap(), "inner");
        let absolute_inside = project.join("abs.html");
        write_inside(&project, &absolute_inside, b"ok").unwrap();
        assert_eq!(fs::read(&absolute_inside).unwrap(), b"ok");
    }
}
