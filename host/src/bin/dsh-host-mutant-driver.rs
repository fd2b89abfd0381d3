//! `dsh-host-mutant-driver`: `dsh-host-driver` with the kit's deliberate bugs reachable, for the
//! kit's own tests and `cargo xtask mutants` only (built only with the `mutants` feature, which no
//! release switches on). `DSH_HOST_MUTANT=<name>[,<name>...]` switches bugs on (an unknown name
//! refuses to start); `--list-mutants` prints them, one `name<TAB>summary` line each.

use dsh_host::mutants::{Mutant, Mutants};
use dsh_host::{driver, Host, HostConfig};

const HELP: &str = "\
dsh-host-mutant-driver: dsh-host-driver with the kit's deliberate bugs (the mutant gallery of
docs/reference-host.md), for the kit's own tests. Never a release binary.

Usage: dsh-host-mutant-driver [--list-mutants | --help | --version]

Environment: as dsh-host-driver (see its --help), and
  DSH_HOST_MUTANT                 the deliberate bugs to switch on, comma-separated
";

/// The host with the mutants `DSH_HOST_MUTANT` names.
fn mutant_host(mut config: HostConfig) -> Result<Host, String> {
    let mutants = Mutants::from_env()?;
    if let Some(store) = mutants.session_store_in(std::env::var_os("DSH_HOME").as_deref()) {
        config.store = Some(store);
    }
    Ok(Host::new(config).with_mutants(mutants))
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("--list-mutants") {
        for mutant in Mutant::ALL {
            println!("{}\t{}", mutant.name(), mutant.summary());
        }
        return;
    }
    let code = driver::main("dsh-host-mutant-driver", HELP, mutant_host);
    // Exit without waiting for the blocking stdin reader thread, which may never return.
    std::process::exit(code);
}
