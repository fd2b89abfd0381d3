//! `dsh-conformance model-server` end to end: it prints and writes its URL, logs requests, stops
//! on SIGTERM, and exits 2 naming a bad script, an endless one, or a log or URL file it will not
//! write (through a planted link, or over an existing log). The server itself is
//! dsh-model-server's test (`model-server/tests/it/`).

use crate::model_server_support as support;

use serde_json::Value;
use support::{chat, deltas, post};

#[test]
fn cli_prints_and_writes_its_url_logs_requests_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let url_file = dir.path().join("url");
    let log = dir.path().join("log.jsonl");
    let mut child = std::process::Command::new(dsh_test_support::binary("dsh-conformance"))
        .arg("model-server")
        .arg("--url-file")
        .arg(&url_file)
        .arg("--log")
        .arg(&log)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let url = line.trim().to_string();
    assert_eq!(std::fs::read_to_string(&url_file).unwrap().trim(), url);
    let answer = post(&url, "/chat/completions", &chat("user", "hello", false));
    assert_eq!(deltas(&answer, "content"), "Landing page");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(child.wait().unwrap().success());
    let logged: Value = serde_json::from_str(
        std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(logged["body"]["messages"][1]["content"], "hello");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"replies\": 3}").unwrap();
    let output = std::process::Command::new(dsh_test_support::binary("dsh-conformance"))
        .args(["model-server", "--script"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("bad.json"));
}

fn model_server(args: &[&std::ffi::OsStr]) -> std::process::Output {
    std::process::Command::new(dsh_test_support::binary("dsh-conformance"))
        .arg("model-server")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn cli_refuses_to_write_its_log_or_url_file_through_a_planted_link() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("bashrc");
    std::fs::write(&victim, "untouched\n").unwrap();
    for flag in ["--log", "--url-file"] {
        let planted = dir.path().join(format!("planted{flag}"));
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        let output = model_server(&[flag.as_ref(), planted.as_os_str()]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{flag}: {stderr}");
        assert!(
            stderr.contains("symbolic link") && stderr.contains("planted"),
            "{stderr}"
        );
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched\n");
    let existing = dir.path().join("old-log.jsonl");
    std::fs::write(&existing, "").unwrap();
    let output = model_server(&["--log".as_ref(), existing.as_os_str()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("exists already"));
}

#[test]
fn cli_refuses_an_endless_script_naming_the_file_and_the_bound() {
    let output = model_server(&["--script".as_ref(), "/dev/zero".as_ref()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("/dev/zero") && stderr.contains("-byte bound"),
        "{stderr}"
    );
}
