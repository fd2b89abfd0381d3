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

/// Whether a case dir holds a `journal.jsonl` its runtime has written to (within two levels).
fn runtime_started(dir: &Path) -> bool {
    let journal_written =
        |dir: &Path| std::fs::metadata(dir.join("journal.jsonl")).is_ok_and(|meta| meta.len() > 0);
    journal_written(dir)
        || std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .any(|entry| journal_written(&entry.path()))
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
    // The case is in flight once its runtime journaled its start: the driver it runs under is
    // registered long before (a case dir alone may still be setting up, so a signal then would
    // find no case in flight to end).
    let deadline = Instant::now() + Duration::from_secs(60);
    while !case_dirs(tmp.path()).iter().any(|dir| runtime_started(dir)) {
        assert!(Instant::now() < deadline, "no case's runtime started");
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

/// A client that writes its pid to `pid_file`, then hangs (the case's limit is 40 s).
fn hanging_client(dir: &Path, pid_file: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let client = dir.join("hanging-client");
    std::fs::write(
        &client,
        format!(
            "#!/bin/sh\necho $$ > {}\nexec sleep 60\n",
            pid_file.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&client, std::fs::Permissions::from_mode(0o755)).unwrap();
    client
}

/// `run --surface headless` with `client`, TMPDIR in `tmp`, JSON report at `json`.
fn client_run(client: &Path, tmp: &Path, json: &Path, extra: &[&str]) -> Reaped {
    Reaped(Some(
        Command::new(dsh_test_support::binary("dsh-conformance"))
            .args(["run", "--surface", "headless", "--host"])
            .arg(client)
            .arg("--fake-dsh")
            .arg(dsh_test_support::binary("fake-dsh"))
            .args(["--case", "headless.completed", "--case", "headless.error"])
            .args(["--jobs", "1", "--color", "never", "--json"])
            .arg(json)
            .args(extra)
            .current_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."))
            .env("TMPDIR", tmp)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("dsh-conformance starts"),
    ))
}

/// Waits until the client wrote its pid; returns it.
fn client_pid(pid_file: &Path) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(pid) = std::fs::read_to_string(pid_file)
            .unwrap_or_default()
            .trim()
            .parse()
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "the client never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The client surfaces stop like the host run (issue 33 item 1): the first SIGTERM or SIGINT
/// kills the client in flight, reports its case `interrupted`, starts no other case, writes the
/// JSON report, removes the case's temp dir and exits 128 + the signal.
#[test]
fn a_client_run_stopped_by_a_signal_kills_the_client_and_writes_its_outputs() {
    use nix::sys::signal::Signal;
    for (signal, code) in [(Signal::SIGTERM, 143), (Signal::SIGINT, 130)] {
        let tmp = tempfile::tempdir().expect("temp dir");
        let pid_file = tmp.path().join("client.pid");
        let client = hanging_client(tmp.path(), &pid_file);
        let json = tmp.path().join("report.json");
        let mut run = client_run(&client, tmp.path(), &json, &[]);
        let client_pid = client_pid(&pid_file);
        let child = run.0.take().expect("the run");
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        nix::sys::signal::kill(pid, signal).expect("signal sent");
        let output = child.wait_with_output().expect("the run ends");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(code),
            "{signal}: {stdout}\n{stderr}"
        );
        assert!(
            stderr.contains("ended 1 case(s) in flight")
                && stderr.contains("stopped early (interrupted)"),
            "{signal}: the partial summary says why: {stderr}"
        );
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).expect("report.json"))
                .expect("json");
        let cases = report["cases"].as_array().expect("cases");
        assert_eq!(
            cases.len(),
            1,
            "{signal}: no case starts after it: {cases:?}"
        );
        assert_eq!(cases[0]["verdict"], "interrupted", "{signal}: {cases:?}");
        assert!(
            !dsh_engine::procfs::is_live(client_pid),
            "{signal}: the client {client_pid} outlived run"
        );
        let left = case_dirs(tmp.path());
        assert!(
            left.is_empty(),
            "{signal}: case temp dirs left behind: {left:?}"
        );
    }
}

/// Kills the process whose pid a client wrote to a file (a daemon `run` leaves when a second
/// signal ends it at once), whatever the test's outcome.
struct KillOnDrop(PathBuf);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(&self.0)
            .unwrap_or_default()
            .trim()
            .parse()
        {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// A second signal ends a client run at once: the client is killed, the case temp dirs are
/// removed, no report is written. The client leaves a daemon carrying the case's token, which
/// keeps the interrupted case in its teardown's grace (4 s at `--time-scale 4`) while the second
/// signal is sent (two signals sent back to back may arrive as one).
#[test]
fn a_second_signal_ends_a_client_run_at_once_removing_its_temp_dirs() {
    use nix::sys::signal::Signal;
    use std::io::BufRead;
    let tmp = tempfile::tempdir().expect("temp dir");
    let pid_file = tmp.path().join("client.pid");
    let daemon_file = tmp.path().join("daemon.pid");
    let _daemon = KillOnDrop(daemon_file.clone());
    let client = tmp.path().join("hanging-client");
    std::fs::write(
        &client,
        format!(
            "#!/bin/sh\necho $$ > {}\nsetsid sleep 60 </dev/null >/dev/null 2>&1 &\n\
             echo $! > {}\nexec sleep 60\n",
            pid_file.display(),
            daemon_file.display()
        ),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&client, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let json = tmp.path().join("report.json");
    let mut run = client_run(&client, tmp.path(), &json, &["--time-scale", "4"]);
    let client_pid = client_pid(&pid_file);
    let mut child = run.0.take().expect("the run");
    let stderr = child.stderr.take().expect("stderr piped");
    let (lines, received) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = lines.send(line);
        }
    });
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, Signal::SIGTERM).expect("signal sent");
    let mut seen = Vec::new();
    while let Ok(line) = received.recv_timeout(Duration::from_secs(60)) {
        seen.push(line);
        if seen
            .last()
            .is_some_and(|line| line.contains("interrupted; ended"))
        {
            break;
        }
    }
    nix::sys::signal::kill(pid, Signal::SIGTERM).expect("signal sent");
    let status = child.wait().expect("the run ends");
    let _ = reader.join();
    seen.extend(received.try_iter());
    let stderr = seen.join("\n");
    assert_eq!(status.code(), Some(143), "{stderr}");
    assert!(stderr.contains("stopped by a second signal"), "{stderr}");
    assert!(!json.exists(), "a second signal writes nothing");
    assert!(
        !dsh_engine::procfs::is_live(client_pid),
        "the client {client_pid} outlived run"
    );
    let left = case_dirs(tmp.path());
    assert!(left.is_empty(), "case temp dirs left behind: {left:?}");
}

/// Issue 40 finding 7: a SIGTERM that reaches `run` the moment it exists, before it could load
/// anything, is not lost and does not kill it bare: the run starts no case, writes its JUnit and
/// JSON outputs and exits 143. The signal is sent as soon as the process has become
/// `dsh-conformance` (its exec done), with SIGTERM blocked across the exec, so it is pending from
/// the first instruction on (the default action would otherwise race the handlers' installation):
/// a run that installs its handlers and unblocks them first handles it at once; one that installed
/// them late (after loading the corpus, as before) ran its cases and never saw it.
#[test]
fn a_sigterm_at_start_up_still_writes_every_output() {
    use std::os::unix::process::CommandExt;
    let tmp = tempfile::tempdir().expect("temp dir");
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
    let (junit, json) = (tmp.path().join("junit.xml"), tmp.path().join("report.json"));
    let conformance = dsh_test_support::binary("dsh-conformance");
    let mut command = Command::new(&conformance);
    command
        .arg("run")
        .arg("--host")
        .arg(dsh_test_support::binary("dsh-host-driver"))
        .arg("--fixtures")
        .arg(&fixtures)
        .arg("--runtime")
        .arg(dsh_test_support::binary("fake-dsh"))
        .args([
            "--case",
            "lifecycle.first-run-*",
            "--jobs",
            "1",
            "--color",
            "never",
        ])
        .arg("--junit")
        .arg(&junit)
        .arg("--json")
        .arg(&json)
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: only pthread_sigmask, async-signal-safe, between fork and exec.
    unsafe {
        command.pre_exec(|| {
            let mut term = nix::sys::signal::SigSet::empty();
            term.add(nix::sys::signal::Signal::SIGTERM);
            term.thread_block().map_err(std::io::Error::from)
        });
    }
    let mut run = Reaped(Some(command.spawn().expect("dsh-conformance starts")));
    let pid = run.0.as_ref().expect("the run").id();
    let exe = PathBuf::from(format!("/proc/{pid}/exe"));
    let conformance = conformance.canonicalize().expect("the binary's path");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_link(&exe).ok().as_deref() != Some(conformance.as_path()) {
        assert!(
            Instant::now() < deadline,
            "the run never became dsh-conformance"
        );
        std::thread::yield_now();
    }
    let child = run.0.take().expect("the run");
    let pid = nix::unistd::Pid::from_raw(pid as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM sent");
    let output = child.wait_with_output().expect("the run ends");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(143), "{stdout}\n{stderr}");
    let junit = std::fs::read_to_string(&junit).expect("junit.xml written");
    assert!(junit.contains("<testsuites"), "{junit}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("report.json written"))
            .expect("report.json is JSON");
    assert_eq!(
        report["cases"].as_array().map(Vec::len),
        Some(0),
        "no case started after the signal: {report}"
    );
}
