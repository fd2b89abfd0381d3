//! One turn (spec 6-10): spawn `dsh --profile open-design --stdio` in its own process tree,
//! validate `ready`, choose new session vs resume from the compatibility key, send `execute`,
//! run stdout through the strict checker while stderr drains concurrently, normalize frames into
//! events, cancel in the five steps of spec 10, and report the outcome only after the whole tree
//! is reaped.

use crate::codes::{self, Diagnostic};
use crate::discovery::{self, PROFILE};
use crate::events::{Event, Normalizer};
use crate::host::Host;
use crate::mutants::Mutant;
use crate::process::{self, spawn_owned, OwnedTree, Stop};
use crate::redact::Redactor;
use crate::session_store::{CompatibilityKey, SessionMapping, RUNTIME_ID};
use crate::stderr_capture::StderrCapture;
use dsh_protocol::frames::{Execute, ModelRoute, Result as RunResult, RuntimeIdentity, Status};
use dsh_protocol::{
    HostCommand, LineEvent, LineFramer, RunContext, RuntimeFrame, Step, StreamChecker, Terminal,
    Violation, ViolationCode,
};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::{mpsc, watch};
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
    pub model: ModelRoute,
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
    KilledOnCancel,
    ReadyTimeout,
    RunTimeout,
}

struct AttemptResult {
    outcome: Outcome,
    resume_rejected: bool,
}

/// Resolves when the cancel signal is (or already was) set; never when the sender is gone.
async fn cancel_requested(signal: &mut CancelSignal) {
    loop {
        if *signal.borrow_and_update() {
            return;
        }
        if signal.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Reads stdout into framer events; cancel-safe (an interrupted read loses nothing).
struct FrameReader {
    stdout: Option<ChildStdout>,
    framer: LineFramer,
    pending: VecDeque<LineEvent>,
    finished: bool,
    chunk: Vec<u8>,
}

impl FrameReader {
    fn new(stdout: Option<ChildStdout>) -> Self {
        Self {
            stdout,
            framer: LineFramer::new(),
            pending: VecDeque::new(),
            finished: false,
            chunk: vec![0u8; 64 * 1024],
        }
    }

    /// The next line event; `None` once the stream ended and everything was handed out.
    async fn next_event(&mut self) -> Option<LineEvent> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
            }
            if self.finished {
                return None;
            }
            let read = match self.stdout.as_mut() {
                Some(stdout) => stdout.read(&mut self.chunk).await.unwrap_or(0),
                None => 0,
            };
            if read == 0 {
                self.finished = true;
                self.pending.extend(self.framer.finish());
            } else {
                let events = self.framer.push(&self.chunk[..read]);
                self.pending.extend(events);
            }
        }
    }

    /// Keep draining stdout in the background (so a writer never blocks) until aborted.
    fn drain_in_background(mut self) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            if let Some(mut stdout) = self.stdout.take() {
                let _ = tokio::io::copy(&mut stdout, &mut tokio::io::sink()).await;
            }
        })
    }
}

/// Writes lines to the runtime's stdin without ever blocking the run loop; `close` ends stdin
/// after the lines already queued.
struct StdinWriter {
    queue: Option<mpsc::UnboundedSender<Vec<u8>>>,
    task: tokio::task::JoinHandle<()>,
}

impl StdinWriter {
    fn new(stdin: Option<ChildStdin>) -> Self {
        let (queue, mut lines) = mpsc::unbounded_channel::<Vec<u8>>();
        let task = tokio::spawn(async move {
            let Some(mut stdin) = stdin else { return };
            while let Some(line) = lines.recv().await {
                if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
                    return;
                }
            }
        });
        Self {
            queue: Some(queue),
            task,
        }
    }

    fn send(&self, line: String) {
        if let Some(queue) = &self.queue {
            let _ = queue.send(line.into_bytes());
        }
    }

    fn close(&mut self) {
        self.queue = None;
    }
}

impl Drop for StdinWriter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Kills the tree if the run is abandoned before it was verified gone.
struct TreeGuard {
    tree: OwnedTree,
    armed: bool,
}

impl Drop for TreeGuard {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.tree.stop(Stop::Kill);
        }
    }
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
            Err(diagnostic) => Outcome {
                status: Status::Failed,
                session_id: self.mapped_session(&request.conversation_id),
                resumed: false,
                code: Some(codes::SPAWN_FAILED.to_string()),
                message: Some(diagnostic.message),
                foreign_frames: 0,
                stderr: String::new(),
            },
            Ok(prepared) => {
                let first = self
                    .attempt(
                        request,
                        &prepared,
                        &redactor,
                        cancel.clone(),
                        &mut *emit,
                        false,
                    )
                    .await;
                if first.resume_rejected && self.mutant(Mutant::MissingResumeNewSession) {
                    self.attempt(request, &prepared, &redactor, cancel, &mut *emit, true)
                        .await
                        .outcome
                } else {
                    first.outcome
                }
            }
        };
        if let (Status::Failed, Some(code), Some(message)) =
            (outcome.status, &outcome.code, &outcome.message)
        {
            emit(Event::failure(code, message));
        }
        outcome
    }

    fn mapped_session(&self, conversation_id: &str) -> Option<String> {
        let store = self.config.store.as_ref()?;
        store
            .load(conversation_id)
            .mapping
            .map(|mapping| mapping.session_id)
    }

    async fn prepare(&self, request: &RunRequest) -> Result<Prepared, Diagnostic> {
        let env = &self.config.env;
        let resolved = discovery::resolve_executable(env.dsh_bin.as_deref(), env.path.as_deref())
            .map_err(|diagnostic| {
            Diagnostic::new(codes::SPAWN_FAILED, diagnostic.to_string())
        })?;
        for note in &resolved.notes {
            self.log(note);
        }
        let canonical = if self.mutant(Mutant::NoCwdCanonicalize) {
            Ok(request.cwd.clone())
        } else {
            std::fs::canonicalize(&request.cwd)
        };
        let cwd = canonical.ok().filter(|cwd| cwd.is_dir()).ok_or_else(|| {
            Diagnostic::new(
                codes::SPAWN_FAILED,
                format!(
                    "the project cwd {} is not an existing directory",
                    request.cwd.display()
                ),
            )
        })?;
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

    fn keys_match(&self, stored: &CompatibilityKey, current: &CompatibilityKey) -> bool {
        if self.mutant(Mutant::ResumeUnderChangedCwd) {
            let mut stored = stored.clone();
            stored.cwd.clone_from(&current.cwd);
            return stored == *current;
        }
        stored == current
    }

    fn signal_tree(&self, tree: OwnedTree, how: Stop) {
        let sent = if self.mutant(Mutant::KillDirectChildOnly) {
            tree.stop_leader_only(how)
        } else {
            tree.stop(how)
        };
        if let Err(error) = sent {
            self.log(&format!(
                "signalling the runtime tree of pid {} failed: {error}",
                tree.leader_pid()
            ));
        }
    }

    /// Spec 10 "terminate the owned process tree", for the part that left the group: on Linux the
    /// host is a child subreaper, so a daemon that double-forked and called `setsid`/`setpgid` was
    /// re-parented to it; kill every such orphan (see `process::end_adopted_orphans`).
    fn end_escaped_daemons(&self) {
        if self.mutant(Mutant::KillDirectChildOnly) {
            return;
        }
        let killed = process::end_adopted_orphans(self.config.run_bounds.kill_wait);
        if !killed.is_empty() {
            self.log(&format!(
                "killed {} process(es) that escaped the runtime's process group: pids {killed:?}",
                killed.len()
            ));
        }
    }

    /// Wait up to `bound` for the child to exit and (unless the mutant says otherwise) the whole
    /// tree to be gone.
    async fn settle(&self, child: &mut Child, tree: OwnedTree, bound: Duration) -> bool {
        let deadline = Instant::now() + bound;
        if tokio::time::timeout_at(deadline, child.wait())
            .await
            .is_err()
        {
            return false;
        }
        if self.mutant(Mutant::KillDirectChildOnly) {
            return true;
        }
        tree.wait_empty(deadline.saturating_duration_since(Instant::now()))
            .await
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
            if self.settle(child, tree, first_bound).await {
                return true;
            }
            self.signal_tree(tree, Stop::Terminate);
            if self.settle(child, tree, bounds.term_grace).await {
                return true;
            }
        }
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

    async fn attempt(
        &self,
        request: &RunRequest,
        prepared: &Prepared,
        redactor: &Redactor,
        mut cancel: CancelSignal,
        emit: EventSink<'_>,
        force_new_session: bool,
    ) -> AttemptResult {
        let bounds = self.config.run_bounds;
        let store = self.config.store.as_ref();
        let request_id = next_request_id();
        let started = Instant::now();
        let run_deadline = started + bounds.run;

        let mut command = tokio::process::Command::new(&prepared.executable);
        command.args(["--profile", PROFILE, "--stdio"]);
        if self.mutant(Mutant::KeyInArgv) {
            if let Ok(key) = std::env::var("DEEPSEEK_API_KEY") {
                command.arg(format!("--api-key={key}"));
            }
        }
        command
            .current_dir(&prepared.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let (mut child, tree) = match spawn_owned(&mut command) {
            Ok(spawned) => spawned,
            Err(error) => {
                return self.spawn_failure(
                    request,
                    format!(
                        "`{} --profile {PROFILE} --stdio` could not be started: {error}",
                        prepared.executable.display()
                    ),
                )
            }
        };
        let mut guard = TreeGuard { tree, armed: true };
        let mut stdin = StdinWriter::new(child.stdin.take());
        if self.mutant(Mutant::ExecuteBeforeReady) {
            stdin.send(early_execute(request, &request_id, &prepared.cwd_text).to_line());
        }
        let mut reader = FrameReader::new(child.stdout.take());
        let stderr = child.stderr.take();
        let (capture, undrained_stderr) = if self.mutant(Mutant::NoStderrDrain) {
            (None, stderr)
        } else {
            (
                stderr.map(|stderr| StderrCapture::start(stderr, redactor.longest_secret())),
                None,
            )
        };

        // Spec 6/7: ready first, within a bound. A provisional checker validates it; the run's own
        // checker (which needs the resume decision, which needs `ready`) replays the same lines.
        let ready_deadline = (started + bounds.ready).min(run_deadline);
        let mut provisional = StreamChecker::new(RunContext::new(request_id.clone()));
        let mut ready_lines: Vec<LineEvent> = Vec::new();
        let ready: Result<RuntimeIdentity, End> = loop {
            tokio::select! {
                biased;
                () = cancel_requested(&mut cancel) => break Err(End::CancelledBeforeExecute),
                () = sleep_until(ready_deadline) => break Err(if ready_deadline < run_deadline { End::ReadyTimeout } else { End::RunTimeout }),
                event = reader.next_event() => match event {
                    None => break Err(match provisional.finish() {
                        Terminal::Violation(violation) => End::Violation(violation),
                        Terminal::Result(result) => End::Result(result),
                    }),
                    Some(event) => {
                        let step = provisional.check_event(&event);
                        ready_lines.push(event);
                        match step {
                            Step::Accepted(RuntimeFrame::Ready(identity)) => break Ok(identity),
                            Step::Violation(violation) => break Err(End::Violation(violation)),
                            _ => {}
                        }
                    }
                },
            }
        };

        let mut cancel_sent = false;
        let mut decided: Option<(CompatibilityKey, Option<String>, bool)> = None;
        let mut checker = StreamChecker::new(RunContext::new(request_id.clone()));
        let mut session_resumed = false;
        let mut exit_deadline: Option<Instant> = None;
        let end = match ready {
            Err(end) => end,
            Ok(identity) => {
                let key = CompatibilityKey {
                    conversation_id: request.conversation_id.clone(),
                    project_id: request.project_id.clone(),
                    cwd: prepared.cwd_text.clone(),
                    runtime_id: RUNTIME_ID.to_string(),
                    provider: request.model.provider.clone(),
                    model: request.model.id.clone(),
                    executable: prepared.executable_identity.clone(),
                    version_family: prepared.version_family.clone(),
                    profile: PROFILE.to_string(),
                    protocol_generation: identity.protocol_version,
                    plugin_version: identity.plugin_version.clone(),
                    compatibility_generation: identity.compatibility_generation.clone(),
                };
                let lookup = store.map(|store| store.load(&request.conversation_id));
                if let Some(warning) = lookup.as_ref().and_then(|lookup| lookup.warning.as_ref()) {
                    self.log(warning);
                }
                let early = self.mutant(Mutant::ExecuteBeforeReady);
                let (resume, stale) = match lookup.and_then(|lookup| lookup.mapping) {
                    Some(_) if early => (None, true),
                    Some(mapping) if !force_new_session && self.keys_match(&mapping.key, &key) => {
                        (Some(mapping.session_id), false)
                    }
                    Some(mapping) => {
                        if !force_new_session {
                            self.log(&format!(
                                "compatibility key changed ({}): starting a new session with bootstrap context",
                                mapping.key.differences(&key).join(", ")
                            ));
                        }
                        (None, true)
                    }
                    None => (None, false),
                };
                let prompt = match &resume {
                    Some(_) => request.prompt.clone(),
                    None if request.bootstrap.is_empty()
                        || self.mutant(Mutant::NoBootstrapOnNewSession) =>
                    {
                        request.prompt.clone()
                    }
                    None => format!("{}\n\n{}", request.bootstrap, request.prompt),
                };
                if self.mutant(Mutant::LogPromptToStderr) {
                    self.log(&format!("execute prompt: {prompt}"));
                }
                let execute = HostCommand::Execute(Execute {
                    request_id: request_id.clone(),
                    cwd: prepared.cwd_text.clone(),
                    prompt,
                    resume_session_id: resume.clone(),
                    model: Some(request.model.clone()),
                    reasoning_effort: request.reasoning_effort.clone(),
                    mcp_servers: Vec::new(),
                });
                let context = match &resume {
                    Some(session) if !self.mutant(Mutant::IgnoreResumeMismatch) => {
                        RunContext::resuming(request_id.clone(), session.clone())
                    }
                    _ => RunContext::new(request_id.clone()),
                };
                checker = checker_after_ready(context, &ready_lines);
                decided = Some((key, resume, stale));
                if !early {
                    stdin.send(execute.to_line());
                }

                let mut normalizer = Normalizer::new();
                let mut cancel_deadline: Option<Instant> = None;
                let mut end = loop {
                    tokio::select! {
                        biased;
                        () = cancel_requested(&mut cancel), if !cancel_sent => {
                            cancel_sent = true;
                            if self.mutant(Mutant::SigkillWithoutCancel) {
                                break End::KilledOnCancel;
                            }
                            let named = if self.mutant(Mutant::CancelWrongRequest) {
                                next_request_id()
                            } else {
                                request_id.clone()
                            };
                            stdin.send(HostCommand::cancel(named).to_line());
                            checker.note_cancel_sent();
                            cancel_deadline = Some(Instant::now() + bounds.cancel_grace);
                        }
                        () = sleep_until_some(cancel_deadline) => break End::CancelGraceExpired,
                        () = sleep_until(run_deadline) => break End::RunTimeout,
                        event = reader.next_event() => {
                            let Some(event) = event else {
                                break match checker.finish() {
                                    Terminal::Result(result) => End::Result(result),
                                    Terminal::Violation(violation) => End::Violation(violation),
                                };
                            };
                            let mut step = checker.check_event(&event);
                            if let Step::Violation(violation) = &step {
                                if let Some(replacement) = self.mutant_tolerance(violation, &event, &request_id, &ready_lines) {
                                    let (new_checker, tolerated) = replacement;
                                    checker = new_checker;
                                    if cancel_sent {
                                        checker.note_cancel_sent();
                                    }
                                    step = match tolerated {
                                        Some(frame) => Step::Accepted(frame),
                                        None => checker.check_event(&event),
                                    };
                                }
                            }
                            match step {
                                Step::Skipped => {}
                                Step::Foreign => {
                                    if self.mutant(Mutant::ForeignFrameLeaks) {
                                        if let Some(frame) = frame_of(&event) {
                                            normalizer.frame(&frame).into_iter().for_each(&mut *emit);
                                        }
                                    }
                                }
                                Step::Accepted(RuntimeFrame::Result(result)) => {
                                    normalizer.close_block().into_iter().for_each(&mut *emit);
                                    break End::Result(result);
                                }
                                Step::Accepted(frame) => {
                                    if let RuntimeFrame::Session(session) = &frame {
                                        session_resumed = session.resumed;
                                    }
                                    normalizer.frame(&frame).into_iter().for_each(&mut *emit);
                                }
                                Step::Violation(violation) => {
                                    normalizer.close_block().into_iter().for_each(&mut *emit);
                                    break End::Violation(violation);
                                }
                            }
                        }
                    }
                };
                // After the result: close stdin and read to EOF within a bound, so a second
                // result or anything after the terminal one still fails the run.
                if let End::Result(result) = &end {
                    stdin.close();
                    let grace = if result.status == Status::Cancelled {
                        bounds.stdin_close_grace
                    } else {
                        bounds.exit_grace
                    };
                    let drain_deadline = Instant::now() + grace;
                    exit_deadline = Some(drain_deadline);
                    loop {
                        let event = tokio::select! {
                            () = sleep_until(drain_deadline) => break,
                            event = reader.next_event() => event,
                        };
                        let Some(event) = event else { break };
                        if let Step::Violation(violation) = checker.check_event(&event) {
                            let second = frame_of(&event).filter(|_| {
                                self.mutant(Mutant::AcceptSecondResult)
                                    && violation.code == ViolationCode::DuplicateResult
                            });
                            match second {
                                Some(RuntimeFrame::Result(result)) => end = End::Result(result),
                                _ => {
                                    end = End::Violation(violation);
                                    break;
                                }
                            }
                        }
                    }
                }
                end
            }
        };

        // Teardown: close stdin, then the bounded escalation, then verify the tree is gone.
        stdin.close();
        let stdout_drain = reader.drain_in_background();
        let first_bound = match (&end, exit_deadline) {
            (End::KilledOnCancel, _) => None,
            // The exit grace after a result already started when stdin was closed.
            (End::Result(_), Some(deadline)) => {
                Some(deadline.saturating_duration_since(Instant::now()))
            }
            _ => Some(bounds.stdin_close_grace),
        };
        let tree_gone = self.stop_tree(&mut child, tree, first_bound).await;
        guard.armed = !tree_gone && !self.mutant(Mutant::KillDirectChildOnly);
        self.end_escaped_daemons();
        tree.release();
        drop(stdin);
        stdout_drain.abort();
        let stderr_bound = Duration::from_millis(500);
        let stderr = match (capture, undrained_stderr) {
            (Some(capture), _) => capture.finish(redactor, stderr_bound).await,
            (None, Some(stderr)) => {
                StderrCapture::start(stderr, redactor.longest_secret())
                    .finish(redactor, stderr_bound)
                    .await
            }
            (None, None) => String::new(),
        };
        drop(guard);

        let (status, code, message) = self.classify(&end, cancel_sent);
        let resume_rejected = matches!(&end, End::Result(result) if result.status == Status::Failed && result.resume_rejected);
        let validated = checker.session_id().map(str::to_string);
        let session_id = match (store, decided) {
            (Some(store), Some((key, _, stale))) => {
                let conversation = &request.conversation_id;
                let saved = if resume_rejected {
                    store.forget(conversation).map(|()| None)
                } else if let Some(session_id) = &validated {
                    let mapping = SessionMapping {
                        session_id: session_id.clone(),
                        key,
                    };
                    store.save(&mapping).map(|()| Some(session_id.clone()))
                } else if stale {
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
                    validated.clone()
                })
            }
            (Some(_), None) => self.mapped_session(&request.conversation_id),
            (None, _) => validated.clone(),
        };
        AttemptResult {
            outcome: Outcome {
                status,
                session_id,
                resumed: session_resumed && validated.is_some(),
                code,
                message,
                foreign_frames: checker.foreign_frames().max(provisional.foreign_frames()),
                stderr,
            },
            resume_rejected,
        }
    }

    /// The mutants that tolerate a violation: a replacement checker, and the frame to accept
    /// instead (or `None` to re-check the line with the replacement).
    fn mutant_tolerance(
        &self,
        violation: &Violation,
        event: &LineEvent,
        request_id: &str,
        ready_lines: &[LineEvent],
    ) -> Option<(StreamChecker, Option<RuntimeFrame>)> {
        let rebuild = |context: RunContext| checker_after_ready(context, ready_lines);
        let frame = frame_of(event)?;
        match (violation.code, &frame) {
            (ViolationCode::ContentBeforeSession, _)
                if self.mutant(Mutant::AcceptSessionAfterText) =>
            {
                Some((rebuild(RunContext::new(request_id)), Some(frame)))
            }
            (ViolationCode::ResumeMismatch, RuntimeFrame::Session(session))
                if self.mutant(Mutant::IgnoreResumeMismatch) =>
            {
                let context = if session.resumed {
                    RunContext::resuming(request_id, session.session_id.clone())
                } else {
                    RunContext::new(request_id)
                };
                Some((rebuild(context), None))
            }
            _ => None,
        }
    }

    fn classify(&self, end: &End, cancel_sent: bool) -> (Status, Option<String>, Option<String>) {
        let failed =
            |code: &str, message: String| (Status::Failed, Some(code.to_string()), Some(message));
        let bounds = self.config.run_bounds;
        match end {
            End::Result(result) => match result.status {
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
                            format!(
                                "the runtime failed the run: {runtime_code}: {runtime_message}"
                            ),
                        )
                    }
                }
            },
            End::Violation(violation)
                if violation.code == ViolationCode::MissingResult && cancel_sent =>
            {
                (Status::Cancelled, None, None)
            }
            End::Violation(violation)
                if violation.code == ViolationCode::MissingResult
                    && self.mutant(Mutant::EofIsSuccess) =>
            {
                (Status::Completed, None, None)
            }
            End::Violation(violation) => failed(violation.code.as_str(), violation.message.clone()),
            End::CancelledBeforeExecute | End::CancelGraceExpired | End::KilledOnCancel => {
                (Status::Cancelled, None, None)
            }
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

    fn spawn_failure(&self, request: &RunRequest, message: String) -> AttemptResult {
        AttemptResult {
            outcome: Outcome {
                status: Status::Failed,
                session_id: self.mapped_session(&request.conversation_id),
                resumed: false,
                code: Some(codes::SPAWN_FAILED.to_string()),
                message: Some(message),
                foreign_frames: 0,
                stderr: String::new(),
            },
            resume_rejected: false,
        }
    }
}

/// The `execute-before-ready` mutant's command: a new session with the bootstrap, written before
/// `ready` (so without the compatibility key, which needs it).
fn early_execute(request: &RunRequest, request_id: &str, cwd: &str) -> HostCommand {
    let prompt = if request.bootstrap.is_empty() {
        request.prompt.clone()
    } else {
        format!("{}\n\n{}", request.bootstrap, request.prompt)
    };
    HostCommand::Execute(Execute {
        request_id: request_id.to_string(),
        cwd: cwd.to_string(),
        prompt,
        resume_session_id: None,
        model: Some(request.model.clone()),
        reasoning_effort: request.reasoning_effort.clone(),
        mcp_servers: Vec::new(),
    })
}

/// A checker for `context` that has already seen the lines up to and including `ready`.
fn checker_after_ready(context: RunContext, ready_lines: &[LineEvent]) -> StreamChecker {
    let mut checker = StreamChecker::new(context);
    for event in ready_lines {
        checker.check_event(event);
    }
    checker
}

/// The frame a line holds, parsed on its own (for mutants that bypass the checker).
fn frame_of(event: &LineEvent) -> Option<RuntimeFrame> {
    match event {
        LineEvent::Line { bytes, .. } | LineEvent::Truncated { bytes, .. } => {
            RuntimeFrame::parse_line(bytes).ok()
        }
        LineEvent::TooLarge { .. } => None,
    }
}
