//! `report.html`: one self-contained page (inline CSS and JS, no network): totals per host x
//! variant, the cases x (hosts x variants) matrix (`html_matrix`: failures first, then by spec
//! section; a search box, a host chooser, verdict filters and a detail panel per cell, all in
//! `page.js`), and the spec-coverage table. Every piece of report text is HTML-escaped, with every
//! control, bidi and zero-width character shown as `\u{..}` ([`shown`]); the embedded data is JSON
//! with `<`, `>`, `&` and the line separators `\u`-escaped. The Content-Security-Policy loads
//! nothing and runs only the page's own script and style, by their SHA-256
//! ([`content_security_policy`]): no `'unsafe-inline'`.

use super::document::ReportDocument;
use super::html_matrix::write_matrix;
use super::markdown::verdict_columns;
use dsh_results::model::short_hash;
use dsh_results::output::escape::html;
use sha2::{Digest, Sha256};
use std::io::{self, Write};

const STYLE: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

/// Whether a character would be invisible or change how the text around it reads: controls
/// (tab and newline too), line/paragraph separators, bidi embeddings, overrides, isolates and
/// marks, zero-width and other invisible format characters, Unicode tags. page.js's `visible`
/// shows the same set (keeping tab and newline in multi-line text).
fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{AD}'
                | '\u{34F}'
                | '\u{61C}'
                | '\u{115F}'
                | '\u{1160}'
                | '\u{17B4}'
                | '\u{17B5}'
                | '\u{180B}'..='\u{180F}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{3164}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{FFF0}'..='\u{FFFB}'
                | '\u{1D173}'..='\u{1D17A}'
                | '\u{E0000}'..='\u{E007F}'
        )
}

/// Report text (a host or case name, a message) for the page's text or a `title`: HTML-escaped,
/// with every [`is_hidden`] character written as the visible text `\u{..}`, so a host named with
/// U+202E cannot reorder what a reviewer reads. Attribute values the script matches on (`id`,
/// `data-*`, `href`) keep the text itself, HTML-escaped.
pub fn shown(text: &str) -> String {
    let marked: String = text
        .chars()
        .map(|c| {
            if is_hidden(c) {
                format!("\\u{{{:x}}}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect();
    html(&marked)
}

/// The inline script element's exact text (what the CSP hash covers).
fn script_text() -> String {
    format!("\n{SCRIPT}")
}

/// The inline style element's exact text (what the CSP hash covers).
fn style_text() -> String {
    format!("\n{STYLE}")
}

/// Standard base64 (with padding) of `bytes`, as CSP hash sources spell a digest.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, byte)| n | u32::from(*byte) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A CSP hash source for an inline element's text: `'sha256-<base64>'`.
pub fn csp_hash(text: &str) -> String {
    format!("'sha256-{}'", base64(&Sha256::digest(text.as_bytes())))
}

/// The page's Content-Security-Policy: nothing is loaded from anywhere, and only the page's own
/// inline script and style run, each allowed by its SHA-256 (no `'unsafe-inline'`): markup that
/// slipped into the page could not run a script of its own.
pub fn content_security_policy() -> String {
    format!(
        "default-src 'none'; style-src {}; script-src {}; img-src data:",
        csp_hash(&style_text()),
        csp_hash(&script_text())
    )
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
            "<tr data-suite=\"{index}\"><th>{}{}</th><td>{}</td><td class=\"n\" data-total=\"cases\">{}</td>",
            shown(&suite.host.name),
            shown(&suite.dialect_note()),
            shown(&suite.runtime_variant),
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
            shown(&error.host),
            shown(&error.variant),
            columns.len() + 1,
            shown(&error.message)
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
            shown(&rule.id),
            shown(&rule.section),
            shown(&rule.text)
        )?;
        if rule.cases.is_empty() {
            write!(out, "<em>none</em>")?;
        }
        let links: Vec<String> = rule
            .cases
            .iter()
            .map(|case| {
                format!(
                    "<a href=\"#case-{}\"><code>{}</code></a>",
                    html(case),
                    shown(case)
                )
            })
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
        "<meta http-equiv=\"Content-Security-Policy\" content=\"{}\">",
        content_security_policy()
    )?;
    writeln!(
        out,
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
    )?;
    writeln!(
        out,
        "<title>dsh-conformance compatibility report</title>\n<style>{}</style></head>",
        style_text()
    )?;
    writeln!(out, "<body data-js=\"pending\">")?;
    writeln!(
        out,
        "<header><h1>dsh-conformance compatibility report</h1><p>Kit {}, corpus <code title=\"{}\">{}</code>, \
         {} case results. Click a cell for its summary, failing rule, why and transcript.</p>\
         <noscript><p>Without JavaScript the matrix is static: hover a cell for its verdict, rule and why.</p></noscript></header>",
        shown(&document.kit_version),
        shown(&document.corpus_hash),
        shown(short_hash(&document.corpus_hash)),
        document.case_count()
    )?;
    if let Some(warning) = document.corpus_warning() {
        writeln!(
            out,
            "<p class=\"corpus-warning\" role=\"alert\">{}</p>",
            shown(&warning)
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
    writeln!(out, "<script>{}</script>\n</body></html>", script_text())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty_page() -> String {
        let document = ReportDocument::new(Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut bytes = Vec::new();
        write_report_html(&document, &mut bytes).expect("written");
        String::from_utf8(bytes).expect("UTF-8")
    }

    /// The text after the first `open` up to the next `close`.
    fn between<'a>(text: &'a str, open: &str, close: &str) -> &'a str {
        let start = text.find(open).unwrap_or_else(|| panic!("no {open:?}")) + open.len();
        let end = start + text[start..].find(close).expect("closes");
        &text[start..end]
    }

    #[test]
    fn base64_spells_digests_as_csp_hash_sources_do() {
        for (bytes, expected) in [
            (&b""[..], ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg=="),
            (b"foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(bytes), expected);
        }
        assert_eq!(
            csp_hash(""),
            "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='"
        );
    }

    #[test]
    fn the_csp_runs_only_the_pages_own_script_and_style_by_their_hashes() {
        let page = empty_page();
        let csp = between(
            &page,
            "<meta http-equiv=\"Content-Security-Policy\" content=\"",
            "\"",
        );
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        let directive = |name: &str| {
            csp.split(';')
                .map(str::trim)
                .find(|directive| directive.split(' ').next() == Some(name))
                .unwrap_or_else(|| panic!("no {name} in {csp}"))
                .to_string()
        };
        assert_eq!(directive("default-src"), "default-src 'none'");
        // The inline script is the one `<script>` without attributes (the data block is JSON).
        let script = between(&page, "<script>", "</script>");
        assert!(script.contains("use strict"), "the page's script");
        assert_eq!(
            directive("script-src"),
            format!("script-src {}", csp_hash(script))
        );
        let style = between(&page, "<style>", "</style>");
        assert_eq!(
            directive("style-src"),
            format!("style-src {}", csp_hash(style))
        );
        assert_eq!(page.matches("<script>").count(), 1, "one inline script");
    }

    #[test]
    fn shown_writes_hidden_characters_visibly_and_escapes_markup() {
        assert_eq!(
            shown("host\u{202E}evil\u{200B}\u{2066}<b>\n\u{E0041}é"),
            "host\\u{202e}evil\\u{200b}\\u{2066}&lt;b&gt;\\u{a}\\u{e0041}é"
        );
    }
}
