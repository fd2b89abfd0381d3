//! `report` (the hosts x variants matrix: HTML, JSON, Markdown) and `diff`.

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn main(args: Args) -> ExitCode {
    let _ = args;
    todo!()
}

#[derive(Debug, clap::Args)]
pub struct DiffArgs {}

pub fn diff_main(args: DiffArgs) -> ExitCode {
    let _ = args;
    todo!()
}
