//! `dsh-conformance validate`: check one captured stdout stream against the strict rules.
//!
//! The transcript is streamed through the line framer twice: once to find the active request id
//! (unless `--request-id` names it), once through the strict checker. Each violation is printed
//! as `LINE:CODE: message` (`EOF` when it belongs to no line); a clean stream prints a summary.
//! Exit status: 0 clean, 1 violations, 2 unusable input.

use dsh_protocol::frames::Status;
use dsh_protocol::{
    LineEvent, LineFramer, RunContext, RuntimeFrame, Step, StreamChecker, Terminal,
};
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Captured runtime stdout (one frame per line).
    pub transcript: PathBuf,
    /// The active run's request id; default: the request_id of the first run-scoped frame.
    #[arg(long, value_name = "ID")]
    pub request_id: Option<String>,
    /// The execute asked to resume this session id.
    #[arg(long, value_name = "ID")]
    pub resume: Option<String>,
    /// The host sent `cancel` for the run, so `result: cancelled` is legitimate.
    #[arg(long)]
    pub cancel_sent: bool,
    /// Line limit in bytes (default: the protocol's 1 MiB).
    #[arg(long, value_name = "BYTES", default_value_t = dsh_protocol::MAX_LINE_BYTES, hide = true)]
    pub max_line_bytes: usize,
}

/// What validating one transcript found.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// `LINE:CODE: message` lines, in stream order.
    pub violations: Vec<String>,
    pub summary: Option<String>,
}

pub fn main(args: Args) -> ExitCode {
    match validate_file(&args) {
        Ok(report) => {
            let mut stdout = io::stdout().lock();
            for line in report.violations.iter().chain(&report.summary) {
                // A closed stdout (e.g. `| head`) is not worth a panic.
                if writeln!(stdout, "{line}").is_err() {
                    break;
                }
            }
            if report.violations.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

/// Validate the transcript named by `args`; `Err` means the input was unusable.
pub fn validate_file(args: &Args) -> Result<Report, String> {
    let path = &args.transcript;
    let request_id = match &args.request_id {
        Some(id) => id.clone(),
        None => first_request_id(path, args.max_line_bytes)?
            .unwrap_or_else(|| "(no run-scoped frame)".to_string()),
    };
    let context = RunContext {
        request_id,
        resume_session_id: args.resume.clone(),
    };
    let mut checker = StreamChecker::new(context);
    checker.set_line_limit(args.max_line_bytes);
    if args.cancel_sent {
        checker.note_cancel_sent();
    }
    let mut violations = Vec::new();
    let mut printed = None;
    for_each_event(path, args.max_line_bytes, |event| {
        if let Step::Violation(violation) = checker.check_event(event) {
            violations.push(format_violation(&violation));
            printed = Some(violation);
        }
        true
    })?;
    let summary = match checker.finish() {
        Terminal::Violation(violation) => {
            if printed.as_ref() != Some(&violation) {
                violations.push(format_violation(&violation));
            }
            None
        }
        Terminal::Result(result) => {
            let outcome = match result.status {
                Status::Completed => "result completed".to_string(),
                Status::Cancelled => "result cancelled".to_string(),
                Status::Failed => {
                    let error = result
                        .error
                        .as_ref()
                        .map(|error| format!("{}: {}", error.code, error.message))
                        .unwrap_or_default();
                    if result.resume_rejected {
                        format!(
                            "result failed, resume rejected (DSH_PROFILE_RESUME_REJECTED; {error})"
                        )
                    } else {
                        format!("result failed (DSH_PROFILE_RUN_FAILED; {error})")
                    }
                }
            };
            Some(format!(
                "ok: {} frames, {} foreign, {outcome}",
                checker.accepted_frames(),
                checker.foreign_frames()
            ))
        }
    };
    Ok(Report {
        violations,
        summary,
    })
}

fn format_violation(violation: &dsh_protocol::Violation) -> String {
    let line = violation
        .line
        .map_or_else(|| "EOF".to_string(), |line| line.to_string());
    format!("{line}:{}: {}", violation.code, violation.message)
}

/// The request_id of the first run-scoped frame that names one, reading only as far as needed.
fn first_request_id(path: &Path, max_line_bytes: usize) -> Result<Option<String>, String> {
    let mut found = None;
    for_each_event(path, max_line_bytes, |event| {
        let bytes = match event {
            LineEvent::Line { bytes, .. } | LineEvent::Truncated { bytes, .. } => bytes,
            LineEvent::TooLarge { .. } => return true,
        };
        if let Ok(frame) = RuntimeFrame::parse_line(bytes) {
            if let Some(id) = frame.request_id() {
                found = Some(id.to_string());
                return false;
            }
        }
        true
    })?;
    Ok(found)
}

/// Streams `path` through a framer, calling `visit` for each event until it returns false.
fn for_each_event(
    path: &Path,
    max_line_bytes: usize,
    mut visit: impl FnMut(&LineEvent) -> bool,
) -> Result<(), String> {
    let mut file =
        File::open(path).map_err(|error| format!("cannot open {}: {error}", path.display()))?;
    let mut framer = LineFramer::with_limit(max_line_bytes);
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let read = match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(format!("cannot read {}: {error}", path.display())),
        };
        for event in framer.push(&chunk[..read]) {
            if !visit(&event) {
                return Ok(());
            }
        }
    }
    if let Some(event) = framer.finish() {
        visit(&event);
    }
    Ok(())
}
