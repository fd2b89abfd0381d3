//! The entry point: parse the command line, journal the start, arm the watchdog, load the
//! scenario, and run the surface asked for. `--stdio` arms its signal thread and watchdog only
//! once it has written `ready` (or is about to play a script), so they cost the first frame
//! nothing.

use crate::cli::{self, Invocation};
use crate::frames;
use crate::home;
use crate::journal::{self, ExitReason, Journal, Mode};
use crate::output::{self, Stdout};
use crate::process::{self, finish};
use crate::profile::Profile;
use crate::scenario::{self, FrameAnswer, RawAnswer, Scenario, VersionAnswer};
use crate::sessions;
use crate::stdio::{self, Context};
use serde_json::Value;

/// The version `--version` reports by default.
pub const DEFAULT_VERSION: &str = "0.1.7-rc.1";
/// The environment variable that overrides the reported version (over the scenario too).
pub const VERSION_ENV: &str = "FAKE_DSH_VERSION";

/// Runs fake-dsh with this process's arguments; never returns.
pub fn main() -> ! {
    process::restore_file_size_limit();
    process::block_signals();
    let journal_path = std::env::var_os(journal::JOURNAL_ENV)
        .filter(|value| !value.is_empty())
        .map(std::path::PathBuf::from);
    let journal = journal::install(Journal::open(journal_path));
    if let Some(surface) = crate::acp::select(&std::env::args_os().collect::<Vec<_>>()) {
        crate::acp::run(surface);
    }
    if let Some(surface) = crate::sdk::select(&std::env::args_os().collect::<Vec<_>>()) {
        crate::sdk::run(surface);
    }
    let invocation = cli::parse(std::env::args_os());
    if let Invocation::Child {
        ignore_sigterm,
        daemon_watchdog_ms,
    } = invocation
    {
        process::run_child(ignore_sigterm, daemon_watchdog_ms);
    }
    let mode = invocation.mode();
    let journaled_index = if mode == Mode::Stdio {
        journal::record_stdio_start(journal, |index| process::start_event(Mode::Stdio, index))
    } else {
        journal.record(process::start_event(mode, None));
        None
    };
    if mode != Mode::Stdio {
        process::start_background();
    }

    match &invocation {
        Invocation::Help(text) => {
            Stdout::new().write_bytes(text.as_bytes());
            finish(0, ExitReason::ScriptEnd);
        }
        Invocation::Usage(message) => usage_error(message),
        Invocation::NoSuchProfile(name) => usage_error(&cli::no_such_profile(name)),
        _ => {}
    }
    let scenario = scenario::load_from_env().unwrap_or_else(|message| fail(&message));
    if let Err(message) = frames::identity_patch() {
        fail(&message);
    }
    match invocation {
        Invocation::Version => version(&scenario),
        Invocation::Probe(profile) => {
            require_profile(profile);
            frame_surface(profile, frames::probe(profile), scenario.probe.as_ref())
        }
        Invocation::Models(profile) => {
            require_profile(profile);
            frame_surface(profile, frames::models(profile), scenario.models.as_ref())
        }
        Invocation::PluginAdd { profile, tarball } => plugin_add(profile, &tarball),
        Invocation::Stdio(profile) => stdio_surface(profile, &scenario, journaled_index),
        Invocation::Child { .. }
        | Invocation::Help(_)
        | Invocation::Usage(_)
        | Invocation::NoSuchProfile(_) => unreachable!("handled above"),
    }
}

/// `plugin --profile <name> add <tarball>`: installs the profile's bundle into the Harness home.
fn plugin_add(profile: Profile, tarball: &std::path::Path) -> ! {
    let dsh_home = home::dsh_home().unwrap_or_else(|message| fail(&message));
    if tarball.is_file() {
        home::claim(&dsh_home).unwrap_or_else(|message| fail(&message));
        home::check_manifest_replaceable(&dsh_home, profile)
            .unwrap_or_else(|message| fail(&message));
    }
    match home::install_profile(&dsh_home, profile, tarball, frames::PLUGIN_VERSION) {
        Ok(_) => {
            let line = format!(
                "Installed {}@{} into profile {}\n",
                profile.identity().bundle_package,
                frames::PLUGIN_VERSION,
                profile.name()
            );
            Stdout::new().write_bytes(line.as_bytes());
            finish(0, ExitReason::ScriptEnd)
        }
        Err(message) => plugin_add_failed(profile, &dsh_home, &message),
    }
}

/// `--stdio`: the scenario's script for this invocation (counted in the journal, else in the
/// Harness home when the scenario scripts stdio), or the default agent. Sessions live in
/// `$DSH_HOME/sessions`, or in the profile's session root when one is set (multica).
fn stdio_surface(profile: Profile, scenario: &Scenario, journaled_index: Option<u64>) -> ! {
    let dsh_home = require_profile(profile);
    home::claim(&dsh_home).unwrap_or_else(|message| fail(&message));
    let session_dir = match profile.session_root() {
        Ok(Some(root)) => {
            sessions::claim_session_root(&root).unwrap_or_else(|message| fail(&message));
            root
        }
        Ok(None) => sessions::home_session_dir(&dsh_home),
        Err(message) => fail(&message),
    };
    let index = match journaled_index {
        Some(index) => Some(index),
        None if !scenario.stdio.is_empty() => home::next_stdio_invocation(&dsh_home).ok(),
        None => None,
    };
    let context = Context::new(profile, dsh_home, session_dir, scenario.agent.clone());
    match scenario.script(index) {
        Some(script) => stdio::run_script(context, script),
        None => stdio::run_default_agent(context),
    }
}

/// The real dsh's exit status when pnpm cannot add the package (`plugin add /missing.tgz`).
pub const PLUGIN_ADD_FAILED: i32 = 254;

/// Prints a usage error to stderr and exits 1, as the real dsh does for every usage error.
fn usage_error(message: &str) -> ! {
    output::stderr_bytes(format!("{message}\n").as_bytes());
    finish(1, ExitReason::Error)
}

/// A failed `plugin add`, shaped like the real one: pnpm's complaint on stdout, dsh's own line on
/// stderr, pnpm's exit status. Unlike the real dsh it leaves no half-made profile behind.
fn plugin_add_failed(profile: Profile, dsh_home: &std::path::Path, message: &str) -> ! {
    let profile_dir = dsh_home.join("profiles").join(profile.name());
    Stdout::new().write_bytes(format!(" ERR_PNPM_ADD  {message}\n").as_bytes());
    output::stderr_bytes(
        format!(
            "dsh: pnpm failed in profile directory {}\n",
            profile_dir.display()
        )
        .as_bytes(),
    );
    finish(PLUGIN_ADD_FAILED, ExitReason::Error)
}

/// Prints an error about fake-dsh's own setup (scenario, identity patch, home) to stderr and exits
/// 2: fake-dsh could not run. The real dsh has no such inputs.
fn fail(message: &str) -> ! {
    output::stderr_bytes(format!("{message}\n").as_bytes());
    finish(2, ExitReason::Error)
}

/// The Harness home, or the real dsh's "does not exist" error (exit 1) when the profile is not
/// installed there (one line: the real dsh prints it under a stack trace).
fn require_profile(profile: Profile) -> std::path::PathBuf {
    let dsh_home = home::dsh_home().unwrap_or_else(|message| fail(&message));
    if !home::profile_installed(&dsh_home, profile) {
        usage_error(&cli::no_such_profile(profile.name()));
    }
    dsh_home
}

/// A raw answer: its stdout with the profile's placeholders filled (`{{runtime_id}}`,
/// `{{profile}}`; none for `--version`, which has no profile), its stderr, its exit status.
fn raw_answer(profile: Option<Profile>, raw: &RawAnswer) -> ! {
    if let Some(stdout) = &raw.stdout {
        let stdout = match profile {
            Some(profile) => profile.fill(stdout),
            None => stdout.clone(),
        };
        Stdout::new().write_bytes(stdout.as_bytes());
        journal::record(journal::Event::frame("raw"));
    }
    if let Some(stderr) = &raw.stderr {
        output::stderr_bytes(stderr.as_bytes());
    }
    finish(raw.exit.unwrap_or(0), ExitReason::ScriptEnd)
}

fn version(scenario: &Scenario) -> ! {
    let from_env = std::env::var(VERSION_ENV).ok();
    let text = match (from_env, &scenario.version) {
        (Some(version), _) => version,
        (None, Some(VersionAnswer::Raw(raw))) => raw_answer(None, raw),
        (None, Some(VersionAnswer::Text(version))) => version.clone(),
        (None, None) => DEFAULT_VERSION.to_string(),
    };
    Stdout::new().write_bytes(format!("{text}\n").as_bytes());
    finish(0, ExitReason::ScriptEnd)
}

fn frame_surface(profile: Profile, mut frame: Value, answer: Option<&FrameAnswer>) -> ! {
    match answer {
        Some(FrameAnswer::Raw(raw)) => raw_answer(Some(profile), raw),
        Some(FrameAnswer::Patch(patch)) => {
            frames::merge_patch(&mut frame, &patch.patch);
            if profile == Profile::Multica {
                frames::gen1_items_as_multica(&mut frame);
            }
            if let Some(bytes) = patch.pad_to_bytes {
                frames::pad_to(&mut frame, bytes);
            }
            if let Some(delay) = patch.delay_ms {
                std::thread::sleep(std::time::Duration::from_millis(delay));
            }
            if let Some(stderr) = &patch.stderr {
                output::stderr_bytes(stderr.as_bytes());
            }
        }
        None => {}
    }
    Stdout::new().write_frame(&frame);
    finish(0, ExitReason::ScriptEnd)
}
