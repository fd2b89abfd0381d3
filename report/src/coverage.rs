//! The spec-coverage table: each rule of `fixtures/rules.json` and the cases that list it.

use super::document::{parse_json, RuleCoverage};
use dsh_engine::input::{read_bounded, MAX_CONFIG_BYTES};
use dsh_results::model::SuiteReport;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One entry of `fixtures/rules.json`; other members are ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub id: String,
    pub section: String,
    pub text: String,
}

/// The section of a rule as text, whether the catalog wrote it as a string or a number.
fn section_text(value: Option<&serde_json::Value>) -> String {
    match value {
        Some(serde_json::Value::String(text)) => text.clone(),
        Some(serde_json::Value::Number(number)) => number.to_string(),
        _ => String::new(),
    }
}

/// Parses the rule catalog `{"v":1,"rules":[{"id","section","text",...}]}`; `origin` names it in
/// errors.
pub fn parse_rules(text: &str, origin: &Path) -> Result<Vec<Rule>, String> {
    let value = parse_json(text, origin)?;
    let entries = value
        .get("rules")
        .and_then(serde_json::Value::as_array)
        .ok_or_else(|| {
            format!(
                "{}: expected an object with a \"rules\" array",
                origin.display()
            )
        })?;
    entries
        .iter()
        .enumerate()
        .map(|(index, entry)| {
            let id = entry
                .get("id")
                .and_then(serde_json::Value::as_str)
                .ok_or_else(|| {
                    format!("{}: rules[{index}] has no string \"id\"", origin.display())
                })?;
            Ok(Rule {
                id: id.to_string(),
                section: section_text(entry.get("section")),
                text: entry
                    .get("text")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            })
        })
        .collect()
}

/// Reads `<fixtures>/rules.json`.
pub fn load_rules(fixtures: &Path) -> Result<Vec<Rule>, String> {
    let path = fixtures.join("rules.json");
    parse_rules(
        &read_bounded(&path, "the rule catalog", MAX_CONFIG_BYTES)?,
        &path,
    )
}

/// The text given to a rule some case lists but the catalog lacks.
pub const UNCATALOGUED: &str = "(not in fixtures/rules.json)";

/// Each catalog rule with the ids of the cases (over all suites) listing it, in catalog order;
/// then any rule a case lists that the catalog lacks, flagged with [`UNCATALOGUED`].
pub fn coverage(rules: &[Rule], suites: &[SuiteReport]) -> Vec<RuleCoverage> {
    let mut cases_of: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for case in suites.iter().flat_map(|suite| &suite.cases) {
        for rule in &case.rules {
            cases_of
                .entry(rule.as_str())
                .or_default()
                .insert(case.id.as_str());
        }
    }
    let case_list = |id: &str| -> Vec<String> {
        cases_of
            .get(id)
            .map(|cases| cases.iter().map(|case| case.to_string()).collect())
            .unwrap_or_default()
    };
    let mut table: Vec<RuleCoverage> = rules
        .iter()
        .map(|rule| RuleCoverage {
            id: rule.id.clone(),
            section: rule.section.clone(),
            text: rule.text.clone(),
            cases: case_list(&rule.id),
        })
        .collect();
    for id in cases_of.keys() {
        if !rules.iter().any(|rule| rule.id == *id) {
            table.push(RuleCoverage {
                id: id.to_string(),
                section: String::new(),
                text: UNCATALOGUED.to_string(),
                cases: case_list(id),
            });
        }
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_with_string_or_number_sections_and_extra_members() {
        let text = r#"{"v":1,"rules":[{"id":"s6.a","section":"6","text":"A.","level":"must"},
                                       {"id":"s7.b","section":7,"text":"B."}]}"#;
        let rules = parse_rules(text, Path::new("rules.json")).unwrap();
        assert_eq!(rules[0].section, "6");
        assert_eq!(rules[1].section, "7");
        assert_eq!(rules[1].text, "B.");
    }

    #[test]
    fn malformed_catalogs_name_the_file() {
        let error =
            parse_rules(r#"{"rules":[{"section":"6"}]}"#, Path::new("f/rules.json")).unwrap_err();
        assert_eq!(error, "f/rules.json: rules[0] has no string \"id\"");
        let error = parse_rules("[", Path::new("f/rules.json")).unwrap_err();
        assert!(error.starts_with("f/rules.json:1:"), "{error}");
    }
}
