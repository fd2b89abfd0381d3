//! `diff BASE.json NEW.json`: what changed between two reports, by host x variant and case id, and
//! whether that is a regression (the CI gate for adapter changes).

use super::document::ReportDocument;
use dsh_results::model::{CaseResult, SuiteReport, Verdict};
use dsh_results::output::escape::{markdown_code, markdown_text, terminal};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};

/// How one case changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChangeKind {
    /// Now a failure, and was not one (or did not exist): a regression.
    NewFailure,
    /// Was a failure, now is not.
    Fixed,
    /// Another verdict on the same side of failing, or the same failing verdict on another rule.
    Changed,
    /// Only in NEW, not failing.
    Added,
    /// Only in BASE.
    Removed,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::NewFailure => "new failure",
            ChangeKind::Fixed => "fixed",
            ChangeKind::Changed => "changed",
            ChangeKind::Added => "added",
            ChangeKind::Removed => "removed",
        }
    }
}

/// One case's change in one cell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CaseChange {
    pub kind: ChangeKind,
    pub host: String,
    pub variant: String,
    pub id: String,
    pub before: Option<Verdict>,
    pub after: Option<Verdict>,
    /// NEW's failing rule and why (BASE's for a removed case).
    pub rule: Option<String>,
    pub why: Option<String>,
}

/// A whole host x variant cell present on one side only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CellChange {
    pub host: String,
    pub variant: String,
    /// `added`, `removed`, or `lost` (NEW holds a harness error for a cell BASE had results for).
    pub kind: &'static str,
    pub message: Option<String>,
}

/// Everything that differs between two reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReportDiff {
    pub cases: Vec<CaseChange>,
    pub cells: Vec<CellChange>,
    /// Differences of kit version or corpus hash, as sentences.
    pub notes: Vec<String>,
    /// Whether a cell only in BASE (`removed`) is a regression (yes, unless `--allow-removed`).
    #[serde(skip)]
    pub removed_cell_regresses: bool,
}

impl ReportDiff {
    /// Whether NEW regressed: a new failure, or a cell that could no longer run.
    pub fn is_regression(&self) -> bool {
        self.cases
            .iter()
            .any(|change| change.kind == ChangeKind::NewFailure)
            || self.cells.iter().any(|cell| {
                cell.kind == "lost" || (cell.kind == "removed" && self.removed_cell_regresses)
            })
    }

    fn count(&self, kind: ChangeKind) -> usize {
        self.cases
            .iter()
            .filter(|change| change.kind == kind)
            .count()
    }

    /// `1 new failure, 2 fixed, 0 changed, 0 added, 0 removed`.
    pub fn summary(&self) -> String {
        let kinds = [
            ChangeKind::NewFailure,
            ChangeKind::Fixed,
            ChangeKind::Changed,
            ChangeKind::Added,
            ChangeKind::Removed,
        ];
        let parts: Vec<String> = kinds
            .iter()
            .map(|kind| {
                let count = self.count(*kind);
                let label = if *kind == ChangeKind::NewFailure && count != 1 {
                    "new failures"
                } else {
                    kind.as_str()
                };
                format!("{count} {label}")
            })
            .collect();
        parts.join(", ")
    }
}

type CellKey = (String, String);

fn cells(document: &ReportDocument) -> BTreeMap<CellKey, &SuiteReport> {
    document
        .suites
        .iter()
        .map(|suite| {
            (
                (suite.host.name.clone(), suite.runtime_variant.clone()),
                suite,
            )
        })
        .collect()
}

fn change(
    kind: ChangeKind,
    key: &CellKey,
    before: Option<&CaseResult>,
    after: Option<&CaseResult>,
) -> CaseChange {
    let detail = after.or(before);
    CaseChange {
        kind,
        host: key.0.clone(),
        variant: key.1.clone(),
        id: detail.map(|case| case.id.clone()).unwrap_or_default(),
        before: before.map(|case| case.verdict),
        after: after.map(|case| case.verdict),
        rule: detail.and_then(|case| case.rule.clone()),
        why: detail.and_then(|case| case.why.clone()),
    }
}

/// How a case present on both sides changed, if it did.
fn classify(before: &CaseResult, after: &CaseResult) -> Option<ChangeKind> {
    match (before.verdict.is_failure(), after.verdict.is_failure()) {
        (false, true) => Some(ChangeKind::NewFailure),
        (true, false) => Some(ChangeKind::Fixed),
        _ if before.verdict != after.verdict => Some(ChangeKind::Changed),
        (true, true) if before.rule != after.rule => Some(ChangeKind::Changed),
        _ => None,
    }
}

fn added(key: &CellKey, case: &CaseResult) -> CaseChange {
    let kind = if case.verdict.is_failure() {
        ChangeKind::NewFailure
    } else {
        ChangeKind::Added
    };
    change(kind, key, None, Some(case))
}

/// Compares BASE with NEW. Cases are matched by host name, variant name and case id.
pub fn diff(base: &ReportDocument, new: &ReportDocument) -> ReportDiff {
    let base_cells = cells(base);
    let new_cells = cells(new);
    let mut result = ReportDiff {
        cases: Vec::new(),
        cells: Vec::new(),
        notes: Vec::new(),
        removed_cell_regresses: true,
    };
    if base.kit_version != new.kit_version {
        result.notes.push(format!(
            "kit version {} -> {}",
            base.kit_version, new.kit_version
        ));
    }
    if base.corpus_hash != new.corpus_hash {
        result
            .notes
            .push("the corpus changed (corpus hash differs)".to_string());
    }
    let keys: BTreeSet<&CellKey> = base_cells.keys().chain(new_cells.keys()).collect();
    for key in keys {
        match (base_cells.get(key), new_cells.get(key)) {
            (Some(before), Some(after)) => {
                for case in &after.cases {
                    match before.cases.iter().find(|old| old.id == case.id) {
                        Some(old) => {
                            if let Some(kind) = classify(old, case) {
                                result.cases.push(change(kind, key, Some(old), Some(case)));
                            }
                        }
                        None => result.cases.push(added(key, case)),
                    }
                }
                for old in &before.cases {
                    if !after.cases.iter().any(|case| case.id == old.id) {
                        result
                            .cases
                            .push(change(ChangeKind::Removed, key, Some(old), None));
                    }
                }
            }
            (None, Some(after)) => {
                result.cells.push(CellChange {
                    host: key.0.clone(),
                    variant: key.1.clone(),
                    kind: "added",
                    message: None,
                });
                result.cases.extend(
                    after
                        .cases
                        .iter()
                        .filter(|case| case.verdict.is_failure())
                        .map(|case| added(key, case)),
                );
            }
            (Some(_), None) => {
                let lost = new
                    .errors
                    .iter()
                    .find(|error| error.host == key.0 && error.variant == key.1);
                result.cells.push(CellChange {
                    host: key.0.clone(),
                    variant: key.1.clone(),
                    kind: if lost.is_some() { "lost" } else { "removed" },
                    message: lost.map(|error| error.message.clone()),
                });
            }
            (None, None) => {}
        }
    }
    result
}

fn verdict_text(verdict: Option<Verdict>) -> &'static str {
    verdict.map_or("-", Verdict::as_str)
}

fn reason(change: &CaseChange) -> String {
    match (&change.rule, &change.why) {
        (Some(rule), Some(why)) => format!("{rule}: {why}"),
        (Some(rule), None) => rule.clone(),
        (None, Some(why)) => why.clone(),
        (None, None) => String::new(),
    }
}

/// Plain-text listing, one line per change, grouped by cell, then the summary.
pub fn write_text(result: &ReportDiff, out: &mut dyn Write) -> io::Result<()> {
    for note in &result.notes {
        writeln!(out, "note: {}", terminal(note))?;
    }
    for cell in &result.cells {
        let message = cell
            .message
            .as_deref()
            .map(|text| format!(": {}", terminal(text)))
            .unwrap_or_default();
        writeln!(
            out,
            "cell {} {} / {}{message}",
            cell.kind,
            terminal(&cell.host),
            terminal(&cell.variant)
        )?;
    }
    let mut current: Option<(&str, &str)> = None;
    for change in &result.cases {
        if current != Some((&change.host, &change.variant)) {
            writeln!(
                out,
                "{} / {}:",
                terminal(&change.host),
                terminal(&change.variant)
            )?;
            current = Some((&change.host, &change.variant));
        }
        let mut line = format!(
            "  {:<12} {}  {} -> {}",
            change.kind.as_str(),
            terminal(&change.id),
            verdict_text(change.before),
            verdict_text(change.after)
        );
        let why = reason(change);
        if !why.is_empty() && change.after.is_some_and(|verdict| verdict != Verdict::Pass) {
            line.push_str(&format!("  ({})", terminal(&why)));
        }
        writeln!(out, "{line}")?;
    }
    let verdict = if result.is_regression() {
        "REGRESSION"
    } else {
        "no regression"
    };
    writeln!(out, "{}: {verdict}", result.summary())
}

/// Markdown for a pull-request comment: the summary and a table of changes.
/// `--format jsonl`: one object per change (`{"change":"case",...}`, `{"change":"cell",...}`,
/// `{"change":"note","note":...}`), then `{"summary":{"regression":bool,"cases":N,"cells":N}}`.
pub fn write_jsonl(result: &ReportDiff, out: &mut dyn Write) -> io::Result<()> {
    let line = |out: &mut dyn Write, value: serde_json::Value| writeln!(out, "{value}");
    for change in &result.cases {
        let mut value = serde_json::to_value(change).map_err(io::Error::other)?;
        value["change"] = "case".into();
        line(out, value)?;
    }
    for cell in &result.cells {
        let mut value = serde_json::to_value(cell).map_err(io::Error::other)?;
        value["change"] = "cell".into();
        line(out, value)?;
    }
    for note in &result.notes {
        line(out, serde_json::json!({"change": "note", "note": note}))?;
    }
    line(
        out,
        serde_json::json!({"summary": {
            "regression": result.is_regression(),
            "cases": result.cases.len(),
            "cells": result.cells.len(),
        }}),
    )
}

pub fn write_markdown(result: &ReportDiff, out: &mut dyn Write) -> io::Result<()> {
    let verdict = if result.is_regression() {
        "**Regression**"
    } else {
        "No regression"
    };
    writeln!(
        out,
        "### dsh-conformance diff\n\n{verdict}: {}.\n",
        markdown_text(&result.summary())
    )?;
    for note in &result.notes {
        writeln!(out, "- {}", markdown_text(note))?;
    }
    for cell in &result.cells {
        let message = cell
            .message
            .as_deref()
            .map(|text| format!(": {}", markdown_text(text)))
            .unwrap_or_default();
        writeln!(
            out,
            "- cell {} {} / {}{message}",
            cell.kind,
            markdown_code(&cell.host),
            markdown_code(&cell.variant)
        )?;
    }
    if result.cases.is_empty() {
        return writeln!(out, "\nNo case changed.");
    }
    writeln!(out, "\n| change | host | variant | case | before | after | rule: why |\n|---|---|---|---|---|---|---|")?;
    for change in &result.cases {
        writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            change.kind.as_str(),
            markdown_code(&change.host),
            markdown_code(&change.variant),
            markdown_code(&change.id),
            verdict_text(change.before),
            verdict_text(change.after),
            markdown_text(&reason(change))
        )?;
    }
    Ok(())
}
