//! Running one case: build its world, start the driver, handshake, play the steps in order with
//! their expectations and the global per-run checks, then shut down and clean up. Produces
//! findings; [`super::verdict`] turns them into the verdict.

use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::checks::{self, RunEvidence, Violation, RUN_CHECKS};
use super::codes::Vocabulary;
use super::driver::{contains, Driver, DriverError, DriverSpec, MAX_DRIVER_STDERR};
use super::expect::{self, CodeJudge, Miss, RunSeen};
use super::fixture::{
    BundleKind, CancelOn, Capability, Case, DiscoverExpect, Interpretations, RunExpect, RunStep,
    SetupExpect, Step,
};
use super::journal::{self, Entry, Journal};
use super::leftovers::{self, CASE_TOKEN_ENV};
use super::supervisor;
use super::transcript::Transcript;
use super::verdict::*;
use super::world::World;

use checks::MIN_SCANNED_PROMPT;
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
    pub time_scale: f64,
    /// Rule id -> interpretation entry, for the catalog's `interpretation` rules.
    pub interpreted_rules: BTreeMap<String, String>,
}

impl CaseEnv {
    fn scaled(&self, ms: u64) -> Duration {
        Duration::from_secs_f64((ms as f64 * self.time_scale).max(1.0) / 1000.0)
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
}

/// Runs `case` against the host.
pub fn run_case(case: &Case, env: &CaseEnv) -> CaseRun {
    let started = Instant::now();
    let mut runner = Runner {
        case,
        env,
        deadline: started + env.scaled(case.timeout_ms()),
        findings: Vec::new(),
        transcript: Transcript::default(),
        handshake: None,
        conversations: HashMap::new(),
        run_pids: Vec::new(),
        turn: 0,
        vocabulary: None,
        canary: String::new(),
    };
    let skipped = runner.run();
    CaseRun {
        findings: runner.findings,
        skipped,
        handshake: runner.handshake,
        transcript: runner.transcript.into_lines(),
        duration: started.elapsed(),
    }
}

/// The capabilities a case needs: its `requires`, plus what its steps imply (docs/host-driver.md,
/// "Capabilities").
pub fn needed_capabilities(case: &Case) -> Vec<Capability> {
    let mut needed = case.requires.clone();
    let mut runs_per_conversation: HashMap<&str, usize> = HashMap::new();
    for step in &case.steps {
        let implied: &[Capability] = match step {
            Step::Discover(_) => &[Capability::Discover],
            Step::Setup { .. } => &[Capability::Setup],
            Step::Restart(_) => &[Capability::Restart],
            Step::CorruptSession { .. } | Step::DeleteSession { .. } | Step::TruncateHostData => {
                &[Capability::Sessions]
            }
            Step::Run { run, .. } => {
                let runs = runs_per_conversation.entry(&run.conversation).or_default();
                *runs += 1;
                match (run.cancel_on.is_some(), *runs > 1) {
                    (true, true) => &[Capability::Cancel, Capability::Sessions],
                    (true, false) => &[Capability::Cancel],
                    (false, true) => &[Capability::Sessions],
                    (false, false) => &[],
                }
            }
            Step::RuntimeVersion(_) => &[],
        };
        for capability in implied {
            if !needed.contains(capability) {
                needed.push(*capability);
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
    /// Pids of earlier runs' stdio processes.
    run_pids: Vec<i32>,
    turn: u64,
    /// The code vocabulary the driver declared in its handshake.
    vocabulary: Option<Vocabulary>,
    /// The world's canary credential, once the world exists.
    canary: String,
}

/// A step could not go on: the case stops (the driver is killed).
struct Abort;

struct Outcome {
    reply: Value,
    events: Vec<Value>,
}

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

    /// Records the step's missed expectations, blamed on the case's first rule; an expectation
    /// the case (or the kit) marks as an interpretation makes only an informational finding.
    fn misses(&mut self, misses: Vec<Miss>, interpretations: &Interpretations) {
        let rule = self.case.first_rule().to_string();
        for miss in misses {
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
        }
    }

    /// The whole case; returns why it was skipped, if it was.
    fn run(&mut self) -> Option<String> {
        let watchdog_secs = (self.env.scaled(self.case.timeout_ms()).as_secs() + 30).max(60);
        let mut world = match World::create(
            self.case,
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
        let mut driver = self.start_driver(&world);
        let skipped = driver.as_ref().and_then(|_| self.missing_capabilities());
        if skipped.is_none() {
            self.play_steps(&mut driver, &mut world, &journal);
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
                self.check_all_reaped(&world, &journal);
            }
            self.sweep_leftovers(&world, &journal);
            self.collect_stderr_hits(&active);
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
                Step::Setup { bundle, expect } => {
                    self.setup(active, world, journal, index, *bundle, expect)
                }
                Step::Run { run, expect } => {
                    self.run_step(active, world, journal, index, run, expect)
                }
                Step::Restart(action) => {
                    self.restart(driver, world, journal, action.fresh_data_dir)
                }
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
            };
            if result.is_err() {
                if let Some(active) = driver.as_mut() {
                    active.kill();
                    self.sweep_leftovers(world, journal);
                    self.collect_stderr_hits(active);
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

    /// Stops the driver gracefully and starts a new one (with a new data dir when asked).
    fn restart(
        &mut self,
        driver: &mut Option<Driver>,
        world: &mut World,
        journal: &Journal,
        fresh_data_dir: bool,
    ) -> Result<(), Abort> {
        let Some(active) = driver.as_mut() else {
            return Err(Abort);
        };
        let bound = self.env.scaled(SHUTDOWN_BOUND_MS).min(self.remaining());
        let stopped = active.shutdown(bound, &mut self.transcript);
        self.sweep_leftovers(world, journal);
        self.collect_stderr_hits(active);
        if let Err(error) = stopped {
            self.driver_error(error, "restart (shutdown of the first driver)");
            return Err(Abort);
        }
        if fresh_data_dir {
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
        let env = vec![
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
        ];
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
            if let Step::Run { run, .. } = step {
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
        }
    }

    /// Starts the driver and completes its handshake (reading its code vocabulary).
    fn start_driver(&mut self, world: &World) -> Option<Driver> {
        let spec = self.driver_spec(world);
        let canary = vec![(
            "the canary credential".to_string(),
            world.canary.clone().into_bytes(),
        )];
        self.transcript
            .push(format!("== start driver: {}", spec.command.join(" ")));
        let mut driver = match Driver::start(&spec, canary) {
            Ok(driver) => driver,
            Err(error) => {
                self.driver_error(error, "starting the driver");
                return None;
            }
        };
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
                return None;
            }
        };
        self.host(FindingKind::HostFatal, RULE_DRIVER_REPLY_VALID, why);
        None
    }

    fn claimed_capabilities(&self) -> Vec<String> {
        self.handshake
            .as_ref()
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

    fn collect_stderr_hits(&mut self, driver: &Driver) {
        driver.wait_stderr_drained(Duration::from_millis(500));
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
        let misses = expect::discover(expect, &reply, self.codes());
        self.misses(misses, &expect.interpretations);
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
        let invoked = entries
            .iter()
            .any(|entry| entry.event() == "start" && entry.mode() == Some("plugin"));
        let installed = (world.profile_file().is_file(), invoked);
        let misses = expect::setup(expect, &reply, installed, self.codes());
        self.misses(misses, &expect.interpretations);
        Ok(())
    }

    /// After a discover or setup: no canary in a `dsh` argv, nothing the step started alive.
    fn check_step_processes(&mut self, journal: &Journal, from: usize, during: &str) -> Vec<Entry> {
        let entries = self.journal_since(journal, from);
        let mut violations: Vec<Violation> = Vec::new();
        violations.extend(checks::canary_in_argv(&entries, &self.canary));
        if let Some(alive) = checks::still_alive(journal, &entries) {
            violations.push(Violation::new(
                RULE_PROCESS_TREE_REAPED,
                format!("journaled process(es) {alive:?} still alive after the host's reply"),
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
        let file = world.session_file(&session);
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

    fn run_step(
        &mut self,
        driver: &mut Driver,
        world: &World,
        journal: &Journal,
        index: usize,
        run: &RunStep,
        expect: &RunExpect,
    ) -> Result<(), Abort> {
        let cwd = world.run_cwd(&run.cwd).map_err(|e| {
            self.kit(format!("cannot create the run cwd {}: {e}", run.cwd));
            Abort
        })?;
        let spelled = world.spelled_cwd(&cwd, run.cwd_form).map_err(|e| {
            self.kit(format!("cannot spell the run cwd {}: {e}", run.cwd));
            Abort
        })?;
        let id = format!("r{index}");
        let conversation_id = format!("conv-{}", run.conversation);
        let request = json!({
            "v": 1, "type": "run", "id": id, "turn": self.turn, "conversation_id": conversation_id,
            "project_id": "proj-1", "cwd": spelled, "prompt": run.prompt,
            "bootstrap": world.bootstrap(&conversation_id),
            "model": {"provider": run.model.provider, "id": run.model.id}, "reasoning_effort": null,
        });
        self.turn += 1;
        let previous_session = self.conversations.get(&run.conversation).cloned();
        let from = self.journal_length(journal);
        driver.send(&request, &mut self.transcript).map_err(|e| {
            self.driver_error(e, &format!("run {id}"));
            Abort
        })?;
        let outcome = self.await_outcome(driver, &id, run.cancel_on.as_ref())?;
        let entries = self.journal_since(journal, from);
        let run_pid = checks::stdio_starts(&entries).first().copied();
        let process: Vec<&Entry> = entries
            .iter()
            .filter(|entry| run_pid.is_some() && entry.pid() == run_pid)
            .collect();
        let execute = process
            .iter()
            .find(|entry| entry.token() == "command:execute")
            .and_then(|entry| entry.value.get("command"));
        let evidence = RunEvidence {
            entries: &entries,
            process: &process,
            execute,
            outcome: &outcome.reply,
            run,
            cwd: &cwd,
            world,
            journal,
            earlier_runs: &self.run_pids,
        };
        let violations: Vec<Violation> = RUN_CHECKS
            .iter()
            .flat_map(|check| check(&evidence))
            .collect();
        let seen = RunSeen {
            outcome: &outcome.reply,
            events: &outcome.events,
            execute,
            process: &process,
            previous_session: previous_session.as_deref(),
            world,
            cwd: &cwd,
        };
        let misses = expect::run(expect, &seen, self.codes());
        self.violations(violations, &format!("run {id}"));
        self.misses(misses, &expect.interpretations);
        self.run_pids.extend(checks::stdio_starts(&entries));
        if let Some(session) = outcome.reply.get("session_id").and_then(Value::as_str) {
            self.conversations
                .insert(run.conversation.clone(), session.to_string());
        }
        Ok(())
    }

    fn await_outcome(
        &mut self,
        driver: &mut Driver,
        id: &str,
        cancel_on: Option<&CancelOn>,
    ) -> Result<Outcome, Abort> {
        let sent = Instant::now();
        let cancel_at = match cancel_on {
            Some(CancelOn::AfterMs(after)) => Some(sent + self.env.scaled(after.after_ms)),
            _ => None,
        };
        let cancel_event = match cancel_on {
            Some(CancelOn::Event(event)) => Some(event.event.as_str()),
            _ => None,
        };
        let mut cancel_sent = false;
        let mut events = Vec::new();
        loop {
            let wait_until = match cancel_at {
                Some(at) if !cancel_sent => at.min(self.deadline),
                _ => self.deadline,
            };
            let reply = match driver.recv(
                wait_until,
                &format!("the outcome of {id}"),
                &mut self.transcript,
            ) {
                Ok(reply) => reply,
                Err(DriverError::Timeout(_)) if Instant::now() < self.deadline => {
                    self.send_cancel(driver, id)?;
                    cancel_sent = true;
                    continue;
                }
                Err(error) => {
                    self.driver_error(error, &format!("run {id}"));
                    return Err(Abort);
                }
            };
            let kind = reply
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let reply_id = reply.get("id").and_then(Value::as_str).map(str::to_string);
            if reply_id.as_deref() != Some(id) {
                self.host(
                    FindingKind::HostFatal,
                    RULE_DRIVER_REPLY_VALID,
                    format!(
                        "during run {id} the driver sent {kind} for {}",
                        reply_id.as_deref().unwrap_or("no id")
                    ),
                );
                return Err(Abort);
            }
            match kind.as_str() {
                "event" => {
                    let event = reply.get("event").cloned().unwrap_or(Value::Null);
                    let event_type = event.get("type").and_then(Value::as_str).unwrap_or("");
                    if !cancel_sent && cancel_event == Some(event_type) {
                        self.send_cancel(driver, id)?;
                        cancel_sent = true;
                    }
                    events.push(event);
                }
                "outcome" => {
                    if cancel_on.is_some() && !cancel_sent {
                        let trigger = match cancel_on {
                            Some(CancelOn::Event(event)) => {
                                format!("no {} event came", event.event)
                            }
                            _ => "the run ended first".to_string(),
                        };
                        let rule = self.case.first_rule().to_string();
                        self.host(
                            FindingKind::Untestable,
                            &rule,
                            format!(
                                "run {id}: cancel was never sent: {trigger} before the outcome"
                            ),
                        );
                    }
                    return Ok(Outcome { reply, events });
                }
                "error" if cancel_sent => {
                    let message = reply
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    let rule = self.case.first_rule().to_string();
                    self.host(
                        FindingKind::Untestable,
                        &rule,
                        format!("the driver rejected cancel of {id}: {message}"),
                    );
                }
                _ => {
                    self.host(
                        FindingKind::HostFatal,
                        RULE_DRIVER_REPLY_VALID,
                        format!("during run {id} the driver sent {kind}"),
                    );
                    return Err(Abort);
                }
            }
        }
    }

    fn send_cancel(&mut self, driver: &mut Driver, id: &str) -> Result<(), Abort> {
        driver
            .send(
                &json!({"v": 1, "type": "cancel", "id": id}),
                &mut self.transcript,
            )
            .map_err(|e| {
                self.driver_error(e, &format!("cancel {id}"));
                Abort
            })
    }

    /// After the final shutdown: nothing the case started is alive.
    fn check_all_reaped(&mut self, world: &World, journal: &Journal) {
        let entries = self.journal_since(journal, 0);
        let pids = journal::pids(&entries);
        let mut alive = checks::alive_after_grace(&pids, journal.path());
        alive.extend(leftovers::journaled_killed_by_supervisor(
            &world.supervisor_report(),
            &pids,
        ));
        if !alive.is_empty() {
            self.host(
                FindingKind::Global,
                RULE_PROCESS_TREE_REAPED,
                format!("journaled process(es) {alive:?} still alive after the driver exited"),
            );
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
                self.transcript.push(format!("journal: {}", entry.value));
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
