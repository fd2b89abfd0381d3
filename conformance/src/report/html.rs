//! `report.html`: one self-contained page (inline CSS and JS, no network): totals per host x
//! variant, the cases x (hosts x variants) matrix grouped by spec section with a detail panel per
//! cell, and the spec-coverage table. Every piece of report text is HTML-escaped; the embedded
//! data is JSON with `<`, `>`, `&` and the line separators `\u`-escaped.

use super::document::ReportDocument;
use super::markdown::verdict_columns;
use crate::model::{short_hash, CaseResult};
use crate::output::escape::{html, shell_join};
use std::collections::BTreeMap;
use std::io::{self, Write};

const STYLE: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

/// The spec's section titles (deepseek-harness-profile-adapter.md), for the matrix groups.
fn section_title(section: &str) -> Option<&'static str> {
    Some(match section {
        "1" => "Product outcome",
        "2" => "Ownership boundary",
        "3" => "Why an OpenDesign profile bundle is needed",
        "4" => "Delivery and installation model",
        "5" => "Profile discovery and compatibility",
        "6" => "Versioned stdio protocol",
        "7" => "Session and process lifecycle",
        "8" => "Prompt and artifact contract",
        "9" => "Event normalization",
        "10" => "Cancellation and cleanup",
        "11" => "Credentials",
        "12" => "Models and MCP",
        "13" => "Platform ownership",
        "14" => "Security requirements",
        "15" => "Evidence and reference implementation",
        "16" => "Final acceptance",
        _ => return None,
    })
}

/// Orders sections numerically (`5` < `10`), non-numeric ones after, by name.
fn section_order(section: &str) -> (u32, String) {
    let number = section
        .split('.')
        .next()
        .and_then(|major| major.parse().ok())
        .unwrap_or(u32::MAX);
    (number, section.to_string())
}

/// One column of the matrix: a host x variant, with its suite index, or the harness error.
struct Column<'a> {
    host: &'a str,
    variant: &'a str,
    suite: Option<usize>,
    error: Option<&'a str>,
}

fn columns(document: &ReportDocument) -> Vec<Column<'_>> {
    let mut hosts: Vec<&str> = Vec::new();
    let mut variants: Vec<&str> = document
        .variants
        .iter()
        .map(|variant| variant.name.as_str())
        .collect();
    let cell_names = document
        .suites
        .iter()
        .map(|suite| (suite.host.name.as_str(), suite.runtime_variant.as_str()))
        .chain(
            document
                .errors
                .iter()
                .map(|error| (error.host.as_str(), error.variant.as_str())),
        );
    for (host, variant) in cell_names {
        if !hosts.contains(&host) {
            hosts.push(host);
        }
        if !variants.contains(&variant) {
            variants.push(variant);
        }
    }
    let mut columns = Vec::new();
    for host in &hosts {
        for variant in &variants {
            let suite = document
                .suites
                .iter()
                .position(|suite| suite.host.name == *host && suite.runtime_variant == *variant);
            let error = document
                .errors
                .iter()
                .find(|error| error.host == *host && error.variant == *variant)
                .map(|error| error.message.as_str());
            if suite.is_some() || error.is_some() {
                columns.push(Column {
                    host,
                    variant,
                    suite,
                    error,
                });
            }
        }
    }
    columns
}

/// Every case id of any suite, with the first result seen (for its summary and sections).
fn case_rows(document: &ReportDocument) -> BTreeMap<(u32, String), BTreeMap<&str, &CaseResult>> {
    let mut rows: BTreeMap<(u32, String), BTreeMap<&str, &CaseResult>> = BTreeMap::new();
    for case in document.suites.iter().flat_map(|suite| &suite.cases) {
        let section = case.spec.first().map_or("other", String::as_str);
        let group = rows.entry(section_order(section)).or_default();
        group.entry(case.id.as_str()).or_insert(case);
    }
    rows
}

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

fn write_matrix(document: &ReportDocument, out: &mut dyn Write) -> io::Result<()> {
    let columns = columns(document);
    writeln!(out, "<section id=\"matrix\"><h2>Cases by spec section</h2>")?;
    writeln!(
        out,
        "<div id=\"filters\" role=\"toolbar\" aria-label=\"Filter rows by verdict\"></div>\
         <p id=\"shown\" aria-live=\"polite\"></p>"
    )?;
    writeln!(
        out,
        "<table class=\"matrix\"><thead><tr><th rowspan=\"2\" class=\"case-head\">case</th>"
    )?;
    let mut hosts: Vec<(&str, usize)> = Vec::new();
    for column in &columns {
        match hosts.last_mut() {
            Some((host, span)) if *host == column.host => *span += 1,
            _ => hosts.push((column.host, 1)),
        }
    }
    for (host, span) in &hosts {
        write!(
            out,
            "<th colspan=\"{span}\" class=\"host\">{}</th>",
            html(host)
        )?;
    }
    writeln!(out, "</tr><tr>")?;
    for column in &columns {
        let title = column.suite.map_or_else(String::new, |index| {
            format!(
                " title=\"{}\"",
                html(&shell_join(&document.suites[index].host.command))
            )
        });
        write!(
            out,
            "<th class=\"variant\"{title}>{}</th>",
            html(column.variant)
        )?;
    }
    writeln!(out, "</tr></thead>")?;
    for ((_, section), cases) in case_rows(document) {
        let title = section_title(&section)
            .map(|title| format!(": {title}"))
            .unwrap_or_default();
        let heading = if section == "other" {
            "No spec section".to_string()
        } else {
            format!("Section {}{title}", html(&section))
        };
        writeln!(
            out,
            "<tbody data-section=\"{}\"><tr class=\"section\"><th colspan=\"{}\">{heading} <span class=\"count\">({} {})</span></th></tr>",
            html(&section),
            columns.len() + 1,
            cases.len(),
            if cases.len() == 1 { "case" } else { "cases" }
        )?;
        for (id, first) in cases {
            write!(
                out,
                "<tr class=\"case\" id=\"case-{0}\" data-case=\"{0}\"><th class=\"case\"><code>{0}</code><span class=\"summary\">{1}</span></th>",
                html(id),
                html(&first.summary)
            )?;
            for column in &columns {
                write_cell(document, column, id, out)?;
            }
            writeln!(out, "</tr>")?;
        }
        writeln!(out, "</tbody>")?;
    }
    writeln!(out, "</table></section>")
}

fn write_cell(
    document: &ReportDocument,
    column: &Column<'_>,
    id: &str,
    out: &mut dyn Write,
) -> io::Result<()> {
    let found = column.suite.and_then(|suite_index| {
        let suite = &document.suites[suite_index];
        suite
            .cases
            .iter()
            .position(|case| case.id == id)
            .map(|case_index| (suite_index, case_index, &suite.cases[case_index]))
    });
    match found {
        Some((suite_index, case_index, case)) => {
            let mut title = case.verdict.as_str().to_string();
            if let Some(rule) = &case.rule {
                title.push_str(&format!(": {rule}"));
            }
            if let Some(why) = &case.why {
                title.push_str(&format!(": {why}"));
            }
            let flaky = if case.flaky.is_empty() { "" } else { " flaky" };
            write!(
                out,
                "<td class=\"v v-{0}{flaky}\" id=\"cell-{suite_index}-{case_index}\" data-verdict=\"{0}\" data-suite=\"{suite_index}\" data-index=\"{case_index}\" \
                 tabindex=\"0\" role=\"button\" title=\"{1}\">{0}</td>",
                case.verdict.as_str(),
                html(&title)
            )
        }
        None => {
            let (class, text, title) = match column.error {
                Some(message) => ("v v-not-run", "not run", html(message)),
                None => ("v v-absent", "-", "not in this run's corpus".to_string()),
            };
            write!(
                out,
                "<td class=\"{class}\" data-verdict=\"none\" title=\"{title}\">{text}</td>"
            )
        }
    }
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
