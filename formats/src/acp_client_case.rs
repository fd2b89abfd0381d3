//! An ACP client case's own members (the `acp` member of a client case whose surface is `acp`,
//! docs/surface-acp.md, "The client corpus"): the scenario fake-dsh plays as `dsh --profile acp`
//! and what the client is told through the ACP driver contract (how to answer permission
//! requests, which prompt to cancel, which model to select, when to resume the earlier run's
//! session). What the client must then have sent on the wire follows from these members; the
//! corpus's judge checks it against fake-dsh's journal.

use crate::acp_scenario::AcpScenario;
use crate::client_case::{ClientCase, ClientSurface};
use serde::{Deserialize, Serialize};

/// The `acp` member of a client case.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AcpCase {
    /// What fake-dsh plays (absent: the default agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<AcpScenario>,
    /// How the client answers `session/request_permission` (`DSH_ACP_PERMISSION`): by the kind
    /// of the option it selects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission: Option<PermissionAnswer>,
    /// The prompt (counting from 1) the client cancels when the agent asks permission in it
    /// (`DSH_ACP_CANCEL`): `session/cancel`, the request answered `cancelled`, then it waits
    /// for the prompt's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel: Option<u32>,
    /// The model the client selects before its prompts (`DSH_ACP_MODEL` = `name`), through
    /// `session/set_config_option` with the offered option's `value`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelChoice>,
    /// From this run on (counting from 1; at least 2), the client resumes the session the first
    /// run prompted (`DSH_ACP_RESUME` = its id, read from fake-dsh's journal) instead of opening
    /// one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_from: Option<u32>,
}

/// The kind of option a client selects when asked permission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionAnswer {
    /// An option of kind `allow_once` (or `allow_always`).
    Allow,
    /// An option of kind `reject_once` (or `reject_always`).
    Reject,
}

impl PermissionAnswer {
    /// The value of `DSH_ACP_PERMISSION`.
    pub fn name(self) -> &'static str {
        match self {
            PermissionAnswer::Allow => "allow",
            PermissionAnswer::Reject => "reject",
        }
    }

    /// The option kinds that answer so (ACP v1's `PermissionOptionKind`).
    pub fn kinds(self) -> &'static [&'static str] {
        match self {
            PermissionAnswer::Allow => &["allow_once", "allow_always"],
            PermissionAnswer::Reject => &["reject_once", "reject_always"],
        }
    }
}

/// A model option of `session/new`'s `configOptions` (`id: "model"`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ModelChoice {
    /// The option's `name`, which the client is told.
    pub name: String,
    /// The option's `value` (a JSON array as a string), which the client must send.
    pub value: String,
}

/// What a schema cannot say about a case's `acp` member: present exactly on ACP cases, without
/// the SDK's contract members; `cancel` names one of the prompts; `resume_from` a later run.
pub fn check(case: &ClientCase) -> Result<(), String> {
    let is_acp = case.surface == ClientSurface::Acp;
    match (&case.acp, is_acp) {
        (Some(_), false) => return Err("only an acp case has an `acp` member".to_string()),
        (None, true) => return Err("an acp case has an `acp` member".to_string()),
        (None, false) => return Ok(()),
        (Some(_), true) => {}
    }
    if case.runtime.is_some()
        || case.session.is_some()
        || case.resume_from.is_some()
        || case.working_directory.is_some()
    {
        return Err(
            "runtime, session, resume_from and working_directory are for SDK cases (an acp case \
             says its own in `acp`)"
                .to_string(),
        );
    }
    let acp = case.acp.as_ref().expect("checked above");
    if let Some(prompt) = acp.cancel {
        if !(1..=case.prompts.len()).contains(&(prompt as usize)) {
            return Err(format!(
                "acp.cancel {prompt} is not one of the {} prompts",
                case.prompts.len()
            ));
        }
    }
    if let Some(from) = acp.resume_from {
        if !(2..=case.runs).contains(&from) {
            return Err(format!(
                "acp.resume_from {from} needs a later run: from 2 to runs ({})",
                case.runs
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::client_case::parse_case;
    use serde_json::json;

    #[test]
    fn an_acp_case_parses_and_its_cross_checks_hold() {
        let good = json!({"id": "acp.x", "surface": "acp", "summary": "s", "rules": ["acp.r"],
            "prompts": ["a", "b"], "runs": 2,
            "acp": {"permission": "reject", "cancel": 2, "resume_from": 2,
                    "model": {"name": "M", "value": "[\"p\",\"m\"]"},
                    "scenario": {"turns": [{"stop": "max_tokens"}]}},
            "expect": {"reports": [{"stop_reason": "max_tokens"}, {}]}});
        let case = parse_case(&good).unwrap();
        let acp = case.acp.unwrap();
        assert_eq!(acp.cancel, Some(2));
        assert_eq!(
            acp.permission.unwrap().kinds(),
            ["reject_once", "reject_always"]
        );
        let mut missing = good.clone();
        missing.as_object_mut().unwrap().remove("acp");
        assert!(parse_case(&missing).unwrap_err().contains("has an `acp`"));
        let mut sdk = good.clone();
        sdk["surface"] = json!("sdk");
        sdk["id"] = json!("sdk.x");
        assert!(parse_case(&sdk).unwrap_err().contains("only an acp case"));
        let mut cancel = good.clone();
        cancel["acp"]["cancel"] = json!(3);
        assert!(parse_case(&cancel)
            .unwrap_err()
            .contains("not one of the 2"));
        let mut resume = good.clone();
        resume["acp"]["resume_from"] = json!(1);
        assert!(parse_case(&resume)
            .unwrap_err()
            .contains("from 2 to runs (2)"));
        let mut session = good;
        session["session"] = json!("s");
        assert!(parse_case(&session).unwrap_err().contains("for SDK cases"));
    }
}
