//! Writing the kit's output files without ever following a planted link: every file the kit
//! writes at a path it was given (`--junit`, `--markdown`, `--json`, `--write-expectations`,
//! `report --out`, `merge --out`, `fixture-from-transcript --out`, `corpus export DIR`) goes
//! through [`write_file`], and every directory it creates below a given root through
//! [`create_dir_inside`].
//!
//! A path that already is a symbolic link is refused with an error naming it. The bytes go to a
//! fresh temp file created exclusively (`O_EXCL`, mode 0600) in the target's own directory, then
//! renamed over the target: a link planted between the check and the rename is replaced, never
//! written through, and a reader never sees half a file.

use std::fs;
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};

/// The mode of a written output file (reports are meant to be read by others, like any build
/// artifact; the directory they are in decides who can reach them).
const OUTPUT_MODE: u32 = 0o644;

/// Writes `bytes` to `path` (see the module doc); the error names the path.
pub fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    refuse_symlink(path)?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let mut temp = tempfile::Builder::new()
        .prefix(".dsh-conformance-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|error| named(path, "cannot create a temp file beside", error))?;
    temp.write_all(bytes)
        .and_then(|()| temp.as_file().sync_all())
        .map_err(|error| named(path, "cannot write", error))?;
    set_mode(temp.path(), OUTPUT_MODE).map_err(|error| named(path, "cannot write", error))?;
    temp.persist(path)
        .map_err(|error| named(path, "cannot write", error.error))?;
    Ok(())
}

/// Renders into memory with `render`, then [`write_file`]s the bytes.
pub fn write_rendered(
    path: &Path,
    render: &dyn Fn(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let mut bytes = Vec::new();
    render(&mut bytes)?;
    write_file(path, &bytes)
}

/// Creates `root` (when missing) and `root/relative`, one component at a time, refusing any
/// component that is a symbolic link or not a directory, and any `relative` that leaves `root`
/// (`..`, an absolute path). Returns the directory.
pub fn create_dir_inside(root: &Path, relative: &Path) -> io::Result<PathBuf> {
    refuse_symlink(root)?;
    if !root.exists() {
        fs::create_dir_all(root).map_err(|error| named(root, "cannot create", error))?;
    }
    ensure_real_dir(root)?;
    let mut dir = root.to_path_buf();
    for component in relative.components() {
        match component {
            Component::Normal(name) => {
                dir.push(name);
                ensure_real_dir(&dir)?;
            }
            Component::CurDir => {}
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{} leaves {}: refusing to write outside it",
                        relative.display(),
                        root.display()
                    ),
                ))
            }
        }
    }
    Ok(dir)
}

/// Creates `dir` when missing; an error when it is a symbolic link or not a directory.
fn ensure_real_dir(dir: &Path) -> io::Result<()> {
    match fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_symlink() => Err(symlink_error(dir)),
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} exists and is not a directory", dir.display()),
        )),
        Err(error) if error.kind() == io::ErrorKind::NotFound => match fs::create_dir(dir) {
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => ensure_real_dir(dir),
            other => other.map_err(|error| named(dir, "cannot create", error)),
        },
        Err(error) => Err(named(dir, "cannot inspect", error)),
    }
}

/// An error when `path` is a symbolic link (whatever it points to, dangling included).
pub fn refuse_symlink(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => Err(symlink_error(path)),
        _ => Ok(()),
    }
}

fn symlink_error(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!(
            "{} is a symbolic link: refusing to write through it (remove it, or choose another path)",
            path.display()
        ),
    )
}

fn named(path: &Path, what: &str, error: io::Error) -> io::Error {
    io::Error::new(error.kind(), format!("{what} {}: {error}", path.display()))
}

fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn entries(dir: &Path) -> usize {
        fs::read_dir(dir).unwrap().count()
    }

    #[test]
    fn a_planted_link_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, "untouched").unwrap();
        let out = dir.path().join("junit.xml");
        symlink(&victim, &out).unwrap();
        let error = write_file(&out, b"<testsuites/>").unwrap_err();
        assert!(error.to_string().contains("is a symbolic link"), "{error}");
        assert!(error.to_string().contains("junit.xml"), "{error}");
        assert_eq!(fs::read_to_string(&victim).unwrap(), "untouched");
        assert_eq!(entries(dir.path()), 2, "no temp file is left");
    }

    #[test]
    fn a_dangling_link_is_refused_and_nothing_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("would-be-created");
        let out = dir.path().join("summary.md");
        symlink(&target, &out).unwrap();
        assert!(write_file(&out, b"x").is_err());
        assert!(!target.exists());
    }

    #[test]
    fn a_regular_file_is_replaced_whole_with_the_output_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("report.json");
        fs::write(&out, "old contents that are longer").unwrap();
        write_file(&out, b"new").unwrap();
        assert_eq!(fs::read_to_string(&out).unwrap(), "new");
        let mode = fs::metadata(&out).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, OUTPUT_MODE);
        assert_eq!(entries(dir.path()), 1);
    }

    #[test]
    fn directories_inside_a_root_never_follow_a_link_or_leave_it() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let root = dir.path().join("export");
        let made = create_dir_inside(&root, Path::new("fixtures/cancel")).unwrap();
        assert!(made.is_dir());
        symlink(elsewhere.path(), root.join("docs")).unwrap();
        let error = create_dir_inside(&root, Path::new("docs")).unwrap_err();
        assert!(error.to_string().contains("symbolic link"), "{error}");
        assert!(create_dir_inside(&root, Path::new("../x")).is_err());
        assert!(!dir.path().join("x").exists());
        let linked_root = dir.path().join("linked");
        symlink(elsewhere.path(), &linked_root).unwrap();
        assert!(create_dir_inside(&linked_root, Path::new("a")).is_err());
        assert_eq!(entries(elsewhere.path()), 0);
    }
}
