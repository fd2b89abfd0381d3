//! The `run` command's options, typed ([`RunOptions`]), shared by the host corpus and the client
//! corpus (one grammar for every surface), with what every run does the same way once its cases
//! are judged: the exit code ([`exit_code`], a pure function the command line calls) and the
//! output files (`--junit`, `--markdown`, `--json`: [`write_output_files`]).

use crate::model::{SuiteReport, Verdict};
use crate::output::Format;
pub use dsh_engine::surface::{Persona, Surface};
use dsh_engine::timing::{Jobs, TimeScale};
use std::path::PathBuf;

/// Exit codes of `run`.
pub const EXIT_OK: u8 = 0;
pub const EXIT_FAILURES: u8 = 1;
pub const EXIT_HARNESS: u8 = 2;
pub const EXIT_NOTHING_MEASURED: u8 = 3;

/// What `run` was asked, typed (the `dsh-conformance` binary parses its command line into it):
/// the same fields for every surface; a library caller fills it itself, from
/// [`RunOptions::default`] (the defaults of the command line).
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The host driver's (or client's) command line, split like a shell would (none: the
    /// reference host `dsh-host-driver` next to this executable).
    pub host: Option<String>,
    /// More arguments of the host command (alone they build the whole command).
    pub host_args: Vec<String>,
    /// The host's name in reports.
    pub host_name: Option<String>,
    /// The fixtures dir (none: as [`dsh_engine::corpus::choose`] finds it).
    pub fixtures: Option<PathBuf>,
    /// Run the corpus embedded in this binary, whatever the environment says.
    pub embedded_corpus: bool,
    /// `--case` globs.
    pub cases: Vec<String>,
    /// `--section`s.
    pub sections: Vec<String>,
    /// `--skip` globs.
    pub skip: Vec<String>,
    pub shard: Option<dsh_engine::selection::Shard>,
    /// Print the selected cases instead of running them.
    pub list: bool,
    /// Start no new case after the first one that fails the run.
    pub fail_fast: bool,
    pub jobs: Jobs,
    pub time_scale: TimeScale,
    /// Run the selection this many times; differing verdicts are flaky (fail).
    pub verify: usize,
    /// Start the driver afresh for every case, even when it claims `reuse`.
    pub driver_per_case: bool,
    /// The host's expectations file.
    pub expectations: Option<PathBuf>,
    /// Write an expectations file listing the current failures.
    pub write_expectations: Option<PathBuf>,
    /// stdout's format.
    pub format: Format,
    pub color: crate::output::stream::ColorChoice,
    /// Also write JUnit XML here.
    pub junit: Option<PathBuf>,
    /// Also write a Markdown summary here.
    pub markdown: Option<PathBuf>,
    /// Also write the JSON report here.
    pub json: Option<PathBuf>,
    /// Print every case's full transcript.
    pub verbose: bool,
    /// How re-run lines start instead of `dsh-conformance run --host HOST ...`.
    pub rerun_as: Option<String>,
    /// The runtime under test: fake-dsh's binary (none: `$FAKE_DSH_BIN`, else the one next to
    /// this executable).
    pub runtime: Option<PathBuf>,
    /// The runtime variant's name (`dsh-<version>` sets `FAKE_DSH_VERSION=<version>`).
    pub variant: Option<String>,
    /// The dialect the host is judged by (docs/dialects.md): `opendesign` or `multica`.
    pub dialect: String,
    /// Extra env for fake-dsh in this variant, `KEY=VALUE`.
    pub variant_env: Vec<String>,
    /// The caller's variables the driver gets besides the allowlist (`NAME` or `PREFIX*`).
    pub pass_env: Vec<String>,
    /// The surface a run tests.
    pub surface: Surface,
    /// Capabilities the client lacks (the client cases requiring one are skipped).
    pub client_lacks: Vec<String>,
    /// The runtime release fake-dsh plays for a client (`0.2.1`, `0.1.5`, `0.1.1`; none: its
    /// default).
    pub persona: Option<Persona>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            host: None,
            host_args: Vec::new(),
            host_name: None,
            fixtures: None,
            embedded_corpus: false,
            cases: Vec::new(),
            sections: Vec::new(),
            skip: Vec::new(),
            shard: None,
            list: false,
            fail_fast: false,
            jobs: Jobs::default(),
            time_scale: TimeScale::default(),
            verify: 1,
            driver_per_case: false,
            expectations: None,
            write_expectations: None,
            format: Format::Table,
            color: Default::default(),
            junit: None,
            markdown: None,
            json: None,
            verbose: false,
            rerun_as: None,
            runtime: None,
            variant: None,
            dialect: DEFAULT_DIALECT.to_string(),
            variant_env: Vec::new(),
            pass_env: Vec::new(),
            surface: Surface::OpenDesign,
            client_lacks: Vec::new(),
            persona: None,
        }
    }
}

/// The dialect a host is judged by unless told otherwise (docs/dialects.md).
pub const DEFAULT_DIALECT: &str = "opendesign";

/// 1 when the host failed a case; else 2 when the kit failed one; else 3 when nothing was
/// measured (every case skipped); else 0.
pub fn exit_code(report: &SuiteReport) -> u8 {
    if report.cases.iter().any(|case| case.verdict.is_failure()) {
        EXIT_FAILURES
    } else if report
        .cases
        .iter()
        .any(|case| case.verdict == Verdict::Error)
    {
        EXIT_HARNESS
    } else if report
        .cases
        .iter()
        .all(|case| case.verdict == Verdict::Skipped)
    {
        EXIT_NOTHING_MEASURED
    } else {
        EXIT_OK
    }
}

/// Writes the output files a run was asked for (`--junit`, `--markdown`, `--json`), never
/// through a link.
pub fn write_output_files(args: &RunOptions, report: &SuiteReport) -> std::io::Result<()> {
    let write_file = dsh_engine::files::write_rendered;
    if let Some(path) = &args.junit {
        write_file(path, &|out| crate::output::write_junit(report, out))?;
    }
    if let Some(path) = &args.markdown {
        write_file(path, &|out| crate::output::write_markdown(report, out))?;
    }
    if let Some(path) = &args.json {
        write_file(path, &|out| crate::output::write_json(report, out))?;
    }
    Ok(())
}

/// The note a run gives when its runtime is `$FAKE_DSH_BIN` rather than `--runtime` or the
/// fake-dsh beside the executable.
pub fn runtime_from_env_note(args: &RunOptions) -> Option<String> {
    let path = fake_dsh_from_env().filter(|_| args.runtime.is_none())?;
    Some(format!(
        "note: the runtime is $FAKE_DSH_BIN = {}, not the fake-dsh beside this executable",
        path.display()
    ))
}

/// The fake-dsh binary: `--runtime`, else `$FAKE_DSH_BIN` (said out loud: see
/// [`runtime_from_env_note`]), else the one beside this executable.
pub fn fake_dsh_of(args: &RunOptions) -> Result<PathBuf, String> {
    Ok(match (&args.runtime, fake_dsh_from_env()) {
        (Some(path), _) => path.clone(),
        // A runtime change from the environment is said out loud by the corpus
        // ([`runtime_from_env_note`]) and lands in the report's re-run flags, never silent.
        (None, Some(path)) => path,
        _ => dsh_engine::programs::sibling_of_exe("fake-dsh")?,
    })
}

/// `$FAKE_DSH_BIN` when set and not empty.
pub fn fake_dsh_from_env() -> Option<PathBuf> {
    std::env::var_os("FAKE_DSH_BIN")
        .filter(|path| !path.is_empty())
        .map(PathBuf::from)
}
