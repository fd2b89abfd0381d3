//! `dsh-host-mutant-driver`: `dsh-host-driver` with the kit's deliberate bugs reachable, for the
//! kit's own tests and `cargo xtask mutants` only (built only with the `mutants` feature, which no
//! release switches on). `--mutant <name>[,<name>...]` switches bugs on (an unknown name refuses to
//! start); `--list-mutants` prints them, one `name<TAB>summary` line each. The switch is an
//! argument, never the environment, so nothing inherited can turn a bug on.

use dsh_host::mutants::{Mutant, Mutants};
use dsh_host::{driver, Host, HostConfig};

const HELP: &str = "\
dsh-host-mutant-driver: dsh-host-driver with the kit's deliberate bugs (the mutant gallery of
docs/reference-host.md), for the kit's own tests. Never a release binary.

Usage: dsh-host-mutant-driver [--mutant NAME[,NAME...]] [--list-mutants | --help | --version]

The environment is read as by dsh-host-driver (see its --help).
";

/// The host with `mutants` on.
fn mutant_host(mut config: HostConfig, mutants: Mutants) -> Host {
    if let Some(store) = mutants.session_store_in(std::env::var_os("DSH_HOME").as_deref()) {
        config.store = Some(store);
    }
    Host::new(config).with_mutants(mutants)
}

/// The `--mutant` lists out of `args` (none: the correct host), and the arguments left.
fn take_mutants(args: Vec<String>) -> Result<(Mutants, Vec<String>), String> {
    let mut lists = Vec::new();
    let mut rest = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.strip_prefix("--mutant=") {
            Some(list) => lists.push(list.to_string()),
            None if arg == "--mutant" => lists.push(args.next().ok_or("--mutant needs a name")?),
            None => rest.push(arg),
        }
    }
    Ok((Mutants::parse(&lists.join(","))?, rest))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--list-mutants") {
        for mutant in Mutant::ALL {
            println!("{}\t{}", mutant.name(), mutant.summary());
        }
        return;
    }
    let (mutants, rest) = take_mutants(args).unwrap_or_else(|error| {
        eprintln!("dsh-host-mutant-driver: {error}");
        std::process::exit(2);
    });
    let code = driver::main("dsh-host-mutant-driver", HELP, &rest, |config| {
        Ok(mutant_host(config, mutants))
    });
    // Exit without waiting for the blocking stdin reader thread, which may never return.
    std::process::exit(code);
}
