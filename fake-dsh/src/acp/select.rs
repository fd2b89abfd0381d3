//! Whether a command line asks for the ACP surface, and what the real launcher answers when it
//! asks badly (facts F1.1): `--profile acp` on both releases, `acp` as the first word on 0.2.1
//! only; `--help`/`-h` print the profile's help; any other argument ends the process before the
//! wire starts, exit 1. Checked before the SDK surfaces and the open-design CLI.

use crate::sdk::session::Persona;
use std::ffi::OsString;

/// What an ACP command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcpSurface {
    /// Serve ACP on stdio as this release.
    Serve(Persona),
    /// `--profile acp --help`: the profile's help on stdout, exit 0.
    Help,
    /// `--profile acp --version`: the persona's version, exit 0.
    Version(Persona),
    /// A usage error the real launcher prints on stderr, exit 1.
    Usage(String),
}

/// The profile's help, exactly as both releases print it (F1.1), blank line included.
pub const HELP: &str = "Usage: dsh --profile acp [options]\n\n\
    Serve automation clients over Agent Client Protocol stdio.\n\n\
    Options:\n  -h, --help  show this help\n\n\
    Example:\n  dsh --profile acp     serve ACP until the client disconnects\n\n";

/// The ACP surface a command line (`argv[0]` included) asks for, if any. `--persona` and
/// `FAKE_DSH_PERSONA` choose the release as on the SDK surfaces (0.2.1 by default).
pub fn select(args: &[OsString]) -> Option<AcpSurface> {
    let args: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let (flag, rest) = crate::sdk::take_persona(&args).ok()?;
    let from_env = std::env::var(crate::sdk::PERSONA_ENV)
        .ok()
        .filter(|v| !v.is_empty())
        .and_then(|v| crate::sdk::persona_named(&v));
    let persona = flag.or(from_env).unwrap_or(Persona::V021);
    let (positional, after) = profile_acp(&rest)?;
    if persona == Persona::V011 {
        return Some(AcpSurface::Usage(
            "error: --persona 0.1.1 (dsh-jsonrpc-agent) has no ACP surface".to_string(),
        ));
    }
    if positional && persona != Persona::V021 {
        // 0.1.5 has no profile positional: its launcher's own answers (F1.1).
        return if after.iter().any(|a| a == "--help" || a == "-h") {
            None
        } else {
            Some(AcpSurface::Usage(
                "error: --profile <name> is required".to_string(),
            ))
        };
    }
    Some(arguments(persona, &after))
}

/// Whether the line names the `acp` profile (as `--profile acp`, `--profile=acp`, or the first
/// word), whether as the first word, and the other arguments.
fn profile_acp(args: &[String]) -> Option<(bool, Vec<String>)> {
    if args.first().is_some_and(|first| first == "acp") {
        return Some((true, args[1..].to_vec()));
    }
    let mut rest = Vec::new();
    let mut found = false;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let value = if arg == "--profile" {
            iter.next().cloned()
        } else {
            arg.strip_prefix("--profile=").map(str::to_string)
        };
        match value {
            Some(value) if value == "acp" => found = true,
            Some(_) => return None,
            None if arg == "--profile" => return None,
            None => rest.push(arg.clone()),
        }
    }
    found.then_some((false, rest))
}

/// What the arguments after the profile ask for: help and version win, then the first unknown
/// option, then extra words (the real launcher's messages, F1.1).
fn arguments(persona: Persona, after: &[String]) -> AcpSurface {
    if after.iter().any(|a| a == "--help" || a == "-h") {
        return AcpSurface::Help;
    }
    if after.iter().any(|a| a == "--version" || a == "-V") {
        return AcpSurface::Version(persona);
    }
    if let Some(option) = after.iter().find(|a| a.starts_with('-')) {
        return AcpSurface::Usage(format!("error: unknown option '{option}'"));
    }
    if !after.is_empty() {
        return AcpSurface::Usage(format!(
            "error: too many arguments. Expected 0 arguments but got {}: {}.",
            after.len(),
            after.join(", ")
        ));
    }
    AcpSurface::Serve(persona)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selected(args: &[&str]) -> Option<AcpSurface> {
        let mut argv = vec![OsString::from("dsh")];
        argv.extend(args.iter().map(OsString::from));
        select(&argv)
    }

    #[test]
    fn the_profile_and_the_positional_per_release() {
        let serve = |persona| Some(AcpSurface::Serve(persona));
        assert_eq!(selected(&["--profile", "acp"]), serve(Persona::V021));
        assert_eq!(selected(&["--profile=acp"]), serve(Persona::V021));
        assert_eq!(selected(&["acp"]), serve(Persona::V021));
        assert_eq!(
            selected(&["--persona", "0.1.5", "--profile", "acp"]),
            serve(Persona::V015)
        );
        assert_eq!(
            selected(&["--persona", "0.1.5", "acp"]),
            Some(AcpSurface::Usage(
                "error: --profile <name> is required".into()
            ))
        );
        assert_eq!(
            selected(&["--persona", "0.1.5", "acp", "--help"]),
            None,
            "0.1.5's top-level help"
        );
        assert_eq!(selected(&["--profile", "sdk"]), None);
        assert_eq!(selected(&["--profile", "open-design", "--stdio"]), None);
        assert_eq!(selected(&["sdk"]), None);
    }

    #[test]
    fn help_and_the_launchers_usage_errors() {
        assert_eq!(
            selected(&["--profile", "acp", "-h"]),
            Some(AcpSurface::Help)
        );
        assert_eq!(selected(&["acp", "--help"]), Some(AcpSurface::Help));
        assert_eq!(
            selected(&["--profile", "acp", "--bogus"]),
            Some(AcpSurface::Usage("error: unknown option '--bogus'".into()))
        );
        assert_eq!(
            selected(&["--profile", "acp", "extra"]),
            Some(AcpSurface::Usage(
                "error: too many arguments. Expected 0 arguments but got 1: extra.".into()
            ))
        );
        assert_eq!(
            selected(&["--profile", "acp", "--version"]),
            Some(AcpSurface::Version(Persona::V021))
        );
        assert!(HELP.ends_with("disconnects\n\n"));
    }
}
