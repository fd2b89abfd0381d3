//! Drives one `--stdio` process through one turn the way a careful host would (wait for `ready`,
//! send the execute, read to the terminal result, let it exit) and records everything it saw for
//! the checks to judge.

use super::world::{Target, World};
use dsh_engine::process::{Next, RuntimeProcess, SpawnError, StderrSummary, StdoutEvent};
use dsh_protocol::{LineEvent, RunContext, Step, StreamChecker, Terminal};
use serde_json::Value;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

/// Base bound for `ready` after spawn.
pub const READY_MS: u64 = 5_000;
/// Base bound for a whole turn after the execute.
pub const TURN_MS: u64 = 30_000;
/// Base bound for the process to exit after its terminal result (or after stdin closed).
pub const EXIT_MS: u64 = 3_000;
/// Base bound for an answer to a bad command, and for `result: cancelled` after a cancel.
pub const ANSWER_MS: u64 = 3_000;

/// One stdout line as seen.
#[derive(Debug, Clone)]
pub struct SeenLine {
    pub number: usize,
    pub at: Instant,
    pub kind: LineKind,
}

#[derive(Debug, Clone)]
pub enum LineKind {
    /// A complete line holding a JSON object (`truncated`: it had no final newline).
    Object { value: Value, truncated: bool },
    /// Not a JSON object: why, and a short excerpt.
    NotAFrame { why: String },
    /// Longer than the framer's limit.
    TooLarge,
}

impl SeenLine {
    pub fn object(&self) -> Option<&Value> {
        match &self.kind {
            LineKind::Object { value, .. } => Some(value),
            _ => None,
        }
    }

    pub fn frame_type(&self) -> Option<&str> {
        self.object()
            .and_then(|value| value.get("type"))
            .and_then(Value::as_str)
    }

    pub fn request_id(&self) -> Option<&str> {
        self.object()
            .and_then(|value| value.get("request_id"))
            .and_then(Value::as_str)
    }
}

/// What the host does in the turn.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Ask to resume this session.
    pub resume: Option<String>,
    /// More host lines written right after the execute, in the same write.
    pub after_execute: Vec<u8>,
    /// The extra lines hold a cancel for the active request.
    pub cancels: bool,
    /// Keep stdin open after the result (to see whether the runtime exits by itself).
    pub keep_stdin_open: bool,
    /// Bound on the terminal result after the execute (default [`TURN_MS`]).
    pub result_bound_ms: Option<u64>,
    /// This turn's request id instead of the world's (a second turn in the same world).
    pub request_id: Option<String>,
    /// This turn's prompt instead of the world's (it should still hold the prompt canary).
    pub prompt: Option<String>,
    /// A model (and effort) picked from the runtime's `--models` catalog instead of the default.
    pub picked: Option<Picked>,
}

/// A route and reasoning effort a host's user picked from `--models` (spec 12).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Picked {
    pub provider: String,
    pub id: String,
    pub effort: Option<String>,
}

impl Picked {
    /// `provider/id`, with ` (effort)` when one is picked.
    pub fn describe(&self) -> String {
        match &self.effort {
            Some(effort) => format!("{}/{} ({effort})", self.provider, self.id),
            None => format!("{}/{}", self.provider, self.id),
        }
    }
}

/// How reading the turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Our terminal result arrived.
    Result,
    /// stdout closed first.
    Eof,
    /// The bound passed first.
    Timeout,
}

#[derive(Debug)]
pub struct TurnRecord {
    pub request_id: String,
    /// When the process was started.
    pub started: Instant,
    pub lines: Vec<SeenLine>,
    /// When the execute was written.
    pub execute_at: Instant,
    /// Whether a ready frame arrived before the host wrote anything.
    pub ready_before_write: bool,
    pub ending: Ending,
    /// Index into `lines` of our terminal result.
    pub result: Option<usize>,
    /// The strict checker's verdict on the whole stream.
    pub terminal: Terminal,
    /// The exit status and how long after the result (or after stdin closed) it came.
    pub exit: Option<(ExitStatus, Duration)>,
    /// Whether processes of its group outlived the leader's exit past the bound.
    pub left_processes: bool,
    pub stderr: StderrSummary,
    pub result_bound: Duration,
}

impl TurnRecord {
    pub fn result_frame(&self) -> Option<&Value> {
        self.result.and_then(|index| self.lines[index].object())
    }

    /// Our frames (those carrying our request id), in order.
    pub fn own_frames(&self) -> impl Iterator<Item = &SeenLine> {
        self.lines
            .iter()
            .filter(|line| line.request_id() == Some(self.request_id.as_str()))
    }
}

/// Turn one framer event into a seen line.
pub fn classify(event: &LineEvent, at: Instant) -> Option<SeenLine> {
    let (number, bytes, truncated) = match event {
        LineEvent::Line { number, bytes } => (*number, bytes, false),
        LineEvent::Truncated { number, bytes } => (*number, bytes, true),
        LineEvent::TooLarge { number } => {
            return Some(SeenLine {
                number: *number,
                at,
                kind: LineKind::TooLarge,
            })
        }
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    let kind = match serde_json::from_slice::<Value>(bytes) {
        Ok(value @ Value::Object(_)) => LineKind::Object { value, truncated },
        Ok(_) => LineKind::NotAFrame {
            why: format!("JSON but not an object: {}", excerpt(bytes)),
        },
        Err(error) => LineKind::NotAFrame {
            why: format!("not JSON ({error}): {}", excerpt(bytes)),
        },
    };
    Some(SeenLine { number, at, kind })
}

/// The first 80 characters of a line, lossily decoded and escaped.
pub fn excerpt(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(120)]);
    let mut shown: String = text
        .chars()
        .take(80)
        .collect::<String>()
        .escape_debug()
        .collect();
    if bytes.len() > 80 {
        shown.push_str("...");
    }
    format!("\"{shown}\"")
}

/// Reads stdout events into `lines` and the checker until `stop` says so, the deadline passes or
/// stdout closes.
pub struct Reader<'a> {
    pub process: &'a mut RuntimeProcess,
    pub checker: StreamChecker,
    pub lines: Vec<SeenLine>,
}

/// Why [`Reader::read_until`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Matched,
    Eof,
    Timeout,
}

impl<'a> Reader<'a> {
    pub fn new(process: &'a mut RuntimeProcess, context: RunContext) -> Self {
        Self {
            process,
            checker: StreamChecker::new(context),
            lines: Vec::new(),
        }
    }

    pub fn read_until(
        &mut self,
        deadline: Instant,
        mut stop: impl FnMut(&SeenLine) -> bool,
    ) -> Stop {
        loop {
            match self.process.next_event(deadline) {
                Next::Timeout => return Stop::Timeout,
                Next::Closed | Next::Event(StdoutEvent::Eof, _) => return Stop::Eof,
                Next::Event(StdoutEvent::Line(event), at) => {
                    // Its verdict is kept inside the checker; `finish` reports the first violation.
                    let _: Step = self.checker.check_event(&event);
                    if let Some(line) = classify(&event, at) {
                        let matched = stop(&line);
                        self.lines.push(line);
                        if matched {
                            return Stop::Matched;
                        }
                    }
                }
            }
        }
    }
}

pub fn is_ready(line: &SeenLine) -> bool {
    line.frame_type() == Some("ready")
}

/// Run one turn by `plan` in `world`.
pub fn run(target: &Target, world: &World, plan: &Plan) -> Result<TurnRecord, SpawnError> {
    let mut process = world.spawn_stdio(target)?;
    let started = process.started;
    let request_id = plan
        .request_id
        .clone()
        .unwrap_or_else(|| world.request_id.clone());
    let context = RunContext {
        request_id: request_id.clone(),
        resume_session_id: plan.resume.clone(),
    };
    let mut reader = Reader::new(&mut process, context);

    // A careful host waits for ready; when it never comes, it goes on so the rest is still seen.
    let ready_stop = reader.read_until(target.deadline(READY_MS), is_ready);
    let ready_before_write = ready_stop == Stop::Matched;
    let execute_at = send_execute(&mut reader, world, plan, &request_id);
    let result_bound = target.bound(plan.result_bound_ms.unwrap_or(TURN_MS));
    let ending = await_result(
        &mut reader,
        ready_stop,
        execute_at + result_bound,
        &request_id,
    );
    let result = reader
        .lines
        .iter()
        .rposition(|line| is_own_result(line, &request_id));
    let (exit, left_processes) = let_it_exit(&mut reader, target, plan, ending);
    let terminal = reader.checker.finish();
    let lines = std::mem::take(&mut reader.lines);
    drop(reader);
    if exit.is_none() {
        process.kill();
    }
    let stderr = process.stderr(Instant::now() + target.bound(1_000));
    Ok(TurnRecord {
        request_id,
        started,
        lines,
        execute_at,
        ready_before_write,
        ending,
        result,
        terminal,
        exit,
        left_processes,
        stderr,
        result_bound,
    })
}

/// The plan's execute (new, resume or a picked route) and whatever it sends after it; returns
/// when they were written.
fn send_execute(reader: &mut Reader<'_>, world: &World, plan: &Plan, request_id: &str) -> Instant {
    let mut commands = match &plan.picked {
        None => world.execute_line_with(request_id, plan.resume.as_deref(), plan.prompt.as_deref()),
        Some(picked) => world.execute_line_picking(request_id, picked),
    };
    commands.extend_from_slice(&plan.after_execute);
    if plan.cancels {
        reader.checker.note_cancel_sent();
    }
    let execute_at = Instant::now();
    reader.process.write(&commands);
    execute_at
}

fn is_own_result(line: &SeenLine, request_id: &str) -> bool {
    line.frame_type() == Some("result") && line.request_id() == Some(request_id)
}

/// Reads until this run's result, EOF or `deadline` (at once EOF when stdout ended before ready).
fn await_result(
    reader: &mut Reader<'_>,
    ready_stop: Stop,
    deadline: Instant,
    request_id: &str,
) -> Ending {
    if ready_stop == Stop::Eof {
        return Ending::Eof;
    }
    match reader.read_until(deadline, |line| is_own_result(line, request_id)) {
        Stop::Matched => Ending::Result,
        Stop::Eof => Ending::Eof,
        Stop::Timeout => Ending::Timeout,
    }
}

/// Lets the runtime exit (by itself with stdin open, or after stdin closes), reads what it still
/// writes (frames after the result are violations), and says whether its group emptied: the exit
/// status with how long after the close it came, and whether processes were left.
fn let_it_exit(
    reader: &mut Reader<'_>,
    target: &Target,
    plan: &Plan,
    ending: Ending,
) -> (Option<(ExitStatus, Duration)>, bool) {
    if !plan.keep_stdin_open || ending != Ending::Result {
        reader.process.close_stdin();
    }
    let exit_from = Instant::now();
    let exit = reader
        .process
        .wait_exit(target.deadline(EXIT_MS))
        .map(|(status, at)| (status, at.saturating_duration_since(exit_from)));
    reader.read_until(Instant::now() + target.bound(500), |_| false);
    let left_processes = exit.is_some()
        && !reader
            .process
            .wait_group_empty(Instant::now() + target.bound(1_000));
    (exit, left_processes)
}

/// One-line description of the checker's terminal state.
pub fn describe_terminal(terminal: &Terminal) -> String {
    match terminal {
        Terminal::Result(_) => "the strict checker accepted the terminal result".to_string(),
        Terminal::Violation(violation) => {
            format!("{}: {}", violation.code.as_str(), violation.message)
        }
    }
}
