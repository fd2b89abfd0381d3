//! Two commands over stored reports: `summary` (a quick look at a report.json, like
//! `bowtie summary`) and `merge` (the JSON results of `--shard K/N` jobs combined into one
//! document that `report`-style tools, `diff` and `summary` accept).

use super::document::{load_document, ReportDocument};
use dsh_results::model::SuiteReport;
use dsh_results::output::escape::terminal;
use dsh_results::output::{rerun_command, summary_line};
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The text `summary` prints.
pub fn write_summary(document: &ReportDocument, out: &mut dyn Write) -> std::io::Result<()> {
    for suite in &document.suites {
        writeln!(
            out,
            "{} / {}: {}",
            terminal(&suite.host.name),
            terminal(&suite.runtime_variant),
            summary_line(suite)
        )?;
    }
    for error in &document.errors {
        writeln!(
            out,
            "{} / {}: could not run: {}",
            terminal(&error.host),
            terminal(&error.variant),
            terminal(&error.message)
        )?;
    }
    for suite in &document.suites {
        for case in suite.cases.iter().filter(|case| case.verdict.is_failure()) {
            writeln!(
                out,
                "  {} {} / {}: {}  {}\n    re-run: {}",
                case.verdict.as_str(),
                terminal(&suite.host.name),
                terminal(&suite.runtime_variant),
                terminal(&case.id),
                case.why.as_deref().map_or(String::new(), terminal),
                terminal(&rerun_command(suite, &case.id))
            )?;
        }
    }
    Ok(())
}

/// Merges shard documents: suites with the same host and variant are joined (cases in id order),
/// after checking they ran the same kit and corpus and share no case. Linear in the cases (plus
/// the final sort): cells are found by key and case ids checked in a set.
pub fn merge(documents: Vec<ReportDocument>) -> Result<ReportDocument, String> {
    let mut variants = Vec::new();
    let mut cells: Vec<Cell> = Vec::new();
    let mut cell_of: HashMap<(String, String), usize> = HashMap::new();
    let mut errors = Vec::new();
    let mut rules = Vec::new();
    for document in documents {
        for variant in document.variants {
            if !variants.contains(&variant) {
                variants.push(variant);
            }
        }
        errors.extend(document.errors);
        if rules.is_empty() {
            rules = document.rules;
        }
        for suite in document.suites {
            let key = (suite.host.name.clone(), suite.runtime_variant.clone());
            match cell_of.get(&key) {
                Some(&index) => cells[index].join(suite)?,
                None => {
                    cell_of.insert(key, cells.len());
                    cells.push(Cell::new(suite));
                }
            }
        }
    }
    let suites = cells
        .into_iter()
        .map(|cell| {
            let mut suite = cell.suite;
            suite.cases.sort_by(|a, b| a.id.cmp(&b.id));
            suite
        })
        .collect();
    Ok(ReportDocument::new(variants, suites, errors, rules))
}

/// One host x variant being merged: its suite so far and the ids of its cases.
struct Cell {
    suite: SuiteReport,
    ids: HashSet<String>,
}

impl Cell {
    fn new(suite: SuiteReport) -> Cell {
        let ids = suite.cases.iter().map(|case| case.id.clone()).collect();
        Cell { suite, ids }
    }

    /// Adds another shard's suite of this cell.
    fn join(&mut self, suite: SuiteReport) -> Result<(), String> {
        let into = &mut self.suite;
        if into.corpus_hash != suite.corpus_hash || into.kit_version != suite.kit_version {
            return Err(format!(
                "the shards of {} / {} ran another corpus or kit (corpus {} vs {}, kit {} vs {}): merge only shards of one run",
                into.host.name, into.runtime_variant, into.corpus_hash, suite.corpus_hash, into.kit_version, suite.kit_version
            ));
        }
        for case in suite.cases {
            if !self.ids.insert(case.id.clone()) {
                return Err(format!(
                    "case {} of {} / {} is in two shards",
                    case.id, into.host.name, into.runtime_variant
                ));
            }
            into.cases.push(case);
        }
        into.duration_ms = into.duration_ms.max(suite.duration_ms);
        if into.host.handshake.is_null() {
            into.host.handshake = suite.host.handshake;
        }
        Ok(())
    }
}

/// `merge`: the documents at `inputs` merged and written to `out` (never through a link); the
/// merged document, or why the shards do not fit together.
pub fn merge_files(inputs: &[PathBuf], out: &Path) -> Result<ReportDocument, String> {
    let document = inputs
        .iter()
        .map(|path| load_document(path))
        .collect::<Result<Vec<_>, String>>()
        .and_then(merge)?;
    let text = serde_json::to_string_pretty(&document).map_err(|e| e.to_string())?;
    dsh_engine::files::write_file(out, format!("{text}\n").as_bytes())
        .map_err(|e| e.to_string())?;
    Ok(document)
}
