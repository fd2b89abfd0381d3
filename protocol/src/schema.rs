//! The schemas in `schemas/`, embedded at build time, and validation against them.
//!
//! Every `*.json` under `schemas/` is compiled into the crate by `build.rs`. Each is registered
//! under `https://dsh-conformance.invalid/schemas/<path>` (and under its own `$id`), so cross-file
//! `$ref`s resolve from the embedded set; nothing is ever read from disk or the network.
//! Validators are compiled on first use and cached.

use jsonschema::{Draft, Registry, Validator};
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

include!(concat!(env!("OUT_DIR"), "/embedded_schemas.rs"));

/// The base every embedded schema's `$id` is under.
pub const BASE_URI: &str = "https://dsh-conformance.invalid/schemas/";

/// One reason an instance does not match a schema (or the schema could not be used).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    /// JSON Pointer into the instance (`""` for the whole document).
    pub instance_path: String,
    pub message: String,
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.instance_path.is_empty() {
            "/"
        } else {
            &self.instance_path
        };
        write!(f, "at {path}: {}", self.message)
    }
}

impl std::error::Error for SchemaError {}

/// Validate `instance` against the embedded schema at `path` (relative to `schemas/`, e.g.
/// `"frame.schema.json"` or `"driver/reply.schema.json"`).
pub fn validate(path: &str, instance: &Value) -> Result<(), Vec<SchemaError>> {
    let validator = validator(path).map_err(|message| {
        vec![SchemaError {
            instance_path: String::new(),
            message,
        }]
    })?;
    let errors: Vec<SchemaError> = validator
        .iter_errors(instance)
        .map(|error| SchemaError {
            instance_path: error.instance_path().to_string(),
            message: error.to_string(),
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Whether `instance` matches the schema at `path` (false when the schema is unusable).
pub fn is_valid(path: &str, instance: &Value) -> bool {
    validator(path).is_ok_and(|validator| validator.is_valid(instance))
}

/// The embedded text of the schema at `path`.
pub fn schema_source(path: &str) -> Option<&'static str> {
    EMBEDDED
        .iter()
        .find(|(embedded, _)| *embedded == path)
        .map(|(_, source)| *source)
}

/// The paths (relative to `schemas/`) of every embedded schema, sorted.
pub fn embedded() -> impl Iterator<Item = &'static str> {
    EMBEDDED.iter().map(|(path, _)| *path)
}

/// Compile the schema at `path` (from the cache when already compiled); the error says why it
/// cannot be used.
pub fn check_schema(path: &str) -> Result<(), String> {
    validator(path).map(|_| ())
}

/// The URI the schema at `path` is registered under.
pub fn uri_of(path: &str) -> String {
    format!("{BASE_URI}{path}")
}

struct Embedded {
    /// Parsed documents, or why a file is not JSON.
    documents: HashMap<&'static str, Result<Value, String>>,
    registry: Result<Registry<'static>, String>,
    validators: HashMap<&'static str, OnceLock<Result<Validator, String>>>,
}

fn embedded_set() -> &'static Embedded {
    static EMBEDDED_SET: OnceLock<Embedded> = OnceLock::new();
    EMBEDDED_SET.get_or_init(|| {
        let documents: HashMap<&'static str, Result<Value, String>> = EMBEDDED
            .iter()
            .map(|(path, source)| {
                let parsed = serde_json::from_str::<Value>(source)
                    .map_err(|error| format!("schema `{path}` is not valid JSON: {error}"));
                (*path, parsed)
            })
            .collect();
        let mut resources: Vec<(String, Value)> = Vec::new();
        for (path, document) in &documents {
            let Ok(document) = document else { continue };
            resources.push((uri_of(path), document.clone()));
            if let Some(id) = document.get("$id").and_then(Value::as_str) {
                if id.trim_end_matches('#') != uri_of(path) {
                    resources.push((id.to_string(), document.clone()));
                }
            }
        }
        let registry = Registry::new()
            .draft(Draft::Draft202012)
            .extend(resources)
            .and_then(|builder| builder.prepare())
            .map_err(|error| format!("the embedded schemas do not form a usable set: {error}"));
        let validators = EMBEDDED
            .iter()
            .map(|(path, _)| (*path, OnceLock::new()))
            .collect();
        Embedded {
            documents,
            registry,
            validators,
        }
    })
}

fn validator(path: &str) -> Result<&'static Validator, String> {
    let set = embedded_set();
    let Some(slot) = set.validators.get(path) else {
        return Err(format!(
            "schema `{path}` is not embedded (known: {})",
            embedded().collect::<Vec<_>>().join(", ")
        ));
    };
    slot.get_or_init(|| {
        let document = set.documents[path].as_ref().map_err(Clone::clone)?;
        let registry = set.registry.as_ref().map_err(Clone::clone)?;
        jsonschema::options()
            .with_draft(Draft::Draft202012)
            .with_base_uri(uri_of(path))
            .with_registry(registry)
            .build(document)
            .map_err(|error| format!("schema `{path}` does not compile: {error}"))
    })
    .as_ref()
    .map_err(Clone::clone)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_embedded_schema_compiles() {
        let paths: Vec<_> = embedded().collect();
        assert!(paths.contains(&"frame.schema.json"), "{paths:?}");
        assert!(paths.contains(&"command.schema.json"), "{paths:?}");
        for path in paths {
            check_schema(path).unwrap_or_else(|error| panic!("{error}"));
            let protocol_owned = ["frame", "command", "common", "frames/", "commands/"]
                .iter()
                .any(|prefix| path.starts_with(prefix));
            if !protocol_owned {
                continue;
            }
            let source = schema_source(path).expect("embedded");
            let document: Value = serde_json::from_str(source).expect("JSON");
            let id = document["$id"].as_str().unwrap_or_default();
            assert_eq!(id, uri_of(path), "{path}: `$id` must be its own URI");
            assert!(
                document["description"].is_string(),
                "{path}: needs a description"
            );
        }
    }

    #[test]
    fn validates_through_cross_file_refs() {
        let good = json!({"v":1,"type":"text","request_id":"r","content":""});
        assert_eq!(validate("frame.schema.json", &good), Ok(()));
        let bad = json!({"v":1,"type":"text","request_id":"r","content":5});
        let errors = validate("frame.schema.json", &bad).unwrap_err();
        assert!(
            errors.iter().any(|error| error.instance_path == "/content"),
            "{errors:?}"
        );
        assert!(errors[0].to_string().starts_with("at /"), "{}", errors[0]);
    }

    #[test]
    fn unknown_schema_is_a_clear_error() {
        let errors = validate("nope.schema.json", &json!({})).unwrap_err();
        assert!(errors[0].message.contains("not embedded"), "{errors:?}");
        assert!(schema_source("nope.schema.json").is_none());
    }
}
