//! The shared vocabulary of the runtime-side checks: what a check is ([`Check`], its
//! [`Procedure`]), what it concludes ([`Status`], [`Outcome`] and their constructors), and the
//! steps several check modules share (running a short-lived CLI surface, a frame's schema errors,
//! how a turn ended without its result). The catalogue in [`super::checks`], [`super::models`] and
//! [`super::product`] import it; it imports none of them.

use super::turn::{self, Ending, SeenLine};
use super::world::{Target, World};
use dsh_engine::process::{describe_exit, Next, SpawnError, StdoutEvent};
use serde_json::Value;

/// Base bound for `--version` and `--probe` to exit.
pub(super) const SURFACE_MS: u64 = 10_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    Pass,
    Fail,
    /// The check could not exercise its rule this time (e.g. the turn ended before the cancel
    /// could matter); not a failure.
    Inconclusive,
    /// The runtime did something the spec allows but hosts are known to stumble over (an interop
    /// hazard runtime authors should see); not a failure.
    Informational,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Inconclusive => "inconclusive",
            Status::Informational => "informational",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub status: Status,
    pub detail: String,
}

pub(super) fn pass(detail: impl Into<String>) -> Outcome {
    Outcome {
        status: Status::Pass,
        detail: detail.into(),
    }
}

pub(super) fn fail(detail: impl Into<String>) -> Outcome {
    Outcome {
        status: Status::Fail,
        detail: detail.into(),
    }
}

pub(super) fn informational(detail: impl Into<String>) -> Outcome {
    Outcome {
        status: Status::Informational,
        detail: detail.into(),
    }
}

pub(super) fn inconclusive(detail: impl Into<String>) -> Outcome {
    Outcome {
        status: Status::Inconclusive,
        detail: detail.into(),
    }
}

/// How a check gets what it judges.
#[derive(Clone, Copy)]
pub enum Procedure {
    /// It starts its own runtime process(es) in a fresh world of its own.
    Fresh(fn(&Target, &World) -> Result<Outcome, SpawnError>),
    /// It judges what [`super::observed`] observed once for several checks.
    Observed(fn(&Target) -> Result<Outcome, SpawnError>),
}

pub struct Check {
    pub id: &'static str,
    /// The rule id in `fixtures/rules.json` this check enforces.
    pub rule: &'static str,
    pub summary: &'static str,
    pub procedure: Procedure,
}

/// `12 ms`, `1.5 s`.
pub fn ms(duration: std::time::Duration) -> String {
    let millis = duration.as_secs_f64() * 1000.0;
    if millis >= 1000.0 {
        format!("{:.1} s", millis / 1000.0)
    } else {
        format!("{millis:.0} ms")
    }
}

/// A short-lived surface that finished: its stdout lines and how it exited.
pub(super) struct SurfaceRun {
    pub(super) lines: Vec<SeenLine>,
    pub(super) exit: String,
    pub(super) code: i32,
}

/// Run a short-lived surface (`--version`, `--probe`) to completion; `Ok(Err(why))` when it
/// did not finish within the bound.
pub(super) fn run_surface(
    target: &Target,
    world: &World,
    args: &[&str],
) -> Result<Result<SurfaceRun, String>, SpawnError> {
    let mut process = world.spawn(target, args)?;
    process.close_stdin();
    let deadline = target.deadline(SURFACE_MS);
    let mut lines = Vec::new();
    loop {
        match process.next_event(deadline) {
            Next::Event(StdoutEvent::Line(event), at) => lines.extend(turn::classify(&event, at)),
            Next::Event(StdoutEvent::Eof, _) | Next::Closed => break,
            Next::Timeout => {
                return Ok(Err(format!(
                    "did not finish within {}",
                    ms(target.bound(SURFACE_MS))
                )))
            }
        }
    }
    match process.wait_exit(deadline) {
        Some((status, _)) => Ok(Ok(SurfaceRun {
            lines,
            exit: describe_exit(&status),
            code: status.code().unwrap_or(-1),
        })),
        None => Ok(Err(format!(
            "closed stdout but did not exit within {}",
            ms(target.bound(SURFACE_MS))
        ))),
    }
}

/// Schema errors of a frame, joined, or `None` when it is valid.
pub fn schema_problem(frame: &Value) -> Option<String> {
    match dsh_protocol::schema::validate("frame.schema.json", frame) {
        Ok(()) => None,
        Err(errors) => Some(
            errors
                .iter()
                .take(3)
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        ),
    }
}

/// The turn ended without its terminal result: say how.
pub(super) fn no_result(record: &turn::TurnRecord) -> String {
    match record.ending {
        Ending::Timeout => format!(
            "no terminal result within {} of the execute",
            ms(record.result_bound)
        ),
        _ => "stdout closed without a terminal result".to_string(),
    }
}
