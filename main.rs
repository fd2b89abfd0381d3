//! scratch
use clap::{Parser, Subcommand};
use dsh_conformance::report;
use std::process::ExitCode;
#[derive(Parser)]
struct Cli { #[command(subcommand)] command: Command }
#[derive(Subcommand)]
enum Command { Report(report::Args), Diff(report::DiffArgs) }
fn main() -> ExitCode {
    match Cli::parse().command { Command::Report(a) => report::main(a), Command::Diff(a) => report::diff_main(a) }
}
