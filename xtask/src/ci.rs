//! `cargo xtask ci`: everything CI checks, as named steps, fast failures first: formatting, lints,
//! the corpus, the doc links, the build on the other supported platforms and on the oldest
//! supported toolchain; then the network install of the real runtimes; then every test.

use crate::{cargo, check_corpus, exit_outcome, real_dsh, run, workspace_root, Failure, Outcome};
use std::process::Command;

/// The other platforms the kit ships for (release archives, npm packages): checked, not linked.
const OTHER_TARGETS: [&str; 2] = ["x86_64-apple-darwin", "aarch64-apple-darwin"];

pub fn ci() -> Outcome {
    fmt()?;
    clippy()?;
    check_corpus()?;
    doc_links()?;
    other_platforms()?;
    oldest_toolchain()?;
    // The differential and end-to-end tests need the real runtime; no registry fails CI loudly.
    real_dsh::install()?;
    crate::real_runtime_bin::ensure_installed()?;
    // The Python wheel's test installs the example app's requirements offline from here.
    crate::python::wheelhouse()?;
    tests()
}

fn fmt() -> Outcome {
    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--", "--check"]);
    run("cargo fmt --check", fmt)
}

fn clippy() -> Outcome {
    let mut clippy = cargo();
    clippy.args(["clippy", "--workspace", "--all-targets", "--quiet"]);
    clippy.args(["--", "-D", "warnings"]);
    run("cargo clippy", clippy)?;
    // The workspace lint builds the reference host with its test-only `mutants` feature (its
    // tests switch it on); lint the release build, without it, too.
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
    doc.args(["doc", "--workspace", "--no-deps", "--quiet"])
        .env("RUSTDOCFLAGS", "-D rustdoc::broken_intra_doc_links");
    run("cargo doc (intra-doc links)", doc)
}

/// The libraries and binaries build for macOS too (`cargo check`: no linker needed). A target
/// whose standard library is not installed (`rustup target add`, which `.ci/run` does) is skipped,
/// saying so.
fn other_platforms() -> Outcome {
    let installed = rustup(&["target", "list", "--installed"]).unwrap_or_default();
    for target in OTHER_TARGETS {
        if !installed.lines().any(|line| line.trim() == target) {
            eprintln!("xtask: skipped the {target} check: its std is not installed (rustup target add {target})");
            continue;
        }
        let mut check = cargo();
        check.args(["check", "--workspace", "--quiet", "--target", target]);
        run(&format!("cargo check --target {target}"), check)?;
    }
    Ok(())
}

/// The workspace's `rust-version` is true: the libraries and binaries build with that toolchain
/// (in their own target dir, so the main build's artefacts stay warm). Skipped, saying so, when
/// rustup has no such toolchain (`.ci/run` installs it).
fn oldest_toolchain() -> Outcome {
    let version = rust_version()?;
    let toolchains = rustup(&["toolchain", "list"]).unwrap_or_default();
    if !toolchains
        .lines()
        .any(|line| line.starts_with(&format!("{version}-")))
    {
        eprintln!("xtask: skipped the rust-version check: no {version} toolchain (rustup toolchain install {version})");
        return Ok(());
    }
    let mut check = Command::new("rustup");
    check
        .args(["run", &version, "cargo", "check", "--workspace", "--quiet"])
        .current_dir(workspace_root())
        .env(
            "CARGO_TARGET_DIR",
            workspace_root().join("target/rust-version"),
        );
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
        &format!("cargo check with rust {version} (rust-version)"),
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

fn tests() -> Outcome {
    let mut test = cargo();
    // Every test binary runs even after one fails, so one CI log names every failure.
    test.args(["test", "--workspace", "--no-fail-fast"]);
    run_tests_with_total("cargo test --workspace --no-fail-fast", test)
}

/// Runs a `cargo test`, echoing its stdout, and ends with one total over all its test binaries
/// (`ci: N passed, N failed, N skipped`), so a reader of the log need not add up the per-binary
/// lines (the last of which is a doc-test binary that often runs nothing).
fn run_tests_with_total(step: &str, mut command: Command) -> Outcome {
    use std::io::{BufRead, BufReader};
    eprintln!("xtask: {step}");
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|error| Failure {
            message: format!("{step}: could not start: {error}"),
            code: 2,
        })?;
    let mut totals = [0u64; 3];
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            println!("{line}");
            if let Some(counts) = line.strip_prefix("test result: ") {
                for (index, label) in [" passed", " failed", " ignored"].iter().enumerate() {
                    totals[index] += counts
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
        }
    }
    let status = child.wait().map_err(|error| Failure {
        message: format!("{step}: {error}"),
        code: 2,
    })?;
    println!(
        "ci: {} passed, {} failed, {} skipped",
        totals[0], totals[1], totals[2]
    );
    exit_outcome(step, status)
}
