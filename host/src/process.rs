//! The platform part: owning a runtime's whole process tree (spawn it in its own group, signal the
//! group, tell whether any member is still alive, reap what was left to us), and ending the
//! orphans that escaped every group.
//!
//! POSIX uses a process group whose id is the direct child's pid. A daemon that double-forks and
//! calls `setsid` or `setpgid` leaves that group; on Linux the host is a child subreaper
//! ([`adopt_orphans`]), so such an orphan is re-parented to the host, and
//! [`end_adopted_orphans`] kills the children of the host that it did not spawn itself (the
//! leaders registered by [`spawn_owned`]) and that belong to the ending tree: each tree's leader
//! gets its own `DSH_HOST_TREE` token in its environment, which its daemons inherit, so a run's
//! teardown never kills another conversation's daemon (spec 10). An orphan without a token (it
//! cleared its environment) cannot be attributed while other trees are alive: it is killed at the
//! next teardown that has no other tree alive. On macOS there is no subreaper: an escaped daemon is
//! re-parented to launchd and this module cannot find it (the group is still killed).
//! A Windows port replaces this module with a job object behind the same surface; nothing else in
//! the crate knows how a tree is owned.

use std::collections::BTreeSet;
use std::io;
use std::sync::Mutex;
use std::time::Duration;

/// The direct children this host spawned (tree leaders), never taken for adopted orphans. The
/// lock is held across a spawn, so a sweep never sees a leader before it is registered.
static LEADERS: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

/// The environment variable naming the tree a process belongs to (`<host pid>.<tree number>`).
pub const TREE_ENV: &str = "DSH_HOST_TREE";

/// The number of the next tree this host spawns.
static NEXT_TREE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// The numbers of the trees not yet released: an orphan naming one of them is that tree's.
static LIVE_TREES: Mutex<BTreeSet<u64>> = Mutex::new(BTreeSet::new());

fn live_trees() -> std::sync::MutexGuard<'static, BTreeSet<u64>> {
    LIVE_TREES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn leaders() -> std::sync::MutexGuard<'static, BTreeSet<u32>> {
    LEADERS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Spawn `command` as the leader of a new process tree the host owns ([`own_tree`]), registered
/// so [`end_adopted_orphans`] spares it; [`OwnedTree::release`] unregisters it once reaped.
pub fn spawn_owned(
    command: &mut tokio::process::Command,
) -> io::Result<(tokio::process::Child, OwnedTree)> {
    own_tree(command);
    let number = NEXT_TREE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    command.env(TREE_ENV, tree_token(number));
    let mut registered = leaders();
    let child = command.spawn()?;
    let pid = child
        .id()
        .ok_or_else(|| io::Error::other("the process exited before it could be tracked"))?;
    registered.insert(pid);
    live_trees().insert(number);
    Ok((
        child,
        OwnedTree {
            leader: pid,
            number,
        },
    ))
}

fn tree_token(number: u64) -> String {
    format!("{}.{number}", std::process::id())
}

/// SIGKILL every live child of this host that it did not spawn (orphans re-parented to it as a
/// subreaper: daemons that left their tree's group) and that is `tree`'s: it carries the tree's
/// token (or the token of a tree already released), or no token while `tree` is the only tree
/// alive. Again until none is left or `bound`
/// passes (a killed orphan's own children are adopted next); reaps them. Returns the pids killed.
pub fn end_adopted_orphans(tree: &OwnedTree, bound: Duration) -> Vec<u32> {
    let deadline = std::time::Instant::now() + bound;
    let own = format!("{TREE_ENV}={}", tree_token(tree.number));
    let mut killed: Vec<u32> = Vec::new();
    loop {
        let live: Vec<u32> = {
            let spared = leaders();
            let alone = spared.iter().all(|leader| *leader == tree.leader);
            let others: Vec<String> = live_trees()
                .iter()
                .filter(|number| **number != tree.number)
                .map(|number| format!("{TREE_ENV}={}", tree_token(*number)))
                .collect();
            imp::adopted_children(&spared)
                .into_iter()
                .filter(|pid| match imp::tree_entry(*pid) {
                    Some(entry) => entry == own || !others.contains(&entry),
                    None => alone,
                })
                .collect()
        };
        if live.is_empty() || std::time::Instant::now() >= deadline {
            return killed;
        }
        for pid in live {
            let _ = imp::signal_process(pid, Stop::Kill);
            if !killed.contains(&pid) {
                killed.push(pid);
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

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
    /// Its number in its [`TREE_ENV`] token (0: spawned without one).
    number: u64,
}

impl OwnedTree {
    /// The tree whose leader is `leader_pid` (spawned through [`own_tree`]).
    pub fn of_leader(leader_pid: u32) -> Self {
        Self {
            leader: leader_pid,
            number: 0,
        }
    }

    /// The direct child's pid (also the POSIX process group id).
    pub fn leader_pid(&self) -> u32 {
        self.leader
    }

    /// Forget the leader once it has been waited for (see [`spawn_owned`]).
    pub fn release(&self) {
        leaders().remove(&self.leader);
        live_trees().remove(&self.number);
    }

    /// Signal every process of the tree. A tree that is already empty is not an error.
    pub fn stop(&self, how: Stop) -> io::Result<()> {
        imp::signal_group(self.leader, how)
    }

    /// Signal the direct child only (the `kill-direct-child-only` mutant; test builds only).
    #[cfg(feature = "mutants")]
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

    /// One process as `/proc/<pid>/stat` describes it.
    #[cfg(target_os = "linux")]
    struct ProcStat {
        pid: u32,
        /// Not a zombie (nor dead).
        live: bool,
        ppid: Option<u32>,
        pgrp: Option<u32>,
    }

    /// Every process `/proc` lists now; `None` without a readable `/proc`.
    #[cfg(target_os = "linux")]
    fn proc_stats() -> Option<Vec<ProcStat>> {
        let entries = std::fs::read_dir("/proc").ok()?;
        let stats = entries
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
            .filter_map(|pid| {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                // Fields after the parenthesised command: state ppid pgrp ...
                let after_comm = &stat[stat.rfind(')')? + 1..];
                let mut fields = after_comm.split_whitespace();
                let state = fields.next().unwrap_or("Z");
                let mut number = || fields.next().and_then(|p| p.parse::<u32>().ok());
                let (ppid, pgrp) = (number(), number());
                Some(ProcStat {
                    pid,
                    live: state != "Z" && state != "X",
                    ppid,
                    pgrp,
                })
            })
            .collect();
        Some(stats)
    }

    /// The group still has members; on Linux, tell live ones from unreaped zombies.
    #[cfg(target_os = "linux")]
    fn live_members_beyond_zombies(pgid: u32) -> bool {
        proc_stats().is_none_or(|stats| {
            stats
                .iter()
                .any(|stat| stat.pgrp == Some(pgid) && stat.live)
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn live_members_beyond_zombies(_pgid: u32) -> bool {
        true
    }

    /// The live children of this process outside `spared`; zombies among them are reaped here.
    #[cfg(target_os = "linux")]
    pub fn adopted_children(spared: &std::collections::BTreeSet<u32>) -> Vec<u32> {
        let me = std::process::id();
        let mut live = Vec::new();
        for stat in proc_stats()
            .unwrap_or_default()
            .into_iter()
            .filter(|stat| stat.ppid == Some(me) && !spared.contains(&stat.pid))
        {
            if stat.live {
                live.push(stat.pid);
            } else {
                let _ = waitpid(pid(stat.pid), Some(WaitPidFlag::WNOHANG));
            }
        }
        live
    }

    /// The `DSH_HOST_TREE=...` entry of `pid`'s environment; `None` when it has none or the
    /// environment cannot be read.
    pub fn tree_entry(pid: u32) -> Option<String> {
        let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
        let prefix = format!("{}=", super::TREE_ENV);
        environ
            .split(|byte| *byte == 0)
            .find(|var| var.starts_with(prefix.as_bytes()))
            .map(|var| String::from_utf8_lossy(var).into_owned())
    }

    /// No subreaper outside Linux: orphans go to init/launchd, never to the host.
    #[cfg(not(target_os = "linux"))]
    pub fn adopted_children(_spared: &std::collections::BTreeSet<u32>) -> Vec<u32> {
        Vec::new()
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
