//! Spec 12, the runtime's side of model discovery: `--models` prints one schema-valid `models`
//! frame listing at least one model, each effort list with at most one default; and an `execute`
//! naming each listed route, with each of its efforts (or none when it lists none), is accepted
//! and completes.

use super::turn::{self, describe_terminal, LineKind, Picked, Plan};
use super::verdict::{fail, pass, run_surface, schema_problem, Outcome, SurfaceRun};
use super::world::{Target, World, PROFILE};
use dsh_engine::process::SpawnError;
use dsh_protocol::Terminal;
use serde_json::Value;

/// The most turns `rt.models-routes-accepted` runs (routes x efforts), so a huge catalog still
/// finishes; the detail says when it stopped early.
const MAX_ROUTE_TURNS: usize = 16;

/// Every route and effort `--models` lists, as a host's user could pick them, or why the answer
/// breaks the runtime's side of spec 12.
pub type Catalog = Result<Vec<Picked>, String>;

/// `rt.models-shape`.
pub fn models_shape(target: &Target) -> Result<Outcome, SpawnError> {
    Ok(match target.observed.catalog(target)? {
        Ok(picks) => pass(format!(
            "{} route(s) and effort(s): {}",
            picks.len(),
            picks
                .iter()
                .map(Picked::describe)
                .collect::<Vec<_>>()
                .join(", ")
        )),
        Err(why) => fail(why),
    })
}

/// `rt.models-routes-accepted`.
pub fn routes_accepted(target: &Target, world: &World) -> Result<Outcome, SpawnError> {
    let picks = match target.observed.catalog(target)? {
        Ok(picks) => picks,
        Err(why) => return Ok(fail(format!("no catalog to pick from: {why}"))),
    };
    let tried = picks.len().min(MAX_ROUTE_TURNS);
    for (index, picked) in picks.iter().take(MAX_ROUTE_TURNS).enumerate() {
        let plan = Plan {
            picked: Some(picked.clone()),
            request_id: Some(format!("{}-m{index}", world.request_id)),
            ..Plan::default()
        };
        let record = turn::run(target, world, &plan)?;
        let status = record
            .result_frame()
            .and_then(|result| result.get("status"))
            .and_then(Value::as_str);
        match (&record.terminal, status) {
            (Terminal::Result(_), Some("completed")) => {}
            (Terminal::Result(_), _) => {
                let error = record
                    .result_frame()
                    .and_then(|result| result.get("error"))
                    .map_or_else(String::new, |error| format!(": {error}"));
                return Ok(fail(format!(
                    "{} ended {}{error}",
                    picked.describe(),
                    status.unwrap_or("?")
                )));
            }
            (Terminal::Violation(_), _) => {
                return Ok(fail(format!(
                    "{}: {}",
                    picked.describe(),
                    describe_terminal(&record.terminal)
                )))
            }
        }
    }
    let skipped = picks.len() - tried;
    let note = if skipped > 0 {
        format!(" ({skipped} more not tried: at most {MAX_ROUTE_TURNS} turns)")
    } else {
        String::new()
    };
    Ok(pass(format!(
        "{tried} turn(s) completed, one per listed route and effort{note}"
    )))
}

/// Runs `--models` in `world` and reads its catalog.
pub(super) fn catalog(target: &Target, world: &World) -> Result<Catalog, SpawnError> {
    let SurfaceRun { lines, exit, code } =
        match run_surface(target, world, &["--profile", PROFILE, "--models"])? {
            Ok(done) => done,
            Err(why) => return Ok(Err(format!("`--models` {why}"))),
        };
    if code != 0 {
        return Ok(Err(format!("`--models` ended with {exit}")));
    }
    let [line] = lines.as_slice() else {
        return Ok(Err(format!(
            "`--models` printed {} non-empty lines, not exactly one",
            lines.len()
        )));
    };
    Ok(match &line.kind {
        LineKind::Object { value, .. } => picks(value),
        LineKind::NotAFrame { why } => Err(format!("the models line is {why}")),
        LineKind::TooLarge => Err("the models line is over 1 MiB".to_string()),
    })
}

/// The picks a valid `models` frame offers, or why it is not one.
pub fn picks(frame: &Value) -> Result<Vec<Picked>, String> {
    if frame.get("type").and_then(Value::as_str) != Some("models") {
        return Err(format!(
            "the models line has type {}, not \"models\"",
            frame.get("type").unwrap_or(&Value::Null)
        ));
    }
    if let Some(problem) = schema_problem(frame) {
        return Err(format!("the models frame is not schema-valid: {problem}"));
    }
    if frame.get("runtime").and_then(Value::as_str) != Some(dsh_protocol::RUNTIME_ID) {
        return Err(format!(
            "the models frame's runtime is {}, not \"open-design\"",
            frame.get("runtime").unwrap_or(&Value::Null)
        ));
    }
    let models = frame
        .get("models")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if models.is_empty() {
        return Err("the models frame lists no model".to_string());
    }
    let mut picks = Vec::new();
    for model in models {
        picks.extend(model_picks(model)?);
    }
    Ok(picks)
}

fn model_picks(model: &Value) -> Result<Vec<Picked>, String> {
    let text = |member: &str| {
        model
            .get(member)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (provider, id) = (text("provider"), text("id"));
    let options = model
        .get("reasoning_options")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let defaults = options
        .iter()
        .filter(|option| option.get("default").and_then(Value::as_bool) == Some(true))
        .count();
    if defaults > 1 {
        return Err(format!(
            "{provider}/{id} marks {defaults} reasoning options as default, not at most one"
        ));
    }
    let pick = |effort: Option<String>| Picked {
        provider: provider.clone(),
        id: id.clone(),
        effort,
    };
    if options.is_empty() {
        return Ok(vec![pick(None)]);
    }
    Ok(options
        .iter()
        .map(|option| pick(option.get("id").and_then(Value::as_str).map(str::to_string)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn frame(models: Value) -> Value {
        json!({"v": 1, "type": "models", "runtime": "open-design", "models": models})
    }

    fn model(id: &str, options: Value) -> Value {
        json!({"provider": "p", "provider_name": "P", "id": id, "name": id, "reasoning_options": options})
    }

    #[test]
    fn every_route_and_effort_is_a_pick() {
        let listed = frame(json!([
            model(
                "a",
                json!([{"id": "low", "name": "Low"}, {"id": "high", "name": "High", "default": true}])
            ),
            model("b", json!([]))
        ]));
        let picks: Vec<String> = picks(&listed)
            .unwrap_or_default()
            .iter()
            .map(Picked::describe)
            .collect();
        assert_eq!(picks, vec!["p/a (low)", "p/a (high)", "p/b"]);
    }

    #[test]
    fn what_the_runtime_must_not_print() {
        let two_defaults = frame(json!([model(
            "a",
            json!([
                {"id": "low", "name": "Low", "default": true}, {"id": "high", "name": "High", "default": true}
            ])
        )]));
        let why = |frame: Value| picks(&frame).err().unwrap_or_default();
        assert!(why(two_defaults).contains("2 reasoning options as default"));
        assert!(why(frame(json!([]))).contains("no model"));
        assert!(why(json!({"v": 1, "type": "models", "runtime": "multica", "models": [model("a", json!([]))]})).contains("runtime"));
        assert!(
            why(json!({"v": 1, "type": "models", "runtime": "open-design"})).contains("schema")
        );
        assert!(why(json!({"v": 1, "type": "probe"})).contains("not \"models\""));
    }
}
