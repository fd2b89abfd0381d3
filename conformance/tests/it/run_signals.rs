//! A `run` stopped by SIGTERM (issue 17 item 5, issue 23 item 16): the case in flight is ended at
//! once and reported `interrupted` (not left to wait out its own bounds), every case temp dir is
//! removed (journals hold prompts), the partial summary and the JSON report are written and the
//! exit status is 143.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn case_dirs(tmp: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(tmp)
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.path())
                .filter(|path| {
                    path.file_name()
                        .and_then(|name| name.to_str())
                        .is_some_and(|name| name.starts_with("dsh-conformance-"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Kills and reaps the run if an assertion fails first.
struct Reaped(Option<std::process::Child>);

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn sigterm_ends_the_case_in_flight_and_prints_the_partial_summary() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
    let json = tmp.path().join("report.json");
    let host = dsh_test_support::binary("dsh-host-driver");
    // The runtime never writes ready: the host waits 10 s for it, the case up to 30 s.
    let mut run = Reaped(Some(
        Command::new(dsh_test_support::binary("dsh-conformance"))
            .arg("run")
            .arg("--host")
            .arg(host)
            .arg("--fixtures")
            .arg(&fixtures)
            .arg("--fake-dsh")
            .arg(dsh_test_support::binary("fake-dsh"))
            .args([
                "--case",
                "lifecycle.ready-timeout",
                "--case",
                "lifecycle.first-run-*",
            ])
            .args(["--jobs", "1", "--color", "never", "--json"])
            .arg(&json)
            .env("TMPDIR", tmp.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("dsh-conformance starts"),
    ));
    let deadline = Instant::now() + Duration::from_secs(60);
    while case_dirs(tmp.path()).is_empty() {
        assert!(Instant::now() < deadline, "no case temp dir appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    let child = run.0.take().expect("the run");
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM sent");
    let output = child.wait_with_output().expect("the run ends");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(143), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("ended 1 case(s) in flight")
            && stderr.contains("stopped early (interrupted)"),
        "the partial summary says why: {stderr}"
    );
    assert!(stdout.contains("1 interrupted"), "a summary line: {stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("report.json")).expect("json");
    let cases = report["cases"].as_array().expect("cases");
    assert_eq!(
        cases.len(),
        1,
        "the longest wait ran first, alone: {cases:?}"
    );
    assert_eq!(cases[0]["id"], "lifecycle.ready-timeout");
    assert_eq!(cases[0]["verdict"], "interrupted", "{cases:?}");
    let left = case_dirs(tmp.path());
    assert!(left.is_empty(), "case temp dirs left behind: {left:?}");
}
