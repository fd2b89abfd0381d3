//! `check-runtime --surface sdk|sdk-minimal|jsonrpc-agent|headless`: fake-dsh passes every check
//! of every surface; a runtime that only echoes its input (`cat`) fails; the real SDK runtime
//! (`cargo xtask real-dsh --runtime-bin`) passes every check, skipped with a message when absent.

use std::path::{Path, PathBuf};
use std::process::Command;

fn check(surface: &str, dsh: &Path, config: Option<&str>) -> (Option<i32>, String) {
    let mut command = Command::new(dsh_test_support::binary("dsh-conformance"));
    command
        .args(["check-runtime", "--surface", surface, "--dsh"])
        .arg(dsh);
    match config {
        Some(config) => command.env("DSH_CORDIS_CONFIG", config),
        None => command.env_remove("DSH_CORDIS_CONFIG"),
    };
    let output = command.output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// fake-dsh under the 0.1.1 binary's name, in a temp dir.
fn fake_agent(dir: &Path) -> PathBuf {
    let agent = dir.join("dsh-jsonrpc-agent");
    std::os::unix::fs::symlink(dsh_test_support::binary("fake-dsh"), &agent).unwrap();
    agent
}

#[test]
fn fake_dsh_passes_every_check_of_every_sdk_surface() {
    let fake = dsh_test_support::binary("fake-dsh");
    for surface in ["sdk", "sdk-minimal", "headless"] {
        let (code, table) = check(surface, &fake, None);
        assert_eq!(code, Some(0), "{surface}:\n{table}");
        assert!(table.contains("0 check(s) failed"), "{table}");
    }
    let dir = tempfile::tempdir().unwrap();
    let (code, table) = check("jsonrpc-agent", &fake_agent(dir.path()), Some("cordis.yml"));
    assert_eq!(code, Some(0), "jsonrpc-agent:\n{table}");
}

#[test]
fn a_runtime_that_echoes_its_input_fails_the_checks() {
    let (code, table) = check("sdk-minimal", Path::new("/bin/cat"), None);
    assert_eq!(code, Some(1), "{table}");
    assert!(table.contains("FAIL  sdk.conversation"), "{table}");
    assert!(table.contains("FAIL  sdk.dropped-input"), "{table}");
}

#[test]
fn the_real_sdk_runtime_passes_every_check() {
    let Some(target) =
        dsh_test_support::target_profile_dir().and_then(|d| d.parent().map(Path::to_path_buf))
    else {
        return;
    };
    let dir = target.join("real-dsh-runtime-bin");
    if !dir.join("dsh").is_file() {
        dsh_test_support::skip(format!(
            "the real SDK runtime is not installed in {}",
            dir.display()
        ));
        return;
    }
    // Every surface of every pinned release (0.1.5 `dsh` and the 0.1.1 `dsh-jsonrpc-agent`, then
    // 0.2.1 `dsh-0.2.1`, which talks to the kit's model server in the Anthropic Messages format),
    // one release's surfaces at once: each boots the real runtime several times.
    let waves: [&[(&str, &str)]; 2] = [
        &[
            ("sdk", "dsh"),
            ("sdk-minimal", "dsh"),
            ("headless", "dsh"),
            ("jsonrpc-agent", "dsh-jsonrpc-agent"),
        ],
        &[
            ("sdk", "dsh-0.2.1"),
            ("sdk-minimal", "dsh-0.2.1"),
            ("headless", "dsh-0.2.1"),
        ],
    ];
    for wave in waves {
        let runs: Vec<_> = wave
            .iter()
            .map(|&(surface, program)| {
                let dsh = dir.join(program);
                let name = format!("{surface} on {program}");
                std::thread::spawn(move || (name, check(surface, &dsh, None)))
            })
            .collect();
        for run in runs {
            let (surface, (code, table)) = run.join().unwrap();
            assert_eq!(code, Some(0), "{surface}:\n{table}");
        }
    }
}

/// A headless runtime that answers a completed turn but leaves two daemons behind (`setsid`, one
/// holding its stdout and stderr) fails `headless.process-hygiene`, and nothing it started
/// outlives `check-runtime` (issue 33 item 6).
#[test]
fn a_runtime_that_daemonizes_fails_process_hygiene_and_leaves_nothing_alive() {
    if !Path::new("/proc/self/stat").exists() {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("daemons.pid");
    let runtime = dir.path().join("daemonizing-dsh");
    std::fs::write(
        &runtime,
        format!(
            "#!/bin/sh\nsetsid sleep 300 </dev/null >/dev/null 2>&1 &\necho $! >> {pids}\n\
             setsid sleep 30 </dev/null &\necho $! >> {pids}\n\
             echo '<html></html>' > index.html\necho 'I wrote index.html.'\n",
            pids = pids.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (code, table) = check("headless", &runtime, None);
    assert_eq!(code, Some(1), "{table}");
    assert!(table.contains("pass  headless.completed"), "{table}");
    assert!(table.contains("FAIL  headless.process-hygiene"), "{table}");
    assert!(
        table.contains("(sleep)"),
        "the leftovers are named: {table}"
    );
    let started: Vec<i32> = std::fs::read_to_string(&pids)
        .unwrap()
        .lines()
        .map(|pid| pid.trim().parse().unwrap())
        .collect();
    assert!(started.len() >= 4, "every run daemonized: {started:?}");
    let alive: Vec<&i32> = started
        .iter()
        .filter(|pid| dsh_engine::procfs::is_live(**pid))
        .collect();
    assert!(alive.is_empty(), "outlived check-runtime: {alive:?}");
}
