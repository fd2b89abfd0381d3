//! `dsh-conformance run --surface sdk|headless --host CLIENT`: the client corpus
//! (docs/sdk-clients.md). Each case of `fixtures/clients/<surface>/` starts the client through
//! its driver contract against fake-dsh playing the case's scenario, and judges what the client
//! reported, how it ended, what it left running and where the credential went. Results go through
//! the same model and outputs as the host corpus (table, JSON, JSONL, JUnit, Markdown; exit 1 on a
//! failure, 2 when the run could not start, 3 when a `--case`/`--skip` glob matches nothing).
//!
//! - [`corpus`]: loading and linting the cases and the client rule catalog;
//! - [`play`]: one case, played; [`launcher`]: the runtime it hands the client, configured;
//!   [`journal_copy`]: the kit's own copy of fake-dsh's journal, received as it is written;
//!   [`canary`]: where its credential went; [`judge`]: its verdict; its known deviations
//!   (`--expectations`) are read by `dsh_results::expectations`.
//!
//! It shares the case engine (`dsh-engine`: processes, the token sweep, the journal, selection)
//! and the results model (`dsh-results`) with the host corpus, and imports nothing of it.

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
use dsh_results::run_args::{Flags, EXIT_NOTHING_MEASURED};
use play::Setup;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// `run --surface sdk|headless`: the exit code, or `Err` when the run could not start.
pub fn run_cli(args: &Flags, surface: ClientSurface) -> Result<u8, String> {
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
    let Some(selected) = select(args, corpus.of(surface).collect())? else {
        return Ok(EXIT_NOTHING_MEASURED);
    };
    if args.list {
        for loaded in &selected {
            println!("{}", loaded.case.id);
        }
        return Ok(0);
    }
    let setup = setup(args, surface)?;
    let expectations = args
        .expectations
        .as_deref()
        .map(Expectations::load)
        .transpose()?;
    if let Some(expectations) = &expectations {
        let ids: Vec<&str> = selected.iter().map(|c| c.case.id.as_str()).collect();
        expectations.warn_unselected(&ids);
    }
    let info = CorpusInfo {
        source: corpus_dir.source_label(),
        hash: corpus.hash.clone(),
        cases: corpus.of(surface).count(),
        embedded: corpus.hash == corpus::embedded_hash(),
    };
    if let Some(warning) = info.warning() {
        eprintln!("dsh-conformance run: {warning}");
    }
    // The first SIGINT or SIGTERM starts no new case and ends the cases in flight at once (each
    // client's process group is killed, the case's teardown kills what it left and removes its
    // temp dir, the case is reported `interrupted`), then every output is written and the exit
    // is 128 + the signal; a second one removes the cases' temp dirs and exits at once: the host
    // run's handling, `dsh_engine::interrupt`.
    interrupt::stop_flag().store(false, Ordering::SeqCst);
    interrupt::catch_stop_signals("dsh-conformance run");
    let mut report = suite(
        args,
        surface,
        &setup,
        &selected,
        info,
        expectations.as_ref(),
    )?;
    report.rerun_args = rerun_args(args, surface);
    kill_strays();
    let stopped = if interrupt::signalled() {
        Some("interrupted")
    } else if args.fail_fast && report.cases.len() < selected.len() {
        Some("--fail-fast")
    } else {
        None
    };
    if let Some(reason) = stopped {
        eprintln!(
            "dsh-conformance run: stopped early ({reason}): {} of {} cases ran",
            report.cases.len(),
            selected.len()
        );
    }
    dsh_results::run_args::finish(args, &report, stopped)
}

/// Once every case is over, nothing the clients started outlives `run`: an orphan still adopted
/// then (one a case spared because it carried the token of a case in flight beside it, which
/// ended before it could sweep it) is killed and named on stderr.
fn kill_strays() {
    let strays = dsh_engine::process::kill_adopted(std::time::Duration::from_secs(2), |_| false);
    if !strays.is_empty() {
        let named: Vec<String> = strays.iter().map(ToString::to_string).collect();
        eprintln!(
            "dsh-conformance run: killed what the clients left running after every case ended: {}",
            named.join(", ")
        );
    }
}

/// The cases `--case`/`--skip` select, checked as the host run checks them (a malformed glob is
/// an error); `None` (after saying which) when a glob matches no client case of the surface.
fn select<'a>(
    args: &Flags,
    cases: Vec<&'a LoadedCase>,
) -> Result<Option<Vec<&'a LoadedCase>>, String> {
    if !args.sections.is_empty() || args.shard.is_some() {
        return Err(
            "--section and --shard select host cases; the client corpus takes --case and --skip"
                .into(),
        );
    }
    if args.write_expectations.is_some() {
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
        eprintln!(
            "dsh-conformance run: {} matches no client case",
            unmatched.join(", ")
        );
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
fn setup(args: &Flags, surface: ClientSurface) -> Result<Setup, String> {
    let mut client = match &args.host {
        Some(command) => dsh_engine::programs::split_command(command)?,
        None => Vec::new(),
    };
    client.extend(args.host_args.iter().cloned());
    if client.is_empty() {
        return Err(
            "--surface sdk|headless needs --host CLIENT (the client's command line)".into(),
        );
    }
    let client = dsh_engine::programs::absolute_paths(client);
    dsh_engine::child_env::check_pass_env(&args.pass_env)?;
    // Absolute: the client starts it (through the case's launcher) from its own working dir.
    let fake_dsh = dsh_results::run_args::fake_dsh_of(args)?;
    let fake_dsh = std::path::absolute(&fake_dsh).unwrap_or(fake_dsh);
    if !fake_dsh.is_file() {
        return Err(format!(
            "fake-dsh not found at {} (pass --fake-dsh)",
            fake_dsh.display()
        ));
    }
    let program = &client[0];
    if dsh_engine::programs::resolve_program(program).is_none() {
        return Err(format!(
            "the client cannot start: {program:?} is not an executable file nor on PATH"
        ));
    }
    let (runtime_args, profile_args) = runtime_args(surface, args.runtime_persona.as_deref())?;
    Ok(Setup {
        client,
        fake_dsh,
        time_scale: args.time_scale,
        inherited: dsh_engine::child_env::inherited(&args.pass_env),
        runtime_args,
        profile_args,
    })
}

/// fake-dsh's arguments for the surface and `--runtime-persona`: the persona's, always, and the
/// surface's, which the launcher adds when the client names no `--profile` of its own. No
/// persona leaves fake-dsh's own default (0.2.1).
fn runtime_args(
    surface: ClientSurface,
    persona: Option<&str>,
) -> Result<(Vec<String>, Vec<String>), String> {
    let profile: &[&str] = match surface {
        ClientSurface::Sdk => &["--profile", "sdk"],
        ClientSurface::Headless => &["--profile", "headless"],
    };
    let (fixed, profile): (&[&str], &[&str]) = match (surface, persona) {
        (_, None) => (&[], profile),
        (_, Some("0.1.5")) => (&["--persona", "0.1.5"], profile),
        (_, Some("0.2.1")) => (&["--persona", "0.2.1"], profile),
        (ClientSurface::Sdk, Some("0.1.1")) => (&["--persona", "0.1.1"], &["cordis.yml"]),
        (surface, Some(other)) => {
            return Err(format!(
                "--runtime-persona {other:?}: the {} surface has 0.2.1, 0.1.5{}",
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

/// Runs the selected cases into the results model.
fn suite(
    args: &Flags,
    surface: ClientSurface,
    setup: &Setup,
    selected: &[&LoadedCase],
    corpus: CorpusInfo,
    expectations: Option<&Expectations>,
) -> Result<SuiteReport, String> {
    use dsh_results::output::stream::{LiveOutput, StreamStyle};
    use dsh_results::output::Format;
    let style = match args.format {
        Format::Table => StreamStyle::Lines {
            color: args.color.resolve(),
            id_width: selected.iter().map(|c| c.case.id.len()).max().unwrap_or(4),
        },
        Format::Jsonl => StreamStyle::Jsonl,
        Format::Json => StreamStyle::Quiet,
    };
    let host_name = args
        .host_name
        .clone()
        .unwrap_or_else(|| name_of(&setup.client));
    let variant = match &args.runtime_persona {
        Some(persona) => format!("fake-dsh {} {persona}", surface.name()),
        None => format!("fake-dsh {}", surface.name()),
    };
    let live = LiveOutput::new(style, &host_name, &variant, selected.len());
    if args.format == Format::Table {
        live.write(&header(
            &host_name,
            setup,
            &variant,
            selected.len(),
            &corpus,
        ));
    }
    let started = std::time::Instant::now();
    let mut cases = play_all(args, setup, selected, &live, expectations)?;
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

/// Plays the cases on `--jobs` workers (default 2), printing each as it finishes; stops starting
/// new ones after a failure with `--fail-fast`. `Err` when a case could not be played at all.
fn play_all(
    args: &Flags,
    setup: &Setup,
    selected: &[&LoadedCase],
    live: &dsh_results::output::stream::LiveOutput,
    expectations: Option<&Expectations>,
) -> Result<Vec<CaseResult>, String> {
    let next = AtomicUsize::new(0);
    let stop = interrupt::stop_flag();
    let results: Mutex<Vec<CaseResult>> = Mutex::new(Vec::new());
    let broken: Mutex<Option<String>> = Mutex::new(None);
    let jobs = args.jobs.unwrap_or(2).clamp(1, 8);
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                while let Some(loaded) = selected.get(next.fetch_add(1, Ordering::SeqCst)) {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let mut result = match lacking(args, loaded) {
                        Some(why) => judge::skipped(&loaded.case, &why),
                        None => match play::play(setup, &loaded.case) {
                            Ok(played) => {
                                let mut result = judge::verdict(&loaded.case, &played);
                                if interrupt::interrupted() {
                                    result.mark_interrupted("the client");
                                }
                                result
                            }
                            // A stop signal came before the client started: not played.
                            Err(_) if interrupt::interrupted() => return,
                            Err(why) => {
                                *broken.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
                                stop.store(true, Ordering::SeqCst);
                                return;
                            }
                        },
                    };
                    if let Some(expectations) = expectations {
                        expectations.apply(&mut result);
                    }
                    live.case(&result);
                    if args.fail_fast && result.verdict.is_failure() {
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
    live.finish();
    if let Some(why) = broken.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(why);
    }
    Ok(results.into_inner().unwrap_or_else(|p| p.into_inner()))
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
/// that the runtime persona lacks ([`RUNTIME_021_ONLY`] before 0.2.1).
fn lacking(args: &Flags, loaded: &LoadedCase) -> Option<String> {
    let requires = &loaded.case.requires;
    if let Some(capability) = requires
        .iter()
        .find(|capability| args.client_lacks.contains(capability))
    {
        return Some(format!("the client lacks {capability} (--client-lacks)"));
    }
    let persona = args
        .runtime_persona
        .as_deref()
        .filter(|persona| matches!(*persona, "0.1.1" | "0.1.5"))?;
    requires
        .iter()
        .find(|capability| RUNTIME_021_ONLY.contains(&capability.as_str()))
        .map(|capability| {
            format!("the runtime persona {persona} lacks {capability} (0.2.1's method)")
        })
}

/// Capabilities only the 0.2.1 runtime has (`session/resume`, `session/working-directory/*`;
/// fake-dsh's default persona).
const RUNTIME_021_ONLY: &[&str] = &["resume", "working-directory"];

fn rerun_args(args: &Flags, surface: ClientSurface) -> Vec<String> {
    let mut rerun = vec!["--surface".to_string(), surface.name().to_string()];
    if let Some(dir) = &args.fixtures {
        rerun.extend(["--fixtures".to_string(), dir.display().to_string()]);
    }
    if args.time_scale != 1.0 {
        rerun.extend(["--time-scale".to_string(), args.time_scale.to_string()]);
    }
    if let Some(persona) = &args.runtime_persona {
        rerun.extend(["--runtime-persona".to_string(), persona.clone()]);
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
