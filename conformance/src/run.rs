//! placeholder: owned by the run work.

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn main(args: Args) -> ExitCode {
    let _ = args;
    todo!()
}
