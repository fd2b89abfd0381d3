//! The platform part: owning a runtime's whole process tree (spawn it in its own group, signal the
//! group, tell whether any member is still alive, reap what was left to us).
//!
//! POSIX uses a process group whose id is the direct child's pid. A Windows port replaces this
//! module with a job object behind the same [`OwnedTree`] surface; nothing else in the crate knows
//! how a tree is owned.

use std::io;
use std::time::Duration;

#[cfg(not(unix))]
compile_error!("dsh-host owns process trees with POSIX process groups only; a Windows port replaces `process::imp` with a job object");

/// How the tree should be asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Ask gracefully (POSIX: SIGTERM).
    Terminate,
    /// Force (POSIX: SIGKILL).
    Kill,
}

/// Make `command` start its child as the leader of a new process tree the host owns.
pub fn own_tree(command: &mut tokio::process::Command) {
    #[cfg(unix)]
    command.process_group(0);
}

/// Ask the OS to hand orphaned descendants of this process to it (Linux: child subreaper), so a
/// grandchild that outlives its parent can be reaped here instead of lingering as a zombie under
/// an init that does not reap. Call once at startup of a long-lived host; harmless elsewhere.
pub fn adopt_orphans() {
    #[cfg(target_os = "linux")]
    {
        // Best effort: without it, zombies are still recognised as dead by `has_live_members`.
        let _ = nix::sys::prctl::set_child_subreaper(true);
    }
}

/// One runtime's process tree, identified by its direct child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnedTree {
    leader: u32,
}

impl OwnedTree {
    /// The tree whose leader is `leader_pid` (spawned through [`own_tree`]).
    pub fn of_leader(leader_pid: u32) -> Self {
        Self { leader: leader_pid }
    }

    /// The direct child's pid (also the POSIX process group id).
    pub fn leader_pid(&self) -> u32 {
        self.leader
    }

    /// Signal every process of the tree. A tree that is already empty is not an error.
    pub fn stop(&self, how: Stop) -> io::Result<()> {
        imp::signal_group(self.leader, how)
    }

    /// Signal the direct child only (used by the `kill-direct-child-only` mutant).
    pub fn stop_leader_only(&self, how: Stop) -> io::Result<()> {
        imp::signal_process(self.leader, how)
    }

    /// Whether any process of the tree is still alive (zombies do not count).
    pub fn has_live_members(&self) -> bool {
        imp::group_has_live_members(self.leader)
    }

    /// Reap members that were re-parented to this process. Call only after the direct child has
    /// been waited for, so its exit status is never taken from its own waiter.
    pub fn reap_adopted(&self) {
        imp::reap_group(self.leader)
    }

    /// Poll until the tree is empty or `bound` passes; returns whether it emptied.
    pub async fn wait_empty(&self, bound: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            self.reap_adopted();
            if !self.has_live_members() {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

#[cfg(unix)]
mod imp {
    use super::Stop;
    use nix::errno::Errno;
    use nix::sys::signal::{kill, killpg, Signal};
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    use nix::unistd::Pid;
    use std::io;

    fn signal_of(how: Stop) -> Signal {
        match how {
            Stop::Terminate => Signal::SIGTERM,
            Stop::Kill => Signal::SIGKILL,
        }
    }

    fn pid(raw: u32) -> Pid {
        Pid::from_raw(i32::try_from(raw).unwrap_or(i32::MAX))
    }

    fn ignore_gone(result: nix::Result<()>) -> io::Result<()> {
        match result {
            Ok(()) | Err(Errno::ESRCH) => Ok(()),
            Err(errno) => Err(io::Error::from(errno)),
        }
    }

    pub fn signal_group(leader: u32, how: Stop) -> io::Result<()> {
        ignore_gone(killpg(pid(leader), signal_of(how)))
    }

    pub fn signal_process(leader: u32, how: Stop) -> io::Result<()> {
        ignore_gone(kill(pid(leader), signal_of(how)))
    }

    pub fn group_has_live_members(leader: u32) -> bool {
        match killpg(pid(leader), None) {
            Err(Errno::ESRCH) => false,
            _ => live_members_beyond_zombies(leader),
        }
    }

    /// The group still has members; on Linux, tell live ones from unreaped zombies.
    #[cfg(target_os = "linux")]
    fn live_members_beyond_zombies(pgid: u32) -> bool {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return true;
        };
        entries.flatten().any(|entry| {
            let name = entry.file_name();
            let Some(_) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
                return false;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                return false;
            };
            // Fields after the parenthesised command: state ppid pgrp ...
            let Some(after_comm) = stat.rfind(')').map(|at| &stat[at + 1..]) else {
                return false;
            };
            let mut fields = after_comm.split_whitespace();
            let state = fields.next().unwrap_or("Z");
            let pgrp = fields.nth(1).and_then(|p| p.parse::<u32>().ok());
            pgrp == Some(pgid) && state != "Z" && state != "X"
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn live_members_beyond_zombies(_pgid: u32) -> bool {
        true
    }

    pub fn reap_group(leader: u32) {
        let group = Pid::from_raw(-(i32::try_from(leader).unwrap_or(i32::MAX)));
        loop {
            match waitpid(group, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    }
}
