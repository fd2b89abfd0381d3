//! `dsh-conformance validate`: check one captured stdout stream against the strict rules.
//!
//! The transcript (a file, or `-` for stdin) is read once, streamed through the line framer into
//! the strict checker; without `--request-id` the first frame that names a request makes it the
//! active one. Reading stops at the first fatal violation, so an endless input (`/dev/zero`) ends
//! at its first oversized line. The text output prints the violation as `LINE:CODE: message`
//! (`EOF` when it belongs to no line) or a summary for a clean stream, with every
//! runtime-controlled character escaped for the terminal ([`Report::text`]); `--format json`
//! prints one JSON object ([`Report::json`]). The command line prints them and decides the exit
//! status (0 clean, 1 violation, 2 unusable input).

use dsh_protocol::frames::Status;
use dsh_protocol::{LineFramer, RunContext, StreamChecker, Terminal, Violation};
use dsh_results::output::escape;
use serde_json::json;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// The request id shown while no frame has named one.
const NO_REQUEST: &str = "(no run-scoped frame)";

/// What `validate` checks: the transcript and what the host did around it.
#[derive(Debug, Clone)]
pub struct Options {
    /// Captured runtime stdout (one frame per line); `-` reads standard input.
    pub transcript: PathBuf,
    /// The active run's request id; `None`: the request_id of the first run-scoped frame.
    pub request_id: Option<String>,
    /// The execute asked to resume this session id.
    pub resume: Option<String>,
    /// The host sent `cancel` for the run, so `result: cancelled` is legitimate.
    pub cancel_sent: bool,
    /// Line limit in bytes (the protocol's 1 MiB: [`dsh_protocol::MAX_LINE_BYTES`]).
    pub max_line_bytes: usize,
}

/// What validating one transcript found.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The active request (given, adopted from the stream, or none).
    pub request_id: String,
    /// The first fatal violation, if any (reading stopped there).
    pub violation: Option<Violation>,
    /// For a clean stream: the outcome, e.g. `result completed`.
    pub outcome: Option<String>,
    pub frames: usize,
    pub foreign: usize,
}

impl Report {
    /// The text output: one escaped line.
    pub fn text(&self) -> String {
        let line = match (&self.violation, &self.outcome) {
            (Some(violation), _) => format_violation(violation),
            (None, outcome) => format!(
                "ok: {} frames, {} foreign, {}",
                self.frames,
                self.foreign,
                outcome.as_deref().unwrap_or_default()
            ),
        };
        escape::terminal(&line)
    }

    /// The `--format json` output (strings are JSON-escaped, so nothing needs escaping).
    pub fn json(&self) -> serde_json::Value {
        let violation = self.violation.as_ref().map(|violation| {
            json!({
                "line": violation.line,
                "code": violation.code.as_str(),
                "message": violation.message,
            })
        });
        json!({
            "ok": self.violation.is_none(),
            "request_id": self.request_id,
            "violation": violation,
            "outcome": self.outcome,
            "frames": self.frames,
            "foreign": self.foreign,
        })
    }
}

/// Validate the transcript named by `args` (`-`: stdin); `Err` means the input was unusable.
pub fn validate(args: &Options) -> Result<Report, String> {
    let context = RunContext {
        request_id: args.request_id.clone().unwrap_or_else(|| NO_REQUEST.into()),
        resume_session_id: args.resume.clone(),
    };
    let mut checker = match &args.request_id {
        Some(_) => StreamChecker::new(context),
        None => StreamChecker::adopting_first_request_id(context),
    };
    checker.set_line_limit(args.max_line_bytes);
    if args.cancel_sent {
        checker.note_cancel_sent();
    }
    if args.transcript == Path::new("-") {
        check_stream(&mut checker, io::stdin().lock(), "standard input", args)?;
    } else {
        let path = &args.transcript;
        let file =
            File::open(path).map_err(|error| format!("cannot open {}: {error}", path.display()))?;
        check_stream(&mut checker, file, &path.display().to_string(), args)?;
    }
    let (violation, outcome) = match checker.finish() {
        Terminal::Violation(violation) => (Some(violation), None),
        Terminal::Result(result) => (None, Some(describe_outcome(&result))),
    };
    Ok(Report {
        request_id: checker.context().request_id.clone(),
        violation,
        outcome,
        frames: checker.accepted_frames(),
        foreign: checker.foreign_frames(),
    })
}

fn describe_outcome(result: &dsh_protocol::frames::ResultFrame) -> String {
    match result.status {
        Status::Completed => "result completed".to_string(),
        Status::Cancelled => "result cancelled".to_string(),
        Status::Failed => {
            let error = result
                .error
                .as_ref()
                .map(|error| format!("{}: {}", error.code, error.message))
                .unwrap_or_default();
            if result.resume_rejected {
                format!("result failed, resume rejected (DSH_PROFILE_RESUME_REJECTED; {error})")
            } else {
                format!("result failed (DSH_PROFILE_RUN_FAILED; {error})")
            }
        }
    }
}

fn format_violation(violation: &Violation) -> String {
    let line = violation
        .line
        .map_or_else(|| "EOF".to_string(), |line| line.to_string());
    format!("{line}:{}: {}", violation.code, violation.message)
}

/// Streams `input` once through a framer into `checker`, stopping at the first fatal violation.
/// Lines are checked where they lie in the read buffer ([`LineFramer::push_each`]) and frames
/// stay borrowed: nothing is allocated per line.
fn check_stream(
    checker: &mut StreamChecker,
    mut input: impl Read,
    name: &str,
    args: &Options,
) -> Result<(), String> {
    let mut framer = LineFramer::with_limit(args.max_line_bytes);
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let read = match input.read(&mut chunk) {
            Ok(0) => break,
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(format!("cannot read {name}: {error}")),
        };
        framer.push_each(&chunk[..read], |event| {
            checker.check_event(&event);
        });
        if checker.has_failed() {
            return Ok(());
        }
    }
    if let Some(event) = framer.finish() {
        checker.check_event(&event);
    }
    Ok(())
}
