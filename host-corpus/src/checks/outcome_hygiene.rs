//! Spec 6 and 14: "Diagnostics go to bounded stderr" which "excludes prompts, credentials": what
//! the host kept of the runtime's stderr (`outcome.stderr`) is bounded and holds neither the canary
//! credential nor the turn's prompt or bootstrap context.

use super::{RunEvidence, Violation};
use crate::verdict::{RULE_NO_CREDENTIAL_LEAK, RULE_NO_PROMPT_IN_STDERR, RULE_STDERR_BOUNDED};

/// The bound on `outcome.stderr` (docs/host-driver.md).
pub const MAX_OUTCOME_STDERR: usize = 64 * 1024;
/// Prompts shorter than this are not searched for in stderr (too likely to occur by chance).
pub const MIN_SCANNED_PROMPT: usize = 8;

pub fn check(evidence: &RunEvidence) -> Vec<Violation> {
    let stderr = evidence.outcome_str("stderr").unwrap_or("");
    let world = evidence.world;
    let prompt = evidence.run.prompt.as_str();
    let mut violations = Vec::new();
    if stderr.len() > MAX_OUTCOME_STDERR {
        violations.push(Violation::new(
            RULE_STDERR_BOUNDED,
            format!(
                "outcome.stderr is {} bytes, over the 64 KiB bound",
                stderr.len()
            ),
        ));
    }
    if stderr.contains(world.canary.as_str()) {
        violations.push(Violation::new(
            RULE_NO_CREDENTIAL_LEAK,
            "outcome.stderr holds the canary credential",
        ));
    }
    if stderr.contains(world.bootstrap_marker.as_str())
        || (prompt.len() >= MIN_SCANNED_PROMPT && stderr.contains(prompt))
    {
        violations.push(Violation::new(
            RULE_NO_PROMPT_IN_STDERR,
            "outcome.stderr holds the prompt",
        ));
    }
    violations
}
