//! `run`: the host corpus on the open-design surface (`dsh-host-corpus`), the client corpus on
//! `sdk`, `headless` and `acp` (`dsh-client-corpus`), one grammar for both ([`RunArgs`] ->
//! [`RunOptions`]).

use super::live::LivePrinter;
use super::options::{
    color_parser, format_parser, heading, surface_parser, CorpusSource, RuntimeUnderTest, Select,
    Timing,
};
use dsh_engine::surface::Surface;
use dsh_formats::client_case::ClientSurface;
use dsh_results::model::SuiteReport;
use dsh_results::output::stream::ColorChoice;
use dsh_results::output::Format;
use dsh_results::reporter::{ListedCase, RunOutcome};
use dsh_results::run_args::{
    exit_code, RunOptions, DEFAULT_DIALECT, EXIT_HARNESS, EXIT_NOTHING_MEASURED, EXIT_OK,
};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// The surfaces `run` has a corpus for.
pub const SURFACES: [Surface; 4] = [
    Surface::OpenDesign,
    Surface::Sdk,
    Surface::Headless,
    Surface::Acp,
];

/// The `run` flags.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The host driver's command line, split like a shell would (default: dsh-host-driver next to
    /// this executable); with `--surface sdk|headless|acp`, the client's.
    #[arg(long, value_name = "COMMAND", help_heading = heading::HOST)]
    pub host: Option<String>,
    /// One more argument of the host command (repeatable; alone it builds the whole command).
    #[arg(
        long = "host-arg",
        allow_hyphen_values = true,
        value_name = "ARG",
        help_heading = heading::HOST
    )]
    pub host_args: Vec<String>,
    /// The host's name in reports.
    #[arg(long, value_name = "NAME", help_heading = heading::HOST)]
    pub host_name: Option<String>,
    /// Start the driver afresh for every case, even when it claims `reuse` (one driver per worker)
    #[arg(long, help_heading = heading::HOST)]
    pub driver_per_case: bool,
    /// The host's expectations file: {"v":1,"xfail":{"case.id":"reason"}}.
    #[arg(long, value_name = "FILE", help_heading = heading::HOST)]
    pub expectations: Option<PathBuf>,
    /// The dialect the host is judged by (docs/dialects.md): `opendesign` (generation 1 as
    /// written) or `multica` (Multica's Go daemon: the `multica` profile, its relaxed rules and
    /// policies, each with its source).
    #[arg(long, value_name = "NAME", default_value = DEFAULT_DIALECT, help_heading = heading::HOST)]
    pub dialect: String,
    /// Pass this variable of the caller's environment to the driver (`NAME` or `PREFIX*`,
    /// repeatable); besides these the driver gets only PATH, HOME, the user, locale, TZ, TMPDIR,
    /// TERM and what the harness sets (docs/host-driver.md, "Environment").
    #[arg(long = "pass-env", value_name = "NAME", help_heading = heading::HOST)]
    pub pass_env: Vec<String>,
    /// A capability the client lacks (`--surface sdk|headless|acp`, repeatable): the client cases
    /// that require it are skipped (e.g. `background-subagents`).
    #[arg(long = "client-lacks", value_name = "CAPABILITY", help_heading = heading::HOST)]
    pub client_lacks: Vec<String>,

    /// What `--host` is: an open-design host driver (the fixture corpus), or a client of the SDK
    /// runtime (`sdk`) or of `headless` (the client corpus of docs/sdk-clients.md).
    #[arg(
        long,
        value_parser = surface_parser(),
        default_value = "open-design",
        help_heading = heading::RUNTIME
    )]
    pub surface: Surface,
    #[command(flatten)]
    pub runtime: RuntimeUnderTest,
    /// The runtime variant's name (`dsh-<version>` sets `FAKE_DSH_VERSION=<version>`).
    #[arg(long, value_name = "NAME", help_heading = heading::RUNTIME)]
    pub variant: Option<String>,
    /// Extra env for fake-dsh in this variant, KEY=VALUE (repeatable).
    #[arg(long = "variant-env", value_name = "KEY=VALUE", help_heading = heading::RUNTIME)]
    pub variant_env: Vec<String>,

    #[command(flatten)]
    pub corpus: CorpusSource,
    #[command(flatten)]
    pub select: Select,
    /// Select cases exercising this spec section (repeatable).
    #[arg(long = "section", value_name = "SECTION", help_heading = heading::SELECTION)]
    pub sections: Vec<String>,
    /// Run only shard K of N (`--shard 2/4`): a deterministic split balanced by expected wait.
    #[arg(long, value_name = "K/N", help_heading = heading::SELECTION)]
    pub shard: Option<dsh_engine::selection::Shard>,
    /// Print the selected cases and exit (`--format json` for a JSON array).
    #[arg(long, help_heading = heading::SELECTION)]
    pub list: bool,

    #[command(flatten)]
    pub timing: Timing,
    /// Start no new case after the first one that fails the run.
    #[arg(long, help_heading = heading::TIMING)]
    pub fail_fast: bool,
    /// Run the selection N times; cases whose verdicts differ are reported flaky (fail).
    #[arg(long, default_value_t = 1, value_name = "N", help_heading = heading::TIMING)]
    pub verify: usize,

    /// stdout format: a live table, one JSON document at the end, or one JSON object per
    /// finished case (jsonl) and a summary object.
    #[arg(long, value_parser = format_parser(), default_value = "table", help_heading = heading::OUTPUT)]
    pub format: Format,
    /// Colour verdicts: auto (a terminal, unless NO_COLOR is set), always, never.
    #[arg(long, value_parser = color_parser(), default_value = "auto", help_heading = heading::OUTPUT)]
    pub color: ColorChoice,
    /// Also write JUnit XML to FILE.
    #[arg(long, value_name = "FILE", help_heading = heading::OUTPUT)]
    pub junit: Option<PathBuf>,
    /// Also write a Markdown summary to FILE.
    #[arg(long, value_name = "FILE", help_heading = heading::OUTPUT)]
    pub markdown: Option<PathBuf>,
    /// Also write the JSON report to FILE.
    #[arg(long, value_name = "FILE", help_heading = heading::OUTPUT)]
    pub json: Option<PathBuf>,
    /// Write an expectations file listing the current failures to FILE.
    #[arg(long, value_name = "FILE", help_heading = heading::OUTPUT)]
    pub write_expectations: Option<PathBuf>,
    /// Print every case's full transcript (driver messages in and out, the journal).
    #[arg(long, help_heading = heading::OUTPUT)]
    pub verbose: bool,
    /// How re-run lines start instead of `dsh-conformance run --host HOST ...` (a wrapper such as
    /// `cargo xtask suite` that passes the rest itself).
    #[arg(long, value_name = "COMMAND", hide = true)]
    pub rerun_as: Option<String>,
}

impl RunArgs {
    /// The typed options the corpora take.
    pub fn options(&self) -> RunOptions {
        RunOptions {
            host: self.host.clone(),
            host_args: self.host_args.clone(),
            host_name: self.host_name.clone(),
            fixtures: self.corpus.fixtures.clone(),
            embedded_corpus: self.corpus.embedded_corpus,
            cases: self.select.cases.clone(),
            sections: self.sections.clone(),
            skip: self.select.skip.clone(),
            shard: self.shard,
            list: self.list,
            fail_fast: self.fail_fast,
            jobs: self.timing.jobs(),
            time_scale: self.timing.time_scale,
            verify: self.verify,
            driver_per_case: self.driver_per_case,
            expectations: self.expectations.clone(),
            write_expectations: self.write_expectations.clone(),
            format: self.format,
            color: self.color,
            junit: self.junit.clone(),
            markdown: self.markdown.clone(),
            json: self.json.clone(),
            verbose: self.verbose,
            rerun_as: self.rerun_as.clone(),
            runtime: self.runtime.runtime.clone(),
            variant: self.variant.clone(),
            dialect: self.dialect.clone(),
            variant_env: self.variant_env.clone(),
            pass_env: self.pass_env.clone(),
            surface: self.surface,
            client_lacks: self.client_lacks.clone(),
            persona: self.runtime.persona,
        }
    }
}

/// `run`: the host corpus on the open-design surface, the client corpus on `sdk`/`headless`,
/// each case printed as it finishes; then the summary, the outputs and the exit code.
pub fn main(args: &RunArgs) -> ExitCode {
    let options = args.options();
    let client = match options.surface {
        Surface::OpenDesign => None,
        Surface::Sdk => Some(ClientSurface::Sdk),
        Surface::Headless => Some(ClientSurface::Headless),
        Surface::Acp => Some(ClientSurface::Acp),
        other => return super::options::unsupported_surface("run", other, &SURFACES),
    };
    let printer = LivePrinter::new("dsh-conformance run", options.format, options.color, true);
    let outcome = match client {
        Some(_) if options.dialect != DEFAULT_DIALECT => Err(format!(
            "--dialect {} judges host drivers (the open-design surface); the client corpus has no dialects",
            options.dialect
        )),
        None => dsh_host_corpus::run(&options, &printer),
        Some(surface) => dsh_client_corpus::run(&options, surface, &printer),
    };
    let code = outcome.and_then(|outcome| match outcome {
        RunOutcome::Listed(cases) => print_list(&options, &cases),
        RunOutcome::NothingSelected => Ok(EXIT_NOTHING_MEASURED),
        RunOutcome::Ran { report, stopped } => finish(&options, &report, stopped.as_deref()),
    });
    match code {
        Ok(code) => ExitCode::from(code),
        Err(message) => {
            eprintln!("dsh-conformance run: {message}");
            ExitCode::from(EXIT_HARNESS)
        }
    }
}

/// `--list`: `id<TAB>summary` lines (the id alone when a case has no summary), or with `--format
/// json`/`jsonl` what each case lists as JSON; a closed stdout is not an error.
fn print_list(options: &RunOptions, cases: &[ListedCase]) -> Result<u8, String> {
    let line = |case: &ListedCase| match (&case.summary, options.format, &case.detail) {
        (_, Format::Jsonl, Some(detail)) => format!("{detail}\n"),
        (Some(summary), Format::Table, _) => format!("{}\t{summary}\n", case.id),
        _ => format!("{}\n", case.id),
    };
    let text = match options.format {
        Format::Json if cases.iter().all(|case| case.detail.is_some()) => {
            let items: Vec<serde_json::Value> = cases
                .iter()
                .filter_map(|case| case.detail.clone())
                .collect();
            format!("{:#}\n", serde_json::Value::from(items))
        }
        _ => cases.iter().map(line).collect::<String>(),
    };
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.to_string()),
        _ => Ok(EXIT_OK),
    }
}

/// The end of every run: every output written (a closed stdout is not an error), then the exit
/// code: 128 + the signal when a stop signal ended the run, else [`exit_code`].
fn finish(args: &RunOptions, report: &SuiteReport, stopped: Option<&str>) -> Result<u8, String> {
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
fn write_outputs(
    args: &RunOptions,
    report: &SuiteReport,
    stopped: Option<&str>,
) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match args.format {
        Format::Table => {
            let color = args.color.resolve();
            dsh_results::output::stream::write_summary(report, color, &mut stdout)?;
        }
        Format::Json => dsh_results::output::write_json(report, &mut stdout)?,
        Format::Jsonl => writeln!(
            stdout,
            "{}",
            dsh_results::output::stream::summary_event(report, stopped)
        )?,
    }
    if args.verbose && args.format == Format::Table {
        for case in &report.cases {
            writeln!(stdout, "\n--- {} ({}) ---", case.id, case.verdict.as_str())?;
            if let Some(rule) = &case.rule {
                let why = case.why.as_deref().unwrap_or("-");
                let line = format!("broken: {rule}: {why}");
                writeln!(stdout, "{}", dsh_results::output::escape::terminal(&line))?;
            }
            for broken in &case.also_broken {
                let line = format!("also broken: {}", broken.line());
                writeln!(stdout, "{}", dsh_results::output::escape::terminal(&line))?;
            }
            for line in &case.transcript {
                writeln!(stdout, "{}", dsh_results::output::escape::terminal(line))?;
            }
        }
    }
    stdout.flush()?;
    dsh_results::run_args::write_output_files(args, report)
}
