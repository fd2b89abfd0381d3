//! fake-dsh's SDK surfaces (docs/surface-sdk.md, docs/surface-headless.md): the newline JSON-RPC
//! runtime the official SDK clients start (`--profile sdk`, `--profile sdk-minimal`, the 0.1.1
//! `dsh-jsonrpc-agent` binary) and `--profile headless TASK` ([`crate::headless`]).
//!
//! - [`select`]: whether a command line asks for one of them (checked before the open-design CLI);
//! - [`server`]: the request loop; [`session`]: session events and turns; [`wire`]: stdout;
//!   [`scenario`]: the `sdk` scenario member.

pub mod patch;
pub mod scenario;
pub mod server;
pub mod session;
pub mod wire;

use session::{Flavor, Persona};
use std::ffi::OsString;

/// The option selecting the runtime generation: `--persona 0.2.1` (the default), `0.1.5` or
/// `0.1.1`.
pub const PERSONA_FLAG: &str = "--persona";
/// The environment variable selecting the persona when no `--persona` is on the command line (a
/// client that starts `dsh --profile sdk` itself cannot add an argument, but can set this).
pub const PERSONA_ENV: &str = "FAKE_DSH_PERSONA";
/// The 0.1.1 binary's name: started under it, fake-dsh is that binary.
pub const JSONRPC_AGENT: &str = "dsh-jsonrpc-agent";

/// An SDK surface and what its command line said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Surface {
    /// The JSON-RPC runtime.
    Sdk(Flavor),
    /// `dsh-jsonrpc-agent` without its config path: the real one's usage line, exit 1.
    AgentUsage,
    /// `--profile headless` with the rest of its arguments.
    Headless(Persona, Vec<String>),
    /// `--persona` (or [`PERSONA_ENV`]) with a value that names no persona: exit 1.
    BadPersona(String),
    /// `--version`/`-V` on an SDK surface's command line (or with a persona chosen): the
    /// persona's version on stdout, exit 0, no server.
    Version(Persona),
    /// `--help`/`-h` on `--profile sdk|sdk-minimal`: the real profile's help, exit 0, no server.
    Help(String),
    /// A `--patch` overlay the real launcher refuses: its error line on stderr, exit 1, before
    /// anything is answered.
    BadPatch(String),
    /// 0.2.1's `--dump-config-schema` with a profile: the profile's loader configuration as a
    /// JSON Schema on stdout, exit 0 (fake-dsh's is a skeleton: [`config_schema`]).
    ConfigSchema(String),
    /// An option the persona's launcher does not know (0.1.5's `--dump-config-schema`):
    /// `error: unknown option 'X'`, exit 1.
    UnknownOption(String),
}

/// The version a persona's `--version` prints (the real wheels' binaries).
pub fn version_of(persona: Persona) -> &'static str {
    match persona {
        Persona::V021 => "0.2.1-rc.2",
        Persona::V015 => "0.1.5-rc.1",
        // 0.1.1's `dsh-jsonrpc-agent` has no version flag; its wheel's runtime is 0.1.1.
        Persona::V011 => "0.1.1",
    }
}

/// The help `--profile NAME --help` prints for the SDK profiles (0.1.5 and 0.2.1 alike).
pub fn sdk_help(profile: &str) -> String {
    format!(
        "Usage: dsh --profile {profile} [options]\n\n\
         Serve DeepSeek Harness SDK clients over stdio JSON-RPC.\n\n\
         Options:\n  -h, --help  show this help\n\n\
         Example:\n  dsh --profile {profile}     serve one SDK runtime until its client disconnects\n\n"
    )
}

/// The SDK surface a command line asks for, if any (`argv[0]` included).
pub fn select(args: &[OsString]) -> Option<Surface> {
    let args: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let program = args.first().map(String::as_str).unwrap_or_default();
    let invoked_as_agent = std::path::Path::new(program)
        .file_name()
        .is_some_and(|name| name == JSONRPC_AGENT);
    let (persona, rest) = match take_persona(&args[1.min(args.len())..]) {
        Ok(found) => found,
        Err(value) => return Some(Surface::BadPersona(value)),
    };
    let from_env = match std::env::var(PERSONA_ENV) {
        Ok(value) if !value.is_empty() => match persona_named(&value) {
            Some(persona) => Some(persona),
            None => return Some(Surface::BadPersona(value)),
        },
        _ => None,
    };
    let chosen = persona.or(from_env);
    let persona = chosen.unwrap_or(if invoked_as_agent {
        Persona::V011
    } else {
        Persona::V021
    });
    let asks = |flags: &[&str]| {
        rest.iter()
            .take_while(|a| *a != "--")
            .any(|a| flags.contains(&a.as_str()))
    };
    if persona == Persona::V011 {
        let has_config = rest.iter().any(|a| !a.starts_with('-'))
            || std::env::var_os("DSH_CORDIS_CONFIG").is_some_and(|v| !v.is_empty());
        return Some(if has_config {
            Surface::Sdk(Flavor {
                persona,
                minimal: true,
            })
        } else {
            Surface::AgentUsage
        });
    }
    let Some((profile, after)) = profile_of(&rest, persona) else {
        // No profile: `--version` answers with the persona's version when one was chosen (the
        // open-design CLI keeps its own version otherwise).
        return (chosen.is_some() && asks(&["--version", "-V"]))
            .then_some(Surface::Version(persona));
    };
    let sdk_profile = matches!(profile.as_str(), "sdk" | "sdk-minimal");
    if (sdk_profile || profile == "headless") && asks(&["--version", "-V"]) {
        return Some(Surface::Version(persona));
    }
    if sdk_profile && asks(&["--help", "-h"]) {
        return Some(Surface::Help(sdk_help(&profile)));
    }
    let runs = matches!(profile.as_str(), "sdk" | "sdk-minimal" | "headless");
    if runs && asks(&["--dump-config-schema"]) {
        return Some(match persona {
            Persona::V021 => Surface::ConfigSchema(profile),
            _ => Surface::UnknownOption("--dump-config-schema".into()),
        });
    }
    if let Some(error) = runs
        .then(|| patch::refused(&patch::patches_of(&rest)))
        .flatten()
    {
        return Some(Surface::BadPatch(error));
    }
    match profile.as_str() {
        "sdk" | "sdk-minimal" => Some(Surface::Sdk(Flavor {
            persona,
            minimal: profile == "sdk-minimal",
        })),
        "headless" => Some(Surface::Headless(persona, after)),
        _ => None,
    }
}

/// Splits `--persona V` / `--persona=V` out of the arguments.
pub fn take_persona(args: &[String]) -> Result<(Option<Persona>, Vec<String>), String> {
    let mut persona = None;
    let mut rest = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let value = if arg == PERSONA_FLAG {
            iter.next().cloned().unwrap_or_default()
        } else if let Some(value) = arg.strip_prefix("--persona=") {
            value.to_string()
        } else {
            rest.push(arg.clone());
            continue;
        };
        persona = Some(persona_named(&value).ok_or(value)?);
    }
    Ok((persona, rest))
}

/// The persona a `--persona` value names.
pub fn persona_named(value: &str) -> Option<Persona> {
    match value {
        "0.1.1" | "0.1.0" => Some(Persona::V011),
        "0.1.5" => Some(Persona::V015),
        "0.2.1" => Some(Persona::V021),
        _ => None,
    }
}

/// The `--profile` value and the arguments after the launcher's own flags (the app's). 0.2.1
/// also takes the profile as the first word (`dsh sdk`, `dsh headless "task"`).
fn profile_of(args: &[String], persona: Persona) -> Option<(String, Vec<String>)> {
    if persona == Persona::V021
        && !args
            .iter()
            .any(|a| a == "--profile" || a.starts_with("--profile="))
    {
        let first = args.first()?;
        if matches!(first.as_str(), "sdk" | "sdk-minimal" | "headless") {
            return Some((first.clone(), args[1..].to_vec()));
        }
    }
    let mut iter = args.iter();
    let mut before = Vec::new();
    while let Some(arg) = iter.next() {
        let profile = if arg == "--profile" {
            iter.next()?.clone()
        } else if let Some(value) = arg.strip_prefix("--profile=") {
            value.to_string()
        } else {
            before.push(arg.clone());
            continue;
        };
        let mut after = before;
        after.extend(iter.cloned());
        return Some((profile, after));
    }
    None
}

/// Runs the surface; never returns.
pub fn run(surface: Surface) -> ! {
    use crate::journal::{ExitReason, Mode};
    use crate::process::{finish, start_event};
    let mode = match surface {
        Surface::Headless(..) => Mode::Headless,
        Surface::Version(_) => Mode::Version,
        Surface::Help(_) | Surface::BadPatch(_) | Surface::UnknownOption(_) => Mode::Error,
        Surface::ConfigSchema(_) => Mode::Version,
        _ => Mode::Sdk,
    };
    crate::journal::record(start_event(mode, None));
    boot_warnings(&surface);
    match surface {
        Surface::Sdk(flavor) => server::run(flavor),
        Surface::Headless(persona, args) => crate::headless::run(persona, &args),
        Surface::AgentUsage => {
            crate::output::stderr_bytes(
                format!(
                    "usage: {JSONRPC_AGENT} <path/to/cordis.yml> (or set DSH_CORDIS_CONFIG=<path>, \
                     which wins); the config is required — there is no built-in fallback\n"
                )
                .as_bytes(),
            );
            finish(1, ExitReason::Error)
        }
        Surface::BadPersona(value) => {
            crate::output::stderr_bytes(
                format!(
                    "error: --persona (or {PERSONA_ENV}) {value:?}: expected 0.2.1, 0.1.5 or 0.1.1\n"
                )
                .as_bytes(),
            );
            finish(1, ExitReason::Error)
        }
        Surface::Version(persona) => {
            // `FAKE_DSH_VERSION` overrides the version everywhere, as on the open-design CLI.
            let version = std::env::var(crate::run::VERSION_ENV)
                .ok()
                .unwrap_or_else(|| version_of(persona).to_string());
            crate::output::Stdout::new().write_bytes(format!("{version}\n").as_bytes());
            finish(0, ExitReason::ScriptEnd)
        }
        Surface::ConfigSchema(profile) => {
            let schema = format!("{:#}\n", config_schema(&profile));
            crate::output::Stdout::new().write_bytes(schema.as_bytes());
            finish(0, ExitReason::ScriptEnd)
        }
        Surface::UnknownOption(option) => {
            crate::output::stderr_bytes(format!("error: unknown option '{option}'\n").as_bytes());
            finish(1, ExitReason::Error)
        }
        Surface::BadPatch(error) => {
            crate::output::stderr_bytes(format!("{error}\n").as_bytes());
            finish(1, ExitReason::Error)
        }
        Surface::Help(text) => {
            crate::output::Stdout::new().write_bytes(text.as_bytes());
            finish(0, ExitReason::ScriptEnd)
        }
    }
}

/// What 0.2.1's full profiles say on stderr as they boot: a `--patch` row that could not
/// activate ([`patch::providers`]); the process goes on.
fn boot_warnings(surface: &Surface) {
    let profile = match surface {
        Surface::Sdk(flavor) if flavor.v021() && !flavor.minimal => "sdk",
        Surface::Headless(Persona::V021, _) => "headless",
        _ => return,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let texts = patch::texts_of(&patch::patches_of(&args));
    let Ok(home) = crate::home::dsh_home() else {
        return;
    };
    if let Some(block) = patch::providers::warning(&texts, profile, &home) {
        crate::output::stderr_bytes(block.as_bytes());
    }
}

/// The real 0.2.1 schema's description and comment (observed).
const SCHEMA_DESCRIPTION: &str = "Describes the parsed entry-list YAML printed by --dump-config. \
    Use $defs.patchList for a profile/home/CLI overlay. Parse !!js with the Cordis entry-list YAML \
    dialect. Expression results, service dependencies, plugin startup checks, and \
    sequence-dependent patch targets still require runtime validation.";
const SCHEMA_COMMENT: &str = "Bundle, profile, home, and CLI layers apply in that order. A patch \
    config replaces the whole config. JSON Schema defaults are annotations; Schemastery validates \
    a fallback on null/omission unless required rejects it first. Schemastery unions select the \
    first successful branch. Root patch id constraints describe the current index, not ids \
    introduced or changed by earlier patches. Include-local patches have a separate index. \
    Relative plugin insertions require their source patch directory; this document does not \
    infer future overlay locations.";

/// 0.2.1's `--dump-config-schema` document for `profile`: the real one's top-level members
/// (observed), with a skeleton where the real one describes each plugin's config (fake-dsh has
/// no loader config; `x-cordis.complete` is false and lists no entries).
pub fn config_schema(profile: &str) -> serde_json::Value {
    let entry = serde_json::json!({"type": "object", "properties": {
        "id": {"type": "string"}, "name": {"type": "string"}, "disabled": {"type": "boolean"},
        "config": {}}});
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": format!("Cordis configuration for profile {profile}"),
        "description": SCHEMA_DESCRIPTION,
        "$comment": SCHEMA_COMMENT,
        "type": "array",
        "items": {"$ref": "#/$defs/entry"},
        "$defs": {"entry": entry, "patch": entry,
                  "patchList": {"type": "array", "items": {"$ref": "#/$defs/patch"}}},
        "x-cordis": {"profile": profile, "complete": false, "entries": [],
                     "patchSchema": "#/$defs/patchList", "diagnostics": []},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selected(args: &[&str]) -> Option<Surface> {
        select(&args.iter().map(OsString::from).collect::<Vec<_>>())
    }

    #[test]
    fn each_surface_is_selected_and_open_design_is_left_alone() {
        let sdk = |persona, minimal| Some(Surface::Sdk(Flavor { persona, minimal }));
        assert_eq!(
            selected(&["dsh", "--profile", "sdk"]),
            sdk(Persona::V021, false)
        );
        assert_eq!(selected(&["dsh", "sdk"]), sdk(Persona::V021, false));
        assert_eq!(
            selected(&["dsh", "--persona", "0.1.5", "--profile=sdk-minimal"]),
            sdk(Persona::V015, true)
        );
        assert_eq!(
            selected(&["dsh", "--persona", "0.1.5", "sdk"]),
            None,
            "0.1.5 takes the profile only as --profile"
        );
        assert_eq!(
            selected(&["dsh", "--profile", "sdk", "--version"]),
            Some(Surface::Version(Persona::V021))
        );
        assert_eq!(
            selected(&["dsh", "--persona", "0.1.5", "-V"]),
            Some(Surface::Version(Persona::V015))
        );
        assert_eq!(
            selected(&["dsh", "--profile", "sdk-minimal", "--help"]),
            Some(Surface::Help(sdk_help("sdk-minimal")))
        );
        assert_eq!(
            selected(&["/x/dsh-jsonrpc-agent", "/x/cordis.yml"]),
            sdk(Persona::V011, true)
        );
        assert_eq!(
            selected(&["dsh", "--persona", "0.1.1", "cordis.yml"]),
            sdk(Persona::V011, true)
        );
        let dir = tempfile::tempdir().unwrap();
        let patch = dir.path().join("p.yml");
        std::fs::write(&patch, "- id: session-title-llm\n  disabled: true\n").unwrap();
        let patch = patch.to_str().unwrap();
        assert_eq!(
            selected(&["dsh", "--profile", "headless", "--patch", patch, "do", "it"]),
            Some(Surface::Headless(
                Persona::V021,
                vec!["--patch".into(), patch.into(), "do".into(), "it".into()]
            ))
        );
        let missing = dir.path().join("missing.yml");
        let missing = missing.to_str().unwrap();
        assert!(matches!(
            selected(&["dsh", "--profile", "sdk", "--patch", missing]),
            Some(Surface::BadPatch(error)) if error.contains("failed to read overlay")
        ));
        assert_eq!(
            selected(&["dsh", "--persona=0.2", "--profile", "sdk"]),
            Some(Surface::BadPersona("0.2".into()))
        );
        assert_eq!(
            selected(&["dsh", "--profile", "open-design", "--stdio"]),
            None
        );
        assert_eq!(selected(&["dsh", "--version"]), None);
        assert_eq!(
            selected(&["dsh", "sdk", "--dump-config-schema"]),
            Some(Surface::ConfigSchema("sdk".into()))
        );
        assert_eq!(
            selected(&[
                "dsh",
                "--persona",
                "0.1.5",
                "--profile",
                "sdk",
                "--dump-config-schema"
            ]),
            Some(Surface::UnknownOption("--dump-config-schema".into()))
        );
    }
}
