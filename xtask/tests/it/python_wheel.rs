//! The Python route end to end: `cargo xtask wheel` packages the debug binaries this test run
//! already has, a fresh venv installs that wheel, the official client and the example app's test
//! requirements offline (`pip install --no-index` from `target/python-wheelhouse/`, which `cargo
//! xtask python-wheelhouse` fills), and `pytest examples/python-app` passes on each persona the
//! official client supports (0.2.1, and 0.1.5 with the 0.2.1-only tests skipped, saying why),
//! once under pytest-xdist (`-n 2`); then its critical tests once against the real runtime
//! 0.2.1 (`--dsh-runtime`, keyless through the kit's model server) when `cargo xtask real-dsh
//! --runtime-bin` installed it. Skipped, saying so, without python3 and its venv module or
//! without the wheelhouse.

use crate::support::{checked, describe, repo_root};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The target dir this test binary runs from (`<target>/debug/deps/..`).
fn target_dir() -> PathBuf {
    dsh_test_support::target_profile_dir()
        .and_then(|dir| dir.parent().map(Path::to_path_buf))
        .expect("the test runs under cargo's target dir")
}

/// Every file of the wheel is in its RECORD with its sha256 and size (and nothing else is), the
/// binaries are executable, and nothing in it runs at install time (no setup.py, no .pth).
const CHECK_RECORD: &str = r#"
import base64, hashlib, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    names = set(wheel.namelist())
    [record] = [name for name in names if name.endswith(".dist-info/RECORD")]
    listed = set()
    for line in wheel.read(record).decode().splitlines():
        path, digest, size = line.rsplit(",", 2)
        listed.add(path)
        if path == record:
            continue
        data = wheel.read(path)
        expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert digest == "sha256=" + expected, path
        assert int(size) == len(data), path
    assert listed == names, names ^ listed
    for binary in ("fake-dsh", "dsh-conformance", "dsh-host-driver"):
        [path] = [name for name in names if name.endswith(".data/scripts/" + binary)]
        assert wheel.getinfo(path).external_attr >> 16 & 0o111, path
    assert not [n for n in names if n.endswith((".pth", "setup.py"))], names
"#;

/// A fresh venv with the wheel, the official client and the test requirements, all offline.
fn venv_with_the_wheel(temp: &Path, wheelhouse: &Path) -> PathBuf {
    // The debug binaries this run has (built on demand), packaged without a release build.
    let bins = dsh_test_support::binary("fake-dsh")
        .parent()
        .expect("a binary's dir")
        .to_path_buf();
    for name in ["dsh-conformance", "dsh-host-driver"] {
        dsh_test_support::binary(name);
    }
    let mut wheel = Command::new(env!("CARGO_BIN_EXE_xtask"));
    wheel
        .arg("wheel")
        .arg("--bins")
        .arg(&bins)
        .arg("--out")
        .arg(temp.join("wheel"));
    let output = checked(wheel, "cargo xtask wheel");
    let wheel = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    let mut record = Command::new("python3");
    record.args(["-c", CHECK_RECORD]).arg(&wheel);
    checked(record, "the wheel's RECORD, modes and contents");

    let venv = temp.join("venv");
    let mut create = Command::new("python3");
    create.args(["-m", "venv"]).arg(&venv);
    checked(create, "python3 -m venv");
    let python = venv.join("bin/python");
    let pip = |args: &[&str]| {
        let mut pip = Command::new(&python);
        pip.args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-index",
            "--find-links",
        ])
        .arg(wheelhouse)
        .args(args)
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .env("PIP_CONFIG_FILE", "/dev/null");
        pip
    };
    let requirements = repo_root().join("examples/python-app/requirements-test.txt");
    let mut install = pip(&["-r", requirements.to_str().expect("a UTF-8 path")]);
    install.arg(&wheel);
    checked(
        install,
        "pip install the wheel and the test requirements offline",
    );
    checked(
        pip(&["--no-deps", "--pre", "deepseek-harness-sdk==0.2.1rc2"]),
        "pip install the official client offline",
    );
    // The wheel put the binaries on the venv's PATH, and the module finds them.
    let fake_dsh = venv.join("bin/fake-dsh");
    let mut version = Command::new(&fake_dsh);
    version.arg("--version");
    checked(version, "venv/bin/fake-dsh --version");
    let mut found = Command::new(&python);
    found.args([
        "-c",
        "import dsh_conformance as d; print(d.bin_path('fake-dsh'))",
    ]);
    let found = checked(found, "dsh_conformance.bin_path");
    assert_eq!(
        String::from_utf8_lossy(&found.stdout).trim(),
        fake_dsh.display().to_string()
    );
    python
}

/// `pytest examples/python-app ARGS` in the venv; its output once it passed.
fn pytest(python: &Path, temp: &Path, run: &str, args: &[&str]) -> String {
    let mut pytest = Command::new(python);
    pytest
        .args([
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-rs",
            "--basetemp",
        ])
        .arg(temp.join(format!("pytest-{run}")))
        .args(args)
        .current_dir(repo_root().join("examples/python-app"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("PYTEST_ADDOPTS");
    let output = pytest.output().expect("runs pytest");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "pytest {run}\n{}",
        describe(&output)
    );
    let summary = stdout.lines().last().unwrap_or_default();
    assert!(
        summary.contains(" passed") && !summary.contains("failed") && !summary.contains("error"),
        "pytest {run}: {summary}"
    );
    println!("pytest {run}: {summary}");
    stdout
}

#[test]
fn the_wheel_installs_offline_and_the_example_apps_suite_passes_on_every_persona() {
    let python_ok = Command::new("python3")
        .args(["-c", "import venv, ensurepip"])
        .output()
        .is_ok_and(|output| output.status.success());
    if !python_ok {
        dsh_test_support::skip("needs python3 with its venv and ensurepip modules");
        return;
    }
    let wheelhouse = target_dir().join("python-wheelhouse");
    if !wheelhouse.join("complete.txt").is_file() {
        dsh_test_support::skip(format!(
            "no Python wheelhouse at {} (run `cargo xtask python-wheelhouse`)",
            wheelhouse.display()
        ));
        return;
    }
    let temp = tempfile::tempdir().expect("temp dir");
    let python = venv_with_the_wheel(temp.path(), &wheelhouse);

    let on_021 = pytest(&python, temp.path(), "0.2.1", &["--dsh-persona", "0.2.1"]);
    assert!(!on_021.contains("SKIPPED"), "{on_021}");
    let on_015 = pytest(&python, temp.path(), "0.1.5", &["--dsh-persona", "0.1.5"]);
    let skipped: Vec<&str> = on_015
        .lines()
        .filter(|l| l.starts_with("SKIPPED"))
        .collect();
    assert_eq!(skipped.len(), 2, "{on_015}");
    assert!(
        skipped
            .iter()
            .all(|line| line.contains("needs persona 0.2.1 (this run: 0.1.5)")),
        "{skipped:#?}"
    );
    pytest(&python, temp.path(), "xdist", &["-n", "2"]);

    let real = target_dir().join("real-dsh-runtime-bin/dsh-0.2.1");
    if !real.is_file() {
        dsh_test_support::skip(format!(
            "the real runtime's run: {} is not installed (cargo xtask real-dsh --runtime-bin)",
            real.display()
        ));
        return;
    }
    let real = real.display().to_string();
    let on_real = pytest(
        &python,
        temp.path(),
        "real-0.2.1",
        &["--dsh-runtime", &real, "-m", "not dsh_fake_only"],
    );
    assert!(!on_real.contains("SKIPPED"), "{on_real}");
}
