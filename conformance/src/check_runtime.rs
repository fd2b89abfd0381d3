//! `dsh-conformance check-runtime`: drives a runtime (a real dsh with the open-design profile, or
//! fake-dsh) through the runtime-side checks a kit can make without a real model, one fresh
//! process and world per check, and reports each check's verdict with its rule id. It starts its
//! own loopback model server (`crate::model_server`, the default write-then-finish script) and
//! points every runtime process's `DEEPSEEK_BASE_URL` at it, so no turn reaches the network.
//!
//! - [`process`]: one runtime process in its own process group, killed with its group on drop.
//! - [`world`]: the temp cwd, Harness home, canaries and commands one check uses.
//! - [`turn`]: a careful host's single turn, recorded for the checks.
//! - [`checks`]: the catalogue of checks and their procedures.
//! - [`models`]: the `--models` catalog (spec 12) and a turn with each route and effort it lists.
//! - [`product`]: the product proof of spec 8 (an HTML file written, then edited after a cold
//!   resume), judged when the runtime's model calls tools.

pub mod checks;
pub mod models;
pub mod process;
pub mod product;
pub mod turn;
pub mod world;

pub use crate::output::Format;

use checks::{Status, CHECKS};
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;
use world::{Target, World};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The runtime executable to check (a real `dsh`, or fake-dsh); needed unless `--list`.
    #[arg(long, value_name = "PATH", required_unless_present = "list")]
    pub dsh: Option<PathBuf>,
    /// Use this Harness home instead of a temp one per check (a real dsh finds its installed
    /// open-design profile there). The checks never write into it themselves.
    #[arg(long, value_name = "DIR")]
    pub dsh_home: Option<PathBuf>,
    /// Install this open-design bundle tarball into a fresh Harness home first (`dsh plugin
    /// --profile open-design add TARBALL`) and check the runtime with that home.
    #[arg(long, value_name = "TARBALL", conflicts_with = "dsh_home")]
    pub bundle: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Multiply every bound (ready, turn, cancel grace, exit) by this factor.
    #[arg(long, default_value_t = 1.0, value_name = "F")]
    pub time_scale: f64,
    /// Run only these checks (repeatable).
    #[arg(long = "check", value_name = "ID")]
    pub checks: Vec<String>,
    /// List the checks and their rule ids, and exit.
    #[arg(long)]
    pub list: bool,
}

/// One check's verdict.
#[derive(Debug, Clone)]
pub struct CheckResult {
    pub id: &'static str,
    pub rule: &'static str,
    pub summary: &'static str,
    pub status: Status,
    pub detail: String,
    pub duration_ms: u64,
}

/// Why the checks could not run at all (exit 2).
#[derive(Debug)]
pub struct CannotRun(pub String);

/// Run the selected checks (all when `only` is empty) against `target`.
pub fn run_checks(target: &Target, only: &[String]) -> Result<Vec<CheckResult>, CannotRun> {
    if let Some(unknown) = only.iter().find(|id| checks::find(id).is_none()) {
        return Err(CannotRun(format!("unknown check {unknown:?} (see --list)")));
    }
    let mut target = target.clone();
    target.dsh = resolve_program(&target.dsh)?;
    let server = crate::model_server::ModelServer::start(crate::model_server::default_script())
        .map_err(|error| CannotRun(format!("cannot start the model server: {error}")))?;
    target.model_url = Some(server.url().to_string());
    let target = &target;
    if !(target.time_scale.is_finite() && target.time_scale > 0.0) {
        return Err(CannotRun(format!(
            "--time-scale must be a positive number, not {}",
            target.time_scale
        )));
    }
    let mut results = Vec::new();
    for check in CHECKS
        .iter()
        .filter(|check| only.is_empty() || only.iter().any(|id| id == check.id))
    {
        let started = Instant::now();
        let world = World::new(target, check.id).map_err(|error| CannotRun(error.0))?;
        let outcome = (check.procedure)(target, &world).map_err(|error| CannotRun(error.0))?;
        results.push(CheckResult {
            id: check.id,
            rule: check.rule,
            summary: check.summary,
            status: outcome.status,
            detail: outcome.detail,
            duration_ms: started.elapsed().as_millis() as u64,
        });
    }
    Ok(results)
}

/// An absolute path for `program`: a bare name is looked up on PATH, a relative path is taken from
/// the current directory (each check runs the runtime from its own temp cwd).
pub fn resolve_program(program: &std::path::Path) -> Result<PathBuf, CannotRun> {
    let candidate = if program.components().count() == 1 && !program.is_file() {
        std::env::var_os("PATH")
            .into_iter()
            .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
            .map(|dir| dir.join(program))
            .find(|candidate| candidate.is_file())
            .ok_or_else(|| CannotRun(format!("{} is not on PATH", program.display())))?
    } else {
        program.to_path_buf()
    };
    if !candidate.is_file() {
        return Err(CannotRun(format!("{} is not a file", candidate.display())));
    }
    std::path::absolute(&candidate).map_err(|error| {
        CannotRun(format!(
            "cannot make {} absolute: {error}",
            candidate.display()
        ))
    })
}

/// The longest `plugin add` may take (pnpm installs the bundle's dependencies).
const INSTALL_SECS: u64 = 600;

/// `dsh plugin --profile open-design add TARBALL` into a fresh temp Harness home (removed when
/// the returned dir drops). The runtime's own output is shown when it fails.
pub fn install_bundle(
    dsh: &std::path::Path,
    tarball: &std::path::Path,
) -> Result<tempfile::TempDir, CannotRun> {
    let dsh = resolve_program(dsh)?;
    let tarball = std::path::absolute(tarball)
        .ok()
        .filter(|path| path.is_file())
        .ok_or_else(|| CannotRun(format!("--bundle {}: no such file", tarball.display())))?;
    let home = tempfile::Builder::new()
        .prefix("dsh-check-runtime-home-")
        .tempdir()
        .map_err(|error| CannotRun(format!("cannot create a temp home: {error}")))?;
    let child = std::process::Command::new(&dsh)
        .args(["plugin", "--profile", world::PROFILE, "add"])
        .arg(&tarball)
        .current_dir(home.path())
        .env("DSH_HOME", home.path())
        .env("DEEPSEEK_BASE_URL", world::UNREACHABLE_MODEL)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|error| CannotRun(format!("cannot start {}: {error}", dsh.display())))?;
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    // Both pipes drain while it runs (pnpm is chatty); a stuck install is killed at the bound.
    let waiter = std::thread::spawn(move || child.wait_with_output());
    let deadline = Instant::now() + std::time::Duration::from_secs(INSTALL_SECS);
    while !waiter.is_finished() && Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    if !waiter.is_finished() {
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).ok();
    }
    let output = waiter
        .join()
        .map_err(|_| CannotRun("plugin add: the waiting thread panicked".into()))?
        .map_err(|error| CannotRun(format!("plugin add: {error}")))?;
    if output.status.success() {
        return Ok(home);
    }
    Err(CannotRun(format!(
        "`{} plugin --profile {} add {}` failed ({}): {}{}",
        dsh.display(),
        world::PROFILE,
        tarball.display(),
        process::describe_exit(&output.status),
        String::from_utf8_lossy(&output.stdout).trim(),
        String::from_utf8_lossy(&output.stderr).trim()
    )))
}

/// How many checks got this status.
fn count_of(results: &[CheckResult], status: Status) -> usize {
    results
        .iter()
        .filter(|result| result.status == status)
        .count()
}

/// The machine-readable report.
pub fn to_json(target: &Target, results: &[CheckResult]) -> serde_json::Value {
    json!({
        "v": 1,
        "runtime": target.dsh.to_string_lossy(),
        "time_scale": target.time_scale,
        "checks": results.iter().map(|result| json!({
            "id": result.id,
            "rule": result.rule,
            "summary": result.summary,
            "status": result.status.as_str(),
            "detail": result.detail,
            "duration_ms": result.duration_ms,
        })).collect::<Vec<_>>(),
        "totals": {
            "pass": count_of(results, Status::Pass),
            "fail": count_of(results, Status::Fail),
            "inconclusive": count_of(results, Status::Inconclusive),
        },
    })
}

/// The terminal table, ending with a summary line.
pub fn to_table(target: &Target, results: &[CheckResult]) -> String {
    let id_width = results
        .iter()
        .map(|result| result.id.len())
        .max()
        .unwrap_or(0);
    let rule_width = results
        .iter()
        .map(|result| result.rule.len())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for result in results {
        let status = match result.status {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Inconclusive => "inconclusive",
        };
        out.push_str(&format!(
            "{status:<12}  {:<id_width$}  {:<rule_width$}  {}\n",
            result.id, result.rule, result.detail
        ));
    }
    out.push_str(&format!(
        "{} checks: {} passed, {} failed, {} inconclusive ({})\n",
        results.len(),
        count_of(results, Status::Pass),
        count_of(results, Status::Fail),
        count_of(results, Status::Inconclusive),
        target.dsh.display()
    ));
    out
}

pub fn main(args: Args) -> ExitCode {
    if args.list {
        for check in CHECKS {
            println!("{:<28} {:<28} {}", check.id, check.rule, check.summary);
        }
        return ExitCode::SUCCESS;
    }
    let Some(dsh) = args.dsh else {
        eprintln!("dsh-conformance check-runtime: could not run: --dsh PATH is required");
        return ExitCode::from(2);
    };
    // Lives until the checks are done: the fresh home a --bundle was installed into.
    let bundle_home = match &args.bundle {
        None => None,
        Some(tarball) => match install_bundle(&dsh, tarball) {
            Ok(home) => Some(home),
            Err(CannotRun(why)) => {
                eprintln!("dsh-conformance check-runtime: could not run: {why}");
                return ExitCode::from(2);
            }
        },
    };
    let target = Target {
        dsh,
        dsh_home: bundle_home
            .as_ref()
            .map(|home| home.path().to_path_buf())
            .or(args.dsh_home),
        time_scale: args.time_scale,
        model_url: None,
    };
    let results = match run_checks(&target, &args.checks) {
        Ok(results) => results,
        Err(CannotRun(why)) => {
            eprintln!("dsh-conformance check-runtime: could not run: {why}");
            return ExitCode::from(2);
        }
    };
    let rendered = match args.format {
        Format::Table => to_table(&target, &results),
        Format::Json => format!("{:#}\n", to_json(&target, &results)),
        Format::Jsonl => format!("{}\n", to_json(&target, &results)),
    };
    let _ = std::io::stdout().write_all(rendered.as_bytes());
    if results.iter().any(|result| result.status == Status::Fail) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
