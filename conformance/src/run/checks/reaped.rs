//! Spec 6 and 10: "OD still reaps and verifies the process tree": no process the run journaled
//! (the runtime and its grandchildren) is alive once the host reported the outcome.

use super::{RunEvidence, Violation};
use crate::run::journal::{self, Entry, Journal};
use crate::run::verdict::RULE_PROCESS_TREE_REAPED;
use std::path::Path;
use std::time::Duration;

pub fn check(evidence: &RunEvidence) -> Vec<Violation> {
    still_alive(evidence.journal, evidence.entries)
        .map(|alive| {
            Violation::new(
                RULE_PROCESS_TREE_REAPED,
                format!("journaled process(es) {alive:?} still alive after the host's reply"),
            )
        })
        .into_iter()
        .collect()
}

/// The journaled pids of `entries` still alive after a short grace, if any.
pub fn still_alive(journal: &Journal, entries: &[Entry]) -> Option<Vec<i32>> {
    let alive = alive_after_grace(&journal::pids(entries), journal.path());
    (!alive.is_empty()).then_some(alive)
}

/// The pids still alive, re-checked once after a short grace so a process in the middle of
/// exiting is not counted.
pub fn alive_after_grace(pids: &[i32], journal: &Path) -> Vec<i32> {
    let alive: Vec<i32> = pids
        .iter()
        .copied()
        .filter(|pid| journal::is_alive(*pid, journal))
        .collect();
    if alive.is_empty() {
        return alive;
    }
    std::thread::sleep(Duration::from_millis(50));
    alive
        .into_iter()
        .filter(|pid| journal::is_alive(*pid, journal))
        .collect()
}
