//! Markdown for a CI step summary: a totals table, then every case that needs attention with its
//! rule and why, and the commands that re-run them.

use super::escape::{longest_backtick_run, markdown_code, markdown_text, terminal};
use super::table::{rerun_command, summary_line};
use crate::model::{short_hash, CaseResult, SuiteReport, Verdict};
use std::io::{self, Write};

/// Whether a case belongs in the "needs attention" list: it fails the run, or the kit broke on it.
pub fn needs_attention(case: &CaseResult) -> bool {
    case.verdict.is_failure() || case.verdict == Verdict::Error
}

/// A case's `rule` and `why` as Markdown table cells (`-` when absent); the why cell then lists
/// every other rule the case broke, a line each (`rule` (strict): why).
pub fn rule_and_why_cells(case: &CaseResult) -> (String, String) {
    cells(case, true)
}

/// [`rule_and_why_cells`] naming the other broken rules without their whys, on one line (a
/// pull-request comment has a size limit).
pub fn rule_and_brief_why_cells(case: &CaseResult) -> (String, String) {
    cells(case, false)
}

fn cells(case: &CaseResult, with_whys: bool) -> (String, String) {
    let mut why = case
        .why
        .as_deref()
        .map_or_else(|| "-".to_string(), markdown_text);
    let strictness = |interpretation: &Option<String>| match interpretation {
        None => "strict".to_string(),
        Some(entry) => format!("informational, {entry}"),
    };
    if with_whys {
        for broken in &case.also_broken {
            why.push_str(&format!(
                "<br>also broken: {} ({}): {}",
                markdown_code(&broken.rule),
                markdown_text(&strictness(&broken.interpretation)),
                markdown_text(&broken.why)
            ));
        }
    } else if !case.also_broken.is_empty() {
        let labels: Vec<String> = case
            .also_broken
            .iter()
            .map(|broken| {
                format!(
                    "{} ({})",
                    markdown_code(&broken.rule),
                    markdown_text(&strictness(&broken.interpretation))
                )
            })
            .collect();
        why.push_str(&format!("<br>also broken: {}", labels.join(", ")));
    }
    (
        case.rule
            .as_deref()
            .map_or_else(|| "-".to_string(), markdown_code),
        why,
    )
}

/// A fenced code block holding `lines` literally, its fence longer than any backtick run inside.
pub fn code_block(lines: &[String]) -> String {
    let longest_run = lines
        .iter()
        .map(|line| longest_backtick_run(line))
        .max()
        .unwrap_or(0);
    let fence = "`".repeat(longest_run.max(2) + 1);
    let mut block = format!("{fence}sh\n");
    for line in lines {
        block.push_str(&terminal(line));
        block.push('\n');
    }
    block.push_str(&fence);
    block.push('\n');
    block
}

/// Writes the step summary of one suite.
pub fn write_markdown(report: &SuiteReport, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "### dsh-conformance: {} / {}\n",
        markdown_code(&report.host.name),
        markdown_code(&report.runtime_variant)
    )?;
    writeln!(
        out,
        "Host command {}, kit {}, selection sha256 {}{}.\n",
        markdown_code(&super::secrets::display_command(&report.host.command)),
        markdown_text(&report.kit_version),
        markdown_code(short_hash(&report.corpus_hash)),
        markdown_text(&report.dialect_note())
    )?;
    if let Some(corpus) = &report.corpus {
        match corpus.warning() {
            Some(warning) => writeln!(out, "> [!WARNING]\n> {}\n", markdown_text(&warning))?,
            None => writeln!(out, "{}\n", markdown_text(&corpus.line()))?,
        }
    }
    writeln!(out, "**{}**\n", markdown_text(&summary_line(report)))?;
    for line in report.judged_lines() {
        writeln!(out, "- {}", markdown_text(&line))?;
    }
    writeln!(out)?;
    writeln!(out, "| verdict | cases |\n|---|---:|")?;
    let totals = report.totals();
    for verdict in super::VERDICT_ORDER {
        if let Some((_, count)) = totals.iter().find(|(counted, _)| *counted == verdict) {
            writeln!(out, "| {} | {count} |", verdict.as_str())?;
        }
    }
    let attention: Vec<&CaseResult> = report
        .cases
        .iter()
        .filter(|case| needs_attention(case))
        .collect();
    if attention.is_empty() {
        return writeln!(out, "\nNo failing cases.");
    }
    writeln!(out, "\n#### Failing cases ({})\n", attention.len())?;
    writeln!(
        out,
        "| case | verdict | blame | rule | why |\n|---|---|---|---|---|"
    )?;
    for case in &attention {
        let (rule, why) = rule_and_why_cells(case);
        writeln!(
            out,
            "| {} | {} | {} | {rule} | {why} |",
            markdown_code(&case.id),
            case.verdict.as_str(),
            match case.blame {
                crate::model::Blame::None => "-",
                blame => super::blame_name(blame),
            },
        )?;
    }
    let commands: Vec<String> = attention
        .iter()
        .map(|case| rerun_command(report, &case.id))
        .collect();
    writeln!(
        out,
        "\n<details><summary>Re-run a failing case with its transcript</summary>\n"
    )?;
    write!(out, "{}", code_block(&commands))?;
    writeln!(out, "\n</details>")
}
