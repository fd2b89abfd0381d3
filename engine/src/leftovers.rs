//! Processes a driver left behind. Every driver of a case runs with the case's random token in its
//! environment (`DSH_CONFORMANCE_CASE=<token>`), which its descendants inherit; once the driver's
//! process group has been killed, any live process still carrying the token escaped the group (a
//! daemon that double-forked or called `setsid`) and is SIGKILLed here. The token is per case, so a
//! parallel case's processes are never touched, and this process and its ancestors are skipped.
//! On Linux the per-case supervisor (`crate::supervisor`) finds and kills a driver's orphans
//! whatever their environment; [`sweep_case`] merges its report with the token sweep.

use crate::procfs::{self, is_live, stat_of};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

/// The environment variable holding the per-case token.
pub const CASE_TOKEN_ENV: &str = "DSH_CONFORMANCE_CASE";

/// How many find-and-kill rounds a sweep makes (a leftover may fork while it is being killed).
const SWEEP_ROUNDS: usize = 5;
const POLL: Duration = Duration::from_millis(10);

/// One process found carrying a case's token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    pub pid: i32,
    /// Its command name (`/proc/<pid>/comm`), for the report.
    pub command: String,
}

impl std::fmt::Display for Leftover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {} ({})", self.pid, self.command)
    }
}

/// The live (not zombie) processes whose environment holds `DSH_CONFORMANCE_CASE=<token>`, never
/// this process nor one of its ancestors. Processes whose environment cannot be read (another
/// user's) are not this case's.
pub fn find(token: &str) -> Vec<Leftover> {
    if token.is_empty() {
        return Vec::new();
    }
    let needle = format!("{CASE_TOKEN_ENV}={token}");
    let spared = self_and_ancestors();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found: Vec<Leftover> = entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid > 1 && !spared.contains(pid))
        .filter(|pid| carries(*pid, &needle) && is_live(*pid))
        .map(|pid| Leftover {
            pid,
            command: command_of(pid),
        })
        .collect();
    found.sort_by_key(|leftover| leftover.pid);
    found
}

/// Ends every process carrying `token` once the driver's group is gone: waits up to `grace` for
/// them to exit on their own (a group member in the middle of dying from the group kill), then
/// SIGKILLs the rest (re-checking the token right before each kill, so a recycled pid is spared)
/// and waits up to `kill_wait` for them to die. Returns the processes it had to kill: not those
/// already dying of an earlier kill (`procfs::dying`), which only waited for a CPU to finish.
pub fn sweep(token: &str, grace: Duration, kill_wait: Duration) -> Vec<Leftover> {
    let needle = format!("{CASE_TOKEN_ENV}={token}");
    let deadline = Instant::now() + grace;
    let mut remaining = find(token);
    while !remaining.is_empty() && Instant::now() < deadline {
        std::thread::sleep(POLL);
        remaining = find(token);
    }
    let mut killed: Vec<Leftover> = Vec::new();
    for _ in 0..SWEEP_ROUNDS {
        if remaining.is_empty() {
            break;
        }
        for leftover in &remaining {
            // One already dying of an earlier kill (its driver's group) was not left behind.
            let dying = procfs::dying(leftover.pid);
            if carries(leftover.pid, &needle) {
                let _ = kill(Pid::from_raw(leftover.pid), Signal::SIGKILL);
            }
            if !dying && !killed.iter().any(|known| known.pid == leftover.pid) {
                killed.push(leftover.clone());
            }
        }
        let deadline = Instant::now() + kill_wait;
        loop {
            remaining = find(token);
            if remaining.is_empty() || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(POLL);
        }
    }
    killed.sort_by_key(|leftover| leftover.pid);
    killed
}

/// A case's whole sweep: what its supervisors killed (every orphan of the tree, whatever its
/// environment; `crate::supervisor`), then the token sweep (the fallback where there is no
/// supervisor). The supervisors' report is emptied.
pub fn sweep_case(
    token: &str,
    report: &Path,
    grace: Duration,
    kill_wait: Duration,
) -> Vec<Leftover> {
    let mut killed = crate::supervisor::take(report);
    for leftover in sweep(token, grace, kill_wait) {
        if !killed.iter().any(|known| known.pid == leftover.pid) {
            killed.push(leftover);
        }
    }
    killed.sort_by_key(|leftover| leftover.pid);
    killed
}

/// The journaled processes among `pids` that a supervisor had to kill after its driver exited:
/// the host left them running (the report is kept for the sweep).
pub fn journaled_killed_by_supervisor(report: &Path, pids: &[i32]) -> Vec<i32> {
    crate::supervisor::peek(report)
        .into_iter()
        .map(|leftover| leftover.pid)
        .filter(|pid| pids.contains(pid))
        .collect()
}

/// Whether `/proc/<pid>/environ` holds exactly this `NAME=value` entry.
fn carries(pid: i32, needle: &str) -> bool {
    procfs::environ_has(pid, needle).unwrap_or(false)
}

fn command_of(pid: i32) -> String {
    procfs::command_of(pid)
}

/// This process and every ancestor up to init: never swept, even if one carries a token (a
/// harness that is itself under test inherits its outer case's token).
fn self_and_ancestors() -> BTreeSet<i32> {
    let mut spared = BTreeSet::new();
    let mut pid = std::process::id() as i32;
    while pid > 0 && spared.insert(pid) {
        match stat_of(pid) {
            Some((_, parent)) => pid = parent,
            None => break,
        }
    }
    spared
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Child, Command};

    /// A `sleep` in its own process group carrying `token`; killed and reaped on drop.
    struct Sleeper(Child);

    impl Sleeper {
        fn start(token: &str) -> Sleeper {
            let mut command = Command::new("sleep");
            command.arg("30").env(CASE_TOKEN_ENV, token);
            std::os::unix::process::CommandExt::process_group(&mut command, 0);
            let sleeper = Sleeper(command.spawn().expect("sleep starts"));
            sleeper.await_environment(token);
            sleeper
        }
        /// `spawn` returns once the child has begun `exec`, but the kernel publishes the new
        /// program's environment a moment later (until then `/proc/<pid>/environ` reads empty):
        /// wait for it, so the test judges `find`, not that window.
        fn await_environment(&self, token: &str) {
            let entry = format!("{CASE_TOKEN_ENV}={token}");
            let deadline = Instant::now() + Duration::from_secs(10);
            while procfs::environ_has(self.pid(), &entry) != Some(true) {
                assert!(
                    Instant::now() < deadline,
                    "sleep never showed its environment"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        fn pid(&self) -> i32 {
            self.0.id() as i32
        }
        /// Reaps it once it is dead (the sweep killed it); true when it died of SIGKILL.
        fn was_killed(&mut self) -> bool {
            use std::os::unix::process::ExitStatusExt;
            self.0
                .wait()
                .is_ok_and(|status| status.signal() == Some(Signal::SIGKILL as i32))
        }
    }

    impl Drop for Sleeper {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    fn token() -> String {
        crate::random::random_hex(16).expect("random token")
    }

    #[test]
    fn finds_and_kills_only_the_token_s_processes() {
        let (mine, theirs) = (token(), token());
        let mut leftover = Sleeper::start(&mine);
        let mut other_case = Sleeper::start(&theirs);
        let found = find(&mine);
        assert_eq!(
            found.iter().map(|l| l.pid).collect::<Vec<_>>(),
            [leftover.pid()]
        );
        assert_eq!(found[0].command, "sleep");
        assert!(find(&format!("{mine}0")).is_empty(), "the match is exact");

        let killed = sweep(&mine, Duration::ZERO, Duration::from_secs(2));
        assert_eq!(
            killed.iter().map(|l| l.pid).collect::<Vec<_>>(),
            [leftover.pid()]
        );
        assert!(leftover.was_killed());
        assert_eq!(
            find(&theirs).iter().map(|l| l.pid).collect::<Vec<_>>(),
            [other_case.pid()],
            "another case's process is untouched"
        );
        assert_eq!(
            sweep(&theirs, Duration::ZERO, Duration::from_secs(2)).len(),
            1
        );
        assert!(other_case.was_killed());
    }

    #[test]
    fn never_matches_this_process_or_an_empty_token() {
        assert!(find("").is_empty());
        let spared = self_and_ancestors();
        assert!(spared.contains(&(std::process::id() as i32)));
        assert!(spared.len() >= 2, "at least this process and its parent");
    }
}
