//! `dsh-host-driver`: the reference host behind the driver protocol (docs/host-driver.md), for the
//! conformance harness. Requests on stdin, replies on stdout, diagnostics on stderr.
//! `dsh-host-driver --list-mutants` prints the deliberate bugs `DSH_HOST_MUTANT` can switch on,
//! one `name<TAB>summary` line each.

use dsh_host::mutants::Mutant;
use dsh_host::{driver, process, Host, HostConfig};
use std::sync::Arc;

fn main() {
    match std::env::args().nth(1).as_deref() {
        None => {}
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
