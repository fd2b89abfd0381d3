//! Escaped daemons (spec 10, issue 17): a runtime's grandchild that double-forks out of the
//! runtime's process group (`setsid`, `setpgid`), clears its environment or keeps the runtime's
//! pipes open is still dead when the outcome is reported, because the host is a child subreaper.

#[path = "it/support/mod.rs"]
mod support;

use dsh_protocol::frames::Status;
use serde_json::{json, Value};
use support::{run, World};

/// The daemon's pid, from the runtime's `child` journal entry (none if the turn never got there).
fn daemon_pid(world: &World) -> Option<u64> {
    world
        .journal()
        .iter()
        .find(|entry| entry["event"] == "child")
        .and_then(|entry| entry["child_pid"].as_u64())
}

/// Kills the daemon if the host under test did not (so a failing test leaks nothing).
struct Reap(u64);

impl Drop for Reap {
    fn drop(&mut self) {
        if support::is_alive_fake_dsh(self.0) {
            let pid = nix::unistd::Pid::from_raw(self.0 as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        }
        // Adopted by this test process (a subreaper): reap it.
        let _ = nix::sys::wait::waitpid(
            nix::unistd::Pid::from_raw(self.0 as i32),
            Some(nix::sys::wait::WaitPidFlag::WNOHANG),
        );
    }
}

/// One run at a time: a daemon with a cleared environment carries no `DSH_HOST_TREE` token, so
/// while another run of this process is alive it cannot be attributed and is spared (killed by
/// the next teardown with no other run alive; docs/reference-host.md). Which run's daemon a
/// teardown kills among concurrent runs is the corpus's `hygiene.concurrent-daemons-own-run-only`.
static ONE_RUN_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn completes_with_the_daemon_dead(spawn: Value) {
    let _alone = ONE_RUN_AT_A_TIME.lock().await;
    dsh_host::process::adopt_orphans();
    let world = World::new(json!({
        "stdio": [[{"ready": {}}, {"read_execute": {}}, {"spawn_child": spawn}, {"agent": {}}]]
    }));
    let host = world.host();
    let (outcome, _) = run(&host, &world.request("c1", "Make a page")).await;
    let daemon = daemon_pid(&world).map(Reap);
    // A turn that failed before the spawn says why, rather than "no daemon".
    assert_eq!(outcome.status, Status::Completed, "{outcome:?}");
    let daemon = daemon.expect("the scenario spawned no daemon");
    assert!(
        !support::is_alive_fake_dsh(daemon.0),
        "the daemon {} (spawned with {spawn}) outlived the outcome",
        daemon.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setsid_daemon_is_killed() {
    completes_with_the_daemon_dead(json!({"detach": "setsid", "ignore_sigterm": true})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setsid_daemon_with_a_cleared_environment_is_killed() {
    completes_with_the_daemon_dead(json!({"detach": "setsid", "clear_env": true})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setpgid_daemon_is_killed() {
    completes_with_the_daemon_dead(json!({"detach": "setpgid", "ignore_sigterm": true})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_holding_the_pipes_neither_hangs_the_run_nor_survives() {
    completes_with_the_daemon_dead(json!({"detach": "setsid", "hold_stdio": true})).await;
}
