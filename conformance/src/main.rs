//! The `dsh-conformance` CLI: argument parsing and dispatch, nothing else. Each subcommand's
//! work lives in the crate of its product: `run` in `dsh-host-corpus` (the open-design surface)
//! or `dsh-client-corpus` (`--surface sdk|headless`), with the options both share in
//! `dsh-results`; `check-runtime`, `validate` and `model-server` in `dsh-runtime-check`;
//! `record` and the transcript converters in `dsh-record`; `report`, `diff`, `summary` and
//! `merge` in `dsh-report`; `supervise` in `dsh-engine`. `lint` and `corpus` ([`lint`]) check
//! the fixture tree's two corpora together.

mod lint;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use dsh_engine::supervisor;
use dsh_formats::client_case::ClientSurface;
use dsh_record as record;
use dsh_report as report;
use dsh_results::run_args::{Surface, EXIT_HARNESS};
use dsh_runtime_check as check_runtime;
use dsh_runtime_check::{model_server, validate};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "dsh-conformance",
    version,
    about = "Conformance kit for the dsh-profile-jsonl protocol (generation 1)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check a captured runtime stdout stream against the strict stream rules.
    Validate(validate::Args),
    /// Run the fixture corpus against a host.
    Run(dsh_results::run_args::Args),
    /// Check the fixture corpus: schemas, unique ids, rule coverage.
    Lint(lint::Args),
    /// Run several hosts and runtime variants and write the compatibility matrix.
    Report(report::Args),
    /// Compare two report.json files; exit 1 on a regression.
    Diff(report::DiffArgs),
    /// A quick look at a stored report.json: per-cell counts and the failing cases.
    Summary(report::tools::SummaryArgs),
    /// Combine the JSON results of `run --shard K/N` jobs (or reports) into one report.json.
    Merge(report::tools::MergeArgs),
    /// Check a runtime (a real dsh with the open-design profile, or fake-dsh) from the host's side.
    CheckRuntime(check_runtime::Args),
    /// Proxy a runtime's stdio unchanged, validate it live and write a transcript.
    Record(record::Args),
    /// Turn a recorded transcript into a redacted fixture scenario.
    FixtureFromTranscript(record::FixtureArgs),
    /// Turn a recorded SDK runtime session into a keyless fake-dsh `sdk` scenario.
    SdkScenarioFromTranscript(record::sdk::Args),
    /// The fixture corpus built into this binary: `export DIR`, `info`.
    Corpus(lint::CorpusArgs),
    /// Serve a scripted model endpoint on 127.0.0.1 (OpenAI chat completions and Anthropic
    /// Messages, from one script) for keyless runs.
    ModelServer(model_server::Args),
    /// Run a host's runtime under a child subreaper that kills what it leaves behind (escaped
    /// daemons) once it exited: `supervise -- dsh --profile open-design --stdio`.
    Supervise(supervisor::RuntimeArgs),
    /// The per-case supervisor `run` starts each driver under (internal).
    #[command(name = "__supervise", hide = true)]
    CaseSupervise(supervisor::Args),
}

/// `--version`: the crate version and the embedded corpus it carries (the `corpus_hash` a full run
/// of it reports).
fn version() -> String {
    format!(
        "{} (corpus sha256 {}, {} cases)",
        env!("CARGO_PKG_VERSION"),
        dsh_engine::corpus::embedded::case_hash(),
        dsh_engine::corpus::embedded::case_count()
    )
}

fn main() -> ExitCode {
    // The kit's command: a child it did not start on purpose is an orphan it adopted.
    dsh_engine::process::sweep_adopted_orphans();
    dsh_protocol::lifeline::watch(|| {
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGTERM);
    });
    // clap keeps a version as `&'static str`; this one string lives as long as the process anyway.
    let version: &'static str = Box::leak(version().into_boxed_str());
    let matches = Cli::command().version(version).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit());
    match cli.command {
        Command::Validate(args) => validate::main(args),
        Command::Run(args) => run(&args.flags),
        Command::Lint(args) => lint::main(args),
        Command::Report(args) => report::main(args),
        Command::Diff(args) => report::diff_main(args),
        Command::Summary(args) => report::tools::summary_main(args),
        Command::Merge(args) => report::tools::merge_main(args),
        Command::CheckRuntime(args) => check_runtime::main(args),
        Command::Record(args) => record::main(args),
        Command::FixtureFromTranscript(args) => record::fixture_main(args),
        Command::SdkScenarioFromTranscript(args) => record::sdk::main(args),
        Command::Corpus(args) => lint::corpus_main(args),
        Command::ModelServer(args) => model_server::main(args),
        Command::Supervise(args) => supervisor::runtime_main(args),
        Command::CaseSupervise(args) => supervisor::main(args),
    }
}

/// `run`: the host corpus on the open-design surface, the client corpus on the others.
fn run(flags: &dsh_results::run_args::Flags) -> ExitCode {
    let outcome = match flags.surface {
        Surface::Sdk | Surface::Headless if flags.dialect != "opendesign" => Err(format!(
            "--dialect {} judges host drivers (the open-design surface); the client corpus has no dialects",
            flags.dialect
        )),
        Surface::OpenDesign => dsh_host_corpus::run_cli(flags),
        Surface::Sdk => dsh_client_corpus::run_cli(flags, ClientSurface::Sdk),
        Surface::Headless => dsh_client_corpus::run_cli(flags, ClientSurface::Headless),
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(message) => {
            eprintln!("dsh-conformance run: {message}");
            ExitCode::from(EXIT_HARNESS)
        }
    }
}
