//! What the tests that run Node.js hosts share: the workspace root and whether `node` runs.

use std::path::{Path, PathBuf};

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
