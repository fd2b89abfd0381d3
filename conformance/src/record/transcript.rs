//! The recording directory: its name (`<timestamp>-<pid>`), its files, and `meta.json`.

use super::live::{HostSide, LiveValidator, RecordedViolation};
use super::redact::Redactor;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Exactly the bytes the runtime wrote on stdout.
pub const STDOUT_FILE: &str = "stdout.jsonl";
/// Exactly the bytes the host wrote on the runtime's stdin.
pub const STDIN_FILE: &str = "stdin.jsonl";
pub const META_FILE: &str = "meta.json";

pub fn unix_ms_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis() as u64)
        .unwrap_or_default()
}

/// (year, month, day) of a day count since 1970-01-01 (proleptic Gregorian).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * shifted_month + 2) / 5 + 1) as u32;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    } as u32;
    (year_of_era + era * 400 + i64::from(month <= 2), month, day)
}

/// `20260814T101530Z` for a Unix time in milliseconds.
pub fn compact_utc(unix_ms: u64) -> String {
    let (date, time) = split_utc(unix_ms);
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        date.0, date.1, date.2, time.0, time.1, time.2
    )
}

/// `2026-08-14T10:15:30.123Z` for a Unix time in milliseconds.
pub fn rfc3339_utc(unix_ms: u64) -> String {
    let (date, time) = split_utc(unix_ms);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        date.0,
        date.1,
        date.2,
        time.0,
        time.1,
        time.2,
        unix_ms % 1000
    )
}

fn split_utc(unix_ms: u64) -> ((i64, u32, u32), (u64, u64, u64)) {
    let seconds = unix_ms / 1000;
    let date = civil_from_days((seconds / 86_400) as i64);
    let of_day = seconds % 86_400;
    (date, (of_day / 3600, of_day / 60 % 60, of_day % 60))
}

/// Create `out/<timestamp>-<pid>/`.
pub fn create_dir(out: &Path, unix_ms: u64) -> Result<PathBuf, String> {
    std::fs::create_dir_all(out)
        .map_err(|error| format!("cannot create {}: {error}", out.display()))?;
    let dir = out.join(format!("{}-{}", compact_utc(unix_ms), std::process::id()));
    std::fs::create_dir(&dir)
        .map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
    Ok(dir)
}

/// Milliseconds since the proxy started.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Timings {
    pub first_stdout: Option<u64>,
    pub execute: Option<u64>,
    pub result: Option<u64>,
    pub exit: Option<u64>,
}

/// What the host's commands said about the run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunInfo {
    pub request_id: Option<String>,
    pub resume_session_id: Option<String>,
    /// The validated session frame's id.
    pub session_id: Option<String>,
    pub executes: usize,
    pub cancels: usize,
    /// Stdout lines the runtime had written when the host's cancel passed through.
    pub cancel_after_stdout_lines: Option<usize>,
    pub invalid_commands: usize,
    pub foreign_frames: usize,
}

/// `meta.json`. Strings are redacted (credential values, token shapes) before writing.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    pub v: u32,
    pub kit_version: String,
    pub argv: Vec<String>,
    pub started_at: String,
    pub started_unix_ms: u64,
    pub proxy_pid: u32,
    pub runtime_pid: Option<u32>,
    pub spawn_error: Option<String>,
    pub exit_code: Option<i32>,
    pub exit_signal: Option<String>,
    pub signals_forwarded: Vec<String>,
    pub run: RunInfo,
    /// The accepted terminal result frame (redacted), if one was.
    pub result: Option<Value>,
    pub violations: Vec<RecordedViolation>,
    pub violations_dropped: usize,
    pub timings_ms: Timings,
    pub bytes_stdin: Option<u64>,
    pub bytes_stdout: Option<u64>,
    /// The host stopped reading stdout before the runtime finished.
    pub host_closed_stdout: bool,
    /// Processes of the runtime's group outlived it (the proxy killed them).
    pub processes_left: bool,
    pub recording_error: Option<String>,
}

impl Meta {
    pub fn new(command: &[OsString], started_unix_ms: u64, redactor: &Redactor) -> Self {
        Self {
            v: 1,
            kit_version: env!("CARGO_PKG_VERSION").to_string(),
            argv: command
                .iter()
                .map(|arg| redactor.redact(&arg.to_string_lossy()))
                .collect(),
            started_at: rfc3339_utc(started_unix_ms),
            started_unix_ms,
            proxy_pid: std::process::id(),
            runtime_pid: None,
            spawn_error: None,
            exit_code: None,
            exit_signal: None,
            signals_forwarded: Vec::new(),
            run: RunInfo::default(),
            result: None,
            violations: Vec::new(),
            violations_dropped: 0,
            timings_ms: Timings::default(),
            bytes_stdin: None,
            bytes_stdout: None,
            host_closed_stdout: false,
            processes_left: false,
            recording_error: None,
        }
    }

    /// Fill in what the live validator learned.
    pub fn finish(&mut self, state: &LiveValidator, redactor: &Redactor) {
        let host: &HostSide = state.host();
        self.run = RunInfo {
            request_id: host.request_id.clone(),
            resume_session_id: host.resume_session_id.clone(),
            session_id: state.session_id(),
            executes: host.executes,
            cancels: host.cancels,
            cancel_after_stdout_lines: host.cancel_after_stdout_lines,
            invalid_commands: host.invalid_commands,
            foreign_frames: state.foreign_frames(),
        };
        self.result = state
            .result
            .as_ref()
            .map(|result| redactor.redact_json(result));
        self.violations = state
            .violations
            .iter()
            .map(|violation| RecordedViolation {
                message: redactor.redact(&violation.message),
                ..violation.clone()
            })
            .collect();
        self.violations_dropped = state.violations_dropped;
        self.timings_ms = Timings {
            first_stdout: state.first_stdout_ms,
            execute: state.execute_ms,
            result: state.result_ms,
            exit: self.timings_ms.exit,
        };
    }

    pub fn write(&self, dir: &Path) -> Result<(), String> {
        let path = dir.join(META_FILE);
        let text = serde_json::to_string_pretty(self)
            .map_err(|error| format!("encoding meta.json: {error}"))?;
        std::fs::write(&path, text + "\n")
            .map_err(|error| format!("cannot write {}: {error}", path.display()))
    }

    pub fn read(dir: &Path) -> Result<Self, String> {
        let path = dir.join(META_FILE);
        let text = std::fs::read_to_string(&path)
            .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
        serde_json::from_str(&text)
            .map_err(|error| format!("{}: not a recording's meta.json: {error}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formatting() {
        assert_eq!(compact_utc(0), "19700101T000000Z");
        // 2026-08-14T10:15:30.123Z
        assert_eq!(rfc3339_utc(1_786_702_530_123), "2026-08-14T10:15:30.123Z");
        assert_eq!(rfc3339_utc(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
