//! The per-case supervisor: the only platform code of the harness's process hygiene.
//!
//! On Linux every driver runs under `dsh-conformance __supervise`, a small process that makes
//! itself a child subreaper (`PR_SET_CHILD_SUBREAPER`), starts the driver with the harness's pipes,
//! then leaves the driver's process group (so killing the driver's group leaves it alive). Every
//! descendant of the driver that is orphaned (a daemon that double-forked, called `setsid` or
//! `setpgid`, cleared its environment or kept the pipes open) is re-parented to it, so it knows
//! the case's whole tree whatever its session, group or environment, and nothing of another case
//! running at the same time. When the driver has exited, it waits a grace for the rest of the tree
//! to exit on its own, SIGKILLs what is left (in rounds: a process may fork while dying), appends
//! what it killed to the case's report file, and exits with the driver's status (`128 + n` for a
//! signal, as the harness reads it). If the harness itself dies, it kills the tree the same way.
//!
//! macOS has no subreaper: the driver runs unsupervised and the harness falls back on the
//! per-case token (`crate::leftovers`), which a daemon with a cleared environment evades.
//!
//! `dsh-conformance supervise -- dsh --profile open-design --stdio` is the same supervisor for a
//! host's own runtime (docs/host-driver.md, "Escaped daemons"): a host that cannot become a child
//! subreaper itself (Node.js) spawns the runtime through it, in the process group it already
//! signals. It lets the runtime keep its stdio, survives the group's SIGTERM, and once the runtime
//! has exited it kills what the runtime left behind, so the host's "the child exited" means the
//! runtime's whole tree, escaped daemons included, is gone.

use crate::leftovers::Leftover;
#[cfg(target_os = "linux")]
use crate::procfs;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The hidden subcommand of `dsh-conformance` that runs a supervisor.
pub const SUBCOMMAND: &str = "__supervise";

/// How long the rest of the tree may take to exit on its own once the driver has exited.
pub const GRACE: Duration = Duration::from_millis(200);

/// The command that runs `host` under a supervisor reporting to `report`; `host` unchanged where
/// there is no subreaper (not Linux) or this process is not `dsh-conformance` (a library caller).
pub fn wrap(host: &[String], report: &Path) -> Vec<String> {
    match supervisor_exe() {
        Some(exe) if cfg!(target_os = "linux") && !host.is_empty() => {
            let mut command = vec![
                exe.display().to_string(),
                SUBCOMMAND.to_string(),
                "--report".to_string(),
                report.display().to_string(),
                "--grace-ms".to_string(),
                GRACE.as_millis().to_string(),
                "--".to_string(),
            ];
            command.extend(host.iter().cloned());
            command
        }
        _ => host.to_vec(),
    }
}

fn supervisor_exe() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let name = exe.file_name()?.to_str()?;
    (name == format!("dsh-conformance{}", std::env::consts::EXE_SUFFIX)).then_some(exe)
}

/// The processes the supervisors of a case killed so far (the report stays).
pub fn peek(report: &Path) -> Vec<Leftover> {
    let Ok(text) = std::fs::read_to_string(report) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|entry| {
            Some(Leftover {
                pid: i32::try_from(entry.get("pid")?.as_i64()?).ok()?,
                command: entry.get("command")?.as_str()?.to_string(),
            })
        })
        .collect()
}

/// The processes the supervisors of a case killed since the last take; empties the report.
pub fn take(report: &Path) -> Vec<Leftover> {
    let killed = peek(report);
    let _ = std::fs::remove_file(report);
    killed
}

#[cfg(target_os = "linux")]
fn append_report(report: &Path, killed: &[Leftover]) {
    use std::io::Write;
    let lines: String = killed
        .iter()
        .map(|leftover| {
            format!(
                "{}\n",
                serde_json::json!({"pid": leftover.pid, "command": leftover.command})
            )
        })
        .collect();
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(report);
    if let Ok(mut file) = file {
        let _ = file.write_all(lines.as_bytes());
    }
}

/// `dsh-conformance __supervise`: runs the driver `command` as described in the module
/// documentation, appending what it killed to `report`; returns the driver's exit status (`128 +
/// n` for a signal, 2 for no command, 127 when it cannot start).
pub fn supervise(report: &Path, grace: Duration, command: &[OsString]) -> u8 {
    imp::supervise(report, grace, command)
}

/// `dsh-conformance supervise`: runs a host's runtime `command` as described in the module
/// documentation; returns the runtime's exit status as [`supervise`] does.
pub fn supervise_runtime(grace: Duration, command: &[OsString]) -> u8 {
    imp::supervise_runtime(grace, command)
}

#[cfg(target_os = "linux")]
mod imp {
    use super::{append_report, procfs, Leftover};
    use nix::errno::Errno;
    use nix::sys::signal::{kill, killpg, signal, SigHandler, Signal};
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    use nix::unistd::{getpgid, getppid, setpgid, Pid};
    use std::ffi::OsString;
    use std::path::Path;
    use std::process::Command;
    use std::time::{Duration, Instant};

    const POLL: Duration = Duration::from_millis(10);
    const KILL_ROUNDS: usize = 10;
    const KILL_WAIT: Duration = Duration::from_secs(2);

    pub fn supervise(report: &Path, grace: Duration, command: &[OsString]) -> u8 {
        let harness = getppid();
        let driver = match start(command, "driver") {
            Ok(driver) => driver,
            Err(code) => return code,
        };
        if let Ok(group) = getpgid(Some(harness)) {
            let _ = setpgid(Pid::from_raw(0), group);
        }
        detach_stdio_and_signals();
        let code = wait_child(driver, harness, || {
            let _ = killpg(driver, Signal::SIGKILL);
        });
        let killed = sweep(grace);
        if !killed.is_empty() {
            append_report(report, &killed);
        }
        code
    }

    /// A host's runtime: stays in the group the host signals (so the runtime gets the host's
    /// signals and the supervisor ignores them), and if the host dies, kills the whole tree.
    pub fn supervise_runtime(grace: Duration, command: &[OsString]) -> u8 {
        let host = getppid();
        let runtime = match start(command, "runtime") {
            Ok(runtime) => runtime,
            Err(code) => return code,
        };
        detach_stdio_and_signals();
        let code = wait_child(runtime, host, || {
            sweep(Duration::ZERO);
        });
        sweep(grace);
        code
    }

    /// Becomes a child subreaper and starts `command` (the `what`) with this process's stdio.
    fn start(command: &[OsString], what: &str) -> Result<Pid, u8> {
        if let Err(errno) = nix::sys::prctl::set_child_subreaper(true) {
            eprintln!("dsh-conformance supervisor: cannot become a child subreaper: {errno}");
        }
        let Some((program, rest)) = command.split_first() else {
            eprintln!("dsh-conformance supervisor: no {what} command");
            return Err(2);
        };
        match Command::new(program).args(rest).spawn() {
            Ok(child) => Ok(Pid::from_raw(child.id() as i32)),
            Err(error) => {
                eprintln!(
                    "cannot start the {what} {}: {error}",
                    program.to_string_lossy()
                );
                Err(127)
            }
        }
    }

    /// The driver alone holds the harness's pipes from now on; terminal signals meant for the
    /// harness's group do not end the supervisor (the harness ends drivers itself).
    fn detach_stdio_and_signals() {
        use std::os::fd::AsRawFd;
        if let Ok(null) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")
        {
            for fd in 0..=2 {
                // SAFETY: dup2 onto the standard descriptors of this single-threaded process.
                unsafe { nix::libc::dup2(null.as_raw_fd(), fd) };
            }
        }
        for sig in [
            Signal::SIGINT,
            Signal::SIGTERM,
            Signal::SIGHUP,
            Signal::SIGQUIT,
        ] {
            // SAFETY: SIG_IGN installs no handler code.
            let _ = unsafe { signal(sig, SigHandler::SigIgn) };
        }
    }

    /// Reaps children (adopted orphans included) until `child` exits; its status as a parent
    /// reads it (`128 + n` for a signal). While the `parent` is gone, `orphaned` ends the child.
    fn wait_child(child: Pid, parent: Pid, orphaned: impl Fn()) -> u8 {
        loop {
            match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) if pid == child => return code as u8,
                Ok(WaitStatus::Signaled(pid, sig, _)) if pid == child => {
                    return (128 + sig as i32) as u8
                }
                Ok(WaitStatus::StillAlive) | Err(Errno::ECHILD) => {
                    if getppid() != parent {
                        orphaned();
                    }
                    std::thread::sleep(POLL);
                }
                Ok(_) | Err(_) => {}
            }
        }
    }

    fn reap_all() {
        while let Ok(status) = waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            if status == WaitStatus::StillAlive {
                break;
            }
        }
    }

    fn live_descendants() -> Vec<i32> {
        let me = std::process::id() as i32;
        procfs::tree_below(me)
            .into_iter()
            .filter(|pid| procfs::is_live(*pid))
            .collect()
    }

    /// Waits `grace` for the tree to empty, then SIGKILLs what is left; returns what it killed (not
    /// what was already dying of an earlier kill and only waited for a CPU to finish).
    fn sweep(grace: Duration) -> Vec<Leftover> {
        let deadline = Instant::now() + grace;
        loop {
            reap_all();
            if live_descendants().is_empty() || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(POLL);
        }
        let mut killed: Vec<Leftover> = Vec::new();
        for _ in 0..KILL_ROUNDS {
            let live = live_descendants();
            if live.is_empty() {
                break;
            }
            for pid in live {
                // One already dying of an earlier kill (its group's) was not left behind.
                if !killed.iter().any(|known| known.pid == pid) && !procfs::dying(pid) {
                    killed.push(Leftover {
                        pid,
                        command: procfs::command_of(pid),
                    });
                }
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            let deadline = Instant::now() + KILL_WAIT;
            while Instant::now() < deadline && !live_descendants().is_empty() {
                reap_all();
                std::thread::sleep(POLL);
            }
        }
        reap_all();
        killed.sort_by_key(|leftover| leftover.pid);
        killed
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::ffi::OsString;
    use std::path::Path;
    use std::time::Duration;

    /// No subreaper here: become the driver (`wrap` never asks for this outside Linux).
    pub fn supervise(_report: &Path, _grace: Duration, command: &[OsString]) -> u8 {
        become_command(command, "driver")
    }

    /// No subreaper here: become the runtime (the host's process group is all there is).
    pub fn supervise_runtime(_grace: Duration, command: &[OsString]) -> u8 {
        become_command(command, "runtime")
    }

    fn become_command(command: &[OsString], what: &str) -> u8 {
        use std::os::unix::process::CommandExt;
        let Some((program, rest)) = command.split_first() else {
            return 2;
        };
        let error = std::process::Command::new(program).args(rest).exec();
        eprintln!(
            "cannot start the {what} {}: {error}",
            program.to_string_lossy()
        );
        127
    }
}
