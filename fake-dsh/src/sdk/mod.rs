//! fake-dsh's SDK surfaces (docs/surface-sdk.md, docs/surface-headless.md): the newline JSON-RPC
//! runtime the official SDK clients start (`--profile sdk`, `--profile sdk-minimal`, the 0.1.1
//! `dsh-jsonrpc-agent` binary) and `--profile headless TASK` ([`crate::headless`]).
//!
//! - [`select`]: whether a command line asks for one of them (checked before the open-design CLI);
//! - [`server`]: the request loop; [`session`]: session events and turns; [`wire`]: stdout;
//!   [`scenario`]: the `sdk` scenario member.

pub mod scenario;
pub mod server;
pub mod session;
pub mod wire;

use session::{Flavor, Persona};
use std::ffi::OsString;

/// The option selecting the runtime generation: `--persona 0.1.1` or `--persona 0.1.5`.
pub const PERSONA_FLAG: &str = "--persona";
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
    Headless(Vec<String>),
    /// `--persona` with a value that names no persona: exit 1.
    BadPersona(String),
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
    let persona = persona.unwrap_or(if invoked_as_agent {
        Persona::V011
    } else {
        Persona::V015
    });
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
    let (profile, after) = profile_of(&rest)?;
    match profile.as_str() {
        "sdk" | "sdk-minimal" => Some(Surface::Sdk(Flavor {
            persona,
            minimal: profile == "sdk-minimal",
        })),
        "headless" => Some(Surface::Headless(after)),
        _ => None,
    }
}

/// Splits `--persona V` / `--persona=V` out of the arguments.
fn take_persona(args: &[String]) -> Result<(Option<Persona>, Vec<String>), String> {
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
        persona = Some(match value.as_str() {
            "0.1.1" | "0.1.0" => Persona::V011,
            "0.1.5" => Persona::V015,
            _ => return Err(value),
        });
    }
    Ok((persona, rest))
}

/// The `--profile` value and the arguments after the launcher's own flags (the app's).
fn profile_of(args: &[String]) -> Option<(String, Vec<String>)> {
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
        Surface::Headless(_) => Mode::Headless,
        _ => Mode::Sdk,
    };
    crate::journal::record(start_event(mode, None));
    match surface {
        Surface::Sdk(flavor) => server::run(flavor),
        Surface::Headless(args) => crate::headless::run(&args),
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
                format!("error: --persona {value:?}: expected 0.1.1 or 0.1.5\n").as_bytes(),
            );
            finish(1, ExitReason::Error)
        }
    }
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
            sdk(Persona::V015, false)
        );
        assert_eq!(
            selected(&["dsh", "--profile=sdk-minimal"]),
            sdk(Persona::V015, true)
        );
        assert_eq!(
            selected(&["/x/dsh-jsonrpc-agent", "/x/cordis.yml"]),
            sdk(Persona::V011, true)
        );
        assert_eq!(
            selected(&["dsh", "--persona", "0.1.1", "cordis.yml"]),
            sdk(Persona::V011, true)
        );
        assert_eq!(
            selected(&[
                "dsh",
                "--profile",
                "headless",
                "--patch",
                "p.yml",
                "do",
                "it"
            ]),
            Some(Surface::Headless(vec![
                "--patch".into(),
                "p.yml".into(),
                "do".into(),
                "it".into()
            ]))
        );
        assert_eq!(
            selected(&["dsh", "--persona=0.2", "--profile", "sdk"]),
            Some(Surface::BadPersona("0.2".into()))
        );
        assert_eq!(
            selected(&["dsh", "--profile", "open-design", "--stdio"]),
            None
        );
        assert_eq!(selected(&["dsh", "--version"]), None);
    }
}
