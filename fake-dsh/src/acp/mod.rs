//! fake-dsh's Agent Client Protocol surface (docs/surface-acp.md): `dsh --profile acp` (and
//! `dsh acp` on 0.2.1), a JSON-RPC 2.0 agent over newline-delimited stdio, as the real 0.2.1rc2
//! and 0.1.5rc1 behave on the wire (the facts and wire captures of docs/surface-acp.md), keyless.
//!
//! - [`mod@select`]: whether a command line asks for it (checked before the SDK surfaces);
//! - [`server`]: the request loop, signals and EOF; [`rpc`]: what one line is; [`wire`]: stdout;
//! - [`methods`]: `initialize`, the session methods and `-32601`; [`config`]: the config options;
//! - [`state`]: sessions and prompts in flight; [`store`]: sessions kept in the Harness home;
//! - [`turn`]: a prompt's updates; [`tools`]: a tool call; [`permission`]:
//!   `session/request_permission`; [`agent`]: the default agent's turn;
//! - the `acp` scenario member is [`dsh_formats::acp_scenario`], loaded by [`load_scenario`].

pub mod agent;
pub mod config;
pub mod methods;
pub mod permission;
pub mod rpc;
pub mod select;
pub mod server;
pub mod state;
pub mod store;
pub mod tools;
pub mod turn;
pub mod wire;

use crate::journal::{ExitReason, Mode};
use crate::process::{finish, start_event};
use crate::sdk::session::Persona;
use dsh_formats::acp_scenario::AcpScenario;
pub use select::{select, AcpSurface};
use state::{Agent, SandboxMode};
use std::path::Path;

/// Runs the surface; never returns.
pub fn run(surface: AcpSurface) -> ! {
    let mode = match surface {
        AcpSurface::Serve(_) => Mode::Acp,
        AcpSurface::Version(_) => Mode::Version,
        AcpSurface::Help | AcpSurface::Usage(_) => Mode::Error,
    };
    crate::journal::record(start_event(mode, None));
    match surface {
        AcpSurface::Serve(persona) => serve(persona),
        AcpSurface::Help => {
            crate::output::Stdout::new().write_bytes(select::HELP.as_bytes());
            finish(0, ExitReason::ScriptEnd)
        }
        AcpSurface::Version(persona) => {
            let version = std::env::var(crate::run::VERSION_ENV)
                .unwrap_or_else(|_| crate::sdk::version_of(persona).to_string());
            crate::output::Stdout::new().write_bytes(format!("{version}\n").as_bytes());
            finish(0, ExitReason::ScriptEnd)
        }
        AcpSurface::Usage(message) => exit_with(1, &message),
    }
}

fn exit_with(code: i32, message: &str) -> ! {
    crate::output::stderr_bytes(format!("{message}\n").as_bytes());
    finish(code, ExitReason::Error)
}

/// Checks the environment as the release does before the wire starts (F1.2), loads the
/// scenario (a bad one: exit 2 naming the file and the member), and serves.
fn serve(persona: Persona) -> ! {
    if let Err(message) = environment_refusal(persona) {
        exit_with(1, &message);
    }
    let scenario = load_scenario().unwrap_or_else(|message| exit_with(2, &message));
    let (mode, fatal_after_answer) = permission_mode(persona);
    let home = crate::home::dsh_home().ok();
    server::run(Agent {
        persona,
        scenario,
        store: home.as_deref().map(|home| store::Store::new(home, persona)),
        home,
        claimed: Default::default(),
        mode,
        fatal_after_answer,
        has_key: std::env::var_os("DEEPSEEK_API_KEY").is_some_and(|key| !key.is_empty()),
        sessions: Default::default(),
        prompts: Default::default(),
        model_requests: Default::default(),
        next_request_id: Default::default(),
        pending: Default::default(),
        answering: Default::default(),
    })
}

/// 0.2.1's start-up failures on relative directories (F1.2); 0.1.5 takes them.
fn environment_refusal(persona: Persona) -> Result<(), String> {
    let relative = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .is_some_and(|v| !Path::new(&v).is_absolute())
    };
    if persona == Persona::V015 {
        return Ok(());
    }
    let cache_unset = std::env::var_os("DSH_RESOURCE_CACHE").is_none_or(|v| v.is_empty());
    if relative("DSH_RESOURCE_CACHE") || (cache_unset && relative("HOME")) {
        return Err(
            "Error: DSH_RESOURCE_CACHE must be an absolute directory\n    at \
                    file:///snapshot/node/runtime-bootstrap.mjs:18:32"
                .to_string(),
        );
    }
    if relative("TMPDIR") {
        return Err(
            "Error: dsh: host preparation failed: No usable native binding found for \
                    node-addon-require-builtin-linux-x64-gnu (auto)"
                .to_string(),
        );
    }
    Ok(())
}

/// The sandbox mode `DSH_PERMISSION_MODE` names (F1.2; `workspace-write` when unset). A value
/// naming none: 0.2.1 warns on stderr (the first lines of its warning) and serves on in
/// `workspace-write` (what its tools then do was not observed); 0.1.5 answers its first request
/// and then ends, exit 1, with this error on stderr (the first two lines of the real one's).
fn permission_mode(persona: Persona) -> (SandboxMode, Option<String>) {
    let value = std::env::var("DSH_PERMISSION_MODE").unwrap_or_default();
    if value.is_empty() {
        return (SandboxMode::WorkspaceWrite, None);
    }
    if let Some(mode) = SandboxMode::named(&value) {
        return (mode, None);
    }
    let invalid = format!(
        "- $.mode expected \"read-only\" | \"workspace-write\" | \"danger-full-access\" but got \
         {} (at mode)",
        serde_json::Value::from(value)
    );
    if persona == Persona::V015 {
        let error = format!(
            "Error: dsh: plugin tree failed to load: failed to apply loader entry include \
             (cordis:include): failed to apply loader entry sandbox-policy \
             (@deepseek-ai/dsh-sandbox-policy): invalid config:\n  {invalid}\n"
        );
        return (SandboxMode::WorkspaceWrite, Some(error));
    }
    crate::output::stderr_bytes(
        format!(
            "dsh: warning: 21 entries did not activate\nsandbox-policy \
             (@deepseek-ai/dsh-sandbox-policy): ValidationError: invalid config:\n  {invalid}\n"
        )
        .as_bytes(),
    );
    (SandboxMode::WorkspaceWrite, None)
}

/// The `acp` member of the scenario file `FAKE_DSH_SCENARIO` names (none set: the default
/// agent); the error names the file, and the member and rule broken.
pub fn load_scenario() -> Result<AcpScenario, String> {
    let Some(path) = std::env::var_os(crate::scenario::SCENARIO_ENV).filter(|v| !v.is_empty())
    else {
        return Ok(AcpScenario::default());
    };
    let path = Path::new(&path);
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("fake-dsh: cannot read scenario {}: {e}", path.display()))?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("fake-dsh: scenario {}: {e}", path.display()))?;
    dsh_formats::acp_scenario::from_document(&value)
        .map_err(|e| format!("fake-dsh: scenario {}: {e}", path.display()))
}
