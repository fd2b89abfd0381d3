//! The command line of the kit, all of it: every clap type and every command's `main`, over the
//! typed APIs of the product crates (no library crate of the kit parses arguments, prints a
//! verdict table on its own or decides an exit code). One module per command family; the option
//! groups several commands share are [`options`], defined once and flattened where they apply.
//!
//! - [`run`]: `run` (the host corpus on `open-design`, the client corpus on `sdk`/`headless`).
//! - [`check_runtime`]: `check-runtime`; [`validate`]: `validate`; [`model_server`]:
//!   `model-server`.
//! - [`record`]: `record`, `fixture-from-transcript`, `sdk-scenario-from-transcript`.
//! - [`report`]: `report`, `diff`, `summary`, `merge`.
//! - [`lint`]: `lint`, `corpus`; [`supervise`]: `supervise`, `__supervise`.
//! - [`live`]: the reporter that prints a run's cases as they finish.

pub mod check_runtime;
pub mod lint;
pub mod live;
pub mod model_server;
pub mod options;
pub mod record;
pub mod report;
pub mod run;
pub mod supervise;
pub mod validate;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "dsh-conformance",
    version,
    about = "Conformance kit for the dsh-profile-jsonl protocol (generation 1)"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Check a captured runtime stdout stream against the strict stream rules.
    Validate(validate::Args),
    /// Run the fixture corpus against a host (or the client corpus against a client).
    Run(Box<run::RunArgs>),
    /// Check the fixture corpus: schemas, unique ids, rule coverage.
    Lint(lint::Args),
    /// Run several hosts and runtime variants and write the compatibility matrix.
    Report(report::Args),
    /// Compare two report.json files; exit 1 on a regression.
    Diff(report::DiffArgs),
    /// A quick look at a stored report.json: per-cell counts and the failing cases.
    Summary(report::SummaryArgs),
    /// Combine the JSON results of `run --shard K/N` jobs (or reports) into one report.json.
    Merge(report::MergeArgs),
    /// Check a runtime (a real dsh, or fake-dsh) from the host's side, on any surface.
    CheckRuntime(check_runtime::Args),
    /// Proxy a runtime's stdio unchanged, validate it live and write a transcript.
    Record(record::Args),
    /// Turn a recorded transcript into a redacted fixture scenario.
    FixtureFromTranscript(record::FixtureArgs),
    /// Turn a recorded SDK runtime session into a keyless fake-dsh `sdk` scenario.
    SdkScenarioFromTranscript(record::ScenarioArgs),
    /// Turn a recorded ACP session (`record --surface acp`) into a keyless fake-dsh `acp`
    /// scenario.
    AcpScenarioFromTranscript(record::ScenarioArgs),
    /// The fixture corpus built into this binary: `export DIR`, `info`.
    Corpus(lint::CorpusArgs),
    /// Serve a scripted model endpoint on 127.0.0.1 (OpenAI chat completions and Anthropic
    /// Messages, from one script) for keyless runs.
    ModelServer(model_server::Args),
    /// Run a host's runtime under a child subreaper that kills what it leaves behind (escaped
    /// daemons) once it exited: `supervise -- dsh --profile open-design --stdio`.
    Supervise(supervise::RuntimeArgs),
    /// The per-case supervisor `run` starts each driver under (internal).
    #[command(name = "__supervise", hide = true)]
    CaseSupervise(supervise::CaseArgs),
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

/// Parses the command line (a usage error exits 2 here) and runs the command.
pub fn main() -> ExitCode {
    if std::env::args_os()
        .nth(1)
        .is_some_and(|command| command == "run")
    {
        // First, before the arguments are parsed and the corpus loads: a SIGINT/SIGTERM from
        // now on stops the run with its summary and every output written, exit 128 + the signal
        // (`dsh_engine::interrupt`). Only `run`: the other commands handle signals their own way
        // (`record` forwards them, `model-server` waits for one, `supervise` ignores them).
        dsh_engine::interrupt::catch_stop_signals("dsh-conformance run", exit_now);
    }
    // clap keeps a version as `&'static str`; this one string lives as long as the process anyway.
    let version: &'static str = Box::leak(version().into_boxed_str());
    let matches = Cli::command().version(version).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit());
    dispatch(cli.command)
}

/// How the stop-signal thread ends the process on a second signal.
fn exit_now(code: u8) -> ! {
    std::process::exit(i32::from(code))
}

fn dispatch(command: Command) -> ExitCode {
    match command {
        Command::Validate(args) => validate::main(args),
        Command::Run(args) => run::main(&args),
        Command::Lint(args) => lint::main(args),
        Command::Report(args) => report::main(args),
        Command::Diff(args) => report::diff_main(args),
        Command::Summary(args) => report::summary_main(args),
        Command::Merge(args) => report::merge_main(args),
        Command::CheckRuntime(args) => check_runtime::main(args),
        Command::Record(args) => record::main(args),
        Command::FixtureFromTranscript(args) => record::fixture_main(args),
        Command::SdkScenarioFromTranscript(args) => {
            record::scenario_main(args, record::ScenarioOf::Sdk)
        }
        Command::AcpScenarioFromTranscript(args) => {
            record::scenario_main(args, record::ScenarioOf::Acp)
        }
        Command::Corpus(args) => lint::corpus_main(args),
        Command::ModelServer(args) => model_server::main(args),
        Command::Supervise(args) => supervise::runtime_main(args),
        Command::CaseSupervise(args) => supervise::case_main(args),
    }
}
