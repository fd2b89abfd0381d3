//! The process lifecycle every fake-dsh process shares: signal handling (journal, then exit
//! `128 + n` unless SIGTERM is being ignored), the watchdog, the single exit path, and the
//! grandchildren it spawns (a re-exec of itself in the hidden `__child` mode).

use crate::journal::{self, Event, ExitReason, Mode};
use nix::sys::signal::{kill, SigSet, Signal};
use nix::unistd::Pid;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// The environment variable holding the watchdog limit in seconds (fractions allowed).
pub const WATCHDOG_ENV: &str = "FAKE_DSH_WATCHDOG_SECS";
/// The default watchdog limit.
pub const DEFAULT_WATCHDOG_SECS: f64 = 120.0;
/// The exit code of a process ended by its watchdog (as `timeout(1)` does).
pub const WATCHDOG_EXIT_CODE: i32 = 124;
/// The hidden subcommand that turns fake-dsh into a grandchild sleeper.
pub const CHILD_SUBCOMMAND: &str = "__child";

static IGNORE_SIGTERM: AtomicBool = AtomicBool::new(false);
static EXITING: AtomicBool = AtomicBool::new(false);
static CHILDREN: Mutex<Vec<i32>> = Mutex::new(Vec::new());

fn handled_signals() -> SigSet {
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGINT);
    set.add(Signal::SIGHUP);
    set
}

/// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread (call first in `main`, so every
/// later thread inherits the mask). Until [`start_background`] starts the thread that takes them
/// with `sigwait`, a signal stays pending and is handled the moment that thread starts.
pub fn block_signals() {
    if handled_signals().thread_block().is_err() {
        eprintln!(
            "fake-dsh: cannot block signals; they will end the process without a journal entry"
        );
        SIGNALS_UNBLOCKED.store(true, Ordering::SeqCst);
    }
}

static SIGNALS_UNBLOCKED: AtomicBool = AtomicBool::new(false);
static BACKGROUND: std::sync::Once = std::sync::Once::new();

/// Starts the signal thread and the watchdog, once. `--stdio` calls it right after writing
/// `ready` (the default agent) or before playing a script (which may hang before its `ready`),
/// so neither thread delays the first frame; every other surface calls it at start.
pub fn start_background() {
    BACKGROUND.call_once(|| {
        if !SIGNALS_UNBLOCKED.load(Ordering::SeqCst) {
            start_signal_thread();
        }
        start_watchdog();
    });
}

fn start_signal_thread() {
    let set = handled_signals();
    std::thread::spawn(move || loop {
        let Ok(signal) = set.wait() else { continue };
        let ignored = signal == Signal::SIGTERM && IGNORE_SIGTERM.load(Ordering::SeqCst);
        journal::record(Event::Signal {
            signal: signal.as_str().to_string(),
            ignored,
        });
        if !ignored {
            finish(128 + signal as i32, ExitReason::Signal);
        }
    });
}

/// From now on SIGTERM is journaled and ignored (or handled again, with `false`).
pub fn set_ignore_sigterm(ignore: bool) {
    IGNORE_SIGTERM.store(ignore, Ordering::SeqCst);
}

/// The watchdog limit from `FAKE_DSH_WATCHDOG_SECS`, else the default.
pub fn watchdog_limit() -> Duration {
    let seconds = std::env::var(WATCHDOG_ENV)
        .ok()
        .and_then(|text| text.trim().parse::<f64>().ok())
        .filter(|seconds| seconds.is_finite() && *seconds > 0.0)
        .unwrap_or(DEFAULT_WATCHDOG_SECS);
    Duration::from_secs_f64(seconds.min(86_400.0))
}

/// Starts the watchdog: after the limit it kills this process's children, journals `exit` with
/// reason `watchdog` and ends the process, whatever it is doing.
fn start_watchdog() {
    let limit = watchdog_limit();
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        kill_children();
        finish(WATCHDOG_EXIT_CODE, ExitReason::Watchdog);
    });
}

fn kill_children() {
    let children = CHILDREN
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    for &child in children.iter() {
        let _ = kill(Pid::from_raw(child), Signal::SIGKILL);
    }
}

/// The one way a fake-dsh process ends: journal `exit`, then `_exit` (no unwinding, no atexit
/// handlers, safe from any thread). A second caller blocks until the first has ended the process.
pub fn finish(code: i32, reason: ExitReason) -> ! {
    if EXITING.swap(true, Ordering::SeqCst) {
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    let _ = std::io::stderr().flush();
    journal::record_last_and_exit(Event::Exit { code, reason }, code)
}

/// The `start` entry of this process.
pub fn start_event(mode: Mode, invocation: Option<u64>) -> Event {
    let ppid = nix::unistd::getppid().as_raw();
    let pgid = nix::unistd::getpgrp().as_raw();
    let sid = nix::unistd::getsid(None).map(Pid::as_raw).unwrap_or(-1);
    let argv = std::env::args_os()
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    let cwd = std::env::current_dir()
        .map(|dir| dir.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut env_names: Vec<String> = std::env::vars_os()
        .map(|(name, _)| name.to_string_lossy().into_owned())
        .collect();
    env_names.sort();
    env_names.dedup();
    Event::Start {
        ppid,
        pgid,
        sid,
        argv,
        cwd,
        env_names,
        mode,
        invocation,
    }
}

/// Starts a grandchild sleeper in this process group and waits until it handles its signals,
/// then journals `child`. Returns its pid.
pub fn spawn_child(ignore_sigterm: bool) -> std::io::Result<i32> {
    let exe = std::env::current_exe()?;
    let mut command = Command::new(exe);
    command.arg(CHILD_SUBCOMMAND);
    if ignore_sigterm {
        command.arg("--ignore-sigterm");
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let pid = child.id() as i32;
    CHILDREN
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(pid);
    if let Some(mut readiness) = child.stdout.take() {
        let mut byte = [0u8; 1];
        let _ = readiness.read(&mut byte);
    }
    journal::record(Event::Child {
        child_pid: pid,
        ignores_sigterm: ignore_sigterm,
    });
    Ok(pid)
}

/// The `__child` mode: journal, report readiness on stdout, then sleep until a signal or the
/// watchdog ends it.
pub fn run_child(ignore_sigterm: bool) -> ! {
    set_ignore_sigterm(ignore_sigterm);
    journal::record(start_event(Mode::Child, None));
    start_background();
    let mut stdout = std::io::stdout();
    let _ = stdout.write_all(b"\n");
    let _ = stdout.flush();
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// Blocks forever; only a signal or the watchdog ends the process.
pub fn hang() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
