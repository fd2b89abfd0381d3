//! The option groups several commands share, each defined once and flattened where it applies,
//! and the one help layout: every option sits under one of the [`heading`]s, the same names in
//! every command.
//!
//! - [`Timing`]: `--jobs` ([`Jobs`], at least 1, default the core count) and `--time-scale`
//!   ([`TimeScale`], above 0 and at most 100), both validated as they are parsed.
//! - [`Select`]: `--case`/`--skip`, globs over ids (`dsh_engine::selection`'s grammar).
//! - [`CorpusSource`]: `--fixtures DIR` or `--embedded-corpus`.
//! - [`RuntimeUnderTest`]: `--runtime PATH` (`--fake-dsh` and `--dsh` are its old spellings).
//! - `--surface` ([`surface_parser`]): every surface of [`Surface::ALL`], whatever the command; a
//!   command that cannot do one says so itself (exit 2).
//! - `--format` ([`format_parser`]) and `--color` ([`color_parser`]).

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use dsh_engine::surface::{Persona, Surface};
use dsh_engine::timing::{Jobs, TimeScale};
use dsh_results::output::stream::ColorChoice;
use dsh_results::output::Format;
use std::path::{Path, PathBuf};

/// The help headings, one vocabulary for every command.
pub mod heading {
    /// What is tested: a host driver or client, its name, its expectations.
    pub const HOST: &str = "Host";
    /// The runtime under test and its surface.
    pub const RUNTIME: &str = "Runtime";
    /// Which corpus, which cases or checks.
    pub const SELECTION: &str = "Selection";
    /// Parallelism and time bounds.
    pub const TIMING: &str = "Timing";
    /// stdout and the files written.
    pub const OUTPUT: &str = "Output";
}

/// `--jobs` and `--time-scale`.
#[derive(Debug, Clone, clap::Args)]
pub struct Timing {
    /// Cases (or checks) run in parallel (default: the core count).
    #[arg(long, value_name = "N", help_heading = heading::TIMING)]
    pub jobs: Option<Jobs>,
    /// Multiply every time bound by this factor (slow or busy machines): a finite number above 0,
    /// at most 100. A bound shrinks at most tenfold.
    #[arg(
        long,
        value_name = "FACTOR",
        default_value = "1",
        allow_negative_numbers = true,
        help_heading = heading::TIMING
    )]
    pub time_scale: TimeScale,
}

impl Timing {
    /// `--jobs`, else the core count.
    pub fn jobs(&self) -> Jobs {
        self.jobs.unwrap_or_default()
    }
}

/// `--case` and `--skip`.
#[derive(Debug, Clone, clap::Args)]
pub struct Select {
    /// Select the ids matching this glob (`*`, `?`, `[a-z]`, `{a,b}`; repeatable); a glob that
    /// matches nothing names the ids starting like it.
    #[arg(
        long = "case",
        alias = "check",
        value_name = "PATTERN",
        help_heading = heading::SELECTION
    )]
    pub cases: Vec<String>,
    /// Leave out the ids matching this glob (repeatable).
    #[arg(long = "skip", value_name = "PATTERN", help_heading = heading::SELECTION)]
    pub skip: Vec<String>,
}

/// Where the fixture corpus comes from.
#[derive(Debug, Clone, clap::Args)]
pub struct CorpusSource {
    /// The fixtures dir (default: $DSH_CONFORMANCE_FIXTURES, else the nearest fixtures/ holding
    /// rules.json from the cwd up, else the corpus embedded in this binary).
    #[arg(long, value_name = "DIR", help_heading = heading::SELECTION)]
    pub fixtures: Option<PathBuf>,
    /// Use the corpus embedded in this binary, whatever $DSH_CONFORMANCE_FIXTURES or a fixtures/
    /// dir nearby says (a CI gate's choice: no stray file can swap the corpus).
    #[arg(long, conflicts_with = "fixtures", help_heading = heading::SELECTION)]
    pub embedded_corpus: bool,
}

impl CorpusSource {
    /// The corpus directory these options name (`dsh_engine::corpus::choose`).
    pub fn choose(&self) -> Result<dsh_engine::corpus::CorpusDir, String> {
        dsh_engine::corpus::choose(self.fixtures.as_deref(), self.embedded_corpus)
    }
}

/// `--runtime` and `--persona`: the runtime under test, and the release fake-dsh plays when it is
/// fake-dsh.
#[derive(Debug, Clone, clap::Args)]
pub struct RuntimeUnderTest {
    /// The runtime executable: fake-dsh for `run` (default: $FAKE_DSH_BIN, else the one next to
    /// this executable), the runtime to judge for `check-runtime` (a real dsh, or fake-dsh).
    #[arg(
        long,
        alias = "fake-dsh",
        alias = "dsh",
        value_name = "PATH",
        help_heading = heading::RUNTIME
    )]
    pub runtime: Option<PathBuf>,
    /// The release fake-dsh plays on the SDK, headless and ACP surfaces: `0.2.1` (its default),
    /// `0.1.5`, or on `sdk` `0.1.1` (the `dsh-jsonrpc-agent` binary); fake-dsh's own `--persona`
    /// (`FAKE_DSH_PERSONA`). A real runtime is the release it is and ignores it.
    #[arg(
        long,
        alias = "runtime-persona",
        value_name = "VERSION",
        value_parser = persona_parser(),
        help_heading = heading::RUNTIME
    )]
    pub persona: Option<Persona>,
}

impl RuntimeUnderTest {
    pub fn path(&self) -> Option<&Path> {
        self.runtime.as_deref()
    }
}

/// `--surface`: every surface's name (docs/sdk-surfaces.md), parsed to [`Surface`].
pub fn surface_parser() -> impl TypedValueParser<Value = Surface> {
    PossibleValuesParser::new(Surface::ALL.map(|surface| PossibleValue::new(surface.name())))
        .map(|name| Surface::named(&name).unwrap_or_default())
}

/// `--persona`: the releases fake-dsh plays, parsed to [`Persona`].
pub fn persona_parser() -> impl TypedValueParser<Value = Persona> {
    PossibleValuesParser::new(Persona::ALL.map(|persona| PossibleValue::new(persona.name())))
        .map(|name| Persona::named(&name).unwrap_or(Persona::V021))
}

/// `--format`: `table` (`text` is the same), `json`, `jsonl`.
pub fn format_parser() -> impl TypedValueParser<Value = Format> {
    PossibleValuesParser::new([
        PossibleValue::new("table").alias("text"),
        PossibleValue::new("json"),
        PossibleValue::new("jsonl"),
    ])
    .map(|name| match name.as_str() {
        "json" => Format::Json,
        "jsonl" => Format::Jsonl,
        _ => Format::Table,
    })
}

/// `--color`: `auto`, `always`, `never`.
pub fn color_parser() -> impl TypedValueParser<Value = ColorChoice> {
    PossibleValuesParser::new(["auto", "always", "never"]).map(|name| match name.as_str() {
        "always" => ColorChoice::Always,
        "never" => ColorChoice::Never,
        _ => ColorChoice::Auto,
    })
}

/// The usage error of a command that cannot do `surface`: said on stderr, exit 2.
pub fn unsupported_surface(
    command: &str,
    surface: Surface,
    supported: &[Surface],
) -> std::process::ExitCode {
    eprintln!(
        "dsh-conformance {command}: {}",
        surface.unsupported(command, supported)
    );
    std::process::ExitCode::from(2)
}

#[cfg(test)]
mod tests {
    use super::super::{Cli, Command};
    use super::heading;
    use clap::{CommandFactory, Parser};
    use dsh_engine::surface::Surface;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("dsh-conformance").chain(args.iter().copied()))
    }

    /// The commands taking the timing group, each with what else it needs to parse.
    const TIMED: [&[&str]; 3] = [
        &["run"],
        &["report"],
        &["check-runtime", "--runtime", "dsh"],
    ];

    #[test]
    fn jobs_0_is_one_usage_error_in_every_command() {
        for command in TIMED {
            let args = [command, &["--jobs", "0"]].concat();
            let error = parse(&args).err().expect("--jobs 0 is refused");
            assert_eq!(error.kind(), clap::error::ErrorKind::ValueValidation);
            assert_eq!(error.exit_code(), 2);
            let text = error.to_string();
            assert!(
                text.contains("--jobs must be a whole number of at least 1, got 0"),
                "{command:?}: {text}"
            );
        }
    }

    #[test]
    fn time_scale_0_is_one_usage_error_in_every_command() {
        for command in TIMED {
            for bad in ["0", "-1", "inf", "101"] {
                let args = [command, &["--time-scale", bad]].concat();
                let error = parse(&args).err().expect("refused");
                assert_eq!(error.exit_code(), 2);
                assert!(
                    error.to_string().contains("above 0 and at most 100"),
                    "{command:?} {bad}: {error}"
                );
            }
        }
    }

    #[test]
    fn every_surface_is_accepted_by_every_command_taking_one() {
        for surface in Surface::ALL {
            let name = surface.name();
            let run = parse(&["run", "--surface", name]).expect(name);
            let Command::Run(run) = run.command else {
                panic!("run")
            };
            assert_eq!(run.surface, surface);
            let check = parse(&["check-runtime", "--runtime", "dsh", "--surface", name]);
            let Command::CheckRuntime(check) = check.expect(name).command else {
                panic!("check-runtime")
            };
            assert_eq!(check.surface, Some(surface));
            let record = parse(&["record", "--out", "d", "--surface", name, "--", "dsh"]);
            let Command::Record(record) = record.expect(name).command else {
                panic!("record")
            };
            assert_eq!(record.surface, Some(surface));
        }
        assert!(parse(&["run", "--surface", "acp-nope"]).is_err());
    }

    #[test]
    fn the_old_spellings_are_hidden_aliases_of_the_new_ones() {
        let Command::Run(run) = parse(&[
            "run",
            "--fake-dsh",
            "/f",
            "--runtime-persona",
            "0.1.5",
            "--check",
            "a.*",
        ])
        .unwrap()
        .command
        else {
            panic!("run")
        };
        assert_eq!(
            run.runtime.runtime.as_deref(),
            Some(std::path::Path::new("/f"))
        );
        assert_eq!(
            run.runtime.persona,
            Some(dsh_engine::surface::Persona::V015)
        );
        assert_eq!(run.select.cases, ["a.*"]);
        let Command::CheckRuntime(check) = parse(&["check-runtime", "--dsh", "/d", "--check", "x"])
            .unwrap()
            .command
        else {
            panic!("check-runtime")
        };
        assert_eq!(
            check.runtime.runtime.as_deref(),
            Some(std::path::Path::new("/d"))
        );
        assert_eq!(check.select.cases, ["x"]);
        let help = Cli::command()
            .find_subcommand_mut("run")
            .unwrap()
            .render_long_help()
            .to_string();
        for old in ["--fake-dsh", "--runtime-persona", "--check"] {
            assert!(!help.contains(old), "{old} is hidden: {help}");
        }
    }

    #[test]
    fn every_option_of_every_command_sits_under_one_of_the_shared_headings() {
        let headings = [
            heading::HOST,
            heading::RUNTIME,
            heading::SELECTION,
            heading::TIMING,
            heading::OUTPUT,
        ];
        let mut cli = Cli::command();
        cli.build();
        for command in cli.get_subcommands() {
            for arg in command.get_arguments() {
                if arg.is_positional()
                    || arg.is_hide_set()
                    || ["help", "version"].contains(&arg.get_id().as_str())
                    || arg.get_long().is_none()
                    || command.get_name().contains("supervise")
                {
                    continue;
                }
                let heading = arg.get_help_heading();
                assert!(
                    heading.is_some_and(|heading| headings.contains(&heading)),
                    "{} --{}: heading {heading:?}",
                    command.get_name(),
                    arg.get_long().unwrap_or_default()
                );
            }
        }
    }
}
