//! Shared test world for fake-dsh's integration tests: a temp Harness home with the profile
//! installed, a project dir, a journal, and running processes that are always killed and reaped.

#![allow(dead_code)]

pub mod acp;

use assert_cmd::Command as AssertCommand;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

/// How long a test waits for anything before failing (a safety bound, not an assertion).
pub const PATIENCE: Duration = Duration::from_secs(30);

pub struct World {
    pub root: tempfile::TempDir,
}

impl World {
    /// A world with the profile installed.
    pub fn new() -> World {
        let world = World::without_profile();
        let manifest = world.home().join("profiles/open-design/package.json");
        std::fs::create_dir_all(manifest.parent().unwrap()).unwrap();
        std::fs::write(&manifest, b"{\"name\":\"@open-design/dsh-runtime\"}\n").unwrap();
        world
    }

    /// A world with only this profile installed (`profiles/<name>/package.json`).
    pub fn with_profile(name: &str) -> World {
        let world = World::without_profile();
        let manifest = world.home().join(format!("profiles/{name}/package.json"));
        std::fs::create_dir_all(manifest.parent().unwrap()).unwrap();
        // A stand-in record (fake_dsh::home::is_stand_in_manifest): named for the profile's bundle.
        let package = fake_dsh::profile::Profile::from_name(name)
            .map_or("a bundle", |profile| profile.identity().bundle_package);
        let record = serde_json::json!({ "name": package });
        std::fs::write(&manifest, format!("{record}\n")).unwrap();
        world
    }

    pub fn without_profile() -> World {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("dsh-home")).unwrap();
        std::fs::create_dir_all(root.path().join("project")).unwrap();
        World { root }
    }

    pub fn home(&self) -> PathBuf {
        self.root.path().join("dsh-home")
    }

    pub fn project(&self) -> PathBuf {
        self.root.path().join("project")
    }

    pub fn journal_path(&self) -> PathBuf {
        self.root.path().join("journal.jsonl")
    }

    pub fn scenario_path(&self) -> PathBuf {
        self.root.path().join("scenario.json")
    }

    /// Writes the scenario every later command of this world plays.
    pub fn scenario(&self, scenario: Value) -> &World {
        std::fs::write(
            self.scenario_path(),
            serde_json::to_vec_pretty(&scenario).unwrap(),
        )
        .unwrap();
        self
    }

    fn configure(&self, command: &mut Command) {
        command
            .current_dir(self.root.path())
            .env("DSH_HOME", self.home())
            .env("FAKE_DSH_JOURNAL", self.journal_path())
            .env("FAKE_DSH_WATCHDOG_SECS", "60")
            .env("DEEPSEEK_API_KEY", "canary-key-value")
            .env_remove("FAKE_DSH_VERSION")
            .env_remove("FAKE_DSH_SCENARIO");
        if self.scenario_path().exists() {
            command.env("FAKE_DSH_SCENARIO", self.scenario_path());
        }
    }

    /// A one-shot command (assert_cmd) in this world.
    pub fn cmd(&self, args: &[&str]) -> AssertCommand {
        let mut command = Command::new(env!("CARGO_BIN_EXE_fake-dsh"));
        command.args(args);
        self.configure(&mut command);
        let mut command = AssertCommand::from_std(command);
        command.timeout(PATIENCE);
        command
    }

    /// Starts `dsh --profile open-design --stdio` in its own process group.
    pub fn stdio(&self) -> Running {
        self.spawn(&["--profile", "open-design", "--stdio"], |_| {})
    }

    /// Starts fake-dsh with extra environment settings.
    pub fn spawn(&self, args: &[&str], extra: impl FnOnce(&mut Command)) -> Running {
        let (mut running, stdout) = self.start(args, extra);
        running.lines = read_lines(stdout);
        running
    }

    /// Starts fake-dsh and hands back its raw stdout instead of reading it.
    pub fn spawn_taking_stdout(&self, args: &[&str]) -> (Running, std::process::ChildStdout) {
        self.start(args, |_| {})
    }

    /// Starts fake-dsh in its own process group, piped, its stderr drained in the background; the
    /// caller decides what reads stdout (the returned `Running` reports no stdout lines).
    fn start(
        &self,
        args: &[&str],
        extra: impl FnOnce(&mut Command),
    ) -> (Running, std::process::ChildStdout) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_fake-dsh"));
        command.args(args);
        self.configure(&mut command);
        extra(&mut command);
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = command.spawn().unwrap();
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let stderr = read_all(child.stderr.take().unwrap());
        let (_, lines) = mpsc::channel();
        let running = Running {
            child,
            stdin,
            lines,
            stderr: Some(stderr),
        };
        (running, stdout)
    }

    /// The journal's entries, as JSON values, each checked against `journal.schema.json` and
    /// the typed [`fake_dsh::journal::Entry`].
    pub fn journal(&self) -> Vec<Value> {
        let Ok(text) = std::fs::read_to_string(self.journal_path()) else {
            return Vec::new();
        };
        text.lines()
            .map(|line| {
                let entry: Value = serde_json::from_str(line).expect("every journal line is JSON");
                if let Err(errors) = dsh_protocol::schema::validate("journal.schema.json", &entry) {
                    panic!("journal entry {entry} is not schema-valid: {errors:?}");
                }
                serde_json::from_value::<fake_dsh::journal::Entry>(entry.clone())
                    .unwrap_or_else(|error| panic!("journal entry {entry} is not typed: {error}"));
                entry
            })
            .collect()
    }

    /// Journal entries of one process.
    pub fn journal_of(&self, pid: u32) -> Vec<Value> {
        self.journal()
            .into_iter()
            .filter(|entry| entry["pid"] == pid)
            .collect()
    }

    /// Waits until some journal entry matches.
    pub fn await_journal(&self, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(found) = self.journal().into_iter().find(|entry| matches(entry)) {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "no journal entry {what}: {:#?}",
                self.journal()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// An execute command for this world's project.
    pub fn execute(&self, request_id: &str, prompt: &str, resume: Option<&str>) -> Value {
        serde_json::json!({
            "v": 1, "type": "execute", "request_id": request_id,
            "cwd": self.project().to_string_lossy(), "prompt": prompt,
            "resume_session_id": resume,
            "model": {"provider": "deepseek-official", "id": "deepseek-chat"},
            "reasoning_effort": null, "mcp_servers": []
        })
    }
}

fn read_lines(mut stdout: impl Read + Send + 'static) -> Receiver<Vec<u8>> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut pending = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            match stdout.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(read) => {
                    pending.extend_from_slice(&chunk[..read]);
                    while let Some(end) = pending.iter().position(|&byte| byte == b'\n') {
                        let line: Vec<u8> = pending.drain(..=end).collect();
                        if sender.send(line).is_err() {
                            return;
                        }
                    }
                }
            }
        }
        if !pending.is_empty() {
            let _ = sender.send(pending);
        }
    });
    receiver
}

fn read_all(mut stream: impl Read + Send + 'static) -> Receiver<Vec<u8>> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut all = Vec::new();
        let _ = stream.read_to_end(&mut all);
        let _ = sender.send(all);
    });
    receiver
}

/// A running fake-dsh, killed (its whole process group) and reaped on drop.
pub struct Running {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Vec<u8>>,
    stderr: Option<Receiver<Vec<u8>>>,
}

impl Running {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends one command line.
    pub fn send(&mut self, command: &Value) {
        self.send_raw(format!("{command}\n").as_bytes());
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is still open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// Writes bytes, reporting a failure (the process stopped reading) instead of panicking.
    pub fn try_send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let stdin = self.stdin.as_mut().expect("stdin is still open");
        stdin.write_all(bytes)?;
        stdin.flush()
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The next stdout line (raw bytes, newline included); None at EOF.
    pub fn next_line(&mut self) -> Option<Vec<u8>> {
        match self.lines.recv_timeout(PATIENCE) {
            Ok(line) => Some(line),
            Err(mpsc::RecvTimeoutError::Disconnected) => None,
            Err(mpsc::RecvTimeoutError::Timeout) => panic!("no stdout line within {PATIENCE:?}"),
        }
    }

    /// The next stdout line as a JSON frame.
    pub fn next_frame(&mut self) -> Value {
        let line = self
            .next_line()
            .expect("stdout ended before the next frame");
        serde_json::from_slice(&line).unwrap_or_else(|error| {
            panic!("not a frame: {error}: {:?}", String::from_utf8_lossy(&line))
        })
    }

    /// Reads frames until one of this type arrives, returning all of them.
    pub fn frames_until(&mut self, frame_type: &str) -> Vec<Value> {
        let mut frames = Vec::new();
        loop {
            let frame = self.next_frame();
            let done = frame["type"] == frame_type;
            frames.push(frame);
            if done {
                return frames;
            }
        }
    }

    /// Every remaining stdout frame until EOF.
    pub fn rest(&mut self) -> Vec<Value> {
        let mut frames = Vec::new();
        while let Some(line) = self.next_line() {
            frames.push(serde_json::from_slice(&line).expect("a frame"));
        }
        frames
    }

    /// Waits for the process to exit.
    pub fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "fake-dsh did not exit within {PATIENCE:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Everything it wrote to stderr (waits for stderr to close).
    pub fn stderr(&mut self) -> Vec<u8> {
        self.stderr
            .take()
            .expect("stderr is read once")
            .recv_timeout(PATIENCE)
            .expect("stderr did not close")
    }

    /// Sends a signal to the whole process group.
    pub fn signal_group(&self, signal: Signal) {
        let _ = killpg(Pid::from_raw(self.pid() as i32), signal);
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stdin = None;
        let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether a pid names a live (not zombie) process.
pub fn alive(pid: i64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| {
                !rest.trim_start().starts_with('Z') && !rest.trim_start().starts_with('X')
            })
            .unwrap_or(false),
        Err(_) => false,
    }
}

/// Waits until a pid is gone.
pub fn await_death(pid: i64) {
    let deadline = Instant::now() + PATIENCE;
    while alive(pid) {
        assert!(Instant::now() < deadline, "process {pid} is still alive");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The exit code of a status, panicking when a signal ended it.
pub fn code(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| panic!("ended by a signal: {status:?}"))
}

/// The journal entries of one `event` kind, in order.
pub fn entries<'a>(journal: &'a [Value], event: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    journal.iter().filter(move |entry| entry["event"] == event)
}

/// The first journal entry of one `event` kind.
pub fn first_entry<'a>(journal: &'a [Value], event: &str) -> &'a Value {
    journal
        .iter()
        .find(|entry| entry["event"] == event)
        .unwrap_or_else(|| panic!("no {event} entry in the journal: {journal:#?}"))
}

/// Every non-empty stdout line, parsed as JSON.
pub fn stdout_frames(stdout: &[u8]) -> Vec<Value> {
    stdout
        .split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).unwrap())
        .collect()
}

pub fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Asserts a frame is valid generation 1 (`schemas/frame.schema.json`).
pub fn assert_valid_frame(frame: &Value) {
    if let Err(errors) = dsh_protocol::schema::validate("frame.schema.json", frame) {
        panic!("frame {frame} is not schema-valid: {errors:?}");
    }
}

/// Runs `command` (stdin closed, stdout and stderr captured) to its end, killing it and failing
/// the test, naming `what`, if it has not ended within `limit`.
pub fn output_within(
    command: &mut Command,
    limit: std::time::Duration,
    what: &str,
) -> std::process::Output {
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not end within {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}
