//! Spec 7: "Each OD run starts one short-lived dsh process" — exactly one new `--stdio` process per
//! run, never one an earlier run used.

use super::{stdio_starts, RunEvidence, Violation};
use crate::verdict::RULE_NEW_PROCESS_PER_TURN;
use dsh_formats::case::RouteChoice;

pub fn check(evidence: &RunEvidence) -> Vec<Violation> {
    if matches!(evidence.run.route_choice(), RouteChoice::Invalid(_)) {
        // No process at all is right here: judged by `route` (s12.route-invalid-before-spawn).
        return Vec::new();
    }
    let starts = stdio_starts(evidence.entries);
    let spawn_failed = evidence.outcome_str("code") == Some("DSH_PROFILE_SPAWN_FAILED");
    let why = match starts.as_slice() {
        [] if spawn_failed => return Vec::new(),
        [pid] if evidence.earlier_runs.contains(pid) => {
            format!("the run reused process {pid} of an earlier run")
        }
        [_] => return Vec::new(),
        _ => format!(
            "expected exactly one `dsh --profile {} --stdio` process for the run, the journal shows {}",
            evidence.world.profile(),
            starts.len()
        ),
    };
    vec![Violation::new(RULE_NEW_PROCESS_PER_TURN, why)]
}
