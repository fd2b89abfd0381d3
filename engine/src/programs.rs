//! Naming the programs the kit starts: a command line split into words like a shell would (no
//! expansion), a program found as given or on `PATH`, and a binary shipped beside this one.

use std::path::{Path, PathBuf};

/// Whether `path` is a regular file with an execute bit.
pub fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// The program's path: as given when it holds a `/`, else searched on `PATH`.
pub fn resolve_program(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        let path = PathBuf::from(program);
        return is_executable(&path).then_some(path);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

/// A host's or client's command with its relative paths made absolute against the caller's
/// directory (each case runs the command in its own empty working directory, on every surface):
/// the program when it is a path (`./driver`, `bin/driver`; a bare name is looked up on `PATH`),
/// and every argument naming an existing file or directory (`driver.mjs`, `nh/driver.mjs`).
pub fn absolute_paths(command: Vec<String>) -> Vec<String> {
    match std::env::current_dir() {
        Ok(dir) => absolute_paths_in(command, &dir),
        Err(_) => command,
    }
}

/// [`absolute_paths`] against `base` instead of the current directory.
pub fn absolute_paths_in(command: Vec<String>, base: &Path) -> Vec<String> {
    command
        .into_iter()
        .enumerate()
        .map(|(index, word)| {
            let path = Path::new(&word);
            let a_path = index > 0 || word.contains('/');
            if a_path && path.is_relative() && !word.is_empty() && base.join(path).exists() {
                if let Ok(absolute) = std::path::absolute(base.join(path)) {
                    return absolute.to_string_lossy().into_owned();
                }
            }
            word
        })
        .collect()
}

/// A binary shipped in the same directory as this executable.
pub fn sibling_of_exe(name: &str) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate this executable: {e}"))?;
    let dir = exe
        .parent()
        .ok_or_else(|| "cannot locate this executable's directory".to_string())?;
    Ok(dir.join(name))
}

/// Splits a command line like a POSIX shell would for words (the `shlex` crate): whitespace
/// separates, quotes group, a backslash escapes; no expansion of any kind.
pub fn split_command(line: &str) -> Result<Vec<String>, String> {
    shlex::split(line).ok_or_else(|| {
        format!("--host {line:?} does not split into words (an unterminated quote or a trailing backslash)")
    })
}

/// One word for `sh`, always single-quoted (a `'` inside written as `'\''`): the inverse of
/// [`split_command`] for scripts and re-run lines.
pub fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// [`shell_quote`] on bytes (a path that is not UTF-8 stays byte for byte): nothing is special
/// between single quotes but the quote itself.
pub fn shell_quote_bytes(bytes: &[u8]) -> Vec<u8> {
    let mut quoted = vec![b'\''];
    for &byte in bytes {
        if byte == b'\'' {
            quoted.extend_from_slice(b"'\\''");
        } else {
            quoted.push(byte);
        }
    }
    quoted.push(b'\'');
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_like_a_shell() {
        let split = |line: &str| split_command(line).expect("splits");
        assert_eq!(split("node  host.js --flag"), ["node", "host.js", "--flag"]);
        assert_eq!(
            split("'/a b/driver' \"x \\\"y\\\"\" c\\ d ''"),
            ["/a b/driver", "x \"y\"", "c d", ""]
        );
        assert_eq!(split("a'b'\"c\""), ["abc"]);
        assert!(split_command("'open").is_err());
        assert!(split_command("\"open").is_err());
        assert!(split_command("x\\").is_err());
        assert!(split("   ").is_empty());
    }

    #[test]
    fn relative_paths_in_a_command_become_absolute() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("driver.mjs"), "").expect("write");
        let command = absolute_paths_in(
            ["node", "driver.mjs", "--flag", "missing.mjs", "."]
                .map(String::from)
                .to_vec(),
            dir.path(),
        );
        let inside = |name: &str| std::path::absolute(dir.path().join(name)).unwrap();
        assert_eq!(command[0], "node", "a bare program is looked up on PATH");
        assert_eq!(Path::new(&command[1]), inside("driver.mjs"));
        assert_eq!(command[2], "--flag");
        assert_eq!(
            command[3], "missing.mjs",
            "a word naming nothing is left alone"
        );
        assert_eq!(Path::new(&command[4]), inside("."));
    }

    #[test]
    fn finds_programs_on_path_or_as_given() {
        assert!(resolve_program("sh").is_some());
        assert!(resolve_program("/nonexistent/driver").is_none());
    }
}
