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
use dsh_engine::surface::Surface;
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

/// `--runtime`: the runtime under test.
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
