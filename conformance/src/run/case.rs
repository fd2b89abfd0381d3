//! Running one case: build its world, start the driver, handshake, play the steps in order with
//! their expectations and the global per-run checks, then shut down and clean up. Produces
//! findings; [`super::verdict`] turns them into the verdict.

use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::driver::{contains, Driver, DriverError, DriverSpec, MAX_DRIVER_STDERR};
use super::fixture::{
    BundleKind, CancelOn, Capability, Case, DiscoverExpect, ExecuteExpect, ResumeExpect, RunExpect,
    RunStep, SessionExpect, SetupExpect, Step,
};
use super::journal::{self, Entry, Journal};
use super::leftovers::{self, CASE_TOKEN_ENV};
use super::transcript::Transcript;
use super::verdict::*;

/// The bound on `outcome.stderr` (docs/host-driver.md).
pub const MAX_OUTCOME_STDERR: usize = 64 * 1024;
/// Prompts shorter than this are not searched for in stderr (too likely to occur by chance).
pub const MIN_SCANNED_PROMPT: usize = 8;
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

/// The capabilities a case needs: its `requires`, plus `setup`/`cancel` when a step uses them.
pub fn needed_capabilities(case: &Case) -> Vec<Capability> {
    let mut needed = case.requires.clone();
    for step in &case.steps {
        let implied = match step {
            Step::Setup { .. } => Some(Capability::Setup),
            Step::Run { run, .. } if run.cancel_on.is_some() => Some(Capability::Cancel),
            _ => None,
        };
        if let Some(capability) = implied.filter(|capability| !needed.contains(capability)) {
            needed.push(capability);
        }
    }
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
    /// The world's canary credential, once the world exists.
    canary: String,
}

/// A step could not go on: the case stops (the driver is killed).
struct Abort;

struct Outcome {
    reply: Value,
    events: Vec<Value>,
}

impl Outcome {
    fn str(&self, member: &str) -> Option<&str> {
        self.reply.get(member).and_then(Value::as_str)
    }
}

impl<'a> Runner<'a> {
    fn kit(&mut self, why: impl Into<String>) {
        self.findings
            .push(Finding::new(FindingKind::Kit, RULE_KIT, why));
    }
    fn host(&mut self, kind: FindingKind, rule: &str, why: impl Into<String>) {
        self.findings.push(Finding::new(kind, rule, why));
    }
    fn expectation(&mut self, why: impl Into<String>) {
        let rule = self.case.first_rule().to_string();
        self.host(FindingKind::Expectation, &rule, why);
    }

    /// Records a driver error as the right finding.
    fn driver_error(&mut self, error: DriverError, during: &str) {
        let first_rule = self.case.first_rule().to_string();
        match error {
            DriverError::Kit(why) => self.kit(why),
            DriverError::Invalid(why) => {
                self.host(FindingKind::HostFatal, RULE_DRIVER_REPLY_VALID, why)
            }
            DriverError::Io(why) => self.host(FindingKind::HostFatal, RULE_DRIVER_REPLY_VALID, why),
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
        let shutdown_bound = self.env.scaled(SHUTDOWN_BOUND_MS);
        let watchdog_secs = (self.env.scaled(self.case.timeout_ms()).as_secs() + 30).max(60);
        let mut world = match super::world::World::create(
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
        let spec = self.driver_spec(&world);
        let canary = vec![(
            "the canary credential".to_string(),
            world.canary.clone().into_bytes(),
        )];
        let mut skipped = None;
        let mut driver = self.start_driver(&spec, &canary);
        if driver.is_some() {
            let claimed = self.claimed_capabilities();
            let missing: Vec<&str> = needed_capabilities(self.case)
                .into_iter()
                .filter(|capability| !claimed.contains(&capability.as_str().to_string()))
                .map(Capability::as_str)
                .collect();
            if !missing.is_empty() {
                skipped = Some(format!(
                    "the driver does not claim the capability {}",
                    missing.join(", ")
                ));
            }
        }
        let case: &'a Case = self.case;
        if skipped.is_none() {
            for (index, step) in case.steps.iter().enumerate() {
                let Some(active) = driver.as_mut() else { break };
                self.transcript
                    .push(format!("== step {index}: {}", step.name()));
                let result = match step {
                    Step::Discover(expect) => self.discover(active, &journal, index, expect),
                    Step::Setup { bundle, expect } => {
                        self.setup(active, &world, &journal, index, *bundle, expect)
                    }
                    Step::Run { run, expect } => {
                        self.run_step(active, &world, &journal, index, run, expect)
                    }
                    Step::Restart => {
                        let stopped = active
                            .shutdown(shutdown_bound.min(self.remaining()), &mut self.transcript);
                        self.sweep_leftovers(&world, &journal);
                        self.collect_stderr_hits(active);
                        match stopped {
                            Ok(()) => {
                                driver = self.start_driver(&spec, &canary);
                                if driver.is_some() {
                                    Ok(())
                                } else {
                                    Err(Abort)
                                }
                            }
                            Err(error) => {
                                self.driver_error(error, "restart (shutdown of the first driver)");
                                Err(Abort)
                            }
                        }
                    }
                    Step::RuntimeVersion(version) => match world.set_runtime_version(version) {
                        Ok(()) => Ok(()),
                        Err(e) => {
                            self.kit(format!("cannot rewrite bin/dsh: {e}"));
                            Err(Abort)
                        }
                    },
                    Step::CorruptSession { conversation } => {
                        self.touch_session(&world, conversation, true)
                    }
                    Step::DeleteSession { conversation } => {
                        self.touch_session(&world, conversation, false)
                    }
                };
                if result.is_err() {
                    if let Some(active) = driver.as_mut() {
                        active.kill();
                        self.sweep_leftovers(&world, &journal);
                        self.collect_stderr_hits(active);
                    }
                    driver = None;
                    break;
                }
            }
        }
        if let Some(mut active) = driver.take() {
            if let Err(error) = active.shutdown(shutdown_bound, &mut self.transcript) {
                let error = match error {
                    DriverError::Timeout(why) | DriverError::Exited(why) => {
                        DriverError::Invalid(format!("shutdown: {why}"))
                    }
                    other => other,
                };
                self.driver_error(error, "shutdown");
            } else if skipped.is_none() {
                self.check_all_reaped(&journal);
            }
            self.sweep_leftovers(&world, &journal);
            self.collect_stderr_hits(&active);
        }
        // A driver that never completed its handshake is gone too (dropped, group killed).
        self.sweep_leftovers(&world, &journal);
        self.finish(&world, &journal);
        skipped
    }

    fn remaining(&self) -> Duration {
        self.deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1))
    }

    fn driver_spec(&self, world: &super::world::World) -> DriverSpec {
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
            command: self.env.host.clone(),
            cwd: world.root.clone(),
            env,
            stderr_needles,
        }
    }

    fn start_driver(&mut self, spec: &DriverSpec, canary: &[(String, Vec<u8>)]) -> Option<Driver> {
        self.transcript
            .push(format!("== start driver: {}", spec.command.join(" ")));
        let mut driver = match Driver::start(spec, canary.to_vec()) {
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
        match reply {
            Ok(reply) if reply.get("type").and_then(Value::as_str) == Some("handshake") => {
                self.handshake.get_or_insert(reply);
                Some(driver)
            }
            Ok(reply) => {
                self.host(
                    FindingKind::HostFatal,
                    RULE_DRIVER_REPLY_VALID,
                    format!("the driver answered handshake with {reply}"),
                );
                None
            }
            Err(error) => {
                let error = match error {
                    DriverError::Timeout(why) | DriverError::Exited(why) => {
                        DriverError::Invalid(format!("handshake: {why}"))
                    }
                    other => other,
                };
                self.driver_error(error, "handshake");
                None
            }
        }
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
    fn sweep_leftovers(&mut self, world: &super::world::World, journal: &Journal) {
        let killed = leftovers::sweep(&world.case_token, LEFTOVER_GRACE, Duration::from_secs(2));
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
        self.transcript.push(format!(
            "harness: killed {} leftover process(es) carrying {CASE_TOKEN_ENV}: {}",
            killed.len(),
            killed
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
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
            let message = reply
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            match capability {
                Some(capability) => self.host(
                    FindingKind::Untestable,
                    self.case.first_rule().to_string().as_str(),
                    format!("the driver claims {capability} but rejected request {id}: {message}"),
                ),
                None => self.host(
                    FindingKind::HostFatal,
                    RULE_DRIVER_REPLY_VALID,
                    format!("the driver rejected request {id}: {message}"),
                ),
            }
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
        driver
            .send(
                &json!({"v": 1, "type": "discover", "id": id}),
                &mut self.transcript,
            )
            .map_err(|e| {
                self.driver_error(e, "discover");
                Abort
            })?;
        let reply = self.await_reply(driver, &id, "discovered", None)?;
        let entries = self.journal_since(journal, from);
        self.check_processes(journal, &entries, "discover");
        let available = reply.get("available").and_then(Value::as_bool);
        let code = reply.get("code").and_then(Value::as_str);
        if let Some(want) = expect.available {
            if available != Some(want) {
                self.expectation(format!(
                    "discover: expected available={want}, got available={} (code {})",
                    available.unwrap_or(false),
                    code.unwrap_or("null")
                ));
            }
        }
        if let Some(want) = expect.code.mismatch(code) {
            if expect.available.is_none_or(|want| available == Some(want)) {
                let rule = self.case.first_rule().to_string();
                self.host(
                    FindingKind::CodeMismatch,
                    &rule,
                    format!(
                        "discover: expected code {want}, got {}",
                        code.unwrap_or("null")
                    ),
                );
            }
        }
        if let Some(wanted) = &expect.warnings {
            let warnings: Vec<&str> = reply
                .get("warnings")
                .and_then(Value::as_array)
                .map(|w| w.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if wanted.is_empty() && !warnings.is_empty() {
                self.expectation(format!("discover: expected no warnings, got {warnings:?}"));
            }
            for code in wanted {
                if !warnings
                    .iter()
                    .any(|warning| warning.starts_with(code.as_str()))
                {
                    self.expectation(format!(
                        "discover: expected a {code} warning, got {warnings:?}"
                    ));
                }
            }
        }
        Ok(())
    }

    fn setup(
        &mut self,
        driver: &mut Driver,
        world: &super::world::World,
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
        driver.send(&request, &mut self.transcript).map_err(|e| {
            self.driver_error(e, "setup");
            Abort
        })?;
        let reply = self.await_reply(driver, &id, "setup_done", Some("setup"))?;
        let entries = self.journal_since(journal, from);
        self.check_processes(journal, &entries, "setup");
        let ok = reply.get("ok").and_then(Value::as_bool);
        let code = reply.get("code").and_then(Value::as_str);
        if let Some(want) = expect.ok {
            if ok != Some(want) {
                self.expectation(format!(
                    "setup: expected ok={want}, got ok={} (code {})",
                    ok.unwrap_or(false),
                    code.unwrap_or("null")
                ));
            }
        }
        if let Some(want) = expect.code.mismatch(code) {
            if expect.ok.is_none_or(|want| ok == Some(want)) {
                let rule = self.case.first_rule().to_string();
                self.host(
                    FindingKind::CodeMismatch,
                    &rule,
                    format!(
                        "setup: expected code {want}, got {}",
                        code.unwrap_or("null")
                    ),
                );
            }
        }
        if let Some(want) = expect.installed {
            let profile = world.profile_file().is_file();
            let invoked = entries
                .iter()
                .any(|entry| entry.event() == "start" && entry.mode() == Some("plugin"));
            if want && !(profile && invoked) {
                self.expectation(format!(
                    "setup: expected the bundle installed, got profile file present={profile}, `dsh plugin ... add` invoked={invoked}"
                ));
            }
            if !want && (profile || invoked) {
                self.expectation(format!(
                    "setup: expected nothing installed, got profile file present={profile}, `dsh plugin ... add` invoked={invoked}"
                ));
            }
        }
        Ok(())
    }

    fn touch_session(
        &mut self,
        world: &super::world::World,
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
        done.map_err(|e| {
            self.kit(format!("{action}: cannot change {}: {e}", file.display()));
            Abort
        })
    }

    fn run_step(
        &mut self,
        driver: &mut Driver,
        world: &super::world::World,
        journal: &Journal,
        index: usize,
        run: &RunStep,
        expect: &RunExpect,
    ) -> Result<(), Abort> {
        let cwd = world.run_cwd(&run.cwd).map_err(|e| {
            self.kit(format!("cannot create the run cwd {}: {e}", run.cwd));
            Abort
        })?;
        let id = format!("r{index}");
        let conversation_id = format!("conv-{}", run.conversation);
        let bootstrap = world.bootstrap(&conversation_id);
        let request = json!({
            "v": 1, "type": "run", "id": id, "turn": self.turn, "conversation_id": conversation_id,
            "project_id": "proj-1", "cwd": cwd, "prompt": run.prompt, "bootstrap": bootstrap,
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
        let during = format!("run {id}");
        self.check_argv(&entries, &during);
        let run_pid = self.check_run_process(&entries, &outcome);
        let process_entries: Vec<&Entry> = entries
            .iter()
            .filter(|entry| run_pid.is_some() && entry.pid() == run_pid)
            .collect();
        let execute = process_entries
            .iter()
            .find(|entry| {
                entry.event() == "command"
                    && entry.value.pointer("/command/type").and_then(Value::as_str)
                        == Some("execute")
            })
            .and_then(|entry| entry.value.get("command"))
            .cloned();
        self.check_commands(&entries);
        self.check_execute_fields(execute.as_ref(), &process_entries, &cwd, run);
        self.check_reaped(journal, &entries, &during);
        self.check_outcome_hygiene(&outcome, world, run);
        self.check_run_expectations(
            &outcome,
            expect,
            execute.as_ref(),
            &process_entries,
            previous_session.as_deref(),
            world,
            &cwd,
        );
        if let Some(session) = outcome.str("session_id") {
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

    /// One new stdio process per run; returns its pid.
    fn check_run_process(&mut self, entries: &[Entry], outcome: &Outcome) -> Option<i32> {
        let starts: Vec<i32> = entries
            .iter()
            .filter(|entry| entry.event() == "start" && is_stdio_start(entry))
            .filter_map(Entry::pid)
            .collect();
        let spawn_failed = outcome.str("code") == Some("DSH_PROFILE_SPAWN_FAILED");
        match starts.as_slice() {
            [] if spawn_failed => {}
            [pid] if self.run_pids.contains(pid) => {
                self.host(FindingKind::Global, RULE_NEW_PROCESS_PER_TURN, format!("the run reused process {pid} of an earlier run"));
            }
            [_] => {}
            _ => self.host(
                FindingKind::Global,
                RULE_NEW_PROCESS_PER_TURN,
                format!("expected exactly one `dsh --profile open-design --stdio` process for the run, the journal shows {}", starts.len()),
            ),
        }
        self.run_pids.extend(&starts);
        starts.first().copied()
    }

    /// Every command the runtime received is a schema-valid host command.
    fn check_commands(&mut self, entries: &[Entry]) {
        for entry in entries.iter().filter(|entry| entry.event() == "command") {
            if let Some(command) = entry.value.get("command") {
                if let Err(errors) = dsh_protocol::schema::validate("command.schema.json", command)
                {
                    let errors: Vec<String> =
                        errors.iter().take(3).map(ToString::to_string).collect();
                    let kind = command.get("type").and_then(Value::as_str).unwrap_or("?");
                    self.host(
                        FindingKind::Global,
                        RULE_EXECUTE_SHAPE,
                        format!(
                            "the host sent an invalid {kind} command: {}",
                            errors.join("; ")
                        ),
                    );
                    return;
                }
            } else {
                let raw = entry.value.get("raw").and_then(Value::as_str).unwrap_or("");
                self.host(
                    FindingKind::Global,
                    RULE_EXECUTE_SHAPE,
                    format!(
                        "the host sent a line that is not JSON: {}",
                        super::driver::clip(raw, 80)
                    ),
                );
                return;
            }
        }
    }

    fn check_execute_fields(
        &mut self,
        execute: Option<&Value>,
        process: &[&Entry],
        cwd: &Path,
        run: &RunStep,
    ) {
        let cwd_text = cwd.display().to_string();
        if let Some(start_cwd) = process
            .iter()
            .find(|entry| entry.event() == "start")
            .and_then(|entry| entry.value.get("cwd"))
        {
            if start_cwd.as_str() != Some(cwd_text.as_str()) {
                self.host(
                    FindingKind::Global,
                    RULE_EXECUTE_CWD_MODEL_PROMPT,
                    format!(
                        "the runtime process ran in {start_cwd}, not the project dir {cwd_text:?}"
                    ),
                );
                return;
            }
        }
        let Some(execute) = execute else { return };
        let problem = if execute.get("cwd").and_then(Value::as_str) != Some(cwd_text.as_str()) {
            Some(format!(
                "execute.cwd is {}, not the canonical project dir {cwd_text:?}",
                execute.get("cwd").unwrap_or(&Value::Null)
            ))
        } else if execute.pointer("/model/provider").and_then(Value::as_str)
            != Some(run.model.provider.as_str())
            || execute.pointer("/model/id").and_then(Value::as_str) != Some(run.model.id.as_str())
        {
            Some(format!(
                "execute.model is {}, not the run's route {}/{}",
                execute.get("model").unwrap_or(&Value::Null),
                run.model.provider,
                run.model.id
            ))
        } else if !execute
            .get("prompt")
            .and_then(Value::as_str)
            .is_some_and(|prompt| prompt.contains(run.prompt.as_str()))
        {
            Some("execute.prompt does not hold the turn's prompt".to_string())
        } else {
            None
        };
        if let Some(why) = problem {
            self.host(FindingKind::Global, RULE_EXECUTE_CWD_MODEL_PROMPT, why);
        }
    }

    /// No journaled process of this step alive; no canary in any argv.
    fn check_processes(&mut self, journal: &Journal, entries: &[Entry], during: &str) {
        self.check_argv(entries, during);
        self.check_reaped(journal, entries, during);
    }

    fn check_argv(&mut self, entries: &[Entry], during: &str) {
        for entry in entries.iter().filter(|entry| entry.event() == "start") {
            let argv = entry
                .value
                .get("argv")
                .map(Value::to_string)
                .unwrap_or_default();
            if !self.canary.is_empty() && argv.contains(self.canary.as_str()) {
                self.host(
                    FindingKind::Global,
                    RULE_NO_CREDENTIAL_LEAK,
                    format!("{during}: the canary credential is in a dsh argv"),
                );
                break;
            }
        }
    }

    fn check_reaped(&mut self, journal: &Journal, entries: &[Entry], during: &str) {
        let pids = journal::pids(entries);
        let alive = alive_after_grace(&pids, journal.path());
        if !alive.is_empty() {
            self.host(
                FindingKind::Global,
                RULE_PROCESS_TREE_REAPED,
                format!(
                    "{during}: journaled process(es) {alive:?} still alive after the host's reply"
                ),
            );
        }
    }

    /// After the final shutdown: nothing the case started is alive.
    fn check_all_reaped(&mut self, journal: &Journal) {
        let entries = self.journal_since(journal, 0);
        let alive = alive_after_grace(&journal::pids(&entries), journal.path());
        if !alive.is_empty() {
            self.host(
                FindingKind::Global,
                RULE_PROCESS_TREE_REAPED,
                format!("journaled process(es) {alive:?} still alive after the driver exited"),
            );
        }
    }

    fn check_outcome_hygiene(
        &mut self,
        outcome: &Outcome,
        world: &super::world::World,
        run: &RunStep,
    ) {
        let stderr = outcome.str("stderr").unwrap_or("");
        if stderr.len() > MAX_OUTCOME_STDERR {
            self.host(
                FindingKind::Global,
                RULE_STDERR_BOUNDED,
                format!(
                    "outcome.stderr is {} bytes, over the 64 KiB bound",
                    stderr.len()
                ),
            );
        }
        if stderr.contains(world.canary.as_str()) {
            self.host(
                FindingKind::Global,
                RULE_NO_CREDENTIAL_LEAK,
                "outcome.stderr holds the canary credential",
            );
        }
        if stderr.contains(world.bootstrap_marker.as_str())
            || (run.prompt.len() >= MIN_SCANNED_PROMPT && stderr.contains(run.prompt.as_str()))
        {
            self.host(
                FindingKind::Global,
                RULE_NO_PROMPT_IN_STDERR,
                "outcome.stderr holds the prompt",
            );
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn check_run_expectations(
        &mut self,
        outcome: &Outcome,
        expect: &RunExpect,
        execute: Option<&Value>,
        process: &[&Entry],
        previous_session: Option<&str>,
        world: &super::world::World,
        cwd: &Path,
    ) {
        let status = outcome.str("status").unwrap_or("");
        let code = outcome.str("code");
        let describe = format!("status {status}, code {}", code.unwrap_or("null"));
        let status_ok = expect.status.is_none_or(|want| want.as_str() == status);
        if !status_ok {
            let want = expect.status.map(|s| s.as_str()).unwrap_or("");
            let message = outcome
                .str("message")
                .map(|m| format!(" ({})", super::driver::clip(m, 120)))
                .unwrap_or_default();
            self.expectation(format!("expected status {want}, got {describe}{message}"));
        }
        if let Some(want) = expect.code.mismatch(code) {
            if status_ok {
                let rule = self.case.first_rule().to_string();
                self.host(
                    FindingKind::CodeMismatch,
                    &rule,
                    format!("expected code {want}, got {describe}"),
                );
            }
        }
        if let Some(want) = expect.session {
            let session = outcome.str("session_id");
            let resumed = outcome
                .reply
                .get("resumed")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let problem = match want {
                SessionExpect::None => session.map(|s| format!("expected no session, got {s}")),
                SessionExpect::New => match session {
                    None => Some("expected a new session, got none".to_string()),
                    Some(s) if Some(s) == previous_session => Some(format!("expected a new session, got the previous one {s}")),
                    Some(_) if resumed => Some("expected a new session, got resumed=true".to_string()),
                    Some(_) => None,
                },
                SessionExpect::Resumed => match (session, previous_session) {
                    (_, None) => Some("expected a resumed session, but no earlier run of this conversation reported one".to_string()),
                    (Some(s), Some(p)) if s == p && resumed => None,
                    (s, Some(p)) => Some(format!("expected session {p} resumed, got {} (resumed={resumed})", s.unwrap_or("none"))),
                },
            };
            if let Some(why) = problem {
                self.expectation(why);
            }
        }
        if let Some(want) = &expect.events {
            let got: Vec<&str> = outcome
                .events
                .iter()
                .filter_map(|event| event.get("type").and_then(Value::as_str))
                .filter(|kind| *kind != "thinking_end" && *kind != "error")
                .collect();
            if got != want.iter().map(String::as_str).collect::<Vec<_>>() {
                self.expectation(format!("expected events {want:?}, got {got:?}"));
            }
        }
        if let Some(want) = &expect.events_include {
            let mut events = outcome.events.iter();
            for pattern in want {
                let found = events.by_ref().any(|event| {
                    pattern
                        .iter()
                        .all(|(key, value)| event.get(key) == Some(value))
                });
                if !found {
                    self.expectation(format!(
                        "no event matching {} (in order) among the run's events",
                        Value::Object(pattern.clone())
                    ));
                    break;
                }
            }
        }
        if let Some(want) = expect.foreign_frames {
            let got = outcome
                .reply
                .get("foreign_frames")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            if got != want {
                self.expectation(format!("expected foreign_frames {want}, got {got}"));
            }
        }
        if let Some(want) = &expect.execute {
            self.check_execute_expectation(want, execute, previous_session, world);
        }
        let tokens: Vec<String> = process.iter().map(|entry| entry.token()).collect();
        if let Some(order) = &expect.journal_order {
            let mut remaining = tokens.iter();
            if let Some(missing) = order
                .iter()
                .find(|token| !remaining.by_ref().any(|got| got == *token))
            {
                self.expectation(format!(
                    "journal: expected {order:?} in order, {missing} missing (got {tokens:?})"
                ));
            }
        }
        if let Some(absent) = &expect.journal_absent {
            if let Some(present) = absent.iter().find(|token| tokens.contains(token)) {
                self.expectation(format!(
                    "journal: {present} must not appear for the run's process (got {tokens:?})"
                ));
            }
        }
        if let Some(files) = &expect.files {
            for (name, want) in files {
                let path = cwd.join(name);
                match std::fs::read(&path) {
                    Err(_) => self.expectation(format!(
                        "expected the file {name} in the run's cwd, it does not exist"
                    )),
                    Ok(bytes) => {
                        if let Some(needle) = &want.contains {
                            if !contains(&bytes, needle.as_bytes()) {
                                self.expectation(format!(
                                    "the file {name} does not contain {needle:?}"
                                ));
                            }
                        }
                    }
                }
            }
        }
    }

    fn check_execute_expectation(
        &mut self,
        want: &ExecuteExpect,
        execute: Option<&Value>,
        previous: Option<&str>,
        world: &super::world::World,
    ) {
        let Some(execute) = execute else {
            self.expectation("expected an execute command, the runtime received none");
            return;
        };
        let resume = execute
            .get("resume_session_id")
            .filter(|value| !value.is_null());
        match (want.resume, resume) {
            (Some(ResumeExpect::None), Some(id)) => {
                self.expectation(format!("expected a new session, the execute resumes {id}"))
            }
            (Some(ResumeExpect::Previous), None) => self.expectation(format!(
                "expected the execute to resume {}, it has no resume_session_id",
                previous.unwrap_or("the previous session")
            )),
            (Some(ResumeExpect::Previous), Some(id)) if id.as_str() != previous => self
                .expectation(format!(
                    "expected the execute to resume {}, it resumes {id}",
                    previous.unwrap_or("the previous session (none was reported)")
                )),
            _ => {}
        }
        if let Some(want) = want.bootstrap {
            let has = execute
                .get("prompt")
                .and_then(Value::as_str)
                .is_some_and(|prompt| prompt.contains(world.bootstrap_marker.as_str()));
            if has != want {
                let what = if want {
                    "carry the bootstrap context"
                } else {
                    "hold only the new turn (it carries the bootstrap context)"
                };
                self.expectation(format!("expected the execute's prompt to {what}"));
            }
        }
    }

    /// End of case: the host data dir holds no canary; the journal goes to the transcript;
    /// leftover processes are killed.
    fn finish(&mut self, world: &super::world::World, journal: &Journal) {
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

/// A `start` of `dsh ... --stdio`: by fake-dsh's mode, or by argv when fake-dsh rejected the
/// command line (mode `error`) but the host did spawn its run process.
fn is_stdio_start(entry: &Entry) -> bool {
    entry.mode() == Some("stdio")
        || entry
            .value
            .get("argv")
            .and_then(Value::as_array)
            .is_some_and(|argv| argv.iter().any(|arg| arg.as_str() == Some("--stdio")))
}

/// The pids still alive, re-checked once after a short grace so a process in the middle of
/// exiting is not counted.
fn alive_after_grace(pids: &[i32], journal: &Path) -> Vec<i32> {
    let alive: Vec<i32> = pids
        .iter()
        .copied()
        .filter(|pid| journal::is_alive(*pid, journal))
        .collect();
    if alive.is_empty() {
        return alive;
    }
    std::thread::sleep(Duration::from_millis(50));
    alive
        .into_iter()
        .filter(|pid| journal::is_alive(*pid, journal))
        .collect()
}
