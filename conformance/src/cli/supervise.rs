//! `supervise` (a host's runtime under a child subreaper) and the hidden `__supervise` (the
//! per-case supervisor `run` starts each driver under): `dsh_engine::supervisor`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// The flags of `dsh-conformance __supervise`.
#[derive(Debug, clap::Args)]
pub struct CaseArgs {
    /// Append one JSON line per killed process here.
    #[arg(long)]
    pub report: PathBuf,
    /// Milliseconds the tree may take to exit on its own after the driver exited.
    #[arg(long, default_value_t = 200, value_name = "MS")]
    pub grace_ms: u64,
    /// The driver command.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    pub command: Vec<OsString>,
}

/// The flags of `dsh-conformance supervise`: a runtime supervisor for hosts.
#[derive(Debug, clap::Args)]
pub struct RuntimeArgs {
    /// Milliseconds the runtime's tree may take to exit on its own after the runtime exited;
    /// keep it below the host's own force-kill bound.
    #[arg(long, default_value_t = 200, value_name = "MS")]
    pub grace_ms: u64,
    /// The runtime command (`dsh --profile open-design --stdio`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    pub command: Vec<OsString>,
}

/// `__supervise`: the driver's exit status.
pub fn case_main(args: CaseArgs) -> ExitCode {
    let grace = Duration::from_millis(args.grace_ms);
    ExitCode::from(dsh_engine::supervisor::supervise(
        &args.report,
        grace,
        &args.command,
    ))
}

/// `supervise`: the runtime's exit status.
pub fn runtime_main(args: RuntimeArgs) -> ExitCode {
    let grace = Duration::from_millis(args.grace_ms);
    ExitCode::from(dsh_engine::supervisor::supervise_runtime(
        grace,
        &args.command,
    ))
}
