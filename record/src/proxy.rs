//! The transparent stdio proxy behind `record`: host stdin -> runtime stdin and runtime stdout ->
//! host stdout byte for byte, both copied into the transcript, the runtime's stream checked live.
//! Each broken rule, and a runtime that could not start, goes to the caller's [`Say`] as a line as
//! it happens (the command line prints it on stderr: stdout is the runtime's own stream).

use super::live::{LiveValidator, RecordedViolation};
use super::signals;
use super::transcript::{self, Meta};
use super::WireKind;
use dsh_engine::procfs;
use dsh_protocol::LineFramer;
use dsh_results::redact::Redactor;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long stdout may stay open after the runtime exited (a grandchild holding it) before the
/// recording is closed anyway.
const STDOUT_AFTER_EXIT: Duration = Duration::from_secs(2);
const CHUNK: usize = 64 * 1024;

/// How the proxied runtime ended.
pub enum Ended {
    Exited(ExitStatus),
    /// It could not be started (exit 127 / 126 like a shell).
    SpawnFailed(i32),
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Where the proxy's lines go as they happen, from any of its threads.
pub type Say = Arc<dyn Fn(&str) + Send + Sync>;

fn report(say: &Say, violations: Vec<RecordedViolation>) {
    for violation in violations {
        let line = violation
            .line
            .map(|line| format!("line {line}: "))
            .unwrap_or_default();
        let message = violation
            .message
            .strip_prefix(&line)
            .unwrap_or(&violation.message);
        say(&format!("{}{}: {message}", line, violation.code));
    }
}

/// Proxy `command` with our stdio, recording into a new directory under `out`, its stream checked
/// as `surface`'s. Returns the recording directory and how the runtime ended.
pub fn run(
    out: &Path,
    command: &[OsString],
    surface: WireKind,
    say: Say,
) -> Result<(PathBuf, Ended), String> {
    let started = Instant::now();
    let started_unix_ms = transcript::unix_ms_now();
    let dir = transcript::create_dir(out, started_unix_ms)?;
    let open = |name: &str| transcript::create_file(&dir.join(name)).map(BufWriter::new);
    let stdout_file = open(transcript::STDOUT_FILE)?;
    let stdin_file = open(transcript::STDIN_FILE)?;
    let redactor = Redactor::new(dsh_results::redact::credential_values_from_env());
    let mut meta = Meta::new(command, started_unix_ms, &redactor);

    let (program, args) = command.split_first().ok_or("no command to record")?;
    // Orphans of the runtime (daemons that left its group) are re-parented here (Linux).
    procfs::become_subreaper();
    let mut child = match runtime_command(program, args).spawn() {
        Ok(child) => child,
        Err(error) => {
            let code = spawn_failure_code(&error);
            say(&format!(
                "cannot start {}: {error}",
                program.to_string_lossy()
            ));
            meta.spawn_error = Some(error.to_string());
            meta.finish(&LiveValidator::for_surface(started, surface), &redactor);
            meta.write(&dir)?;
            return Ok((dir, Ended::SpawnFailed(code)));
        }
    };
    let pgid = Pid::from_raw(child.id() as i32);
    meta.runtime_pid = Some(child.id());
    let forwarded = signals::forward_to_group(pgid)
        .map_err(|error| format!("cannot install signal forwarding: {error}"))?;
    let validator = Arc::new(Mutex::new(LiveValidator::for_surface(started, surface)));
    let child_stdin = child.stdin.take().expect("stdin was piped");
    let stdin_done = pump_host_stdin(child_stdin, stdin_file, Arc::clone(&validator));
    let child_stdout = child.stdout.take().expect("stdout was piped");
    let stdout_done = pump_runtime_stdout(
        child_stdout,
        stdout_file,
        Arc::clone(&validator),
        Arc::clone(&say),
    );

    let status = child
        .wait()
        .map_err(|error| format!("waiting for the runtime: {error}"))?;
    let exited = Instant::now();
    let stdout_result = stdout_done.recv_timeout(STDOUT_AFTER_EXIT);
    let processes_left = kill_leftovers(pgid, &validator, &say);
    let (stdout_bytes, host_closed, stdout_error) = match stdout_result {
        Ok(Ok((bytes, closed))) => (Some(bytes), closed, None),
        Ok(Err(error)) => (None, false, Some(error)),
        Err(_) => (
            None,
            false,
            Some("stdout stayed open after the runtime exited".to_string()),
        ),
    };
    let stdin_error = match stdin_done.try_recv() {
        Ok(Err(error)) => Some(format!("recording the host's stdin: {error}")),
        _ => None,
    };
    let state = lock(&validator);
    meta.exit_code = status.code();
    meta.exit_signal = status
        .signal()
        .and_then(|signal| Signal::try_from(signal).ok())
        .map(|signal| signal.as_str().to_string());
    meta.signals_forwarded = lock(&forwarded).clone();
    meta.bytes_stdout = stdout_bytes;
    meta.bytes_stdin = Some(state.host().bytes);
    meta.host_closed_stdout = host_closed;
    meta.processes_left = processes_left;
    meta.recording_error = stdout_error.or(stdin_error);
    meta.timings_ms.exit = Some(exited.duration_since(started).as_millis() as u64);
    meta.finish(&state, &redactor);
    drop(state);
    meta.write(&dir)?;
    Ok((dir, Ended::Exited(status)))
}

/// The runtime's command: piped stdin and stdout, our stderr, a process group of its own, and
/// (Linux) killed with the proxy.
fn runtime_command(program: &OsString, args: &[OsString]) -> Command {
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0);
    // SAFETY: prctl(PR_SET_PDEATHSIG) is async-signal-safe; if the proxy is SIGKILLed, the runtime
    // dies with it instead of running on unobserved. (Linux only: macOS has no such call.)
    #[cfg(target_os = "linux")]
    unsafe {
        command.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)
        });
    }
    command
}

/// The exit code a shell gives a command it could not start: 126 not executable, else 127.
fn spawn_failure_code(error: &std::io::Error) -> i32 {
    if error.kind() == std::io::ErrorKind::PermissionDenied {
        126
    } else {
        127
    }
}

/// Host -> runtime, on a thread: every chunk of our stdin is counted, recorded and forwarded
/// (forwarding stops when the runtime closes its stdin; recording goes on). The channel says how
/// the host's stdin ended.
fn pump_host_stdin(
    mut child_stdin: ChildStdin,
    mut stdin_file: BufWriter<File>,
    host_side: Arc<Mutex<LiveValidator>>,
) -> mpsc::Receiver<std::io::Result<()>> {
    let (stdin_done_tx, stdin_done) = mpsc::channel::<std::io::Result<()>>();
    std::thread::spawn(move || {
        let mut host_stdin = std::io::stdin().lock();
        let mut buffer = vec![0u8; CHUNK];
        let mut forwarding = true;
        let result = loop {
            let read = match host_stdin.read(&mut buffer) {
                Ok(0) => break Ok(()),
                Ok(read) => read,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error) => break Err(error),
            };
            let chunk = &buffer[..read];
            lock(&host_side).host_bytes(chunk);
            if let Err(error) = stdin_file
                .write_all(chunk)
                .and_then(|()| stdin_file.flush())
            {
                break Err(error);
            }
            if forwarding
                && child_stdin
                    .write_all(chunk)
                    .and_then(|()| child_stdin.flush())
                    .is_err()
            {
                // The runtime closed its stdin; keep recording what the host sends.
                forwarding = false;
            }
        };
        lock(&host_side).host_finished();
        drop(child_stdin);
        let _ = stdin_done_tx.send(result);
    });
    stdin_done
}

/// Runtime -> host, on a thread: every chunk of the runtime's stdout is checked live, forwarded
/// and recorded. The channel gives the bytes read and whether the host closed its stdout.
fn pump_runtime_stdout(
    mut child_stdout: ChildStdout,
    mut stdout_file: BufWriter<File>,
    runtime_side: Arc<Mutex<LiveValidator>>,
    say: Say,
) -> mpsc::Receiver<Result<(u64, bool), String>> {
    let (stdout_done_tx, stdout_done) = mpsc::channel::<Result<(u64, bool), String>>();
    std::thread::spawn(move || {
        let mut host_stdout = std::io::stdout().lock();
        let mut framer = LineFramer::new();
        let mut buffer = vec![0u8; CHUNK];
        let mut total = 0u64;
        let mut host_closed = false;
        let result = loop {
            let read = match child_stdout.read(&mut buffer) {
                Ok(0) => break Ok((total, host_closed)),
                Ok(read) => read,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error) => break Err(format!("reading the runtime's stdout: {error}")),
            };
            let chunk = &buffer[..read];
            total += read as u64;
            // Validate first: whatever the host reacts to (a cancel after `session`) must find
            // these lines already counted.
            let mut state = lock(&runtime_side);
            for event in framer.push(chunk) {
                state.stdout_event(event);
            }
            let violations = state.take_unreported();
            drop(state);
            if host_stdout
                .write_all(chunk)
                .and_then(|()| host_stdout.flush())
                .is_err()
            {
                // The host stopped reading: stop reading too, so the runtime sees a closed pipe
                // exactly as it would without the proxy.
                host_closed = true;
            }
            report(&say, violations);
            if let Err(error) = stdout_file.write_all(chunk) {
                break Err(format!("writing {}: {error}", transcript::STDOUT_FILE));
            }
            if host_closed {
                break Ok((total, host_closed));
            }
        };
        drop(child_stdout);
        let _ = stdout_file.flush();
        let mut state = lock(&runtime_side);
        if let Some(tail) = framer.finish() {
            state.stdout_event(tail);
        }
        state.stdout_finished();
        report(&say, state.take_unreported());
        drop(state);
        let _ = stdout_done_tx.send(result);
    });
    stdout_done
}

/// After the runtime exited: whether processes of its tree were left (its group, or orphans that
/// left it); if so, a violation is recorded and they are killed.
fn kill_leftovers(pgid: Pid, validator: &Mutex<LiveValidator>, say: &Say) -> bool {
    let escaped = procfs::adopted_children(&[pgid.as_raw()]);
    let processes_left = killpg(pgid, None).is_ok() || !escaped.is_empty();
    if processes_left {
        let violation = RecordedViolation {
            code: "DSH_CONFORMANCE_PROCESSES_LEFT".to_string(),
            line: None,
            message: format!("the runtime exited but processes of its tree were still running (its group, or {} orphan(s) that left it); the proxy killed them (spec 6: the runtime exits after the terminal result)", escaped.len()),
        };
        report(say, vec![violation.clone()]);
        lock(validator).violations.push(violation);
        let _ = killpg(pgid, Signal::SIGKILL);
        procfs::kill_adopted(&[pgid.as_raw()], std::time::Duration::from_secs(2));
    }
    processes_left
}
