//! The fixture tree every corpus reads: the one built into the binary ([`embedded`]), where a
//! command takes its corpus from ([`locate`](mod@locate)), and reading one corpus file bounded.
//! The host corpus lints its cases and rule catalog, the client corpus its own (`fixtures/clients/`);
//! both take the tree from here.

pub mod embedded;
pub mod locate;

pub use locate::{choose, locate, CorpusDir};

use std::fs;
use std::path::Path;

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
