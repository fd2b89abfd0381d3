//! What xtask's test modules share: the repository root, a process's output for a failure
//! message (and a command that must succeed), and this machine's platform in the release's
//! `<os>-<cpu>` names.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workspace root (xtask lives one level below it).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives below the workspace root")
        .to_path_buf()
}

/// A finished process's exit code, stdout and stderr, for an assertion's message.
pub fn describe(output: &Output) -> String {
    format!(
        "exit: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Runs `command` to its end and fails the test, saying `what` and how it ended, unless it
/// succeeded; its output.
pub fn checked(mut command: Command, what: &str) -> Output {
    let output = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed\n{}",
        describe(&output)
    );
    output
}

/// This machine's platform as the release archives and npm packages name it (`linux-x64`, ...).
pub fn platform() -> String {
    let os = if cfg!(target_os = "macos") {
        "darwin"
    } else {
        "linux"
    };
    let cpu = if cfg!(target_arch = "aarch64") {
        "arm64"
    } else {
        "x64"
    };
    format!("{os}-{cpu}")
}
