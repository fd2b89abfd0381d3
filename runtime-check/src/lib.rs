//! `dsh-conformance check-runtime`'s work (the command line is the binary's): drives a runtime (a real dsh with the open-design profile, or
//! fake-dsh) through the runtime-side checks a kit can make without a real model, one fresh
//! process and world per check, and reports each check's verdict with its rule id. It starts its
//! own loopback model server (`dsh_model_server`, the default write-then-finish script) and
//! points every runtime process's `DEEPSEEK_BASE_URL` at it, so no turn reaches the network.
//!
//! This crate holds every runtime-side check of the kit: the open-design surface here, the SDK
//! and headless surfaces in [`sdk_check`], a captured stdout stream in [`validate`], and the
//! loopback model server's command ([`model_server`]). A runtime process is `dsh-engine`'s
//! [`dsh_engine::process`] (its own group, killed with it on drop).
//!
//! - [`acp_check`]: the ACP surface's checks (`DSH --profile acp`, docs/surface-acp.md).
//! - [`members`]: the member-level comparison of two SDK wires (the SDK differential test).
//! - [`world`]: the temp cwd, Harness home, canaries and commands one check uses.
//! - [`turn`]: a careful host's single turn, recorded for the checks.
//! - [`verdict`]: the checks' shared vocabulary: what a check is and concludes, and the steps
//!   several check modules share.
//! - [`checks`]: the catalogue of checks and their procedures.
//! - [`models`]: the `--models` catalog (spec 12) and a turn with each route and effort it lists.
//! - [`observed`]: the turns several checks judge (the default turn, an unknown resume) and the
//!   catalog, each observed once per run.
//! - [`product`]: the product proof of spec 8 (an HTML file written, then edited after a cold
//!   resume), judged when the runtime's model calls tools.

pub mod acp_check;
pub mod checks;
pub mod members;
pub mod model_server;
pub mod models;
pub mod observed;
pub mod product;
pub mod sdk_check;
pub mod turn;
pub mod validate;
pub mod verdict;
pub mod world;

use checks::CHECKS;
use dsh_engine::process;
use serde_json::json;
use std::path::PathBuf;
use std::time::Instant;
use verdict::Status;
use world::{Target, World};

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

/// Which checks run: `--case` and `--skip` globs over check ids, the grammar of `run`'s
/// (`dsh_engine::selection`). A glob that matches no check of `ids` is an error naming it and the
/// nearest ids.
pub fn select_checks<'a>(
    ids: impl Iterator<Item = &'a str> + Clone,
    cases: &[String],
    skip: &[String],
) -> Result<dsh_engine::selection::Selection, CannotRun> {
    let selection = dsh_engine::selection::Selection {
        case_globs: cases.to_vec(),
        skip_globs: skip.to_vec(),
        ..Default::default()
    };
    selection.check().map_err(CannotRun)?;
    let unmatched = selection.unmatched_with_hints(ids);
    if !unmatched.is_empty() {
        return Err(CannotRun(format!(
            "{} matches no check (see --list)",
            unmatched.join(", ")
        )));
    }
    Ok(selection)
}

/// What a caller tells its user when it runs the checks with a shared Harness home and more than
/// one job: [`run_checks`] runs them one at a time.
pub const SHARED_HOME_NOTE: &str = "--dsh-home is shared by every check, so the checks run one \
     at a time (--bundle gives each check a private copy and runs in parallel)";

/// Run the checks `selection` selects against `target`, `jobs` at a time; the results come back
/// in catalogue order.
pub fn run_checks(
    target: &Target,
    selection: &dsh_engine::selection::Selection,
    jobs: dsh_engine::timing::Jobs,
) -> Result<Vec<CheckResult>, CannotRun> {
    let jobs = jobs.get();
    let mut target = target.clone();
    target.dsh = resolve_program(&target.dsh)?;
    let server = dsh_model_server::ModelServer::start(dsh_model_server::default_script())
        .map_err(|error| CannotRun(format!("cannot start the model server: {error}")))?;
    target.model_url = Some(server.url().to_string());
    target.observed = Default::default();
    let target = &target;
    preflight(target)?;
    // The real dsh rewrites profiles/NAME/cordis.yml on every boot; a concurrent boot of the
    // same profile can read it empty ("config file must be a top-level array"): a shared home
    // runs the checks one at a time ([`SHARED_HOME_NOTE`]).
    let jobs = if target.dsh_home.is_some() { 1 } else { jobs };
    let selected: Vec<&verdict::Check> = CHECKS
        .iter()
        .filter(|check| selection.matches_id(check.id))
        .collect();
    let queue = std::sync::Mutex::new(selected.iter().enumerate());
    let take = || queue.lock().ok()?.next();
    let mut done: Vec<(usize, Result<CheckResult, CannotRun>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..jobs.clamp(1, selected.len().max(1)))
            .map(|_| {
                scope.spawn(|| {
                    std::iter::from_fn(take)
                        .map(|(index, check)| (index, run_one(target, check)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().unwrap_or_default())
            .collect()
    });
    done.sort_by_key(|(index, _)| *index);
    if done.len() != selected.len() {
        return Err(CannotRun("a check panicked".into()));
    }
    done.into_iter().map(|(_, result)| result).collect()
}

/// One check: in a fresh world of its own, or on what was observed for several checks.
fn run_one(target: &Target, check: &verdict::Check) -> Result<CheckResult, CannotRun> {
    let started = Instant::now();
    let outcome = match check.procedure {
        verdict::Procedure::Fresh(procedure) => {
            World::new(target, check.id).and_then(|world| procedure(target, &world))
        }
        verdict::Procedure::Observed(procedure) => procedure(target),
    }
    .map_err(|error| CannotRun(error.0))?;
    Ok(CheckResult {
        id: check.id,
        rule: check.rule,
        summary: check.summary,
        status: outcome.status,
        detail: outcome.detail,
        duration_ms: started.elapsed().as_millis() as u64,
    })
}

/// How many lines of the runtime's stderr a pre-flight error shows.
const STDERR_TAIL_LINES: usize = 20;

/// The pre-flight start, which is also the default turn most checks judge: its `--stdio`
/// process must write something on stdout (or still be running at the ready bound) before it
/// exits. A runtime that exits, or closes its stdout, having written nothing there cannot start
/// (a missing profile, a crash on start): that is one infrastructure error naming the command,
/// its exit status and the end of its stderr, not a column of failed and vacuous checks.
/// Whatever it does write is left to the checks.
fn preflight(target: &Target) -> Result<(), CannotRun> {
    let observed = target
        .observed
        .default_turn(target)
        .map_err(|error| CannotRun(error.0))?;
    let record = &observed.record;
    if !record.lines.is_empty() || record.ending != turn::Ending::Eof {
        return Ok(());
    }
    let status = record.exit.as_ref().map_or_else(
        || "still running with its stdout closed".to_string(),
        |(status, _)| process::describe_exit(status),
    );
    let tail = dsh_results::output::escape::stderr_tail(&record.stderr.kept, STDERR_TAIL_LINES);
    let tail = if tail.is_empty() {
        "  stderr: (empty)".to_string()
    } else {
        format!("  stderr (last {STDERR_TAIL_LINES} lines at most):\n{tail}")
    };
    Err(CannotRun(format!(
        "the runtime exited without writing anything on stdout, so no check was run\n  command: {} --profile {} --stdio\n  status: {status}\n{tail}",
        dsh_results::output::escape::terminal(&target.dsh.to_string_lossy()),
        world::PROFILE
    )))
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

/// A fresh Harness home a bundle was installed into, with the `HOME` and `TMPDIR` the install
/// ran with beside it; all removed on drop.
pub struct BundleHome {
    _root: tempfile::TempDir,
    pub home: PathBuf,
}

/// `dsh plugin --profile open-design add TARBALL` into a fresh temp Harness home. pnpm runs with
/// `HOME` and `TMPDIR` inside the temp dir (its store and cache land there, not in the user's
/// home), in its own process group, killed with it at the bound. The runtime's own output is
/// shown when it fails.
pub fn install_bundle(
    dsh: &std::path::Path,
    tarball: &std::path::Path,
) -> Result<BundleHome, CannotRun> {
    let dsh = resolve_program(dsh)?;
    let bundle = std::path::absolute(tarball)
        .ok()
        .filter(|path| path.exists())
        .ok_or_else(|| CannotRun(format!("--bundle {}: no such file", tarball.display())))?;
    let root = dsh_engine::scratch::tempdir("dsh-check-runtime-home-")
        .map_err(|error| CannotRun(format!("cannot create a temp home: {error}")))?;
    let tarball = if bundle.is_dir() {
        pack_directory(&bundle, root.path())?
    } else {
        bundle
    };
    let (home, user_home, tmp) = (
        root.path().join("dsh-home"),
        root.path().join("user-home"),
        root.path().join("tmp"),
    );
    for dir in [&home, &user_home, &tmp] {
        std::fs::create_dir_all(dir)
            .map_err(|error| CannotRun(format!("cannot create {}: {error}", dir.display())))?;
    }
    let mut command = std::process::Command::new(&dsh);
    command
        .args(["plugin", "--profile", world::PROFILE, "add"])
        .arg(&tarball)
        .current_dir(&home)
        .env("DSH_HOME", &home)
        .env("HOME", &user_home)
        .env("TMPDIR", &tmp)
        .env("DEEPSEEK_BASE_URL", world::UNREACHABLE_MODEL);
    let limit = std::time::Duration::from_secs(INSTALL_SECS);
    let output = output_within(command, std::process::Stdio::null(), limit)
        .map_err(|error| CannotRun(format!("plugin add: {}", error.0)))?;
    if output.status.success() {
        return Ok(BundleHome { _root: root, home });
    }
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout).trim(),
        String::from_utf8_lossy(&output.stderr).trim()
    );
    Err(CannotRun(format!(
        "`{} plugin --profile {} add {}` failed ({}): {said}{}",
        dsh.display(),
        world::PROFILE,
        tarball.display(),
        process::describe_exit(&output.status),
        pnpm_hint(&said)
    )))
}

/// What to do when the runtime's `plugin add` found no pnpm (0.2.1 runs it from `PATH`).
fn pnpm_hint(said: &str) -> &'static str {
    if said.contains("pnpm was not found") {
        " (put pnpm on PATH: `cargo xtask real-dsh` installs one in target/real-dsh/tools/bin)"
    } else {
        ""
    }
}

/// Packs an unpacked bundle directory as an npm tarball (`package/...`, without `node_modules`
/// or dot-files) into `scratch`, with the system's `tar`; returns the tarball's path.
fn pack_directory(dir: &std::path::Path, scratch: &std::path::Path) -> Result<PathBuf, CannotRun> {
    if !dir.join("package.json").is_file() {
        return Err(CannotRun(format!(
            "--bundle {}: a bundle directory needs a package.json",
            dir.display()
        )));
    }
    let staging = scratch.join("pack");
    let skip =
        |name: &std::ffi::OsStr| name == "node_modules" || name.to_string_lossy().starts_with('.');
    world::copy_tree(dir, &staging.join("package"), &skip)
        .map_err(|error| CannotRun(format!("cannot stage {}: {error}", dir.display())))?;
    let tarball = scratch.join("bundle.tgz");
    let mut tar = std::process::Command::new("tar");
    tar.arg("-czf")
        .arg(&tarball)
        .arg("-C")
        .arg(&staging)
        .arg("package");
    let output = output_within(
        tar,
        std::process::Stdio::null(),
        std::time::Duration::from_secs(60),
    )
    .map_err(|error| {
        CannotRun(format!(
            "cannot run tar to pack {}: {}",
            dir.display(),
            error.0
        ))
    })?;
    if !output.status.success() {
        return Err(CannotRun(format!(
            "tar could not pack {} ({}): {}",
            dir.display(),
            process::describe_exit(&output.status),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(tarball)
}

/// Runs `command` with `stdin` (both output pipes drained) in its own process group; at `limit`
/// the whole group is killed. Whatever is left of the group when it exits (a grandchild) is
/// killed too, and the child is reaped. The tests that run the real dsh use it as well.
pub fn output_within(
    mut command: std::process::Command,
    stdin: std::process::Stdio,
    limit: std::time::Duration,
) -> Result<std::process::Output, process::SpawnError> {
    use std::os::unix::process::CommandExt;
    command
        .stdin(stdin)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0);
    let child = process::spawn_owned(&mut command)
        .map_err(|error| process::SpawnError(format!("cannot start: {error}")))?;
    let group = nix::unistd::Pid::from_raw(child.id() as i32);
    let waiter = std::thread::spawn(move || child.wait_with_output());
    let deadline = Instant::now() + limit;
    while !waiter.is_finished() && Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL).ok();
    let output = waiter
        .join()
        .map_err(|_| process::SpawnError("the waiting thread panicked".into()))?;
    process::disown(group.as_raw());
    output.map_err(|error| process::SpawnError(error.to_string()))
}

/// How many checks got this status.
fn count_of(results: &[CheckResult], status: Status) -> usize {
    results
        .iter()
        .filter(|result| result.status == status)
        .count()
}

/// The machine-readable report.
/// `--format jsonl`: one object per check, then the run's summary (`{"summary": {...}}` with
/// the runtime, time scale and totals), each on its own line.
pub fn to_jsonl(report: &serde_json::Value) -> String {
    let mut lines = String::new();
    for check in report["checks"].as_array().into_iter().flatten() {
        lines.push_str(&format!("{check}\n"));
    }
    let mut summary = report.clone();
    if let Some(fields) = summary.as_object_mut() {
        fields.remove("checks");
    }
    lines.push_str(&format!("{}\n", json!({ "summary": summary })));
    lines
}

pub fn to_json(target: &Target, results: &[CheckResult]) -> serde_json::Value {
    json!({
        "v": 1,
        "runtime": target.dsh.to_string_lossy(),
        "time_scale": target.time_scale.factor(),
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
            "informational": count_of(results, Status::Informational),
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
        let status = result.status.as_str();
        out.push_str(&format!(
            "{status:<13}  {:<id_width$}  {:<rule_width$}  {}\n",
            result.id, result.rule, result.detail
        ));
    }
    out.push_str(&format!(
        "{} checks: {} passed, {} failed, {} inconclusive, {} informational ({})\n",
        results.len(),
        count_of(results, Status::Pass),
        count_of(results, Status::Fail),
        count_of(results, Status::Inconclusive),
        count_of(results, Status::Informational),
        target.dsh.display()
    ));
    out
}
