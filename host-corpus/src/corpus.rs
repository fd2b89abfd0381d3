//! The host corpus's lint (`dsh-conformance lint` with the client corpus's) and the rule catalog
//! loader.
//!
//! The lint checks what the runner takes for granted: every case file matches
//! `schemas/fixture.schema.json`, lives at `fixtures/<first id segment>/<id>.json`, has a unique id,
//! names only rules that exist in `fixtures/rules.json` and interpretation entries that exist in
//! `docs/interpretations.md`; and every rule has a case unless it
//! carries an `untestable_reason`. It can also render the rule -> sentence -> cases table
//! (`docs/rules.md`).
//!
//! The tree itself (the corpus built into the binary, where a command takes its corpus from) is
//! [`dsh_engine::corpus`]'s.

use dsh_engine::corpus::{interpretation_ids, read_corpus_file, LintError, RULES_FILE};

use serde::Deserialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The fixtures subdirectory that holds stdout transcripts, not case files.
pub const TRANSCRIPTS_DIR: &str = "transcripts";
const FIXTURE_SCHEMA: &str = "fixture.schema.json";
const RULES_SCHEMA: &str = "rules.schema.json";
/// At most this many schema errors are reported per file (the first ones say enough).
const MAX_SCHEMA_ERRORS_PER_FILE: usize = 5;

/// Whether a rule quotes the spec, rests on an interpretation of it, or states the kit's own
/// contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleKind {
    /// A spec sentence, holding only what the spec says: breaking it fails a case.
    Normative,
    /// A requirement the spec does not state (a bound, a code, an order it leaves open): breaking
    /// it makes a case `informational`, and the rule names its `docs/interpretations.md` entry.
    Interpretation,
    Harness,
}

/// One entry of `fixtures/rules.json`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub id: String,
    /// The spec section (`"6"`).
    pub section: String,
    /// The sentence, quoted or closely paraphrased.
    pub text: String,
    pub kind: RuleKind,
    /// The interpretation entry (`I-..`) of an `interpretation` rule.
    #[serde(default)]
    pub interpretation: Option<String>,
    /// Set when no case can show the rule; such a rule needs no case.
    #[serde(default)]
    pub untestable_reason: Option<String>,
}

#[derive(Deserialize)]
struct Catalog {
    rules: Vec<Rule>,
}

/// What the lint keeps of one loadable case file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseRef {
    pub id: String,
    pub file: PathBuf,
    pub rules: Vec<String>,
    /// The interpretation entries its expectations rest on (`expect.interpretations` values).
    pub interpretations: Vec<String>,
}

/// Reads `fixtures_dir/rules.json`, checks it against `rules.schema.json`, and returns its rules
/// in file order.
pub fn load_rules(fixtures_dir: &Path) -> Result<Vec<Rule>, LintError> {
    let file = fixtures_dir.join(RULES_FILE);
    let value = read_json(&file)?;
    if let Err(errors) = dsh_protocol::schema::validate(RULES_SCHEMA, &value) {
        let first = errors.first().map(ToString::to_string).unwrap_or_default();
        return Err(LintError::new(
            &file,
            format!("does not match {RULES_SCHEMA}: {first}"),
        ));
    }
    let catalog: Catalog = serde_json::from_value(value)
        .map_err(|error| LintError::new(&file, format!("not a rule catalog: {error}")))?;
    Ok(catalog.rules)
}

/// Rule id -> interpretation entry, for the rules of kind `interpretation`: a finding blamed on one
/// of them makes a case `informational`, not `fail`.
pub fn interpreted_rules(rules: &[Rule]) -> BTreeMap<String, String> {
    rules
        .iter()
        .filter(|rule| rule.kind == RuleKind::Interpretation)
        .filter_map(|rule| Some((rule.id.clone(), rule.interpretation.clone()?)))
        .collect()
}

/// Lints the corpus in `fixtures_dir`, with the interpretation entries read from the `docs/`
/// directory next to it. An empty result means the corpus is clean.
pub fn lint(fixtures_dir: &Path) -> Vec<LintError> {
    lint_with_docs(fixtures_dir, &default_docs_dir(fixtures_dir))
}

/// [`lint`] with an explicit docs directory.
pub fn lint_with_docs(fixtures_dir: &Path, docs_dir: &Path) -> Vec<LintError> {
    let mut errors = Vec::new();
    let rules = match load_rules(fixtures_dir) {
        Ok(rules) => {
            errors.extend(check_catalog(&fixtures_dir.join(RULES_FILE), &rules));
            Some(rules)
        }
        Err(error) => {
            errors.push(error);
            None
        }
    };
    let (cases, case_errors) = load_cases(fixtures_dir);
    errors.extend(case_errors);
    errors.extend(check_unique_ids(&cases));
    let interpretations = interpretation_ids(docs_dir);
    let unknown_entry = |id: &str| {
        format!(
            "interpretation {id} is not an entry (`### {id}: ...`) in {}",
            docs_dir.join("interpretations.md").display()
        )
    };
    for case in &cases {
        for id in &case.interpretations {
            if !interpretations.contains(id) {
                errors.push(LintError::new(&case.file, unknown_entry(id)));
            }
        }
    }
    if let Some(rules) = &rules {
        for rule in rules {
            if let Some(id) = &rule.interpretation {
                if !interpretations.contains(id) {
                    errors.push(LintError::new(
                        &fixtures_dir.join(RULES_FILE),
                        format!("rule {}: {}", rule.id, unknown_entry(id)),
                    ));
                }
            }
        }
        errors.extend(check_rule_references(fixtures_dir, rules, &cases));
    }
    errors
}

/// The docs directory that belongs to a fixtures directory: `<fixtures>/../docs`.
pub fn default_docs_dir(fixtures_dir: &Path) -> PathBuf {
    fixtures_dir.parent().unwrap_or(Path::new(".")).join("docs")
}

/// Every case file under `fixtures_dir` that parses and matches the fixture schema, plus the
/// problems of the files that don't (or that sit in the wrong place).
pub fn load_cases(fixtures_dir: &Path) -> (Vec<CaseRef>, Vec<LintError>) {
    let mut cases = Vec::new();
    let mut errors = Vec::new();
    let areas = match sorted_entries(fixtures_dir) {
        Ok(entries) => entries,
        Err(error) => {
            return (
                cases,
                vec![LintError::new(
                    fixtures_dir,
                    format!("cannot list: {error}"),
                )],
            )
        }
    };
    for area in areas {
        let name = file_name(&area);
        if !area.is_dir()
            || name.starts_with('.')
            || dsh_formats::case::NOT_CASE_DIRS.contains(&name.as_str())
        {
            continue;
        }
        let files = match sorted_entries(&area) {
            Ok(files) => files,
            Err(error) => {
                errors.push(LintError::new(&area, format!("cannot list: {error}")));
                continue;
            }
        };
        for file in files {
            let file_label = file_name(&file);
            if file_label.starts_with('.') {
                continue;
            }
            if file.is_dir() {
                errors.push(LintError::new(
                    &file,
                    "case files live directly in fixtures/<area>/, not in a subdirectory",
                ));
                continue;
            }
            if !file_label.ends_with(".json") {
                continue;
            }
            match check_case_file(&file, &name) {
                Ok((case, mut problems)) => {
                    errors.append(&mut problems);
                    cases.push(case);
                }
                Err(mut problems) => errors.append(&mut problems),
            }
        }
    }
    (cases, errors)
}

/// Renders the rule -> sentence -> cases table (docs/rules.md), grouped by section.
pub fn rules_markdown(rules: &[Rule], cases: &[CaseRef]) -> String {
    let mut by_rule: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for case in cases {
        for rule in &case.rules {
            by_rule
                .entry(rule.as_str())
                .or_default()
                .push(case.id.as_str());
        }
    }
    let mut out = String::from(
        "# Rules and the cases that cover them\n\n\
         Generated by `dsh-conformance lint --write-rules-md docs/rules.md` from `fixtures/rules.json`\n\
         and the case files; do not edit by hand. A case's first rule is the one blamed when its\n\
         status or code expectation fails.\n",
    );
    let mut sections: Vec<&str> = Vec::new();
    for rule in rules {
        if !sections.contains(&rule.section.as_str()) {
            sections.push(&rule.section);
        }
    }
    sections.sort_by_key(|section| section.parse::<u32>().unwrap_or(u32::MAX));
    for section in sections {
        out.push_str(&format!(
            "\n## Section {section}\n\n| rule | sentence | cases |\n|---|---|---|\n"
        ));
        for rule in rules.iter().filter(|rule| rule.section == section) {
            let covering = match (&rule.untestable_reason, by_rule.get(rule.id.as_str())) {
                (_, Some(ids)) => ids
                    .iter()
                    .map(|id| format!("`{id}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                (Some(reason), None) => format!("untestable: {}", escape_cell(reason)),
                (None, None) => "**none**".to_string(),
            };
            let kind = match (rule.kind, &rule.interpretation) {
                (RuleKind::Interpretation, Some(id)) => format!(" (interpretation {id})"),
                (RuleKind::Interpretation, None) => " (interpretation)".to_string(),
                (RuleKind::Harness, _) => " (harness)".to_string(),
                (RuleKind::Normative, _) => String::new(),
            };
            out.push_str(&format!(
                "| `{}`{kind} | {} | {covering} |\n",
                rule.id,
                escape_cell(&rule.text)
            ));
        }
    }
    out
}

fn escape_cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// Parses, schema-checks and places one case file. `Err` when nothing usable could be read.
fn check_case_file(file: &Path, area: &str) -> Result<(CaseRef, Vec<LintError>), Vec<LintError>> {
    let value = read_json(file).map_err(|error| vec![error])?;
    let mut problems = Vec::new();
    if let Err(errors) = dsh_protocol::schema::validate(FIXTURE_SCHEMA, &value) {
        for error in errors.iter().take(MAX_SCHEMA_ERRORS_PER_FILE) {
            problems.push(LintError::new(
                file,
                format!("does not match {FIXTURE_SCHEMA} {error}"),
            ));
        }
        if errors.len() > MAX_SCHEMA_ERRORS_PER_FILE {
            problems.push(LintError::new(
                file,
                format!(
                    "... and {} more schema errors",
                    errors.len() - MAX_SCHEMA_ERRORS_PER_FILE
                ),
            ));
        }
    }
    let Some(id) = value.get("id").and_then(Value::as_str) else {
        problems.push(LintError::new(
            file,
            "has no string `id`; cannot check its place or rules",
        ));
        return Err(problems);
    };
    let expected_name = format!("{id}.json");
    if file_name(file) != expected_name {
        problems.push(LintError::new(
            file,
            format!("file name must be the id plus .json: {expected_name}"),
        ));
    }
    let first_segment = id.split('.').next().unwrap_or(id);
    if first_segment != area {
        problems.push(LintError::new(
            file,
            format!("case {id} must live in fixtures/{first_segment}/ (the id's first segment), not fixtures/{area}/"),
        ));
    }
    let rules = value
        .get("rules")
        .and_then(Value::as_array)
        .map(|rules| {
            rules
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let interpretations = value
        .get("steps")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|step| step.pointer("/expect/interpretations")?.as_object())
        .flat_map(|map| map.values().filter_map(Value::as_str).map(str::to_string))
        .collect();
    Ok((
        CaseRef {
            id: id.to_string(),
            file: file.to_path_buf(),
            rules,
            interpretations,
        },
        problems,
    ))
}

fn check_unique_ids(cases: &[CaseRef]) -> Vec<LintError> {
    let mut first_file: BTreeMap<&str, &Path> = BTreeMap::new();
    let mut errors = Vec::new();
    for case in cases {
        if let Some(earlier) = first_file.get(case.id.as_str()) {
            errors.push(LintError::new(
                &case.file,
                format!(
                    "duplicate case id {} (also in {})",
                    case.id,
                    earlier.display()
                ),
            ));
        } else {
            first_file.insert(&case.id, &case.file);
        }
    }
    errors
}

/// Catalog-internal checks the schema cannot express: unique ids, id prefix == section.
fn check_catalog(file: &Path, rules: &[Rule]) -> Vec<LintError> {
    let mut seen = BTreeSet::new();
    let mut errors = Vec::new();
    for rule in rules {
        if !seen.insert(rule.id.as_str()) {
            errors.push(LintError::new(
                file,
                format!("duplicate rule id {}", rule.id),
            ));
        }
        let prefix = format!("s{}.", rule.section);
        if !rule.id.starts_with(&prefix) {
            errors.push(LintError::new(
                file,
                format!(
                    "rule {} is in section {} but its id does not start with {prefix}",
                    rule.id, rule.section
                ),
            ));
        }
    }
    errors
}

/// Every rule a case names exists; every rule without an `untestable_reason` has a case.
fn check_rule_references(fixtures_dir: &Path, rules: &[Rule], cases: &[CaseRef]) -> Vec<LintError> {
    let known: BTreeSet<&str> = rules.iter().map(|rule| rule.id.as_str()).collect();
    let mut covered: BTreeSet<&str> = BTreeSet::new();
    let mut errors = Vec::new();
    for case in cases {
        for rule in &case.rules {
            if known.contains(rule.as_str()) {
                covered.insert(rule);
            } else {
                errors.push(LintError::new(
                    &case.file,
                    format!(
                        "rule {rule} is not in {}",
                        fixtures_dir.join(RULES_FILE).display()
                    ),
                ));
            }
        }
    }
    let catalog = fixtures_dir.join(RULES_FILE);
    for rule in rules {
        if rule.untestable_reason.is_none() && !covered.contains(rule.id.as_str()) {
            errors.push(LintError::new(
                &catalog,
                format!(
                    "rule {} has no case (add one, or an untestable_reason)",
                    rule.id
                ),
            ));
        }
    }
    errors
}

fn read_json(file: &Path) -> Result<Value, LintError> {
    let text = read_corpus_file(file).map_err(|why| LintError::new(file, why))?;
    serde_json::from_str(&text).map_err(|error| LintError::new(file, format!("not JSON: {error}")))
}

fn sorted_entries(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut entries = fs::read_dir(dir)?
        .map(|entry| entry.map(|entry| entry.path()))
        .collect::<std::io::Result<Vec<_>>>()?;
    entries.sort();
    Ok(entries)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpus_files_are_read_bounded_and_only_when_regular() {
        let dir = tempfile::tempdir().expect("temp dir");
        let fifo = dir.path().join("case.fifo.json");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
        let error = read_json(&fifo).expect_err("a FIFO is refused, without blocking");
        assert!(error.to_string().contains("case.fifo.json"), "{error}");
        assert!(error.to_string().contains("not a regular file"), "{error}");

        let big = dir.path().join("big.json");
        fs::File::create(&big)
            .and_then(|file| file.set_len(dsh_engine::corpus::MAX_CORPUS_FILE_BYTES + 1))
            .expect("sparse file");
        let error = read_json(&big).expect_err("an oversized file is refused");
        assert!(error.to_string().contains("big.json"), "{error}");
        assert!(error.to_string().contains("more than"), "{error}");

        let small = dir.path().join("ok.json");
        fs::write(&small, "{\"v\": 1}").expect("write");
        assert!(read_json(&small).is_ok_and(|value| value["v"] == 1));
    }

    #[test]
    fn catalog_checks_catch_duplicates_and_wrong_prefixes() {
        let rule = |id: &str, section: &str| Rule {
            id: id.to_string(),
            section: section.to_string(),
            text: "t".to_string(),
            kind: RuleKind::Normative,
            interpretation: None,
            untestable_reason: None,
        };
        let errors = check_catalog(
            Path::new("rules.json"),
            &[rule("s6.a", "6"), rule("s6.a", "6"), rule("s7.b", "6")],
        );
        let problems: Vec<&str> = errors.iter().map(|e| e.problem.as_str()).collect();
        assert_eq!(
            problems,
            [
                "duplicate rule id s6.a",
                "rule s7.b is in section 6 but its id does not start with s6."
            ]
        );
    }

    #[test]
    fn markdown_lists_cases_and_untestable_reasons() {
        let rules = vec![
            Rule {
                id: "s6.a".into(),
                section: "6".into(),
                text: "A | b".into(),
                kind: RuleKind::Normative,
                interpretation: None,
                untestable_reason: None,
            },
            Rule {
                id: "s10.b".into(),
                section: "10".into(),
                text: "B".into(),
                kind: RuleKind::Interpretation,
                interpretation: Some("I-C01".into()),
                untestable_reason: Some("needs Windows".into()),
            },
        ];
        let cases = vec![CaseRef {
            id: "x.one".into(),
            file: PathBuf::from("x/x.one.json"),
            rules: vec!["s6.a".into()],
            interpretations: Vec::new(),
        }];
        let markdown = rules_markdown(&rules, &cases);
        assert!(
            markdown.contains("| `s6.a` | A \\| b | `x.one` |"),
            "{markdown}"
        );
        assert!(
            markdown.contains("| `s10.b` (interpretation I-C01) | B | untestable: needs Windows |"),
            "{markdown}"
        );
        assert!(markdown.find("## Section 6").unwrap() < markdown.find("## Section 10").unwrap());
    }
}
