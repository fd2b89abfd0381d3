//! The terminal table: one row per case (verdict, id, rule, why), a re-run command under every
//! failure, then the summary line. Plain ASCII layout; ANSI colour only when asked for.

use super::escape::{shell_quote, shell_word, terminal};
use crate::model::{short_hash, CaseResult, SuiteReport, Verdict};
use std::io::{self, Write};

/// How to draw the table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableOptions {
    /// Colour verdicts with ANSI escapes (the caller decides: a TTY, `--color always`, ...).
    pub color: bool,
}

/// The order verdicts are listed in every summary and totals table: passing kinds first, then
/// the ones that need a look, `fail` last.
pub const VERDICT_ORDER: [Verdict; 10] = [
    Verdict::Pass,
    Verdict::NonStrict,
    Verdict::Informational,
    Verdict::Skipped,
    Verdict::Interrupted,
    Verdict::Xfail,
    Verdict::Xpass,
    Verdict::Untestable,
    Verdict::Error,
    Verdict::Fail,
];

/// The one-line summary: `128 cases: 120 pass, 3 informational, 5 skipped, 0 fail`. `pass` and
/// `fail` are always shown; other verdicts only when some case has them. `fail` counts every
/// verdict that fails a run, and names the `xpass` and `untestable` among them:
/// `48 cases: 43 pass, 5 fail (5 xpass)`.
pub fn summary_line(report: &SuiteReport) -> String {
    let totals = report.totals();
    let count_of = |verdict: Verdict| {
        totals
            .iter()
            .find(|(counted, _)| *counted == verdict)
            .map_or(0, |(_, count)| *count)
    };
    let mut parts: Vec<String> = VERDICT_ORDER
        .iter()
        .filter(|verdict| !verdict.is_failure())
        .filter(|verdict| **verdict == Verdict::Pass || count_of(**verdict) > 0)
        .map(|verdict| format!("{} {}", count_of(*verdict), verdict.as_str()))
        .collect();
    let failing: usize = VERDICT_ORDER
        .iter()
        .filter(|verdict| verdict.is_failure())
        .map(|verdict| count_of(*verdict))
        .sum();
    let named: Vec<String> = [Verdict::Xpass, Verdict::Untestable]
        .iter()
        .filter(|verdict| count_of(**verdict) > 0)
        .map(|verdict| format!("{} {}", count_of(*verdict), verdict.as_str()))
        .collect();
    parts.push(if named.is_empty() {
        format!("{failing} fail")
    } else {
        format!("{failing} fail ({})", named.join(", "))
    });
    let noun = if report.cases.len() == 1 {
        "case"
    } else {
        "cases"
    };
    format!("{} {noun}: {}", report.cases.len(), parts.join(", "))
}

/// The command that re-runs one case against this report's host with its full transcript:
/// `dsh-conformance run --host '<cmd>' [--variant <name>] --case <id> --verbose`. The host
/// command is the driver's argv joined for a POSIX shell, then quoted as the single `--host`
/// argument; `--variant` appears for any variant but `default`, followed by the run's other
/// result-changing flags ([`SuiteReport::rerun_args`]: `--fixtures`, `--time-scale`,
/// `--expectations`, `--variant-env`, ...).
pub fn rerun_command(report: &SuiteReport, case_id: &str) -> String {
    if let Some(prefix) = &report.rerun_as {
        return format!("{prefix} --case {} --verbose", shell_word(case_id));
    }
    let host_command = super::secrets::display_command(&report.host.command);
    let variant = if report.runtime_variant == "default" {
        String::new()
    } else {
        format!(" --variant {}", shell_word(&report.runtime_variant))
    };
    let extra: String = super::secrets::redact_command(&report.rerun_args)
        .iter()
        .map(|arg| format!(" {}", shell_word(arg)))
        .collect();
    format!(
        "dsh-conformance run --host {}{variant}{extra} --case {} --verbose",
        shell_quote(&host_command),
        shell_word(case_id)
    )
}

fn why_column(case: &CaseResult) -> String {
    let mut why = case
        .why
        .as_deref()
        .map_or_else(|| "-".to_string(), terminal);
    if let Some(entry) = &case.interpretation {
        if case.verdict == Verdict::Informational {
            why.push_str(&format!(" [interpretation {}]", terminal(entry)));
        }
    }
    if !case.also_broken.is_empty() {
        let labels: Vec<String> = case
            .also_broken
            .iter()
            .map(|broken| terminal(&broken.label()))
            .collect();
        why.push_str(&format!(" [also broken: {}]", labels.join(", ")));
    }
    if !case.flaky.is_empty() {
        let seen: Vec<&str> = case.flaky.iter().map(|verdict| verdict.as_str()).collect();
        why.push_str(&format!(" [flaky: {}]", seen.join(", ")));
    }
    why
}

/// Writes the table, the re-run commands and the summary line.
pub fn write_table(
    report: &SuiteReport,
    options: &TableOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(
        out,
        "dsh-conformance {}: host {} ({}), runtime {}, selection sha256 {}{}",
        terminal(&report.kit_version),
        terminal(&report.host.name),
        terminal(&super::secrets::display_command(&report.host.command)),
        terminal(&report.runtime_variant),
        terminal(short_hash(&report.corpus_hash)),
        terminal(&report.dialect_note()),
    )?;
    if let Some(corpus) = &report.corpus {
        writeln!(out, "{}", terminal(&corpus.line()))?;
        if let Some(warning) = corpus.warning() {
            writeln!(out, "{}", terminal(&warning))?;
        }
    }
    let rows: Vec<(Verdict, String, String, String)> = report
        .cases
        .iter()
        .map(|case| {
            (
                case.verdict,
                terminal(&case.id),
                case.rule
                    .as_deref()
                    .map_or_else(|| "-".to_string(), terminal),
                why_column(case),
            )
        })
        .collect();
    let verdict_width = VERDICT_ORDER
        .iter()
        .map(|v| v.as_str().len())
        .max()
        .unwrap_or(0);
    let id_width = rows
        .iter()
        .map(|row| row.1.chars().count())
        .chain([4])
        .max()
        .unwrap_or(4);
    let rule_width = rows
        .iter()
        .map(|row| row.2.chars().count())
        .chain([4])
        .max()
        .unwrap_or(4);
    if !rows.is_empty() {
        writeln!(
            out,
            "{:verdict_width$}  {:id_width$}  {:rule_width$}  WHY",
            "VERDICT", "CASE", "RULE"
        )?;
    }
    for (case, (verdict, id, rule, why)) in report.cases.iter().zip(&rows) {
        let label = format!("{:verdict_width$}", verdict.as_str());
        let label = if options.color {
            super::stream::painted(*verdict, &label)
        } else {
            label
        };
        let line = format!("{label}  {id:id_width$}  {rule:rule_width$}  {why}");
        writeln!(out, "{}", line.trim_end())?;
        if case.verdict.is_failure() || case.verdict == Verdict::Error {
            let rerun = terminal(&rerun_command(report, &case.id));
            writeln!(out, "{:verdict_width$}  re-run: {rerun}", "")?;
        }
    }
    for line in report.judged_lines() {
        writeln!(out, "{}", terminal(&line))?;
    }
    writeln!(out, "{}", summary_line(report))
}
