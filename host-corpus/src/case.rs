//! Running one case: build its world, start the driver, handshake, play the steps in order with
//! their expectations and the global per-run checks, then shut down and clean up. Produces
//! findings; [`super::verdict`] turns them into the verdict.

use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::checks::{self, Violation};
use super::driver::{clip, contains, Driver, DriverError, DriverSpec, MAX_DRIVER_STDERR};
use super::expect::{self, CodeJudge, Miss};
use super::transcript::Transcript;
use super::verdict::*;
use super::world::World;
use dsh_engine::journal::{self, Entry, Journal};
use dsh_engine::leftovers::{self, CASE_TOKEN_ENV};
use dsh_engine::supervisor;
use dsh_formats::case::{
    BundleKind, Capability, Case, DiscoverExpect, ExpectRules, Interpretations, RestartAction,
    RunExpect, RunStep, SetupExpect, Step,
};
use dsh_results::codes::Vocabulary;
use dsh_results::output::secrets::display_command;

use checks::MIN_SCANNED_PROMPT;

mod crash;
mod early_exit;
mod reuse;
mod runs;

pub use reuse::{claims_reuse, ReusedDriver};

mod models;

/// How long a graceful driver shutdown may take, before `--time-scale`.
const SHUTDOWN_BOUND_MS: u64 = 5_000;
/// How long the members of a killed driver group may take to die before the survivors carrying
/// the case's token count as left behind.
const LEFTOVER_GRACE: Duration = Duration::from_millis(200);

/// What a case runs against.
#[derive(Debug, Clone)]
pub struct CaseEnv {
    pub host: Vec<String>,
    pub fake_dsh: PathBuf,
    pub fake_dsh_env: BTreeMap<String, String>,
    pub time_scale: dsh_engine::timing::TimeScale,
    /// Rule id -> interpretation entry, for the catalog's `interpretation` rules.
    pub interpreted_rules: BTreeMap<String, String>,
    /// The caller's variables the driver gets besides the allowed ones (`dsh_engine::child_env`).
    pub pass_env: Vec<String>,
    /// The dialect the host is judged by: the profile its world installs, its rule modes.
    pub dialect: std::sync::Arc<super::dialect::Dialect>,
}

impl CaseEnv {
    fn scaled(&self, ms: u64) -> Duration {
        self.time_scale.scale_ms(ms)
    }
}

/// Everything a case run produced.
#[derive(Debug)]
pub struct CaseRun {
    pub findings: Vec<Finding>,
    /// Why the case was skipped, when it was.
    pub skipped: Option<String>,
    pub handshake: Option<Value>,
    pub transcript: Vec<String>,
    pub duration: Duration,
    /// When the driver exited before its first reply: the note the run says once, first (what
    /// happened, the rule, the stderr's tail; `case::early_exit`).
    pub early_exit: Option<String>,
}

/// Runs `case` against the host in a driver of its own; with a `slot`, in the worker's reused
/// driver (capability `reuse`): taken from the slot (or started) and put back when the case
/// ended cleanly.
pub fn run_case(case: &Case, env: &CaseEnv, slot: Option<&mut Option<ReusedDriver>>) -> CaseRun {
    let started = Instant::now();
    // A runtime that detaches daemons from its group needs the per-case supervisor, which only a
    // driver of the case's own has: such a case never runs in the reused driver.
    let reuse = slot.is_some() && !reuse::detaches_daemons(case);
    let mut slot = if reuse { slot } else { None };
    let pooled = slot.as_mut().and_then(|slot| slot.take());
    let mut runner = Runner {
        case,
        env,
        deadline: started + env.scaled(case.timeout_ms()),
        findings: Vec::new(),
        transcript: Transcript::default(),
        handshake: None,
        conversations: HashMap::new(),
        after_retry: std::collections::HashSet::new(),
        run_pids: Vec::new(),
        turn: 0,
        vocabulary: None,
        canary: String::new(),
        reuse,
        pooled,
        reusable: false,
        tree_root: None,
        fsize_limit: None,
        early_exit: None,
    };
    let skipped = runner.run();
    if let Some(slot) = slot {
        *slot = runner.pooled.take();
    }
    CaseRun {
        findings: runner.findings,
        skipped,
        handshake: runner.handshake,
        transcript: runner.transcript.into_lines(),
        duration: started.elapsed(),
        early_exit: runner.early_exit,
    }
}

/// The capabilities a driver's handshake reply claims (none without a reply).
pub fn claimed(handshake: Option<&Value>) -> Vec<String> {
    handshake
        .and_then(|handshake| handshake.get("capabilities"))
        .and_then(Value::as_array)
        .map(|capabilities| {
            capabilities
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The capabilities a case needs: its `requires`, plus what its steps imply (docs/host-driver.md,
/// "Capabilities").
pub fn needed_capabilities(case: &Case) -> Vec<Capability> {
    let mut needed = case.requires.clone();
    let mut runs_per_conversation: HashMap<String, usize> = HashMap::new();
    let mut run_needs = |run: &RunStep| {
        let runs = runs_per_conversation
            .entry(run.conversation.clone())
            .or_default();
        *runs += 1;
        let cancel = run.cancel_on.is_some().then_some(Capability::Cancel);
        let sessions = (*runs > 1).then_some(Capability::Sessions);
        let models = run.picks_model().then_some(Capability::Models);
        cancel
            .into_iter()
            .chain(sessions)
            .chain(models)
            .collect::<Vec<_>>()
    };
    for step in &case.steps {
        let implied: Vec<Capability> = match step {
            Step::Discover(_) => vec![Capability::Discover],
            Step::Models(_) => vec![Capability::Models],
            Step::Setup { .. } => vec![Capability::Setup],
            Step::Restart(_) => vec![Capability::Restart],
            Step::CorruptSession { .. } | Step::DeleteSession { .. } | Step::TruncateHostData => {
                vec![Capability::Sessions]
            }
            Step::Run { run, .. } => run_needs(run),
            Step::CrashMidSave(run) => [Capability::Restart, Capability::Sessions]
                .into_iter()
                .chain(run_needs(run))
                .collect(),
            Step::Concurrent(runs) => std::iter::once(Capability::Concurrent)
                .chain(runs.iter().flat_map(|one| run_needs(&one.run)))
                .collect(),
            Step::RuntimeVersion(_) => Vec::new(),
        };
        for capability in implied {
            if !needed.contains(&capability) {
                needed.push(capability);
            }
        }
    }
    needed.sort();
    needed
}

struct Runner<'a> {
    case: &'a Case,
    env: &'a CaseEnv,
    deadline: Instant,
    findings: Vec<Finding>,
    transcript: Transcript,
    handshake: Option<Value>,
    /// Per conversation: the last session id an outcome reported.
    conversations: HashMap<String, String>,
    /// Conversations whose last run was a fresh-session retry (a dialect's session policy).
    after_retry: std::collections::HashSet<String>,
    /// Pids of earlier runs' stdio processes.
    run_pids: Vec<i32>,
    turn: u64,
    /// The code vocabulary the driver declared in its handshake.
    vocabulary: Option<Vocabulary>,
    /// The world's canary credential, once the world exists.
    canary: String,
    /// The case runs in a reused driver (the suite's driver claims `reuse`).
    reuse: bool,
    /// The reused driver: the worker's before the case starts, and after it when it is kept.
    pooled: Option<ReusedDriver>,
    /// The current driver is the reused one and may serve the next case.
    reusable: bool,
    /// The per-case supervisor the current driver runs under (`supervisor::wrap`), if any.
    tree_root: Option<i32>,
    /// The file-size limit the next driver starts under (a `crash_mid_save` step).
    fsize_limit: Option<u64>,
    /// The run's note of a driver gone before its first reply (`early_exit`).
    early_exit: Option<String>,
}

/// A step could not go on: the case stops (the driver is killed).
struct Abort;

impl<'a> Runner<'a> {
    fn kit(&mut self, why: impl Into<String>) {
        self.findings
            .push(Finding::new(FindingKind::Kit, RULE_KIT, why));
    }

    /// Records a finding against the host; a rule of kind `interpretation` makes it soft.
    fn host(&mut self, kind: FindingKind, rule: &str, why: impl Into<String>) {
        let entry = self.env.interpreted_rules.get(rule).map(String::as_str);
        self.findings
            .push(Finding::new(kind, rule, why).interpreted(entry));
    }

    fn violations(&mut self, violations: Vec<Violation>, during: &str) {
        for violation in violations {
            self.host(
                FindingKind::Global,
                violation.rule,
                format!("{during}: {}", violation.why),
            );
        }
    }

    /// Records the step's missed expectations, each blamed on the rule the step's `rules` names
    /// for its member, else on the case's first rule; an expectation the case (or the kit) marks
    /// as an interpretation makes only an informational finding.
    fn misses(
        &mut self,
        misses: Vec<Miss>,
        interpretations: &Interpretations,
        rules: &ExpectRules,
    ) {
        for miss in misses {
            let rule = rules
                .get(miss.member)
                .map_or_else(|| self.case.first_rule(), String::as_str)
                .to_string();
            let entry = interpretations
                .get(miss.member)
                .map(String::as_str)
                .or(miss.interpretation);
            let rule_entry = self.env.interpreted_rules.get(&rule).map(String::as_str);
            self.findings.push(
                Finding::new(FindingKind::Expectation, &rule, miss.why)
                    .interpreted(entry.or(rule_entry)),
            );
        }
    }

    fn expectation(&mut self, why: impl Into<String>) {
        let rule = self.case.first_rule().to_string();
        self.host(FindingKind::Expectation, &rule, why);
    }

    fn codes(&self) -> CodeJudge<'_> {
        CodeJudge {
            vocabulary: self.vocabulary.as_ref(),
        }
    }

    /// Records a driver error as the right finding.
    fn driver_error(&mut self, error: DriverError, during: &str) {
        let first_rule = self.case.first_rule().to_string();
        match error {
            DriverError::Kit(why) => self.kit(why),
            DriverError::Invalid(why) | DriverError::Io(why) => {
                self.host(FindingKind::HostFatal, RULE_DRIVER_REPLY_VALID, why)
            }
            DriverError::Timeout(why) => {
                let budget = self.env.scaled(self.case.timeout_ms()).as_millis();
                self.host(
                    FindingKind::HostFatal,
                    &first_rule,
                    format!("{during}: {why} within the case's {budget} ms; the driver's process group was killed"),
                )
            }
            DriverError::Exited(why) => self.host(
                FindingKind::HostFatal,
                &first_rule,
                format!("{during}: {why}"),
            ),
            DriverError::ExitedBeforeReply(exit) => self.exited_before_reply(exit, during),
        }
    }

    /// The whole case; returns why it was skipped, if it was.
    fn run(&mut self) -> Option<String> {
        let watchdog_secs = (self.env.scaled(self.case.timeout_ms()).as_secs() + 30).max(60);
        let mut world = match World::create(
            self.case,
            &self.env.dialect.profile,
            &self.env.fake_dsh,
            &self.env.fake_dsh_env,
            watchdog_secs,
        ) {
            Ok(world) => world,
            Err(e) => {
                self.kit(format!("cannot build the case's temp world: {e}"));
                return None;
            }
        };
        self.canary = world.canary.clone();
        let journal = Journal::new(&world.journal());
        let mut driver = match self.reuse {
            true => self.reused_driver(&world),
            false => self.start_driver(&world),
        };
        let skipped = driver.as_ref().and_then(|_| self.missing_capabilities());
        if skipped.is_none() {
            self.play_steps(&mut driver, &mut world, &journal);
        }
        let clean = !self
            .findings
            .iter()
            .any(|finding| matches!(finding.kind, FindingKind::HostFatal | FindingKind::Kit));
        if let Some(active) = driver.take_if(|_| self.reusable && clean) {
            self.keep_driver(active, &world, &journal, skipped.is_none());
        }
        if let Some(mut active) = driver.take() {
            let shutdown_bound = self.env.scaled(SHUTDOWN_BOUND_MS);
            if let Err(error) = active.shutdown(shutdown_bound, &mut self.transcript) {
                let error = match error {
                    DriverError::Timeout(why) | DriverError::Exited(why) => {
                        DriverError::Invalid(format!("shutdown: {why}"))
                    }
                    other => other,
                };
                self.driver_error(error, "shutdown");
            } else if skipped.is_none() {
                self.check_all_reaped(&world, &journal, "after the driver exited");
            }
            self.sweep_leftovers(&world, &journal);
            self.collect_stderr_hits(&active, true);
        }
        // A driver that never completed its handshake is gone too (dropped, group killed).
        self.sweep_leftovers(&world, &journal);
        self.finish(&world, &journal);
        skipped
    }

    /// Why the case is skipped: a capability it needs that the driver did not claim.
    fn missing_capabilities(&self) -> Option<String> {
        let claimed = self.claimed_capabilities();
        let missing: Vec<&str> = needed_capabilities(self.case)
            .into_iter()
            .map(Capability::as_str)
            .filter(|capability| !claimed.iter().any(|claim| claim == capability))
            .collect();
        (!missing.is_empty()).then(|| {
            format!(
                "the driver does not claim the capability {}",
                missing.join(", ")
            )
        })
    }

    /// Plays the steps in order until one aborts the case (its driver is then killed).
    fn play_steps(&mut self, driver: &mut Option<Driver>, world: &mut World, journal: &Journal) {
        let case: &'a Case = self.case;
        for (index, step) in case.steps.iter().enumerate() {
            let Some(active) = driver.as_mut() else { break };
            self.transcript
                .push(format!("== step {index}: {}", step.name()));
            let result = match step {
                Step::Discover(expect) => self.discover(active, journal, index, expect),
                Step::Models(expect) => self.models(active, journal, index, expect),
                Step::Setup { bundle, expect } => {
                    self.setup(active, world, journal, index, *bundle, expect)
                }
                Step::Run { run, expect } => {
                    self.play_runs(active, world, journal, index, &[(run, expect)])
                }
                Step::Concurrent(runs) => {
                    let runs: Vec<(&RunStep, &RunExpect)> =
                        runs.iter().map(|one| (&one.run, &*one.expect)).collect();
                    self.play_runs(active, world, journal, index, &runs)
                }
                Step::Restart(action) => self.restart(driver, world, journal, action),
                Step::RuntimeVersion(version) => {
                    let done = world.set_runtime_version(version);
                    self.kit_step(done, "cannot rewrite bin/dsh")
                }
                Step::CorruptSession { conversation } => {
                    self.touch_session(world, conversation, true)
                }
                Step::DeleteSession { conversation } => {
                    self.touch_session(world, conversation, false)
                }
                Step::TruncateHostData => self.truncate_host_data(world),
                Step::CrashMidSave(run) => self.crash_mid_save(driver, world, journal, index, run),
            };
            if result.is_err() {
                if let Some(active) = driver.as_mut() {
                    active.kill();
                    self.sweep_leftovers(world, journal);
                    self.collect_stderr_hits(active, true);
                }
                *driver = None;
                break;
            }
        }
    }

    fn kit_step<E: std::fmt::Display>(
        &mut self,
        done: Result<(), E>,
        what: &str,
    ) -> Result<(), Abort> {
        done.map_err(|e| {
            self.kit(format!("{what}: {e}"));
            Abort
        })
    }

    /// Stops the driver (gracefully, or with SIGKILL to its process group when `kill` is set: a
    /// crash right after its last save) and starts a new one (with a new data dir when asked).
    fn restart(
        &mut self,
        driver: &mut Option<Driver>,
        world: &mut World,
        journal: &Journal,
        action: &RestartAction,
    ) -> Result<(), Abort> {
        let Some(active) = driver.as_mut() else {
            return Err(Abort);
        };
        // The next driver is the case's own (started with its env), never kept for another case.
        self.reusable = false;
        let stopped = if action.kill {
            self.transcript
                .push("restart: SIGKILL to the driver's process group".to_string());
            active.kill();
            active.wait_stderr_drained(self.env.scaled(SHUTDOWN_BOUND_MS).min(self.remaining()));
            Ok(())
        } else {
            let bound = self.env.scaled(SHUTDOWN_BOUND_MS).min(self.remaining());
            active.shutdown(bound, &mut self.transcript)
        };
        self.sweep_leftovers(world, journal);
        self.collect_stderr_hits(active, true);
        if let Err(error) = stopped {
            self.driver_error(error, "restart (shutdown of the first driver)");
            return Err(Abort);
        }
        if action.fresh_data_dir {
            let moved = world.fresh_host_data();
            self.kit_step(moved, "cannot create a fresh RUNTIME_DATA_DIR")?;
            self.transcript.push(format!(
                "restart: RUNTIME_DATA_DIR is now {}",
                world.host_data().display()
            ));
        }
        *driver = self.start_driver(world);
        driver.as_ref().map(|_| ()).ok_or(Abort)
    }

    fn remaining(&self) -> Duration {
        self.deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1))
    }

    fn driver_spec(&self, world: &World) -> DriverSpec {
        let path = std::env::var_os("PATH")
            .map(|path| path.to_string_lossy().into_owned())
            .unwrap_or_default();
        let path = if path.is_empty() {
            world.bin_dir().display().to_string()
        } else {
            format!("{}:{path}", world.bin_dir().display())
        };
        let mut env = dsh_engine::child_env::inherited(&self.env.pass_env);
        env.extend([
            ("DSH_BIN".to_string(), world.dsh().display().to_string()),
            ("PATH".to_string(), path),
            (
                "DSH_HOME".to_string(),
                world.dsh_home().display().to_string(),
            ),
            (
                "RUNTIME_DATA_DIR".to_string(),
                world.host_data().display().to_string(),
            ),
            ("DEEPSEEK_API_KEY".to_string(), world.canary.clone()),
            ("DSH_CONFORMANCE".to_string(), "1".to_string()),
            (CASE_TOKEN_ENV.to_string(), world.case_token.clone()),
        ]);
        let mut stderr_needles = vec![
            (
                "the canary credential".to_string(),
                world.canary.clone().into_bytes(),
            ),
            (
                "the bootstrap context".to_string(),
                world.bootstrap_marker.clone().into_bytes(),
            ),
        ];
        for step in &self.case.steps {
            if let Step::Run { run, .. } | Step::CrashMidSave(run) = step {
                if run.prompt.len() >= MIN_SCANNED_PROMPT {
                    stderr_needles.push((
                        format!("the prompt {:?}", run.prompt),
                        run.prompt.clone().into_bytes(),
                    ));
                }
            }
        }
        DriverSpec {
            command: supervisor::wrap(&self.env.host, &world.supervisor_report()),
            cwd: world.root.clone(),
            env,
            stderr_needles,
            fsize_limit: self.fsize_limit,
        }
    }

    /// Starts the case's own driver (with the case's env) and completes its handshake.
    fn start_driver(&mut self, world: &World) -> Option<Driver> {
        let spec = self.driver_spec(world);
        let canary = self.stdout_needles(world);
        self.transcript.push(format!(
            "== start driver: {}",
            display_command(&spec.command)
        ));
        match Driver::start(&spec, canary) {
            Ok(driver) => {
                let supervised =
                    spec.command.get(1).map(String::as_str) == Some(supervisor::SUBCOMMAND);
                self.tree_root = supervised.then(|| driver.pid());
                self.handshake(driver)
            }
            Err(error) => {
                self.driver_error(error, "starting the driver");
                None
            }
        }
    }

    /// What the driver's stdout must never hold.
    fn stdout_needles(&self, world: &World) -> Vec<(String, Vec<u8>)> {
        vec![(
            "the canary credential".to_string(),
            world.canary.clone().into_bytes(),
        )]
    }

    /// Completes a started driver's handshake (reading its code vocabulary).
    fn handshake(&mut self, mut driver: Driver) -> Option<Driver> {
        let request = json!({"v": 1, "type": "handshake", "kit": "dsh-conformance", "kit_version": env!("CARGO_PKG_VERSION")});
        let reply = driver
            .send(&request, &mut self.transcript)
            .and_then(|()| driver.recv(self.deadline, "the handshake reply", &mut self.transcript));
        let why = match reply {
            Ok(reply) if reply.get("type").and_then(Value::as_str) == Some("handshake") => {
                match Vocabulary::from_handshake(&reply) {
                    Ok(vocabulary) => {
                        self.vocabulary = vocabulary;
                        self.handshake.get_or_insert(reply);
                        return Some(driver);
                    }
                    Err(why) => why,
                }
            }
            Ok(reply) => format!("the driver answered handshake with {reply}"),
            Err(DriverError::Timeout(why) | DriverError::Exited(why)) => {
                format!("handshake: {why}")
            }
            Err(error) => {
                self.driver_error(error, "handshake");
                self.handshake_stderr(&mut driver);
                return None;
            }
        };
        let why = format!("{why}{}", self.handshake_stderr(&mut driver));
        self.host(FindingKind::HostFatal, RULE_DRIVER_REPLY_VALID, why);
        None
    }

    /// After a failed handshake: the driver's exit status and the end of its stderr (the whole
    /// kept stderr goes to the transcript, scanned like any driver's), to append to the why.
    fn handshake_stderr(&mut self, driver: &mut Driver) -> String {
        let status = driver.exit_status_within(Duration::from_millis(200));
        driver.kill();
        self.collect_stderr_hits(driver, true);
        let kept = String::from_utf8_lossy(&driver.stderr().kept).into_owned();
        let lines: Vec<&str> = kept
            .lines()
            .filter(|line| !line.trim().is_empty())
            .collect();
        match lines.len() {
            0 => format!(" ({status}; its stderr is empty)"),
            n => {
                let tail = lines[n.saturating_sub(3)..].join(" / ");
                format!(" ({status}; its stderr ends: {})", clip(&tail, 400))
            }
        }
    }

    fn claimed_capabilities(&self) -> Vec<String> {
        claimed(self.handshake.as_ref())
    }

    /// After a driver's process group was killed: every process still carrying the case's token
    /// escaped it; kill them, and blame the host for those that are not journaled fake-dsh
    /// processes (the per-step journal checks already report those).
    fn sweep_leftovers(&mut self, world: &World, journal: &Journal) {
        let killed = leftovers::sweep_case(
            &world.case_token,
            &world.supervisor_report(),
            LEFTOVER_GRACE,
            Duration::from_secs(2),
        );
        if killed.is_empty() {
            return;
        }
        let journaled = journal
            .read()
            .map(|entries| journal::pids(&entries))
            .unwrap_or_default();
        let escaped: Vec<String> = killed
            .iter()
            .filter(|leftover| !journaled.contains(&leftover.pid))
            .map(ToString::to_string)
            .collect();
        let all: Vec<String> = killed.iter().map(ToString::to_string).collect();
        self.transcript.push(format!(
            "harness: killed {} leftover process(es) of the case's tree (its supervisor's orphans, or carrying {CASE_TOKEN_ENV}): {}",
            killed.len(),
            all.join(", ")
        ));
        if !escaped.is_empty() {
            self.host(
                FindingKind::Global,
                RULE_PROCESS_TREE_REAPED,
                format!(
                    "the driver left {} process(es) running outside its process group after it was stopped: {}; the harness killed them",
                    escaped.len(),
                    escaped.join(", ")
                ),
            );
        }
    }

    /// The driver's stderr (what it kept, its size, needles found) and stdout leaks; `stopped`:
    /// the driver was stopped, so its stderr is read to its end first.
    fn collect_stderr_hits(&mut self, driver: &Driver, stopped: bool) {
        if stopped {
            driver.wait_stderr_drained(Duration::from_millis(500));
        }
        let (hits, total) = {
            let capture = driver.stderr();
            if !capture.kept.is_empty() {
                let kept = String::from_utf8_lossy(&capture.kept).into_owned();
                self.transcript
                    .push(format!("driver stderr ({} bytes): {kept}", capture.total));
            }
            (capture.hits.clone(), capture.total)
        };
        if total > MAX_DRIVER_STDERR {
            self.host(
                FindingKind::Global,
                RULE_STDERR_BOUNDED,
                format!(
                    "the driver wrote {total} bytes to its stderr, over the {MAX_DRIVER_STDERR} byte bound on a driver's diagnostics"
                ),
            );
        }
        for hit in hits {
            let rule = if hit == "the canary credential" {
                RULE_NO_CREDENTIAL_LEAK
            } else {
                RULE_NO_PROMPT_IN_STDERR
            };
            self.host(
                FindingKind::Global,
                rule,
                format!("the driver's stderr holds {hit}"),
            );
        }
        for hit in driver.stdout_hits.clone() {
            self.host(
                FindingKind::Global,
                RULE_NO_CREDENTIAL_LEAK,
                format!("the driver's stdout holds {hit}"),
            );
        }
    }

    /// Journal entries from line `from` on (a kit finding when it cannot be read).
    fn journal_since(&mut self, journal: &Journal, from: usize) -> Vec<Entry> {
        match journal.read() {
            Ok(entries) => entries
                .into_iter()
                .filter(|entry| entry.line >= from)
                .collect(),
            Err(why) => {
                self.kit(why);
                Vec::new()
            }
        }
    }

    fn journal_length(&mut self, journal: &Journal) -> usize {
        match journal.read() {
            Ok(entries) => entries.last().map_or(0, |entry| entry.line + 1),
            Err(why) => {
                self.kit(why);
                usize::MAX
            }
        }
    }

    /// Sends `request` and waits for its one reply of kind `expected`.
    fn request(
        &mut self,
        driver: &mut Driver,
        request: &Value,
        expected: &str,
        capability: Option<&str>,
    ) -> Result<Value, Abort> {
        let id = request.get("id").and_then(Value::as_str).unwrap_or("");
        if let Err(error) = driver.send(request, &mut self.transcript) {
            self.driver_error(error, &format!("request {id}"));
            return Err(Abort);
        }
        self.await_reply(driver, id, expected, capability)
    }

    /// Waits for the one reply of kind `expected` to request `id`.
    fn await_reply(
        &mut self,
        driver: &mut Driver,
        id: &str,
        expected: &str,
        capability: Option<&str>,
    ) -> Result<Value, Abort> {
        let reply = match driver.recv(
            self.deadline,
            &format!("{expected} for {id}"),
            &mut self.transcript,
        ) {
            Ok(reply) => reply,
            Err(error) => {
                self.driver_error(error, &format!("request {id}"));
                return Err(Abort);
            }
        };
        let kind = reply.get("type").and_then(Value::as_str).unwrap_or("");
        let reply_id = reply.get("id").and_then(Value::as_str);
        if kind == "error" && reply_id.is_none_or(|reply_id| reply_id == id) {
            let message = reply.get("message").and_then(Value::as_str).unwrap_or("");
            let (kind, rule, why) = match capability {
                Some(capability) => (
                    FindingKind::Untestable,
                    self.case.first_rule().to_string(),
                    format!("the driver claims {capability} but rejected request {id}: {message}"),
                ),
                None => (
                    FindingKind::HostFatal,
                    RULE_DRIVER_REPLY_VALID.to_string(),
                    format!("the driver rejected request {id}: {message}"),
                ),
            };
            self.host(kind, &rule, why);
            return Err(Abort);
        }
        if kind != expected || reply_id != Some(id) {
            self.host(
                FindingKind::HostFatal,
                RULE_DRIVER_REPLY_VALID,
                format!(
                    "expected {expected} for {id}, the driver sent {kind} for {}",
                    reply_id.unwrap_or("no id")
                ),
            );
            return Err(Abort);
        }
        Ok(reply)
    }

    fn discover(
        &mut self,
        driver: &mut Driver,
        journal: &Journal,
        index: usize,
        expect: &DiscoverExpect,
    ) -> Result<(), Abort> {
        let id = format!("d{index}");
        let from = self.journal_length(journal);
        let request = json!({"v": 1, "type": "discover", "id": id});
        let reply = self.request(driver, &request, "discovered", Some("discover"))?;
        self.check_step_processes(journal, from, "discover");
        let expect = self.env.dialect.discover_expect(self.case, expect);
        let misses = expect::discover(&expect, &reply, self.codes());
        self.misses(misses, &expect.interpretations, &Default::default());
        Ok(())
    }

    fn setup(
        &mut self,
        driver: &mut Driver,
        world: &World,
        journal: &Journal,
        index: usize,
        bundle: BundleKind,
        expect: &SetupExpect,
    ) -> Result<(), Abort> {
        let (tarball, manifest) = world.make_bundle(bundle, index).map_err(|e| {
            self.kit(format!("cannot build the setup bundle: {e}"));
            Abort
        })?;
        let id = format!("s{index}");
        let from = self.journal_length(journal);
        let request =
            json!({"v": 1, "type": "setup", "id": id, "tarball": tarball, "manifest": manifest});
        let reply = self.request(driver, &request, "setup_done", Some("setup"))?;
        let entries = self.check_step_processes(journal, from, "setup");
        let invoked = entries.iter().any(|entry| {
            entry.event() == "start" && entry.mode() == Some(dsh_formats::journal::Mode::Plugin)
        });
        let installed = (world.profile_file().is_file(), invoked);
        let misses = expect::setup(expect, &reply, installed, self.codes());
        self.misses(misses, &expect.interpretations, &Default::default());
        Ok(())
    }

    /// After a discover or setup: no canary in a `dsh` argv, nothing the step started alive.
    fn check_step_processes(&mut self, journal: &Journal, from: usize, during: &str) -> Vec<Entry> {
        let entries = self.journal_since(journal, from);
        let mut violations: Vec<Violation> = Vec::new();
        violations.extend(checks::canary_in_argv(&entries, &self.canary));
        if let Some(alive) = checks::still_alive(journal, &entries, self.tree_root) {
            violations.extend(checks::reaped_violations(
                &entries,
                &alive,
                "after the host's reply",
            ));
        }
        self.violations(violations, during);
        entries
    }

    fn touch_session(
        &mut self,
        world: &World,
        conversation: &str,
        corrupt: bool,
    ) -> Result<(), Abort> {
        let action = if corrupt {
            "corrupt_session"
        } else {
            "delete_session"
        };
        let Some(session) = self.conversations.get(conversation).cloned() else {
            self.expectation(format!(
                "{action}: the host never reported a session for conversation {conversation}"
            ));
            return Ok(());
        };
        let file = world.session_record(&session);
        let done = if corrupt {
            file.parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::write(&file, b"{\"corrupted\": [1, 2"))
        } else {
            match std::fs::remove_file(&file) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                other => other,
            }
        };
        self.transcript
            .push(format!("{action}: {}", file.display()));
        self.kit_step(done, &format!("{action}: cannot change {}", file.display()))
    }

    fn truncate_host_data(&mut self, world: &World) -> Result<(), Abort> {
        match world.truncate_host_data() {
            Ok(cut) => {
                let names: Vec<String> =
                    cut.iter().map(|path| path.display().to_string()).collect();
                self.transcript
                    .push(format!("truncate_host_data: cut {}", names.join(", ")));
                Ok(())
            }
            Err(e) => self.kit_step(Err(e), "cannot truncate the host data files"),
        }
    }

    /// At the end of the case (`when`: after the driver exited, or after the case's last reply
    /// from a driver kept for the next case): nothing the case started is alive.
    fn check_all_reaped(&mut self, world: &World, journal: &Journal, when: &str) {
        let entries = self.journal_since(journal, 0);
        let pids = journal::pids(&entries);
        let mut alive = checks::alive_after_grace(&pids, journal.path(), self.tree_root);
        // The supervisor's record, then the journal re-read after it: a process that journaled
        // its exit was exiting on its own when the supervisor's grace ran out, not left behind.
        let by_supervisor =
            leftovers::journaled_killed_by_supervisor(&world.supervisor_report(), &pids);
        let exited: Vec<i32> = self
            .journal_since(journal, 0)
            .iter()
            .filter(|entry| entry.event() == "exit")
            .filter_map(Entry::pid)
            .collect();
        for killed in by_supervisor
            .into_iter()
            .filter(|pid| !exited.contains(pid))
        {
            if !alive.contains(&killed) {
                alive.push(killed);
            }
        }
        for violation in checks::reaped_violations(&entries, &alive, when) {
            self.host(FindingKind::Global, violation.rule, violation.why);
        }
    }

    /// End of case: the host data dir holds no canary; the journal goes to the transcript;
    /// leftover processes are killed.
    fn finish(&mut self, world: &World, journal: &Journal) {
        let foreign = world.foreign_dsh_home_files();
        if !foreign.is_empty() {
            self.host(
                FindingKind::Global,
                RULE_HISTORY_IN_DSH_HOME,
                format!(
                    "the host wrote into DSH_HOME (the user's Harness home): {}",
                    foreign.join(", ")
                ),
            );
        }
        for (path, bytes) in world.host_data_files() {
            if contains(&bytes, world.canary.as_bytes()) {
                let name = path
                    .strip_prefix(&world.root)
                    .unwrap_or(&path)
                    .display()
                    .to_string();
                self.host(
                    FindingKind::Global,
                    RULE_NO_CREDENTIAL_LEAK,
                    format!("the host wrote the canary credential into {name}"),
                );
                break;
            }
        }
        if let Ok((entries, cut_off_tail)) = journal.read_with_cut_off_tail() {
            for entry in &entries {
                self.transcript
                    .push(format!("journal: {}", entry.to_json()));
            }
            if let Some(tail) = cut_off_tail {
                self.transcript.push(format!(
                    "journal: last entry cut off mid-write (its process was killed): {tail}"
                ));
            }
            journal::kill_leftovers(&journal::pids(&entries), journal.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_formats::case::parse_case;
    use std::path::Path;

    #[test]
    fn steps_imply_their_capabilities() {
        let case = parse_case(
            Path::new("cancel.example.json"),
            r#"{"v": 1, "id": "cancel.example", "summary": "s", "spec": ["10"], "rules": ["s10.x"],
                "steps": [
                  {"run": {"conversation": "c1", "prompt": "p"}},
                  {"concurrent": [
                    {"run": {"conversation": "c2", "prompt": "p"}},
                    {"run": {"conversation": "c1", "prompt": "p", "start_on": {"event": "status"},
                             "cancel_on": {"event": "text_delta"}}}]}
                ]}"#,
        )
        .expect("parses");
        assert_eq!(
            needed_capabilities(&case),
            vec![
                Capability::Sessions,
                Capability::Cancel,
                Capability::Concurrent
            ]
        );
        let alone = parse_case(
            Path::new("cancel.alone.json"),
            r#"{"v": 1, "id": "cancel.alone", "summary": "s", "spec": ["10"], "rules": ["s10.x"],
                "steps": [{"run": {"conversation": "c1", "prompt": "p"}}]}"#,
        )
        .expect("parses");
        assert!(needed_capabilities(&alone).is_empty());
    }
}
