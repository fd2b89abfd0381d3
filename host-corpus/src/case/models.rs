//! The spec-12 parts of a case run: the `models` step (the host's parsed model catalog) and the
//! route and reasoning effort a `run` carries as the host's user picked them.

use super::{Abort, Runner};
use crate::checks::Violation;
use crate::driver::Driver;
use crate::expect;
use crate::verdict::RULE_MODELS_REPLY_UNIQUE;
use dsh_engine::journal::Journal;
use dsh_formats::case::{ModelsExpect, RunStep};
use serde_json::{json, Value};
use std::collections::HashSet;

impl Runner<'_> {
    /// Driver `models`: the host runs `dsh --profile open-design --models` and replies with its
    /// catalog or why it has none.
    pub(super) fn models(
        &mut self,
        driver: &mut Driver,
        journal: &Journal,
        index: usize,
        expect: &ModelsExpect,
    ) -> Result<(), Abort> {
        let id = format!("m{index}");
        let from = self.journal_length(journal);
        let request = json!({"v": 1, "type": "models", "id": id});
        let reply = self.request(driver, &request, "models", Some("models"))?;
        self.check_step_processes(journal, from, "models");
        let repeated =
            repeated_entry(&reply).map(|why| Violation::new(RULE_MODELS_REPLY_UNIQUE, why));
        self.violations(repeated.into_iter().collect(), "models");
        let misses = expect::models(expect, &reply, self.codes());
        self.misses(misses, &expect.interpretations, &Default::default());
        Ok(())
    }
}

/// The first route, or effort of a model, a `models` reply lists twice (a picker entry a `run`
/// could not name alone).
fn repeated_entry(reply: &Value) -> Option<String> {
    let models = reply.get("models").and_then(Value::as_array)?;
    let text = |value: &Value, member: &str| {
        value
            .get(member)
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string()
    };
    let mut routes = HashSet::new();
    for model in models {
        let route = format!("{}/{}", text(model, "provider"), text(model, "id"));
        if !routes.insert(route.clone()) {
            return Some(format!("the models reply lists the route {route} twice"));
        }
        let options = model.get("reasoning_options").and_then(Value::as_array);
        let mut efforts = HashSet::new();
        for option in options.into_iter().flatten() {
            let effort = text(option, "id");
            if !efforts.insert(effort.clone()) {
                return Some(format!(
                    "the models reply lists the effort {effort} of {route} twice"
                ));
            }
        }
    }
    None
}

/// A step with a `route` sends it instead of `model` (`default` included, unparsed: parsing is the
/// host's job); a chosen reasoning effort goes as `reasoning_effort`.
pub(super) fn pick_route(request: &mut Value, run: &RunStep) {
    let Some(object) = request.as_object_mut() else {
        return;
    };
    if let Some(route) = &run.route {
        object.remove("model");
        object.insert("route".to_string(), Value::from(route.as_str()));
    }
    if let Some(effort) = &run.reasoning_effort {
        object.insert("reasoning_effort".to_string(), Value::from(effort.as_str()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(route: Option<&str>, effort: Option<&str>) -> RunStep {
        let mut step: RunStep =
            serde_json::from_value(json!({"conversation": "c1", "prompt": "p"})).expect("a step");
        step.route = route.map(str::to_string);
        step.reasoning_effort = effort.map(str::to_string);
        step
    }

    #[test]
    fn a_reply_listing_a_route_or_effort_twice_is_caught() {
        let model = |id: &str, efforts: &[&str]| {
            let options: Vec<Value> = efforts
                .iter()
                .map(|e| json!({"id": e, "name": e}))
                .collect();
            json!({"provider": "p", "id": id, "name": id, "reasoning_options": options})
        };
        let reply = |models: Vec<Value>| json!({"models": models});
        assert_eq!(
            repeated_entry(&reply(vec![model("a", &["low"]), model("b", &["low"])])),
            None
        );
        let twice = repeated_entry(&reply(vec![model("a", &[]), model("a", &[])]));
        assert!(twice.is_some_and(|why| why.contains("route p/a twice")));
        let effort = repeated_entry(&reply(vec![model("a", &["low", "low"])]));
        assert!(effort.is_some_and(|why| why.contains("effort low of p/a")));
    }

    #[test]
    fn a_route_replaces_the_model_and_an_effort_is_sent() {
        let base = json!({"model": {"provider": "p", "id": "m"}, "reasoning_effort": null});
        let mut request = base.clone();
        pick_route(&mut request, &run(None, None));
        assert_eq!(request, base);
        pick_route(&mut request, &run(Some("default"), Some("max")));
        assert_eq!(
            request,
            json!({"route": "default", "reasoning_effort": "max"})
        );
    }
}
