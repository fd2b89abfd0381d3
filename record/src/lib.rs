//! `record`'s and `fixture-from-transcript`'s work (their command line is the binary's): a
//! transparent stdio proxy a host can use as its
//! `DSH_BIN` (it validates the runtime's stream live and writes a transcript), and the conversion
//! of such a transcript into a redacted, replayable case file.
//!
//! - [`proxy`]: the byte-exact proxy and the recording it writes.
//! - [`live`]: the live strict check of the proxied stream, by [`WireKind`].
//! - [`sdk_wire`], [`acp_wire`]: the live checks of the SDK's and ACP's JSON-RPC wires, on what
//!   [`jsonrpc`] gives both (pending requests, the session's summary).
//! - [`signals`]: SIGTERM/SIGINT/SIGHUP forwarding to the runtime's process group.
//! - [`transcript`]: the recording directory and `meta.json`.
//! - [`fixture`]: recording -> case file; [`sdk`]: `sdk-scenario-from-transcript`, a recorded SDK
//!   session -> a keyless fake-dsh `sdk` scenario; [`acp`]: a recorded ACP session -> a keyless
//!   fake-dsh `acp` scenario (`acp-scenario-from-transcript`).
//!
//! Redaction (credentials, token shapes) is `dsh-results`' [`dsh_results::redact`], shared with
//! every output that echoes a command line.

pub mod acp;
pub mod acp_wire;
pub mod fixture;
pub mod jsonrpc;
pub mod live;
pub mod proxy;
pub mod sdk;
pub mod sdk_wire;
pub mod signals;
pub mod transcript;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The kind of wire a recorded runtime speaks, which decides the live check (`meta.json`'s
/// `surface`): the open-design stream, the SDK's JSON-RPC (every SDK surface), ACP's JSON-RPC,
/// or headless's final text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WireKind {
    /// The open-design profile stream (`--profile open-design --stdio`): the strict checker.
    #[default]
    OpenDesign,
    /// The SDK JSON-RPC runtime (`--profile sdk`, `--profile sdk-minimal`, the 0.1.1
    /// `dsh-jsonrpc-agent`): JSON-RPC 2.0 frames, the runtime's methods and notifications.
    Sdk,
    /// `--profile headless TASK`: stdout is the final text, recorded unchecked.
    Headless,
    /// `--profile acp` (`dsh acp`): the Agent Client Protocol's JSON-RPC frames.
    Acp,
}

impl WireKind {
    /// The wire of a surface `record` checks live (every one today: `None` is for a surface
    /// added before its live check).
    pub fn of(surface: dsh_engine::surface::Surface) -> Option<WireKind> {
        use dsh_engine::surface::Surface;
        match surface {
            Surface::OpenDesign => Some(WireKind::OpenDesign),
            Surface::Sdk | Surface::SdkMinimal | Surface::JsonrpcAgent => Some(WireKind::Sdk),
            Surface::Headless => Some(WireKind::Headless),
            Surface::Acp => Some(WireKind::Acp),
        }
    }

    /// The wire a runtime command line asks for: `--profile sdk|sdk-minimal` (or
    /// `--profile=...`, or 0.2.1's positional `dsh sdk`), a program named `dsh-jsonrpc-agent` or
    /// fake-dsh's `--persona 0.1.1` are the SDK wire; `--profile headless` (`dsh headless`) is
    /// headless, `--profile acp` (`dsh acp`) ACP; anything else the open-design stream.
    pub fn detect(command: &[OsString]) -> WireKind {
        let args: Vec<String> = command
            .iter()
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect();
        let program = args.first().map(Path::new).and_then(Path::file_name);
        if program.is_some_and(|name| name == "dsh-jsonrpc-agent") {
            return WireKind::Sdk;
        }
        let value_of = |flag: &str| {
            let prefix = format!("{flag}=");
            args.iter().enumerate().skip(1).find_map(|(index, arg)| {
                if arg == flag {
                    args.get(index + 1).cloned()
                } else {
                    arg.strip_prefix(&prefix).map(str::to_string)
                }
            })
        };
        let flag = value_of("--profile");
        let persona = value_of("--persona");
        if flag.is_none() && matches!(persona.as_deref(), Some("0.1.1" | "0.1.0")) {
            // The 0.1.1 agent has no profiles: its positional argument is a config file.
            return WireKind::Sdk;
        }
        match flag.or_else(|| positional_profile(&args)).as_deref() {
            Some("sdk" | "sdk-minimal") => WireKind::Sdk,
            Some("headless") => WireKind::Headless,
            Some("acp") => WireKind::Acp,
            _ => WireKind::OpenDesign,
        }
    }
}

/// dsh 0.2.1's positional profile (`dsh sdk`, `dsh headless TASK`): the first argument after the
/// program that is neither a launcher flag nor the value of one that takes a value.
fn positional_profile(args: &[String]) -> Option<String> {
    const TAKES_A_VALUE: [&str; 3] = ["--patch", "--from-default-profile", "--persona"];
    let mut rest = args.iter().skip(1);
    while let Some(arg) = rest.next() {
        if TAKES_A_VALUE.contains(&arg.as_str()) {
            rest.next();
        } else if !arg.starts_with('-') {
            return Some(arg.clone());
        }
    }
    None
}

/// The default case id: `recorded.` and the recording directory's name as a case-id segment.
pub fn default_id(recording: &std::path::Path) -> String {
    let name = recording
        .canonicalize()
        .ok()
        .and_then(|path| {
            path.file_name()
                .map(|name| name.to_string_lossy().into_owned())
        })
        .unwrap_or_default()
        .to_lowercase();
    let segment: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let segment = segment.trim_matches('-');
    format!(
        "recorded.{}",
        if segment.is_empty() { "turn" } else { segment }
    )
}

/// Where a case goes in a corpus directory `dir`: `<dir>/<area>/<id>.json`.
pub fn corpus_path(dir: &Path, id: &str) -> PathBuf {
    let area = id.split('.').next().unwrap_or(id);
    dir.join(area).join(format!("{id}.json"))
}

/// Where `fixture-from-transcript` writes a case.
#[derive(Debug, Clone)]
pub enum CaseOut {
    /// stdout (the caller prints [`case_text`]'s text).
    Stdout,
    /// This file (missing parent directories are created).
    File(PathBuf),
    /// A corpus directory: `DIR/<area>/<id>.json` ([`corpus_path`]).
    Corpus(PathBuf),
}

/// The case file text of `recording` as case `id` (`None`: [`default_id`]), checked against
/// `schemas/fixture.schema.json`: `(id, text)`.
pub fn case_text(recording: &Path, id: Option<&str>) -> Result<(String, String), String> {
    let id = id.map_or_else(|| default_id(recording), str::to_string);
    if !dsh_formats::case::is_valid_id(&id) {
        return Err(format!(
            "--id {id:?} is not a case id (^[a-z0-9-]+(\\.[a-z0-9-]+)+$)"
        ));
    }
    let case = fixture::case_from_recording(recording, &id).and_then(|case| {
        serde_json::to_value(case).map_err(|error| format!("encoding the case: {error}"))
    })?;
    if let Err(errors) = dsh_protocol::schema::validate("fixture.schema.json", &case) {
        let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
        return Err(format!(
            "internal error: the generated case fails schemas/fixture.schema.json: {}",
            errors.join("; ")
        ));
    }
    let text = serde_json::to_string_pretty(&case)
        .map_err(|error| format!("encoding the case: {error}"))?;
    Ok((id, text + "\n"))
}

/// Writes case `id`'s `text` to `out` (a file or a corpus directory, never through a link);
/// returns the file written.
pub fn write_case(out: &CaseOut, id: &str, text: &str) -> Result<PathBuf, String> {
    let path = match out {
        CaseOut::Stdout => return Err("no file to write the case to".into()),
        CaseOut::File(file) => {
            if let Some(dir) = file.parent().filter(|dir| !dir.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|error| {
                    format!("cannot create the directory of {}: {error}", file.display())
                })?;
            }
            file.clone()
        }
        CaseOut::Corpus(dir) => {
            let path = corpus_path(dir, id);
            let area = path.strip_prefix(dir).ok().and_then(Path::parent);
            dsh_engine::files::create_dir_inside(dir, area.unwrap_or(Path::new(""))).map_err(
                |error| format!("cannot create the directory of {}: {error}", path.display()),
            )?;
            path
        }
    };
    dsh_engine::files::write_file(&path, text.as_bytes()).map_err(|error| error.to_string())?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detected(command: &[&str]) -> WireKind {
        WireKind::detect(&command.iter().map(OsString::from).collect::<Vec<_>>())
    }

    #[test]
    fn the_surface_is_detected_from_the_command() {
        let cases: [(&[&str], WireKind); 13] = [
            // 0.2.1's positional profile, after launcher flags.
            (&["dsh", "sdk"], WireKind::Sdk),
            (&["dsh", "--patch", "x.yml", "sdk-minimal"], WireKind::Sdk),
            (&["fake-dsh", "--persona", "0.2.1", "sdk"], WireKind::Sdk),
            (&["dsh", "headless", "--json", "do it"], WireKind::Headless),
            (
                &["dsh", "--patch", "sdk", "open-design", "--stdio"],
                WireKind::OpenDesign,
            ),
            (&["dsh", "--profile", "sdk"], WireKind::Sdk),
            (&["dsh", "--profile=sdk-minimal"], WireKind::Sdk),
            (&["/opt/bin/dsh-jsonrpc-agent"], WireKind::Sdk),
            (
                &["fake-dsh", "--persona", "0.1.1", "cordis.yml"],
                WireKind::Sdk,
            ),
            (
                &["dsh", "--profile", "headless", "do it"],
                WireKind::Headless,
            ),
            (
                &["dsh", "--profile", "open-design", "--stdio"],
                WireKind::OpenDesign,
            ),
            // A task that merely says "--profile sdk" is no profile.
            (
                &["dsh", "--profile", "headless", "--profile sdk"],
                WireKind::Headless,
            ),
            (&["sdk"], WireKind::OpenDesign),
        ];
        for (command, surface) in cases {
            assert_eq!(detected(command), surface, "{command:?}");
        }
    }
}
