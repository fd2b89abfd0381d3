//! `report.html`: one self-contained page (inline CSS and JS, no network): totals per host x
//! variant, the cases x (hosts x variants) matrix (`html_matrix`: failures first, then by spec
//! section; a search box, a host chooser, verdict filters and a detail panel per cell, all in
//! `page.js`), and the spec-coverage table. Every piece of report text is HTML-escaped; the embedded
//! data is JSON with `<`, `>`, `&` and the line separators `\u`-escaped.

use super::document::ReportDocument;
use super::html_matrix::write_matrix;
use super::markdown::verdict_columns;
use dsh_results::model::short_hash;
use dsh_results::output::escape::html;
use std::io::{self, Write};

const STYLE: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

/// The report data for the page's script, safe inside a `<script>` element.
fn embedded_json(document: &ReportDocument) -> String {
    let json = serde_json::to_string(document).unwrap_or_else(|_| "{}".to_string());
    json.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

fn write_totals(document: &ReportDocument, out: &mut dyn Write) -> io::Result<()> {
    let columns = verdict_columns(&document.suites);
    writeln!(
        out,
        "<section id=\"totals\"><h2>Totals per host and runtime variant</h2>"
    )?;
    writeln!(
        out,
        "<table class=\"totals\"><thead><tr><th>host</th><th>variant</th><th>cases</th>"
    )?;
    for verdict in &columns {
        writeln!(out, "<th class=\"v-{0}\">{0}</th>", verdict.as_str())?;
    }
    writeln!(out, "</tr></thead><tbody>")?;
    for (index, suite) in document.suites.iter().enumerate() {
        write!(
            out,
            "<tr data-suite=\"{index}\"><th>{}</th><td>{}</td><td class=\"n\" data-total=\"cases\">{}</td>",
            html(&suite.host.name),
            html(&suite.runtime_variant),
            suite.cases.len()
        )?;
        for verdict in &columns {
            let n = suite.count(*verdict);
            let class = if n > 0 {
                format!("n v-{}", verdict.as_str())
            } else {
                "n zero".to_string()
            };
            write!(
                out,
                "<td class=\"{class}\" data-total=\"{}\">{n}</td>",
                verdict.as_str()
            )?;
        }
        writeln!(out, "</tr>")?;
    }
    for error in &document.errors {
        writeln!(
            out,
            "<tr class=\"could-not-run\"><th>{}</th><td>{}</td><td colspan=\"{}\">could not run: {}</td></tr>",
            html(&error.host),
            html(&error.variant),
            columns.len() + 1,
            html(&error.message)
        )?;
    }
    writeln!(out, "</tbody></table></section>")
}

fn write_coverage(document: &ReportDocument, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "<section id=\"coverage\"><h2>Spec coverage</h2>")?;
    if document.rules.is_empty() {
        return writeln!(
            out,
            "<p>No rule catalog (fixtures/rules.json) was available.</p></section>"
        );
    }
    let uncovered = document
        .rules
        .iter()
        .filter(|rule| rule.cases.is_empty())
        .count();
    writeln!(
        out,
        "<p><span id=\"rules-covered\">{}</span> of {} rules have at least one case; {uncovered} uncovered.</p>",
        document.rules.len() - uncovered,
        document.rules.len()
    )?;
    writeln!(
        out,
        "<table class=\"coverage\"><thead><tr><th>rule</th><th>section</th><th>text</th><th>cases</th></tr></thead><tbody>"
    )?;
    for rule in &document.rules {
        let class = if rule.cases.is_empty() {
            " class=\"uncovered\""
        } else {
            ""
        };
        write!(
            out,
            "<tr{class}><th><code>{}</code></th><td>{}</td><td>{}</td><td>",
            html(&rule.id),
            html(&rule.section),
            html(&rule.text)
        )?;
        if rule.cases.is_empty() {
            write!(out, "<em>none</em>")?;
        }
        let links: Vec<String> = rule
            .cases
            .iter()
            .map(|case| format!("<a href=\"#case-{0}\"><code>{0}</code></a>", html(case)))
            .collect();
        writeln!(out, "{}</td></tr>", links.join(" "))?;
    }
    writeln!(out, "</tbody></table></section>")
}

/// Writes the whole page.
pub fn write_report_html(document: &ReportDocument, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    )?;
    writeln!(
        out,
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">"
    )?;
    writeln!(
        out,
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
    )?;
    writeln!(
        out,
        "<title>dsh-conformance compatibility report</title>\n<style>\n{STYLE}</style></head>"
    )?;
    writeln!(out, "<body data-js=\"pending\">")?;
    writeln!(
        out,
        "<header><h1>dsh-conformance compatibility report</h1><p>Kit {}, corpus <code title=\"{}\">{}</code>, \
         {} case results. Click a cell for its summary, failing rule, why and transcript.</p>\
         <noscript><p>Without JavaScript the matrix is static: hover a cell for its verdict, rule and why.</p></noscript></header>",
        html(&document.kit_version),
        html(&document.corpus_hash),
        html(short_hash(&document.corpus_hash)),
        document.case_count()
    )?;
    if let Some(warning) = document.corpus_warning() {
        writeln!(
            out,
            "<p class=\"corpus-warning\" role=\"alert\">{}</p>",
            html(&warning)
        )?;
    }
    writeln!(out, "<main>")?;
    write_totals(document, out)?;
    write_matrix(document, out)?;
    write_coverage(document, out)?;
    writeln!(out, "</main>")?;
    writeln!(
        out,
        "<aside id=\"detail\" hidden aria-live=\"polite\"><button type=\"button\" id=\"detail-close\" aria-label=\"Close\">&times;</button><div id=\"detail-body\"></div></aside>"
    )?;
    writeln!(
        out,
        "<script id=\"report-data\" type=\"application/json\">{}</script>",
        embedded_json(document)
    )?;
    writeln!(out, "<script>\n{SCRIPT}</script>\n</body></html>")
}
