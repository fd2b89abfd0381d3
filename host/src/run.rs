//! One turn (spec 6-10), written as the spec's steps so that an adapter author can follow it:
//!
//! 1. **Spawn** ([`Host::spawn_runtime`]): `dsh --profile open-design --stdio` in its own process
//!    tree, stderr drained from the start.
//! 2. **Ready** ([`Host::await_ready`]): the `ready` frame first, within a bound.
//! 3. **Execute** ([`Host::decide_session`], [`execute_command`], [`Host::send_execute`]): a new
//!    session or a resume from the compatibility key, then `execute`.
//! 4. **Stream** ([`Host::stream`]): stdout through the strict checker, accepted frames normalized
//!    into events; a cancel runs spec 10's steps 1-2 here ([`Host::send_cancel`]).
//! 5. **Terminal result** ([`Host::after_result`]): stdin closed, stdout read to EOF within the
//!    exit grace (a second result, or anything after the result, still fails the run).
//! 6. **Reap** ([`Host::reap`]): spec 10's steps 3-5 ([`Host::stop_tree`]), then the daemons that
//!    escaped the group, then the redacted stderr.
//! 7. **Outcome** ([`Host::conclude`]): the session mapping, and the outcome reported only now.
//!
//! The plumbing lives in `pipes`. The deliberate bugs of the kit's mutant gallery are not written
//! here: each is one `#[cfg(feature = "mutants")]` statement calling into `run/mutants.rs`, compiled
//! only in the kit's test builds. Delete those statements and the host is the same: correct.

#[cfg(feature = "mutants")]
mod mutants;
mod pipes;

use crate::codes::{self, Diagnostic};
use crate::discovery::{self, PROFILE};
use crate::events::{Event, Normalizer};
use crate::host::Host;
use crate::process::{self, spawn_owned, OwnedTree, Stop};
use crate::redact::Redactor;
use crate::session_store::{CompatibilityKey, SessionMapping, RUNTIME_ID};
use dsh_protocol::frames::{
    Execute, ModelRoute, ResultFrame as RunResult, RuntimeIdentity, Status,
};
use dsh_protocol::{
    FrameRef, HostCommand, LineEvent, RunContext, Step, StreamChecker, Terminal, Violation,
    ViolationCode,
};
use pipes::{cancel_requested, sleep_until_some, FrameReader, StderrDrain, StdinWriter, TreeGuard};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::process::Child;
use tokio::sync::watch;
use tokio::time::{sleep_until, Instant};

/// The time bounds of a run. Defaults: spec 10's cancellation steps with 1000 / 500 / 1000 ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunBounds {
    /// From spawn to the `ready` frame.
    pub ready: Duration,
    /// The whole run, spawn to terminal result.
    pub run: Duration,
    /// After the protocol `cancel`, how long `result: cancelled` may take.
    pub cancel_grace: Duration,
    /// After stdin is closed on a cancel or failure, how long the tree may take to exit.
    pub stdin_close_grace: Duration,
    /// After SIGTERM to the tree, how long before SIGKILL.
    pub term_grace: Duration,
    /// After a terminal result, how long the runtime may take to exit on its own.
    pub exit_grace: Duration,
    /// After SIGKILL, how long to wait for the tree to be gone.
    pub kill_wait: Duration,
}

impl Default for RunBounds {
    fn default() -> Self {
        Self {
            ready: Duration::from_secs(10),
            run: Duration::from_secs(120),
            cancel_grace: Duration::from_millis(1000),
            stdin_close_grace: Duration::from_millis(500),
            term_grace: Duration::from_millis(1000),
            exit_grace: Duration::from_millis(2000),
            kill_wait: Duration::from_secs(2),
        }
    }
}

/// One turn of an OD conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRequest {
    pub conversation_id: String,
    pub project_id: String,
    pub cwd: PathBuf,
    /// The current user turn.
    pub prompt: String,
    /// The OD system/bootstrap context, prepended on a new session only.
    pub bootstrap: String,
    /// The picked route; `None` is `default` (the runtime's own model, no `model` in `execute`).
    pub model: Option<ModelRoute>,
    pub reasoning_effort: Option<String>,
}

/// How a run ended (the `outcome` reply of docs/host-driver.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub status: Status,
    /// The session the conversation is now mapped to.
    pub session_id: Option<String>,
    /// Whether the runtime resumed a session in this run.
    pub resumed: bool,
    pub code: Option<String>,
    pub message: Option<String>,
    pub foreign_frames: usize,
    /// The runtime's stderr, bounded and redacted.
    pub stderr: String,
}

/// Set to `true` to cancel the run (spec 10).
pub type CancelSignal = watch::Receiver<bool>;

/// Where a run's events go, in order.
pub type EventSink<'a> = &'a mut (dyn FnMut(Event) + Send);

/// A fresh request id per run: unique within this host process and across processes.
fn next_request_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!(
        "od-run-{}-{}",
        NEXT.fetch_add(1, Ordering::Relaxed),
        std::process::id()
    )
}

/// What the run needs to know before spawning.
struct Prepared {
    executable: PathBuf,
    executable_identity: String,
    cwd: PathBuf,
    cwd_text: String,
    version_family: String,
}

/// How the stream part of an attempt ended.
enum End {
    Result(RunResult),
    Violation(Violation),
    CancelledBeforeExecute,
    CancelGraceExpired,
    /// The `sigkill-without-cancel` mutant's cancel.
    #[cfg(feature = "mutants")]
    KilledOnCancel,
    ReadyTimeout,
    RunTimeout,
}

/// The session decision of step 3: the current compatibility key, the session to resume (if
/// the stored key matches), and whether a stored mapping went stale.
struct SessionPlan {
    key: CompatibilityKey,
    resume: Option<String>,
    stale: bool,
}

/// One spawned runtime and everything the steps share about it.
struct Turn {
    request_id: String,
    child: Child,
    tree: OwnedTree,
    guard: TreeGuard,
    stdin: StdinWriter,
    reader: FrameReader,
    stderr: StderrDrain,
    ready_deadline: Instant,
    run_deadline: Instant,
    /// Validates the lines up to `ready` (the run's checker needs the session decision).
    provisional: StreamChecker,
    ready_lines: Vec<LineEvent>,
    checker: StreamChecker,
    cancel_sent: bool,
    cancel_deadline: Option<Instant>,
    session_resumed: bool,
    /// Set after a result: when the runtime's own exit grace ends.
    exit_deadline: Option<Instant>,
}

impl Host {
    /// Run one turn. Events go to `emit` as they happen; the outcome is returned only after the
    /// runtime's process tree is gone.
    pub async fn run(
        &self,
        request: &RunRequest,
        cancel: CancelSignal,
        emit: EventSink<'_>,
    ) -> Outcome {
        let mut redactor = self.config.credentials.clone();
        redactor.add_prompt(&request.prompt);
        redactor.add_prompt(&request.bootstrap);
        let outcome = match self.prepare(request).await {
            Err(diagnostic) => self.spawn_failure(request, diagnostic.message),
            Ok(prepared) => {
                #[cfg(feature = "mutants")]
                if let Some(retried) = self
                    .retry_rejected_resume(request, &prepared, &redactor, &cancel, &mut *emit)
                    .await
                {
                    return failure_reported(retried, emit);
                }
                self.attempt(request, &prepared, &redactor, cancel, &mut *emit)
                    .await
            }
        };
        failure_reported(outcome, emit)
    }

    /// One attempt, step by step (see the module documentation).
    async fn attempt(
        &self,
        request: &RunRequest,
        prepared: &Prepared,
        redactor: &Redactor,
        mut cancel: CancelSignal,
        emit: EventSink<'_>,
    ) -> Outcome {
        let mut turn = match self.spawn_runtime(prepared, redactor) {
            Ok(turn) => turn,
            Err(message) => return self.spawn_failure(request, message),
        };
        #[cfg(feature = "mutants")]
        self.execute_before_ready(&turn.stdin, request, &turn.request_id, &prepared.cwd_text);
        let mut plan = None;
        let end = match self.await_ready(&mut turn, &mut cancel).await {
            Err(end) => end,
            Ok(identity) => {
                let decided = self.decide_session(request, prepared, &identity);
                self.send_execute(&mut turn, request, prepared, &decided);
                plan = Some(decided);
                let end = self.stream(&mut turn, &mut cancel, emit).await;
                self.after_result(&mut turn, end).await
            }
        };
        let stderr = self.reap(&mut turn, &end, redactor).await;
        self.conclude(request, &turn, plan, &end, stderr)
    }

    /// Step 0: resolve the executable, canonicalize the cwd, read the version family.
    async fn prepare(&self, request: &RunRequest) -> Result<Prepared, Diagnostic> {
        let env = &self.config.env;
        let resolved = discovery::resolve_executable(env.dsh_bin.as_deref(), env.path.as_deref())
            .map_err(|diagnostic| {
            Diagnostic::new(codes::SPAWN_FAILED, diagnostic.to_string())
        })?;
        for note in &resolved.notes {
            self.log(note);
        }
        let cwd = std::fs::canonicalize(&request.cwd)
            .ok()
            .filter(|cwd| cwd.is_dir())
            .ok_or_else(|| {
                Diagnostic::new(
                    codes::SPAWN_FAILED,
                    format!(
                        "the project cwd {} is not an existing directory",
                        request.cwd.display()
                    ),
                )
            })?;
        #[cfg(feature = "mutants")]
        let cwd = self.cwd_as_given(request, cwd);
        let version_family = self
            .version_of(&resolved.path)
            .await
            .map_or_else(|| "unknown".to_string(), |version| version.family());
        let executable_identity = std::fs::canonicalize(&resolved.path)
            .unwrap_or_else(|_| resolved.path.clone())
            .to_string_lossy()
            .into_owned();
        Ok(Prepared {
            executable: resolved.path,
            executable_identity,
            cwd_text: cwd.to_string_lossy().into_owned(),
            cwd,
            version_family,
        })
    }

    /// Step 1, spawn: the runtime in its own process tree, its stderr drained at once.
    fn spawn_runtime(&self, prepared: &Prepared, redactor: &Redactor) -> Result<Turn, String> {
        let bounds = self.config.run_bounds;
        let started = Instant::now();
        let request_id = next_request_id();
        let mut command = tokio::process::Command::new(&prepared.executable);
        command
            .args(["--profile", PROFILE, "--stdio"])
            .current_dir(&prepared.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        #[cfg(feature = "mutants")]
        self.key_in_argv(&mut command);
        let (mut child, tree) = spawn_owned(&mut command).map_err(|error| {
            format!(
                "`{} --profile {PROFILE} --stdio` could not be started: {error}",
                prepared.executable.display()
            )
        })?;
        let stdin = StdinWriter::new(child.stdin.take());
        let reader = FrameReader::new(child.stdout.take());
        #[cfg(feature = "mutants")]
        let undrained = self.stderr_left_alone(&mut child);
        let stderr = StderrDrain::start(child.stderr.take(), redactor);
        #[cfg(feature = "mutants")]
        let stderr = undrained.unwrap_or(stderr);
        let run_deadline = started + bounds.run;
        Ok(Turn {
            provisional: StreamChecker::new(RunContext::new(request_id.clone())),
            checker: StreamChecker::new(RunContext::new(request_id.clone())),
            request_id,
            child,
            tree,
            guard: TreeGuard { tree, armed: true },
            stdin,
            reader,
            stderr,
            ready_deadline: (started + bounds.ready).min(run_deadline),
            run_deadline,
            ready_lines: Vec::new(),
            cancel_sent: false,
            cancel_deadline: None,
            session_resumed: false,
            exit_deadline: None,
        })
    }

    /// Step 2, ready (spec 6/7): the first frame, within a bound, through a provisional checker
    /// (the run's own checker, which needs the session decision, replays the same lines).
    async fn await_ready(
        &self,
        turn: &mut Turn,
        cancel: &mut CancelSignal,
    ) -> Result<RuntimeIdentity, End> {
        let timed_out = if turn.ready_deadline < turn.run_deadline {
            End::ReadyTimeout
        } else {
            End::RunTimeout
        };
        loop {
            tokio::select! {
                biased;
                () = cancel_requested(cancel) => return Err(End::CancelledBeforeExecute),
                () = sleep_until(turn.ready_deadline) => return Err(timed_out),
                event = turn.reader.next_event() => {
                    let Some(event) = event else {
                        return Err(end_of(turn.provisional.finish()));
                    };
                    // Owned: the line itself is kept for the run's checker to replay.
                    let step = turn.provisional.check_event(&event).into_owned();
                    turn.ready_lines.push(event);
                    match step {
                        Step::Accepted(FrameRef::Ready(identity)) => return Ok(identity),
                        Step::Violation(violation) => return Err(End::Violation(violation)),
                        _ => {}
                    }
                }
            }
        }
    }

    /// Step 3a: new session or resume, from the compatibility key (spec 7).
    fn decide_session(
        &self,
        request: &RunRequest,
        prepared: &Prepared,
        identity: &RuntimeIdentity,
    ) -> SessionPlan {
        let key = compatibility_key(request, prepared, identity);
        let lookup = self
            .config
            .store
            .as_ref()
            .map(|store| store.load(&request.conversation_id));
        if let Some(warning) = lookup.as_ref().and_then(|lookup| lookup.warning.as_ref()) {
            self.log(warning);
        }
        let mapping = lookup.and_then(|lookup| lookup.mapping);
        #[cfg(feature = "mutants")]
        let mapping = self.worse_mapping(mapping, request, &key);
        let (resume, stale) = match mapping {
            // Every field of the key equal: the stored session continues.
            Some(mapping) if mapping.key == key => (Some(mapping.session_id), false),
            Some(mapping) => {
                self.log(&format!(
                    "compatibility key changed ({}): starting a new session with bootstrap context",
                    mapping.key.differences(&key).join(", ")
                ));
                (None, true)
            }
            None => (None, false),
        };
        #[cfg(feature = "mutants")]
        let (resume, stale) = self.no_resume_after_early_execute(resume, stale);
        SessionPlan { key, resume, stale }
    }

    /// Step 3b: the prompt (the turn alone on a resume; bootstrap + turn on a new session), the
    /// run's checker, and `execute` written.
    fn send_execute(
        &self,
        turn: &mut Turn,
        request: &RunRequest,
        prepared: &Prepared,
        plan: &SessionPlan,
    ) {
        let prompt = match &plan.resume {
            None if !request.bootstrap.is_empty() => {
                format!("{}\n\n{}", request.bootstrap, request.prompt)
            }
            _ => request.prompt.clone(),
        };
        #[cfg(feature = "mutants")]
        let prompt = self.prompt_without_bootstrap(request, prompt);
        #[cfg(feature = "mutants")]
        self.log_prompt(&prompt);
        let route = (self.execute_model(request), self.execute_effort(request));
        let execute = execute_command(
            route,
            &turn.request_id,
            &prepared.cwd_text,
            plan.resume.clone(),
            prompt,
        );
        // On a resume the checker holds the runtime to the session it was asked to continue.
        let context = match &plan.resume {
            Some(session) => RunContext::resuming(turn.request_id.clone(), session.clone()),
            None => RunContext::new(turn.request_id.clone()),
        };
        #[cfg(feature = "mutants")]
        let context = self.context_without_resume(context, &turn.request_id);
        turn.checker = checker_after_ready(context, &turn.ready_lines);
        #[cfg(feature = "mutants")]
        if self.executed_early() {
            return;
        }
        turn.stdin.send(execute.to_line());
    }

    /// Step 4, stream: every stdout line through the checker until the terminal result, a
    /// violation, a timeout, or the end of a cancel's grace.
    async fn stream(&self, turn: &mut Turn, cancel: &mut CancelSignal, emit: EventSink<'_>) -> End {
        let mut normalizer = Normalizer::new();
        loop {
            tokio::select! {
                biased;
                () = cancel_requested(cancel), if !turn.cancel_sent => {
                    if let Some(end) = self.send_cancel(turn) {
                        return end;
                    }
                }
                () = sleep_until_some(turn.cancel_deadline) => return End::CancelGraceExpired,
                () = sleep_until(turn.run_deadline) => return End::RunTimeout,
                event = turn.reader.next_event() => {
                    let Some(event) = event else {
                        return end_of(turn.checker.finish());
                    };
                    if let Some(end) = self.take_line(turn, &event, &mut normalizer, &mut *emit) {
                        return end;
                    }
                }
            }
        }
    }

    /// Spec 10 steps 1-2: the protocol `cancel` for the active request, then up to
    /// `cancel_grace` for `result: cancelled` (the stream goes on meanwhile).
    fn send_cancel(&self, turn: &mut Turn) -> Option<End> {
        turn.cancel_sent = true;
        #[cfg(feature = "mutants")]
        if self.cancels_by_kill() {
            return Some(End::KilledOnCancel);
        }
        let named = turn.request_id.clone();
        #[cfg(feature = "mutants")]
        let named = self.cancel_target(named);
        turn.stdin.send(HostCommand::cancel(named).to_line());
        turn.checker.note_cancel_sent();
        turn.cancel_deadline = Some(Instant::now() + self.config.run_bounds.cancel_grace);
        None
    }

    /// One stdout line of step 4: checked, then emitted as events; `Some` when it ends the stream.
    fn take_line(
        &self,
        turn: &mut Turn,
        event: &LineEvent,
        normalizer: &mut Normalizer,
        emit: EventSink<'_>,
    ) -> Option<End> {
        match self.check_line(turn, event) {
            Step::Skipped => None,
            Step::Foreign => {
                #[cfg(feature = "mutants")]
                self.relay_foreign_frame(event, normalizer, &mut *emit);
                None
            }
            Step::Accepted(FrameRef::Result(result)) => {
                normalizer.close_block().into_iter().for_each(&mut *emit);
                Some(End::Result(*result))
            }
            Step::Accepted(frame) => {
                if let FrameRef::Session(session) = &frame {
                    turn.session_resumed = session.resumed;
                }
                // The events keep the frame's text, so the frame becomes owned here.
                let frame = frame.into_owned();
                normalizer.frame(&frame).into_iter().for_each(&mut *emit);
                None
            }
            Step::Violation(violation) => {
                normalizer.close_block().into_iter().for_each(&mut *emit);
                Some(End::Violation(violation))
            }
        }
    }

    /// The checker's verdict on one line.
    fn check_line<'e>(&self, turn: &mut Turn, event: &'e LineEvent) -> Step<'e> {
        let step = turn.checker.check_event(event);
        #[cfg(feature = "mutants")]
        let step = self.tolerate_violation(turn, event, step);
        step
    }

    /// Step 5, after the terminal result: close stdin and read to EOF within the exit grace, so a
    /// second result or anything after the terminal one still fails the run.
    async fn after_result(&self, turn: &mut Turn, end: End) -> End {
        let End::Result(result) = &end else {
            return end;
        };
        turn.stdin.close();
        let bounds = self.config.run_bounds;
        let grace = if result.status == Status::Cancelled {
            bounds.stdin_close_grace
        } else {
            bounds.exit_grace
        };
        let deadline = Instant::now() + grace;
        turn.exit_deadline = Some(deadline);
        self.read_to_eof(turn, end, deadline).await
    }

    /// Step 5's reading: every line after the result through the checker until EOF or
    /// `deadline`; any line it does not skip (a second result, say) fails the run.
    async fn read_to_eof(&self, turn: &mut Turn, end: End, deadline: Instant) -> End {
        loop {
            let event = tokio::select! {
                () = sleep_until(deadline) => return end,
                event = turn.reader.next_event() => event,
            };
            let Some(event) = event else { return end };
            if let Step::Violation(violation) = turn.checker.check_event(&event) {
                #[cfg(feature = "mutants")]
                if let Some(second) = self.second_result(&violation, &event) {
                    return Box::pin(self.read_to_eof(turn, second, deadline)).await;
                }
                return End::Violation(violation);
            }
        }
    }

    /// Step 6, reap: stdin closed, spec 10's steps 3-5 on the tree (the exit grace already
    /// running after a result), the escaped daemons, then the runtime's redacted stderr.
    async fn reap(&self, turn: &mut Turn, end: &End, redactor: &Redactor) -> String {
        turn.stdin.close();
        let stdout_drain = turn.reader.drain_in_background();
        let bounds = self.config.run_bounds;
        let first_bound = match (end, turn.exit_deadline) {
            #[cfg(feature = "mutants")]
            (End::KilledOnCancel, _) => None,
            (End::Result(_), Some(deadline)) => {
                Some(deadline.saturating_duration_since(Instant::now()))
            }
            _ => Some(bounds.stdin_close_grace),
        };
        let tree_gone = self
            .stop_tree(&mut turn.child, turn.tree, first_bound)
            .await;
        turn.guard.armed = !tree_gone;
        #[cfg(feature = "mutants")]
        self.disarm_for_leader_only(&mut turn.guard);
        self.end_escaped_daemons(&turn.tree);
        turn.tree.release();
        turn.stdin.abort();
        stdout_drain.abort();
        let stderr = std::mem::replace(&mut turn.stderr, StderrDrain::Late(None));
        let stderr = stderr.finish(redactor, Duration::from_millis(500)).await;
        turn.guard.settle();
        stderr
    }

    /// Spec 10 steps 3-5 (and the end of every run): stdin is already closed; wait `first_bound`,
    /// SIGTERM the tree, wait, SIGKILL it, and verify it is gone.
    async fn stop_tree(
        &self,
        child: &mut Child,
        tree: OwnedTree,
        first_bound: Option<Duration>,
    ) -> bool {
        let bounds = self.config.run_bounds;
        if let Some(first_bound) = first_bound {
            // Step 3: stdin closed, the runtime may exit on its own.
            if self.settle(child, tree, first_bound).await {
                return true;
            }
            // Step 4: SIGTERM the tree.
            self.signal_tree(tree, Stop::Terminate);
            if self.settle(child, tree, bounds.term_grace).await {
                return true;
            }
        }
        // Step 5: SIGKILL the tree and verify it is gone.
        self.signal_tree(tree, Stop::Kill);
        let gone = self.settle(child, tree, bounds.kill_wait).await;
        if !gone {
            self.log(&format!(
                "the runtime tree of pid {} still has live processes after SIGKILL",
                tree.leader_pid()
            ));
        }
        gone
    }

    /// Signal every process of the tree.
    fn signal_tree(&self, tree: OwnedTree, how: Stop) {
        #[cfg(feature = "mutants")]
        if self.signal_leader_only(tree, how) {
            return;
        }
        if let Err(error) = tree.stop(how) {
            self.log(&format!(
                "signalling the runtime tree of pid {} failed: {error}",
                tree.leader_pid()
            ));
        }
    }

    /// Wait up to `bound` for the child to exit and the whole tree to be gone.
    async fn settle(&self, child: &mut Child, tree: OwnedTree, bound: Duration) -> bool {
        let deadline = Instant::now() + bound;
        if tokio::time::timeout_at(deadline, child.wait())
            .await
            .is_err()
        {
            return false;
        }
        #[cfg(feature = "mutants")]
        if self.leader_only() {
            return true;
        }
        tree.wait_empty(deadline.saturating_duration_since(Instant::now()))
            .await
    }

    /// Spec 10 "terminate the owned process tree", for the part that left the group: on Linux the
    /// host is a child subreaper, so a daemon that double-forked and called `setsid`/`setpgid` was
    /// re-parented to it; kill every such orphan of this run's tree, never another run's (see
    /// `process::end_adopted_orphans`).
    fn end_escaped_daemons(&self, tree: &OwnedTree) {
        #[cfg(feature = "mutants")]
        if self.leader_only() {
            return;
        }
        let killed = process::end_adopted_orphans(tree, self.config.run_bounds.kill_wait);
        if !killed.is_empty() {
            self.log(&format!(
                "killed {} process(es) that escaped the runtime's process group: pids {killed:?}",
                killed.len()
            ));
        }
    }

    /// Step 7, outcome: the status, the session mapping updated (spec 7), the outcome.
    fn conclude(
        &self,
        request: &RunRequest,
        turn: &Turn,
        plan: Option<SessionPlan>,
        end: &End,
        stderr: String,
    ) -> Outcome {
        let (status, code, message) = self.classify(end, turn.cancel_sent);
        let resume_rejected = matches!(end, End::Result(result) if result.status == Status::Failed && result.resume_rejected);
        let validated = turn.checker.session_id().map(str::to_string);
        let session_id = self.update_mapping(request, plan, resume_rejected, validated.as_ref());
        Outcome {
            status,
            session_id,
            resumed: turn.session_resumed && validated.is_some(),
            code,
            message,
            foreign_frames: turn
                .checker
                .foreign_frames()
                .max(turn.provisional.foreign_frames()),
            stderr,
        }
    }

    /// A validated session is stored; a rejected resume or a stale key forgets the mapping;
    /// otherwise it stays. Returns the conversation's session after the run.
    fn update_mapping(
        &self,
        request: &RunRequest,
        plan: Option<SessionPlan>,
        resume_rejected: bool,
        validated: Option<&String>,
    ) -> Option<String> {
        let conversation = &request.conversation_id;
        let (store, plan) = match (self.config.store.as_ref(), plan) {
            (Some(store), Some(plan)) => (store, plan),
            (Some(_), None) => return self.mapped_session(conversation),
            (None, _) => return validated.cloned(),
        };
        let saved = if resume_rejected {
            store.forget(conversation).map(|()| None)
        } else if let Some(session_id) = validated {
            let mapping = SessionMapping {
                session_id: session_id.clone(),
                key: plan.key,
            };
            #[cfg(feature = "mutants")]
            let store = self.saving_store(store);
            store.save(&mapping).map(|()| Some(session_id.clone()))
        } else if plan.stale {
            store.forget(conversation).map(|()| None)
        } else {
            Ok(store
                .load(conversation)
                .mapping
                .map(|mapping| mapping.session_id))
        };
        saved.unwrap_or_else(|error| {
            self.log(&format!(
                "the session mapping could not be updated: {error}"
            ));
            validated.cloned()
        })
    }

    pub(crate) fn mapped_session(&self, conversation_id: &str) -> Option<String> {
        let store = self.config.store.as_ref()?;
        store
            .load(conversation_id)
            .mapping
            .map(|mapping| mapping.session_id)
    }

    fn classify(&self, end: &End, cancel_sent: bool) -> (Status, Option<String>, Option<String>) {
        let failed =
            |code: &str, message: String| (Status::Failed, Some(code.to_string()), Some(message));
        let bounds = self.config.run_bounds;
        match end {
            End::Result(result) => classify_result(result),
            End::Violation(violation)
                if violation.code == ViolationCode::MissingResult && cancel_sent =>
            {
                (Status::Cancelled, None, None)
            }
            #[cfg(feature = "mutants")]
            End::Violation(violation)
                if violation.code == ViolationCode::MissingResult && self.eof_is_success() =>
            {
                (Status::Completed, None, None)
            }
            End::Violation(violation) => failed(violation.code.as_str(), violation.message.clone()),
            End::CancelledBeforeExecute | End::CancelGraceExpired => {
                (Status::Cancelled, None, None)
            }
            #[cfg(feature = "mutants")]
            End::KilledOnCancel => (Status::Cancelled, None, None),
            End::ReadyTimeout => failed(
                codes::READY_TIMEOUT,
                format!("the runtime sent no ready frame within {:?}", bounds.ready),
            ),
            End::RunTimeout => failed(
                codes::RUN_TIMEOUT,
                format!("the run did not finish within {:?}", bounds.run),
            ),
        }
    }

    fn spawn_failure(&self, request: &RunRequest, message: String) -> Outcome {
        Outcome {
            status: Status::Failed,
            session_id: self.mapped_session(&request.conversation_id),
            resumed: false,
            code: Some(codes::SPAWN_FAILED.to_string()),
            message: Some(message),
            foreign_frames: 0,
            stderr: String::new(),
        }
    }
}

/// A failed run's outcome is also an event (the last of the run).
fn failure_reported(outcome: Outcome, emit: EventSink<'_>) -> Outcome {
    if let (Status::Failed, Some(code), Some(message)) =
        (outcome.status, &outcome.code, &outcome.message)
    {
        emit(Event::failure(code, message));
    }
    outcome
}

/// The outcome fields a terminal `result` frame gives.
fn classify_result(result: &RunResult) -> (Status, Option<String>, Option<String>) {
    let failed =
        |code: &str, message: String| (Status::Failed, Some(code.to_string()), Some(message));
    match result.status {
        status @ (Status::Completed | Status::Cancelled) => (status, None, None),
        Status::Failed => {
            let (runtime_code, runtime_message) =
                result.error.as_ref().map_or(("unknown", ""), |error| {
                    (error.code.as_str(), error.message.as_str())
                });
            if result.resume_rejected {
                failed(
                    codes::RESUME_REJECTED,
                    format!("the runtime rejected the resume ({runtime_code}: {runtime_message}); the next run starts a new session"),
                )
            } else {
                failed(
                    codes::RUN_FAILED,
                    format!("the runtime failed the run: {runtime_code}: {runtime_message}"),
                )
            }
        }
    }
}

/// The end a finished stream gives: its result, or why it has none.
fn end_of(terminal: Terminal) -> End {
    match terminal {
        Terminal::Result(result) => End::Result(result),
        Terminal::Violation(violation) => End::Violation(violation),
    }
}

/// Spec 7's compatibility key for this run and this runtime.
fn compatibility_key(
    request: &RunRequest,
    prepared: &Prepared,
    identity: &RuntimeIdentity,
) -> CompatibilityKey {
    let (provider, model) = crate::models::key_route(request.model.as_ref());
    CompatibilityKey {
        conversation_id: request.conversation_id.clone(),
        project_id: request.project_id.clone(),
        cwd: prepared.cwd_text.clone(),
        runtime_id: RUNTIME_ID.to_string(),
        provider,
        model,
        executable: prepared.executable_identity.clone(),
        version_family: prepared.version_family.clone(),
        profile: PROFILE.to_string(),
        protocol_generation: identity.protocol_version,
        plugin_version: identity.plugin_version.clone(),
        compatibility_generation: identity.compatibility_generation.clone(),
    }
}

/// The `execute` command of a run (spec 6): everything OpenDesign sends the runtime for a turn.
/// `route`: the picked model (none for `default`) and reasoning effort (spec 12).
fn execute_command(
    route: (Option<ModelRoute>, Option<String>),
    request_id: &str,
    cwd: &str,
    resume_session_id: Option<String>,
    prompt: String,
) -> HostCommand {
    let (model, reasoning_effort) = route;
    HostCommand::Execute(Execute {
        request_id: request_id.to_string(),
        cwd: cwd.to_string(),
        prompt,
        resume_session_id,
        model,
        reasoning_effort,
        mcp_servers: Vec::new(),
    })
}

/// A checker for `context` that has already seen the lines up to and including `ready`.
pub(crate) fn checker_after_ready(context: RunContext, ready_lines: &[LineEvent]) -> StreamChecker {
    let mut checker = StreamChecker::new(context);
    for event in ready_lines {
        checker.check_event(event);
    }
    checker
}
