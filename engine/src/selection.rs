//! Finding the case files under a fixtures dir and selecting cases by id glob and spec section.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

use dsh_formats::case::{self as fixture, Case, FixtureError};
use dsh_formats::scenario::Action;

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
        let waits = case.runtime.actions().map(Action::bounds_waited).sum();
        (case.timeout_ms.unwrap_or(0), waits)
    }
}

/// Which cases to run: every glob and every section are alternatives; both kinds given must both
/// match. Empty lists select everything. A case matching any skip glob is left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    pub case_globs: Vec<String>,
    pub sections: Vec<String>,
    /// `--skip PATTERN`: globs over case ids to leave out.
    pub skip_globs: Vec<String>,
    /// `--shard K/N`: run only shard K (1-based) of N.
    pub shard: Option<Shard>,
}

impl Selection {
    pub fn matches(&self, entry: &CaseEntry) -> bool {
        let section_ok = self.sections.is_empty()
            || entry.case.as_ref().is_ok_and(|case| {
                case.spec
                    .iter()
                    .any(|section| self.sections.contains(section))
            });
        self.matches_id(&entry.id) && section_ok
    }

    /// Whether the id is selected by `--case` (any, or none given) and not left out by `--skip`.
    pub fn matches_id(&self, id: &str) -> bool {
        let id_ok =
            self.case_globs.is_empty() || self.case_globs.iter().any(|glob| glob_match(glob, id));
        id_ok && !self.skip_globs.iter().any(|glob| glob_match(glob, id))
    }

    /// Checks every glob once, so a malformed pattern is an error naming the flag, not a case
    /// that silently never matches.
    pub fn check(&self) -> Result<(), String> {
        for (flag, globs) in [("--case", &self.case_globs), ("--skip", &self.skip_globs)] {
            for glob in globs {
                compile(glob).map_err(|e| format!("{flag} {glob:?} is not a valid glob: {e}"))?;
            }
        }
        Ok(())
    }

    /// The `--case` and `--skip` globs that match no case id in `ids` (the whole corpus, before
    /// any other filter), each named with its flag and the ids nearest to it (at most three, by
    /// edit distance over the glob's text without its wildcards): a typo must not silently drop a
    /// selection or leave a case in, and the hint says what was probably meant.
    pub fn unmatched_with_hints<'a>(
        &self,
        ids: impl Iterator<Item = &'a str> + Clone,
    ) -> Vec<String> {
        [("--case", &self.case_globs), ("--skip", &self.skip_globs)]
            .into_iter()
            .flat_map(|(flag, globs)| globs.iter().map(move |glob| (flag, glob)))
            .filter(|(_, glob)| !ids.clone().any(|id| glob_match(glob, id)))
            .map(|(flag, glob)| {
                let near = nearest_ids(glob, ids.clone(), 3);
                if near.is_empty() {
                    format!("{flag} {glob:?}")
                } else {
                    format!("{flag} {glob:?} (nearest: {})", near.join(", "))
                }
            })
            .collect()
    }
}

/// The `count` ids nearest to `glob`, nearest first: the ids that share the longest start with
/// the glob's literal prefix (its text before the first wildcard: `lifecycle.cancl*` suggests the
/// `lifecycle.canc...` ids), ranked by edit distance to the glob's text without its `*` and `?`;
/// every id is a candidate when none shares even a first character.
pub fn nearest_ids<'a>(
    glob: &str,
    ids: impl Iterator<Item = &'a str>,
    count: usize,
) -> Vec<String> {
    let literal: String = glob.chars().filter(|c| !matches!(c, '*' | '?')).collect();
    let prefix: Vec<char> = glob
        .chars()
        .take_while(|c| !matches!(c, '*' | '?' | '[' | '{'))
        .collect();
    let shared = |id: &str| {
        prefix
            .iter()
            .zip(id.chars())
            .take_while(|(a, b)| *a == b)
            .count()
    };
    let ids: Vec<&str> = ids.collect();
    let longest = ids.iter().map(|id| shared(id)).max().unwrap_or(0);
    let mut scored: Vec<(usize, &str)> = ids
        .into_iter()
        .filter(|id| shared(id) == longest)
        .map(|id| (edit_distance(&literal, id), id))
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored
        .into_iter()
        .take(count)
        .map(|(_, id)| id.to_string())
        .collect()
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// One shard of N (`--shard K/N`, K from 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(text: &str) -> Result<Shard, String> {
        let parsed = text
            .split_once('/')
            .and_then(|(k, n)| Some((k.trim().parse().ok()?, n.trim().parse().ok()?)));
        match parsed {
            Some((index, count)) if count >= 1 && (1..=count).contains(&index) => {
                Ok(Shard { index, count })
            }
            _ => Err(format!(
                "--shard {text:?} is not K/N with 1 <= K <= N (e.g. 2/4)"
            )),
        }
    }
}

/// Keeps the entries of one shard. Cases are dealt by expected wait (longest first, ties by a
/// hash of the id), each to the shard with the least expected wait so far: deterministic, balanced
/// by the wait, and a case added to the corpus moves only the cases dealt after it.
pub fn shard_entries(entries: Vec<CaseEntry>, shard: Shard) -> Vec<CaseEntry> {
    let mut order: Vec<(u64, u64, usize)> = entries
        .iter()
        .enumerate()
        .map(|(index, entry)| (wait_weight(entry), id_hash(&entry.id), index))
        .collect();
    order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut loads = vec![0u64; shard.count];
    let mut mine = vec![false; entries.len()];
    for (weight, _, index) in order {
        let (target, _) = loads
            .iter()
            .enumerate()
            .min_by_key(|(slot, load)| (**load, *slot))
            .unwrap_or((0, &0));
        loads[target] += weight;
        mine[index] = target + 1 == shard.index;
    }
    entries
        .into_iter()
        .zip(mine)
        .filter_map(|(entry, keep)| keep.then_some(entry))
        .collect()
}

/// A case's expected wall time for balancing: its budget (or a default one) plus a premium per
/// bound it waits out.
fn wait_weight(entry: &CaseEntry) -> u64 {
    let (timeout_ms, waits) = entry.expected_wait();
    let base = if timeout_ms == 0 { 1_000 } else { timeout_ms };
    base + 2_000 * waits as u64
}

/// A stable hash of an id (the first 8 bytes of its SHA-256), for tie-breaking.
fn id_hash(id: &str) -> u64 {
    let digest = Sha256::digest(id.as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(bytes)
}

fn compile(pattern: &str) -> Result<globset::GlobMatcher, globset::Error> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(false)
        .build()
        .map(|glob| glob.compile_matcher())
}

/// Glob matching over case ids (globset syntax: `*`, `?`, `[a-z]`, `{a,b}`); a pattern that does
/// not compile matches nothing ([`Selection::check`] reports it first).
pub fn glob_match(pattern: &str, text: &str) -> bool {
    compile(pattern).is_ok_and(|matcher| matcher.is_match(text))
}

use dsh_formats::case::NOT_CASE_DIRS;

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
    crate::random::hex(&hasher.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_gets_the_nearest_ids() {
        let ids = ["framing.crlf", "framing.bom", "cancel.grace"];
        assert_eq!(
            nearest_ids("framing.crfl", ids.into_iter(), 2),
            ["framing.crlf"]
        );
        // The glob's prefix decides the candidates: an id close by edit distance but starting
        // elsewhere is not suggested over one under the prefix.
        let ids = [
            "lifecycle.cancel-grace",
            "lifecycle.cancel-kill",
            "cycle.canc",
        ];
        assert_eq!(
            nearest_ids("lifecycle.cancl*", ids.into_iter(), 3),
            ["lifecycle.cancel-kill", "lifecycle.cancel-grace"]
        );
        assert_eq!(
            nearest_ids("zzz*", ids.into_iter(), 1),
            ["cycle.canc"],
            "no shared prefix: every id is a candidate"
        );
        let ids = ["framing.crlf", "framing.bom", "cancel.grace"];
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        let selection = Selection {
            case_globs: vec!["cancle.*".into()],
            ..Selection::default()
        };
        let hints = selection.unmatched_with_hints(ids.into_iter());
        assert_eq!(hints.len(), 1);
        assert!(hints[0].contains("nearest: cancel.grace"), "{hints:?}");
    }

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

    fn entry(id: &str, timeout_ms: Option<u64>) -> CaseEntry {
        let timeout = timeout_ms.map_or(String::new(), |ms| format!(r#","timeout_ms":{ms}"#));
        let text = format!(
            r#"{{"v":1,"id":"{id}","summary":"s","spec":["6"],"rules":["r"]{timeout},"steps":[{{"discover":{{}}}}]}}"#
        );
        let file = PathBuf::from(format!("{id}.json"));
        CaseEntry {
            id: id.to_string(),
            case: fixture::parse_case(&file, &text),
            file,
            bytes: text.into_bytes(),
        }
    }

    #[test]
    fn shards_partition_balance_and_stay_stable() {
        let ids: Vec<String> = (0..40).map(|n| format!("a.case-{n:02}")).collect();
        let corpus: Vec<CaseEntry> = ids
            .iter()
            .enumerate()
            .map(|(n, id)| entry(id, (n % 5 == 0).then_some(20_000)))
            .collect();
        let shards: Vec<Vec<String>> = (1..=3)
            .map(|index| {
                shard_entries(corpus.clone(), Shard { index, count: 3 })
                    .into_iter()
                    .map(|entry| entry.id)
                    .collect()
            })
            .collect();
        let mut all: Vec<String> = shards.concat();
        all.sort();
        assert_eq!(all, ids, "every case in exactly one shard");
        let load = |shard: &[String]| -> u64 {
            shard
                .iter()
                .map(|id| wait_weight(&corpus[ids.iter().position(|x| x == id).unwrap_or(0)]))
                .sum()
        };
        let loads: Vec<u64> = shards.iter().map(|shard| load(shard)).collect();
        let (min, max) = (loads.iter().min(), loads.iter().max());
        assert!(
            max.zip(min).is_some_and(|(max, min)| max - min <= 20_000),
            "{loads:?}"
        );
        // A quick case added to the corpus: the long cases keep their shards.
        let mut grown = corpus.clone();
        grown.push(entry("z.new", None));
        let again: Vec<String> = shard_entries(grown, Shard { index: 1, count: 3 })
            .into_iter()
            .map(|entry| entry.id)
            .filter(|id| {
                id != "z.new"
                    && corpus[ids.iter().position(|x| x == id).unwrap_or(0)]
                        .expected_wait()
                        .0
                        > 0
            })
            .collect();
        let before: Vec<&String> = shards[0]
            .iter()
            .filter(|id| {
                corpus[ids.iter().position(|x| x == *id).unwrap_or(0)]
                    .expected_wait()
                    .0
                    > 0
            })
            .collect();
        assert_eq!(again.iter().collect::<Vec<_>>(), before);
        assert!("0/3".parse::<Shard>().is_err() && "4/3".parse::<Shard>().is_err());
        assert_eq!("2/3".parse::<Shard>(), Ok(Shard { index: 2, count: 3 }));
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
            ..Selection::default()
        };
        assert!(selection.matches(&entries[2]) && !selection.matches(&entries[0]));
        let by_section = Selection {
            sections: vec!["7".into()],
            ..Selection::default()
        };
        assert!(!by_section.matches(&entries[2]));
        let skipping = Selection {
            skip_globs: vec!["a.*".into()],
            ..Selection::default()
        };
        assert!(skipping.matches(&entries[2]) && !skipping.matches(&entries[0]));
        assert!(Selection {
            skip_globs: vec!["[".into()],
            ..Selection::default()
        }
        .check()
        .is_err_and(|e| e.contains("--skip")));
    }
}
