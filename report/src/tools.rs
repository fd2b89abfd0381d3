//! Two commands over stored reports: `summary` (a quick look at a report.json, like
//! `bowtie summary`) and `merge` (the JSON results of `--shard K/N` jobs combined into one
//! document that `report`-style tools, `diff` and `summary` accept).

use super::document::{load_document, ReportDocument};
use dsh_results::model::SuiteReport;
use dsh_results::output::escape::terminal;
use dsh_results::output::{rerun_command, summary_line};
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// `dsh-conformance summary REPORT.json`.
#[derive(Debug, clap::Args)]
pub struct SummaryArgs {
    /// A report.json, or one suite from `run --format json`.
    #[arg(value_name = "REPORT.json")]
    pub report: PathBuf,
}

/// `dsh-conformance merge --out OUT.json SHARD.json...`.
#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The shards' results (report.json or `run --json` files).
    #[arg(value_name = "SHARD.json", required = true)]
    pub inputs: Vec<PathBuf>,
    /// Where to write the merged report.json.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

/// Prints one line per host x variant (its summary line), the cells that could not run, and
/// every failing case with its re-run command. Exit 1 when a case fails a run, 2 when the file
/// is unreadable or invalid, else 0.
pub fn summary_main(args: SummaryArgs) -> ExitCode {
    let document = match load_document(&args.report) {
        Ok(document) => document,
        Err(message) => {
            eprintln!("dsh-conformance summary: {message}");
            return ExitCode::from(2);
        }
    };
    let mut out = std::io::stdout().lock();
    let written = write_summary(&document, &mut out);
    if let Err(error) = written.and_then(|()| out.flush()) {
        if error.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("dsh-conformance summary: cannot write: {error}");
            return ExitCode::from(2);
        }
    }
    ExitCode::from(u8::from(document.has_failures()))
}

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

/// `merge`: exit 0 when written, 2 when an input is invalid or the shards do not fit together.
pub fn merge_main(args: MergeArgs) -> ExitCode {
    let merged = args
        .inputs
        .iter()
        .map(|path| load_document(path))
        .collect::<Result<Vec<_>, String>>()
        .and_then(merge)
        .and_then(|document| {
            let text = serde_json::to_string_pretty(&document).map_err(|e| e.to_string())?;
            dsh_engine::files::write_file(&args.out, format!("{text}\n").as_bytes())
                .map_err(|e| e.to_string())?;
            Ok(document)
        });
    match merged {
        Ok(document) => {
            let cases: usize = document.suites.iter().map(|suite| suite.cases.len()).sum();
            eprintln!(
                "dsh-conformance merge: wrote {} ({} cells, {cases} cases)",
                args.out.display(),
                document.suites.len()
            );
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("dsh-conformance merge: {message}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A suite of `host` holding the cases `ids`.
    fn shard(host: &str, ids: &[String]) -> ReportDocument {
        let cases: Vec<_> = ids
            .iter()
            .map(|id| {
                json!({"id": id, "summary": "s", "spec": ["5"], "rules": [], "verdict": "pass",
                       "blame": "none", "rule": null, "why": null, "interpretation": null,
                       "duration_ms": 1, "transcript": []})
            })
            .collect();
        let suite = json!({"kit_version": "0.1.0", "corpus_hash": "ab", "runtime_variant": "default",
            "host": {"name": host, "command": [host], "handshake": null},
            "cases": cases, "duration_ms": 5});
        ReportDocument::from_suite(serde_json::from_value(suite).unwrap())
    }

    fn ids(range: impl Iterator<Item = usize>) -> Vec<String> {
        range.map(|n| format!("case.{n:05}")).collect()
    }

    #[test]
    fn interleaved_shards_of_two_hosts_join_per_cell_in_id_order() {
        let merged = merge(vec![
            shard("a", &ids((1..2000).step_by(2))),
            shard("b", &ids(0..3)),
            shard("a", &ids((0..2000).step_by(2))),
        ])
        .unwrap();
        assert_eq!(merged.suites.len(), 2);
        let cases: Vec<&str> = merged.suites[0]
            .cases
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        assert_eq!(cases, ids(0..2000));
        assert_eq!(merged.suites[1].host.name, "b");
    }

    #[test]
    fn a_case_in_two_shards_is_refused_by_name() {
        let error = merge(vec![shard("a", &ids(0..500)), shard("a", &ids(499..600))]).unwrap_err();
        assert_eq!(error, "case case.00499 of a / default is in two shards");
    }
}
