//! Loading and linting the client corpus: `fixtures/clients/rules.json` and the case files under
//! `fixtures/clients/<surface>/` (each checked against its schema, then typed by
//! [`dsh_formats::client_case`]), and the cross-checks a schema cannot make: unique ids, a file
//! named after its id, rules that exist and belong to the case's surface, interpretation entries
//! that exist, and every rule covered by a case.

use dsh_engine::corpus::{interpretation_ids, read_corpus_file, LintError};
use dsh_formats::client_case::{
    self, ClientCase, ClientRule, ClientRules, ClientSurface, CLIENTS_DIR, CLIENT_CASE_SCHEMA,
    CLIENT_RULES_SCHEMA,
};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The surfaces with client cases, each in `fixtures/clients/<surface>/`.
const SURFACES: [ClientSurface; 3] = [
    ClientSurface::Sdk,
    ClientSurface::Headless,
    ClientSurface::Acp,
];

/// A surface's own rule catalog, beside its cases (`fixtures/clients/acp/rules.json`), read
/// after the shared one.
const SURFACE_CATALOG: &str = "rules.json";

/// One loaded case and the file it came from.
#[derive(Debug, Clone)]
pub struct LoadedCase {
    pub case: ClientCase,
    pub file: PathBuf,
    /// The file as read (the selection's hash is over it).
    pub text: String,
}

/// The client corpus of one fixtures directory.
#[derive(Debug, Clone)]
pub struct ClientCorpus {
    pub rules: Vec<ClientRule>,
    /// Sorted by id.
    pub cases: Vec<LoadedCase>,
    /// [`dsh_engine::corpus::embedded::tree_hash`] over every file under `fixtures/clients/`.
    pub hash: String,
}

impl ClientCorpus {
    /// The cases of one surface.
    pub fn of(&self, surface: ClientSurface) -> impl Iterator<Item = &LoadedCase> {
        self.cases.iter().filter(move |c| c.case.surface == surface)
    }
}

/// Loads the client corpus of `fixtures_dir`; every problem found, when there is any.
pub fn load(fixtures_dir: &Path) -> Result<ClientCorpus, Vec<LintError>> {
    let root = fixtures_dir.join(CLIENTS_DIR);
    let catalog = root.join("rules.json");
    let mut errors = Vec::new();
    let mut rules = read_catalog(&catalog, &mut errors);
    for surface in SURFACES {
        let own = root.join(surface.name()).join(SURFACE_CATALOG);
        if own.is_file() {
            rules.extend(read_catalog(&own, &mut errors));
        }
    }
    let mut cases = Vec::new();
    for surface in SURFACES {
        let dir = root.join(surface.name());
        for file in json_files(&dir, &mut errors) {
            let loaded = read_json(&file, CLIENT_CASE_SCHEMA)
                .and_then(|(v, text)| Ok((client_case::parse_case(&v)?, text)));
            match loaded {
                Ok((case, text)) => cases.push(LoadedCase { case, file, text }),
                Err(problem) => errors.push(LintError::new(&file, problem)),
            }
        }
    }
    cases.sort_by(|a, b| a.case.id.cmp(&b.case.id));
    errors.extend(cross_check(&catalog, &rules, &cases));
    let hash = hash_on_disk(&root).map_err(|problem| vec![LintError::new(&root, problem)])?;
    if errors.is_empty() {
        Ok(ClientCorpus { rules, cases, hash })
    } else {
        Err(errors)
    }
}

/// The rules of one catalog file (none, and the problem in `errors`, when it is invalid).
fn read_catalog(catalog: &Path, errors: &mut Vec<LintError>) -> Vec<ClientRule> {
    match read_json(catalog, CLIENT_RULES_SCHEMA)
        .and_then(|(v, _)| serde_json::from_value::<ClientRules>(v).map_err(|e| e.to_string()))
    {
        Ok(rules) => rules.rules,
        Err(problem) => {
            errors.push(LintError::new(catalog, problem));
            Vec::new()
        }
    }
}

/// The lint's part for the client corpus (nothing when the fixtures dir has no `clients/`, as an
/// older exported corpus), with the interpretation entries of `docs_dir`.
pub fn lint(fixtures_dir: &Path, docs_dir: &Path) -> Vec<LintError> {
    if !fixtures_dir.join(CLIENTS_DIR).is_dir() {
        return Vec::new();
    }
    let corpus = match load(fixtures_dir) {
        Ok(corpus) => corpus,
        Err(errors) => return errors,
    };
    let entries = interpretation_ids(docs_dir);
    corpus
        .cases
        .iter()
        .filter_map(|loaded| {
            let id = loaded.case.interpretation.as_ref()?;
            (!entries.contains(id)).then(|| {
                LintError::new(
                    &loaded.file,
                    format!(
                        "interpretation {id} is not an entry (`### {id}: ...`) in {}",
                        docs_dir.join("interpretations.md").display()
                    ),
                )
            })
        })
        .collect()
}

/// The tree hash of every file under a `clients/` directory, paths as embedded
/// (`fixtures/clients/...`, whatever the fixtures directory is called).
pub fn hash_on_disk(root: &Path) -> Result<String, String> {
    let fixtures = root.parent().unwrap_or(Path::new("."));
    let mut files = Vec::new();
    dsh_engine::corpus::embedded::collect(fixtures, root, &mut files)?;
    let named: Vec<(String, Vec<u8>)> = files
        .into_iter()
        .map(|(relative, bytes)| (format!("fixtures/{relative}"), bytes))
        .collect();
    Ok(dsh_engine::corpus::embedded::tree_hash(
        named
            .iter()
            .map(|(path, bytes)| (path.as_str(), bytes.as_slice())),
    ))
}

/// The same hash over the client files embedded in this binary.
pub fn embedded_hash() -> String {
    let prefix = format!("fixtures/{CLIENTS_DIR}/");
    dsh_engine::corpus::embedded::tree_hash(
        dsh_engine::corpus::embedded::files()
            .iter()
            .filter(|(path, _)| path.starts_with(&prefix))
            .copied(),
    )
}

/// The file's JSON, checked against `schema`, and its text.
fn read_json(file: &Path, schema: &str) -> Result<(Value, String), String> {
    let text = read_corpus_file(file)?;
    let value: Value = serde_json::from_str(&text).map_err(|e| format!("not JSON: {e}"))?;
    dsh_protocol::schema::validate(schema, &value).map_err(|errors| {
        let first = errors.first().map(ToString::to_string).unwrap_or_default();
        format!("does not match {schema}: {first}")
    })?;
    Ok((value, text))
}

/// The `*.json` files of a surface's directory, sorted (a missing directory has none).
fn json_files(dir: &Path, errors: &mut Vec<LintError>) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = Vec::new();
    for path in entries.flatten().map(|entry| entry.path()) {
        if path.is_dir() {
            errors.push(LintError::new(
                &path,
                "client cases live directly in fixtures/clients/<surface>/",
            ));
        } else if path.file_name().is_some_and(|name| name == SURFACE_CATALOG) {
            // The surface's own rule catalog, read by `load`.
        } else if path.extension().is_some_and(|ext| ext == "json") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// What the schemas cannot check across files.
fn cross_check(catalog: &Path, rules: &[ClientRule], cases: &[LoadedCase]) -> Vec<LintError> {
    let mut errors = Vec::new();
    let mut rule_ids = BTreeSet::new();
    for rule in rules {
        if !rule_ids.insert(rule.id.as_str()) {
            errors.push(LintError::new(
                catalog,
                format!("duplicate rule id {}", rule.id),
            ));
        }
        if !rule.id.starts_with(&format!("{}.", rule.surface.name())) {
            errors.push(LintError::new(
                catalog,
                format!("rule {} does not start with its surface", rule.id),
            ));
        }
    }
    let mut covered = BTreeSet::new();
    let mut ids = BTreeSet::new();
    for LoadedCase { case, file, .. } in cases {
        if !ids.insert(case.id.as_str()) {
            errors.push(LintError::new(
                file,
                format!("duplicate case id {}", case.id),
            ));
        }
        let slug = case.id.split_once('.').map_or("", |(_, slug)| slug);
        if file.file_stem().and_then(|s| s.to_str()) != Some(slug)
            || !file
                .parent()
                .is_some_and(|dir| dir.ends_with(case.surface.name()))
        {
            errors.push(LintError::new(
                file,
                format!(
                    "case {} belongs in {}/{slug}.json",
                    case.id,
                    case.surface.name()
                ),
            ));
        }
        for rule in &case.rules {
            match rules.iter().find(|r| &r.id == rule) {
                None => errors.push(LintError::new(
                    file,
                    format!("rule {rule} is not in {}", catalog.display()),
                )),
                Some(found) if found.surface != case.surface => errors.push(LintError::new(
                    file,
                    format!(
                        "rule {rule} is a {} rule, the case a {} case",
                        found.surface.name(),
                        case.surface.name()
                    ),
                )),
                Some(_) => {
                    covered.insert(rule.as_str());
                }
            }
        }
    }
    // The configuration rules are judged in every case (crate::judge::configuration_rule).
    for surface in SURFACES {
        covered.insert(crate::judge::configuration_rule(surface));
    }
    for rule in rules.iter().filter(|r| !covered.contains(r.id.as_str())) {
        errors.push(LintError::new(
            catalog,
            format!("rule {} has no case", rule.id),
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace_fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
    }

    #[test]
    fn the_corpus_loads_clean_and_matches_the_embedded_one() {
        let corpus = load(&workspace_fixtures()).unwrap_or_else(|errors| {
            panic!(
                "{}",
                errors
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("\n")
            )
        });
        assert!(corpus.of(ClientSurface::Sdk).count() >= 14);
        assert!(corpus.of(ClientSurface::Headless).count() >= 4);
        assert!(corpus.of(ClientSurface::Acp).count() >= 13);
        assert!(corpus.rules.iter().any(|rule| rule.id == "acp.cold-resume"));
        assert_eq!(corpus.hash, embedded_hash());
        let docs = workspace_fixtures().join("../docs");
        assert_eq!(lint(&workspace_fixtures(), &docs), Vec::new());
    }

    #[test]
    fn a_broken_corpus_names_each_file_and_problem() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join(CLIENTS_DIR);
        std::fs::create_dir_all(root.join("sdk")).unwrap();
        std::fs::write(
            root.join("rules.json"),
            r#"{"v": 1, "rules": [{"id": "sdk.a", "surface": "sdk", "text": "t", "source": "s"},
                                  {"id": "sdk.b", "surface": "sdk", "text": "t", "source": "s"}]}"#,
        )
        .unwrap();
        let case = |id: &str, rule: &str| {
            format!(
                r#"{{"id": "{id}", "surface": "sdk", "summary": "s", "rules": ["{rule}"],
                    "interpretation": "I-NOPE", "prompts": ["p"], "expect": {{"reports": [{{}}]}}}}"#
            )
        };
        std::fs::write(root.join("sdk/one.json"), case("sdk.one", "sdk.a")).unwrap();
        std::fs::write(root.join("sdk/misnamed.json"), case("sdk.two", "sdk.zzz")).unwrap();
        std::fs::write(root.join("sdk/bad.json"), "{\"id\": 3}").unwrap();
        let problems: Vec<String> = load(dir.path())
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect();
        let has = |file: &str, text: &str| {
            problems
                .iter()
                .any(|p| p.contains(file) && p.contains(text))
        };
        assert!(has("bad.json", "client-case.schema.json"), "{problems:?}");
        assert!(
            has("misnamed.json", "belongs in sdk/two.json"),
            "{problems:?}"
        );
        assert!(
            has("misnamed.json", "rule sdk.zzz is not in"),
            "{problems:?}"
        );
        assert!(has("rules.json", "rule sdk.b has no case"), "{problems:?}");
        std::fs::remove_file(root.join("sdk/misnamed.json")).unwrap();
        std::fs::remove_file(root.join("sdk/bad.json")).unwrap();
        std::fs::write(root.join("sdk/two.json"), case("sdk.two", "sdk.b")).unwrap();
        let docs = dir.path().join("docs");
        let lint = lint(dir.path(), &docs);
        assert!(
            lint.iter().any(|e| e.problem.contains("I-NOPE")),
            "{lint:?}"
        );
    }
}
