//! Runs the whole corpus against the independent Node.js host (`examples/node-host`) and its own
//! `node --test` unit tests; skipped when `node` is not installed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the conformance crate lives inside the workspace")
        .to_path_buf()
}

fn node_available() -> bool {
    Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success())
}

fn describe(output: &Output) -> String {
    format!(
        "exit: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn node_host_passes_the_corpus() {
    if !node_available() {
        println!("skipped: node not installed");
        return;
    }
    let root = repo_root();
    let driver = root.join("examples/node-host/driver.mjs");
    let host = format!("node {}", driver.display());
    let output = Command::new(fake_dsh::locate::binary("dsh-conformance"))
        .arg("run")
        .arg("--host")
        .arg(&host)
        .arg("--fake-dsh")
        .arg(fake_dsh::locate::binary("fake-dsh"))
        .arg("--fixtures")
        .arg(root.join("fixtures"))
        .args(["--jobs", "2"])
        .current_dir(&root)
        .output()
        .expect("dsh-conformance runs");
    assert!(
        output.status.success(),
        "the Node.js host failed the corpus\n{}",
        describe(&output)
    );
}

#[test]
fn node_host_unit_tests_pass() {
    if !node_available() {
        println!("skipped: node not installed");
        return;
    }
    let dir = repo_root().join("examples/node-host");
    let output = Command::new("node")
        .args(["--test", "test/"])
        .current_dir(&dir)
        .output()
        .expect("node --test runs");
    assert!(
        output.status.success(),
        "node --test examples/node-host/test/ failed\n{}",
        describe(&output)
    );
}
