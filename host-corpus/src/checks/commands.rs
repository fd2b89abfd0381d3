//! Spec 6 "Host commands": every line the host wrote to the runtime's stdin is a schema-valid
//! `execute` or `cancel` command.

use super::{RunEvidence, Violation};
use crate::driver::clip;
use crate::verdict::RULE_EXECUTE_SHAPE;
use dsh_formats::journal::Event;
use serde_json::Value;

pub fn check(evidence: &RunEvidence) -> Vec<Violation> {
    evidence
        .entries
        .iter()
        .filter(|entry| entry.event() == "command")
        .find_map(|entry| match &entry.entry.event {
            Event::Command { command, raw } => problem(command.as_ref(), raw.as_deref()),
            _ => None,
        })
        .map(|why| Violation::new(RULE_EXECUTE_SHAPE, why))
        .into_iter()
        .collect()
}

fn problem(command: Option<&Value>, raw: Option<&str>) -> Option<String> {
    let Some(command) = command else {
        let raw = raw.unwrap_or("");
        return Some(format!(
            "the host sent a line that is not JSON: {}",
            clip(raw, 80)
        ));
    };
    let errors = dsh_protocol::schema::validate("command.schema.json", command).err()?;
    let errors: Vec<String> = errors.iter().take(3).map(ToString::to_string).collect();
    let kind = command.get("type").and_then(Value::as_str).unwrap_or("?");
    Some(format!(
        "the host sent an invalid {kind} command: {}",
        errors.join("; ")
    ))
}
