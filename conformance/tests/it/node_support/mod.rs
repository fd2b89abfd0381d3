//! What the tests that run Node.js hosts share: the workspace root and whether `node` runs.

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the conformance crate lives inside the workspace")
        .to_path_buf()
}

/// Whether `node` is installed; the tests that need it skip, saying so, when it is not.
pub fn node_available() -> bool {
    let available = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success());
    if !available {
        println!("skipped: node not installed");
    }
    available
}
