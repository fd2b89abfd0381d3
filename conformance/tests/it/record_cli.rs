//! `dsh-conformance record` end to end, where no runtime is involved: a runtime that cannot be
//! started exits 127 with a clear error, like a shell. Recording itself (the proxy is a process
//! of its own) is dsh-record's test (`record/tests/it/`), which starts this binary too.

use std::process::{Command, Stdio};

#[test]
fn a_missing_runtime_exits_127_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(dsh_test_support::binary("dsh-conformance"))
        .arg("record")
        .arg("--out")
        .arg(dir.path().join("recordings"))
        .arg("--")
        .arg(dir.path().join("no-such-dsh"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(127));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("dsh-conformance record: cannot start")
    );
    assert!(output.stdout.is_empty());
}
