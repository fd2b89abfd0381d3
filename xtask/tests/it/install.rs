//! `cargo xtask install-fake-dsh` refuses, before building anything, to replace a `dsh` that is
//! not a fake-dsh it installed: npm's bin symlink to the real `dsh.js` stays, and so does the
//! file it points to.

use std::process::Command;

#[test]
fn install_fake_dsh_refuses_npm_s_symlink_to_the_real_dsh() {
    let temp = tempfile::tempdir().unwrap();
    let real = temp.path().join("dsh.js");
    std::fs::write(&real, "#!/usr/bin/env node\n// the real dsh\n").unwrap();
    let bin = temp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(&real, bin.join("dsh")).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["install-fake-dsh", "--dir"])
        .arg(&bin)
        .output()
        .expect("xtask runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("refusing to replace"), "{stderr}");
    assert!(stderr.contains("--force"), "{stderr}");
    let link = std::fs::symlink_metadata(bin.join("dsh")).unwrap();
    assert!(link.file_type().is_symlink(), "the link is kept");
    assert_eq!(
        std::fs::read_to_string(&real).unwrap(),
        "#!/usr/bin/env node\n// the real dsh\n"
    );
}
