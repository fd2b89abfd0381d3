//! What a run shows while it goes, as the caller wants it: a corpus hands every event to the
//! [`Reporter`] its caller passed (the command line passes one that prints the live table or
//! JSON lines, `dsh_results::output::stream::LiveOutput`; a library caller may collect, or
//! ignore, them). No corpus prints anything itself: a case goes to [`Reporter::case`], any other
//! line to [`Reporter::note`].

use crate::model::CaseResult;

/// A run about to start its cases.
#[derive(Debug, Clone)]
pub struct RunStart {
    /// The host's (or client's) name in reports.
    pub host: String,
    /// The runtime variant's name.
    pub variant: String,
    /// How many case results will come (cases x `--verify` runs).
    pub total: usize,
    /// The longest selected case id, in characters (the table's id column).
    pub id_width: usize,
    /// The head of a table run: kit, host, command, runtime, case count, the corpus line.
    pub header: String,
}

/// Receives a run's events, from the worker threads that produce them.
pub trait Reporter: Sync {
    /// The cases are about to start.
    fn start(&self, start: &RunStart);
    /// One case finished, its expectations applied.
    fn case(&self, case: &CaseResult);
    /// Every case finished, or the run stopped.
    fn finish(&self);
    /// A line for the person running it, outside the cases: a warning, why nothing ran, why
    /// the run stopped, where the runtime or corpus came from. The command line prints it on
    /// stderr after its command's name; a library caller may keep it or drop it (the default).
    fn note(&self, _text: &str) {}
}

/// A reporter that shows nothing.
pub struct Silent;

impl Reporter for Silent {
    fn start(&self, _: &RunStart) {}
    fn case(&self, _: &CaseResult) {}
    fn finish(&self) {}
}

/// How a run ended, for the caller to print and to decide the exit code from.
#[derive(Debug)]
pub enum RunOutcome {
    /// `--list`: the selected cases, in id order.
    Listed(Vec<ListedCase>),
    /// No case selected, or a `--case`/`--skip` glob that matches nothing (said on stderr):
    /// nothing measured.
    NothingSelected,
    /// The cases ran, all or until a stop: the report, and why the run stopped early.
    Ran {
        report: Box<crate::model::SuiteReport>,
        stopped: Option<String>,
    },
}

/// One case `--list` names.
#[derive(Debug, Clone)]
pub struct ListedCase {
    pub id: String,
    /// Its one-line summary (host cases).
    pub summary: Option<String>,
    /// What `--format json|jsonl` lists about it (host cases: spec, rules, file, whether it
    /// loads); `None` lists the id alone in every format.
    pub detail: Option<serde_json::Value>,
}
