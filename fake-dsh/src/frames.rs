//! Builds the generation-1 runtime frames fake-dsh writes, as plain `serde_json::Value`s, so that a
//! scenario can also patch them into invalid shapes on purpose.

use crate::profile::Profile;
use dsh_protocol::frames::TokenCounts;
use serde_json::{json, Value};

/// The protocol generation fake-dsh speaks.
pub const PROTOCOL_VERSION: u64 = 1;
/// The plugin version fake-dsh reports in `probe` and `ready`.
pub const PLUGIN_VERSION: &str = "0.1.0";
/// The default model route.
pub const DEFAULT_PROVIDER: &str = "deepseek-official";
/// The default model id.
pub const DEFAULT_MODEL: &str = "deepseek-chat";

/// A JSON merge patch (RFC 7386) applied to the default probe and ready frames: a runtime variant
/// such as a newer plugin or a forward-compatible extra member, for every case at once. A
/// scenario's own `probe`/`ready` patches apply on top of it.
pub const IDENTITY_PATCH_ENV: &str = "FAKE_DSH_IDENTITY_PATCH";

/// The identity patch from the environment: `None` when unset or empty, an error naming the
/// variable when it is not a JSON object.
pub fn identity_patch() -> Result<Option<Value>, String> {
    let Some(text) = std::env::var_os(IDENTITY_PATCH_ENV) else {
        return Ok(None);
    };
    let text = text.to_string_lossy();
    if text.trim().is_empty() {
        return Ok(None);
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(patch @ Value::Object(_)) => Ok(Some(patch)),
        Ok(_) => Err(format!(
            "{IDENTITY_PATCH_ENV} must be a JSON object (a merge patch)"
        )),
        Err(error) => Err(format!("{IDENTITY_PATCH_ENV} is not JSON: {error}")),
    }
}

fn identity(frame_type: &str, profile: Profile) -> Value {
    let mut frame = default_identity(frame_type, profile);
    if let Ok(Some(patch)) = identity_patch() {
        merge_patch(&mut frame, &patch);
    }
    frame
}

fn default_identity(frame_type: &str, profile: Profile) -> Value {
    let identity = profile.identity();
    let mut frame = json!({
        "v": 1,
        "type": frame_type,
        "runtime": identity.runtime_id,
        "protocol_version": PROTOCOL_VERSION,
        "plugin_version": PLUGIN_VERSION,
    });
    if let Some(generation) = identity.compatibility_generation {
        frame["compatibility_generation"] = json!(generation);
    }
    frame["capabilities"] = match profile {
        Profile::OpenDesign => json!({
            "session_resume": true,
            "session_cancel": true,
            "structured_events": true
        }),
        // The members Multica's daemon decodes at PR #7169 (dsh.go); `issue_id` and
        // `task_contract` stay false, so a host sends neither.
        Profile::Multica => json!({
            "resume": true, "cancel": true, "models": true, "thinking": true, "usage": true,
            "tools": true, "progress": true, "acceptance": true,
            "mcp": ["stdio", "streamable-http"],
            "issue_id": false, "task_contract": false
        }),
    };
    frame
}

/// The `probe` frame printed by `--probe`.
pub fn probe(profile: Profile) -> Value {
    identity("probe", profile)
}

/// The `ready` frame that opens a `--stdio` stream.
pub fn ready(profile: Profile) -> Value {
    identity("ready", profile)
}

/// One model of the catalog: its id, display name and reasoning options (id, name, default).
struct CatalogModel {
    id: &'static str,
    name: &'static str,
    options: &'static [(&'static str, &'static str, bool)],
}

/// The catalog both profiles print, each in its own shape.
const CATALOG: [CatalogModel; 2] = [
    CatalogModel {
        id: DEFAULT_MODEL,
        name: "DeepSeek Chat",
        options: &[("none", "No reasoning", true), ("low", "Low", false)],
    },
    CatalogModel {
        id: "deepseek-reasoner",
        name: "DeepSeek Reasoner",
        options: &[
            ("low", "Low", false),
            ("medium", "Medium", true),
            ("high", "High", false),
        ],
    },
];

/// The display name of the default provider.
const PROVIDER_NAME: &str = "DeepSeek";

/// The `models` frame printed by `--models` (open-design) or `--list-models` (multica): two
/// models, each with reasoning options. Multica's items are `{id: "provider/model", label,
/// provider (a display name), default, thinking: {supported_levels, default_level}}` (dsh.go
/// discoverDshModels, dsh_test.go TestDiscoverDshModels).
pub fn models(profile: Profile) -> Value {
    let models: Vec<Value> = CATALOG
        .iter()
        .enumerate()
        .map(|(index, model)| match profile {
            Profile::OpenDesign => {
                let options: Vec<Value> = model
                    .options
                    .iter()
                    .map(|(id, name, default)| {
                        let mut option = json!({"id": id, "name": name});
                        if *default {
                            option["default"] = json!(true);
                        }
                        option
                    })
                    .collect();
                json!({
                    "provider": DEFAULT_PROVIDER,
                    "provider_name": PROVIDER_NAME,
                    "id": model.id,
                    "name": model.name,
                    "reasoning_options": options
                })
            }
            Profile::Multica => {
                let levels: Vec<Value> = model
                    .options
                    .iter()
                    .map(|(id, name, _)| json!({"value": id, "label": name}))
                    .collect();
                let default_level = model
                    .options
                    .iter()
                    .find(|(_, _, default)| *default)
                    .map_or("", |(id, _, _)| *id);
                json!({
                    "id": format!("{DEFAULT_PROVIDER}/{}", model.id),
                    "label": model.name,
                    "provider": PROVIDER_NAME,
                    "default": index == 0,
                    "thinking": {"supported_levels": levels, "default_level": default_level}
                })
            }
        })
        .collect();
    json!({
        "v": 1,
        "type": "models",
        "runtime": profile.identity().runtime_id,
        "models": models
    })
}

/// Under the multica profile, a scripted `models` frame whose items are in gen-1's `--models`
/// shape (`provider`, `id`, `name`, `reasoning_options`, as the corpus writes its catalogs) is
/// printed in Multica's item shape, so one fixture plays on both profiles: `id` becomes
/// `provider/id`, `name` the `label`, `provider_name` the display `provider`, the reasoning
/// options `thinking.supported_levels` (their default the `default_level`). Items already in
/// Multica's shape (an `id` with a `/`, or no `provider`) and every other member stay as written.
pub fn gen1_items_as_multica(frame: &mut Value) {
    if frame.get("type").and_then(Value::as_str) != Some("models") {
        return;
    }
    let Some(items) = frame.get_mut("models").and_then(Value::as_array_mut) else {
        return;
    };
    for (index, item) in items.iter_mut().enumerate() {
        let (Some(provider), Some(id)) = (
            item.get("provider").and_then(Value::as_str),
            item.get("id").and_then(Value::as_str),
        ) else {
            continue;
        };
        if id.contains('/') || item.get("label").is_some() {
            continue;
        }
        let mut multica = json!({
            "id": format!("{provider}/{id}"),
            "label": item.get("name").cloned().unwrap_or_else(|| json!(id)),
            "provider": item.get("provider_name").cloned().unwrap_or_else(|| json!(provider)),
            "default": index == 0,
        });
        if let Some(options) = item.get("reasoning_options").and_then(Value::as_array) {
            let levels: Vec<Value> = options
                .iter()
                .map(|option| json!({"value": option.get("id"), "label": option.get("name")}))
                .collect();
            let default_level = options
                .iter()
                .find(|option| option.get("default") == Some(&json!(true)))
                .and_then(|option| option.get("id"))
                .cloned()
                .unwrap_or_else(|| json!(""));
            multica["thinking"] =
                json!({"supported_levels": levels, "default_level": default_level});
        }
        *item = multica;
    }
}

/// A `progress` frame (Multica at PR #7169: `phase`, `message`, `data`).
pub fn progress(request_id: &str, phase: &str, message: &str, data: Value) -> Value {
    json!({
        "v": 1,
        "type": "progress",
        "request_id": request_id,
        "phase": phase,
        "message": message,
        "data": data
    })
}

/// A `session` frame.
pub fn session(request_id: &str, session_id: &str, resumed: bool) -> Value {
    json!({
        "v": 1,
        "type": "session",
        "request_id": request_id,
        "session_id": session_id,
        "resumed": resumed
    })
}

/// A `thinking` delta.
pub fn thinking(request_id: &str, content: &str) -> Value {
    json!({ "v": 1, "type": "thinking", "request_id": request_id, "content": content })
}

/// A `text` delta.
pub fn text(request_id: &str, content: &str) -> Value {
    json!({ "v": 1, "type": "text", "request_id": request_id, "content": content })
}

/// A durable `tool_call`; `arguments` is encoded as a JSON string unless it already is one.
pub fn tool_call(request_id: &str, call_id: &str, name: &str, arguments: &Value) -> Value {
    let arguments = match arguments {
        Value::String(already_encoded) => already_encoded.clone(),
        other => other.to_string(),
    };
    json!({
        "v": 1,
        "type": "tool_call",
        "request_id": request_id,
        "call_id": call_id,
        "name": name,
        "arguments": arguments
    })
}

/// The `name` the open-design bundle writes on the default agent's `tool_result` frames.
pub const TOOL_RESULT_NAME: &str = "tool";

/// The `tool_result` matching a `tool_call`.
pub fn tool_result(
    request_id: &str,
    call_id: &str,
    name: &str,
    output: &str,
    is_error: bool,
) -> Value {
    json!({
        "v": 1,
        "type": "tool_result",
        "request_id": request_id,
        "call_id": call_id,
        "name": name,
        "output": output,
        "is_error": is_error
    })
}

/// A `usage` frame.
pub fn usage(request_id: &str, provider: &str, model: &str, tokens: &TokenCounts) -> Value {
    let mut frame = json!({
        "v": 1,
        "type": "usage",
        "request_id": request_id,
        "provider": provider,
        "model": model,
        "input_tokens": tokens.input_tokens,
        "output_tokens": tokens.output_tokens
    });
    if let Some(read) = tokens.cache_read_tokens {
        frame["cache_read_tokens"] = json!(read);
    }
    if let Some(write) = tokens.cache_write_tokens {
        frame["cache_write_tokens"] = json!(write);
    }
    frame
}

/// A `result: completed` frame.
pub fn result_completed(request_id: &str, session_id: &str, output: &str) -> Value {
    json!({
        "v": 1,
        "type": "result",
        "request_id": request_id,
        "status": "completed",
        "session_id": session_id,
        "resume_rejected": false,
        "output": output,
        "stop_reason": "completed"
    })
}

/// A `result: cancelled` frame. `session_id` is the session the process serves, even when no
/// session frame was written yet (the runtime assigns it before it writes anything).
pub fn result_cancelled(request_id: &str, session_id: &str) -> Value {
    json!({
        "v": 1,
        "type": "result",
        "request_id": request_id,
        "status": "cancelled",
        "session_id": session_id,
        "resume_rejected": false,
        "stop_reason": "cancelled"
    })
}

/// A `result: failed` frame with its structured error; `session_id` as for a cancelled result
/// (a rejected resume names the requested id).
pub fn result_failed(
    request_id: &str,
    session_id: &str,
    resume_rejected: bool,
    code: &str,
    message: &str,
) -> Value {
    json!({
        "v": 1,
        "type": "result",
        "request_id": request_id,
        "status": "failed",
        "session_id": session_id,
        "resume_rejected": resume_rejected,
        "error": { "code": code, "message": message }
    })
}

/// A `protocol_error` frame; `request_id` is left out when the command had none.
pub fn protocol_error(request_id: Option<&str>, code: &str, message: &str) -> Value {
    let mut frame = json!({ "v": 1, "type": "protocol_error", "code": code, "message": message });
    if let Some(request_id) = request_id {
        frame["request_id"] = json!(request_id);
    }
    frame
}

/// The `type` of a frame for the journal: its `type` string, or `raw` when it has none.
pub fn frame_type(frame: &Value) -> String {
    frame
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("raw")
        .to_string()
}

/// Applies a JSON merge patch (RFC 7386) to `target`: objects merge member by member, `null`
/// removes a member, anything else replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch_members) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    let target_members = target.as_object_mut().expect("made an object above");
    for (name, value) in patch_members {
        if value.is_null() {
            target_members.remove(name);
        } else {
            merge_patch(
                target_members.entry(name.clone()).or_insert(Value::Null),
                value,
            );
        }
    }
}

/// Adds an `x_pad` member of filler so `frame`'s line (newline not counted) is exactly `bytes`
/// long; leaves a frame that is already that long or longer (or not an object) as it is.
pub fn pad_to(frame: &mut Value, bytes: usize) {
    let Some(members) = frame.as_object_mut() else {
        return;
    };
    members.insert("x_pad".to_string(), Value::String(String::new()));
    let length = serde_json::to_vec(&*members).map_or(0, |line| line.len());
    match bytes.checked_sub(length) {
        Some(room) => {
            members.insert("x_pad".to_string(), Value::String("x".repeat(room)));
        }
        None => {
            members.remove("x_pad");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gen1_catalog_plays_in_multicas_item_shape_on_the_multica_profile() {
        let mut frame = json!({"v": 1, "type": "models", "models": [
            {"provider": "p", "provider_name": "P", "id": "m", "name": "M",
             "reasoning_options": [{"id": "low", "name": "Low"}, {"id": "high", "name": "High", "default": true}]},
            {"provider": "p", "id": "lite"},
            {"id": "p/already", "label": "Already"}
        ]});
        gen1_items_as_multica(&mut frame);
        assert_eq!(
            frame["models"],
            json!([
                {"id": "p/m", "label": "M", "provider": "P", "default": true, "thinking": {
                    "supported_levels": [{"value": "low", "label": "Low"}, {"value": "high", "label": "High"}],
                    "default_level": "high"}},
                {"id": "p/lite", "label": "lite", "provider": "p", "default": false},
                {"id": "p/already", "label": "Already"}
            ])
        );
        let mut probe = json!({"type": "probe", "models": [{"provider": "p", "id": "m"}]});
        let before = probe.clone();
        gen1_items_as_multica(&mut probe);
        assert_eq!(probe, before);
    }

    #[test]
    fn pad_to_makes_the_line_exactly_that_long() {
        let mut frame = models(Profile::OpenDesign);
        pad_to(&mut frame, 70_000);
        assert_eq!(
            serde_json::to_vec(&frame).map(|l| l.len()).ok(),
            Some(70_000)
        );
        let mut short = json!({"v": 1});
        pad_to(&mut short, 3);
        assert_eq!(short, json!({"v": 1}));
    }

    #[test]
    fn merge_patch_follows_rfc_7386() {
        let mut target = json!({"a": "b", "c": {"d": "e", "f": "g"}});
        merge_patch(&mut target, &json!({"a": "z", "c": {"f": null}, "n": [1]}));
        assert_eq!(target, json!({"a": "z", "c": {"d": "e"}, "n": [1]}));
        let mut scalar = json!({"a": 1});
        merge_patch(&mut scalar, &json!(["x"]));
        assert_eq!(scalar, json!(["x"]));
    }

    #[test]
    fn tool_call_keeps_an_already_encoded_argument_string() {
        let encoded = tool_call("r", "c", "n", &json!("{\"path\":\"a\"}"));
        assert_eq!(encoded["arguments"], "{\"path\":\"a\"}");
        let object = tool_call("r", "c", "n", &json!({"path": "a"}));
        assert_eq!(object["arguments"], "{\"path\":\"a\"}");
    }

    #[test]
    fn protocol_error_omits_a_missing_request_id() {
        assert!(protocol_error(None, "X", "m").get("request_id").is_none());
        assert_eq!(protocol_error(Some("r"), "X", "m")["request_id"], "r");
    }
}
