//! `dsh-conformance run`: the fixture corpus against one host driver, with rule-traced verdicts.
//!
//! - [`suite`]: the library API ([`run_suite`], [`Suite`] for one case at a time).
//! - `case`: one case: world, driver, steps, expectations, global checks.
//! - `world`, `driver`, `journal`, `transcript`: the temp world, the driver client, fake-dsh's
//!   journal and the process table, the bounded transcript.
//! - `leftovers`: the per-case token sweep that kills processes a driver left behind.
//! - [`verdict`]: findings -> verdict; [`expectations`]: the xfail file; [`selection`]: which cases.
//!
//! This module holds the CLI: flags, exit codes, output.

pub use crate::fixture;

mod case;
mod driver;
pub mod expectations;
mod journal;
mod leftovers;
pub mod procfs;
pub mod selection;
pub mod suite;
mod transcript;
pub mod verdict;
mod world;

pub use case::needed_capabilities;
pub use expectations::Expectations;
pub use selection::{CaseEntry, Selection};
pub use suite::{resolve_program, run_suite, HarnessError, Suite, SuiteConfig, Variant};

pub use crate::output::Format;

use crate::model::{SuiteReport, Verdict};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Exit codes of `run`.
pub const EXIT_OK: u8 = 0;
pub const EXIT_FAILURES: u8 = 1;
pub const EXIT_HARNESS: u8 = 2;
pub const EXIT_NOTHING_MEASURED: u8 = 3;

/// The `run` flags, boxed so the CLI's subcommand enum stays small.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub flags: Box<Flags>,
}

#[derive(Debug, clap::Args)]
pub struct Flags {
    /// The host driver's command line, split like a shell would (default: dsh-host-driver next to
    /// this executable).
    #[arg(long)]
    pub host: Option<String>,
    /// One more argument of the host command (repeatable; alone it builds the whole command).
    #[arg(long = "host-arg", allow_hyphen_values = true)]
    pub host_args: Vec<String>,
    /// The host's name in reports.
    #[arg(long)]
    pub host_name: Option<String>,
    /// The fixtures dir (default: $DSH_CONFORMANCE_FIXTURES, else the nearest fixtures/ holding
    /// rules.json from the cwd up, else the corpus embedded in this binary).
    #[arg(long)]
    pub fixtures: Option<PathBuf>,
    /// Select cases whose id matches this glob (`*`, `?`; repeatable).
    #[arg(long = "case")]
    pub cases: Vec<String>,
    /// Select cases exercising this spec section (repeatable).
    #[arg(long = "section")]
    pub sections: Vec<String>,
    /// Print the selected cases and exit.
    #[arg(long)]
    pub list: bool,
    /// Cases run in parallel (default: the core count).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Multiply every timeout by this factor (slow CI machines).
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,
    /// Run the selection N times; cases whose verdicts differ are reported flaky (fail).
    #[arg(long, default_value_t = 1)]
    pub verify: usize,
    /// The host's expectations file: {"v":1,"xfail":{"case.id":"reason"}}.
    #[arg(long)]
    pub expectations: Option<PathBuf>,
    /// Write an expectations file listing the current failures.
    #[arg(long)]
    pub write_expectations: Option<PathBuf>,
    /// stdout format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Also write JUnit XML here.
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// Also write a Markdown summary here.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// Also write the JSON report here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Print every case's full transcript (driver messages in and out, the journal).
    #[arg(long)]
    pub verbose: bool,
    /// The fake-dsh binary (default: $FAKE_DSH_BIN, else next to this executable).
    #[arg(long)]
    pub fake_dsh: Option<PathBuf>,
    /// The runtime variant's name (`dsh-<version>` sets FAKE_DSH_VERSION=<version>).
    #[arg(long)]
    pub variant: Option<String>,
    /// Extra env for fake-dsh in this variant, KEY=VALUE (repeatable).
    #[arg(long = "variant-env")]
    pub variant_env: Vec<String>,
}

pub fn main(args: Args) -> ExitCode {
    match run_cli(&args) {
        Ok(code) => ExitCode::from(code),
        Err(message) => {
            eprintln!("dsh-conformance run: {message}");
            ExitCode::from(EXIT_HARNESS)
        }
    }
}

fn run_cli(args: &Args) -> Result<u8, String> {
    let args: &Flags = &args.flags;
    let corpus = crate::corpus::locate(args.fixtures.as_deref())?;
    corpus.announce("run");
    let config = config_from_args(args, corpus.path().to_path_buf())?;
    let suite = Suite::prepare(&config).map_err(|e| e.to_string())?;
    let mut stdout = std::io::stdout().lock();
    if args.list {
        for entry in suite.entries() {
            writeln!(stdout, "{}\t{}", entry.id, entry.summary()).map_err(|e| e.to_string())?;
        }
        return Ok(if suite.entries().is_empty() {
            EXIT_NOTHING_MEASURED
        } else {
            EXIT_OK
        });
    }
    if suite.entries().is_empty() {
        eprintln!("dsh-conformance run: no case selected (check --case / --section)");
        return Ok(EXIT_NOTHING_MEASURED);
    }
    if let Some(expectations) = &config.expectations {
        for id in expectations
            .xfail
            .keys()
            .filter(|id| !suite.entries().iter().any(|entry| &entry.id == *id))
        {
            eprintln!("dsh-conformance run: warning: the expectations file lists {id}, which is not selected or does not exist");
        }
    }
    let report = suite.run();
    if let Some(path) = &args.write_expectations {
        Expectations::from_failures(&report).write(path)?;
    }
    write_outputs(args, &report, &mut stdout)
        .map_err(|e| format!("cannot write the report: {e}"))?;
    Ok(exit_code(&report))
}

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

fn write_outputs(
    args: &Flags,
    report: &SuiteReport,
    stdout: &mut dyn Write,
) -> std::io::Result<()> {
    match args.format {
        Format::Table => {
            crate::output::write_table(report, &crate::output::TableOptions::default(), stdout)?
        }
        Format::Json => crate::output::write_json(report, stdout)?,
    }
    if args.verbose && args.format == Format::Table {
        for case in &report.cases {
            writeln!(stdout, "\n--- {} ({}) ---", case.id, case.verdict.as_str())?;
            for line in &case.transcript {
                writeln!(stdout, "{}", crate::output::escape::terminal(line))?;
            }
        }
    }
    let write_file = |path: &Path,
                      render: &dyn Fn(&mut dyn Write) -> std::io::Result<()>|
     -> std::io::Result<()> {
        let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
        render(&mut file)?;
        file.flush()
    };
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

fn config_from_args(args: &Flags, fixtures: PathBuf) -> Result<SuiteConfig, String> {
    let mut host = match &args.host {
        Some(command) => split_command(command)?,
        None if !args.host_args.is_empty() => Vec::new(),
        None => vec![sibling_of_exe("dsh-host-driver")?.display().to_string()],
    };
    host.extend(args.host_args.iter().cloned());
    if host.is_empty() {
        return Err("--host is empty".to_string());
    }
    let fake_dsh = match (&args.fake_dsh, std::env::var_os("FAKE_DSH_BIN")) {
        (Some(path), _) => path.clone(),
        (None, Some(path)) if !path.is_empty() => PathBuf::from(path),
        _ => sibling_of_exe("fake-dsh")?,
    };
    let mut variant = args
        .variant
        .as_deref()
        .map(Variant::named)
        .unwrap_or_default();
    for pair in &args.variant_env {
        let (key, value) = pair
            .split_once('=')
            .filter(|(key, _)| !key.is_empty())
            .ok_or_else(|| format!("--variant-env {pair:?} is not KEY=VALUE"))?;
        variant.env.insert(key.to_string(), value.to_string());
    }
    let expectations = args
        .expectations
        .as_deref()
        .map(Expectations::load)
        .transpose()?;
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    Ok(SuiteConfig {
        host,
        host_name: args.host_name.clone(),
        fixtures,
        selection: Selection {
            case_globs: args.cases.clone(),
            sections: args.sections.clone(),
        },
        jobs,
        time_scale: args.time_scale,
        fake_dsh,
        variant,
        expectations,
        verify: args.verify,
    })
}

fn sibling_of_exe(name: &str) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate this executable: {e}"))?;
    let dir = exe
        .parent()
        .ok_or_else(|| "cannot locate this executable's directory".to_string())?;
    Ok(dir.join(name))
}

/// Splits a command line like a POSIX shell would for words: whitespace separates, single quotes
/// are literal, double quotes allow `\"` `\\` `\$` `` \` ``, a backslash outside quotes escapes
/// the next character. No expansion of any kind.
pub fn split_command(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => {
                            return Err(format!("unterminated single quote in --host {line:?}"))
                        }
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => {
                                return Err(format!("unterminated double quote in --host {line:?}"))
                            }
                        },
                        Some(c) => word.push(c),
                        None => {
                            return Err(format!("unterminated double quote in --host {line:?}"))
                        }
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(c) => word.push(c),
                    None => return Err(format!("trailing backslash in --host {line:?}")),
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_like_a_shell() {
        let split = |line: &str| split_command(line).expect("splits");
        assert_eq!(split("node  host.js --flag"), ["node", "host.js", "--flag"]);
        assert_eq!(
            split("'/a b/driver' \"x \\\"y\\\"\" c\\ d ''"),
            ["/a b/driver", "x \"y\"", "c d", ""]
        );
        assert_eq!(split("a'b'\"c\""), ["abc"]);
        assert!(split_command("'open").is_err());
        assert!(split_command("\"open").is_err());
        assert!(split_command("x\\").is_err());
        assert!(split("   ").is_empty());
    }
}
