//! `dsh-conformance validate`: check one captured stdout stream against the strict rules.

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn main(args: Args) -> ExitCode {
    let _ = args;
    todo!("issue 2")
}
