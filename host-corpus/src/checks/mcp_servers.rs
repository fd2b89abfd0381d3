//! Spec 12, phase one: "no externally injected MCP servers", and "OD must not claim generic MCP
//! support until the mapping and secret-handling tests are complete": every `execute` carries
//! `"mcp_servers": []` unless the driver claims the `mcp` capability (no generation defines MCP
//! entries yet; I-16h says what the kit will check then).

use super::{RunEvidence, Violation};
use crate::verdict::RULE_NO_MCP_PHASE_ONE;
use serde_json::Value;

pub fn check(evidence: &RunEvidence) -> Vec<Violation> {
    evidence
        .execute
        .and_then(|execute| problem(execute, evidence.claims_mcp))
        .map(|why| Violation::new(RULE_NO_MCP_PHASE_ONE, why))
        .into_iter()
        .collect()
}

fn problem(execute: &Value, claims_mcp: bool) -> Option<String> {
    match execute.get("mcp_servers") {
        _ if claims_mcp => None,
        Some(Value::Array(entries)) if entries.is_empty() => None,
        other => Some(format!(
            "the driver does not claim MCP support, yet execute.mcp_servers is {} (phase one sends [])",
            other.map_or_else(|| "absent".to_string(), Value::to_string)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_an_mcp_claim_allows_entries() {
        let empty = json!({"mcp_servers": []});
        let one = json!({"mcp_servers": [{"name": "fs", "command": "mcp-fs"}]});
        assert_eq!(problem(&empty, false), None);
        assert!(problem(&one, false).is_some_and(|why| why.contains("mcp-fs")));
        assert!(problem(&json!({}), false).is_some_and(|why| why.contains("absent")));
        assert_eq!(problem(&one, true), None);
    }
}
