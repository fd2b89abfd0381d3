//! The launcher's `--patch FILE` overlay on the SDK and headless profiles, checked as the real
//! 0.1.5 and 0.2.1 check it before the profile boots (observed): the file must be readable and a
//! top-level YAML array whose entries are mappings (loader patch entries), else the process
//! prints `Error: dsh: ...` on stderr and exits 1 before answering anything. fake-dsh has no
//! loader config for a patch to change, so a valid patch changes nothing (docs/surface-sdk.md),
//! but for the warning a row that cannot activate prints at boot ([`providers`]).
//! The YAML read is the block- and flow-sequence subset patches are written in, not a full
//! parser.

pub mod providers;

/// The files every `--patch FILE` / `--patch=FILE` of the arguments names, in order.
pub fn patches_of(args: &[String]) -> Vec<String> {
    let mut files = Vec::new();
    let mut iter = args.iter().take_while(|a| *a != "--");
    while let Some(arg) = iter.next() {
        if arg == "--patch" {
            files.extend(iter.next().cloned());
        } else if let Some(file) = arg.strip_prefix("--patch=") {
            files.push(file.to_string());
        }
    }
    files
}

/// The texts of the overlays `files` names (those that cannot be read left out: the launcher
/// refused them already).
pub fn texts_of(files: &[String]) -> Vec<String> {
    files
        .iter()
        .filter_map(|file| std::fs::read_to_string(file).ok())
        .collect()
}

/// The first patch that the real launcher would refuse, as its error line.
pub fn refused(files: &[String]) -> Option<String> {
    files.iter().find_map(|file| check(file).err())
}

/// Reads and checks one overlay file.
fn check(file: &str) -> Result<(), String> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        let why = if e.kind() == std::io::ErrorKind::NotFound {
            format!("Error: ENOENT: no such file or directory, open '{file}'")
        } else {
            format!("Error: {e}")
        };
        format!("Error: dsh: failed to read overlay {file}: {why}")
    })?;
    check_text(&text).map_err(|problem| match problem {
        Problem::NotAnArray => format!(
            "Error: dsh: overlay {file} must be a top-level YAML array of loader patch entries"
        ),
        Problem::NotAMapping(n) => format!(
            "Error: dsh: overlay entry {n} in {file} must be a mapping (a loader patch entry)"
        ),
        Problem::Syntax(why) => {
            format!("Error: dsh: failed to parse overlay {file}: YAMLException: {why}")
        }
    })
}

/// Why an overlay is refused.
#[derive(Debug, PartialEq)]
enum Problem {
    NotAnArray,
    /// The 1-based entry that is not a mapping.
    NotAMapping(usize),
    Syntax(String),
}

/// Checks an overlay's text: a block sequence (`- key: value` entries, continued by indented
/// lines) or a one-line flow sequence (`[]`, `[{...}]`).
fn check_text(text: &str) -> Result<(), Problem> {
    let lines: Vec<&str> = text
        .lines()
        .map(|line| line.split(" #").next().unwrap_or_default())
        .filter(|line| !line.trim().is_empty() && !line.trim_start().starts_with('#'))
        .collect();
    let Some(first) = lines.first() else {
        return Err(Problem::NotAnArray);
    };
    let flow = first.trim();
    if flow.starts_with('[') {
        return check_flow(&lines.join(" "));
    }
    if !(first.starts_with("- ") || *first == "-") {
        return Err(Problem::NotAnArray);
    }
    let mut entry = 0;
    for line in lines {
        if let Some(item) = line.strip_prefix('-') {
            entry += 1;
            let item = item.trim();
            if !(item.contains(": ") || item.ends_with(':') || item.starts_with('{')) {
                return Err(Problem::NotAMapping(entry));
            }
        } else if !line.starts_with(' ') {
            return Err(Problem::Syntax(format!(
                "a top-level line after the sequence: {line:?}"
            )));
        }
    }
    Ok(())
}

/// A flow sequence: balanced brackets, every entry a `{...}` mapping.
fn check_flow(text: &str) -> Result<(), Problem> {
    let inner = text
        .trim()
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .ok_or_else(|| {
            Problem::Syntax("unexpected end of the stream within a flow collection".into())
        })?;
    let entries: Vec<&str> = split_top_level(inner);
    for (n, entry) in entries.iter().enumerate() {
        if !(entry.starts_with('{') && entry.ends_with('}')) {
            return Err(Problem::NotAMapping(n + 1));
        }
    }
    Ok(())
}

/// The comma-separated entries of a flow sequence's inside, nested braces kept together.
fn split_top_level(inner: &str) -> Vec<&str> {
    let mut entries = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (at, ch) in inner.char_indices() {
        match ch {
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            ',' if depth == 0 => {
                entries.push(inner[start..at].trim());
                start = at + 1;
            }
            _ => {}
        }
    }
    entries.push(inner[start..].trim());
    entries.into_iter().filter(|e| !e.is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_files_are_taken_from_both_spellings_before_a_double_dash() {
        let args: Vec<String> = [
            "--patch",
            "a.yml",
            "--json",
            "--patch=b.yml",
            "--",
            "--patch",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        assert_eq!(patches_of(&args), ["a.yml", "b.yml"]);
    }

    #[test]
    fn the_overlay_shapes_the_real_launcher_takes_and_refuses() {
        assert_eq!(
            check_text("- id: session-title-llm\n  disabled: true\n"),
            Ok(())
        );
        assert_eq!(check_text("# rows\n- id: x\n- id: y\n"), Ok(()));
        assert_eq!(check_text("[]\n"), Ok(()));
        assert_eq!(check_text("[{id: x}, {id: y}]"), Ok(()));
        assert_eq!(check_text(""), Err(Problem::NotAnArray));
        assert_eq!(check_text("foo: bar\n"), Err(Problem::NotAnArray));
        assert_eq!(
            check_text("- id: x\n- nope\n"),
            Err(Problem::NotAMapping(2))
        );
        assert_eq!(check_text("[{id: x}, 3]"), Err(Problem::NotAMapping(2)));
        assert!(matches!(check_text("[valid\n"), Err(Problem::Syntax(_))));
    }

    #[test]
    fn a_missing_file_is_refused_with_the_real_message() {
        let file = "/nonexistent/fake-dsh-patch.yml".to_string();
        assert_eq!(
            refused(&[file]).unwrap(),
            "Error: dsh: failed to read overlay /nonexistent/fake-dsh-patch.yml: Error: ENOENT: \
             no such file or directory, open '/nonexistent/fake-dsh-patch.yml'"
        );
    }
}
