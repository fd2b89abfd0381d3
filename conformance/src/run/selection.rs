//! Finding the case files under a fixtures dir and selecting cases by id glob and spec section.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

use super::fixture::{self, Case, FixtureError};

/// One case file found in the fixtures dir: loaded, or the reason it did not load.
#[derive(Debug, Clone)]
pub struct CaseEntry {
    /// The case id (the file stem when the file did not load).
    pub id: String,
    pub file: PathBuf,
    pub case: Result<Case, FixtureError>,
    /// The file's bytes, for the corpus hash.
    pub bytes: Vec<u8>,
}

impl CaseEntry {
    pub fn summary(&self) -> String {
        match &self.case {
            Ok(case) => case.summary.clone(),
            Err(_) => "(case file does not load)".to_string(),
        }
    }

    /// A rough rank of how long the case will wait on bounds (a larger budget, a runtime that
    /// hangs, ignores SIGTERM or leaves grandchildren), so the runner can start the long waits
    /// first and overlap them with the quick cases. Only the schedule depends on it.
    pub fn expected_wait(&self) -> (u64, usize) {
        let Ok(case) = &self.case else {
            return (0, 0);
        };
        let runtime = case.runtime.to_string();
        let waits = ["\"hang\"", "\"ignore_sigterm\"", "\"spawn_child\""]
            .iter()
            .map(|action| runtime.matches(action).count())
            .sum();
        (case.timeout_ms.unwrap_or(0), waits)
    }
}

/// Which cases to run: every glob and every section are alternatives; both kinds given must both
/// match. Empty lists select everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    pub case_globs: Vec<String>,
    pub sections: Vec<String>,
}

impl Selection {
    pub fn matches(&self, entry: &CaseEntry) -> bool {
        let id_ok = self.case_globs.is_empty()
            || self
                .case_globs
                .iter()
                .any(|glob| glob_match(glob, &entry.id));
        let section_ok = self.sections.is_empty()
            || entry.case.as_ref().is_ok_and(|case| {
                case.spec
                    .iter()
                    .any(|section| self.sections.contains(section))
            });
        id_ok && section_ok
    }
}

/// `*` matches any run of characters, `?` any one; everything else matches itself.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    let (mut p, mut t) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == '?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == '*' {
            backtrack = Some((p, t));
            p += 1;
        } else if let Some((star, matched)) = backtrack {
            p = star + 1;
            t = matched + 1;
            backtrack = Some((star, matched + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

/// Directories of the fixtures dir that hold no cases.
const NOT_CASE_DIRS: &[&str] = &["transcripts"];

/// Every case file: `<dir>/<area>/<id>.json`, sorted by id. Duplicate ids are load errors.
pub fn find_cases(dir: &Path) -> std::io::Result<Vec<CaseEntry>> {
    let mut files = Vec::new();
    for area in std::fs::read_dir(dir)? {
        let area = area?;
        let name = area.file_name().to_string_lossy().into_owned();
        if !area.file_type()?.is_dir()
            || name.starts_with('.')
            || NOT_CASE_DIRS.contains(&name.as_str())
        {
            continue;
        }
        for file in std::fs::read_dir(area.path())? {
            let path = file?.path();
            if path.extension().is_some_and(|ext| ext == "json") && path.is_file() {
                files.push(path);
            }
        }
    }
    let mut entries: Vec<CaseEntry> = files
        .into_iter()
        .map(|file| {
            let bytes = std::fs::read(&file).unwrap_or_default();
            let stem = file
                .file_stem()
                .map(|stem| stem.to_string_lossy().into_owned())
                .unwrap_or_default();
            let case = match std::str::from_utf8(&bytes) {
                Ok(text) => fixture::parse_case(&file, text),
                Err(_) => Err(FixtureError {
                    file: file.clone(),
                    message: "not UTF-8 text".to_string(),
                }),
            };
            let id = case.as_ref().map(|case| case.id.clone()).unwrap_or(stem);
            CaseEntry {
                id,
                file,
                case,
                bytes,
            }
        })
        .collect();
    entries.sort_by(|a, b| a.id.cmp(&b.id).then_with(|| a.file.cmp(&b.file)));
    for index in 1..entries.len() {
        if entries[index].id == entries[index - 1].id {
            let first = entries[index - 1].file.display().to_string();
            let file = entries[index].file.clone();
            entries[index].case = Err(FixtureError {
                file,
                message: format!("duplicate case id (also in {first})"),
            });
        }
    }
    Ok(entries)
}

/// SHA-256 over the selected case files' bytes, in id order, as hex.
pub fn corpus_hash(entries: &[&CaseEntry]) -> String {
    let mut hasher = Sha256::new();
    for entry in entries {
        hasher.update(&entry.bytes);
    }
    super::world::hex(&hasher.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("cancel.*", "cancel.grandchild-ignores-sigterm"));
        assert!(glob_match("*.session-*", "strict.session-before-content"));
        assert!(glob_match(
            "strict.session-before-content",
            "strict.session-before-content"
        ));
        assert!(glob_match("a?c.*", "abc.d"));
        assert!(glob_match("*", "x.y"));
        assert!(!glob_match("cancel.", "cancel.x"));
        assert!(!glob_match("cancel.*", "strict.x"));
        assert!(!glob_match("*x", "xy"));
    }

    #[test]
    fn finds_sorts_and_flags_duplicates() {
        let dir = tempfile::tempdir().expect("temp dir");
        let case = |id: &str| {
            format!(
                r#"{{"v":1,"id":"{id}","summary":"s","spec":["6"],"rules":["r"],"steps":[{{"discover":{{}}}}]}}"#
            )
        };
        for (area, id) in [("b", "b.one"), ("a", "a.two"), ("transcripts", "t.x")] {
            std::fs::create_dir_all(dir.path().join(area)).expect("mkdir");
            std::fs::write(dir.path().join(area).join(format!("{id}.json")), case(id))
                .expect("write");
        }
        std::fs::create_dir_all(dir.path().join("c")).expect("mkdir");
        std::fs::write(dir.path().join("c/a.two.json"), case("a.two")).expect("write");
        std::fs::write(dir.path().join("rules.json"), "{}").expect("write");
        let entries = find_cases(dir.path()).expect("finds");
        let ids: Vec<&str> = entries.iter().map(|entry| entry.id.as_str()).collect();
        assert_eq!(ids, ["a.two", "a.two", "b.one"]);
        assert!(entries[0].case.is_ok());
        assert!(entries[1]
            .case
            .as_ref()
            .expect_err("duplicate")
            .message
            .contains("duplicate case id"));
        let selection = Selection {
            case_globs: vec!["b.*".into()],
            sections: vec!["6".into()],
        };
        assert!(selection.matches(&entries[2]) && !selection.matches(&entries[0]));
        let by_section = Selection {
            case_globs: vec![],
            sections: vec!["7".into()],
        };
        assert!(!by_section.matches(&entries[2]));
    }
}
