//! `dsh-host-driver`: the reference host behind the driver protocol (docs/host-driver.md), for the
//! conformance harness. Requests on stdin, replies on stdout, diagnostics on stderr.

use dsh_host::{driver, process, Host, HostConfig};
use std::sync::Arc;

fn main() {
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
