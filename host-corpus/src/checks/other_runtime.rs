//! Spec 10: "No operation may kill another conversation's runtime." When one of several runs in
//! flight ends, each process of another run that is gone from `/proc` is judged here on evidence
//! only, never on two facts read at different moments.
//!
//! The order of facts is what makes it race-free: the journal is re-read *after* the `/proc`
//! probe, so every entry a dead process could ever write is in it. A process gone at the probe
//! with an `exit` entry in the re-read journal exited on its own. One gone without an `exit` died
//! of SIGKILL (fake-dsh journals every other way out). It was killed by the ending run's teardown
//! only when nothing of its own run's end could have done it: the re-read journal (written after
//! its death) shows its run's runtime neither sending a result or a fatal frame, nor exiting, nor
//! getting its stdin closed or a cancel, and the harness sent that run no cancel. Its own run's
//! end under way means its own host could have ended it: the kit cannot tell which run's teardown
//! did, and says so (`untestable`) instead of blaming the host.

use dsh_engine::journal::Entry;

/// The frames after which a host ends a run (a result, or a frame the host may reject as fatal).
const ENDING_FRAMES: &[&str] = &["frame:result", "frame:protocol_error", "frame:raw"];

/// What the evidence says about one process of another run in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// Not killed by the ending run; why (alive, exited on its own, ...).
    NotKilled(&'static str),
    /// Killed while its own run was in the middle of its turn; the evidence.
    Killed(String),
    /// Gone without an exit while its own run was ending: its own teardown may have ended it.
    CannotTell(String),
}

/// What is known about the other run when its process `pid` is judged.
#[derive(Debug, Clone, Copy)]
pub struct OtherRun<'a> {
    /// Its runtime (the first `--stdio` process of its tree), when the journal shows one.
    pub root: Option<i32>,
    /// The harness had sent it a cancel by the time of the probe.
    pub cancel_sent: bool,
    /// The journal re-read after the probe (every entry since the step began).
    pub journal_after_probe: &'a [Entry],
    /// The processes the case's supervisor killed so far (`dsh_engine::supervisor::peek`).
    pub supervisor_killed: &'a [i32],
}

/// The fate of `pid` of `other`, which `/proc` showed `live` (or gone) at the probe made after
/// the ending run's outcome.
pub fn fate(pid: i32, live: bool, other: &OtherRun) -> Fate {
    let entries = other.journal_after_probe;
    let tokens_of = |of: i32| -> Vec<String> {
        entries
            .iter()
            .filter(|entry| entry.pid() == Some(of))
            .map(Entry::token)
            .collect()
    };
    if live {
        return Fate::NotKilled("alive");
    }
    let own = tokens_of(pid);
    if own.iter().any(|token| token == "exit") {
        return Fate::NotKilled("it journaled its exit: it exited on its own");
    }
    if other.supervisor_killed.contains(&pid) {
        return Fate::NotKilled("the case's supervisor killed it after its driver exited");
    }
    let root = other.root.unwrap_or(pid);
    let runtime = tokens_of(root);
    if root != pid && runtime.iter().any(|token| token == "exit") {
        return Fate::NotKilled("its run's runtime had exited: what it left was its run's to reap");
    }
    let ending: Vec<&str> = runtime
        .iter()
        .map(String::as_str)
        .filter(|token| {
            ENDING_FRAMES.contains(token) || matches!(*token, "stdin_closed" | "command:cancel")
        })
        .collect();
    let signals: Vec<&str> = own
        .iter()
        .map(String::as_str)
        .filter(|token| token.starts_with("signal:"))
        .collect();
    let signalled = match signals.is_empty() {
        true => String::new(),
        false => format!(" (it journaled {})", signals.join(", ")),
    };
    if other.cancel_sent || !ending.is_empty() {
        let why = match other.cancel_sent {
            true => "the harness had cancelled that run".to_string(),
            false => format!("that run's runtime had journaled {}", ending.join(", ")),
        };
        return Fate::CannotTell(format!(
            "process {pid} died without journaling its exit{signalled}, but {why}, so its own run's teardown may have ended it as well as the ending run's"
        ));
    }
    Fate::Killed(format!(
        "process {pid} died without journaling its exit{signalled} while its runtime {root} was in the middle of its turn (the journal read after its death shows no result, exit, stdin close or cancel), and the case's supervisor did not kill it"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_formats::journal::{self as format, Event, ExitReason, Mode};

    fn entry(line: usize, pid: i32, event: Event) -> Entry {
        Entry {
            line,
            entry: format::Entry {
                v: 1,
                pid,
                t_ms: line as u64,
                event,
            },
        }
    }

    fn start(pid: i32, ppid: i32, mode: Mode) -> Event {
        Event::Start {
            ppid,
            pgid: pid,
            sid: 1,
            argv: Vec::new(),
            cwd: "/".into(),
            env_names: Vec::new(),
            mode,
            invocation: None,
        }
    }

    fn exit() -> Event {
        Event::Exit {
            code: 0,
            reason: ExitReason::ResultSent,
        }
    }

    /// Run B's runtime 20 (with its child 21) in the middle of its turn, then `more`.
    fn journal(more: Vec<(i32, Event)>) -> Vec<Entry> {
        let mut events = vec![
            (20, start(20, 1, Mode::Stdio)),
            (20, Event::frame("ready")),
            (
                20,
                Event::Child {
                    child_pid: 21,
                    ignores_sigterm: false,
                },
            ),
            (21, start(21, 20, Mode::Child)),
            (20, Event::frame("text")),
        ];
        events.extend(more);
        events
            .into_iter()
            .enumerate()
            .map(|(line, (pid, event))| entry(line, pid, event))
            .collect()
    }

    fn other<'a>(entries: &'a [Entry], cancel_sent: bool, killed: &'a [i32]) -> OtherRun<'a> {
        OtherRun {
            root: Some(20),
            cancel_sent,
            journal_after_probe: entries,
            supervisor_killed: killed,
        }
    }

    #[test]
    fn a_live_process_or_one_whose_exit_the_re_read_journal_shows_was_not_killed() {
        let mid_turn = journal(Vec::new());
        assert_eq!(
            fate(20, true, &other(&mid_turn, false, &[])),
            Fate::NotKilled("alive")
        );
        // Gone at the probe, its exit journaled after the first read: it exited on its own.
        let exited = journal(vec![(20, Event::frame("result")), (20, exit())]);
        assert!(matches!(
            fate(20, false, &other(&exited, false, &[])),
            Fate::NotKilled(why) if why.contains("exited on its own")
        ));
        // Its child, SIGKILLed by its own run's reaping once the runtime had exited.
        assert!(matches!(
            fate(21, false, &other(&exited, false, &[])),
            Fate::NotKilled(why) if why.contains("runtime had exited")
        ));
    }

    #[test]
    fn gone_mid_turn_without_exit_signal_or_supervisor_kill_is_killed() {
        let mid_turn = journal(Vec::new());
        let Fate::Killed(why) = fate(20, false, &other(&mid_turn, false, &[])) else {
            panic!("a runtime gone mid-turn was killed");
        };
        assert!(why.contains("process 20") && !why.contains("journaled signal"));
        // A signal it journaled mid-turn is part of the evidence, not an excuse.
        let signalled = journal(vec![(
            21,
            Event::Signal {
                signal: "SIGTERM".into(),
                ignored: true,
            },
        )]);
        let Fate::Killed(why) = fate(21, false, &other(&signalled, false, &[])) else {
            panic!("a child signalled and gone mid-turn was killed");
        };
        assert!(why.contains("signal:SIGTERM"), "{why}");
    }

    #[test]
    fn the_supervisor_s_kill_is_not_the_ending_run_s() {
        let mid_turn = journal(Vec::new());
        assert!(matches!(
            fate(21, false, &other(&mid_turn, false, &[21])),
            Fate::NotKilled(why) if why.contains("supervisor")
        ));
    }

    #[test]
    fn gone_while_its_own_run_was_ending_cannot_be_told_apart() {
        for (more, cancel_sent, evidence) in [
            (
                vec![(20, Event::frame("result"))],
                false,
                "journaled frame:result",
            ),
            (vec![(20, Event::StdinClosed)], false, "stdin_closed"),
            (Vec::new(), true, "cancelled that run"),
        ] {
            let entries = journal(more);
            let Fate::CannotTell(why) = fate(21, false, &other(&entries, cancel_sent, &[])) else {
                panic!("{evidence}: its own run's end could have killed it");
            };
            assert!(why.contains(evidence), "{why}");
        }
    }
}
