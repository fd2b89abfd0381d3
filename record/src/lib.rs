//! `record` and `fixture-from-transcript`: a transparent stdio proxy a host can use as its
//! `DSH_BIN` (it validates the runtime's stream live and writes a transcript), and the conversion
//! of such a transcript into a redacted, replayable case file.
//!
//! - [`proxy`]: the byte-exact proxy and the recording it writes.
//! - [`live`]: the live strict check of the proxied stream, by [`Surface`].
//! - [`sdk_wire`]: the live check of the SDK JSON-RPC wire.
//! - [`signals`]: SIGTERM/SIGINT/SIGHUP forwarding to the runtime's process group.
//! - [`transcript`]: the recording directory and `meta.json`.
//! - [`fixture`]: recording -> case file; [`sdk`]: `sdk-scenario-from-transcript`, a recorded SDK
//!   session -> a keyless fake-dsh `sdk` scenario; [`acp`]: a recorded ACP session -> a keyless
//!   fake-dsh `acp` scenario (its command not wired yet).
//!
//! Redaction (credentials, token shapes) is `dsh-results`' [`dsh_results::redact`], shared with
//! every output that echoes a command line.

pub mod acp;
pub mod fixture;
pub mod live;
pub mod proxy;
pub mod sdk;
pub mod sdk_wire;
pub mod signals;
pub mod transcript;

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The machine surface a recorded runtime speaks, which decides the live check.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Surface {
    /// The open-design profile stream (`--profile open-design --stdio`): the strict checker.
    #[default]
    OpenDesign,
    /// The SDK JSON-RPC runtime (`--profile sdk`, `--profile sdk-minimal`, the 0.1.1
    /// `dsh-jsonrpc-agent`): JSON-RPC 2.0 frames, the runtime's methods and notifications.
    Sdk,
    /// `--profile headless TASK`: stdout is the final text, recorded unchecked.
    Headless,
}

impl Surface {
    /// The surface a runtime command line asks for: `--profile sdk|sdk-minimal` (or
    /// `--profile=...`, or 0.2.1's positional `dsh sdk`), a program named `dsh-jsonrpc-agent` or
    /// fake-dsh's `--persona 0.1.1` are the SDK wire; `--profile headless` (`dsh headless`) is
    /// headless; anything else the open-design stream.
    pub fn detect(command: &[OsString]) -> Surface {
        let args: Vec<String> = command
            .iter()
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect();
        let program = args.first().map(Path::new).and_then(Path::file_name);
        if program.is_some_and(|name| name == "dsh-jsonrpc-agent") {
            return Surface::Sdk;
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
            return Surface::Sdk;
        }
        match flag.or_else(|| positional_profile(&args)).as_deref() {
            Some("sdk" | "sdk-minimal") => Surface::Sdk,
            Some("headless") => Surface::Headless,
            _ => Surface::OpenDesign,
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

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Directory the recording goes under (as `<timestamp>-<pid>/`).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// The surface the runtime speaks, which decides the live check [default: from the command:
    /// `--profile sdk|sdk-minimal` (or `dsh sdk`) or `dsh-jsonrpc-agent` is `sdk`, `--profile
    /// headless` (`dsh headless`) is `headless`, anything else `open-design`].
    #[arg(long, value_enum)]
    pub surface: Option<Surface>,
    /// The runtime command, after `--`: e.g. `-- dsh --profile open-design --stdio`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

pub fn main(args: Args) -> ExitCode {
    let surface = args
        .surface
        .unwrap_or_else(|| Surface::detect(&args.command));
    let ran = proxy::run(&args.out, &args.command, surface);
    if let Ok((dir, _)) = &ran {
        // stdout is the runtime's own stream: the directory chosen goes to stderr.
        eprintln!("recorded to {}", dir.display());
    }
    match ran {
        Ok((_, proxy::Ended::SpawnFailed(code))) => ExitCode::from(code as u8),
        Ok((_, proxy::Ended::Exited(status))) => {
            use std::os::unix::process::ExitStatusExt;
            match (status.code(), status.signal()) {
                (Some(code), _) => ExitCode::from(code.clamp(0, 255) as u8),
                (None, Some(signal)) => match nix::sys::signal::Signal::try_from(signal) {
                    Ok(signal) => signals::die_by(signal),
                    Err(_) => ExitCode::from((128 + signal).clamp(0, 255) as u8),
                },
                (None, None) => ExitCode::from(1),
            }
        }
        Err(why) => {
            eprintln!("dsh-conformance record: {why}");
            ExitCode::from(2)
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct FixtureArgs {
    /// A recording directory written by `record` (holding stdout.jsonl, stdin.jsonl, meta.json).
    pub recording: PathBuf,
    /// The case id to give the fixture, e.g. `replay.first-turn` [default: `recorded.` and the
    /// recording directory's name, lowercased, e.g. `recorded.20261203t135000z-4242`].
    #[arg(long)]
    pub id: Option<String>,
    /// Write the case here instead of stdout (missing parent dirs are created). An existing
    /// directory, or a path ending in `/`, gets the corpus layout: `DIR/<area>/<id>.json`.
    #[arg(long, value_name = "FILE|DIR")]
    pub out: Option<PathBuf>,
}

/// The default case id: `recorded.` and the recording directory's name as a case-id segment.
fn default_id(recording: &std::path::Path) -> String {
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

/// Where `--out` puts the case: the file named, or `<area>/<id>.json` under a directory.
fn out_path(out: &std::path::Path, id: &str) -> PathBuf {
    let is_dir = out.is_dir() || out.as_os_str().to_string_lossy().ends_with('/');
    if !is_dir {
        return out.to_path_buf();
    }
    let area = id.split('.').next().unwrap_or(id);
    out.join(area).join(format!("{id}.json"))
}

pub fn fixture_main(args: FixtureArgs) -> ExitCode {
    let fail = |why: String| {
        eprintln!("dsh-conformance fixture-from-transcript: {why}");
        ExitCode::from(2)
    };
    let id = args
        .id
        .clone()
        .unwrap_or_else(|| default_id(&args.recording));
    if !dsh_formats::case::is_valid_id(&id) {
        return fail(format!(
            "--id {id:?} is not a case id (^[a-z0-9-]+(\\.[a-z0-9-]+)+$)"
        ));
    }
    let case = fixture::case_from_recording(&args.recording, &id).and_then(|case| {
        serde_json::to_value(case).map_err(|error| format!("encoding the case: {error}"))
    });
    let case = match case {
        Ok(case) => case,
        Err(why) => return fail(why),
    };
    if let Err(errors) = dsh_protocol::schema::validate("fixture.schema.json", &case) {
        let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
        return fail(format!(
            "internal error: the generated case fails schemas/fixture.schema.json: {}",
            errors.join("; ")
        ));
    }
    let text = match serde_json::to_string_pretty(&case) {
        Ok(text) => text + "\n",
        Err(error) => return fail(format!("encoding the case: {error}")),
    };
    match &args.out {
        Some(out) => {
            let path = &out_path(out, &id);
            let made = match path.strip_prefix(out).ok().and_then(Path::parent) {
                Some(area) if path != out => {
                    dsh_engine::files::create_dir_inside(out, area).map(drop)
                }
                _ => path
                    .parent()
                    .filter(|dir| !dir.as_os_str().is_empty())
                    .map_or(Ok(()), std::fs::create_dir_all),
            };
            if let Err(error) = made {
                return fail(format!(
                    "cannot create the directory of {}: {error}",
                    path.display()
                ));
            }
            if let Err(error) = dsh_engine::files::write_file(path, text.as_bytes()) {
                return fail(error.to_string());
            }
            eprintln!("wrote case {id} to {}", path.display());
        }
        None => {
            let _ = std::io::stdout().write_all(text.as_bytes());
        }
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detected(command: &[&str]) -> Surface {
        Surface::detect(&command.iter().map(OsString::from).collect::<Vec<_>>())
    }

    #[test]
    fn the_surface_is_detected_from_the_command() {
        let cases: [(&[&str], Surface); 13] = [
            // 0.2.1's positional profile, after launcher flags.
            (&["dsh", "sdk"], Surface::Sdk),
            (&["dsh", "--patch", "x.yml", "sdk-minimal"], Surface::Sdk),
            (&["fake-dsh", "--persona", "0.2.1", "sdk"], Surface::Sdk),
            (&["dsh", "headless", "--json", "do it"], Surface::Headless),
            (
                &["dsh", "--patch", "sdk", "open-design", "--stdio"],
                Surface::OpenDesign,
            ),
            (&["dsh", "--profile", "sdk"], Surface::Sdk),
            (&["dsh", "--profile=sdk-minimal"], Surface::Sdk),
            (&["/opt/bin/dsh-jsonrpc-agent"], Surface::Sdk),
            (
                &["fake-dsh", "--persona", "0.1.1", "cordis.yml"],
                Surface::Sdk,
            ),
            (
                &["dsh", "--profile", "headless", "do it"],
                Surface::Headless,
            ),
            (
                &["dsh", "--profile", "open-design", "--stdio"],
                Surface::OpenDesign,
            ),
            // A task that merely says "--profile sdk" is no profile.
            (
                &["dsh", "--profile", "headless", "--profile sdk"],
                Surface::Headless,
            ),
            (&["sdk"], Surface::OpenDesign),
        ];
        for (command, surface) in cases {
            assert_eq!(detected(command), surface, "{command:?}");
        }
    }
}
