//! Spec 12 (model discovery) with spec 6's `execute`: the route and reasoning effort the host's
//! user picked reach `execute` exactly. `provider/id` is `execute.model`; `default` means no
//! `model` at all (the runtime's own default, as the driver contract defines it); a chosen effort
//! is `execute.reasoning_effort`, and none chosen sends none (I-16e). A route that is not
//! `provider/id` is the host's error before anything is spawned (I-16f).

use super::{stdio_starts, RunEvidence, Violation};
use crate::verdict::{
    RULE_ROUTE_INVALID_BEFORE_SPAWN, RULE_ROUTE_REACHES_EXECUTE, RULE_UNPICKED_OMITTED,
};
use dsh_formats::case::{RouteChoice, RunStep};
use serde_json::Value;

pub fn check(evidence: &RunEvidence) -> Vec<Violation> {
    if let RouteChoice::Invalid(route) = evidence.run.route_choice() {
        return invalid_route(evidence, &route).into_iter().collect();
    }
    let Some(execute) = evidence.execute else {
        return Vec::new();
    };
    [
        model_problem(evidence.run, execute),
        effort_problem(evidence.run, execute),
    ]
    .into_iter()
    .flatten()
    .collect()
}

fn invalid_route(evidence: &RunEvidence, route: &str) -> Option<Violation> {
    let starts = stdio_starts(evidence.entries);
    let why = if !starts.is_empty() {
        format!(
            "the route {route:?} is not provider/id, yet the host spawned `dsh --stdio` ({} process(es))",
            starts.len()
        )
    } else if evidence.outcome_str("status") != Some("failed") {
        format!(
            "the route {route:?} is not provider/id, yet the outcome is {}",
            evidence.outcome_str("status").unwrap_or("?")
        )
    } else {
        return None;
    };
    Some(Violation::new(RULE_ROUTE_INVALID_BEFORE_SPAWN, why))
}

/// Only a run that picked a route is judged here (a plain `model` is execute_fields' job).
fn model_problem(run: &RunStep, execute: &Value) -> Option<Violation> {
    run.route.as_ref()?;
    let sent = execute.get("model");
    match run.route_choice() {
        RouteChoice::Default if sent.is_some() => Some(Violation::new(
            RULE_ROUTE_REACHES_EXECUTE,
            format!(
                "the route is `default`, yet execute carries model {}",
                sent.unwrap_or(&Value::Null)
            ),
        )),
        RouteChoice::Model(route) => {
            let provider = execute.pointer("/model/provider").and_then(Value::as_str);
            let id = execute.pointer("/model/id").and_then(Value::as_str);
            let why = format!(
                "execute.model is {}, not the picked route {}/{}",
                sent.unwrap_or(&Value::Null),
                route.provider,
                route.id
            );
            (provider != Some(route.provider.as_str()) || id != Some(route.id.as_str()))
                .then(|| Violation::new(RULE_ROUTE_REACHES_EXECUTE, why))
        }
        _ => None,
    }
}

fn effort_problem(run: &RunStep, execute: &Value) -> Option<Violation> {
    let sent = execute
        .get("reasoning_effort")
        .filter(|sent| !sent.is_null());
    let (rule, why) = match (&run.reasoning_effort, sent) {
        (Some(want), sent) if sent.and_then(Value::as_str) != Some(want.as_str()) => (
            RULE_ROUTE_REACHES_EXECUTE,
            format!(
                "execute.reasoning_effort is {}, not the picked effort {want:?}",
                sent.unwrap_or(&Value::Null)
            ),
        ),
        (None, Some(sent)) => (
            RULE_UNPICKED_OMITTED,
            format!("no reasoning effort was picked, yet execute carries reasoning_effort {sent}"),
        ),
        _ => return None,
    };
    Some(Violation::new(rule, why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(route: &str, effort: Option<&str>) -> RunStep {
        let mut step: RunStep =
            serde_json::from_value(json!({"conversation": "c1", "prompt": "p"})).expect("a step");
        step.route = Some(route.to_string());
        step.reasoning_effort = effort.map(str::to_string);
        step
    }

    fn rules(run: &RunStep, execute: Value) -> Vec<&'static str> {
        [model_problem(run, &execute), effort_problem(run, &execute)]
            .into_iter()
            .flatten()
            .map(|violation| violation.rule)
            .collect()
    }

    #[test]
    fn the_picked_route_and_effort_must_reach_execute_exactly() {
        let model = json!({"provider": "p", "id": "m"});
        let picked = run("p/m", Some("max"));
        let exact = json!({"model": model, "reasoning_effort": "max"});
        assert!(rules(&picked, exact).is_empty());
        let other = json!({"model": {"provider": "p", "id": "n"}, "reasoning_effort": "max"});
        assert_eq!(rules(&picked, other), vec![RULE_ROUTE_REACHES_EXECUTE]);
        let no_effort = json!({"model": model, "reasoning_effort": null});
        assert_eq!(rules(&picked, no_effort), vec![RULE_ROUTE_REACHES_EXECUTE]);
    }

    #[test]
    fn default_and_unpicked_effort_send_nothing() {
        let default = run("default", None);
        assert!(rules(&default, json!({})).is_empty());
        assert!(rules(&default, json!({"reasoning_effort": null})).is_empty());
        let with_model = json!({"model": {"provider": "p", "id": "m"}});
        assert_eq!(
            rules(&default, with_model),
            vec![RULE_ROUTE_REACHES_EXECUTE]
        );
        assert_eq!(
            rules(&default, json!({"reasoning_effort": "high"})),
            vec![RULE_UNPICKED_OMITTED]
        );
    }
}
