//! The fixture tree every corpus reads: the one built into the binary ([`embedded`]), where a
//! command takes its corpus from ([`locate`](mod@locate)), and reading one corpus file bounded.
//! The host corpus lints its cases and rule catalog, the client corpus its own (`fixtures/clients/`);
//! both take the tree from here.

pub mod embedded;
pub mod locate;

pub use locate::{choose, locate, CorpusDir};

use std::collections::BTreeSet;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

/// The host corpus's rule catalog, inside the fixtures dir (what makes a directory a corpus).
pub const RULES_FILE: &str = "rules.json";

/// The most bytes `lint` reads from one corpus file (case files are a few KiB).
pub const MAX_CORPUS_FILE_BYTES: u64 = 8 * 1024 * 1024;

/// Reads a corpus file bounded: a regular file (a FIFO would hang, a device never end) of at most
/// [`MAX_CORPUS_FILE_BYTES`], as UTF-8.
pub fn read_corpus_file(file: &Path) -> Result<String, String> {
    use std::io::Read;
    let meta = fs::metadata(file).map_err(|error| format!("cannot read: {error}"))?;
    if !meta.is_file() {
        return Err("not a regular file (a corpus holds regular files only)".to_string());
    }
    let mut bytes = Vec::new();
    fs::File::open(file)
        .and_then(|opened| {
            opened
                .take(MAX_CORPUS_FILE_BYTES + 1)
                .read_to_end(&mut bytes)
        })
        .map_err(|error| format!("cannot read: {error}"))?;
    if bytes.len() as u64 > MAX_CORPUS_FILE_BYTES {
        return Err(format!(
            "more than the {MAX_CORPUS_FILE_BYTES} bytes a corpus file may hold"
        ));
    }
    String::from_utf8(bytes).map_err(|error| format!("not UTF-8: {error}"))
}

/// One problem the lint found, naming the file it is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LintError {
    pub file: PathBuf,
    pub problem: String,
}

impl LintError {
    pub fn new(file: &Path, problem: impl Into<String>) -> Self {
        Self {
            file: file.to_path_buf(),
            problem: problem.into(),
        }
    }
}

impl fmt::Display for LintError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file.display(), self.problem)
    }
}

impl std::error::Error for LintError {}

/// The interpretation entry ids (`### I-xx: title`) in `docs_dir/interpretations.md` (a missing
/// file has none).
pub fn interpretation_ids(docs_dir: &Path) -> BTreeSet<String> {
    read_corpus_file(&docs_dir.join("interpretations.md"))
        .map(|text| text.lines().filter_map(heading_entry_id).collect())
        .unwrap_or_default()
}

/// The entry id of a `### I-xx: title` heading line.
fn heading_entry_id(line: &str) -> Option<String> {
    let rest = line.strip_prefix("###")?;
    if rest.starts_with('#') {
        return None;
    }
    let token: String = rest
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    let tail = token.strip_prefix("I-")?;
    (!tail.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heading_entry_ids_are_recognised() {
        assert_eq!(
            heading_entry_id("### I-C01: empty version"),
            Some("I-C01".to_string())
        );
        assert_eq!(heading_entry_id("###I-03 title"), Some("I-03".to_string()));
        assert_eq!(heading_entry_id("#### I-03: deeper heading"), None);
        assert_eq!(heading_entry_id("## I-03: shallower heading"), None);
        assert_eq!(heading_entry_id("### Not an entry"), None);
        assert_eq!(heading_entry_id("### I-: no id"), None);
    }
}
