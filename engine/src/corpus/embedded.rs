//! The fixture corpus built into `dsh-conformance` (see `build.rs`): every file under the
//! workspace's `fixtures/` plus `docs/interpretations.md`, byte for byte, as it was at build time.
//!
//! Two hashes name it. The *tree hash* covers every embedded file (path and bytes) and proves an
//! exported or on-disk corpus identical to the embedded one. The *case hash* is what every run's
//! report calls `corpus_hash` (the case files' bytes in id order), computed here for the whole
//! corpus, so a full run of the embedded corpus reports the hash `--version` prints.

use sha2::{Digest, Sha256};
use std::fs;
use std::path::{Path, PathBuf};

include!(concat!(env!("OUT_DIR"), "/embedded_corpus.rs"));

/// The directory under the workspace root (and under an export) that holds the cases.
pub const FIXTURES_DIR: &str = "fixtures";

/// `(path relative to the workspace root, contents)` of every embedded file, sorted by path.
pub fn files() -> &'static [(&'static str, &'static [u8])] {
    FILES
}

/// SHA-256 over `(path, length, bytes)` of each file, in path order, as hex.
pub fn tree_hash<'a>(files: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> String {
    let mut sorted: Vec<(&str, &[u8])> = files.into_iter().collect();
    sorted.sort();
    let mut hasher = Sha256::new();
    for (path, bytes) in sorted {
        hasher.update(path.as_bytes());
        hasher.update([0]);
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    }
    hex(&hasher.finalize())
}

/// The tree hash of the embedded corpus.
pub fn embedded_tree_hash() -> String {
    tree_hash(files().iter().copied())
}

/// The tree hash of the same set of files under `root` (a workspace or an export): every file
/// under `root/fixtures` (dot-files skipped) and each extra file the build embeds.
pub fn tree_hash_on_disk(root: &Path) -> Result<String, String> {
    let mut found = Vec::new();
    collect(root, &root.join(FIXTURES_DIR), &mut found)?;
    for (path, _) in files() {
        if !path.starts_with("fixtures/") {
            let bytes = fs::read(root.join(path))
                .map_err(|e| format!("{}: cannot read: {e}", root.join(path).display()))?;
            found.push((path.to_string(), bytes));
        }
    }
    Ok(tree_hash(
        found
            .iter()
            .map(|(path, bytes)| (path.as_str(), bytes.as_slice())),
    ))
}

/// Every file under `dir` (dot-files and dot-dirs skipped), as (its path relative to `root`,
/// `/`-separated; its bytes).
pub fn collect(root: &Path, dir: &Path, found: &mut Vec<(String, Vec<u8>)>) -> Result<(), String> {
    let entries = fs::read_dir(dir).map_err(|e| format!("{}: cannot list: {e}", dir.display()))?;
    for entry in entries {
        let path = entry
            .map_err(|e| format!("{}: cannot list: {e}", dir.display()))?
            .path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        if name.is_some_and(|name| name.starts_with('.')) {
            continue;
        }
        if path.is_dir() {
            collect(root, &path, found)?;
        } else {
            let bytes =
                fs::read(&path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
            let relative = path
                .strip_prefix(root)
                .map_err(|_| format!("{} is outside {}", path.display(), root.display()))?
                .components()
                .map(|part| part.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            found.push((relative, bytes));
        }
    }
    Ok(())
}

/// The embedded case files, `(file name, bytes)`: `fixtures/<area>/*.json` outside `transcripts/`
/// (the files `run::selection::find_cases` loads).
fn case_files() -> impl Iterator<Item = (&'static str, &'static [u8])> {
    files().iter().filter_map(|(path, bytes)| {
        let (area, name) = path.strip_prefix("fixtures/")?.split_once('/')?;
        let is_case = !dsh_formats::case::NOT_CASE_DIRS.contains(&area)
            && !name.contains('/')
            && name.ends_with(".json");
        is_case.then_some((name, *bytes))
    })
}

/// The report's `corpus_hash` of a full run over the embedded corpus: SHA-256 over the case files'
/// bytes in id order (`run::selection::corpus_hash`).
pub fn case_hash() -> String {
    // Every command computes it for `--version`, and `run`/`report` compare each corpus with it:
    // parse the embedded cases once per process.
    static HASH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HASH.get_or_init(compute_case_hash).clone()
}

fn compute_case_hash() -> String {
    let mut cases: Vec<(String, &[u8])> = case_files()
        .map(|(name, bytes)| (case_id(name, bytes), bytes))
        .collect();
    cases.sort();
    let mut hasher = Sha256::new();
    for (_, bytes) in cases {
        hasher.update(bytes);
    }
    hex(&hasher.finalize())
}

/// The case's `id` member, else the file stem (as the runner does for a file that does not load).
fn case_id(name: &str, bytes: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(bytes)
        .ok()
        .and_then(|value| value.get("id")?.as_str().map(str::to_string))
        .unwrap_or_else(|| name.trim_end_matches(".json").to_string())
}

/// The number of case files in the embedded corpus.
pub fn case_count() -> usize {
    case_files().count()
}

/// Writes the embedded corpus under `dir` (`dir/fixtures/...`, `dir/docs/interpretations.md`),
/// creating directories, and checks the written tree against the embedded hash. Refuses to
/// overwrite an existing file that differs, naming it. Returns the fixtures dir written.
pub fn export(dir: &Path) -> Result<PathBuf, String> {
    use crate::files::{create_dir_inside, refuse_symlink, write_file};
    // Every link in the way is refused before anything is written.
    refuse_symlink(dir).map_err(|e| e.to_string())?;
    for (path, _) in files() {
        for ancestor in Path::new(path)
            .ancestors()
            .filter(|a| !a.as_os_str().is_empty())
        {
            refuse_symlink(&dir.join(ancestor)).map_err(|e| e.to_string())?;
        }
    }
    for (path, bytes) in files() {
        let target = dir.join(path);
        if let Ok(existing) = fs::read(&target) {
            if existing != *bytes {
                return Err(format!(
                    "{} exists and differs from the embedded corpus (export into an empty directory)",
                    target.display()
                ));
            }
            continue;
        }
        let relative = Path::new(path).parent().unwrap_or(Path::new(""));
        create_dir_inside(dir, relative).map_err(|e| e.to_string())?;
        write_file(&target, bytes).map_err(|e| e.to_string())?;
    }
    let written = tree_hash_on_disk(dir)?;
    if written != embedded_tree_hash() {
        return Err(format!(
            "{} holds files the embedded corpus does not (export into an empty directory)",
            dir.join(FIXTURES_DIR).display()
        ));
    }
    Ok(dir.join(FIXTURES_DIR))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
