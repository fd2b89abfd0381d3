//! The process lifecycle every fake-dsh process shares: signal handling (journal, then exit
//! `128 + n` unless SIGTERM is being ignored), the watchdog, the single exit path, and the
//! grandchildren it spawns (a re-exec of itself in the hidden `__child` mode), including the
//! hostile ones: double-forked daemons that leave the runtime's process group or session.

use crate::journal::{self, Event, ExitReason, Mode};
use crate::scenario::{Detach, SpawnChildSpec};
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

/// The signals fake-dsh takes itself (with `sigwait`, on its signal thread): SIGTERM, SIGINT,
/// SIGHUP.
pub(crate) fn handled_signals() -> SigSet {
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

/// Raises a lowered soft file-size limit back to the hard one (call first in `main`, before the
/// journal is written): the harness's `crash_mid_save` step limits the host's writes, never the
/// runtime's journal, home or project files.
pub fn restore_file_size_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_FSIZE) {
        if soft < hard && setrlimit(Resource::RLIMIT_FSIZE, hard, hard).is_err() {
            eprintln!("fake-dsh: cannot raise the file-size limit back to {hard}");
        }
    }
}

static SIGNALS_UNBLOCKED: AtomicBool = AtomicBool::new(false);

/// What a surface does when a handled signal arrives, before the process ends: the exit code it
/// ends with (`None`: `128 + n`).
pub type SignalHook = Box<dyn Fn(Signal) -> Option<i32> + Send + Sync>;
static SIGNAL_HOOK: std::sync::OnceLock<SignalHook> = std::sync::OnceLock::new();

/// Sets this process's [`SignalHook`] (once; call before [`start_background`]).
pub fn on_signal(hook: SignalHook) {
    let _ = SIGNAL_HOOK.set(hook);
}
static BACKGROUND: std::sync::Once = std::sync::Once::new();

/// Starts the signal thread and the watchdog, once. `--stdio` calls it right after writing
/// `ready` (the default agent) or before playing a script (which may hang before its `ready`),
/// so neither thread delays the first frame; every other surface calls it at start.
pub fn start_background() {
    start_background_with(None);
}

/// [`start_background`] with an explicit watchdog limit (a daemon whose environment may be
/// empty gets its limit on argv) instead of `FAKE_DSH_WATCHDOG_SECS`.
fn start_background_with(limit: Option<Duration>) {
    BACKGROUND.call_once(|| {
        if !SIGNALS_UNBLOCKED.load(Ordering::SeqCst) {
            start_signal_thread();
        }
        match limit {
            Some(limit) => start_watchdog_after(limit),
            None => start_watchdog(),
        }
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
            let code = SIGNAL_HOOK.get().and_then(|hook| hook(signal));
            finish(code.unwrap_or(128 + signal as i32), ExitReason::Signal);
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

/// Reads what `reader` has (one buffer) into `framer`, handing each line it completes to `line`
/// and a line past the framer's bound to `too_long` (its number) as soon as it passes it; false
/// at EOF or on a read error. The JSON-RPC surfaces' request loop.
pub fn feed_lines(
    reader: &mut impl std::io::BufRead,
    framer: &mut dsh_protocol::LineFramer,
    line: fn(&[u8]),
    too_long: fn(usize) -> !,
) -> bool {
    use dsh_protocol::LineEvent;
    let chunk = match reader.fill_buf() {
        Ok([]) => return false,
        Ok(chunk) => chunk,
        Err(error) => return error.kind() == std::io::ErrorKind::Interrupted,
    };
    let read = chunk.len();
    framer.push_each(chunk, |event| match event {
        LineEvent::Line { bytes, .. } => line(bytes),
        LineEvent::TooLarge { number } => too_long(number),
        LineEvent::Truncated { .. } => {}
    });
    reader.consume(read);
    true
}

/// Whether stdin can be read without blocking (a line, or EOF): the JSON-RPC surfaces answer
/// the lines waiting at start before they start their background threads.
pub fn stdin_ready() -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    let stdin = std::io::stdin();
    let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
    poll(&mut fds, PollTimeout::ZERO).is_ok_and(|ready| ready > 0)
}

/// Starts the watchdog: after the limit it kills this process's children, journals `exit` with
/// reason `watchdog` and ends the process, whatever it is doing.
pub fn start_watchdog() {
    let limit = watchdog_limit();
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        kill_children();
        finish(WATCHDOG_EXIT_CODE, ExitReason::Watchdog);
    });
}

/// Starts the watchdog with an explicit limit (a daemon whose environment may be empty).
fn start_watchdog_after(limit: Duration) {
    std::thread::spawn(move || {
        std::thread::sleep(limit);
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
/// watchdog ends it. A daemon (`daemon_watchdog_ms`) writes nothing: its stdout may be the
/// host's pipe, and its parent learned its pid through a private pipe.
pub fn run_child(ignore_sigterm: bool, daemon_watchdog_ms: Option<u64>) -> ! {
    set_ignore_sigterm(ignore_sigterm);
    journal::record(start_event(Mode::Child, None));
    match daemon_watchdog_ms.filter(|millis| *millis > 0) {
        Some(millis) => start_background_with(Some(Duration::from_millis(millis.min(86_400_000)))),
        None => {
            start_background();
            let mut stdout = std::io::stdout();
            let _ = stdout.write_all(b"\n");
            let _ = stdout.flush();
        }
    }
    hang()
}

/// Starts a hostile grandchild: a daemon that double-forks out of this process group (a new
/// session with `setsid`, or a new group with `setpgid`), optionally with an empty environment
/// and holding this process's stdout/stderr. The intermediate process exits at once (reaped
/// here), so the daemon is an orphan from the start. Journals `child` with the daemon's pid.
pub fn spawn_daemon(spec: &SpawnChildSpec, detach: Detach) -> std::io::Result<i32> {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe()?;
    // pipe + FD_CLOEXEC rather than pipe2, which macOS lacks: the daemon's exec closes its end.
    let (pid_reader, pid_writer) = nix::unistd::pipe()?;
    for end in [&pid_reader, &pid_writer] {
        let cloexec = nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC);
        nix::fcntl::fcntl(end, cloexec)?;
    }
    let mut command = Command::new(exe);
    command
        .arg(CHILD_SUBCOMMAND)
        .arg("--daemon-watchdog-ms")
        .arg(watchdog_limit().as_millis().to_string())
        .stdin(Stdio::null());
    if spec.ignore_sigterm {
        command.arg("--ignore-sigterm");
    }
    if !spec.hold_stdio {
        command.stdout(Stdio::null()).stderr(Stdio::null());
    }
    if spec.clear_env {
        command.env_clear();
    }
    let report_fd = pid_writer.as_raw_fd();
    // SAFETY: the closure runs between fork and exec and calls only async-signal-safe functions
    // (setsid/setpgid, fork, getpid, write, _exit).
    unsafe {
        command.pre_exec(move || daemonize(detach, report_fd));
    }
    let mut intermediate = command.spawn()?;
    drop(pid_writer);
    let _ = intermediate.wait();
    let mut bytes = [0u8; 4];
    std::fs::File::from(pid_reader).read_exact(&mut bytes)?;
    let pid = i32::from_ne_bytes(bytes);
    journal::record(Event::Child {
        child_pid: pid,
        ignores_sigterm: spec.ignore_sigterm,
    });
    Ok(pid)
}

/// Between fork and exec: leave the group, fork again; the intermediate exits, the daemon writes
/// its pid to `report_fd` (closed on exec) and goes on to exec.
fn daemonize(detach: Detach, report_fd: i32) -> std::io::Result<()> {
    use nix::unistd::{fork, setpgid, setsid, ForkResult};
    match detach {
        Detach::Setsid => setsid().map(|_| ())?,
        Detach::Setpgid => setpgid(Pid::from_raw(0), Pid::from_raw(0))?,
    }
    // SAFETY: the forked process only writes to a pipe and then execs (see the caller).
    match unsafe { fork() }? {
        ForkResult::Parent { .. } => unsafe { nix::libc::_exit(0) },
        ForkResult::Child => {
            let pid = nix::unistd::getpid().as_raw().to_ne_bytes();
            // SAFETY: `report_fd` is the open write end of the pid pipe.
            unsafe { nix::libc::write(report_fd, pid.as_ptr().cast(), pid.len()) };
            Ok(())
        }
    }
}

/// Blocks forever; only a signal or the watchdog ends the process.
pub fn hang() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
