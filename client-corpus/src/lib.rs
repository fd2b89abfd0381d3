//! `dsh-conformance run --surface sdk|headless|acp --host CLIENT`: the client corpus
//! (docs/sdk-clients.md; the ACP corpus's own parts in [`acp`], docs/surface-acp.md). Each case
//! of `fixtures/clients/<surface>/` starts the client through its driver contract against
//! fake-dsh playing the case's scenario, and judges what the client reported, how it ended, what
//! it left running and where the credential went. Results go through the same model and outputs
//! as the host corpus (table, JSON, JSONL, JUnit, Markdown; exit 1 on a failure, 2 when the run
//! could not start, 3 when a `--case`/`--skip` glob matches nothing).
//!
//! - [`corpus`]: loading and linting the cases and the client rule catalog;
//! - [`play`]: one case, played; [`launcher`]: the runtime it hands the client, configured;
//!   [`journal_copy`]: the kit's own copy of fake-dsh's journal, received as it is written;
//!   [`canary`]: where its credential went; [`judge`]: its verdict; its known deviations
//!   (`--expectations`) are read by `dsh_results::expectations`.
//!
//! It shares the case engine (`dsh-engine`: processes, the token sweep, the journal, selection)
//! and the results model (`dsh-results`) with the host corpus, and imports nothing of it.

pub mod acp;
pub mod canary;
pub mod corpus;
pub mod journal_copy;
pub mod judge;
pub mod launcher;
pub mod play;

use corpus::LoadedCase;
use dsh_engine::interrupt;
use dsh_formats::client_case::ClientSurface;
use dsh_results::expectations::Expectations;
use dsh_results::model::{CaseResult, CorpusInfo, HostInfo, SuiteReport};
use dsh_results::reporter::{ListedCase, Reporter, RunOutcome, RunStart};
use dsh_results::run_args::{Persona, RunOptions};
use play::Setup;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// `run --surface sdk|headless`: the selected client cases, each handed to `reporter` as it
/// finishes; `Err` when the run could not start.
pub fn run(
    args: &RunOptions,
    surface: ClientSurface,
    reporter: &dyn Reporter,
) -> Result<RunOutcome, String> {
    let corpus_dir = dsh_engine::corpus::choose(args.fixtures.as_deref(), args.embedded_corpus)?;
    let corpus = corpus::load(corpus_dir.path()).map_err(|errors| {
        let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
        format!("the client corpus is invalid:\n{}", lines.join("\n"))
    })?;
    for path in [&args.junit, &args.markdown, &args.json]
        .into_iter()
        .flatten()
    {
        dsh_engine::files::refuse_symlink(path).map_err(|e| e.to_string())?;
    }
    let Some(selected) = select(args, surface, corpus.of(surface).collect(), reporter)? else {
        return Ok(RunOutcome::NothingSelected);
    };
    if args.list {
        let listed = selected.iter().map(|loaded| ListedCase {
            id: loaded.case.id.clone(),
            summary: None,
            detail: None,
        });
        return Ok(RunOutcome::Listed(listed.collect()));
    }
    let setup = setup(args, surface)?;
    let expectations = args
        .expectations
        .as_deref()
        .map(Expectations::load)
        .transpose()?;
    if let Some(expectations) = &expectations {
        let ids: Vec<&str> = selected.iter().map(|c| c.case.id.as_str()).collect();
        for warning in expectations.unselected_warnings(&ids) {
            reporter.note(&warning);
        }
    }
    let info = CorpusInfo {
        source: corpus_dir.source_label(),
        hash: corpus.hash.clone(),
        cases: corpus.of(surface).count(),
        embedded: corpus.hash == corpus::embedded_hash(),
    };
    if let Some(warning) = info.warning() {
        reporter.note(&warning);
    }
    // The first SIGINT or SIGTERM starts no new case and ends the cases in flight at once (each
    // client's process group is killed, the case's teardown kills what it left and removes its
    // temp dir, the case is reported `interrupted`), then every output is written and the exit
    // is 128 + the signal; a second one removes the cases' temp dirs and exits at once: the host
    // run's handling, `dsh_engine::interrupt`, whose handlers the command line installed first
    // thing: a signal that came earlier already set the stop flag, so no case starts.
    let run = Run {
        args,
        surface,
        setup: &setup,
        expectations: expectations.as_ref(),
        reporter,
    };
    let mut report = run.suite(&selected, info)?;
    report.rerun_args = rerun_args(args, surface);
    if let Some(path) = &args.write_expectations {
        acp::write_expectations(&report, expectations.as_ref(), path)?;
    }
    kill_strays(reporter);
    let stopped = if interrupt::signalled() {
        Some("interrupted")
    } else if args.fail_fast && report.cases.len() < selected.len() {
        Some("--fail-fast")
    } else {
        None
    };
    if let Some(reason) = stopped {
        reporter.note(&format!(
            "stopped early ({reason}): {} of {} cases ran",
            report.cases.len(),
            selected.len()
        ));
    }
    Ok(RunOutcome::Ran {
        report: Box::new(report),
        stopped: stopped.map(str::to_string),
    })
}

/// Once every case is over, nothing the clients started outlives `run`: an orphan still adopted
/// then (one a case spared because it carried the token of a case in flight beside it, which
/// ended before it could sweep it) is killed and named in a note.
fn kill_strays(reporter: &dyn Reporter) {
    let strays = dsh_engine::process::kill_adopted(std::time::Duration::from_secs(2), |_| false);
    if !strays.is_empty() {
        let named: Vec<String> = strays.iter().map(ToString::to_string).collect();
        reporter.note(&format!(
            "killed what the clients left running after every case ended: {}",
            named.join(", ")
        ));
    }
}

/// The cases `--case`/`--skip` select, checked as the host run checks them (a malformed glob is
/// an error); `None` (after saying which) when a glob matches no client case of the surface.
fn select<'a>(
    args: &RunOptions,
    surface: ClientSurface,
    cases: Vec<&'a LoadedCase>,
    reporter: &dyn Reporter,
) -> Result<Option<Vec<&'a LoadedCase>>, String> {
    if !args.sections.is_empty() || args.shard.is_some() {
        return Err(
            "--section and --shard select host cases; the client corpus takes --case and --skip"
                .into(),
        );
    }
    // The ACP corpus writes one (acp::write_expectations); the SDK surfaces keep theirs by hand.
    if args.write_expectations.is_some() && surface != ClientSurface::Acp {
        return Err(
            "--write-expectations writes a host's file; a client's expectations file is written \
             by hand, each entry with its reason ({\"v\":1,\"xfail\":{\"case.id\":\"reason\"}})"
                .into(),
        );
    }
    let selection = dsh_engine::selection::Selection {
        case_globs: args.cases.clone(),
        sections: Vec::new(),
        skip_globs: args.skip.clone(),
        shard: None,
    };
    selection.check()?;
    let unmatched = selection.unmatched_with_hints(cases.iter().map(|c| c.case.id.as_str()));
    if !unmatched.is_empty() {
        reporter.note(&format!("{} matches no client case", unmatched.join(", ")));
        return Ok(None);
    }
    Ok(Some(
        cases
            .into_iter()
            .filter(|c| selection.matches_id(&c.case.id))
            .collect(),
    ))
}

/// How every case starts the client; the client's command must start (checked once, up front).
fn setup(args: &RunOptions, surface: ClientSurface) -> Result<Setup, String> {
    let mut client = match &args.host {
        Some(command) => dsh_engine::programs::split_command(command)?,
        None => Vec::new(),
    };
    client.extend(args.host_args.iter().cloned());
    if client.is_empty() {
        return Err(
            "--surface sdk|headless|acp needs --host CLIENT (the client's command line)".into(),
        );
    }
    let client = dsh_engine::programs::absolute_paths(client);
    dsh_engine::child_env::check_pass_env(&args.pass_env)?;
    // Absolute: the client starts it (through the case's launcher) from its own working dir.
    let fake_dsh = dsh_results::run_args::fake_dsh_of(args)?;
    let fake_dsh = std::path::absolute(&fake_dsh).unwrap_or(fake_dsh);
    if !fake_dsh.is_file() {
        return Err(format!(
            "fake-dsh not found at {} (pass --runtime)",
            fake_dsh.display()
        ));
    }
    let program = &client[0];
    if dsh_engine::programs::resolve_program(program).is_none() {
        return Err(format!(
            "the client cannot start: {program:?} is not an executable file nor on PATH"
        ));
    }
    let (runtime_args, profile_args) = runtime_args(surface, args.persona)?;
    Ok(Setup {
        client,
        fake_dsh,
        time_scale: args.time_scale,
        inherited: dsh_engine::child_env::inherited(&args.pass_env),
        runtime_args,
        profile_args,
    })
}

/// fake-dsh's arguments for the surface and `--persona`: the persona's, always, and the
/// surface's, which the launcher adds when the client names no `--profile` of its own. No
/// persona leaves fake-dsh's own default (0.2.1).
fn runtime_args(
    surface: ClientSurface,
    persona: Option<Persona>,
) -> Result<(Vec<String>, Vec<String>), String> {
    let profile: &[&str] = match surface {
        ClientSurface::Sdk => &["--profile", "sdk"],
        ClientSurface::Headless => &["--profile", "headless"],
        ClientSurface::Acp => &["--profile", "acp"],
    };
    let (fixed, profile): (&[&str], &[&str]) = match (surface, persona) {
        (_, None) => (&[], profile),
        (_, Some(Persona::V015)) => (&["--persona", "0.1.5"], profile),
        (_, Some(Persona::V021)) => (&["--persona", "0.2.1"], profile),
        (ClientSurface::Sdk, Some(Persona::V011)) => (&["--persona", "0.1.1"], &["cordis.yml"]),
        (surface, Some(other)) => {
            return Err(format!(
                "--persona {other}: the {} surface has 0.2.1, 0.1.5{}",
                surface.name(),
                if surface == ClientSurface::Sdk {
                    " and 0.1.1"
                } else {
                    " only"
                }
            ))
        }
    };
    let owned = |args: &[&str]| args.iter().map(|a| a.to_string()).collect();
    Ok((owned(fixed), owned(profile)))
}

/// One client run: what every case of it shares.
struct Run<'a> {
    args: &'a RunOptions,
    surface: ClientSurface,
    setup: &'a Setup,
    expectations: Option<&'a Expectations>,
    reporter: &'a dyn Reporter,
}

impl Run<'_> {
    /// Runs the selected cases into the results model.
    fn suite(&self, selected: &[&LoadedCase], corpus: CorpusInfo) -> Result<SuiteReport, String> {
        let (args, surface, setup) = (self.args, self.surface, self.setup);
        let host_name = args
            .host_name
            .clone()
            .unwrap_or_else(|| name_of(&setup.client));
        let variant = match &args.persona {
            Some(persona) => format!("fake-dsh {} {persona}", surface.name()),
            None => format!("fake-dsh {}", surface.name()),
        };
        self.reporter.start(&RunStart {
            header: header(&host_name, setup, &variant, selected.len(), &corpus),
            host: host_name.clone(),
            variant: variant.clone(),
            total: selected.len(),
            id_width: selected.iter().map(|c| c.case.id.len()).max().unwrap_or(4),
        });
        let started = std::time::Instant::now();
        let mut cases = self.play_all(selected)?;
        cases.sort_by(|a, b| a.id.cmp(&b.id));
        let selected_hash = dsh_engine::corpus::embedded::tree_hash(
            selected
                .iter()
                .map(|c| (c.case.id.as_str(), c.text.as_bytes())),
        );
        Ok(SuiteReport {
            kit_version: env!("CARGO_PKG_VERSION").to_string(),
            corpus_hash: selected_hash,
            host: HostInfo {
                name: host_name,
                command: dsh_results::output::secrets::redact_command(&setup.client),
                handshake: serde_json::Value::Null,
            },
            runtime_variant: variant,
            cases,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            rerun_args: Vec::new(),
            corpus: Some(corpus),
            surface: Some(surface.name().to_string()),
            dialect: None,
            rerun_as: None,
        })
    }

    /// Plays the cases on `--jobs` workers (default: the core count), handing each to the
    /// reporter as it finishes; stops starting new ones after a failure with `--fail-fast`.
    /// `Err` when a case could not be played at all.
    fn play_all(&self, selected: &[&LoadedCase]) -> Result<Vec<CaseResult>, String> {
        let next = AtomicUsize::new(0);
        let stop = interrupt::stop_flag();
        let results: Mutex<Vec<CaseResult>> = Mutex::new(Vec::new());
        let broken: Mutex<Option<String>> = Mutex::new(None);
        let jobs = self.args.jobs.get().min(selected.len()).max(1);
        std::thread::scope(|scope| {
            for _ in 0..jobs {
                scope.spawn(|| {
                    while let Some(loaded) = selected.get(next.fetch_add(1, Ordering::SeqCst)) {
                        if stop.load(Ordering::SeqCst) {
                            return;
                        }
                        let result = match self.play_one(loaded) {
                            Ok(Some(result)) => result,
                            // A stop signal came before the client started: not played.
                            Ok(None) => return,
                            Err(why) => {
                                *broken.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
                                stop.store(true, Ordering::SeqCst);
                                return;
                            }
                        };
                        self.reporter.case(&result);
                        if self.args.fail_fast && result.verdict.is_failure() {
                            stop.store(true, Ordering::SeqCst);
                        }
                        results
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(result);
                    }
                });
            }
        });
        self.reporter.finish();
        if let Some(why) = broken.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(why);
        }
        Ok(results.into_inner().unwrap_or_else(|p| p.into_inner()))
    }

    /// One case's result, expectations applied (skipped when a capability lacks); `None` when a
    /// stop signal came before its client started; `Err` when it could not be played.
    fn play_one(&self, loaded: &LoadedCase) -> Result<Option<CaseResult>, String> {
        let mut result = match lacking(self.args, loaded) {
            Some(why) => judge::skipped(&loaded.case, &why),
            None => match play::play(self.setup, &loaded.case) {
                Ok(played) => {
                    let mut result = judge::verdict(&loaded.case, &played);
                    if interrupt::interrupted() {
                        result.mark_interrupted("the client");
                    }
                    result
                }
                Err(_) if interrupt::interrupted() => return Ok(None),
                Err(why) => return Err(why),
            },
        };
        if let Some(expectations) = self.expectations {
            expectations.apply(&mut result);
        }
        Ok(Some(result))
    }
}

/// The head of a table run: kit, client, command, runtime, case count; the corpus line and, when
/// it is not the embedded corpus, the warning.
fn header(host: &str, setup: &Setup, variant: &str, cases: usize, corpus: &CorpusInfo) -> String {
    use dsh_results::output::{escape::terminal, secrets::display_command};
    let mut head = format!(
        "dsh-conformance {}: client {} ({}), runtime {variant}, {cases} cases\n{}\n",
        env!("CARGO_PKG_VERSION"),
        terminal(host),
        terminal(&display_command(&setup.client)),
        terminal(&corpus.line())
    );
    if let Some(warning) = corpus.warning() {
        head.push_str(&format!("{}\n", terminal(&warning)));
    }
    head
}

/// Why the case is skipped: the first capability it requires that `--client-lacks` names, or
/// that the runtime persona lacks ([`persona_lacks`]).
fn lacking(args: &RunOptions, loaded: &LoadedCase) -> Option<String> {
    let requires = &loaded.case.requires;
    if let Some(capability) = requires
        .iter()
        .find(|capability| args.client_lacks.contains(capability))
    {
        return Some(format!("the client lacks {capability} (--client-lacks)"));
    }
    let persona = args.persona?;
    requires
        .iter()
        .find_map(|capability| {
            persona_lacks(persona)
                .iter()
                .find(|(lacked, _)| lacked == capability)
        })
        .map(|(capability, why)| {
            format!("the runtime persona {persona} lacks {capability} ({why})")
        })
}

/// The capabilities a runtime persona lacks, each with why: 0.2.1's methods (`session/resume`,
/// `session/working-directory/*`; fake-dsh's default persona) before 0.2.1, and file tools on
/// 0.1.1 (its bundled config has none: every `write` is an unknown tool).
fn persona_lacks(persona: Persona) -> &'static [(&'static str, &'static str)] {
    const METHODS: &str = "0.2.1's method";
    match persona {
        Persona::V021 => &[],
        Persona::V015 => &[("resume", METHODS), ("working-directory", METHODS)],
        Persona::V011 => &[
            ("resume", METHODS),
            ("working-directory", METHODS),
            ("file-tools", "its bundled config has none"),
        ],
    }
}

fn rerun_args(args: &RunOptions, surface: ClientSurface) -> Vec<String> {
    let mut rerun = vec!["--surface".to_string(), surface.name().to_string()];
    if let Some(dir) = &args.fixtures {
        rerun.extend(["--fixtures".to_string(), dir.display().to_string()]);
    }
    if args.time_scale != dsh_engine::timing::TimeScale::ONE {
        rerun.extend(["--time-scale".to_string(), args.time_scale.to_string()]);
    }
    if let Some(persona) = &args.persona {
        rerun.extend(["--persona".to_string(), persona.to_string()]);
    }
    if let Some(file) = &args.expectations {
        rerun.extend(["--expectations".to_string(), file.display().to_string()]);
    }
    for capability in &args.client_lacks {
        rerun.extend(["--client-lacks".to_string(), capability.clone()]);
    }
    rerun
}

/// A client's name in reports when `--host-name` gives none: the file name of its script (the
/// last argument naming a file), else of its program.
fn name_of(client: &[String]) -> String {
    let script = client.iter().rev().find(|arg| Path::new(arg).is_file());
    let word = script.unwrap_or(&client[0]);
    Path::new(word)
        .file_name()
        .map_or_else(|| word.clone(), |name| name.to_string_lossy().into_owned())
}
