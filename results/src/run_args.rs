//! The `run` command's options, shared by the host corpus and the client corpus (one grammar
//! for every surface), with what every run does the same way once its cases are judged: the exit
//! code and the outputs (stdout in the chosen format, `--junit`, `--markdown`, `--json`).

use crate::model::{SuiteReport, Verdict};
use crate::output::Format;
use std::io::Write;
use std::path::PathBuf;

/// Exit codes of `run`.
pub const EXIT_OK: u8 = 0;
pub const EXIT_FAILURES: u8 = 1;
pub const EXIT_HARNESS: u8 = 2;
pub const EXIT_NOTHING_MEASURED: u8 = 3;

/// The `run` flags, boxed so the CLI's subcommand enum stays small.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub flags: Box<Flags>,
}

#[derive(Debug, clap::Args)]
pub struct Flags {
    /// The host driver's command line, split like a shell would (default: dsh-host-driver next to
    /// this executable).
    #[arg(help_heading = "Host and runtime")]
    #[arg(long, value_name = "COMMAND")]
    pub host: Option<String>,
    /// One more argument of the host command (repeatable; alone it builds the whole command).
    #[arg(help_heading = "Host and runtime")]
    #[arg(long = "host-arg", allow_hyphen_values = true, value_name = "ARG")]
    pub host_args: Vec<String>,
    /// The host's name in reports.
    #[arg(help_heading = "Host and runtime")]
    #[arg(long, value_name = "NAME")]
    pub host_name: Option<String>,
    /// The fixtures dir (default: $DSH_CONFORMANCE_FIXTURES, else the nearest fixtures/ holding
    /// rules.json from the cwd up, else the corpus embedded in this binary).
    #[arg(help_heading = "Selection")]
    #[arg(long, value_name = "DIR")]
    pub fixtures: Option<PathBuf>,
    /// Run the corpus embedded in this binary, whatever $DSH_CONFORMANCE_FIXTURES or a fixtures/
    /// dir nearby says (a CI gate's choice: no stray file can swap the corpus).
    #[arg(help_heading = "Selection")]
    #[arg(long, conflicts_with = "fixtures")]
    pub embedded_corpus: bool,
    /// Select cases whose id matches this glob (`*`, `?`; repeatable).
    #[arg(help_heading = "Selection")]
    #[arg(long = "case", value_name = "PATTERN")]
    pub cases: Vec<String>,
    /// Select cases exercising this spec section (repeatable).
    #[arg(help_heading = "Selection")]
    #[arg(long = "section", value_name = "SECTION")]
    pub sections: Vec<String>,
    /// Leave out cases whose id matches this glob (repeatable).
    #[arg(help_heading = "Selection")]
    #[arg(long = "skip", value_name = "PATTERN")]
    pub skip: Vec<String>,
    /// Run only shard K of N (`--shard 2/4`): a deterministic split balanced by expected wait.
    #[arg(help_heading = "Selection")]
    #[arg(long, value_name = "K/N")]
    pub shard: Option<dsh_engine::selection::Shard>,
    /// Print the selected cases and exit (`--format json` for a JSON array).
    #[arg(help_heading = "Selection")]
    #[arg(long)]
    pub list: bool,
    /// Start no new case after the first one that fails the run.
    #[arg(help_heading = "Timing")]
    #[arg(long)]
    pub fail_fast: bool,
    /// Cases run in parallel (default: the core count).
    #[arg(help_heading = "Timing")]
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Multiply every timeout by this factor (slow CI machines): a finite number above 0, at
    /// most 100.
    #[arg(help_heading = "Timing")]
    #[arg(
        long,
        default_value_t = 1.0,
        value_name = "FACTOR",
        allow_negative_numbers = true,
        value_parser = parse_time_scale
    )]
    pub time_scale: f64,
    /// Run the selection N times; cases whose verdicts differ are reported flaky (fail).
    #[arg(help_heading = "Timing")]
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub verify: usize,
    /// Start the driver afresh for every case, even when it claims `reuse` (one driver per worker)
    #[arg(help_heading = "Host and runtime")]
    #[arg(long)]
    pub driver_per_case: bool,
    /// The host's expectations file: {"v":1,"xfail":{"case.id":"reason"}}.
    #[arg(help_heading = "Host and runtime")]
    #[arg(long, value_name = "FILE")]
    pub expectations: Option<PathBuf>,
    /// Write an expectations file listing the current failures.
    #[arg(help_heading = "Output")]
    #[arg(long, value_name = "FILE")]
    pub write_expectations: Option<PathBuf>,
    /// stdout format: a live table, one JSON document at the end, or one JSON object per
    /// finished case (jsonl) and a summary object.
    #[arg(help_heading = "Output")]
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Colour verdicts: auto (a terminal, unless NO_COLOR is set), always, never.
    #[arg(help_heading = "Output")]
    #[arg(long, value_enum, default_value_t = crate::output::stream::ColorChoice::Auto)]
    pub color: crate::output::stream::ColorChoice,
    /// Also write JUnit XML here.
    #[arg(help_heading = "Output")]
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Also write a Markdown summary here.
    #[arg(help_heading = "Output")]
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Also write the JSON report here.
    #[arg(help_heading = "Output")]
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Print every case's full transcript (driver messages in and out, the journal).
    #[arg(help_heading = "Output")]
    #[arg(long)]
    pub verbose: bool,
    /// How re-run lines start instead of `dsh-conformance run --host HOST ...` (a wrapper such as
    /// `cargo xtask suite` that passes the rest itself).
    #[arg(long, value_name = "COMMAND", hide = true)]
    pub rerun_as: Option<String>,
    /// The fake-dsh binary (default: $FAKE_DSH_BIN, else next to this executable).
    #[arg(help_heading = "Host and runtime")]
    #[arg(long, value_name = "PATH")]
    pub fake_dsh: Option<PathBuf>,
    /// The runtime variant's name (`dsh-<version>` sets `FAKE_DSH_VERSION=<version>`).
    #[arg(help_heading = "Host and runtime")]
    #[arg(long, value_name = "NAME")]
    pub variant: Option<String>,
    /// The dialect the host is judged by (docs/dialects.md): `opendesign` (generation 1 as
    /// written) or `multica` (Multica's Go daemon: the `multica` profile, its relaxed rules and
    /// policies, each with its source).
    #[arg(help_heading = "Host and runtime")]
    #[arg(long, value_name = "NAME", default_value = "opendesign")]
    pub dialect: String,
    /// Extra env for fake-dsh in this variant, KEY=VALUE (repeatable).
    #[arg(help_heading = "Host and runtime")]
    #[arg(long = "variant-env", value_name = "KEY=VALUE")]
    pub variant_env: Vec<String>,
    /// Pass this variable of the caller's environment to the driver (`NAME` or `PREFIX*`,
    /// repeatable); besides these the driver gets only PATH, HOME, the user, locale, TZ, TMPDIR,
    /// TERM and what the harness sets (docs/host-driver.md, "Environment").
    #[arg(help_heading = "Host and runtime")]
    #[arg(long = "pass-env", value_name = "NAME")]
    pub pass_env: Vec<String>,
    /// What `--host` is: an open-design host driver (the fixture corpus), or a client of the SDK
    /// runtime (`sdk`) or of `headless` (the client corpus of docs/sdk-clients.md).
    #[arg(help_heading = "Host and runtime")]
    #[arg(long, value_enum, default_value_t = Surface::OpenDesign)]
    pub surface: Surface,
    /// A capability the client lacks (`--surface sdk|headless`, repeatable): the client cases
    /// that require it are skipped (e.g. `background-subagents`).
    #[arg(help_heading = "Host and runtime")]
    #[arg(long = "client-lacks", value_name = "CAPABILITY")]
    pub client_lacks: Vec<String>,
    /// With `--surface sdk`: the runtime generation fake-dsh plays, `0.1.5` (`dsh --profile sdk`,
    /// the default) or `0.1.1` (the `dsh-jsonrpc-agent` binary).
    #[arg(help_heading = "Host and runtime")]
    #[arg(long = "runtime-persona", value_name = "VERSION")]
    pub runtime_persona: Option<String>,
}

/// The largest `--time-scale`: every bound times 100 (a 40 s case limit becomes 67 minutes) is
/// already more than any machine needs, and far below what a `Duration` holds.
pub const MAX_TIME_SCALE: f64 = 100.0;

/// `--time-scale` as every command taking it parses it (`run` on every surface, `report`,
/// `check-runtime`): a finite number above 0 and at most [`MAX_TIME_SCALE`]; anything else is a
/// usage error (exit 2) naming the flag and the range.
pub fn parse_time_scale(text: &str) -> Result<f64, String> {
    let out_of_range = || {
        format!(
            "--time-scale must be a finite number above 0 and at most {MAX_TIME_SCALE}, got {text:?}"
        )
    };
    let value: f64 = text.trim().parse().map_err(|_| out_of_range())?;
    check_time_scale(value).map_err(|_| out_of_range())
}

/// `value` when it is a `--time-scale` [`parse_time_scale`] accepts, for callers that get one
/// without the parser (a library caller's config): the error names the flag and the range.
pub fn check_time_scale(value: f64) -> Result<f64, String> {
    if value.is_finite() && value > 0.0 && value <= MAX_TIME_SCALE {
        Ok(value)
    } else {
        Err(format!(
            "--time-scale must be a finite number above 0 and at most {MAX_TIME_SCALE}, got {value}"
        ))
    }
}

/// The surface a run tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Surface {
    OpenDesign,
    Sdk,
    Headless,
}

/// 1 when the host failed a case; else 2 when the kit failed one; else 3 when nothing was
/// measured (every case skipped); else 0.
pub fn exit_code(report: &SuiteReport) -> u8 {
    if report.cases.iter().any(|case| case.verdict.is_failure()) {
        EXIT_FAILURES
    } else if report
        .cases
        .iter()
        .any(|case| case.verdict == Verdict::Error)
    {
        EXIT_HARNESS
    } else if report
        .cases
        .iter()
        .all(|case| case.verdict == Verdict::Skipped)
    {
        EXIT_NOTHING_MEASURED
    } else {
        EXIT_OK
    }
}

/// The end of every run: every output written (a closed stdout is not an error), then the exit
/// code: 128 + the signal when a stop signal ended the run, else [`exit_code`].
pub fn finish(args: &Flags, report: &SuiteReport, stopped: Option<&str>) -> Result<u8, String> {
    match write_outputs(args, report, stopped) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            return Err(format!("cannot write the report: {e}"))
        }
        _ => {}
    }
    Ok(if dsh_engine::interrupt::signalled() {
        dsh_engine::interrupt::exit_code()
    } else {
        exit_code(report)
    })
}

/// What remains after the live lines: the sorted summary (table), the report (json) or the
/// summary object (jsonl), the transcripts for `--verbose`, and the output files.
pub fn write_outputs(
    args: &Flags,
    report: &SuiteReport,
    stopped: Option<&str>,
) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match args.format {
        Format::Table => {
            let color = args.color.resolve();
            crate::output::stream::write_summary(report, color, &mut stdout)?;
        }
        Format::Json => crate::output::write_json(report, &mut stdout)?,
        Format::Jsonl => writeln!(
            stdout,
            "{}",
            crate::output::stream::summary_event(report, stopped)
        )?,
    }
    if args.verbose && args.format == Format::Table {
        for case in &report.cases {
            writeln!(stdout, "\n--- {} ({}) ---", case.id, case.verdict.as_str())?;
            if let Some(rule) = &case.rule {
                let why = case.why.as_deref().unwrap_or("-");
                let line = format!("broken: {rule}: {why}");
                writeln!(stdout, "{}", crate::output::escape::terminal(&line))?;
            }
            for broken in &case.also_broken {
                let line = format!("also broken: {}", broken.line());
                writeln!(stdout, "{}", crate::output::escape::terminal(&line))?;
            }
            for line in &case.transcript {
                writeln!(stdout, "{}", crate::output::escape::terminal(line))?;
            }
        }
    }
    stdout.flush()?;
    let write_file = dsh_engine::files::write_rendered;
    if let Some(path) = &args.junit {
        write_file(path, &|out| crate::output::write_junit(report, out))?;
    }
    if let Some(path) = &args.markdown {
        write_file(path, &|out| crate::output::write_markdown(report, out))?;
    }
    if let Some(path) = &args.json {
        write_file(path, &|out| crate::output::write_json(report, out))?;
    }
    Ok(())
}

/// The fake-dsh binary: `--fake-dsh`, else `$FAKE_DSH_BIN` (said out loud), else the one beside
/// this executable.
pub fn fake_dsh_of(args: &Flags) -> Result<PathBuf, String> {
    Ok(match (&args.fake_dsh, fake_dsh_from_env()) {
        (Some(path), _) => path.clone(),
        (None, Some(path)) => {
            // A runtime change from the environment is said out loud (and lands in the report's
            // re-run flags), never silent.
            eprintln!(
                "dsh-conformance run: note: the runtime is $FAKE_DSH_BIN = {}, not the fake-dsh beside this executable",
                path.display()
            );
            path
        }
        _ => dsh_engine::programs::sibling_of_exe("fake-dsh")?,
    })
}

/// `$FAKE_DSH_BIN` when set and not empty.
pub fn fake_dsh_from_env() -> Option<PathBuf> {
    std::env::var_os("FAKE_DSH_BIN")
        .filter(|path| !path.is_empty())
        .map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_scale_is_finite_above_0_and_at_most_100() {
        for good in ["1", "0.2", "100", " 3 "] {
            assert!(parse_time_scale(good).is_ok(), "{good}");
        }
        for bad in ["0", "-1", "1e300", "100.5", "inf", "-inf", "NaN", "", "two"] {
            let error = parse_time_scale(bad).expect_err(bad);
            assert!(
                error.contains("--time-scale") && error.contains("above 0 and at most 100"),
                "{bad}: {error}"
            );
        }
        assert!(check_time_scale(f64::INFINITY).is_err());
        assert_eq!(check_time_scale(2.5), Ok(2.5));
    }
}
