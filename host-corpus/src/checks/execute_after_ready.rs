//! Spec 7: a run spawns dsh, "validate ready", then "execute". The host writes nothing to the
//! runtime's stdin before the runtime has written `ready`: fake-dsh journals, on its `ready` frame
//! entry, whether bytes were already waiting on its stdin at that moment (`stdin_pending`); only
//! the process's first `ready` counts (a second one comes after the execute on purpose). (The
//! order of journal lines cannot tell: the reader thread may journal a command before the writer
//! journals the `ready` the host already read.)

use super::{RunEvidence, Violation};
use crate::verdict::RULE_VALIDATE_READY;

pub fn check(evidence: &RunEvidence) -> Vec<Violation> {
    evidence
        .process
        .iter()
        .find(|entry| entry.token() == "frame:ready")
        .is_some_and(|first| first.stdin_pending())
        .then(|| {
            Violation::new(
                RULE_VALIDATE_READY,
                "the host wrote to the runtime's stdin before the runtime wrote ready",
            )
        })
        .into_iter()
        .collect()
}
