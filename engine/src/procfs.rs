//! What `/proc` says about a process: its state and parent, whether it is alive (a zombie is
//! dead: its parent only has to reap it), whether its environment holds an entry, and the process
//! table's parent links (a supervisor's descendants).

/// The state letter and parent pid from `/proc/<pid>/stat` (the fields after the command name,
/// which may itself hold `) `).
pub fn stat_of(pid: i32) -> Option<(String, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let end = stat.rfind(')')?;
    let mut fields = stat[end + 1..].split_whitespace();
    let state = fields.next()?.to_string();
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

/// When the process started, in clock ticks since boot (`/proc/<pid>/stat` field 22): with the
/// pid, it names one process even after the pid is reused.
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let end = stat.rfind(')')?;
    stat[end + 1..].split_whitespace().nth(19)?.parse().ok()
}

/// Alive and not a zombie.
pub fn is_live(pid: i32) -> bool {
    stat_of(pid).is_some_and(|(state, _)| !matches!(state.as_str(), "Z" | "X" | "x"))
}

/// Whether `pid` is already dying: it has begun to exit (`PF_EXITING` in `/proc/<pid>/stat`'s
/// flags) or a SIGKILL is pending for it (`SigPnd`/`ShdPnd` in `/proc/<pid>/status`), so someone
/// already killed it and it only waits for a CPU to finish. A process that cannot be read is not.
pub fn dying(pid: i32) -> bool {
    const PF_EXITING: u64 = 0x4;
    const SIGKILL_BIT: u64 = 1 << (9 - 1);
    let exiting = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let end = stat.rfind(')')?;
            // After the command: state, ppid, pgrp, session, tty_nr, tpgid, flags.
            stat[end + 1..]
                .split_whitespace()
                .nth(6)?
                .parse::<u64>()
                .ok()
        })
        .is_some_and(|flags| flags & PF_EXITING != 0);
    let killed = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .is_some_and(|status| {
            status
                .lines()
                .filter_map(|line| {
                    let mask = line
                        .strip_prefix("SigPnd:")
                        .or_else(|| line.strip_prefix("ShdPnd:"))?;
                    u64::from_str_radix(mask.trim(), 16).ok()
                })
                .any(|mask| mask & SIGKILL_BIT != 0)
        });
    exiting || killed
}

/// Whether `/proc/<pid>/environ` holds exactly this `NAME=value` entry; `None` when it cannot be
/// read (the process is gone, or belongs to another user).
pub fn environ_has(pid: i32, entry: &str) -> Option<bool> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    Some(
        environ
            .split(|byte| *byte == 0)
            .any(|var| var == entry.as_bytes()),
    )
}

/// One row of the process table: pid, parent pid, and whether it is alive (not a zombie).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub pid: i32,
    pub ppid: i32,
    pub live: bool,
}

/// Every process `/proc` lists now (empty where there is no `/proc`).
pub fn table() -> Vec<Row> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let (state, ppid) = stat_of(pid)?;
            let live = !matches!(state.as_str(), "Z" | "X" | "x");
            Some(Row { pid, ppid, live })
        })
        .collect()
}

/// The pids in `table` below `root` (children, their children, ...), dead or alive, sorted.
pub fn descendants(table: &[Row], root: i32) -> Vec<i32> {
    let mut found: Vec<i32> = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for row in table.iter().filter(|row| row.ppid == parent) {
            if row.pid != root && !found.contains(&row.pid) {
                found.push(row.pid);
                frontier.push(row.pid);
            }
        }
    }
    found.sort_unstable();
    found
}

/// The children of `pid`, from its threads' `/proc/<pid>/task/<tid>/children` (a child is
/// listed under the thread that forked it, an adopted orphan under the thread that adopted it):
/// a handful of reads instead of one per process on the machine. `None` where the kernel has no
/// such files (`CONFIG_PROC_CHILDREN`) or `pid` is gone; every row is a child that had not been
/// reaped when its file was read, zombies included.
pub fn children(pid: i32) -> Option<Vec<i32>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut found: Vec<i32> = Vec::new();
    let mut read_one = false;
    for task in tasks.flatten() {
        // Twice: the kernel may skip a child when the one listed before it is reaped in the
        // middle of the read (never one that merely starts), and the union of two reads misses
        // only what both skipped.
        for _ in 0..2 {
            let Ok(list) = std::fs::read_to_string(task.path().join("children")) else {
                continue;
            };
            read_one = true;
            let pids = list
                .split_whitespace()
                .filter_map(|pid| pid.parse::<i32>().ok());
            found.extend(pids);
        }
    }
    found.sort_unstable();
    found.dedup();
    read_one.then_some(found)
}

/// The pids below `root` (children, their children, ...), dead or alive, sorted: walked through
/// [`children`], or from the whole [`table`] where the kernel lists no children.
pub fn tree_below(root: i32) -> Vec<i32> {
    let mut found: Vec<i32> = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        let Some(kids) = children(parent) else {
            if parent == root {
                return descendants(&table(), root);
            }
            continue;
        };
        for kid in kids {
            if kid != root && !found.contains(&kid) {
                found.push(kid);
                frontier.push(kid);
            }
        }
    }
    found.sort_unstable();
    found
}

/// The command name of `pid` (`/proc/<pid>/comm`), `?` when it cannot be read.
pub fn command_of(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|comm| comm.trim().to_string())
        .unwrap_or_else(|_| "?".to_string())
}

/// Make this process a child subreaper (Linux `PR_SET_CHILD_SUBREAPER`): a descendant orphaned
/// by its parent's exit (a double-forked daemon, whatever its session, group or environment) is
/// re-parented here instead of to init. False where that is not possible (not Linux).
pub fn become_subreaper() -> bool {
    #[cfg(target_os = "linux")]
    {
        nix::sys::prctl::set_child_subreaper(true).is_ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// The live children of this process that are not in `spared` (its own spawns): on a subreaper,
/// the orphans it adopted. Dead ones among them are reaped on the way.
pub fn adopted_children(spared: &[i32]) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mine = children(me).unwrap_or_else(|| {
        let table = table();
        table
            .iter()
            .filter(|row| row.ppid == me)
            .map(|row| row.pid)
            .collect()
    });
    let mut live = Vec::new();
    for pid in mine.into_iter().filter(|pid| !spared.contains(pid)) {
        // Gone meanwhile (reaped by its spawner), it is nobody's to kill.
        let Some((state, ppid)) = stat_of(pid) else {
            continue;
        };
        if ppid != me {
            continue;
        }
        if !matches!(state.as_str(), "Z" | "X" | "x") {
            live.push(pid);
        } else {
            let pid = nix::unistd::Pid::from_raw(pid);
            let _ = nix::sys::wait::waitpid(pid, Some(nix::sys::wait::WaitPidFlag::WNOHANG));
        }
    }
    live
}

/// The processes other than this one holding a descriptor on the pipe whose inode is `inode`
/// (`/proc/<pid>/fd/*` reading `pipe:[inode]`): who keeps a pipe open. Empty where there is no
/// `/proc`, and a process whose descriptors cannot be read (another user's) is not listed.
pub fn pipe_holders(inode: u64) -> Vec<i32> {
    let me = std::process::id() as i32;
    let target = format!("pipe:[{inode}]");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut holders: Vec<i32> = entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
                fds.flatten().any(|fd| {
                    std::fs::read_link(fd.path())
                        .is_ok_and(|link| link.as_os_str() == target.as_str())
                })
            })
        })
        .collect();
    holders.sort_unstable();
    holders
}

/// SIGKILLs the adopted orphans ([`adopted_children`]) until none is left or `bound` passes (a
/// killed orphan's own children are adopted next), reaping them; returns the pids killed.
pub fn kill_adopted(spared: &[i32], bound: std::time::Duration) -> Vec<i32> {
    let deadline = std::time::Instant::now() + bound;
    let mut killed: Vec<i32> = Vec::new();
    loop {
        let live = adopted_children(spared);
        if live.is_empty() || std::time::Instant::now() >= deadline {
            return killed;
        }
        for pid in live {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            if !killed.contains(&pid) {
                killed.push(pid);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descendants_follow_parent_links_only_below_the_root() {
        let row = |pid, ppid| Row {
            pid,
            ppid,
            live: true,
        };
        let table = [
            row(10, 1),
            row(11, 10),
            row(12, 11),
            row(13, 1),
            row(14, 12),
        ];
        assert_eq!(descendants(&table, 10), [11, 12, 14]);
        assert_eq!(descendants(&table, 13), Vec::<i32>::new());
        let me = std::process::id() as i32;
        assert!(table_has(me), "this process is in the live table");
    }

    #[test]
    fn a_pipe_s_holders_are_the_processes_with_its_write_end() {
        use std::os::unix::fs::MetadataExt;
        if !std::path::Path::new("/proc/self/fd").exists() {
            return;
        }
        let (reader, writer) = std::io::pipe().unwrap();
        let inode = std::fs::metadata(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&reader)
        ))
        .unwrap()
        .ino();
        let mut holder = std::process::Command::new("sleep")
            .arg("30")
            .stdout(writer)
            .spawn()
            .unwrap();
        let pid = holder.id() as i32;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !pipe_holders(inode).contains(&pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let found = pipe_holders(inode);
        let _ = holder.kill();
        let _ = holder.wait();
        drop(reader);
        assert_eq!(
            found,
            [pid],
            "only the sleep holds it (this process is left out)"
        );
    }

    #[test]
    fn a_running_stopped_or_reaped_process_is_not_dying() {
        use nix::sys::signal::{kill, Signal};
        use nix::unistd::Pid;
        assert!(!dying(std::process::id() as i32), "this test is running");
        assert!(!dying(i32::MAX), "no such process");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep starts");
        let pid = Pid::from_raw(child.id() as i32);
        kill(pid, Signal::SIGSTOP).expect("stop");
        assert!(!dying(pid.as_raw()), "a stopped process was not killed");
        kill(pid, Signal::SIGKILL).expect("kill");
        let status = child.wait().expect("reaped");
        assert!(!status.success(), "it died of the kill");
        assert!(!dying(pid.as_raw()), "a reaped process is gone, not dying");
    }

    #[test]
    fn the_tree_below_a_process_is_walked_through_its_childrens_lists() {
        // sh -> sleep (a grandchild of this test process).
        let mut shell = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .spawn()
            .unwrap();
        let root = shell.id() as i32;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut below = tree_below(root);
        while below.is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
            below = tree_below(root);
        }
        let by_table = descendants(&table(), root);
        let me = std::process::id() as i32;
        let mine = children(me);
        for pid in &below {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(*pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = shell.kill();
        let _ = shell.wait();
        assert_eq!(below.len(), 1, "{below:?}");
        assert_eq!(below, by_table, "the children lists and the table agree");
        if let Some(mine) = mine {
            assert!(mine.contains(&root), "{mine:?} lists the shell");
        }
    }

    fn table_has(pid: i32) -> bool {
        table().iter().any(|row| row.pid == pid && row.live)
    }
}
