//! A `run` stopped by SIGTERM (issue 17 item 5): the case in flight finishes, every case temp dir
//! is removed (journals hold prompts), the partial summary is printed and the exit status is 143.

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
fn sigterm_removes_the_temp_dirs_and_prints_the_partial_summary() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
    let host = fake_dsh::locate::binary("dsh-host-driver");
    let mut run = Reaped(Some(
        Command::new(fake_dsh::locate::binary("dsh-conformance"))
            .arg("run")
            .arg("--host")
            .arg(host)
            .arg("--fixtures")
            .arg(&fixtures)
            .arg("--fake-dsh")
            .arg(fake_dsh::locate::binary("fake-dsh"))
            .args(["--case", "lifecycle.*", "--jobs", "1", "--color", "never"])
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
    // The case in flight finishes within its own deadline; the output pipes are read meanwhile.
    let output = child.wait_with_output().expect("the run ends");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(143), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("stopped early (interrupted)"),
        "the partial summary says why: {stderr}"
    );
    assert!(stdout.contains(" pass, "), "a summary line: {stdout}");
    let left = case_dirs(tmp.path());
    assert!(left.is_empty(), "case temp dirs left behind: {left:?}");
}
