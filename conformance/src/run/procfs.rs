//! What `/proc` says about a process: its state and parent, whether it is alive (a zombie is
//! dead: its parent only has to reap it), and whether its environment holds an entry.

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

/// Alive and not a zombie.
pub fn is_live(pid: i32) -> bool {
    stat_of(pid).is_some_and(|(state, _)| !matches!(state.as_str(), "Z" | "X" | "x"))
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
