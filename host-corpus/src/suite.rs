//! The library entry point: a [`SuiteConfig`] in, a [`SuiteReport`] out. Loads and selects the
//! cases, runs them in parallel (`jobs` threads), repeats them for `--verify`, applies the
//! expectations file, and assembles the report in id order.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::case::{claimed, claims_reuse, run_case, CaseEnv, ReusedDriver};
use super::verdict::{decide, RULE_KIT};
use dsh_engine::programs::{is_executable, resolve_program};
use dsh_engine::selection::{corpus_hash, find_cases, shard_entries, CaseEntry, Selection};
use dsh_results::expectations::Expectations;
use dsh_results::model::{Blame, CaseResult, CorpusInfo, HostInfo, SuiteReport, Verdict};

/// A runtime variant: a name and the extra env fake-dsh runs with (e.g. `FAKE_DSH_VERSION`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    pub name: String,
    pub env: BTreeMap<String, String>,
}

impl Default for Variant {
    fn default() -> Self {
        Variant {
            name: "default".to_string(),
            env: BTreeMap::new(),
        }
    }
}

/// The `profile-next` variant's identity: a newer plugin and compatibility generation, plus a
/// member generation 1 does not define, which a host must tolerate.
pub const PROFILE_NEXT_IDENTITY: &str = r#"{"plugin_version":"0.2.0","compatibility_generation":"od-profile-2","x_next":{"note":"a member generation-1 hosts ignore"}}"#;

impl Variant {
    /// A named variant: `dsh-<version>` sets `FAKE_DSH_VERSION=<version>`; `profile-next` gives
    /// the probe and ready frames [`PROFILE_NEXT_IDENTITY`] (`FAKE_DSH_IDENTITY_PATCH`); `default`
    /// sets nothing.
    pub fn named(name: &str) -> Variant {
        let mut env = BTreeMap::new();
        if let Some(version) = name
            .strip_prefix("dsh-")
            .filter(|version| !version.is_empty())
        {
            env.insert("FAKE_DSH_VERSION".to_string(), version.to_string());
        }
        if name == "profile-next" {
            env.insert(
                "FAKE_DSH_IDENTITY_PATCH".to_string(),
                PROFILE_NEXT_IDENTITY.to_string(),
            );
        }
        Variant {
            name: name.to_string(),
            env,
        }
    }
}

/// Everything a suite run needs.
#[derive(Debug, Clone)]
pub struct SuiteConfig {
    /// The driver's command line (program and arguments).
    pub host: Vec<String>,
    /// The host's short name in reports; default `reference` for `dsh-host-driver`, else the
    /// program's file name.
    pub host_name: Option<String>,
    pub fixtures: PathBuf,
    pub selection: Selection,
    pub jobs: dsh_engine::timing::Jobs,
    pub time_scale: dsh_engine::timing::TimeScale,
    pub fake_dsh: PathBuf,
    pub variant: Variant,
    pub expectations: Option<Expectations>,
    /// Run the selection this many times (at least 1); differing verdicts make a case flaky.
    pub verify: usize,
    /// Start a driver for every case even when it claims `reuse`.
    pub driver_per_case: bool,
    /// Where the fixtures dir came from, for the reports (`None`: its path).
    pub corpus_source: Option<String>,
    /// The caller's variables the driver gets besides `child_env::ALLOWED` (`NAME` or `PREFIX*`).
    pub pass_env: Vec<String>,
    /// The dialect the host is judged by (`run --dialect`; docs/dialects.md).
    pub dialect: std::sync::Arc<crate::dialect::Dialect>,
}

/// Called with each case's result (expectations applied) as soon as it finishes, from the
/// worker thread that ran it.
pub type CaseObserver<'a> = &'a (dyn Fn(&CaseResult) + Sync);

/// Why a suite could not run at all (exit 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HarnessError {
    Fixtures(String),
    Host(String),
    FakeDsh(String),
    Config(String),
    /// A `--case` or `--skip` glob that matches no case: nothing measured (exit 3).
    NoMatch(String),
}

impl std::fmt::Display for HarnessError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HarnessError::Fixtures(m)
            | HarnessError::Host(m)
            | HarnessError::FakeDsh(m)
            | HarnessError::Config(m)
            | HarnessError::NoMatch(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for HarnessError {}

/// One case's result and the driver's handshake reply (when it answered one).
pub type EntryRun = (CaseResult, Option<serde_json::Value>);

/// `--verify` at least 1 (`jobs` and `time_scale` are valid by their types).
fn check_numbers(config: &SuiteConfig) -> Result<(), HarnessError> {
    if config.verify == 0 {
        return Err(HarnessError::Config(
            "--verify must be at least 1".to_string(),
        ));
    }
    Ok(())
}

/// The host command with its program resolved; a program given as a path made absolute, since
/// the driver runs in the case root.
fn resolved_host(config: &SuiteConfig) -> Result<Vec<String>, HarnessError> {
    let program = config
        .host
        .first()
        .ok_or_else(|| HarnessError::Host("the host command is empty".to_string()))?;
    let resolved = resolve_program(program).ok_or_else(|| {
        HarnessError::Host(format!(
            "host driver not found or not executable: {program}{}",
            unexpanded_hint(&config.host)
        ))
    })?;
    let mut host = config.host.clone();
    if program.contains('/') {
        host[0] = absolute(&resolved).display().to_string();
    }
    Ok(host)
}

/// fake-dsh and the fixtures dir exist; the globs compile; `--pass-env` and the variant's
/// environment are well formed.
fn check_paths_and_flags(config: &SuiteConfig) -> Result<(), HarnessError> {
    if !is_executable(&config.fake_dsh) {
        return Err(HarnessError::FakeDsh(format!(
            "fake-dsh not found or not executable: {}",
            config.fake_dsh.display()
        )));
    }
    if !config.fixtures.is_dir() {
        return Err(HarnessError::Fixtures(format!(
            "fixtures dir not found: {}",
            config.fixtures.display()
        )));
    }
    config.selection.check().map_err(HarnessError::Config)?;
    dsh_engine::child_env::check_pass_env(&config.pass_env).map_err(HarnessError::Config)?;
    for (name, value) in &config.variant.env {
        dsh_engine::child_env::check_variant_env(name, value)
            .map_err(|why| HarnessError::Config(format!("variant env: {why}")))?;
    }
    Ok(())
}

/// Every `--case` and `--skip` glob matches some case of the whole corpus (exit 3 otherwise).
fn check_globs_match(config: &SuiteConfig, found: &[CaseEntry]) -> Result<(), HarnessError> {
    let unmatched = config
        .selection
        .unmatched_with_hints(found.iter().map(|entry| entry.id.as_str()));
    if unmatched.is_empty() {
        return Ok(());
    }
    let corpus = match config.corpus_source.as_deref() {
        Some("embedded") => "the embedded corpus".to_string(),
        _ => format!("the corpus in {}", config.fixtures.display()),
    };
    Err(HarnessError::NoMatch(format!(
        "{} matches none of the {} cases of {corpus}",
        unmatched.join("; "),
        found.len(),
    )))
}

/// The corpus's rule catalog: none for a hand-made corpus without one (it softens nothing); a
/// broken one is an error.
fn rule_catalog(config: &SuiteConfig) -> Result<Vec<crate::corpus::Rule>, HarnessError> {
    if !config
        .fixtures
        .join(dsh_engine::corpus::RULES_FILE)
        .exists()
    {
        return Ok(Vec::new());
    }
    crate::corpus::load_rules(&config.fixtures).map_err(|e| HarnessError::Fixtures(e.to_string()))
}

/// The whole corpus: its source, hash and size, and whether it is the embedded one.
fn corpus_info(config: &SuiteConfig, found: &[CaseEntry]) -> CorpusInfo {
    let hash = corpus_hash(&found.iter().collect::<Vec<_>>());
    let embedded = hash == dsh_engine::corpus::embedded::case_hash();
    CorpusInfo {
        source: config
            .corpus_source
            .clone()
            .unwrap_or_else(|| format!("fixtures {}", config.fixtures.display())),
        hash,
        cases: found.len(),
        embedded,
    }
}

/// A checked config with its selected cases, ready to run (all of them or one by one).
pub struct Suite {
    config: SuiteConfig,
    entries: Vec<CaseEntry>,
    env: CaseEnv,
    /// Over the selection before `--shard`.
    corpus_hash: String,
    /// The whole corpus the selection came from.
    corpus: CorpusInfo,
    /// The pre-flight handshake, made once.
    preflight: OnceLock<Result<serde_json::Value, HarnessError>>,
    /// The first case's note of a driver gone before its first reply, and whether it was said.
    early_exit: Mutex<(Option<String>, bool)>,
}

impl Suite {
    /// Checks the config (fixtures dir, host program, fake-dsh) and loads the selected cases.
    pub fn prepare(config: &SuiteConfig) -> Result<Suite, HarnessError> {
        check_numbers(config)?;
        let host = resolved_host(config)?;
        check_paths_and_flags(config)?;
        let found = find_cases(&config.fixtures).map_err(|e| {
            HarnessError::Fixtures(format!(
                "cannot read the fixtures dir {}: {e}",
                config.fixtures.display()
            ))
        })?;
        check_globs_match(config, &found)?;
        let corpus = corpus_info(config, &found);
        let entries: Vec<CaseEntry> = found
            .into_iter()
            .filter(|entry| config.selection.matches(entry))
            .collect();
        // The hash of the whole selection, so every shard of it carries the same one.
        let hash = corpus_hash(&entries.iter().collect::<Vec<_>>());
        let entries = match config.selection.shard {
            Some(shard) => shard_entries(entries, shard),
            None => entries,
        };
        let env = CaseEnv {
            interpreted_rules: crate::corpus::interpreted_rules(&rule_catalog(config)?),
            host,
            fake_dsh: absolute(&config.fake_dsh),
            fake_dsh_env: config.variant.env.clone(),
            time_scale: config.time_scale,
            pass_env: config.pass_env.clone(),
            dialect: config.dialect.clone(),
        };
        Ok(Suite {
            config: config.clone(),
            entries,
            env,
            corpus_hash: hash,
            corpus,
            preflight: OnceLock::new(),
            early_exit: Mutex::new((None, false)),
        })
    }

    /// The host's name in reports.
    pub fn host_name(&self) -> String {
        self.config
            .host_name
            .clone()
            .unwrap_or_else(|| default_host_name(&self.config.host))
    }

    /// The runtime variant's name.
    pub fn variant_name(&self) -> String {
        self.config.variant.name.clone()
    }

    /// The head of a table run: kit, host, command, variant, selection hash; then the corpus line
    /// and, when it is not the embedded corpus, the warning.
    pub fn header_line(&self) -> String {
        use dsh_results::output::{escape::terminal, secrets::display_command};
        format!(
            "dsh-conformance {}: host {} ({}), runtime {}, selection sha256 {}, {} cases{}",
            env!("CARGO_PKG_VERSION"),
            terminal(&self.host_name()),
            terminal(&display_command(&self.config.host)),
            terminal(&self.config.variant.name),
            dsh_results::model::short_hash(&self.corpus_hash),
            self.entries.len(),
            if self.env.dialect.is_gen1() {
                String::new()
            } else {
                format!(", judged by the {} dialect", self.env.dialect.name)
            }
        ) + &format!("\n{}", terminal(&self.corpus.line()))
            + &self
                .corpus
                .warning()
                .map(|warning| format!("\n{}", terminal(&warning)))
                .unwrap_or_default()
    }

    /// The selected cases, in id order.
    pub fn entries(&self) -> &[CaseEntry] {
        &self.entries
    }

    /// Runs one case once; the verdict before the expectations file. Also returns the driver's
    /// handshake reply, when it answered one.
    pub fn run_entry(&self, entry: &CaseEntry) -> EntryRun {
        self.run_entry_in(entry, None)
    }

    /// [`Suite::run_entry`], in the worker's reused driver when given its slot.
    fn run_entry_in(&self, entry: &CaseEntry, slot: Option<&mut Option<ReusedDriver>>) -> EntryRun {
        let case = match &entry.case {
            Ok(case) => case,
            Err(error) => {
                let result = CaseResult {
                    id: entry.id.clone(),
                    summary: entry.summary(),
                    spec: Vec::new(),
                    rules: Vec::new(),
                    verdict: Verdict::Error,
                    blame: Blame::Kit,
                    rule: Some(RULE_KIT.to_string()),
                    why: Some(error.to_string()),
                    interpretation: None,
                    duration_ms: 0,
                    transcript: Vec::new(),
                    flaky: Vec::new(),
                    also_broken: Vec::new(),
                };
                return (result, None);
            }
        };
        let run = run_case(case, &self.env, slot);
        if let Some(note) = &run.early_exit {
            let mut early = self.early_exit.lock().unwrap_or_else(|p| p.into_inner());
            early
                .0
                .get_or_insert_with(|| format!("case {}, {note}", case.id));
        }
        // A host that claims what a not-applicable group is about is judged on it.
        let dialect = self
            .env
            .dialect
            .for_claims(&claimed(run.handshake.as_ref()));
        let (findings, dropped) = dialect.filter(&run.findings);
        // Not applicable when what the case is about (its first rule) is; a dropped finding of
        // another of its rules leaves the verdict to the rest (noted in the transcript).
        let about_not_applicable =
            dialect.mode(case.first_rule()).0 == crate::dialect::Mode::NotApplicable;
        let not_applicable = (findings.is_empty() && about_not_applicable)
            .then(|| dropped.first().cloned())
            .flatten();
        let decision = decide(
            &findings,
            run.skipped.as_deref().or(not_applicable.as_deref()),
        );
        let mut transcript = run.transcript;
        for (index, note) in dropped.iter().enumerate() {
            transcript.insert(index, format!("dialect: {note}"));
        }
        if run.findings.len() > 1 {
            transcript.insert(0, "findings:".to_string());
            for (index, finding) in run.findings.iter().enumerate() {
                transcript.insert(index + 1, format!("  {}: {}", finding.rule, finding.why));
            }
        }
        let result = CaseResult {
            id: case.id.clone(),
            summary: case.summary.clone(),
            spec: case.spec.clone(),
            rules: case.rules.clone(),
            verdict: decision.verdict,
            blame: decision.blame,
            rule: decision.rule,
            why: decision.why,
            interpretation: decision.interpretation,
            duration_ms: u64::try_from(run.duration.as_millis()).unwrap_or(u64::MAX),
            transcript,
            flaky: Vec::new(),
            also_broken: decision.also_broken,
        };
        (result, run.handshake)
    }

    /// Runs every selected case (`verify` times), applies the expectations, builds the report.
    pub fn run(&self) -> SuiteReport {
        self.run_observed(&|_| {}, &AtomicBool::new(false))
    }

    /// Checks the driver once before the corpus: it must start and answer a handshake. The
    /// error is an infrastructure error (exit 2) naming the command, its status and stderr tail.
    pub fn preflight(&self) -> Result<serde_json::Value, HarnessError> {
        self.preflight
            .get_or_init(|| {
                super::preflight::handshake(
                    &self.env.host,
                    self.config.time_scale,
                    &self.env.pass_env,
                )
                .map_err(HarnessError::Host)
            })
            .clone()
    }

    /// Says (through `say`) the first case's note of a driver that exited before its first
    /// reply, the first time it is called after such a case, and never again: a run calls it
    /// before it shows each case, so the note comes once, before every failure it explains.
    pub fn say_early_exit_once(&self, say: impl FnOnce(&str)) {
        let mut early = self.early_exit.lock().unwrap_or_else(|p| p.into_inner());
        if let (Some(note), false) = (&early.0, early.1) {
            say(note);
            early.1 = true;
        }
    }

    /// Whether each worker keeps one driver for its cases: the driver claims `reuse` (in the
    /// pre-flight handshake) and `--driver-per-case` was not given.
    pub fn reuses_drivers(&self) -> bool {
        !self.config.driver_per_case && self.preflight().is_ok_and(|reply| claims_reuse(&reply))
    }

    /// [`Suite::run`], calling `observer` as each case finishes; once `stop` is set no further
    /// case starts, and the report holds the cases that ran (in id order).
    pub fn run_observed(&self, observer: CaseObserver, stop: &AtomicBool) -> SuiteReport {
        let started = Instant::now();
        let mut handshake = None;
        let mut rounds: Vec<Vec<CaseResult>> = Vec::new();
        for _ in 0..self.config.verify {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let (results, first_handshake) = self.run_round(observer, stop);
            if handshake.is_none() {
                handshake = first_handshake;
            }
            rounds.push(results);
        }
        let mut cases = merge_rounds(rounds);
        for case in &mut cases {
            self.apply_expectations(case);
        }
        SuiteReport {
            kit_version: env!("CARGO_PKG_VERSION").to_string(),
            corpus_hash: self.corpus_hash.clone(),
            host: HostInfo {
                name: self.host_name(),
                command: dsh_results::output::secrets::redact_command(&self.config.host),
                handshake: handshake.unwrap_or(serde_json::Value::Null),
            },
            runtime_variant: self.config.variant.name.clone(),
            cases,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            rerun_args: Vec::new(),
            corpus: Some(self.corpus.clone()),
            surface: None,
            dialect: (!self.env.dialect.is_gen1()).then(|| self.env.dialect.name.clone()),
            rerun_as: None,
        }
    }

    /// The whole corpus the selection came from.
    pub fn corpus(&self) -> &CorpusInfo {
        &self.corpus
    }

    fn apply_expectations(&self, case: &mut CaseResult) {
        if let Some(expectations) = &self.config.expectations {
            expectations.apply(case);
        }
    }

    /// One pass over the selection on `jobs` threads, the longest expected waits first; results
    /// in id order (cases not started before `stop` was set are left out).
    fn run_round(
        &self,
        observer: CaseObserver,
        stop: &AtomicBool,
    ) -> (Vec<CaseResult>, Option<serde_json::Value>) {
        let mut schedule: Vec<usize> = (0..self.entries.len()).collect();
        schedule.sort_by_key(|&index| std::cmp::Reverse(self.entries[index].expected_wait()));
        let next = AtomicUsize::new(0);
        let slots: Mutex<Vec<Option<EntryRun>>> = Mutex::new(vec![None; self.entries.len()]);
        let workers = self.config.jobs.get().min(self.entries.len()).max(1);
        let reuse = self.reuses_drivers();
        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| {
                    let mut slot: Option<ReusedDriver> = None;
                    while let Some(&index) = schedule.get(next.fetch_add(1, Ordering::SeqCst)) {
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        let entry = &self.entries[index];
                        let mut result = self.run_entry_in(entry, reuse.then_some(&mut slot));
                        if super::driver::interrupted() {
                            result.0.mark_interrupted("its driver");
                        }
                        let mut shown = result.0.clone();
                        self.apply_expectations(&mut shown);
                        observer(&shown);
                        slots
                            .lock()
                            .unwrap_or_else(|poisoned| poisoned.into_inner())[index] = Some(result);
                    }
                    if let Some(kept) = slot {
                        kept.finish(self.config.time_scale.scale(Duration::from_secs(5)));
                    }
                });
            }
        });
        let slots = slots
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut handshake = None;
        let mut results = Vec::with_capacity(slots.len());
        for (result, case_handshake) in slots.into_iter().flatten() {
            if handshake.is_none() {
                handshake = case_handshake;
            }
            results.push(result);
        }
        (results, handshake)
    }
}

/// Runs the suite: the library API reports and matrices call.
pub fn run_suite(config: &SuiteConfig) -> Result<SuiteReport, HarnessError> {
    Ok(Suite::prepare(config)?.run())
}

/// Merges `--verify` rounds: a case whose verdicts differ is `fail`, with every verdict listed.
fn merge_rounds(rounds: Vec<Vec<CaseResult>>) -> Vec<CaseResult> {
    let mut rounds = rounds.into_iter();
    let Some(mut merged) = rounds.next() else {
        return Vec::new();
    };
    let later: Vec<Vec<CaseResult>> = rounds.collect();
    for case in merged.iter_mut() {
        let repeats: Vec<&CaseResult> = later
            .iter()
            .filter_map(|round| round.iter().find(|repeat| repeat.id == case.id))
            .collect();
        let verdicts: Vec<Verdict> = std::iter::once(case.verdict)
            .chain(repeats.iter().map(|repeat| repeat.verdict))
            .collect();
        if verdicts.iter().all(|verdict| *verdict == case.verdict) {
            continue;
        }
        if let Some(failing) = std::iter::once(&*case)
            .chain(repeats.iter().copied())
            .find(|result| result.verdict != Verdict::Pass)
        {
            let (rule, why, transcript) = (
                failing.rule.clone(),
                failing.why.clone(),
                failing.transcript.clone(),
            );
            case.rule = rule.or_else(|| case.rules.first().cloned());
            case.transcript = transcript;
            let seen: Vec<&str> = verdicts.iter().map(|verdict| verdict.as_str()).collect();
            case.why = Some(format!(
                "flaky over {} runs ({}): {}",
                verdicts.len(),
                seen.join(", "),
                why.unwrap_or_else(|| "verdicts differ".to_string())
            ));
        }
        case.verdict = Verdict::Fail;
        case.blame = Blame::Host;
        case.flaky = verdicts;
    }
    merged
}

fn default_host_name(host: &[String]) -> String {
    let program = host.first().map(String::as_str).unwrap_or("host");
    let name = Path::new(program)
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| program.to_string());
    if name == "dsh-host-driver" {
        "reference".to_string()
    } else {
        name
    }
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The program's path: as given when it holds a `/`, else searched on `PATH`.
/// A note for a host command holding `$NAME`: every step of the kit starts a host the same way,
/// split like a shell splits words and run without a shell, so nothing is expanded (the GitHub
/// Action's `host: node $GITHUB_WORKSPACE/driver.mjs` names a file called `$GITHUB_WORKSPACE`).
pub fn unexpanded_hint(host: &[String]) -> String {
    match host.iter().find(|word| word.contains('$')) {
        Some(word) => format!(
            "\n  note: {word:?} holds a `$`, but the host command runs without a shell and nothing is \
             expanded: write the value itself (in a workflow: ${{{{ github.workspace }}}}, not \
             $GITHUB_WORKSPACE)"
        ),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(id: &str, verdict: Verdict) -> CaseResult {
        CaseResult {
            id: id.into(),
            summary: String::new(),
            spec: vec![],
            rules: vec!["s6.rule".into()],
            verdict,
            blame: Blame::None,
            rule: None,
            why: None,
            interpretation: None,
            duration_ms: 0,
            transcript: vec![],
            flaky: vec![],
            also_broken: vec![],
        }
    }

    #[test]
    fn differing_rounds_are_flaky() {
        let rounds = vec![
            vec![result("a.x", Verdict::Pass), result("a.y", Verdict::Pass)],
            vec![result("a.x", Verdict::Fail), result("a.y", Verdict::Pass)],
        ];
        let merged = merge_rounds(rounds);
        assert_eq!(merged[0].verdict, Verdict::Fail);
        assert_eq!(merged[0].flaky, vec![Verdict::Pass, Verdict::Fail]);
        assert!(merged[0]
            .why
            .as_deref()
            .is_some_and(|why| why.starts_with("flaky over 2 runs (pass, fail)")));
        assert_eq!(merged[1].verdict, Verdict::Pass);
        assert!(merged[1].flaky.is_empty());
    }

    #[test]
    fn variants_and_names() {
        assert_eq!(
            Variant::named("dsh-0.1.8")
                .env
                .get("FAKE_DSH_VERSION")
                .map(String::as_str),
            Some("0.1.8")
        );
        assert!(Variant::named("default").env.is_empty());
        assert_eq!(
            default_host_name(&["/x/dsh-host-driver".into()]),
            "reference"
        );
        assert_eq!(
            default_host_name(&["node".into(), "host.js".into()]),
            "node"
        );
    }
}
