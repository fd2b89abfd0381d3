//! The command line, parsed like a real CLI (clap): what this invocation was asked to do.
//!
//! It follows the real `@deepseek-ai/dsh` 0.1.0-rc.8 where that one is observable (see
//! docs/fake-dsh.md, "Fidelity"): every usage error exits 1 on stderr, `--version` wins over
//! anything else on the line, a missing `--profile` says `--profile <name> is required`,
//! `--list-models` is an unknown option, and `plugin --help` is an error.

use crate::journal::Mode;
use crate::profile::Profile;
use clap::{Args, Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;

/// The environment variables fake-dsh reads, for `--help` (docs/fake-dsh.md has the details).
const ENV_HELP: &str = "The other surfaces (each its own command line, as the real runtime's):
  --profile sdk | sdk-minimal  the SDK's JSON-RPC runtime (docs/surface-sdk.md)
  --profile headless TASK      one task, the final text on stdout (docs/surface-headless.md)
  --profile acp, acp (0.2.1)   an Agent Client Protocol v1 agent (docs/surface-acp.md)
  --persona 0.2.1|0.1.5|0.1.1  the release they imitate (0.1.1: `dsh-jsonrpc-agent`)

Environment:
  DSH_HOME                 the Harness home (profile, sessions); default $HOME/.dsh
  FAKE_DSH_SCENARIO        a case file or scenario to replay instead of the default agent
  FAKE_DSH_JOURNAL         append a journal of what the host did to this file
  FAKE_DSH_VERSION         the version `--version` reports
  FAKE_DSH_PERSONA         the SDK/headless/ACP release to imitate: 0.2.1 (default), 0.1.5, 0.1.1
  FAKE_DSH_IDENTITY_PATCH  JSON merged into the probe and ready frames
  FAKE_DSH_WATCHDOG_SECS   exit after this many seconds whatever happens
  MULTICA_DSH_SESSION_ROOT the multica profile's session store (instead of $DSH_HOME/sessions)";

#[derive(Debug, Parser)]
#[command(
    name = "dsh",
    about = "DeepSeek Harness (fake-dsh: a keyless stand-in for dsh: the open-design and multica profiles' stdio protocol below, the SDK, headless and ACP surfaces after it)",
    disable_version_flag = true,
    args_conflicts_with_subcommands = true,
    after_help = ENV_HELP
)]
struct Cli {
    /// Print the Harness version.
    #[arg(short = 'V', long)]
    version: bool,
    /// The profile to run.
    #[arg(long, value_name = "NAME")]
    profile: Option<String>,
    /// Print the profile's probe frame.
    #[arg(long, requires = "profile", group = "surface")]
    probe: bool,
    /// Speak the profile's stdio protocol.
    #[arg(long, requires = "profile", group = "surface")]
    stdio: bool,
    /// Print the profile's models frame (the open-design profile).
    #[arg(long, requires = "profile", group = "surface")]
    models: bool,
    /// Print the profile's models frame (the multica profile).
    #[arg(long, requires = "profile", group = "surface")]
    list_models: bool,
    #[command(subcommand)]
    command: Option<Sub>,
}

#[derive(Debug, Subcommand)]
enum Sub {
    /// Manage profile plugins.
    Plugin(PluginArgs),
    #[command(name = "__child", hide = true)]
    Child {
        #[arg(long)]
        ignore_sigterm: bool,
        /// A detached daemon: this watchdog (its environment may be empty) and no readiness byte.
        #[arg(long, value_name = "MS")]
        daemon_watchdog_ms: Option<u64>,
    },
}

/// Like the real dsh, `plugin` has no help of its own: `plugin --help` is a usage error.
#[derive(Debug, Args)]
#[command(disable_help_flag = true, disable_help_subcommand = true)]
struct PluginArgs {
    /// The profile to change.
    #[arg(long, value_name = "NAME")]
    profile: String,
    #[command(subcommand)]
    action: PluginAction,
}

#[derive(Debug, Subcommand)]
enum PluginAction {
    /// Install a profile bundle from a packed tarball.
    Add { tarball: PathBuf },
}

/// What this invocation does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invocation {
    Version,
    Probe(Profile),
    Models(Profile),
    Stdio(Profile),
    PluginAdd {
        profile: Profile,
        tarball: PathBuf,
    },
    Child {
        ignore_sigterm: bool,
        /// Set for a detached daemon (see `process::spawn_daemon`): its own watchdog limit.
        daemon_watchdog_ms: Option<u64>,
    },
    /// Print this text to stdout and exit 0 (`--help`).
    Help(String),
    /// Print this text to stderr and exit 1 (the real dsh's status for every usage error).
    Usage(String),
    /// The profile asked for does not exist (fake-dsh can hold only the profiles of
    /// [`Profile::ALL`]): stderr, exit 1.
    NoSuchProfile(String),
}

/// The real dsh's message for a profile that does not exist in the Harness home.
pub fn no_such_profile(name: &str) -> String {
    format!(
        "Error: dsh: profile {} does not exist; create it with 'dsh plugin --profile {name} add \
         <package>'",
        serde_json::Value::from(name)
    )
}

impl Invocation {
    /// The journal mode of this invocation.
    pub fn mode(&self) -> Mode {
        match self {
            Invocation::Version => Mode::Version,
            Invocation::Probe(_) => Mode::Probe,
            Invocation::Models(_) => Mode::Models,
            Invocation::Stdio(_) => Mode::Stdio,
            Invocation::PluginAdd { .. } => Mode::Plugin,
            Invocation::Child { .. } => Mode::Child,
            Invocation::Help(_) | Invocation::Usage(_) | Invocation::NoSuchProfile(_) => {
                Mode::Error
            }
        }
    }
}

/// `--version`/`-V` before any subcommand: the real dsh answers it whatever else is on the line.
fn asks_version(args: &[OsString]) -> bool {
    args.iter()
        .skip(1)
        .take_while(|arg| *arg != "plugin" && *arg != "__child" && *arg != "--")
        .any(|arg| arg == "--version" || arg == "-V")
}

/// Parses an argument vector (`argv[0]` included; its value does not matter).
pub fn parse<I, T>(args: I) -> Invocation
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    if asks_version(&args) {
        return Invocation::Version;
    }
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(error) => {
            let text = error.render().to_string();
            return if error.use_stderr() {
                Invocation::Usage(text.trim_end().to_string())
            } else {
                Invocation::Help(text)
            };
        }
    };
    if let Some(command) = cli.command {
        return match command {
            Sub::Child {
                ignore_sigterm,
                daemon_watchdog_ms,
            } => Invocation::Child {
                ignore_sigterm,
                daemon_watchdog_ms,
            },
            Sub::Plugin(plugin) => match Profile::from_name(&plugin.profile) {
                None => Invocation::Usage(format!(
                    "error: fake-dsh installs only the {} profiles, not {:?}",
                    known_profiles(),
                    plugin.profile
                )),
                Some(profile) => match plugin.action {
                    PluginAction::Add { tarball } => Invocation::PluginAdd { profile, tarball },
                },
            },
        };
    }
    if cli.version {
        return Invocation::Version;
    }
    let Some(name) = cli.profile else {
        return Invocation::Usage("error: --profile <name> is required".to_string());
    };
    // Each profile has its own models flag (`Identity::models_flag`); the other one is an unknown
    // option there, as `--list-models` is for the real dsh (docs/fake-dsh.md, "Fidelity").
    let flag = Profile::from_name(&name).map(|profile| profile.identity().models_flag);
    for (given, spelled) in [(cli.models, "--models"), (cli.list_models, "--list-models")] {
        if given && flag != Some(spelled) {
            return Invocation::Usage(format!("error: unknown option '{spelled}'"));
        }
    }
    let Some(profile) = Profile::from_name(&name) else {
        return Invocation::NoSuchProfile(name);
    };
    let models = cli.models || cli.list_models;
    if cli.probe {
        Invocation::Probe(profile)
    } else if cli.stdio {
        Invocation::Stdio(profile)
    } else if models {
        Invocation::Models(profile)
    } else {
        Invocation::Usage(format!(
            "error: a profile mode needs exactly one of {}, --probe, --stdio",
            profile.identity().models_flag
        ))
    }
}

/// The names of the installable profiles, for messages.
fn known_profiles() -> String {
    Profile::ALL.map(Profile::name).join(" and ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(args: &[&str]) -> Invocation {
        parse(std::iter::once("dsh").chain(args.iter().copied()))
    }

    #[test]
    fn each_surface_parses() {
        assert_eq!(parsed(&["--version"]), Invocation::Version);
        assert_eq!(parsed(&["-V"]), Invocation::Version);
        assert_eq!(
            parsed(&["--profile", "open-design", "--probe"]),
            Invocation::Probe(Profile::OpenDesign)
        );
        assert_eq!(
            parsed(&["--probe", "--profile=open-design"]),
            Invocation::Probe(Profile::OpenDesign)
        );
        assert_eq!(
            parsed(&["--profile", "open-design", "--stdio"]),
            Invocation::Stdio(Profile::OpenDesign)
        );
        assert_eq!(
            parsed(&["--profile", "open-design", "--models"]),
            Invocation::Models(Profile::OpenDesign)
        );
        assert_eq!(
            parsed(&["--profile", "multica", "--probe"]),
            Invocation::Probe(Profile::Multica)
        );
        assert_eq!(
            parsed(&["--profile", "multica", "--stdio"]),
            Invocation::Stdio(Profile::Multica)
        );
        assert_eq!(
            parsed(&["--profile", "multica", "--list-models"]),
            Invocation::Models(Profile::Multica)
        );
        assert_eq!(
            parsed(&["plugin", "--profile", "multica", "add", "/m.tgz"]),
            Invocation::PluginAdd {
                profile: Profile::Multica,
                tarball: "/m.tgz".into()
            }
        );
        assert_eq!(parsed(&["--version", "--bogus"]), Invocation::Version);
        assert_eq!(
            parsed(&["plugin", "--profile", "open-design", "add", "/x.tgz"]),
            Invocation::PluginAdd {
                profile: Profile::OpenDesign,
                tarball: "/x.tgz".into()
            }
        );
        assert_eq!(
            parsed(&["__child", "--ignore-sigterm"]),
            Invocation::Child {
                ignore_sigterm: true,
                daemon_watchdog_ms: None
            }
        );
        assert_eq!(
            parsed(&["__child", "--daemon-watchdog-ms", "2500"]),
            Invocation::Child {
                ignore_sigterm: false,
                daemon_watchdog_ms: Some(2500)
            }
        );
        assert!(matches!(parsed(&["--help"]), Invocation::Help(_)));
    }

    #[test]
    fn bad_usage_is_an_error() {
        for args in [
            &["--profile", "open-design", "--probe", "--stdio"][..],
            &["--profile", "open-design", "--list-models"],
            &["plugin"],
            &["plugin", "--help"],
            &["plugin", "--profile", "open-design"],
            &["--probe"],
            &["--profile", "open-design"],
            &["--frobnicate"],
            &[],
            &["plugin", "--profile", "other", "add", "/x.tgz"],
            &["plugin", "--profile", "open-design", "add"],
            &["--profile", "multica", "--models"],
            &["--profile", "multica"],
            &["--profile", "web", "--list-models"],
        ] {
            assert!(
                matches!(parsed(args), Invocation::Usage(_)),
                "{args:?} -> {:?}",
                parsed(args)
            );
        }
        assert_eq!(
            parsed(&["--profile", "web", "--stdio"]),
            Invocation::NoSuchProfile("web".into())
        );
        assert_eq!(
            no_such_profile("multica"),
            "Error: dsh: profile \"multica\" does not exist; create it with 'dsh plugin \
             --profile multica add <package>'"
        );
    }
}
