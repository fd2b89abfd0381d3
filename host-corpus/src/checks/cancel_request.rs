//! Spec 10 step 1: "send the protocol cancel command for the active request": every `cancel` the
//! run's process received names the `request_id` of the execute it is serving.

use super::{RunEvidence, Violation};
use crate::verdict::RULE_CANCEL_COMMAND_SHAPE;
use serde_json::Value;

pub fn check(evidence: &RunEvidence) -> Vec<Violation> {
    let Some(active) = evidence
        .execute
        .and_then(|execute| execute.get("request_id"))
        .and_then(Value::as_str)
    else {
        return Vec::new();
    };
    evidence
        .process
        .iter()
        .filter(|entry| entry.token() == "command:cancel")
        .filter_map(|entry| entry.command()?.get("request_id"))
        .find(|named| named.as_str() != Some(active))
        .map(|named| {
            Violation::new(
                RULE_CANCEL_COMMAND_SHAPE,
                format!(
                    "the host's cancel names request {named}, not the active request {active:?}"
                ),
            )
        })
        .into_iter()
        .collect()
}
