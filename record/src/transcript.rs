//! The recording directory: its name (`<timestamp>-<pid>`), its files, and `meta.json`.

use super::jsonrpc::RpcSummary;
use super::live::{HostSide, LiveValidator, RecordedViolation};
use super::WireKind;
use dsh_results::redact::Redactor;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Exactly the bytes the runtime wrote on stdout.
pub const STDOUT_FILE: &str = "stdout.jsonl";
/// Exactly the bytes the host wrote on the runtime's stdin.
pub const STDIN_FILE: &str = "stdin.jsonl";
pub const META_FILE: &str = "meta.json";

pub fn unix_ms_now() -> u64 {
    jiff::Timestamp::now().as_millisecond().max(0) as u64
}

/// A Unix time in milliseconds as a timestamp (the epoch when out of range).
fn timestamp(unix_ms: u64) -> jiff::Timestamp {
    i64::try_from(unix_ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

/// `20260814T101530Z` for a Unix time in milliseconds.
pub fn compact_utc(unix_ms: u64) -> String {
    timestamp(unix_ms).strftime("%Y%m%dT%H%M%SZ").to_string()
}

/// `2026-08-14T10:15:30.123Z` for a Unix time in milliseconds.
pub fn rfc3339_utc(unix_ms: u64) -> String {
    timestamp(unix_ms)
        .strftime("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

/// Create `out/<timestamp>-<pid>/`, mode 0700 (a recording holds prompts), fresh: an existing
/// entry of that name (a planted link included) is an error.
pub fn create_dir(out: &Path, unix_ms: u64) -> Result<PathBuf, String> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::create_dir_all(out)
        .map_err(|error| format!("cannot create {}: {error}", out.display()))?;
    let dir = out.join(format!("{}-{}", compact_utc(unix_ms), std::process::id()));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
    Ok(dir)
}

/// Creates a new file of a recording, mode 0600 (it holds prompts); never an existing one.
pub fn create_file(path: &Path) -> Result<std::fs::File, String> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|error| format!("cannot create {}: {error}", path.display()))
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
    /// The surface the live check held the stream to (recordings older than the field were all
    /// open-design).
    #[serde(default)]
    pub surface: WireKind,
    /// The open-design run (empty on the other surfaces).
    pub run: RunInfo,
    /// The SDK session's requests and frames (`surface: sdk` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sdk: Option<RpcSummary>,
    /// The ACP session's requests and frames (`surface: acp` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acp: Option<RpcSummary>,
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
            surface: WireKind::OpenDesign,
            run: RunInfo::default(),
            sdk: None,
            acp: None,
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
        self.surface = state.surface();
        let rpc = state.rpc_summary();
        (self.sdk, self.acp) = match self.surface {
            WireKind::Acp => (None, rpc),
            _ => (rpc, None),
        };
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
        create_file(&path)?
            .write_all((text + "\n").as_bytes())
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
