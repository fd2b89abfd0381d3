//! The matrix of `report.html`: one row per case, one column per host x variant. Host groups are
//! ordered by how many cells fail (the worst host first), the cases failing in some column come
//! first in their own group, then every other case under its spec section. Every cell and column
//! header carries its host (`data-host`) so the page's script can show one host, hide another and
//! recount; every row carries its section and its place in section order so the script can regroup.
//! Names and messages are shown with [`shown`] (hidden characters as `\u{..}`); the attributes the
//! script matches on keep the text itself.

use super::document::ReportDocument;
use super::html::shown;
use dsh_results::model::{CaseResult, Verdict};
use dsh_results::output::escape::html;
use std::collections::BTreeMap;
use std::io::{self, Write};

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

/// The verdicts the page puts first: those that fail a run, and the kit's own errors.
pub fn is_flagged(verdict: Verdict) -> bool {
    verdict.is_failure() || verdict == Verdict::Error
}

/// One column of the matrix: a host x variant, with its suite index, or the harness error.
struct Column<'a> {
    host: &'a str,
    variant: &'a str,
    suite: Option<usize>,
    error: Option<&'a str>,
}

/// Host and variant names in first-seen order (the configured variants first).
fn cell_names(document: &ReportDocument) -> (Vec<&str>, Vec<&str>) {
    let mut hosts: Vec<&str> = Vec::new();
    let mut variants: Vec<&str> = document
        .variants
        .iter()
        .map(|variant| variant.name.as_str())
        .collect();
    let cells = document
        .suites
        .iter()
        .map(|suite| (suite.host.name.as_str(), suite.runtime_variant.as_str()))
        .chain(
            document
                .errors
                .iter()
                .map(|error| (error.host.as_str(), error.variant.as_str())),
        );
    for (host, variant) in cells {
        if !hosts.contains(&host) {
            hosts.push(host);
        }
        if !variants.contains(&variant) {
            variants.push(variant);
        }
    }
    (hosts, variants)
}

/// Flagged cells of one host over all its variants.
fn host_failures(document: &ReportDocument, host: &str) -> usize {
    document
        .suites
        .iter()
        .filter(|suite| suite.host.name == host)
        .flat_map(|suite| &suite.cases)
        .filter(|case| is_flagged(case.verdict))
        .count()
}

/// The columns, host groups with the most flagged cells first (ties keep the report's order).
fn columns(document: &ReportDocument) -> Vec<Column<'_>> {
    let (mut hosts, variants) = cell_names(document);
    hosts.sort_by_key(|host| std::cmp::Reverse(host_failures(document, host)));
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

/// One case row: its id, the first result seen (summary, sections), its section and order.
struct Row<'a> {
    id: &'a str,
    first: &'a CaseResult,
    section: String,
    order: usize,
    flagged: usize,
}

/// Every case id of any suite in section order, each with its count of flagged cells.
fn rows(document: &ReportDocument) -> Vec<Row<'_>> {
    let mut by_section: BTreeMap<(u32, String), BTreeMap<&str, &CaseResult>> = BTreeMap::new();
    for case in document.suites.iter().flat_map(|suite| &suite.cases) {
        let section = case.spec.first().map_or("other", String::as_str);
        let group = by_section.entry(section_order(section)).or_default();
        group.entry(case.id.as_str()).or_insert(case);
    }
    let flagged = |id: &str| {
        document
            .suites
            .iter()
            .flat_map(|suite| &suite.cases)
            .filter(|case| case.id == id && is_flagged(case.verdict))
            .count()
    };
    by_section
        .into_iter()
        .flat_map(|((_, section), cases)| {
            cases
                .into_iter()
                .map(move |(id, first)| (section.clone(), id, first))
        })
        .enumerate()
        .map(|(order, (section, id, first))| Row {
            id,
            first,
            section,
            order,
            flagged: flagged(id),
        })
        .collect()
}

/// The search box, the host chooser and the verdict filters (filled in by the script).
fn write_controls(out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "<div id=\"controls\"><input id=\"search\" type=\"search\" placeholder=\"Search case ids and summaries\" \
         aria-label=\"Search case ids and summaries\" autocomplete=\"off\">\
         <label class=\"toggle\"><input id=\"failures-first\" type=\"checkbox\" checked> failures first</label></div>\
         <div id=\"hosts\" role=\"toolbar\" aria-label=\"Hosts shown\"></div>\
         <div id=\"filters\" role=\"toolbar\" aria-label=\"Filter rows by verdict\"></div>\
         <p id=\"shown\" aria-live=\"polite\"></p>"
    )
}

fn write_head(
    document: &ReportDocument,
    columns: &[Column<'_>],
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(
        out,
        "<thead><tr><th rowspan=\"2\" class=\"case-head\">case</th>"
    )?;
    let mut hosts: Vec<(&str, usize)> = Vec::new();
    for column in columns {
        match hosts.last_mut() {
            Some((host, span)) if *host == column.host => *span += 1,
            _ => hosts.push((column.host, 1)),
        }
    }
    for (host, span) in &hosts {
        write!(
            out,
            "<th colspan=\"{span}\" class=\"host\" data-host=\"{}\">{}</th>",
            html(host),
            shown(host)
        )?;
    }
    writeln!(out, "</tr><tr>")?;
    for column in columns {
        let title = column.suite.map_or_else(String::new, |index| {
            format!(
                " title=\"{}\"",
                shown(&dsh_results::output::secrets::display_command(
                    &document.suites[index].host.command
                ))
            )
        });
        write!(
            out,
            "<th class=\"variant\" data-host=\"{}\"{title}>{}</th>",
            html(column.host),
            shown(column.variant)
        )?;
    }
    writeln!(out, "</tr></thead>")
}

/// A group's opening: `<tbody>` and its heading row.
fn write_group(
    section: &str,
    heading: &str,
    cases: usize,
    width: usize,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(
        out,
        "<tbody data-group=\"{}\"><tr class=\"section\"><th colspan=\"{width}\"><span class=\"title\">{heading}</span> <span class=\"count\">({cases} {})</span></th></tr>",
        html(section),
        if cases == 1 { "case" } else { "cases" }
    )
}

fn section_heading(section: &str) -> String {
    if section == "other" {
        return "No spec section".to_string();
    }
    let title = section_title(section)
        .map(|title| format!(": {title}"))
        .unwrap_or_default();
    format!("Section {}{title}", shown(section))
}

fn write_row(
    document: &ReportDocument,
    columns: &[Column<'_>],
    row: &Row<'_>,
    out: &mut dyn Write,
) -> io::Result<()> {
    write!(
        out,
        "<tr class=\"case\" id=\"case-{0}\" data-case=\"{0}\" data-section=\"{1}\" data-order=\"{2}\"><th class=\"case\"><code>{3}</code><span class=\"summary\">{4}</span></th>",
        html(row.id),
        html(&row.section),
        row.order,
        shown(row.id),
        shown(&row.first.summary)
    )?;
    for column in columns {
        write_cell(document, column, row.id, out)?;
    }
    writeln!(out, "</tr>")
}

/// The matrix section: controls, then the table in its own scroll box (sticky head and first
/// column), the failing group first, then one group per spec section.
pub fn write_matrix(document: &ReportDocument, out: &mut dyn Write) -> io::Result<()> {
    let columns = columns(document);
    let width = columns.len() + 1;
    writeln!(out, "<section id=\"matrix\"><h2>Cases by spec section</h2>")?;
    write_controls(out)?;
    writeln!(
        out,
        "<div class=\"matrix-scroll\" tabindex=\"0\"><table class=\"matrix\">"
    )?;
    write_head(document, &columns, out)?;
    let rows = rows(document);
    let mut failing: Vec<&Row<'_>> = rows.iter().filter(|row| row.flagged > 0).collect();
    failing.sort_by_key(|row| (std::cmp::Reverse(row.flagged), row.order));
    write_group(
        "failing",
        "Failing in some column",
        failing.len(),
        width,
        out,
    )?;
    for row in &failing {
        write_row(document, &columns, row, out)?;
    }
    writeln!(out, "</tbody>")?;
    let mut sections: Vec<&str> = Vec::new();
    for row in &rows {
        if !sections.contains(&row.section.as_str()) {
            sections.push(&row.section);
        }
    }
    for section in sections {
        let members: Vec<&Row<'_>> = rows
            .iter()
            .filter(|row| row.section == section && row.flagged == 0)
            .collect();
        write_group(
            section,
            &section_heading(section),
            members.len(),
            width,
            out,
        )?;
        for row in members {
            write_row(document, &columns, row, out)?;
        }
        writeln!(out, "</tbody>")?;
    }
    writeln!(out, "</table></div></section>")
}

fn write_cell(
    document: &ReportDocument,
    column: &Column<'_>,
    id: &str,
    out: &mut dyn Write,
) -> io::Result<()> {
    let host = html(column.host);
    let found = column.suite.and_then(|suite_index| {
        let suite = &document.suites[suite_index];
        suite
            .cases
            .iter()
            .position(|case| case.id == id)
            .map(|case_index| (suite_index, case_index, &suite.cases[case_index]))
    });
    let Some((suite_index, case_index, case)) = found else {
        let (class, text, title) = match column.error {
            Some(message) => ("v v-not-run", "not run", shown(message)),
            None => ("v v-absent", "-", "not in this run's corpus".to_string()),
        };
        return write!(
            out,
            "<td class=\"{class}\" data-host=\"{host}\" data-verdict=\"none\" title=\"{title}\">{text}</td>"
        );
    };
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
        "<td class=\"v v-{0}{flaky}\" id=\"cell-{suite_index}-{case_index}\" data-host=\"{host}\" data-verdict=\"{0}\" \
         data-suite=\"{suite_index}\" data-index=\"{case_index}\" tabindex=\"0\" role=\"button\" title=\"{1}\">{0}</td>",
        case.verdict.as_str(),
        shown(&title)
    )
}
