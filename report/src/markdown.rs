//! `report.md`: the matrix as a pull-request comment (totals per host x variant, failing cases,
//! cells that could not run, uncovered rules), kept under a comment's size limit.

use super::document::ReportDocument;
use dsh_results::model::{short_hash, SuiteReport, Verdict};
use dsh_results::output::escape::{markdown_code, markdown_text};
use dsh_results::output::markdown::{needs_attention, rule_and_brief_why_cells};
use std::io::{self, Write};

/// At most this many failing-case rows are listed; the rest are counted and left to report.html.
pub const MAX_FAILING_ROWS: usize = 60;

/// The verdict columns worth a column: `pass` and `fail` always, others when some cell has them.
pub fn verdict_columns(suites: &[SuiteReport]) -> Vec<Verdict> {
    dsh_results::output::VERDICT_ORDER
        .iter()
        .copied()
        .filter(|verdict| {
            matches!(verdict, Verdict::Pass | Verdict::Fail)
                || suites.iter().any(|suite| suite.count(*verdict) > 0)
        })
        .collect()
}

/// Writes `report.md`.
pub fn write_report_markdown(document: &ReportDocument, out: &mut dyn Write) -> io::Result<()> {
    write_heading(document, out)?;
    write_totals(document, out)?;
    write_cell_errors(document, out)?;
    write_failing_cases(document, out)?;
    write_coverage(document, out)
}

/// The title, what was run (kit, corpus, hosts x variants), and the corpus warning if any.
fn write_heading(document: &ReportDocument, out: &mut dyn Write) -> io::Result<()> {
    let mut hosts: Vec<&str> = Vec::new();
    for suite in &document.suites {
        if !hosts.contains(&suite.host.name.as_str()) {
            hosts.push(&suite.host.name);
        }
    }
    writeln!(out, "## dsh-conformance compatibility report\n")?;
    writeln!(
        out,
        "Kit {}, corpus {}: {} host(s) x {} runtime variant(s), {} case results.\n",
        markdown_text(&document.kit_version),
        markdown_code(short_hash(&document.corpus_hash)),
        hosts.len(),
        document.variants.len(),
        document.case_count()
    )?;
    if let Some(warning) = document.corpus_warning() {
        writeln!(out, "> [!WARNING]\n> {}\n", markdown_text(&warning))?;
    }
    Ok(())
}

/// The totals table: one row per host x variant, one column per verdict worth a column.
fn write_totals(document: &ReportDocument, out: &mut dyn Write) -> io::Result<()> {
    let columns = verdict_columns(&document.suites);
    let header: Vec<&str> = columns.iter().map(|verdict| verdict.as_str()).collect();
    writeln!(out, "| host | variant | cases | {} |", header.join(" | "))?;
    writeln!(out, "|---|---|---:|{}", "---:|".repeat(columns.len()))?;
    for suite in &document.suites {
        let counts: Vec<String> = columns
            .iter()
            .map(|verdict| suite.count(*verdict).to_string())
            .collect();
        writeln!(
            out,
            "| {} | {} | {} | {} |",
            markdown_code(&suite.host.name),
            markdown_code(&suite.runtime_variant),
            suite.cases.len(),
            counts.join(" | ")
        )?;
    }
    Ok(())
}

/// The cells that could not run, when there are any.
fn write_cell_errors(document: &ReportDocument, out: &mut dyn Write) -> io::Result<()> {
    if document.errors.is_empty() {
        return Ok(());
    }
    writeln!(out, "\n### Cells that could not run\n")?;
    for error in &document.errors {
        writeln!(
            out,
            "- {} / {}: {}",
            markdown_code(&error.host),
            markdown_code(&error.variant),
            markdown_text(&error.message)
        )?;
    }
    Ok(())
}

/// The cases that need attention, at most [`MAX_FAILING_ROWS`] rows.
fn write_failing_cases(document: &ReportDocument, out: &mut dyn Write) -> io::Result<()> {
    let failing: Vec<(&SuiteReport, usize)> = document
        .suites
        .iter()
        .flat_map(|suite| {
            suite
                .cases
                .iter()
                .enumerate()
                .filter(|(_, case)| needs_attention(case))
                .map(move |(index, _)| (suite, index))
        })
        .collect();
    if failing.is_empty() {
        return writeln!(out, "\nNo failing cases.");
    }
    writeln!(out, "\n### Failing cases ({})\n", failing.len())?;
    writeln!(
        out,
        "| host | variant | case | verdict | rule | why |\n|---|---|---|---|---|---|"
    )?;
    for (suite, index) in failing.iter().take(MAX_FAILING_ROWS) {
        let case = &suite.cases[*index];
        let (rule, why) = rule_and_brief_why_cells(case);
        writeln!(
            out,
            "| {} | {} | {} | {} | {rule} | {why} |",
            markdown_code(&suite.host.name),
            markdown_code(&suite.runtime_variant),
            markdown_code(&case.id),
            case.verdict.as_str(),
        )?;
    }
    if failing.len() > MAX_FAILING_ROWS {
        writeln!(
            out,
            "\n... and {} more: see report.html or report.json.",
            failing.len() - MAX_FAILING_ROWS
        )?;
    }
    Ok(())
}

/// How many of the spec's rules have a case, and which have none.
fn write_coverage(document: &ReportDocument, out: &mut dyn Write) -> io::Result<()> {
    if document.rules.is_empty() {
        return Ok(());
    }
    let uncovered: Vec<String> = document
        .rules
        .iter()
        .filter(|rule| rule.cases.is_empty())
        .map(|rule| markdown_code(&rule.id))
        .collect();
    let covered = document.rules.len() - uncovered.len();
    write!(
        out,
        "\nSpec coverage: {covered} of {} rules have a case",
        document.rules.len()
    )?;
    if uncovered.is_empty() {
        writeln!(out, ".")
    } else {
        writeln!(out, "; uncovered: {}.", uncovered.join(", "))
    }
}
