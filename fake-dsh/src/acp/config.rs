//! A session's configuration options (facts F4.1, F6): the model (values are JSON arrays encoded
//! as strings, `["provider","model"]`, in one grouped list) and the reasoning effort, as each
//! release offers them, and `session/set_config_option`'s rules and errors, 0.2.1's refusal to
//! switch back to its own default model included (F6.3).

use crate::sdk::session::Persona;
use serde_json::{json, Value};

/// The default model, `["deepseek-official","deepseek-v4-flash"]` on both releases.
pub const DEFAULT_MODEL: &str = "deepseek-v4-flash";
/// The provider every shipped model belongs to.
const PROVIDER: &str = "deepseek-official";
const PRO_DESCRIPTION: &str = "Stronger agentic coding, knowledge, and difficult reasoning; \
    suited to complex or quality-critical tasks at higher cost.";

/// One model option: its model id, display name and description.
type ModelOption = (&'static str, &'static str, Option<&'static str>);

/// The release's model catalogue, in its order (F4.1, F6.3, §12). 0.2.1's catalogue lacks its
/// own default, which it offers (named by its id, first) only while it is the current value.
fn catalogue(persona: Persona) -> &'static [ModelOption] {
    match persona {
        Persona::V015 => &[
            ("deepseek-flash", "DeepSeek-V41-Flash", None),
            (
                "deepseek-v4-flash",
                "DeepSeek-V4-Flash",
                Some(
                    "Fast, efficient, and economical; suited to focused, routine, or parallel \
                     tasks.",
                ),
            ),
            ("deepseek-v4-pro", "DeepSeek-V4-Pro", Some(PRO_DESCRIPTION)),
            (
                "deepseek-v4-flash-vision-exp",
                "DeepSeek-V4-Flash-Vision-Exp",
                None,
            ),
        ],
        _ => &[
            ("deepseek-flash", "DeepSeek-V4.1-Flash", None),
            ("deepseek-v4-pro", "DeepSeek-V4-Pro", Some(PRO_DESCRIPTION)),
        ],
    }
}

/// The reasoning efforts: value, name, description.
const EFFORTS: [(&str, &str, &str); 4] = [
    (
        "off",
        "Off",
        "Use for simple tasks that do not need reasoning.",
    ),
    (
        "low",
        "Low",
        "Prefer for routine or latency-sensitive tasks.",
    ),
    ("high", "High", "The default balance for most tasks."),
    ("max", "Max", "Reserve for the hardest quality-first tasks."),
];

/// A session's current choices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub persona: Persona,
    /// 0.2.1 without `DEEPSEEK_API_KEY` offers no catalogue at all, only its default
    /// (`W:r21.no-key`); 0.1.5 offers its list either way.
    pub no_catalogue: bool,
    /// The model id (within [`PROVIDER`]).
    pub model: String,
    pub effort: String,
}

/// A model's option value: the JSON array `["provider","model"]` as a string.
pub fn model_value(model: &str) -> String {
    json!([PROVIDER, model]).to_string()
}

impl Config {
    /// A new session's configuration (`has_key`: `DEEPSEEK_API_KEY` is set).
    pub fn new(persona: Persona, has_key: bool) -> Config {
        Config {
            persona,
            no_catalogue: !has_key && persona == Persona::V021,
            model: DEFAULT_MODEL.to_string(),
            effort: "high".to_string(),
        }
    }

    /// The models offered now, in order.
    fn models(&self) -> Vec<ModelOption> {
        let mut models = if self.no_catalogue {
            Vec::new()
        } else {
            catalogue(self.persona).to_vec()
        };
        let listed = models.iter().any(|(id, ..)| *id == self.model);
        if !listed && self.model == DEFAULT_MODEL {
            models.insert(0, (DEFAULT_MODEL, DEFAULT_MODEL, None));
        }
        models
    }

    /// The `configOptions` array (F4.1).
    pub fn options(&self) -> Value {
        let models: Vec<Value> = self
            .models()
            .into_iter()
            .map(|(id, name, description)| {
                let mut option = json!({"value": model_value(id), "name": name});
                if let Some(description) = description {
                    option["description"] = json!(description);
                }
                option
            })
            .collect();
        let efforts: Vec<Value> = EFFORTS
            .iter()
            .map(|(value, name, description)| {
                json!({"value": value, "name": name, "description": description})
            })
            .collect();
        json!([
            {"id": "model", "name": "Model", "category": "model", "type": "select",
             "currentValue": model_value(&self.model),
             "options": [{"group": PROVIDER, "name": "DeepSeek", "options": models}]},
            {"id": "reasoning_effort", "name": "Reasoning effort", "category": "thought_level",
             "type": "select", "currentValue": self.effort, "options": efforts}
        ])
    }

    /// `session/set_config_option`'s change (the params' `configId` and string `value`, the
    /// session already found): a refusal is the message of `-32602 "Invalid params: ..."`.
    pub fn set(&mut self, config_id: &str, value: &str) -> Result<(), String> {
        match config_id {
            "model" => {
                let offered = self
                    .models()
                    .into_iter()
                    .find(|(id, ..)| model_value(id) == value);
                let (id, ..) = offered.ok_or_else(|| format!("unknown model option: {value}"))?;
                self.model = id.to_string();
            }
            "reasoning_effort" => {
                if !EFFORTS.iter().any(|(effort, ..)| *effort == value) {
                    return Err(format!(
                        "unknown reasoning effort for {PROVIDER}/{}: {value}",
                        self.model
                    ));
                }
                self.effort = value.to_string();
            }
            other => return Err(format!("unknown session config option: {other}")),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(config: &Config) -> Vec<String> {
        config.options()[0]["options"][0]["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["value"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn release_0_2_1_cannot_switch_back_to_its_default() {
        let mut config = Config::new(Persona::V021, true);
        assert_eq!(values(&config)[0], model_value(DEFAULT_MODEL));
        assert_eq!(
            config.options()[0]["options"][0]["options"][0]["name"],
            DEFAULT_MODEL
        );
        config
            .set("model", &model_value("deepseek-v4-pro"))
            .unwrap();
        assert_eq!(values(&config).len(), 2);
        assert_eq!(
            values(&Config::new(Persona::V021, false)),
            [model_value(DEFAULT_MODEL)]
        );
        let back = config.set("model", &model_value(DEFAULT_MODEL));
        assert_eq!(
            back,
            Err(String::from(
                "unknown model option: [\"deepseek-official\",\"deepseek-v4-flash\"]"
            ))
        );
    }

    #[test]
    fn release_0_1_5_switches_back_and_both_check_efforts_and_ids() {
        let mut config = Config::new(Persona::V015, true);
        assert_eq!(values(&config).len(), 4);
        config
            .set("model", &model_value("deepseek-v4-pro"))
            .unwrap();
        config.set("model", &model_value(DEFAULT_MODEL)).unwrap();
        assert_eq!(
            config.set("model", "deepseek-v4-pro"),
            Err(String::from("unknown model option: deepseek-v4-pro"))
        );
        assert_eq!(
            config.set("reasoning_effort", ""),
            Err(String::from(
                "unknown reasoning effort for deepseek-official/deepseek-v4-flash: "
            ))
        );
        config.set("reasoning_effort", "max").unwrap();
        assert_eq!(config.options()[1]["currentValue"], "max");
        assert_eq!(
            config.set("x", "y"),
            Err(String::from("unknown session config option: x"))
        );
    }
}
