//! `validate`: one captured runtime stdout stream against the strict stream rules
//! (`dsh_runtime_check::validate`).

use super::options::{format_parser, heading};
use dsh_results::output::{escape, Format};
use dsh_runtime_check::validate::{validate, Options};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Captured runtime stdout (one frame per line); `-` reads standard input.
    pub transcript: PathBuf,
    /// The active run's request id; default: the request_id of the first run-scoped frame.
    #[arg(long, value_name = "ID", help_heading = heading::HOST)]
    pub request_id: Option<String>,
    /// The execute asked to resume this session id.
    #[arg(long, value_name = "ID", help_heading = heading::HOST)]
    pub resume: Option<String>,
    /// The host sent `cancel` for the run, so `result: cancelled` is legitimate.
    #[arg(long, help_heading = heading::HOST)]
    pub cancel_sent: bool,
    /// Output format: `table` (one line: the finding, or ok; `text` is the same) or `json`/`jsonl`
    /// (one object on one line).
    #[arg(long, value_parser = format_parser(), default_value = "table", help_heading = heading::OUTPUT)]
    pub format: Format,
    /// Line limit in bytes (default: the protocol's 1 MiB).
    #[arg(long, value_name = "BYTES", default_value_t = dsh_protocol::MAX_LINE_BYTES, hide = true)]
    pub max_line_bytes: usize,
}

/// Exit 0 clean, 1 a violation, 2 unusable input.
pub fn main(args: Args) -> ExitCode {
    let options = Options {
        transcript: args.transcript,
        request_id: args.request_id,
        resume: args.resume,
        cancel_sent: args.cancel_sent,
        max_line_bytes: args.max_line_bytes,
    };
    match validate(&options) {
        Ok(report) => {
            let printed = match args.format {
                Format::Table => report.text(),
                // One result (the stream stops at its first violation): one object, one line.
                Format::Json | Format::Jsonl => report.json().to_string(),
            };
            // A closed stdout (e.g. `| head`) is not worth a panic.
            let _ = writeln!(std::io::stdout().lock(), "{printed}");
            ExitCode::from(u8::from(report.violation.is_some()))
        }
        Err(message) => {
            eprintln!("error: {}", escape::terminal(&message));
            ExitCode::from(2)
        }
    }
}
