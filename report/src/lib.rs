//! `report` (every host x runtime variant over the corpus, and every client of the SDK, headless
//! and ACP surfaces x the runtime personas it is tried on over the client corpus, written as
//! report.json, report.html and report.md) and `diff` (two reports compared by case id; exit 1 on
//! a regression).
//!
//! - [`config`]: the hosts, variants and clients of the matrix, and the defaults.
//! - [`document`]: `report.json`, its schema, loading it back; the JSON file readers whose errors
//!   name the file.
//! - [`coverage`]: the rule catalog and which cases cover each rule.
//! - [`html`] (with [`html_matrix`]), [`markdown`]: the page and the pull-request comment.
//! - [`diff`]: comparing two reports.
//! - [`stable`]: what makes report.json the same file for two runs of the same code.
//! - [`tools`]: `summary` (a quick look at a stored report) and `merge` (shards into one).
//!
//! The command line (`dsh-conformance report|diff|summary|merge`) is the binary's; its exit codes
//! come from [`exit_code_of`] and mirror `run`: 0 written and nothing failed, 1 written and some
//! cell has a case that fails a run, 2 something could not run (bad config, unwritable output, a
//! cell the harness could not complete; whatever could be written still is), 3 no cell measured
//! any case.

pub mod config;
pub mod coverage;
pub mod diff;
pub mod document;
pub mod html;
pub mod html_matrix;
pub mod markdown;
pub mod stable;
pub mod tools;

use config::{ClientSpec, HostSpec, MatrixConfig, VariantSpec};
use document::{ReportDocument, SuiteError};
use dsh_results::model::SuiteReport;
use dsh_results::reporter::{Reporter, RunStart};
use std::io::Write;
use std::path::{Path, PathBuf};

/// What every cell of `report` shares: the case selection and the timing knobs.
#[derive(Debug, Clone, Default)]
pub struct CellOptions {
    /// `--case` globs (as `run --case`).
    pub cases: Vec<String>,
    /// `--skip` globs (as `run --skip`).
    pub skip: Vec<String>,
    /// Cases run in parallel within one host x variant.
    pub jobs: dsh_engine::timing::Jobs,
    pub time_scale: dsh_engine::timing::TimeScale,
}

/// Runs one host x variant; the error is the harness's, as one line.
pub type CellRunner<'a> = dyn FnMut(&HostSpec, &VariantSpec) -> Result<SuiteReport, String> + 'a;

/// Runs every host x variant (host-major) through `run_cell`. A cell's suite is renamed to the
/// config's host and variant names so reports from different machines line up in `diff`.
pub fn run_matrix(
    config: &MatrixConfig,
    run_cell: &mut CellRunner<'_>,
    reporter: &dyn Reporter,
) -> (Vec<SuiteReport>, Vec<SuiteError>) {
    let mut suites = Vec::new();
    let mut errors = Vec::new();
    for host in &config.hosts {
        for variant in &config.variants {
            reporter.note(&format!("{} x {} ...", host.name, variant.name));
            match run_cell(host, variant) {
                Ok(mut suite) => {
                    suite.host.name = host.name.clone();
                    suite.runtime_variant = variant.name.clone();
                    reporter.note(&format!(
                        "{} x {}: {}",
                        host.name,
                        variant.name,
                        dsh_results::output::summary_line(&suite)
                    ));
                    suites.push(suite);
                }
                Err(message) => {
                    reporter.note(&format!(
                        "{} x {}: could not run: {message}",
                        host.name, variant.name
                    ));
                    errors.push(SuiteError {
                        host: host.name.clone(),
                        variant: variant.name.clone(),
                        message,
                    });
                }
            }
        }
    }
    (suites, errors)
}

/// Assembles the document: the suites, the cells that could not run, and rule coverage from
/// `<fixtures>/rules.json` (an unreadable catalog leaves the coverage table empty, with a warning).
pub fn build_document(
    config: &MatrixConfig,
    suites: Vec<SuiteReport>,
    errors: Vec<SuiteError>,
    fixtures: &Path,
    reporter: &dyn Reporter,
) -> ReportDocument {
    let rules = match coverage::load_rules(fixtures) {
        Ok(rules) => rules,
        Err(message) => {
            reporter.note(&format!("warning: no spec-coverage table: {message}"));
            Vec::new()
        }
    };
    let table = coverage::coverage(&rules, &suites);
    ReportDocument::new(config.variants.clone(), suites, errors, table)
}

/// The files `report` writes, in the order written.
pub const REPORT_FILES: [&str; 3] = ["report.json", "report.html", "report.md"];

/// Writes report.json, report.html and report.md into `dir` (created if missing).
pub fn write_report_files(document: &ReportDocument, dir: &Path) -> Result<Vec<PathBuf>, String> {
    dsh_engine::files::create_dir_inside(dir, Path::new(""))
        .map_err(|error| format!("{}: cannot create: {error}", dir.display()))?;
    for name in REPORT_FILES {
        dsh_engine::files::refuse_symlink(&dir.join(name)).map_err(|error| error.to_string())?;
    }
    let mut written = Vec::new();
    for name in REPORT_FILES {
        let path = dir.join(name);
        let mut bytes = Vec::new();
        let rendered = match name {
            "report.json" => serde_json::to_writer_pretty(&mut bytes, document)
                .map_err(std::io::Error::other)
                .and_then(|()| bytes.write_all(b"\n")),
            "report.html" => html::write_report_html(document, &mut bytes),
            _ => markdown::write_report_markdown(document, &mut bytes),
        };
        rendered.map_err(|error| format!("{}: cannot render: {error}", path.display()))?;
        dsh_engine::files::write_file(&path, &bytes).map_err(|error| error.to_string())?;
        written.push(path);
    }
    Ok(written)
}

/// The exit code of a written report (see the module doc).
pub fn exit_code_of(document: &ReportDocument) -> u8 {
    if !document.errors.is_empty() {
        2
    } else if document.case_count() == 0 {
        3
    } else if document.has_failures() {
        1
    } else {
        0
    }
}

/// The fake-dsh binary: `$FAKE_DSH_BIN`, else next to this executable (as `run` finds it).
fn fake_dsh_binary() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("FAKE_DSH_BIN").filter(|path| !path.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe()
        .map_err(|error| format!("cannot locate this executable: {error}"))?;
    let dir = exe
        .parent()
        .ok_or("cannot locate this executable's directory")?;
    Ok(dir.join(format!("fake-dsh{}", std::env::consts::EXE_SUFFIX)))
}

/// Runs one cell through the harness library: the whole corpus, the host's expectations file.
fn harness_cell(
    args: &CellOptions,
    corpus: &dsh_engine::corpus::CorpusDir,
    fake_dsh: &Path,
    host: &HostSpec,
    variant: &VariantSpec,
    reporter: &dyn Reporter,
) -> Result<SuiteReport, String> {
    let expectations = host
        .expectations
        .as_deref()
        .map(dsh_host_corpus::Expectations::load)
        .transpose()?;
    let config = dsh_host_corpus::SuiteConfig {
        host: host.command.clone(),
        host_name: Some(host.name.clone()),
        fixtures: corpus.path().to_path_buf(),
        selection: dsh_engine::selection::Selection {
            case_globs: args.cases.clone(),
            skip_globs: args.skip.clone(),
            ..Default::default()
        },
        jobs: args.jobs,
        time_scale: args.time_scale,
        fake_dsh: fake_dsh.to_path_buf(),
        variant: dsh_host_corpus::Variant {
            name: variant.name.clone(),
            env: variant.env.clone(),
        },
        expectations,
        verify: 1,
        driver_per_case: false,
        corpus_source: Some(corpus.source_label()),
        pass_env: host.pass_env.clone(),
        dialect: dsh_host_corpus::dialect::Dialect::named(
            host.dialect
                .as_deref()
                .unwrap_or(dsh_host_corpus::dialect::DEFAULT_DIALECT),
        )?,
    };
    let suite = dsh_host_corpus::Suite::prepare(&config).map_err(|error| error.to_string())?;
    let mut report = run_cell_live(&suite, reporter);
    if let Some(dialect) = host.dialect.as_deref().filter(|d| *d != "opendesign") {
        // A cell's re-run line judges by the host's dialect too.
        report
            .rerun_args
            .extend(["--dialect".to_string(), dialect.to_string()]);
    }
    Ok(report)
}

/// Runs one cell, handing each case to `reporter` as it finishes (as `run` does).
fn run_cell_live(suite: &dsh_host_corpus::Suite, reporter: &dyn Reporter) -> SuiteReport {
    reporter.start(&RunStart {
        host: suite.host_name(),
        variant: suite.variant_name(),
        total: suite.entries().len(),
        id_width: suite
            .entries()
            .iter()
            .map(|entry| entry.id.chars().count())
            .max()
            .unwrap_or(4),
        header: format!("{}\n", suite.header_line()),
    });
    let never = std::sync::atomic::AtomicBool::new(false);
    let report = suite.run_observed(&|case| reporter.case(case), &never);
    reporter.finish();
    report
}

/// `--case`/`--skip` per corpus: the host corpus and each client surface's cases take the globs
/// that match one of their ids; a kind of cell none of several `--case` globs matches is not run.
/// A glob that matches no case of any cell is the report's error, as it is `run`'s.
struct CellSelections {
    /// The host cells' options (`None`: no `--case` glob selects a host case).
    hosts: Option<CellOptions>,
    /// Each client surface's options, in the same sense.
    clients: Vec<(dsh_formats::client_case::ClientSurface, Option<CellOptions>)>,
}

impl CellSelections {
    fn of(config: &MatrixConfig, options: &CellOptions, fixtures: &Path) -> Result<Self, String> {
        let host_ids: Vec<String> = dsh_engine::selection::find_cases(fixtures)
            .map_err(|error| format!("{}: cannot list the corpus: {error}", fixtures.display()))?
            .into_iter()
            .map(|entry| entry.id)
            .collect();
        let mut corpora = vec![host_ids];
        let mut surfaces = Vec::new();
        if !config.clients.is_empty() {
            let clients = dsh_client_corpus::corpus::load(fixtures).map_err(|errors| {
                let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
                format!("the client corpus is invalid:\n{}", lines.join("\n"))
            })?;
            for client in &config.clients {
                if !surfaces.contains(&client.surface) {
                    surfaces.push(client.surface);
                    corpora.push(
                        clients
                            .of(client.surface)
                            .map(|c| c.case.id.clone())
                            .collect(),
                    );
                }
            }
        }
        for glob in options.cases.iter().chain(&options.skip) {
            let matched = corpora
                .iter()
                .flatten()
                .any(|id| dsh_engine::selection::glob_match(glob, id));
            if !matched {
                return Err(format!(
                    "{glob:?} matches no case of any cell of the report"
                ));
            }
        }
        let narrowed = |ids: &[String]| narrow(options, ids);
        Ok(CellSelections {
            hosts: narrowed(&corpora[0]),
            clients: surfaces
                .into_iter()
                .zip(corpora[1..].iter().map(|ids| narrowed(ids)))
                .collect(),
        })
    }

    fn client(&self, client: &ClientSpec) -> Option<&CellOptions> {
        let (_, options) = self
            .clients
            .iter()
            .find(|(surface, _)| *surface == client.surface)?;
        options.as_ref()
    }
}

/// `options` with only the globs that match one of `ids`; `None` when `--case` globs were given
/// and none of them does.
fn narrow(options: &CellOptions, ids: &[String]) -> Option<CellOptions> {
    let keep = |globs: &[String]| -> Vec<String> {
        let globs = globs.iter();
        globs
            .filter(|glob| {
                ids.iter()
                    .any(|id| dsh_engine::selection::glob_match(glob, id))
            })
            .cloned()
            .collect()
    };
    let cases = keep(&options.cases);
    if cases.is_empty() && !options.cases.is_empty() {
        return None;
    }
    Some(CellOptions {
        cases,
        skip: keep(&options.skip),
        ..options.clone()
    })
}

/// Runs one client x persona through the client corpus (as `run --surface S --host CLIENT
/// --persona P`); `None` when the selection leaves it no case.
fn client_cell(
    args: &CellOptions,
    corpus: &dsh_engine::corpus::CorpusDir,
    fake_dsh: &Path,
    client: &ClientSpec,
    persona: &str,
    reporter: &dyn Reporter,
) -> Result<Option<SuiteReport>, String> {
    let options = dsh_results::run_args::RunOptions {
        host_args: client.command.clone(),
        host_name: Some(client.name.clone()),
        fixtures: Some(corpus.path().to_path_buf()),
        cases: args.cases.clone(),
        skip: args.skip.clone(),
        jobs: args.jobs,
        time_scale: args.time_scale,
        expectations: client.expectations.clone(),
        runtime: Some(fake_dsh.to_path_buf()),
        persona: dsh_engine::surface::Persona::named(persona),
        ..Default::default()
    };
    let outcome = dsh_client_corpus::run(&options, client.surface, reporter)?;
    let dsh_results::reporter::RunOutcome::Ran { report, .. } = outcome else {
        return Ok(None);
    };
    let mut suite = *report;
    suite.host.name = client.name.clone();
    suite.runtime_variant = ClientSpec::variant_name(persona);
    Ok(Some(suite))
}

/// `report`'s run: every cell of `config` over `corpus` (fake-dsh: `$FAKE_DSH_BIN`, else the one
/// next to this executable), each cell's cases handed to `reporter` as they finish, assembled
/// into the document; made stable ([`stable`]) unless `full_transcripts`. `Err`: no fake-dsh to
/// run.
pub fn run_report(
    config: &MatrixConfig,
    options: &CellOptions,
    corpus: &dsh_engine::corpus::CorpusDir,
    full_transcripts: bool,
    reporter: &dyn Reporter,
) -> Result<ReportDocument, String> {
    let fake_dsh = fake_dsh_binary()?;
    let selections = CellSelections::of(config, options, corpus.path())?;
    let (mut suites, mut errors) = match &selections.hosts {
        Some(host_options) => run_matrix(
            config,
            &mut |host, variant| {
                harness_cell(host_options, corpus, &fake_dsh, host, variant, reporter)
            },
            reporter,
        ),
        None => (Vec::new(), Vec::new()),
    };
    for client in &config.clients {
        let Some(client_options) = selections.client(client) else {
            continue;
        };
        for persona in &client.personas {
            let variant = ClientSpec::variant_name(persona);
            match client_cell(client_options, corpus, &fake_dsh, client, persona, reporter) {
                Ok(Some(suite)) => suites.push(suite),
                Ok(None) => {}
                Err(message) => errors.push(SuiteError {
                    host: client.name.clone(),
                    variant,
                    message,
                }),
            }
        }
    }
    let mut document = build_document(config, suites, errors, corpus.path(), reporter);
    if !full_transcripts {
        stable::make_stable(&mut document);
    }
    Ok(document)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_files_refuse_a_planted_link_and_leave_its_target_alone() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        let victim = dir.path().join("victim.txt");
        std::fs::write(&victim, "untouched").unwrap();
        std::os::unix::fs::symlink(&victim, out.join("report.json")).unwrap();
        let document = ReportDocument::new(Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let error = write_report_files(&document, &out).unwrap_err();
        assert!(error.contains("report.json is a symbolic link"), "{error}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
        let leftovers = std::fs::read_dir(&out).unwrap().count();
        assert_eq!(leftovers, 1, "no temp file is left");
    }
}
