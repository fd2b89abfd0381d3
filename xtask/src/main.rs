//! `cargo xtask`: the repo's chores, each a subcommand that drives cargo and the kit's binaries.
//!
//! - `suite`: the main job: the corpus against the reference host with fake-dsh, results table.
//! - `ci`: everything CI checks, fast failures first (see [`ci`]).
//! - `check-corpus`: fixtures valid, ids unique, every spec rule covered.
//! - `install-fake-dsh --dir DIR [--force]`: put fake-dsh on a PATH directory as `dsh` (see
//!   [`install`]: never over the real dsh, never through a symlink).
//! - `bench`: the performance figures of docs/performance.md.
//! - `stress`: the corpora under load (busy loops on every core), repeated, every false failure
//!   listed (see [`stress`]; `stress --short` is the CI-sized form).
//! - `mutants`: the kill matrix: which cases catch each deliberately buggy reference host.
//! - `dist`: release archives with checksums and the npm packages (see [`dist`]).
//! - `wheel`, `python-wheelhouse`: the Python wheel alone from built binaries, and the example
//!   app's test requirements downloaded for offline installs (see [`python`]).
//! - `real-dsh`: install the real `@deepseek-ai/dsh` under `target/real-dsh/` (print its wrapper);
//!   `real-dsh --runtime-bin`: the real SDK runtime wheels (0.2.1, 0.1.5, 0.1.1) and the Python
//!   client wheels under `target/real-dsh-runtime-bin/`.

mod bench;
mod bench_initialize;
mod bench_model_server;
mod bench_python;
mod bench_real_dsh;
mod bench_runs;
mod ci;
mod dist;
mod install;
mod kit;
mod mutants;
mod python;
mod real_dsh;
mod real_runtime_bin;
mod stress;
mod test_lanes;
mod test_output;
mod wheel;

use clap::{Parser, Subcommand};
use kit::Kit;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

#[derive(Parser)]
#[command(name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Run the conformance suite against the reference host with fake-dsh (extra args go to `run`).
    Suite {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Formatting, clippy, the whole test suite and the corpus lint: what CI runs.
    Ci,
    /// Lint the fixture corpus: schemas, unique ids, spec-rule coverage.
    CheckCorpus,
    /// Build fake-dsh and install it as `DIR/dsh`; an existing `DIR/dsh` that is not a fake-dsh
    /// this task installed (the real dsh, npm's symlink to it) is refused.
    InstallFakeDsh {
        #[arg(long)]
        dir: PathBuf,
        /// Replace whatever `DIR/dsh` is (a symlink is replaced, never written through).
        #[arg(long)]
        force: bool,
    },
    /// Measure the figures of docs/performance.md and print them as a table.
    Bench {
        /// Only the SDK row (fake-dsh `--profile sdk` to `initialize`, `echo`, the real runtime):
        /// builds only fake-dsh, prints the row, leaves docs/performance.md alone.
        #[arg(long)]
        sdk: bool,
        /// Only the Python fixture row (the pytest plugin's setup and teardown over fake-dsh's
        /// own start): builds only fake-dsh, prints the row, leaves docs/performance.md alone.
        #[arg(long, conflicts_with = "sdk")]
        python: bool,
        /// Only the ACP row (fake-dsh `--profile acp` to `initialize`, `echo`, the real
        /// runtime), as `--sdk` does for the SDK row.
        #[arg(long, conflicts_with_all = ["sdk", "python"])]
        acp: bool,
    },
    /// Run the corpus against every reference-host mutant; rewrite docs/kill-matrix.json and the
    /// kill matrix in docs/kill-matrix.md.
    Mutants,
    /// The corpora against correct hosts while busy loops hold every core, `--rounds` times:
    /// every non-pass listed, then a summary line; exit 1 on any (`--short`: the CI-sized form).
    Stress(stress::Args),
    /// Release archives with checksums, npm tarballs and the Python wheel in target/dist/ for this
    /// platform.
    Dist(dist::Args),
    /// The Python wheel alone, for this platform, from binaries already built in `--bins`.
    Wheel(python::WheelArgs),
    /// Download what examples/python-app's tests install offline (pinned) into
    /// target/python-wheelhouse/; a second call reuses it.
    PythonWheelhouse,
    /// Install the real @deepseek-ai/dsh (pinned) under target/real-dsh/ from the npm registry and
    /// print the path of its `dsh` wrapper; a second call reuses the install. With `--runtime-bin`:
    /// the SDK runtime wheels (PyPI `deepseek-harness-runtime-bin`, pinned) and the Python
    /// client wheels (`deepseek-harness-sdk`) under target/real-dsh-runtime-bin/ instead, printing
    /// the runtimes' `dsh-0.2.1`, `dsh` and `dsh-jsonrpc-agent` wrappers.
    RealDsh {
        #[arg(long)]
        runtime_bin: bool,
    },
}

fn main() -> ExitCode {
    let result = match Cli::parse().task {
        Task::Suite { args } => suite(&args),
        Task::Ci => ci::ci(),
        Task::CheckCorpus => check_corpus(),
        Task::InstallFakeDsh { dir, force } => install_fake_dsh(&dir, force),
        Task::Bench { sdk: true, .. } => bench_one_row(|kit| bench_initialize::SDK.rows(kit)),
        Task::Bench { python: true, .. } => bench_one_row(bench_python::rows),
        Task::Bench { acp: true, .. } => bench_one_row(|kit| bench_initialize::ACP.rows(kit)),
        Task::Bench { .. } => bench(),
        Task::Mutants => kill_matrix(),
        Task::Stress(args) => stress::stress(&args),
        Task::Dist(args) => dist::main(&args),
        Task::Wheel(args) => python::wheel(&args),
        Task::PythonWheelhouse => python::wheelhouse(),
        Task::RealDsh { runtime_bin: false } => real_dsh::install(),
        Task::RealDsh { runtime_bin: true } => real_runtime_bin::install(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure { message, code }) => {
            if !message.is_empty() {
                eprintln!("xtask: {message}");
            }
            ExitCode::from(code)
        }
    }
}

struct Failure {
    message: String,
    code: u8,
}

type Outcome = Result<(), Failure>;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

fn cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.current_dir(workspace_root());
    command
}

/// Runs a command; a non-zero exit becomes a failure with the command's own exit code, so CI sees
/// what the step said (1 failed cases, 2 broken setup, 3 nothing selected).
fn run(step: &str, mut command: Command) -> Outcome {
    eprintln!("xtask: {step}");
    let started = std::time::Instant::now();
    let status = command.status().map_err(|error| Failure {
        message: format!("{step}: could not start: {error}"),
        code: 2,
    })?;
    eprintln!("xtask: {step}: {:.1} s", started.elapsed().as_secs_f64());
    exit_outcome(step, status)
}

/// A step's exit status as an outcome: a failure keeps the step's own exit code.
fn exit_outcome(step: &str, status: std::process::ExitStatus) -> Outcome {
    if status.success() {
        return Ok(());
    }
    Err(Failure {
        message: format!("{step}: failed ({status})"),
        code: status
            .code()
            .and_then(|c| u8::try_from(c).ok())
            .unwrap_or(1),
    })
}

/// Builds the kit's binaries; `progress` leaves cargo's own progress (compiling lines, the
/// progress bar on a terminal) on stderr, so a cold build does not look like a hang.
fn build_kit_binaries(release: bool, progress: bool) -> Outcome {
    let mut build = cargo();
    build.args(["build", "--bins"]);
    if !progress {
        build.arg("--quiet");
    }
    build.args([
        "--package",
        "fake-dsh",
        "--package",
        "dsh-host",
        "--package",
        "dsh-conformance",
    ]);
    if release {
        build.arg("--release");
    }
    run("build the kit's binaries", build)
}

/// `$CARGO_TARGET_DIR`, else the workspace's `target/`.
fn target_root() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

fn target_dir(release: bool) -> PathBuf {
    target_root().join(if release { "release" } else { "debug" })
}

fn kit_binary(name: &str, release: bool) -> PathBuf {
    target_dir(release).join(format!("{name}{}", std::env::consts::EXE_SUFFIX))
}

/// Cases mostly wait on the host's bounds rather than compute, so the suite overlaps 8 of them
/// unless told otherwise (docs/performance.md has the figures).
const SUITE_JOBS: &str = "8";

fn suite(args: &[String]) -> Outcome {
    eprintln!("xtask suite: building the kit (fake-dsh, dsh-host-driver, dsh-conformance)");
    build_kit_binaries(false, true)?;
    let mut conformance = Kit::built(false).conformance_run();
    conformance.current_dir(workspace_root());
    if !args
        .iter()
        .any(|arg| arg == "--jobs" || arg.starts_with("--jobs="))
    {
        conformance.args(["--jobs", SUITE_JOBS]);
    }
    // Re-run lines a cargo user can paste: the suite's own command, whatever the kit's flags.
    conformance.args(["--rerun-as", "cargo xtask suite"]);
    conformance.args(args);
    run(
        "dsh-conformance run against the reference host",
        conformance,
    )
}

fn check_corpus() -> Outcome {
    let mut lint = cargo();
    lint.args(["run", "--quiet", "--package", "dsh-conformance", "--"]);
    lint.args(corpus_lint_args());
    run("lint the fixture corpus", lint)
}

/// `dsh-conformance`'s arguments that lint the repository's fixture corpus.
fn corpus_lint_args() -> Vec<std::ffi::OsString> {
    vec![
        "lint".into(),
        "--fixtures".into(),
        workspace_root().join("fixtures").into(),
    ]
}

fn install_fake_dsh(dir: &Path, force: bool) -> Outcome {
    let refused = |message: String| Failure { message, code: 2 };
    install::check(dir, force).map_err(refused)?;
    let mut build = cargo();
    build.args([
        "build",
        "--quiet",
        "--release",
        "--package",
        "fake-dsh",
        "--bin",
        "fake-dsh",
    ]);
    run("build fake-dsh", build)?;
    let installed = install::install(&kit_binary("fake-dsh", true), dir, force).map_err(refused)?;
    eprintln!("xtask: installed {}", installed.display());
    Ok(())
}

fn bench() -> Outcome {
    build_kit_binaries(true, false)?;
    let mut example = cargo();
    example.args(["build", "--quiet", "--release", "--package", "dsh-protocol"]);
    example.args(["--example", "checker-throughput"]);
    run("build the checker throughput bench", example)?;
    let kit = Kit::built(true);
    let checker_bench = target_dir(true).join("examples/checker-throughput");
    let measured = (|| {
        let mut figures = bench::checker_throughput(&checker_bench)?;
        figures.push(bench::cold_start(&kit)?);
        figures.extend(bench_initialize::SDK.rows(&kit)?);
        figures.extend(bench_python::rows(&kit)?);
        figures.extend(bench_initialize::ACP.rows(&kit)?);
        figures.extend(bench_real_dsh::rows(&kit, &workspace_root())?);
        let corpus = bench::corpus(&kit, bench::spawn_cost()?)?;
        let cases = corpus.cases;
        figures.extend(corpus.figures);
        figures.extend(bench_runs::external_host(&kit, &workspace_root(), cases)?);
        figures.extend(bench::peak_rss(&kit)?);
        figures.extend(bench_model_server::rows(&kit)?);
        Ok::<_, String>(figures)
    })();
    let figures = measured.map_err(|message| Failure {
        message: format!("bench: {message}"),
        code: 2,
    })?;
    bench::print_table(&figures);
    bench::write_doc(&workspace_root().join("docs/performance.md"), &figures).map_err(|message| {
        Failure {
            message: format!("bench: {message}"),
            code: 2,
        }
    })
}

/// `bench --sdk`, `bench --python`: one row alone, on a release fake-dsh.
fn bench_one_row(rows: fn(&Kit) -> Result<Vec<bench::Figure>, String>) -> Outcome {
    let mut build = cargo();
    build.args(["build", "--quiet", "--release", "--package", "fake-dsh"]);
    run("build fake-dsh", build)?;
    let figures = rows(&Kit::built(true)).map_err(|message| Failure {
        message: format!("bench: {message}"),
        code: 2,
    })?;
    bench::print_table(&figures);
    Ok(())
}

fn kill_matrix() -> Outcome {
    build_kit_binaries(false, false)?;
    // The mutant driver exists only with the reference host's test-only `mutants` feature.
    let mut mutant_driver = cargo();
    mutant_driver.args([
        "build",
        "--quiet",
        "--package",
        "dsh-host",
        "--bin",
        mutants::MUTANT_DRIVER,
        "--features",
        "mutants",
    ]);
    run("build the mutant driver", mutant_driver)?;
    mutants::regenerate(&Kit::built(false), &workspace_root()).map_err(|message| Failure {
        message: format!("mutants: {message}"),
        code: 2,
    })
}
