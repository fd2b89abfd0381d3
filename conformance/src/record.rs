//! `record` and `fixture-from-transcript`: a transparent stdio proxy a host can use as its
//! `DSH_BIN` (it validates the runtime's stream live and writes a transcript), and the conversion
//! of such a transcript into a redacted, replayable case file.
//!
//! - [`proxy`]: the byte-exact proxy and the recording it writes.
//! - [`live`]: the live strict check of the proxied stream.
//! - [`signals`]: SIGTERM/SIGINT/SIGHUP forwarding to the runtime's process group.
//! - [`transcript`]: the recording directory and `meta.json`.
//! - [`redact`]: removing credentials and prompt text.
//! - [`fixture`]: recording -> case file.

pub mod fixture;
pub mod live;
pub mod proxy;
pub mod redact;
pub mod signals;
pub mod transcript;

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Directory the recording goes under (as <timestamp>-<pid>/).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// The runtime command, after `--`: e.g. `-- dsh --profile open-design --stdio`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

pub fn main(args: Args) -> ExitCode {
    let ran = proxy::run(&args.out, &args.command);
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
    /// The case id to give the fixture, e.g. `replay.first-turn`.
    #[arg(long)]
    pub id: String,
    /// Write the case here instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

pub fn fixture_main(args: FixtureArgs) -> ExitCode {
    let fail = |why: String| {
        eprintln!("dsh-conformance fixture-from-transcript: {why}");
        ExitCode::from(2)
    };
    if !crate::fixture::is_valid_id(&args.id) {
        return fail(format!(
            "--id {:?} is not a case id (^[a-z0-9-]+(\\.[a-z0-9-]+)+$)",
            args.id
        ));
    }
    let case = match fixture::case_from_recording(&args.recording, &args.id) {
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
        Some(path) => {
            let parent = path.parent().filter(|dir| !dir.as_os_str().is_empty());
            if let Err(error) = parent.map_or(Ok(()), std::fs::create_dir_all) {
                return fail(format!("cannot create {}: {error}", path.display()));
            }
            if let Err(error) = std::fs::write(path, text) {
                return fail(format!("cannot write {}: {error}", path.display()));
            }
        }
        None => {
            let _ = std::io::stdout().write_all(text.as_bytes());
        }
    }
    ExitCode::SUCCESS
}
