//! Spec 11/14: the credential is never placed in argv. No `dsh` the host started carries the
//! canary credential in its argv.

use super::{RunEvidence, Violation};
use crate::verdict::RULE_NO_CREDENTIAL_LEAK;
use dsh_engine::journal::Entry;

pub fn check(evidence: &RunEvidence) -> Vec<Violation> {
    canary_in_argv(evidence.entries, &evidence.world.canary)
        .into_iter()
        .collect()
}

/// The violation when some `start` entry's argv holds the canary.
pub fn canary_in_argv(entries: &[Entry], canary: &str) -> Option<Violation> {
    let leaked = entries
        .iter()
        .filter(|entry| entry.event() == "start")
        .filter_map(|entry| serde_json::to_string(entry.argv()?).ok())
        .any(|argv| !canary.is_empty() && argv.contains(canary));
    leaked.then(|| {
        Violation::new(
            RULE_NO_CREDENTIAL_LEAK,
            "the canary credential is in a dsh argv",
        )
    })
}
