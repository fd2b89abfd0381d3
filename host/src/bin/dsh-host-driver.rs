//! `dsh-host-driver`: the reference host behind the driver protocol (docs/host-driver.md), for the
//! conformance harness. Requests on stdin, replies on stdout, diagnostics on stderr; `--help` and
//! `--version` do what they say. It holds no deliberate bug and no switch for one (the kit's mutants
//! live in `dsh-host-mutant-driver`, built only with the `mutants` feature).

use dsh_host::{driver, Host};

const HELP: &str = "\
dsh-host-driver: the reference host of the dsh-profile-jsonl protocol behind the conformance
driver protocol (docs/host-driver.md). It reads requests (NDJSON) on stdin, writes replies on
stdout and diagnostics on stderr; `dsh-conformance run` starts it for every case.

Usage: dsh-host-driver [--help | --version]

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
";

fn main() {
    dsh_protocol::lifeline::watch(|| {
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGTERM);
    });
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = driver::main("dsh-host-driver", HELP, &args, |config| {
        Ok(Host::new(config))
    });
    // Exit without waiting for the blocking stdin reader thread, which may never return.
    std::process::exit(code);
}
