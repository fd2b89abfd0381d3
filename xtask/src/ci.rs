//! `cargo xtask ci`: everything CI checks, as named steps, fast failures first: formatting, lints,
//! the build of every test, the corpus, the doc links, the build on the oldest supported
//! toolchain for this platform and the other supported one (one check, both targets); then the
//! network install of the real runtimes; then every test. On CI's two cores the run is bound by CPU (the tests keep both busy), so the steps
//! run one after another and each is paid once: one build of every test binary, no rebuild per
//! package, one macOS target.

use crate::{
    cargo, exit_outcome, real_dsh, run, test_lanes, test_output, workspace_root, Failure, Outcome,
};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The other platform the kit ships for (release archives, npm packages, wheels): checked, not
/// linked, with the rust-version toolchain beside this platform's target. macOS on arm64 stands
/// for both macOS CPUs: no code of the kit depends on the CPU (no `target_arch`), only on the OS,
/// and a second target would cost the CI machine a whole check build of every dependency.
const OTHER_TARGET: &str = "aarch64-apple-darwin";

pub fn ci() -> Outcome {
    let started = Instant::now();
    fmt()?;
    clippy()?;
    // Every test and kit binary, built once: the corpus lint runs the built `dsh-conformance`,
    // and the test step builds nothing more.
    build_tests()?;
    lint_corpus()?;
    doc_links()?;
    release_host_lints()?;
    oldest_toolchain_both_platforms()?;
    // The differential and end-to-end tests need the real runtime; no registry fails CI loudly.
    real_dsh::install()?;
    crate::real_runtime_bin::ensure_installed()?;
    // The Python wheel's test installs the example app's requirements offline from here.
    crate::python::wheelhouse()?;
    tests()?;
    eprintln!("xtask: ci took {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// The workspace's tests and binaries, as the test step runs them, built without running any.
fn build_tests() -> Outcome {
    let mut build = cargo();
    build.args(["test", "--workspace", "--no-run"]);
    run("cargo test --workspace --no-run", build)
}

/// The fixture corpus linted by the `dsh-conformance` [`build_tests`] built (a `cargo run` of the
/// one package would resolve its features apart from the workspace's and build it again).
fn lint_corpus() -> Outcome {
    let mut lint = Command::new(crate::kit_binary("dsh-conformance", false));
    lint.args(crate::corpus_lint_args())
        .current_dir(workspace_root());
    run("lint the fixture corpus", lint)
}

fn fmt() -> Outcome {
    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--", "--check"]);
    run("cargo fmt --check", fmt)
}

fn clippy() -> Outcome {
    let mut clippy = cargo();
    clippy.args(["clippy", "--workspace", "--all-targets"]);
    clippy.args(["--", "-D", "warnings"]);
    run("cargo clippy", clippy)
}

/// The workspace lint builds the reference host with its test-only `mutants` feature (its tests
/// switch it on); this lints the release build, without it, too.
fn release_host_lints() -> Outcome {
    let mut release_host = cargo();
    release_host.args([
        "clippy",
        "--package",
        "dsh-host",
        "--lib",
        "--bins",
        "--quiet",
    ]);
    release_host.args(["--", "-D", "warnings"]);
    run("cargo clippy (dsh-host without mutants)", release_host)
}

/// Every intra-doc link of the workspace's own crates resolves.
fn doc_links() -> Outcome {
    let mut doc = cargo();
    doc.args(["doc", "--workspace", "--no-deps"])
        .env("RUSTDOCFLAGS", "-D rustdoc::broken_intra_doc_links");
    run("cargo doc (intra-doc links)", doc)
}

/// The workspace's `rust-version` is true, and the kit builds for macOS too: the libraries and
/// binaries checked (`cargo check`: no linker needed) with that toolchain for [`OTHER_TARGET`],
/// in their own target dir (so the main build's artefacts stay warm). That one build covers the
/// toolchain for every line but the Linux-only ones (`cfg(target_os = "linux")`, a few functions
/// of the process handling); there, a std API newer than `rust-version` is clippy's
/// `incompatible_msrv` warning, which [`clippy`] denies, so a second check build of every
/// dependency for this platform (45 s of the step's 100 on CI's two cores) is not paid. Without
/// the macOS std (`rustup target add --toolchain`) this platform is checked instead, saying so;
/// without the toolchain (`rustup toolchain install`) the step is skipped, saying so; `.ci/run`
/// installs both.
fn oldest_toolchain_both_platforms() -> Outcome {
    let version = rust_version()?;
    let toolchains = rustup(&["toolchain", "list"]).unwrap_or_default();
    let Some(toolchain) = toolchains
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .find(|name| name.starts_with(&format!("{version}-")))
    else {
        eprintln!("xtask: skipped the rust-version and macOS check: no {version} toolchain (rustup toolchain install {version})");
        return Ok(());
    };
    let installed = rustup(&["target", "list", "--installed", "--toolchain", toolchain]);
    let host = toolchain
        .trim_start_matches(&format!("{version}-"))
        .to_string();
    let target = if installed
        .is_some_and(|list| list.lines().any(|line| line.trim() == OTHER_TARGET))
    {
        OTHER_TARGET
    } else {
        eprintln!("xtask: skipped the {OTHER_TARGET} check: its std is not installed for {version} (rustup target add --toolchain {version} {OTHER_TARGET}); checking {host} instead");
        host.as_str()
    };
    let mut check = Command::new("rustup");
    check
        .args(["run", &version, "cargo", "check", "--workspace"])
        .current_dir(workspace_root())
        .env(
            "CARGO_TARGET_DIR",
            workspace_root().join("target/rust-version"),
        );
    check.args(["--target", target]);
    for inherited in [
        "CARGO",
        "RUSTC",
        "RUSTDOC",
        "RUSTUP_TOOLCHAIN",
        "CARGO_MANIFEST_DIR",
    ] {
        check.env_remove(inherited);
    }
    run(
        &format!("cargo check with rust {version} (rust-version) for {target}"),
        check,
    )
}

/// The workspace's `rust-version` from the root Cargo.toml.
fn rust_version() -> Result<String, Failure> {
    let manifest =
        std::fs::read_to_string(workspace_root().join("Cargo.toml")).map_err(|e| Failure {
            message: format!("cannot read Cargo.toml: {e}"),
            code: 2,
        })?;
    manifest
        .lines()
        .find_map(|line| line.strip_prefix("rust-version = \""))
        .and_then(|rest| rest.strip_suffix('"'))
        .map(str::to_string)
        .ok_or_else(|| Failure {
            message: "Cargo.toml's [workspace.package] has no rust-version".to_string(),
            code: 2,
        })
}

/// What `rustup ARGS` prints, when rustup is there and succeeds.
fn rustup(args: &[&str]) -> Option<String> {
    let output = Command::new("rustup").args(args).output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Every test: the test binaries side by side in lanes, one per core and one more ([`test_lanes`]), then the
/// doc tests. Every binary runs even after one fails, so one CI log names every failure.
fn tests() -> Outcome {
    let step = "the tests";
    eprintln!("xtask: {step}");
    let started = Instant::now();
    let binaries = test_lanes::list(cargo()).map_err(|message| Failure { message, code: 2 })?;
    // One lane more than cores: the slowest binaries wait on the runtimes they drive (a real
    // runtime boots for seconds), so a core would idle at one binary per core.
    let lanes = std::thread::available_parallelism().map_or(2, |n| n.get()) + 1;
    eprintln!("xtask: {} test binaries in {lanes} lanes", binaries.len());
    let print = Mutex::new(());
    let temp = TestTemp::new();
    // `cargo test --no-run` has just built every binary of the workspace from this tree: the tests
    // take those instead of building each again for its own package.
    let mut env = vec![(dsh_test_support::BINARIES_BUILT_ENV, "1")];
    if let Some(dir) = temp.dir() {
        eprintln!("xtask: the tests' temp dir is {dir} (tmpfs)");
        env.push(("TMPDIR", dir));
    }
    let ran = test_lanes::run(
        binaries,
        lanes,
        &env,
        |binary| eprintln!("xtask: started {}", binary.label),
        |ran| {
            let _one_at_a_time = print.lock();
            println!(
                "\n     Running {} ({})",
                ran.binary.label,
                ran.binary.executable.display()
            );
            print!("{}", ran.output);
            println!(
                "xtask: {} took {:.1} s",
                ran.binary.label,
                ran.took.as_secs_f64()
            );
        },
    );
    let mut run = TestRun::default();
    for binary in &ran {
        run.binary(binary);
    }
    let mut doc = cargo();
    doc.args(["test", "--workspace", "--doc"]).envs(env);
    let doc_status =
        test_output::follow(doc, |line| run.line(&line.text)).map_err(|error| Failure {
            message: format!("cargo test --doc: {error}"),
            code: 2,
        })?;
    run.finish(started.elapsed());
    let failed: Vec<&str> = ran
        .iter()
        .filter(|binary| !binary.success)
        .map(|binary| binary.binary.label.as_str())
        .collect();
    if !failed.is_empty() {
        return Err(Failure {
            message: format!("{step}: failed in {}", failed.join(", ")),
            code: 1,
        });
    }
    exit_outcome("cargo test --doc", doc_status)
}

/// The tests' temp dir, when `TMPDIR` is not set and `/dev/shm` is a tmpfs: a fresh directory
/// there, removed when the tests end. Each real-runtime process the differentials start in a
/// fresh `HOME` unpacks about 3,700 files of its bundled packages there (the executables are
/// `pkg` builds) and installs about 500 directories of profile packages in its Harness home; on
/// the CI machine's ext4, creating that many inodes among the run's recently deleted ones cost
/// most of the test step's system time (one real headless turn: 2.83 s of system time in `/tmp`,
/// 0.39 s on tmpfs). A cache shared between the processes is no way out: two processes unpacking
/// into one at once crashed the real 0.1.5 with SIGBUS.
struct TestTemp(Option<String>);

impl TestTemp {
    fn new() -> Self {
        let tmpfs = std::fs::read_to_string("/proc/mounts")
            .is_ok_and(|mounts| mounts.lines().any(|line| line.contains(" /dev/shm tmpfs ")));
        if std::env::var_os("TMPDIR").is_some() || !tmpfs {
            return Self(None);
        }
        let dir = format!("/dev/shm/dsh-xtask-ci-{}", std::process::id());
        Self(std::fs::create_dir(&dir).is_ok().then_some(dir))
    }

    fn dir(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

impl Drop for TestTemp {
    fn drop(&mut self) {
        if let Some(dir) = &self.0 {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// What the test run showed: the libtest totals, the skip lines, and each binary's time.
#[derive(Default)]
struct TestRun {
    totals: [u64; 3],
    skips: Vec<String>,
    binaries: Vec<(String, Duration)>,
}

impl TestRun {
    /// One binary's run: its lines, and how long it took.
    fn binary(&mut self, ran: &test_lanes::Ran) {
        for line in ran.output.lines() {
            self.line(line);
        }
        self.binaries.push((ran.binary.label.clone(), ran.took));
    }

    fn line(&mut self, line: &str) {
        let text = line.trim();
        if text.starts_with(dsh_test_support::SKIP_PREFIX) {
            self.skips.push(text.to_string());
        } else if let Some(counts) = text.strip_prefix("test result: ") {
            self.count(counts);
        }
    }

    /// Adds one `test result:` line's counts.
    fn count(&mut self, counts: &str) {
        for (index, label) in [" passed", " failed", " ignored"].iter().enumerate() {
            self.totals[index] += counts
                .split(';')
                .find_map(|part| {
                    part.trim()
                        .trim_start_matches("ok. ")
                        .trim_start_matches("FAILED. ")
                        .strip_suffix(label)
                })
                .and_then(|n| n.trim().parse::<u64>().ok())
                .unwrap_or(0);
        }
    }

    /// Where the time went, the skips, then the closing total.
    fn finish(mut self, took: Duration) {
        println!(
            "\nxtask: the tests took {:.0} s; the slowest binaries:",
            took.as_secs_f64()
        );
        self.binaries
            .sort_by_key(|(_, took)| std::cmp::Reverse(*took));
        for (binary, took) in self.binaries.iter().take(8) {
            println!("xtask:   {:>6.1} s  {binary}", took.as_secs_f64());
        }
        for skip in &self.skips {
            println!("{skip}");
        }
        // A test that skipped its check ran as a libtest pass: it counts once, as skipped (a
        // test that skipped several checks still counts once).
        let skipped_tests = distinct_tests(&self.skips);
        println!(
            "ci: {} passed, {} failed, {} skipped",
            self.totals[0].saturating_sub(skipped_tests),
            self.totals[1],
            self.totals[2] + skipped_tests
        );
    }
}

/// How many tests the skip lines name (`test-skipped: <test>: <why>`; one test may skip several checks).
fn distinct_tests(skips: &[String]) -> u64 {
    let mut tests: Vec<&str> = skips
        .iter()
        .filter_map(|line| line.strip_prefix(dsh_test_support::SKIP_PREFIX))
        .map(|rest| rest.split_once(": ").map_or(rest, |(test, _)| test))
        .collect();
    tests.sort_unstable();
    tests.dedup();
    tests.len() as u64
}

#[cfg(test)]
mod tests {
    use super::distinct_tests;

    #[test]
    fn a_test_that_skipped_several_checks_counts_once() {
        let skips = [
            "test-skipped: it::go_host::passes: no Go toolchain",
            "test-skipped: it::official::runs: 0.1.5rc1: no wheel",
            "test-skipped: it::official::runs: 0.2.1rc2: no wheel",
        ]
        .map(String::from);
        assert_eq!(distinct_tests(&skips), 2);
        assert_eq!(distinct_tests(&[]), 0);
    }
}
