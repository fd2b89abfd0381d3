//! `check-runtime`: a runtime judged from the host's side (`dsh-runtime-check`), on the
//! open-design surface, one of the SDK surfaces, or ACP (as its client).

use super::options::{format_parser, heading, surface_parser, RuntimeUnderTest, Select, Timing};
use dsh_engine::surface::{Persona, Surface};
use dsh_results::output::Format;
use dsh_runtime_check::checks::CHECKS;
use dsh_runtime_check::verdict::Status;
use dsh_runtime_check::world::Target;
use dsh_runtime_check::{
    acp_check, install_bundle, run_checks, sdk_check, select_checks, CannotRun, SHARED_HOME_NOTE,
};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub runtime: RuntimeUnderTest,
    /// The surface to check (docs/sdk-surfaces.md): the open-design profile, or one of dsh's SDK
    /// surfaces (`--runtime` is then the runtime executable; for `jsonrpc-agent`, the 0.1.1
    /// binary itself) [default: open-design].
    #[arg(long, value_parser = surface_parser(), help_heading = heading::RUNTIME)]
    pub surface: Option<Surface>,
    /// Use this Harness home instead of a temp one per check (a real dsh finds its installed
    /// open-design profile there). The checks never write into it themselves.
    #[arg(long, value_name = "DIR", help_heading = heading::RUNTIME)]
    pub dsh_home: Option<PathBuf>,
    /// Install this open-design bundle into a fresh Harness home first (`dsh plugin --profile
    /// open-design add TARBALL`) and check the runtime with that home. A directory (an unpacked
    /// bundle such as the kit's `examples/real-dsh-profile`) is packed into a tarball first.
    #[arg(
        long,
        value_name = "TARBALL|DIR",
        conflicts_with = "dsh_home",
        help_heading = heading::RUNTIME
    )]
    pub bundle: Option<PathBuf>,
    #[command(flatten)]
    pub select: Select,
    /// List the checks and their rule ids, and exit.
    #[arg(long, help_heading = heading::SELECTION)]
    pub list: bool,
    #[command(flatten)]
    pub timing: Timing,
    /// stdout format: `table` (`text` is the same), `json` (one document), or `jsonl` (one object
    /// per check, then a summary object).
    #[arg(long, value_parser = format_parser(), default_value = "table", help_heading = heading::OUTPUT)]
    pub format: Format,
}

/// `check-runtime`: exit 0 when every selected check passes, 1 when one fails, 2 when the checks
/// could not run (usage included).
pub fn main(args: Args) -> ExitCode {
    let surface = args.surface.unwrap_or_default();
    if args.list {
        list(surface);
        return ExitCode::SUCCESS;
    }
    if let Some(persona) = args.runtime.persona {
        // Set before any check starts: every runtime process the checks start inherits it (the
        // SDK and ACP worlds pass it through their cleared environment).
        std::env::set_var(Persona::ENV, persona.name());
    }
    let outcome = match (surface, args.runtime.path()) {
        (_, None) => Err(CannotRun("--runtime PATH is required".into())),
        (Surface::OpenDesign, Some(_)) => open_design(&args),
        (_, Some(_)) if args.dsh_home.is_some() || args.bundle.is_some() => Err(CannotRun(
            format!("--dsh-home and --bundle are the open-design surface's, not {surface}'s"),
        )),
        (Surface::Acp, Some(dsh)) => acp(&args, dsh.to_path_buf()),
        (_, Some(dsh)) => sdk(&args, surface, dsh.to_path_buf()),
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(CannotRun(why)) => {
            eprintln!("dsh-conformance check-runtime: could not run: {why}");
            ExitCode::from(2)
        }
    }
}

fn list(surface: Surface) {
    if surface == Surface::OpenDesign {
        for check in CHECKS {
            println!("{:<28} {:<28} {}", check.id, check.rule, check.summary);
        }
    } else if surface == Surface::Acp {
        for check in acp_check::checks() {
            println!("{:<28} facts {}", check.id, check.rule);
        }
    } else {
        for check in sdk_check::checks(surface) {
            println!("{:<28} {}", check.id, check.rule);
        }
    }
}

/// The open-design checks; the exit code.
fn open_design(args: &Args) -> Result<u8, CannotRun> {
    let dsh = args.runtime.path().unwrap_or(std::path::Path::new("dsh"));
    let selection = select_checks(
        CHECKS.iter().map(|check| check.id),
        &args.select.cases,
        &args.select.skip,
    )?;
    // Lives until the checks are done: the fresh home a --bundle was installed into.
    let bundle_home = args
        .bundle
        .as_deref()
        .map(|tarball| install_bundle(dsh, tarball))
        .transpose()?;
    let target = Target {
        dsh: dsh.to_path_buf(),
        dsh_home: args.dsh_home.clone(),
        home_template: bundle_home.as_ref().map(|bundle| bundle.home.clone()),
        time_scale: args.timing.time_scale,
        model_url: None,
        observed: Default::default(),
    };
    if target.dsh_home.is_some() && args.timing.jobs().get() > 1 {
        eprintln!("dsh-conformance check-runtime: {SHARED_HOME_NOTE}");
    }
    let results = run_checks(&target, &selection, args.timing.jobs())?;
    let rendered = match args.format {
        Format::Table => dsh_runtime_check::to_table(&target, &results),
        Format::Json => format!("{:#}\n", dsh_runtime_check::to_json(&target, &results)),
        Format::Jsonl => {
            dsh_runtime_check::to_jsonl(&dsh_runtime_check::to_json(&target, &results))
        }
    };
    let _ = std::io::stdout().write_all(rendered.as_bytes());
    Ok(u8::from(
        results.iter().any(|result| result.status == Status::Fail),
    ))
}

/// The ACP checks (docs/surface-acp.md), each printed as it finishes on a table; the exit code.
fn acp(args: &Args, dsh: PathBuf) -> Result<u8, CannotRun> {
    let conformance = std::env::current_exe()
        .map_err(|error| CannotRun(format!("cannot find myself: {error}")))?;
    let ids: Vec<&str> = acp_check::checks().iter().map(|check| check.id).collect();
    let selection = select_checks(ids.iter().copied(), &args.select.cases, &args.select.skip)?;
    let target = acp_check::AcpTarget::new(
        std::path::absolute(&dsh).unwrap_or(dsh),
        conformance,
        args.timing.time_scale.scale(Duration::from_secs(60)),
    );
    let table = args.format == Format::Table;
    let report = acp_check::check_all(
        &target,
        &|id| selection.matches_id(id),
        &mut |check, outcome| {
            if table {
                match outcome {
                    Ok(()) => println!("pass  {:<18} facts {}", check.id, check.rule),
                    Err(why) => {
                        println!("FAIL  {:<18} facts {}\n      {why}", check.id, check.rule)
                    }
                }
            }
        },
    );
    let failed = report["totals"]["fail"].as_u64().unwrap_or(0);
    match args.format {
        Format::Table => println!("{failed} check(s) failed"),
        Format::Json => println!("{report:#}"),
        Format::Jsonl => print!("{}", dsh_runtime_check::to_jsonl(&report)),
    }
    Ok(u8::from(failed > 0))
}

/// The checks of an SDK surface, each printed as it finishes on a table; the exit code.
fn sdk(args: &Args, surface: Surface, dsh: PathBuf) -> Result<u8, CannotRun> {
    if !sdk_check::SURFACES.contains(&surface) {
        return Err(CannotRun(
            surface.unsupported("check-runtime", &Surface::ALL),
        ));
    }
    let conformance = std::env::current_exe()
        .map_err(|error| CannotRun(format!("cannot find myself: {error}")))?;
    let ids: Vec<&str> = sdk_check::checks(surface).iter().map(|c| c.id).collect();
    let selection = select_checks(ids.iter().copied(), &args.select.cases, &args.select.skip)?;
    let target = sdk_check::Target {
        dsh: std::path::absolute(&dsh).unwrap_or(dsh),
        surface,
        conformance,
        limit: args.timing.time_scale.scale(Duration::from_secs(60)),
    };
    let table = args.format == Format::Table;
    let results = sdk_check::run(&target, &|id| selection.matches_id(id), &mut |result| {
        if table {
            match &result.outcome {
                Ok(()) => println!("pass  {:<22} {}", result.id, result.rule),
                Err(why) => println!("FAIL  {:<22} {}\n      {why}", result.id, result.rule),
            }
        }
    });
    let failed = results.iter().filter(|r| r.outcome.is_err()).count();
    let report = sdk_check::report_json(&target, &results);
    match args.format {
        Format::Table => println!("{failed} check(s) failed"),
        Format::Json => println!("{report:#}"),
        Format::Jsonl => print!("{}", dsh_runtime_check::to_jsonl(&report)),
    }
    Ok(u8::from(failed > 0))
}
