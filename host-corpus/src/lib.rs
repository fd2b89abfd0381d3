//! The host corpus: the fixture corpus (`fixtures/<area>/`) against one host driver, with
//! rule-traced verdicts (`dsh-conformance run`, the open-design surface).
//!
//! - [`suite`]: the library API ([`run_suite`], [`Suite`] for one case at a time).
//! - `case`: one case: world, driver, steps; `expect`: a step's own expectations; `checks`: the
//!   global checks made on every run, one file each; `events`: the spec 9 event comparison.
//! - `world`, `driver`, `transcript`: the temp world, the driver client, the bounded transcript;
//!   `mapping_watch`: how a run rewrites a saved session mapping (in place or replaced whole).
//! - [`verdict`]: findings -> verdict; [`corpus`]: the lint of
//!   the host cases and the rule catalog.
//!
//! What every corpus shares (processes, the supervisor, leftovers, the journal, selection) is
//! `dsh-engine`'s; the results model and the outputs are `dsh-results`'. This crate root holds
//! the run itself: from the typed `run` options ([`RunOptions`]) to a config, live output, the
//! exit code. The command line that fills them, and the stop-signal handlers, are the
//! `dsh-conformance` binary's.

mod case;
mod checks;
pub mod corpus;
pub mod dialect;
mod driver;
mod events;
mod expect;
mod mapping_watch;
mod preflight;
pub mod project_files;
pub mod suite;
mod transcript;
pub mod verdict;
mod world;

pub use case::needed_capabilities;
pub use dsh_results::expectations::Expectations;
pub use suite::{run_suite, HarnessError, Suite, SuiteConfig, Variant};

use dsh_engine::interrupt;
use dsh_engine::programs::{sibling_of_exe, split_command};
use dsh_engine::selection::{CaseEntry, Selection};
use dsh_results::model::{CaseResult, SuiteReport};
use dsh_results::reporter::{ListedCase, Reporter, RunOutcome, RunStart};
use dsh_results::run_args::{fake_dsh_from_env, fake_dsh_of, runtime_from_env_note, RunOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

/// Exit code after Ctrl-C (128 + SIGINT, as shells report it); SIGTERM gives 143.
pub use dsh_engine::interrupt::EXIT_INTERRUPTED;

/// `run` on the open-design surface: the cases of `args`' selection against its host, each
/// handed to `reporter` as it finishes; `Err` when the run could not start.
pub fn run(args: &RunOptions, reporter: &dyn Reporter) -> Result<RunOutcome, String> {
    if args.host.is_none() && args.host_args.is_empty() {
        reporter.note(
            "no --host: running the built-in reference host (dsh-host-driver beside this executable)",
        );
    }
    let corpus = dsh_engine::corpus::choose(args.fixtures.as_deref(), args.embedded_corpus)?;
    if let Some(note) = corpus.announcement() {
        reporter.note(&note);
    }
    if let Some(note) = runtime_from_env_note(args) {
        reporter.note(&note);
    }
    let mut config = config_from_args(args, corpus.path().to_path_buf())?;
    config.corpus_source = Some(corpus.source_label());
    // A planted link at an output path stops the run before any case: nothing is written.
    for path in [
        &args.junit,
        &args.markdown,
        &args.json,
        &args.write_expectations,
    ]
    .into_iter()
    .flatten()
    {
        dsh_engine::files::refuse_symlink(path).map_err(|e| e.to_string())?;
    }
    let suite = match Suite::prepare(&config) {
        Ok(suite) => suite,
        Err(HarnessError::NoMatch(message)) => {
            reporter.note(&message);
            return Ok(RunOutcome::NothingSelected);
        }
        Err(error) => return Err(error.to_string()),
    };
    if args.list {
        return Ok(list(args, &suite, reporter));
    }
    if let Some(warning) = suite.corpus().warning() {
        reporter.note(&warning);
    }
    if suite.entries().is_empty() {
        reporter.note("no case selected (check --case / --skip / --section / --shard)");
        return Ok(RunOutcome::NothingSelected);
    }
    if let Some(expectations) = &config.expectations {
        let ids: Vec<&str> = suite
            .entries()
            .iter()
            .map(|entry| entry.id.as_str())
            .collect();
        for warning in expectations.unselected_warnings(&ids) {
            reporter.note(&warning);
        }
    }
    match suite.preflight() {
        // Stopped before the first case (a signal at start-up, or during the handshake): no
        // case runs, and the outputs say so.
        Err(_) if interrupt::signalled() => {}
        Err(error) => return Err(error.to_string()),
        Ok(_) => {}
    }
    let mut report = run_live(args, &suite, reporter);
    report.rerun_args = rerun_args(args, &config);
    report.rerun_as = args.rerun_as.clone();
    if let Some(path) = &args.write_expectations {
        Expectations::from_failures(&report, config.expectations.as_ref()).write(path)?;
    }
    let stopped = stop_reason(args, &suite, &report);
    if let Some(reason) = &stopped {
        reporter.note(&format!(
            "stopped early ({reason}): {} of {} cases ran",
            report.cases.len(),
            suite.entries().len()
        ));
    }
    Ok(RunOutcome::Ran {
        report: Box::new(report),
        stopped,
    })
}

/// Runs the suite handing each case to `reporter` as it finishes; a stop signal and
/// `--fail-fast` stop it between cases.
fn run_live(args: &RunOptions, suite: &Suite, reporter: &dyn Reporter) -> SuiteReport {
    reporter.start(&RunStart {
        host: suite.host_name(),
        variant: suite.variant_name(),
        total: suite.entries().len() * args.verify,
        id_width: suite
            .entries()
            .iter()
            .map(|e| e.id.chars().count())
            .max()
            .unwrap_or(4),
        header: format!("{}\n", suite.header_line()),
    });
    // The first SIGINT or SIGTERM starts no new case and ends the cases in flight at once (their
    // drivers' process groups are killed, their supervisors kill the rest of each tree, and they
    // are reported `interrupted`); their temp dirs are removed as usual, and the caller prints
    // the partial summary and writes the outputs. A second one removes every case's temp dir
    // still alive (journals hold prompts) and ends the process at once; the per-case supervisors
    // kill the drivers' trees when they see the harness gone (`dsh_engine::interrupt`). The
    // command line installs the handlers before anything else; a signal that came before this
    // point already set the stop flag, so no case starts.
    let stop = interrupt::stop_flag();
    let fail_fast = args.fail_fast;
    let observer = |case: &CaseResult| {
        // A driver gone before its first reply is said once, first, with its stderr's tail;
        // each case it fails then blames the driver contract in a line of its own.
        suite.say_early_exit_once(|note| {
            eprintln!("dsh-conformance run: the host driver is broken: {note}")
        });
        reporter.case(case);
        if fail_fast && case.verdict.is_failure() {
            stop.store(true, Ordering::SeqCst);
        }
    };
    let report = suite.run_observed(&observer, stop);
    reporter.finish();
    report
}

fn stop_reason(args: &RunOptions, suite: &Suite, report: &SuiteReport) -> Option<String> {
    if interrupt::signalled() {
        Some("interrupted".to_string())
    } else if args.fail_fast && report.cases.len() < suite.entries().len() {
        Some("--fail-fast".to_string())
    } else {
        None
    }
}

/// `--list`: the selected cases with their summaries and what JSON lists about them. A selection
/// that matches nothing says so on stderr (nothing measured).
fn list(args: &RunOptions, suite: &Suite, reporter: &dyn Reporter) -> RunOutcome {
    if suite.entries().is_empty() {
        let dir = args.fixtures.as_deref();
        let dir = dir.map_or_else(
            || "the fixtures dir".to_string(),
            |dir| dir.display().to_string(),
        );
        reporter.note(&format!(
            "--list: no case matches the selection (--case / --skip / --section / --shard) in {dir}"
        ));
        return RunOutcome::NothingSelected;
    }
    let listed = |entry: &CaseEntry| {
        let (spec, rules) = entry
            .case
            .as_ref()
            .map(|case| (case.spec.clone(), case.rules.clone()))
            .unwrap_or_default();
        ListedCase {
            id: entry.id.clone(),
            summary: Some(entry.summary()),
            detail: Some(
                serde_json::json!({"id": entry.id, "summary": entry.summary(),
                "spec": spec, "rules": rules, "file": entry.file, "loads": entry.case.is_ok()}),
            ),
        }
    };
    RunOutcome::Listed(suite.entries().iter().map(listed).collect())
}

/// The flags a re-run line needs besides `--host`, `--variant` and `--case`: every one given that
/// changes a result, with paths made absolute so the line works from any directory.
fn rerun_args(args: &RunOptions, config: &SuiteConfig) -> Vec<String> {
    let mut out = Vec::new();
    let path = |p: &Path| {
        std::path::absolute(p)
            .unwrap_or_else(|_| p.to_path_buf())
            .display()
            .to_string()
    };
    if args.fixtures.is_some() {
        out.extend(["--fixtures".to_string(), path(&config.fixtures)]);
    }
    if args.runtime.is_some() || fake_dsh_from_env().is_some() {
        out.extend(["--runtime".to_string(), path(&config.fake_dsh)]);
    }
    if args.time_scale != dsh_engine::timing::TimeScale::ONE {
        out.extend(["--time-scale".to_string(), args.time_scale.to_string()]);
    }
    if let Some(file) = &args.expectations {
        out.extend(["--expectations".to_string(), path(file)]);
    }
    for pair in &args.variant_env {
        out.extend(["--variant-env".to_string(), pair.clone()]);
    }
    if let Some(name) = &args.host_name {
        out.extend(["--host-name".to_string(), name.clone()]);
    }
    for name in &args.pass_env {
        out.extend(["--pass-env".to_string(), name.clone()]);
    }
    if args.dialect != dialect::DEFAULT_DIALECT {
        out.extend(["--dialect".to_string(), args.dialect.clone()]);
    }
    out
}

fn config_from_args(args: &RunOptions, fixtures: PathBuf) -> Result<SuiteConfig, String> {
    let mut host = match &args.host {
        Some(command) => split_command(command)?,
        None if !args.host_args.is_empty() => Vec::new(),
        None => vec![sibling_of_exe("dsh-host-driver")?.display().to_string()],
    };
    host.extend(args.host_args.iter().cloned());
    if host.is_empty() {
        return Err("--host is empty".to_string());
    }
    let host = dsh_engine::programs::absolute_paths(host);
    let fake_dsh = fake_dsh_of(args)?;
    let mut variant = args
        .variant
        .as_deref()
        .map(Variant::named)
        .unwrap_or_default();
    for pair in &args.variant_env {
        let (key, value) = pair
            .split_once('=')
            .filter(|(key, _)| !key.is_empty())
            .ok_or_else(|| format!("--variant-env {pair:?} is not KEY=VALUE"))?;
        dsh_engine::child_env::check_variant_env(key, value)
            .map_err(|why| format!("--variant-env {pair:?}: {why}"))?;
        variant.env.insert(key.to_string(), value.to_string());
    }
    let expectations = args
        .expectations
        .as_deref()
        .map(Expectations::load)
        .transpose()?;
    let dialect = dialect::Dialect::named(&args.dialect)?;
    Ok(SuiteConfig {
        host,
        host_name: args.host_name.clone(),
        fixtures,
        selection: Selection {
            case_globs: args.cases.clone(),
            sections: args.sections.clone(),
            skip_globs: args.skip.clone(),
            shard: args.shard,
        },
        jobs: args.jobs,
        time_scale: args.time_scale,
        fake_dsh,
        variant,
        expectations,
        verify: args.verify,
        driver_per_case: args.driver_per_case,
        corpus_source: None,
        pass_env: args.pass_env.clone(),
        dialect,
    })
}
