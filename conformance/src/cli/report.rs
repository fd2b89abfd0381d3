//! The compatibility matrix and the tools over stored reports (`dsh-report`): `report`, `diff`,
//! `summary`, `merge`.

use super::live::LivePrinter;
use super::options::{heading, CorpusSource, Select, Timing};
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use dsh_report::config::MatrixConfig;
use dsh_report::document::load_document;
use dsh_report::{diff, exit_code_of, run_report, write_report_files, CellOptions, REPORT_FILES};
use dsh_results::output::stream::ColorChoice;
use dsh_results::output::Format;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// `dsh-conformance report`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// JSON config: {"hosts":[{"name","command":[...]}],"variants":[{"name","env":{...}}]}.
    /// Without it: the reference host x the version-policy variants.
    #[arg(long, value_name = "FILE", help_heading = heading::HOST)]
    pub config: Option<PathBuf>,
    /// One host instead of a config file: its command line, split like `run --host` splits it
    /// (like a shell splits words, nothing expanded), without the reference host beside it.
    #[arg(long, value_name = "COMMAND", conflicts_with = "config", help_heading = heading::HOST)]
    pub host: Option<String>,
    /// With --host: its name in the report (default `host`).
    #[arg(long, value_name = "NAME", requires = "host", help_heading = heading::HOST)]
    pub host_name: Option<String>,
    /// With --host: its expectations file ({"v":1,"xfail":{...}}).
    #[arg(long, value_name = "FILE", requires = "host", help_heading = heading::HOST)]
    pub expectations: Option<PathBuf>,
    /// With --host: a caller's variable (`NAME` or `PREFIX*`) its driver gets besides the
    /// allowlist, as `run --pass-env` (repeatable).
    #[arg(long, value_name = "NAME", requires = "host", help_heading = heading::HOST)]
    pub pass_env: Vec<String>,
    /// With --host: a runtime variant, named as `run --variant` names it (repeatable; default the
    /// report's default variants).
    #[arg(long, value_name = "NAME", requires = "host", help_heading = heading::RUNTIME)]
    pub variant: Vec<String>,
    #[command(flatten)]
    pub corpus: CorpusSource,
    #[command(flatten)]
    pub select: Select,
    #[command(flatten)]
    pub timing: Timing,
    /// The directory report.json, report.html and report.md are written into (created if
    /// missing).
    #[arg(
        long,
        value_name = "DIR",
        default_value = "conformance-report",
        help_heading = heading::OUTPUT
    )]
    pub out: PathBuf,
    /// Keep every case's transcript and duration in report.json (default: transcripts of
    /// non-passing cells only, no durations, so two runs give the same file).
    #[arg(long, help_heading = heading::OUTPUT)]
    pub full_transcripts: bool,
    /// Also write JUnit XML (one testsuite per host x variant) to FILE.
    #[arg(long, value_name = "FILE", help_heading = heading::OUTPUT)]
    pub junit: Option<PathBuf>,
}

/// `report`: exit as [`exit_code_of`] says; 2 when something could not run or be written.
pub fn main(args: Args) -> ExitCode {
    match report(&args) {
        Ok(code) => {
            if code == 3 {
                eprintln!("dsh-conformance report: no cell measured any case (check --fixtures)");
            }
            ExitCode::from(code)
        }
        Err(message) => {
            eprintln!("dsh-conformance report: {message}");
            ExitCode::from(2)
        }
    }
}

fn report(args: &Args) -> Result<u8, String> {
    let config = match (&args.config, &args.host) {
        (Some(path), _) => MatrixConfig::load(path),
        (None, Some(host)) => MatrixConfig::one_host(
            host,
            args.host_name.as_deref(),
            args.expectations.as_deref(),
            &args.variant,
            &args.pass_env,
        ),
        (None, None) => Ok(MatrixConfig::default_matrix()),
    }?;
    let planted = REPORT_FILES
        .iter()
        .map(|name| args.out.join(name))
        .chain(std::iter::once(args.out.clone()))
        .chain(args.junit.clone())
        .find_map(|path| dsh_engine::files::refuse_symlink(&path).err());
    if let Some(error) = planted {
        return Err(error.to_string());
    }
    let corpus = args.corpus.choose()?;
    if let Some(note) = corpus.announcement() {
        eprintln!("dsh-conformance report: {note}");
    }
    let options = CellOptions {
        cases: args.select.cases.clone(),
        skip: args.select.skip.clone(),
        jobs: args.timing.jobs(),
        time_scale: args.timing.time_scale,
    };
    // Each cell's cases, printed as they finish (as `run` prints them; the cell announces
    // itself on stderr).
    let printer = LivePrinter::new(
        "dsh-conformance report",
        Format::Table,
        ColorChoice::Auto,
        false,
    );
    let document = run_report(&config, &options, &corpus, args.full_transcripts, &printer)?;
    if let Some(path) = &args.junit {
        dsh_engine::files::write_rendered(path, &|out| {
            dsh_results::output::write_junit_suites(&document.suites, out)
        })
        .map_err(|error| error.to_string())?;
    }
    for path in write_report_files(&document, &args.out)? {
        println!("wrote {}", path.display());
    }
    Ok(exit_code_of(&document))
}

/// Output format of `diff`: every subcommand's `--format` names, plus markdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffFormat {
    Table,
    Markdown,
    Json,
    Jsonl,
}

fn diff_format_parser() -> impl TypedValueParser<Value = DiffFormat> {
    PossibleValuesParser::new([
        PossibleValue::new("table").alias("text"),
        PossibleValue::new("markdown"),
        PossibleValue::new("json"),
        PossibleValue::new("jsonl"),
    ])
    .map(|name| match name.as_str() {
        "markdown" => DiffFormat::Markdown,
        "json" => DiffFormat::Json,
        "jsonl" => DiffFormat::Jsonl,
        _ => DiffFormat::Table,
    })
}

/// `dsh-conformance diff`.
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// The baseline: a report.json, or one suite from `run --format json`.
    #[arg(value_name = "BASE.json")]
    pub base: PathBuf,
    /// The candidate, in the same forms.
    #[arg(value_name = "NEW.json")]
    pub new: PathBuf,
    /// A host x variant cell only in BASE is not a regression (it is by default).
    #[arg(long, help_heading = heading::SELECTION)]
    pub allow_removed: bool,
    /// stdout format: `table` (`text` is the same), `markdown` (a pull-request comment), `json`
    /// (one document) or `jsonl` (one object per change, then a summary object).
    #[arg(long, value_parser = diff_format_parser(), default_value = "table", help_heading = heading::OUTPUT)]
    pub format: DiffFormat,
}

/// `diff`: exit 1 on a regression, 2 when a report is unreadable, else 0.
pub fn diff_main(args: DiffArgs) -> ExitCode {
    let loaded = load_document(&args.base).and_then(|base| Ok((base, load_document(&args.new)?)));
    let (base, new) = match loaded {
        Ok(pair) => pair,
        Err(message) => {
            eprintln!("dsh-conformance diff: {message}");
            return ExitCode::from(2);
        }
    };
    let mut result = diff::diff(&base, &new);
    result.removed_cell_regresses = !args.allow_removed;
    let mut stdout = std::io::stdout().lock();
    let written = match args.format {
        DiffFormat::Table => diff::write_text(&result, &mut stdout),
        DiffFormat::Jsonl => diff::write_jsonl(&result, &mut stdout),
        DiffFormat::Markdown => diff::write_markdown(&result, &mut stdout),
        DiffFormat::Json => serde_json::to_writer_pretty(&mut stdout, &result)
            .map_err(std::io::Error::other)
            .and_then(|()| writeln!(stdout)),
    };
    if let Err(error) = written.and_then(|()| stdout.flush()) {
        eprintln!("dsh-conformance diff: cannot write the diff: {error}");
        return ExitCode::from(2);
    }
    ExitCode::from(u8::from(result.is_regression()))
}

/// `dsh-conformance summary REPORT.json`.
#[derive(Debug, clap::Args)]
pub struct SummaryArgs {
    /// A report.json, or one suite from `run --format json`.
    #[arg(value_name = "REPORT.json")]
    pub report: PathBuf,
}

/// `summary`: one line per host x variant, the cells that could not run, every failing case with
/// its re-run command. Exit 1 when a case fails a run, 2 when the file is unreadable or invalid.
pub fn summary_main(args: SummaryArgs) -> ExitCode {
    let document = match load_document(&args.report) {
        Ok(document) => document,
        Err(message) => {
            eprintln!("dsh-conformance summary: {message}");
            return ExitCode::from(2);
        }
    };
    let mut out = std::io::stdout().lock();
    let written = dsh_report::tools::write_summary(&document, &mut out);
    if let Err(error) = written.and_then(|()| out.flush()) {
        if error.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("dsh-conformance summary: cannot write: {error}");
            return ExitCode::from(2);
        }
    }
    ExitCode::from(u8::from(document.has_failures()))
}

/// `dsh-conformance merge --json OUT.json SHARD.json...`.
#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The shards' results (report.json or `run --json` files).
    #[arg(value_name = "SHARD.json", required = true)]
    pub inputs: Vec<PathBuf>,
    /// Write the merged report.json to FILE.
    #[arg(long, alias = "out", value_name = "FILE", help_heading = heading::OUTPUT)]
    pub json: PathBuf,
}

/// `merge`: exit 0 when written, 2 when an input is invalid or the shards do not fit together.
pub fn merge_main(args: MergeArgs) -> ExitCode {
    match dsh_report::tools::merge_files(&args.inputs, &args.json) {
        Ok(document) => {
            let cases: usize = document.suites.iter().map(|suite| suite.cases.len()).sum();
            eprintln!(
                "dsh-conformance merge: wrote {} ({} cells, {cases} cases)",
                args.json.display(),
                document.suites.len()
            );
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("dsh-conformance merge: {message}");
            ExitCode::from(2)
        }
    }
}
