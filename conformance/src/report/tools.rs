//! Two commands over stored reports: `summary` (a quick look at a report.json, like
//! `bowtie summary`) and `merge` (the JSON results of `--shard K/N` jobs combined into one
//! document that `report`-style tools, `diff` and `summary` accept).

use super::document::{load_document, ReportDocument};
use crate::model::SuiteReport;
use crate::output::escape::terminal;
use crate::output::{rerun_command, summary_line};
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
/// after checking they ran the same kit and corpus and share no case.
pub fn merge(documents: Vec<ReportDocument>) -> Result<ReportDocument, String> {
    let mut variants = Vec::new();
    let mut suites: Vec<SuiteReport> = Vec::new();
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
            join_suite(&mut suites, suite)?;
        }
    }
    for suite in &mut suites {
        suite.cases.sort_by(|a, b| a.id.cmp(&b.id));
    }
    Ok(ReportDocument::new(variants, suites, errors, rules))
}

fn join_suite(suites: &mut Vec<SuiteReport>, suite: SuiteReport) -> Result<(), String> {
    let Some(into) = suites.iter_mut().find(|known| {
        known.host.name == suite.host.name && known.runtime_variant == suite.runtime_variant
    }) else {
        suites.push(suite);
        return Ok(());
    };
    if into.corpus_hash != suite.corpus_hash || into.kit_version != suite.kit_version {
        return Err(format!(
            "the shards of {} / {} ran another corpus or kit (corpus {} vs {}, kit {} vs {}): merge only shards of one run",
            into.host.name, into.runtime_variant, into.corpus_hash, suite.corpus_hash, into.kit_version, suite.kit_version
        ));
    }
    for case in suite.cases {
        if into.cases.iter().any(|known| known.id == case.id) {
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
            crate::output::file::write_file(&args.out, format!("{text}\n").as_bytes())
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
