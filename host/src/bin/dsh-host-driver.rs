//! `dsh-host-driver`: the reference host behind the driver protocol (docs/host-driver.md), for the
//! conformance harness. Requests on stdin, replies on stdout, diagnostics on stderr.
//! `dsh-host-driver --list-mutants` prints the deliberate bugs `DSH_HOST_MUTANT` can switch on,
//! one `name<TAB>summary` line each; `--help` and `--version` do what they say.

use dsh_host::mutants::Mutant;
use dsh_host::{driver, process, Host, HostConfig};
use std::sync::Arc;

const HELP: &str = "\
dsh-host-driver: the reference host of the dsh-profile-jsonl protocol behind the conformance
driver protocol (docs/host-driver.md). It reads requests (NDJSON) on stdin, writes replies on
stdout and diagnostics on stderr; `dsh-conformance run` starts it for every case.

Usage: dsh-host-driver [--list-mutants | --help | --version]

Environment:
  DSH_BIN                         the dsh to run (the harness points it at fake-dsh)
  DSH_HOME, RUNTIME_DATA_DIR      where the profile and the host's session store live
  DEEPSEEK_API_KEY                the credential passed to dsh in its environment
  DSH_HOST_READY_TIMEOUT_MS       bound on the runtime's ready frame
  DSH_HOST_RUN_TIMEOUT_MS         bound on one run
  DSH_HOST_CANCEL_GRACE_MS        wait after a protocol cancel before signals
  DSH_HOST_STDIN_CLOSE_GRACE_MS   wait after closing the runtime's stdin
  DSH_HOST_TERM_GRACE_MS          wait after SIGTERM before SIGKILL
  DSH_HOST_EXIT_GRACE_MS          wait for the runtime to exit after its result
  DSH_HOST_MUTANT                 switch on one deliberate bug (see --list-mutants)
";

fn main() {
    dsh_protocol::lifeline::watch(|| {
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGTERM);
    });
    match std::env::args().nth(1).as_deref() {
        None => {}
        Some("--help" | "-h") => {
            print!("{HELP}");
            return;
        }
        Some("--version" | "-V") => {
            println!("dsh-host-driver {}", env!("CARGO_PKG_VERSION"));
            return;
        }
        Some("--list-mutants") => {
            for mutant in Mutant::ALL {
                println!("{}\t{}", mutant.name(), mutant.summary());
            }
            return;
        }
        Some(other) => {
            eprintln!("dsh-host-driver: unknown argument {other:?} (the driver speaks on stdin; see docs/host-driver.md)");
            std::process::exit(2);
        }
    }
    let config = match HostConfig::from_env() {
        Ok(config) => config,
        Err(error) => {
            eprintln!("dsh-host-driver: {error}");
            std::process::exit(2);
        }
    };
    process::adopt_orphans();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("dsh-host-driver: cannot start the async runtime: {error}");
            std::process::exit(2);
        }
    };
    let host = Arc::new(Host::new(config));
    let code = runtime.block_on(driver::serve(host, tokio::io::stdin(), tokio::io::stdout()));
    // Exit without waiting for the blocking stdin reader thread, which may never return.
    std::process::exit(code);
}
