//! `record` (the live-checked stdio proxy) and the converters of its recordings,
//! `fixture-from-transcript`, `sdk-scenario-from-transcript` and `acp-scenario-from-transcript`
//! (`dsh-record`).

use super::options::{heading, surface_parser};
use dsh_engine::surface::Surface;
use dsh_record::{proxy, CaseOut, WireKind};
use nix::sys::signal::Signal;
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The directory the recording goes under (as `<timestamp>-<pid>/`).
    #[arg(long, value_name = "DIR", help_heading = heading::OUTPUT)]
    pub out: PathBuf,
    /// The surface the runtime speaks, which decides the live check [default: from the command:
    /// `--profile sdk|sdk-minimal` (or `dsh sdk`) or `dsh-jsonrpc-agent` is `sdk`, `--profile
    /// headless` (`dsh headless`) is `headless`, `--profile acp` (`dsh acp`) is `acp`, anything
    /// else `open-design`].
    #[arg(long, value_parser = surface_parser(), help_heading = heading::RUNTIME)]
    pub surface: Option<Surface>,
    /// The runtime command, after `--`: e.g. `-- dsh --profile open-design --stdio`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// `record`: ends as the runtime ended (its exit code, or its signal); 2 when it could not record.
pub fn main(args: Args) -> ExitCode {
    let wire = match args.surface {
        None => WireKind::detect(&args.command),
        Some(surface) => match WireKind::of(surface) {
            Some(wire) => wire,
            None => {
                let can: Vec<Surface> = Surface::ALL
                    .into_iter()
                    .filter(|surface| WireKind::of(*surface).is_some())
                    .collect();
                eprintln!(
                    "dsh-conformance record: {}",
                    surface.unsupported("record", &can)
                );
                return ExitCode::from(2);
            }
        },
    };
    let say: proxy::Say =
        std::sync::Arc::new(|line: &str| eprintln!("dsh-conformance record: {line}"));
    let ran = proxy::run(&args.out, &args.command, wire, say);
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
                (None, Some(signal)) => match Signal::try_from(signal) {
                    Ok(signal) => die_by(signal),
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

/// Ends this process the way the runtime ended: by the same signal (default action restored).
fn die_by(signal: Signal) -> ! {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet};
    let default = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
    // SAFETY: restoring the default disposition has no preconditions.
    let _ = unsafe { sigaction(signal, &default) };
    let mut unblock = SigSet::empty();
    unblock.add(signal);
    let _ = unblock.thread_unblock();
    let _ = nix::sys::signal::raise(signal);
    std::process::exit(128 + signal as i32)
}

#[derive(Debug, clap::Args)]
pub struct FixtureArgs {
    /// A recording directory written by `record` (holding stdout.jsonl, stdin.jsonl, meta.json).
    pub recording: PathBuf,
    /// The case id to give the fixture, e.g. `replay.first-turn` [default: `recorded.` and the
    /// recording directory's name, lowercased, e.g. `recorded.20261203t135000z-4242`].
    #[arg(long, help_heading = heading::OUTPUT)]
    pub id: Option<String>,
    /// Write the case into this corpus directory, as `DIR/<area>/<id>.json` (missing
    /// directories are created) instead of stdout.
    #[arg(long, value_name = "DIR", conflicts_with = "case_file", help_heading = heading::OUTPUT)]
    pub out: Option<PathBuf>,
    /// Write the case to this file instead of stdout (missing parent directories are created).
    #[arg(long, value_name = "FILE", help_heading = heading::OUTPUT)]
    pub case_file: Option<PathBuf>,
}

impl FixtureArgs {
    /// Where the case goes. `--out` naming something that is no directory and ends in `.json` is
    /// the old spelling of `--case-file` (before `--out` meant a directory everywhere).
    fn case_out(&self) -> CaseOut {
        match (&self.case_file, &self.out) {
            (Some(file), _) => CaseOut::File(file.clone()),
            (None, Some(out))
                if !out.is_dir() && out.extension().is_some_and(|ext| ext == "json") =>
            {
                CaseOut::File(out.clone())
            }
            (None, Some(dir)) => CaseOut::Corpus(dir.clone()),
            (None, None) => CaseOut::Stdout,
        }
    }
}

/// `fixture-from-transcript`: exit 0 written, 2 could not convert or write.
pub fn fixture_main(args: FixtureArgs) -> ExitCode {
    let fail = |why: String| {
        eprintln!("dsh-conformance fixture-from-transcript: {why}");
        ExitCode::from(2)
    };
    let (id, text) = match dsh_record::case_text(&args.recording, args.id.as_deref()) {
        Ok(case) => case,
        Err(why) => return fail(why),
    };
    match args.case_out() {
        CaseOut::Stdout => {
            let _ = std::io::stdout().write_all(text.as_bytes());
        }
        out => match dsh_record::write_case(&out, &id, &text) {
            Ok(path) => eprintln!("wrote case {id} to {}", path.display()),
            Err(why) => return fail(why),
        },
    }
    ExitCode::SUCCESS
}

#[derive(Debug, clap::Args)]
pub struct ScenarioArgs {
    /// A recording directory written by `record` (its stdout.jsonl; with its stdin.jsonl for ACP),
    /// or, for the SDK, a stdout.jsonl file.
    pub recording: PathBuf,
    /// Write the scenario to this file instead of stdout (never through a link).
    #[arg(long, alias = "out", value_name = "FILE", help_heading = heading::OUTPUT)]
    pub scenario_file: Option<PathBuf>,
}

/// The surface a scenario converter reads.
#[derive(Debug, Clone, Copy)]
pub enum ScenarioOf {
    Sdk,
    Acp,
}

impl ScenarioOf {
    fn command(self) -> &'static str {
        match self {
            ScenarioOf::Sdk => "sdk-scenario-from-transcript",
            ScenarioOf::Acp => "acp-scenario-from-transcript",
        }
    }
}

/// `sdk-scenario-from-transcript`, `acp-scenario-from-transcript`: exit 0 written, 2 could not
/// convert or write.
pub fn scenario_main(args: ScenarioArgs, of: ScenarioOf) -> ExitCode {
    let convert = match of {
        ScenarioOf::Sdk => dsh_record::sdk::scenario_text,
        ScenarioOf::Acp => dsh_record::acp::scenario_text,
    };
    let converted = args
        .scenario_file
        .as_deref()
        .map_or(Ok(()), dsh_engine::files::refuse_symlink)
        .map_err(|error| error.to_string())
        .and_then(|()| convert(&args.recording, &mut |note| eprintln!("note: {note}")))
        .and_then(|text| match &args.scenario_file {
            Some(file) => dsh_engine::files::write_file(file, text.as_bytes())
                .map_err(|error| error.to_string()),
            None => {
                print!("{text}");
                Ok(())
            }
        });
    match converted {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("dsh-conformance {}: {message}", of.command());
            ExitCode::from(2)
        }
    }
}
