//! Spec 8 and 7: "The process cwd is the OD project workspace" and the compatibility key's
//! "canonical project cwd": the runtime runs in the canonical project dir, and the `execute` names
//! that dir, the run's model route, and holds the turn's prompt. (A run with a picker `route`
//! has its model judged by [`super::route`] instead.)

use super::{RunEvidence, Violation};
use crate::verdict::RULE_EXECUTE_CWD_MODEL_PROMPT;
use serde_json::Value;

pub fn check(evidence: &RunEvidence) -> Vec<Violation> {
    problem(evidence)
        .map(|why| Violation::new(RULE_EXECUTE_CWD_MODEL_PROMPT, why))
        .into_iter()
        .collect()
}

fn problem(evidence: &RunEvidence) -> Option<String> {
    let cwd = evidence.cwd.display().to_string();
    let start_cwd = evidence
        .process
        .iter()
        .find(|entry| entry.event() == "start")
        .and_then(|entry| entry.cwd());
    if let Some(start_cwd) = start_cwd {
        if start_cwd != cwd {
            return Some(format!(
                "the runtime process ran in {start_cwd:?}, not the canonical project dir {cwd:?}"
            ));
        }
    }
    let execute = evidence.execute?;
    let route = &evidence.run.model;
    let picked = evidence.run.route.is_some();
    if execute.get("cwd").and_then(Value::as_str) != Some(cwd.as_str()) {
        return Some(format!(
            "execute.cwd is {}, not the canonical project dir {cwd:?}",
            execute.get("cwd").unwrap_or(&Value::Null)
        ));
    }
    let model_differs = execute.pointer("/model/provider").and_then(Value::as_str)
        != Some(route.provider.as_str())
        || execute.pointer("/model/id").and_then(Value::as_str) != Some(route.id.as_str());
    if !picked && model_differs {
        return Some(format!(
            "execute.model is {}, not the run's route {}/{}",
            execute.get("model").unwrap_or(&Value::Null),
            route.provider,
            route.id
        ));
    }
    let prompt = execute.get("prompt").and_then(Value::as_str);
    if !prompt.is_some_and(|prompt| prompt.contains(evidence.run.prompt.as_str())) {
        return Some("execute.prompt does not hold the turn's prompt".to_string());
    }
    None
}
