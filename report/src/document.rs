//! `report.json`: the document type, its schema (`schemas/report.schema.json`, embedded), and
//! loading a report (or a single `run --format json` suite) with schema errors that name the file.
//! [`parse_json`] parses it, and the rule catalog, with errors naming the file; both are read
//! through [`dsh_engine::input::read_bounded`].

use super::config::VariantSpec;
use dsh_engine::input::{read_bounded, MAX_REPORT_BYTES};
use dsh_results::model::SuiteReport;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The report schema, as published in `schemas/report.schema.json`.
pub const REPORT_SCHEMA: &str = include_str!("../../schemas/report.schema.json");

/// The `kind` every report document carries.
pub const REPORT_KIND: &str = "dsh-conformance-report";

/// A host x variant run the harness could not complete.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SuiteError {
    pub host: String,
    pub variant: String,
    pub message: String,
}

/// One spec rule from `fixtures/rules.json` and the cases that list it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleCoverage {
    pub id: String,
    pub section: String,
    pub text: String,
    pub cases: Vec<String>,
}

/// The whole matrix: what `report.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportDocument {
    pub v: u32,
    pub kind: String,
    pub kit_version: String,
    pub corpus_hash: String,
    pub variants: Vec<VariantSpec>,
    /// Host-major: every variant of the first host, then of the next.
    pub suites: Vec<SuiteReport>,
    pub errors: Vec<SuiteError>,
    pub rules: Vec<RuleCoverage>,
}

impl ReportDocument {
    /// Assembles a document; the corpus hash is the suites' (they all ran the same corpus).
    pub fn new(
        variants: Vec<VariantSpec>,
        suites: Vec<SuiteReport>,
        errors: Vec<SuiteError>,
        rules: Vec<RuleCoverage>,
    ) -> ReportDocument {
        ReportDocument {
            v: 1,
            kind: REPORT_KIND.to_string(),
            kit_version: env!("CARGO_PKG_VERSION").to_string(),
            corpus_hash: suites
                .first()
                .map(|suite| suite.corpus_hash.clone())
                .unwrap_or_default(),
            variants,
            suites,
            errors,
            rules,
        }
    }

    /// The loud note when a suite ran a corpus other than the kit's embedded one.
    pub fn corpus_warning(&self) -> Option<String> {
        self.suites
            .iter()
            .filter_map(|suite| suite.corpus.as_ref())
            .find_map(dsh_results::model::CorpusInfo::warning)
    }

    /// Wraps one `run --format json` suite as a one-cell report (for `diff`).
    pub fn from_suite(suite: SuiteReport) -> ReportDocument {
        let variant = VariantSpec {
            name: suite.runtime_variant.clone(),
            env: Default::default(),
        };
        let mut document = ReportDocument::new(vec![variant], vec![suite], Vec::new(), Vec::new());
        document.kit_version = document.suites[0].kit_version.clone();
        document
    }

    /// Whether any cell holds a case that fails a run.
    pub fn has_failures(&self) -> bool {
        self.suites.iter().any(SuiteReport::has_failures)
    }

    /// Number of case results over all cells.
    pub fn case_count(&self) -> usize {
        self.suites.iter().map(|suite| suite.cases.len()).sum()
    }
}

/// Which part of the schema a JSON value is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaPart {
    /// A whole `report.json`.
    Report,
    /// One suite (`$defs/suite`): what `run --format json` writes.
    Suite,
}

fn schema_for(part: SchemaPart) -> serde_json::Value {
    let mut schema: serde_json::Value =
        serde_json::from_str(REPORT_SCHEMA).expect("schemas/report.schema.json is valid JSON");
    if part == SchemaPart::Suite {
        schema = serde_json::json!({
            "$schema": schema["$schema"],
            "$defs": schema["$defs"],
            "$ref": "#/$defs/suite",
        });
    }
    schema
}

/// Every schema violation of `value`, each as `<json pointer>: <message>`; empty when valid.
pub fn schema_errors(value: &serde_json::Value, part: SchemaPart) -> Vec<String> {
    let validator =
        jsonschema::validator_for(&schema_for(part)).expect("the report schema compiles");
    validator
        .iter_errors(value)
        .map(|error| {
            let pointer = error.instance_path().to_string();
            let pointer = if pointer.is_empty() {
                "/".to_string()
            } else {
                pointer
            };
            format!("{pointer}: {error}")
        })
        .collect()
}

/// Parses JSON text read from `origin`; the error names the file, line and column.
pub fn parse_json(text: &str, origin: &Path) -> Result<serde_json::Value, String> {
    serde_json::from_str(text).map_err(|error| {
        format!(
            "{}:{}:{}: not JSON: {error}",
            origin.display(),
            error.line(),
            error.column()
        )
    })
}

/// Reads a `report.json` or a single suite's JSON, checking it against the schema. The error
/// names the file and the first schema violations.
pub fn load_document(path: &Path) -> Result<ReportDocument, String> {
    let text = read_bounded(path, "the report", MAX_REPORT_BYTES)?;
    let value = parse_json(&text, path)?;
    let part = if value.get("suites").is_some() || value.get("kind").is_some() {
        SchemaPart::Report
    } else {
        SchemaPart::Suite
    };
    let errors = schema_errors(&value, part);
    if !errors.is_empty() {
        let shown: Vec<&str> = errors.iter().take(5).map(String::as_str).collect();
        let more = errors.len().saturating_sub(shown.len());
        let tail = if more > 0 {
            format!(" (and {more} more)")
        } else {
            String::new()
        };
        let what = match part {
            SchemaPart::Report => "a report (schemas/report.schema.json)",
            SchemaPart::Suite => "a suite (schemas/report.schema.json#/$defs/suite)",
        };
        return Err(format!(
            "{}: not valid as {what}: {}{tail}",
            path.display(),
            shown.join("; ")
        ));
    }
    let parsed = match part {
        SchemaPart::Report => serde_json::from_value::<ReportDocument>(value),
        SchemaPart::Suite => {
            serde_json::from_value::<SuiteReport>(value).map(ReportDocument::from_suite)
        }
    };
    parsed.map_err(|error| format!("{}: schema-valid but unreadable: {error}", path.display()))
}
