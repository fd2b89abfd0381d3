//! What the tests that run example hosts (Node.js, Go) share: the workspace root, whether `node`
//! runs, and a finished command described for a failure message.

use std::path::{Path, PathBuf};
use std::process::Output;

/// A finished command's exit code, stdout and stderr, for a failure message.
pub fn describe(output: &Output) -> String {
    format!(
        "exit: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the conformance crate lives inside the workspace")
        .to_path_buf()
}

/// Whether `node` is installed; the tests that need it skip, saying so, when it is not.
pub fn node_available() -> bool {
    dsh_test_support::tool_available("node")
}
