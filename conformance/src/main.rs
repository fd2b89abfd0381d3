//! The `dsh-conformance` binary: the kit's one command line ([`cli`]). Every clap type and every
//! command's `main` lives here, over the typed APIs of the product crates: `run` over
//! `dsh-host-corpus` (the open-design surface) and `dsh-client-corpus` (`sdk`, `headless`), with
//! the options both share typed in `dsh-results`; `check-runtime`, `validate` and `model-server`
//! over `dsh-runtime-check`; `record` and the transcript converters over `dsh-record`; `report`,
//! `diff`, `summary` and `merge` over `dsh-report`; `supervise` over `dsh-engine`. `lint` and
//! `corpus` check the fixture tree's two corpora together.

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    // The kit's command: a child it did not start on purpose is an orphan it adopted.
    dsh_engine::process::sweep_adopted_orphans();
    dsh_protocol::lifeline::watch(|| {
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGTERM);
    });
    cli::main()
}
