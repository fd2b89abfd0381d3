//! The commands a host writes on the runtime's stdin ([`HostCommand`]: `execute`, `cancel`).

use super::types::serialize_tagged;
use serde::de::{self, Deserializer};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A command the host writes on the runtime's stdin.
#[derive(Debug, Clone, PartialEq)]
pub enum HostCommand {
    Execute(Execute),
    Cancel(Cancel),
}

/// The `model` route of an execute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelRoute {
    pub provider: String,
    pub id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Execute {
    pub request_id: String,
    /// Absolute project directory.
    pub cwd: String,
    pub prompt: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume_session_id: Option<String>,
    /// The model route; optional (OpenDesign's host and bundle omit it to use the default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelRoute>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// MCP server entries (phase one sends none); always present.
    pub mcp_servers: Vec<Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cancel {
    pub request_id: String,
}

impl HostCommand {
    /// An execute with a model route, without MCP servers or reasoning effort.
    pub fn execute(
        request_id: impl Into<String>,
        cwd: impl Into<String>,
        prompt: impl Into<String>,
        resume_session_id: Option<String>,
        model: ModelRoute,
    ) -> HostCommand {
        HostCommand::Execute(Execute {
            request_id: request_id.into(),
            cwd: cwd.into(),
            prompt: prompt.into(),
            resume_session_id,
            model: Some(model),
            reasoning_effort: None,
            mcp_servers: Vec::new(),
        })
    }

    pub fn cancel(request_id: impl Into<String>) -> HostCommand {
        HostCommand::Cancel(Cancel {
            request_id: request_id.into(),
        })
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            HostCommand::Execute(_) => "execute",
            HostCommand::Cancel(_) => "cancel",
        }
    }

    pub fn request_id(&self) -> &str {
        match self {
            HostCommand::Execute(command) => &command.request_id,
            HostCommand::Cancel(command) => &command.request_id,
        }
    }

    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("commands always serialize")
    }

    /// The command as one line: compact JSON plus `"\n"`.
    pub fn to_line(&self) -> String {
        let mut line = serde_json::to_string(self).expect("commands always serialize");
        line.push('\n');
        line
    }
}

impl Serialize for HostCommand {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let body = match self {
            HostCommand::Execute(command) => serde_json::to_value(command),
            HostCommand::Cancel(command) => serde_json::to_value(command),
        }
        .map_err(serde::ser::Error::custom)?;
        serialize_tagged(serializer, self.type_name(), body)
    }
}

impl<'de> Deserialize<'de> for HostCommand {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        HostCommand::from_value(&value).map_err(de::Error::custom)
    }
}
