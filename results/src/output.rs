//! Renders a [`crate::model::SuiteReport`]: terminal table, JSON, JUnit XML, Markdown.
//!
//! Every renderer is a pure function over the results model writing to a `&mut dyn Write`; the
//! only error it returns is the writer's own.
//!
//! - [`table`]: the terminal table, re-run commands and summary line.
//! - [`junit`]: JUnit XML, one `testsuite` per host x runtime variant.
//! - [`markdown`]: a CI step summary.
//! - [`stream`]: live per-case lines or JSON objects, the progress line, the end summary.
//! - [`secrets`]: redacting a host command line before it is echoed.
//! - [`escape`]: making untrusted text safe for a terminal, XML/HTML, Markdown and a shell.

pub mod escape;
pub mod junit;
pub mod markdown;
pub mod secrets;
pub mod stream;
pub mod table;

use crate::model::SuiteReport;
use std::io::{self, Write};

pub use junit::{area_of, write_junit, write_junit_suites};
pub use markdown::write_markdown;
pub use table::{rerun_command, summary_line, write_table, TableOptions, VERDICT_ORDER};

/// What every subcommand prints on stdout (`--format`), one vocabulary for the same idea: `table`
/// for people (`text` is the same), `json` one document at the end, `jsonl` one object per
/// item as it comes (a case, a check, a finding, a change) and a summary object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    #[default]
    Table,
    Json,
    Jsonl,
}

/// Writes the report as pretty-printed JSON (the suite part of `schemas/report.schema.json`),
/// followed by a newline.
pub fn write_json(report: &SuiteReport, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, report).map_err(io::Error::other)?;
    out.write_all(b"\n")
}

/// The lowercase name of a blame, as in the JSON (`none`, `host`, `kit`).
pub fn blame_name(blame: crate::model::Blame) -> &'static str {
    match blame {
        crate::model::Blame::None => "none",
        crate::model::Blame::Host => "host",
        crate::model::Blame::Kit => "kit",
    }
}
