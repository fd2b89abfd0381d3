//! The client corpus's files (docs/sdk-clients.md): a client case (`fixtures/clients/<surface>/
//! <name>.json`, `schemas/client-case.schema.json`) and the client rule catalog
//! (`fixtures/clients/rules.json`, `schemas/client-rules.schema.json`).
//!
//! A client case plays one fake-dsh SDK scenario (its `runtime`) against an SDK or headless
//! client, hands it the prompts, and says what the client must report per prompt and how it must
//! end. Its first rule is the one blamed when an expectation fails; a case with an
//! `interpretation` rests on that entry of docs/interpretations.md and is informational.

pub use crate::acp_client_case::AcpCase;
use crate::sdk_scenario::SdkScenario;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The fixtures subdirectory holding the client corpus (`rules.json`, `sdk/`, `headless/`).
pub const CLIENTS_DIR: &str = "clients";
/// The schema of a client case, relative to `schemas/`.
pub const CLIENT_CASE_SCHEMA: &str = "client-case.schema.json";
/// The schema of the client rule catalog, relative to `schemas/`.
pub const CLIENT_RULES_SCHEMA: &str = "client-rules.schema.json";

/// The surface a client drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClientSurface {
    /// The SDK's newline JSON-RPC runtime (`dsh --profile sdk`).
    Sdk,
    /// The one-shot `dsh --profile headless TASK`.
    Headless,
    /// The Agent Client Protocol agent (`dsh --profile acp`, docs/surface-acp.md).
    Acp,
}

impl ClientSurface {
    /// The name used in ids, directories and `--surface`.
    pub fn name(self) -> &'static str {
        match self {
            ClientSurface::Sdk => "sdk",
            ClientSurface::Headless => "headless",
            ClientSurface::Acp => "acp",
        }
    }
}

/// One client case file.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClientCase {
    /// `<surface>.<slug>`; the file is `fixtures/clients/<surface>/<slug>.json`.
    pub id: String,
    pub surface: ClientSurface,
    /// One line: the situation.
    pub summary: String,
    /// Rule ids from the client catalog; the first is blamed when the expectation fails.
    pub rules: Vec<String>,
    /// The interpretation entry the whole expectation rests on: a failure is informational.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interpretation: Option<String>,
    /// Capabilities a client may lack (`--client-lacks NAME` skips the case).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<String>,
    /// What fake-dsh plays (absent: the default agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<SdkScenario>,
    /// An ACP case's own members (surface `acp` only): [`crate::acp_client_case`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acp: Option<AcpCase>,
    /// The prompts (headless: exactly one, the task).
    pub prompts: Vec<String>,
    /// How many times the client runs, one after the other, in the same case directory (working
    /// directory, `DSH_HOME`, `TMPDIR`, `HOME`): a persisted home between runs. Each run gets the
    /// prompts and must end as `expect` says.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub runs: u32,
    /// The session id the client is told to use (`DSH_SDK_SESSION`); absent: its own choice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// From this run on (counting from 1), the client is told that `session` is stored in the
    /// home and to resume it (`DSH_SDK_RESUME=1`, 0.2.1's `session/resume`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_from: Option<u32>,
    /// A directory the kit makes in the client's working directory, which the client is told to
    /// move its session to before prompting (`DSH_SDK_CWD`, 0.2.1's
    /// `session/working-directory/set`), in the runs that do not resume it: a plain relative path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_directory: Option<String>,
    /// False: the kit does not make `working_directory` (the runtime refuses to move there).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub working_directory_exists: bool,
    pub expect: ClientExpect,
}

/// The most runs a case may ask for.
pub const MAX_RUNS: u32 = 3;

fn one() -> u32 {
    1
}

fn yes() -> bool {
    true
}

fn is_true(value: &bool) -> bool {
    *value
}

fn is_one(runs: &u32) -> bool {
    *runs == 1
}

/// How the client must end, and what it must report.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClientExpect {
    #[serde(default)]
    pub outcome: Outcome,
    /// Per settled prompt, in order: the members the client's report must hold (members left
    /// out are not compared).
    pub reports: Vec<Value>,
    /// Environment variable names the runtime must have been started with (the credential).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runtime_env: Vec<String>,
}

/// How a client run must end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Exit 0 with exactly the expected reports.
    #[default]
    Settles,
    /// A non-zero exit with a message on stderr, after the expected reports (the prompts before
    /// the failure); never a report claiming the failed prompt settled.
    Fails,
    /// Either: tolerance (a client may choose to fail cleanly instead, never hang or report
    /// something wrong).
    SettlesOrFails,
}

/// The client rule catalog.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClientRules {
    pub v: u32,
    pub rules: Vec<ClientRule>,
}

/// One client rule: a runtime behaviour a client must handle.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClientRule {
    /// `<surface>.<slug>`.
    pub id: String,
    pub surface: ClientSurface,
    /// What the client must do.
    pub text: String,
    /// What the rule traces to: the real runtime's observed behaviour or its source.
    pub source: String,
}

/// Parses a client case after its schema check, and checks what the schema cannot: the id's
/// surface prefix, a headless case's single prompt, a settling case's one report per prompt.
pub fn parse_case(value: &Value) -> Result<ClientCase, String> {
    let case: ClientCase = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
    let prefix = format!("{}.", case.surface.name());
    if !case.id.starts_with(&prefix) {
        return Err(format!(
            "id {} does not start with its surface ({prefix})",
            case.id
        ));
    }
    if !(1..=MAX_RUNS).contains(&case.runs) {
        return Err(format!("runs is {}: from 1 to {MAX_RUNS}", case.runs));
    }
    if let Some(from) = case.resume_from {
        if case.session.is_none() || !(1..=case.runs).contains(&from) {
            return Err(format!(
                "resume_from {from} needs a session and a run from 1 to runs ({})",
                case.runs
            ));
        }
    }
    if case.surface == ClientSurface::Headless
        && (case.session.is_some()
            || case.resume_from.is_some()
            || case.working_directory.is_some())
    {
        return Err("session, resume_from and working_directory are for SDK cases".to_string());
    }
    if !case.working_directory_exists && case.working_directory.is_none() {
        return Err("working_directory_exists needs a working_directory".to_string());
    }
    if let Some(dir) = &case.working_directory {
        let plain = std::path::Path::new(dir)
            .components()
            .all(|part| matches!(part, std::path::Component::Normal(_)));
        if dir.is_empty() || !plain {
            return Err(format!(
                "working_directory {dir:?} is not a plain relative path (no /, . or ..)"
            ));
        }
    }
    crate::acp_client_case::check(&case)?;
    if case.surface == ClientSurface::Headless && case.prompts.len() != 1 {
        return Err("a headless case has exactly one prompt (the task)".to_string());
    }
    if case.expect.outcome == Outcome::Settles && case.expect.reports.len() != case.prompts.len() {
        return Err(format!(
            "expect.reports has {} reports for {} prompts (a settling case reports every prompt)",
            case.expect.reports.len(),
            case.prompts.len()
        ));
    }
    Ok(case)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_case_parses_and_its_cross_checks_hold() {
        let good = json!({"id": "sdk.x", "surface": "sdk", "summary": "s", "rules": ["sdk.r"],
            "prompts": ["a"], "expect": {"reports": [{"text": "t"}]}});
        let case = parse_case(&good).unwrap();
        assert_eq!(case.expect.outcome, Outcome::Settles);
        let mut wrong_prefix = good.clone();
        wrong_prefix["id"] = json!("headless.x");
        assert!(parse_case(&wrong_prefix).unwrap_err().contains("surface"));
        let mut short = good.clone();
        short["prompts"] = json!(["a", "b"]);
        assert!(parse_case(&short).unwrap_err().contains("2 prompts"));
        let mut headless = good.clone();
        headless["id"] = json!("headless.x");
        headless["surface"] = json!("headless");
        headless["prompts"] = json!(["a", "b"]);
        headless["expect"]["outcome"] = json!("fails");
        assert!(parse_case(&headless).unwrap_err().contains("one prompt"));
        let mut twice = good.clone();
        twice["runs"] = json!(2);
        assert_eq!(parse_case(&twice).unwrap().runs, 2);
        twice["runs"] = json!(0);
        assert!(parse_case(&twice).unwrap_err().contains("from 1 to 3"));
        twice["runs"] = json!(2);
        twice["resume_from"] = json!(2);
        assert!(parse_case(&twice).unwrap_err().contains("needs a session"));
        twice["session"] = json!("s-1");
        assert_eq!(parse_case(&twice).unwrap().resume_from, Some(2));
        let mut moved = twice.clone();
        moved["working_directory"] = json!("../out");
        assert!(parse_case(&moved).unwrap_err().contains("plain relative"));
        moved["working_directory"] = json!("site/inner");
        assert!(parse_case(&moved).is_ok());
        moved["working_directory_exists"] = json!(false);
        assert!(!parse_case(&moved).unwrap().working_directory_exists);
        moved.as_object_mut().unwrap().remove("working_directory");
        assert!(parse_case(&moved)
            .unwrap_err()
            .contains("needs a working_directory"));
        twice["resume_from"] = json!(3);
        assert!(parse_case(&twice)
            .unwrap_err()
            .contains("from 1 to runs (2)"));
        let mut unknown = good;
        unknown["extra"] = json!(1);
        assert!(parse_case(&unknown).unwrap_err().contains("extra"));
    }
}
