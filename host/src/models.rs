//! Model discovery (spec 12): ask `dsh --profile open-design --models` for the profile's catalog,
//! parse it the way OpenDesign's host does, and turn the route a user picks into `execute`'s
//! `model` and `reasoning_effort`.
//!
//! The catalog answer is exactly one non-empty line, at most [`MAX_MODELS_BYTES`], read within the
//! host's bound: a `models` frame with `v` 1 and runtime `open-design` whose every model has
//! non-empty `provider`, `provider_name`, `id`, `name`, and whose every reasoning option has a
//! non-empty `id` and `name` and a boolean `default` when present. A repeated `provider/id` and a
//! repeated effort id are dropped (the first wins); an empty list is "no models" (unavailable).
//! A picked route is `provider/id` or `default` (no `model` in `execute`); anything else is the
//! host's error before anything is spawned.

use crate::codes::{self, Diagnostic};
use crate::discovery::{self, describe_exit, truncate, PROFILE};
use crate::host::Host;
use crate::run::{Outcome, RunRequest};
use crate::short_command::{self, Finished};
use dsh_protocol::frames::{ModelRoute, Status};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::HashSet;

/// The largest `--models` answer the host reads (I-16d).
pub const MAX_MODELS_BYTES: usize = 64 * 1024;

/// The route that leaves the model to the runtime.
pub const DEFAULT_ROUTE: &str = "default";

/// One model of the picker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogModel {
    pub provider: String,
    pub provider_name: String,
    pub id: String,
    pub name: String,
    pub reasoning_options: Vec<ReasoningOption>,
}

/// One reasoning effort a model offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReasoningOption {
    pub id: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<bool>,
}

fn invalid(why: String) -> Diagnostic {
    Diagnostic::new(
        codes::MODELS_INVALID,
        format!(
            "the open-design profile's model list {why}; reinstall or repair the profile (setup)"
        ),
    )
}

/// Parse the stdout of `--models` into the catalog the picker shows: the frame's models, each
/// repeat dropped (the first wins), and an empty list refused as "no models".
pub fn parse_catalog(stdout: &[u8]) -> Result<Vec<CatalogModel>, Diagnostic> {
    let models = parse_models_frame(stdout)?;
    refuse_empty(without_duplicates(models))
}

/// The `models` frame's models, every one validated, in order and as listed (repeats kept).
pub fn parse_models_frame(stdout: &[u8]) -> Result<Vec<CatalogModel>, Diagnostic> {
    if stdout.len() > MAX_MODELS_BYTES {
        return Err(invalid(format!("is larger than {MAX_MODELS_BYTES} bytes")));
    }
    let lines = discovery::non_empty_lines(stdout);
    let [line] = lines.as_slice() else {
        return Err(invalid(format!(
            "has {} non-empty lines instead of exactly one models frame",
            lines.len()
        )));
    };
    let frame: Value =
        serde_json::from_slice(line).map_err(|error| invalid(format!("is not JSON ({error})")))?;
    let object = frame
        .as_object()
        .ok_or_else(|| invalid("is not a JSON object".to_string()))?;
    if object.get("v") != Some(&Value::from(1))
        || object.get("type") != Some(&Value::from("models"))
    {
        return Err(invalid(
            "is not a generation-1 models frame (`\"v\":1,\"type\":\"models\"`)".to_string(),
        ));
    }
    if object.get("runtime").and_then(Value::as_str) != Some(dsh_protocol::RUNTIME_ID) {
        return Err(invalid(format!(
            "comes from runtime {}, not \"{}\"",
            object.get("runtime").unwrap_or(&Value::Null),
            dsh_protocol::RUNTIME_ID
        )));
    }
    let entries = object
        .get("models")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("has no `models` array".to_string()))?;
    entries
        .iter()
        .enumerate()
        .map(|(index, entry)| {
            parse_model(entry).map_err(|why| invalid(format!("model {index} {why}")))
        })
        .collect()
}

/// The catalog without a repeated `provider/id`, nor a repeated effort id within a model: the
/// first of each wins.
pub fn without_duplicates(models: Vec<CatalogModel>) -> Vec<CatalogModel> {
    let mut seen = HashSet::new();
    let mut kept = Vec::new();
    for mut model in models {
        if seen.insert((model.provider.clone(), model.id.clone())) {
            let mut efforts = HashSet::new();
            model
                .reasoning_options
                .retain(|option| efforts.insert(option.id.clone()));
            kept.push(model);
        }
    }
    kept
}

/// An empty catalog is "no models": the runtime has nothing to run.
pub fn refuse_empty(models: Vec<CatalogModel>) -> Result<Vec<CatalogModel>, Diagnostic> {
    if models.is_empty() {
        return Err(Diagnostic::new(
            codes::MODELS_EMPTY,
            "the open-design profile lists no models: DeepSeek Harness has no model to run; \
             check the Harness provider configuration",
        ));
    }
    Ok(models)
}

fn non_empty(object: &Map<String, Value>, member: &str) -> Result<String, String> {
    match object.get(member) {
        Some(Value::String(text)) if !text.is_empty() => Ok(text.clone()),
        other => Err(format!(
            "has `{member}` {}, not a non-empty string",
            other.map_or_else(|| "missing".to_string(), Value::to_string)
        )),
    }
}

fn parse_model(entry: &Value) -> Result<CatalogModel, String> {
    let object = entry.as_object().ok_or("is not an object")?;
    let options = match object.get("reasoning_options") {
        None => &Vec::new(),
        Some(Value::Array(options)) => options,
        Some(_) => return Err("has `reasoning_options` that is not an array".to_string()),
    };
    let reasoning_options = options
        .iter()
        .enumerate()
        .map(|(index, option)| parse_option(option).map_err(|why| format!("option {index} {why}")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(CatalogModel {
        provider: non_empty(object, "provider")?,
        provider_name: non_empty(object, "provider_name")?,
        id: non_empty(object, "id")?,
        name: non_empty(object, "name")?,
        reasoning_options,
    })
}

fn parse_option(option: &Value) -> Result<ReasoningOption, String> {
    let object = option.as_object().ok_or("is not an object")?;
    let default = match object.get("default") {
        None => None,
        Some(Value::Bool(default)) => Some(*default),
        Some(other) => return Err(format!("has `default` {other}, not a boolean")),
    };
    Ok(ReasoningOption {
        id: non_empty(object, "id")?,
        name: non_empty(object, "name")?,
        default,
    })
}

/// A picked route: `Ok(None)` for `default`, `Ok(Some(route))` for `provider/id` (split at the
/// first `/`, both halves non-empty and without whitespace), else the host's error.
pub fn parse_route(route: &str) -> Result<Option<ModelRoute>, Diagnostic> {
    if route == DEFAULT_ROUTE {
        return Ok(None);
    }
    let clean = |part: &str| !part.is_empty() && !part.chars().any(char::is_whitespace);
    match route.split_once('/') {
        Some((provider, id)) if clean(provider) && clean(id) => Ok(Some(ModelRoute {
            provider: provider.to_string(),
            id: id.to_string(),
        })),
        _ => Err(Diagnostic::new(
            codes::INVALID_ROUTE,
            format!(
                "the model route {:?} is not `provider/id` or `default`; pick a model from the list",
                truncate(route, 80)
            ),
        )),
    }
}

/// The route's part of the compatibility key (spec 7): `(provider, model)`, `default` for both when
/// the runtime picks.
pub fn key_route(model: Option<&ModelRoute>) -> (String, String) {
    match model {
        Some(route) => (route.provider.clone(), route.id.clone()),
        None => (DEFAULT_ROUTE.to_string(), DEFAULT_ROUTE.to_string()),
    }
}

impl Host {
    /// Spec 12: the profile's catalog, or why there is none.
    pub async fn models(&self) -> Result<Vec<CatalogModel>, Diagnostic> {
        let env = &self.config.env;
        let resolved = discovery::resolve_executable(env.dsh_bin.as_deref(), env.path.as_deref())?;
        let bound = self.config.discovery_bounds.models;
        let args = ["--profile", PROFILE, "--models"];
        let stdout = match short_command::run(&resolved.path, args, bound).await {
            Finished::SpawnFailed(error) => {
                return Err(Diagnostic::new(
                    codes::MODELS_FAILED,
                    format!("`dsh --profile {PROFILE} --models` could not be started ({error})"),
                ))
            }
            Finished::TimedOut { .. } => {
                return Err(Diagnostic::new(
                    codes::MODELS_FAILED,
                    format!("`dsh --profile {PROFILE} --models` did not answer within {bound:?}; check the profile (setup)"),
                ))
            }
            Finished::Exited { code, .. } if code != Some(0) => {
                return Err(Diagnostic::new(
                    codes::MODELS_FAILED,
                    format!(
                        "`dsh --profile {PROFILE} --models` failed (exit {}); repair the profile (setup)",
                        describe_exit(code)
                    ),
                ))
            }
            Finished::Exited { stdout, .. } => stdout,
        };
        #[cfg(feature = "mutants")]
        if let Some(lenient) = self.lenient_catalog(&stdout) {
            return lenient;
        }
        parse_catalog(&stdout)
    }

    /// The `model` of `execute`: the picked route, nothing for `default`.
    pub(crate) fn execute_model(&self, request: &RunRequest) -> Option<ModelRoute> {
        #[cfg(feature = "mutants")]
        if let Some(model) = self.model_for_default(request) {
            return model;
        }
        request.model.clone()
    }

    /// The `reasoning_effort` of `execute`: exactly the picked one, none when none was picked.
    pub(crate) fn execute_effort(&self, request: &RunRequest) -> Option<String> {
        #[cfg(feature = "mutants")]
        if self.mutant(crate::mutants::Mutant::IgnoreReasoningEffort) {
            return None;
        }
        request.reasoning_effort.clone()
    }

    /// The outcome of a run whose route is not `provider/id`: failed before anything was spawned,
    /// the conversation's mapping untouched.
    pub fn route_failure(&self, conversation_id: &str, diagnostic: Diagnostic) -> Outcome {
        Outcome {
            status: Status::Failed,
            session_id: self.mapped_session(conversation_id),
            resumed: false,
            code: Some(diagnostic.code.to_string()),
            message: Some(diagnostic.message),
            foreign_frames: 0,
            stderr: String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn line(models: Value) -> Vec<u8> {
        let frame = json!({"v": 1, "type": "models", "runtime": "open-design", "models": models});
        let mut line = serde_json::to_vec(&frame).unwrap_or_default();
        line.push(b'\n');
        line
    }

    fn model(id: &str, efforts: &[&str]) -> Value {
        let options: Vec<Value> = efforts
            .iter()
            .map(|effort| json!({"id": effort, "name": effort.to_uppercase()}))
            .collect();
        json!({"provider": "deepseek-official", "provider_name": "DeepSeek", "id": id,
               "name": id.to_uppercase(), "reasoning_options": options})
    }

    fn code(stdout: &[u8]) -> Option<&'static str> {
        parse_catalog(stdout).err().map(|d| d.code)
    }

    #[test]
    fn duplicates_are_dropped_first_one_wins() {
        let stdout = line(json!([
            model("a", &["low", "high", "low"]),
            model("b", &[]),
            model("a", &["max"])
        ]));
        let catalog = parse_catalog(&stdout).unwrap_or_default();
        let routes: Vec<(&str, usize)> = catalog
            .iter()
            .map(|m| (m.id.as_str(), m.reasoning_options.len()))
            .collect();
        assert_eq!(routes, vec![("a", 2), ("b", 0)]);
        assert_eq!(parse_models_frame(&stdout).map(|c| c.len()).ok(), Some(3));
    }

    #[test]
    fn bad_answers_have_their_codes() {
        assert_eq!(code(&line(json!([model("a", &["low"])]))), None);
        assert_eq!(code(&line(json!([]))), Some(codes::MODELS_EMPTY));
        assert_eq!(code(b"{not json\n"), Some(codes::MODELS_INVALID));
        let mut two = line(json!([model("a", &[])]));
        two.extend(line(json!([model("b", &[])])));
        assert_eq!(code(&two), Some(codes::MODELS_INVALID));
        let mut nameless = model("a", &[]);
        nameless.as_object_mut().map(|m| m.remove("name"));
        assert_eq!(code(&line(json!([nameless]))), Some(codes::MODELS_INVALID));
        let bad_default = json!([{"provider": "p", "provider_name": "P", "id": "a", "name": "A",
            "reasoning_options": [{"id": "low", "name": "Low", "default": "yes"}]}]);
        assert_eq!(code(&line(bad_default)), Some(codes::MODELS_INVALID));
        let other = br#"{"v":1,"type":"models","runtime":"multica","models":[]}"#;
        assert_eq!(code(other), Some(codes::MODELS_INVALID));
        assert_eq!(
            code(&vec![b' '; MAX_MODELS_BYTES + 1]),
            Some(codes::MODELS_INVALID)
        );
    }

    #[test]
    fn routes_are_provider_slash_id_or_default() {
        assert_eq!(parse_route("default").ok(), Some(None));
        assert_eq!(
            parse_route("p/org/m")
                .ok()
                .flatten()
                .map(|r| (r.provider, r.id)),
            Some(("p".to_string(), "org/m".to_string()))
        );
        for bad in ["m", "/m", "p/", "p /m", ""] {
            assert_eq!(
                parse_route(bad).err().map(|d| d.code),
                Some(codes::INVALID_ROUTE)
            );
        }
        assert_eq!(
            key_route(None),
            ("default".to_string(), "default".to_string())
        );
    }
}
