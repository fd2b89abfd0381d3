//! Spec 6 and 10: "OD still reaps and verifies the process tree" and "force-kill remaining owned
//! processes": no process the run journaled (the runtime, its grandchildren, and the daemons it
//! left outside its process group) is alive once the host reported the outcome.

use super::{RunEvidence, Violation};
use crate::verdict::{
    ESCAPED_PROCESS_REMEDY, RULE_OWNED_PROCESSES_KILLED, RULE_PROCESS_TREE_REAPED,
};
use dsh_engine::journal::{self, Entry, Journal};
use dsh_engine::procfs;
use std::path::Path;
use std::time::Duration;

pub fn check(evidence: &RunEvidence) -> Vec<Violation> {
    still_alive(evidence.journal, evidence.entries, evidence.tree_root)
        .map(|alive| reaped_violations(evidence.entries, &alive, "after the host's reply"))
        .unwrap_or_default()
}

/// The journaled pids of `entries` still alive after a short grace, if any. `tree_root` is the
/// per-case supervisor (`dsh_engine::supervisor`), whose tree holds every process of the case.
pub fn still_alive(
    journal: &Journal,
    entries: &[Entry],
    tree_root: Option<i32>,
) -> Option<Vec<i32>> {
    let alive = alive_after_grace(&journal::pids(entries), journal.path(), tree_root);
    (!alive.is_empty()).then_some(alive)
}

/// The findings for journaled processes still alive `when`: those that left the process group of
/// the process that started them under [`RULE_OWNED_PROCESSES_KILLED`] (with what a host must
/// do), the others under [`RULE_PROCESS_TREE_REAPED`].
pub fn reaped_violations(entries: &[Entry], alive: &[i32], when: &str) -> Vec<Violation> {
    let (escaped, in_group): (Vec<i32>, Vec<i32>) = alive
        .iter()
        .partition(|pid| journal::left_its_group(entries, **pid));
    let mut violations = Vec::new();
    if !in_group.is_empty() {
        violations.push(Violation::new(
            RULE_PROCESS_TREE_REAPED,
            format!("journaled process(es) {in_group:?} still alive {when}"),
        ));
    }
    if !escaped.is_empty() {
        violations.push(Violation::new(
            RULE_OWNED_PROCESSES_KILLED,
            format!(
                "journaled process(es) {escaped:?} the runtime started outside its process group still alive {when}: a host kills {ESCAPED_PROCESS_REMEDY}"
            ),
        ));
    }
    violations
}

/// The pids still alive, re-checked once after a short grace so a process in the middle of
/// exiting is not counted. A pid counts as this case's when its environment names the case's
/// journal, or when it is in `tree_root`'s tree (a daemon that cleared its environment).
pub fn alive_after_grace(pids: &[i32], journal: &Path, tree_root: Option<i32>) -> Vec<i32> {
    let alive_now = |candidates: &[i32]| -> Vec<i32> {
        let tree = tree_root
            .map(|root| procfs::descendants(&procfs::table(), root))
            .unwrap_or_default();
        candidates
            .iter()
            .copied()
            .filter(|pid| {
                journal::is_alive(*pid, journal) || (tree.contains(pid) && procfs::is_live(*pid))
            })
            .collect()
    };
    let alive = alive_now(pids);
    if alive.is_empty() {
        return alive;
    }
    std::thread::sleep(Duration::from_millis(50));
    alive_now(&alive)
}
