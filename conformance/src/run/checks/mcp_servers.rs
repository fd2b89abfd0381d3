//! Spec 12, phase one: "no externally injected MCP servers", and "OD must not claim generic MCP
//! support until the mapping and secret-handling tests are complete": every `execute` carries
//! `"mcp_servers": []` unless the driver claims the `mcp` capability (no generation defines MCP
//! entries yet; I-16h says what the kit will check then).

use super::{RunEvidence, Violation};
use crate::run::verdict::RULE_NO_MCP_PHASE_ONE;
use serde_json::Value;

pub fn check(evidence: &RunEvidence) -> Vec<Violation> {
    let Some(execute) = evidence.execute else {
        return Vec::new();
    };
    if evidence.claims_mcp {
        return Vec::new();
    }
    match execute.get("mcp_servers") {
        Some(Value::Array(entries)) if entries.is_empty() => Vec::new(),
        other => vec![Violation::new(
            RULE_NO_MCP_PHASE_ONE,
            format!(
                "the driver does not claim MCP support, yet execute.mcp_servers is {} (phase one sends [])",
                other.map_or_else(|| "absent".to_string(), Value::to_string)
            ),
        )],
    }
}
