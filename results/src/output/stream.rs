//! Live output while a suite runs: one line (table) or one JSON object (`--format jsonl`) per
//! case as it finishes, a progress line on a terminal, and the sorted summary at the end.

use super::escape::terminal;
use super::table::{rerun_command, summary_line, VERDICT_ORDER};
use crate::model::{CaseResult, SuiteReport, Verdict};
use std::io::{self, IsTerminal, Write};
use std::sync::Mutex;

/// `--color`: when verdicts are coloured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ColorChoice {
    #[default]
    Auto,
    Always,
    Never,
}

impl ColorChoice {
    /// `always` and `never` are final; `auto` asks `anstream` about stdout, as cargo's own tools
    /// do: never with `NO_COLOR` set (no-color.org), always with `CLICOLOR_FORCE`, otherwise on a
    /// terminal that supports colour.
    pub fn resolve(self) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                anstream::AutoStream::choice(&io::stdout()) != anstream::ColorChoice::Never
            }
        }
    }
}

/// A verdict's colour: green passes, bold red failures, yellow softened ones, cyan skips, bold
/// magenta for the kit's own errors.
pub fn verdict_style(verdict: Verdict) -> anstyle::Style {
    use anstyle::AnsiColor;
    match verdict {
        Verdict::Pass => AnsiColor::Green.on_default(),
        Verdict::Fail | Verdict::Xpass | Verdict::Untestable => AnsiColor::Red.on_default().bold(),
        Verdict::NonStrict | Verdict::Informational => AnsiColor::Yellow.on_default(),
        Verdict::Skipped | Verdict::Xfail | Verdict::Interrupted => AnsiColor::Cyan.on_default(),
        Verdict::Error => AnsiColor::Magenta.on_default().bold(),
    }
}

/// `label` in its verdict's colour.
pub fn painted(verdict: Verdict, label: &str) -> String {
    let style = verdict_style(verdict);
    format!("{style}{label}{style:#}")
}

/// A verdict padded to the widest one, coloured when asked.
pub fn verdict_label(verdict: Verdict, color: bool) -> String {
    let label = format!("{:13}", verdict.as_str());
    if color {
        painted(verdict, &label)
    } else {
        label
    }
}

/// How the live lines look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamStyle {
    /// `VERDICT  ID  RULE  WHY`, one line per case.
    Lines { color: bool, id_width: usize },
    /// One JSON object per case (`{"type":"case",...}`).
    Jsonl,
    /// Nothing until the end (`--format json`).
    Quiet,
}

/// Prints finished cases as they come, from any worker thread. A closed stdout (`| head`) stops
/// the printing, not the run.
pub struct LiveOutput {
    style: StreamStyle,
    host: String,
    variant: String,
    progress: indicatif::ProgressBar,
    out: Mutex<(Box<dyn Write + Send>, bool)>,
}

impl LiveOutput {
    /// `total` sizes the progress line, drawn on stderr only when stderr is a terminal.
    pub fn new(style: StreamStyle, host: &str, variant: &str, total: usize) -> LiveOutput {
        let progress = if io::stderr().is_terminal() && style != StreamStyle::Quiet {
            let bar = indicatif::ProgressBar::new(total as u64);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {pos}/{len} cases {wide_msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar.enable_steady_tick(std::time::Duration::from_millis(200));
            bar
        } else {
            indicatif::ProgressBar::hidden()
        };
        LiveOutput {
            style,
            host: host.to_string(),
            variant: variant.to_string(),
            progress,
            out: Mutex::new((Box::new(io::stdout()), true)),
        }
    }

    /// One finished case.
    pub fn case(&self, case: &CaseResult) {
        let text = match self.style {
            StreamStyle::Quiet => None,
            StreamStyle::Lines { color, id_width } => Some(format!(
                "{}  {:id_width$}  {}  {}",
                verdict_label(case.verdict, color),
                terminal(&case.id),
                case.rule
                    .as_deref()
                    .map_or_else(|| "-".to_string(), terminal),
                case.why
                    .as_deref()
                    .map_or_else(|| "-".to_string(), terminal),
            )),
            StreamStyle::Jsonl => Some(case_event(case, &self.host, &self.variant).to_string()),
        };
        if case.verdict.is_failure() {
            self.progress
                .set_message(format!("last failure: {}", terminal(&case.id)));
        }
        if let Some(text) = text {
            self.progress
                .suspend(|| self.write(&format!("{}\n", text.trim_end())));
        }
        self.progress.inc(1);
    }

    /// Writes to stdout unless an earlier write found it closed.
    pub fn write(&self, text: &str) {
        let mut guard = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let (out, open) = &mut *guard;
        if *open
            && out
                .write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .is_err()
        {
            *open = false;
        }
    }

    /// Removes the progress line.
    pub fn finish(&self) {
        self.progress.finish_and_clear();
    }
}

/// The `--format jsonl` object for one finished case: the case's result with its host and
/// variant, `"type":"case"`; a passing case's transcript is left out.
pub fn case_event(case: &CaseResult, host: &str, variant: &str) -> serde_json::Value {
    let mut value = serde_json::to_value(case).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        if case.verdict == Verdict::Pass {
            object.remove("transcript");
        }
        object.insert("type".into(), "case".into());
        object.insert("host".into(), host.into());
        object.insert("variant".into(), variant.into());
    }
    value
}

/// The last `--format jsonl` object: counts per verdict, whether the run stopped early.
pub fn summary_event(report: &SuiteReport, stopped: Option<&str>) -> serde_json::Value {
    let counts: serde_json::Map<String, serde_json::Value> = report
        .totals()
        .into_iter()
        .map(|(verdict, count)| (verdict.as_str().to_string(), count.into()))
        .collect();
    serde_json::json!({
        "type": "summary",
        "host": report.host.name,
        "variant": report.runtime_variant,
        "cases": report.cases.len(),
        "failed": report.cases.iter().filter(|case| case.verdict.is_failure()).count(),
        "counts": counts,
        "stopped": stopped,
    })
}

/// The end of a streamed table run: every case that needs a look, sorted by verdict then id,
/// each with its re-run command, then the summary line.
pub fn write_summary(report: &SuiteReport, color: bool, out: &mut dyn Write) -> io::Result<()> {
    let mut notable: Vec<&CaseResult> = report
        .cases
        .iter()
        .filter(|case| case.verdict != Verdict::Pass)
        .collect();
    let rank = |verdict: Verdict| VERDICT_ORDER.iter().position(|v| *v == verdict);
    notable.sort_by(|a, b| rank(a.verdict).cmp(&rank(b.verdict)).then(a.id.cmp(&b.id)));
    if !notable.is_empty() {
        writeln!(out, "\nSummary (not passing):")?;
    }
    for case in notable {
        let also: Vec<String> = case
            .also_broken
            .iter()
            .map(|broken| terminal(&broken.label()))
            .collect();
        let also = match also.is_empty() {
            true => String::new(),
            false => format!("  (also broken: {})", also.join(", ")),
        };
        writeln!(
            out,
            "{}  {}  {}{also}",
            verdict_label(case.verdict, color),
            terminal(&case.id),
            case.rule
                .as_deref()
                .map_or_else(|| "-".to_string(), terminal)
        )?;
        if case.verdict.is_failure() || case.verdict == Verdict::Error {
            writeln!(
                out,
                "{:13}  re-run: {}",
                "",
                terminal(&rerun_command(report, &case.id))
            )?;
        }
    }
    writeln!(out, "{}", summary_line(report))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_choice() {
        assert!(ColorChoice::Always.resolve());
        assert!(!ColorChoice::Never.resolve());
        assert_eq!(
            verdict_label(Verdict::Fail, true).trim_end(),
            "\x1b[1m\x1b[31mfail         \x1b[0m"
        );
        assert_eq!(verdict_label(Verdict::Pass, false).trim_end(), "pass");
    }
}
