//! `dsh-conformance supervise`, the runtime supervisor a host that cannot be a child subreaper
//! (Node.js) spawns its runtime through: it exits with the runtime's status only once the daemons
//! the runtime left outside its process group are dead (Linux).

use std::process::{Command, Stdio};

fn is_gone(pid: i32) -> bool {
    !dsh_engine::procfs::is_live(pid)
}

#[cfg(target_os = "linux")]
#[test]
fn the_runtime_s_escaped_daemon_is_killed_before_the_supervisor_exits_with_its_status() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pid_file = dir.path().join("daemon.pid");
    // A "runtime" that leaves a setsid daemon behind (off its stdio), then exits 3.
    let runtime = format!(
        "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $! > {}; echo hello; exit 3",
        pid_file.display()
    );
    let output = Command::new(dsh_test_support::binary("dsh-conformance"))
        .args(["supervise", "--grace-ms", "100", "--", "sh", "-c", &runtime])
        .stdin(Stdio::null())
        .output()
        .expect("the supervisor runs");
    assert_eq!(output.status.code(), Some(3), "the runtime's own status");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "hello\n",
        "the runtime keeps the supervisor's stdio"
    );
    let daemon: i32 = std::fs::read_to_string(&pid_file)
        .expect("the daemon's pid")
        .trim()
        .parse()
        .expect("a pid");
    let gone = is_gone(daemon);
    if !gone {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(daemon),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(gone, "the daemon {daemon} outlived the supervisor");
}

#[test]
fn a_runtime_that_cannot_start_is_exit_127() {
    let output = Command::new(dsh_test_support::binary("dsh-conformance"))
        .args(["supervise", "--", "/nonexistent/dsh"])
        .output()
        .expect("the supervisor runs");
    assert_eq!(output.status.code(), Some(127));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("/nonexistent/dsh"),
        "names the command"
    );
}
