//! The npm package's JavaScript shim (`npm/dsh-conformance/lib/index.js`), in a hand-laid
//! `node_modules` (issue 23): it runs only the platform package that sits beside it with its own
//! version, never one planted in a parent `node_modules` or on `NODE_PATH`; a Ctrl-C sent to the
//! terminal's process group reaches the binary once; and SIGKILL of the shim does not leave the
//! native binary running. Skipped, saying so, when Node.js is not installed.

use crate::support;

use support::platform;

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const VERSION: &str = "1.2.3";

/// Node 24 (a maintained LTS line, which `cargo xtask real-dsh` installs beside the real dsh) when
/// it is there, else the machine's `node`: the shim is tested on a supported Node.js.
fn node() -> PathBuf {
    dsh_test_support::real_dsh_node().unwrap_or_else(|| PathBuf::from("node"))
}

fn node_missing() -> bool {
    let found = Command::new(node()).arg("--version").output();
    if found.is_ok_and(|output| output.status.success()) {
        return false;
    }
    dsh_test_support::skip("node not installed");
    true
}

fn platform_package() -> String {
    format!("@dsh-conformance/{}", platform())
}

/// `root/project/node_modules/dsh-conformance`: the shim's sources with a manifest.
fn install_shim(project: &Path) -> PathBuf {
    let sources = Path::new(env!("CARGO_MANIFEST_DIR")).join("../npm/dsh-conformance");
    let dir = project.join("node_modules/dsh-conformance");
    for sub in ["bin", "lib"] {
        fs::create_dir_all(dir.join(sub)).expect("mkdir");
        for entry in fs::read_dir(sources.join(sub)).expect("lists") {
            let path = entry.expect("entry").path();
            fs::copy(&path, dir.join(sub).join(path.file_name().expect("name"))).expect("copy");
        }
    }
    let manifest =
        format!(r#"{{"name":"dsh-conformance","version":"{VERSION}","main":"lib/index.js"}}"#);
    fs::write(dir.join("package.json"), manifest).expect("write");
    dir
}

/// A platform package in `node_modules` with this version, whose `binary` is `body`.
fn platform_at(node_modules: &Path, version: &str, binary: &str, body: &[u8]) -> PathBuf {
    let dir = node_modules.join(platform_package());
    fs::create_dir_all(dir.join("bin")).expect("mkdir");
    let manifest = format!(
        r#"{{"name":"{}","version":"{version}"}}"#,
        platform_package()
    );
    fs::write(dir.join("package.json"), manifest).expect("write");
    let path = dir.join("bin").join(binary);
    fs::write(&path, body).expect("write");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod");
    dir
}

/// What `binDir()` answers from `project`, or the error it throws.
fn bin_dir(project: &Path, node_path: Option<&Path>) -> Result<String, String> {
    let mut command = Command::new(node());
    command.current_dir(project).arg("-e").arg(
        "try { console.log(require('dsh-conformance').binDir()) } \
         catch (e) { console.error(e.message); process.exit(1) }",
    );
    match node_path {
        Some(path) => command.env("NODE_PATH", path),
        None => command.env_remove("NODE_PATH"),
    };
    let output = command.output().expect("node runs");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).trim().to_string();
    if output.status.success() {
        Ok(text(&output.stdout))
    } else {
        Err(text(&output.stderr))
    }
}

#[test]
fn the_shim_runs_only_its_own_platform_package() {
    if node_missing() {
        return;
    }
    let root = tempfile::tempdir().expect("temp dir");
    let project = root.path().join("project");
    install_shim(&project);
    let planted = platform_at(&root.path().join("node_modules"), VERSION, "fake-dsh", b"");
    let refused = bin_dir(&project, None).expect_err("a parent's package is not ours");
    assert!(refused.contains("is not installed beside"), "{refused}");
    let refused = bin_dir(&project, Some(&planted.join(".."))).expect_err("nor NODE_PATH's");
    assert!(refused.contains("is not installed beside"), "{refused}");

    let node_modules = project.join("node_modules");
    platform_at(&node_modules, "9.9.9", "fake-dsh", b"");
    let refused = bin_dir(&project, None).expect_err("another version is refused");
    assert!(refused.contains("refusing to run it"), "{refused}");

    let ours = platform_at(&node_modules, VERSION, "fake-dsh", b"");
    let found = bin_dir(&project, None).expect("its own sibling package");
    assert_eq!(
        fs::canonicalize(found).expect("exists"),
        fs::canonicalize(ours.join("bin")).expect("exists")
    );
}

/// Starts `node <shim bin>` as the leader of its own process group (as a shell starts a job).
fn start_shim(project: &Path, binary: &str) -> std::process::Child {
    let script = project.join(format!("node_modules/dsh-conformance/bin/{binary}.js"));
    Command::new(node())
        .arg(script)
        .current_dir(project)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("node starts")
}

fn wait_for(what: &str, bound: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + bound;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_ctrl_c_reaches_the_binary_once() {
    if node_missing() {
        return;
    }
    let root = tempfile::tempdir().expect("temp dir");
    let project = root.path().join("project");
    install_shim(&project);
    let node_modules = project.join("node_modules");
    for binary in ["dsh-conformance", "fake-dsh", "dsh-host-driver"] {
        let bytes = fs::read(dsh_test_support::binary(binary)).expect("a kit binary");
        platform_at(&node_modules, VERSION, binary, &bytes);
    }
    let tmp = root.path().join("tmp");
    fs::create_dir_all(&tmp).expect("mkdir");
    // The runtime never writes ready: the case waits 10 s for it, long enough to be in flight.
    let script = node_modules.join("dsh-conformance/bin/dsh-conformance.js");
    let shim = Command::new(node())
        .arg(script)
        .args([
            "run",
            "--embedded-corpus",
            "--case",
            "lifecycle.ready-timeout",
        ])
        .args(["--color", "never"])
        .current_dir(&project)
        .env("TMPDIR", &tmp)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("node starts");
    wait_for("a case in flight", Duration::from_secs(60), || {
        fs::read_dir(&tmp)
            .into_iter()
            .flatten()
            .flatten()
            .any(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                name.starts_with("dsh-conformance-") && !name.starts_with("dsh-conformance-corpus-")
            })
    });
    // The world exists; give the driver and its runtime a moment to start (they wait 10 s).
    std::thread::sleep(Duration::from_secs(1));
    // A terminal's Ctrl-C: SIGINT to the whole foreground process group.
    killpg(Pid::from_raw(shim.id() as i32), Signal::SIGINT).expect("SIGINT sent");
    let output = shim.wait_with_output().expect("the shim exits");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("ended 1 case(s) in flight") && !stderr.contains("second signal"),
        "one interrupt, handled as the first: {stderr}"
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("1 interrupted"));
}

/// The pids whose parent is `pid` (Linux `/proc`).
fn children_of(pid: u32) -> Vec<i32> {
    let tasks = fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten();
    tasks
        .flatten()
        .filter_map(|task| fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|pid| pid.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

#[test]
fn sigkill_of_the_shim_stops_the_native_binary() {
    if node_missing() || !Path::new("/proc/self/task").exists() {
        return;
    }
    let root = tempfile::tempdir().expect("temp dir");
    let project = root.path().join("project");
    install_shim(&project);
    let driver = fs::read(dsh_test_support::binary("dsh-host-driver")).expect("the driver");
    platform_at(
        &project.join("node_modules"),
        VERSION,
        "dsh-host-driver",
        &driver,
    );
    // stdin stays open (`wait` would close it): the driver would wait on it for ever.
    let mut shim = start_shim(&project, "dsh-host-driver");
    let _stdin = shim.stdin.take();
    let mut native = Vec::new();
    wait_for(
        "the native driver to start",
        Duration::from_secs(30),
        || {
            native = children_of(shim.id());
            !native.is_empty()
        },
    );
    let native = Pid::from_raw(native[0]);
    shim.kill().expect("SIGKILL the shim");
    shim.wait().expect("reaped");
    // Gone: no such process, or a zombie its new parent has not reaped yet.
    let gone = || {
        kill(native, None).is_err()
            || fs::read_to_string(format!("/proc/{native}/stat")).is_ok_and(|stat| {
                stat.rsplit(") ")
                    .next()
                    .is_some_and(|rest| rest.starts_with('Z'))
            })
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !gone() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if !gone() {
        let _ = kill(native, Signal::SIGKILL);
        panic!("the native driver {native} outlived its shim");
    }
}
