//! What xtask's test modules share: the repository root, a process's output for a failure
//! message, and this machine's platform in the release's `<os>-<cpu>` names.

use std::path::{Path, PathBuf};
use std::process::Output;

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
