//! The global checks made on every run step, each a small unit over what the run left behind (its
//! journal entries, the driver's outcome, the case's world) and blamed on its own rule. A check
//! reads like the spec sentence it tests; adding one is one file and one line in [`RUN_CHECKS`].

mod argv;
mod cancel_request;
mod commands;
mod execute_after_ready;
mod execute_fields;
mod launch_argv;
mod mcp_servers;
mod new_process;
mod other_runtime;
mod outcome_hygiene;
mod reaped;
mod route;
mod usage_counts;

pub use argv::canary_in_argv;
pub use other_runtime::{fate, Fate, OtherRun};
pub use outcome_hygiene::MIN_SCANNED_PROMPT;
pub use reaped::{alive_after_grace, reaped_violations, still_alive};

use super::world::World;
use dsh_engine::journal::{Entry, Journal};
use dsh_formats::case::RunStep;
use serde_json::Value;
use std::path::Path;

/// What one run step left behind, for the checks to read.
pub struct RunEvidence<'a> {
    /// Every journal entry written since the run request was sent.
    pub entries: &'a [Entry],
    /// The entries of the run's own `--stdio` process.
    pub process: &'a [&'a Entry],
    /// The `execute` that process received, if any.
    pub execute: Option<&'a Value>,
    /// The driver's `outcome` reply.
    pub outcome: &'a Value,
    /// The `event` replies of the run, in order (each reply's `event`).
    pub events: &'a [Value],
    pub run: &'a RunStep,
    /// The canonical project dir of the run.
    pub cwd: &'a Path,
    pub world: &'a World,
    pub journal: &'a Journal,
    /// Pids of the `--stdio` processes of the case's earlier runs.
    pub earlier_runs: &'a [i32],
    /// Whether the driver claims the `mcp` capability (it may then send MCP entries).
    pub claims_mcp: bool,
    /// The per-case supervisor the driver runs under, whose tree holds every process of the case
    /// (None where there is none: not Linux, or a reused driver).
    pub tree_root: Option<i32>,
}

impl RunEvidence<'_> {
    pub fn outcome_str(&self, member: &str) -> Option<&str> {
        self.outcome.get(member).and_then(Value::as_str)
    }
}

/// A broken global rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub rule: &'static str,
    pub why: String,
}

impl Violation {
    pub fn new(rule: &'static str, why: impl Into<String>) -> Violation {
        Violation {
            rule,
            why: why.into(),
        }
    }
}

/// One global check.
pub type RunCheck = fn(&RunEvidence) -> Vec<Violation>;

/// Every check made after each run step, in the order their findings are reported.
pub const RUN_CHECKS: &[RunCheck] = &[
    argv::check,
    launch_argv::check,
    new_process::check,
    commands::check,
    execute_after_ready::check,
    execute_fields::check,
    route::check,
    mcp_servers::check,
    cancel_request::check,
    reaped::check,
    outcome_hygiene::check,
    usage_counts::check,
];

/// The pids of the `dsh ... --stdio` processes the entries show starting.
pub fn stdio_starts(entries: &[Entry]) -> Vec<i32> {
    entries
        .iter()
        .filter(|entry| entry.event() == "start" && is_stdio_start(entry))
        .filter_map(Entry::pid)
        .collect()
}

/// A `start` of `dsh ... --stdio`: by fake-dsh's mode, or by argv when fake-dsh rejected the
/// command line (mode `error`) but the host did spawn its run process.
fn is_stdio_start(entry: &Entry) -> bool {
    entry.mode() == Some(dsh_formats::journal::Mode::Stdio)
        || entry
            .argv()
            .is_some_and(|argv| argv.iter().any(|arg| arg == "--stdio"))
}
