//! Live validation of a proxied session, by the recorded surface: on the open-design stream the
//! host's commands tell which run is active, and the runtime's stdout goes through the strict
//! checker as it streams, with bounded memory; on the SDK JSON-RPC wire each line goes through
//! [`SdkWire`], on ACP's through [`AcpWire`]; a headless run's stdout is plain text and is
//! recorded unchecked.

use super::acp_wire::AcpWire;
use super::jsonrpc::{RpcState, RpcSummary};
use super::sdk_wire::SdkWire;
use super::WireKind;
use dsh_protocol::{LineEvent, LineFramer, RunContext, Step, StreamChecker, Terminal, Violation};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Instant;

/// Stdout lines kept while no execute has been seen yet (a runtime writes only `ready` then).
const MAX_PENDING_LINES: usize = 64;
/// Violations kept for meta.json; later ones are only counted.
const MAX_VIOLATIONS: usize = 100;

/// One violation as recorded.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RecordedViolation {
    pub code: String,
    pub line: Option<usize>,
    pub message: String,
}

impl From<&Violation> for RecordedViolation {
    fn from(violation: &Violation) -> Self {
        Self {
            code: violation.code.as_str().to_string(),
            line: violation.line,
            message: violation.message.clone(),
        }
    }
}

/// What the host sent, as far as validation cares.
#[derive(Debug, Clone, Default, Serialize)]
pub struct HostSide {
    pub request_id: Option<String>,
    pub resume_session_id: Option<String>,
    /// How many stdout lines the runtime had written when the host's cancel passed through.
    pub cancel_after_stdout_lines: Option<usize>,
    pub executes: usize,
    pub cancels: usize,
    /// Host lines that were not a valid command (not JSON, or failing command.schema.json).
    pub invalid_commands: usize,
    /// Bytes the host wrote.
    pub bytes: u64,
}

/// The shared state both proxy directions update.
pub struct LiveValidator {
    surface: WireKind,
    /// The JSON-RPC wire's state (`WireKind::Sdk` and `WireKind::Acp`).
    rpc: Option<RpcWire>,
    host: HostSide,
    checker: Option<StreamChecker>,
    pending: Vec<LineEvent>,
    cancel_pending: bool,
    stdout_lines: usize,
    pub violations: Vec<RecordedViolation>,
    pub violations_dropped: usize,
    /// Milliseconds since the proxy started, per milestone.
    pub first_stdout_ms: Option<u64>,
    pub execute_ms: Option<u64>,
    pub result_ms: Option<u64>,
    /// The accepted terminal result frame.
    pub result: Option<Value>,
    started: Instant,
    host_framer: LineFramer,
    /// New violations not yet reported on stderr.
    unreported: Vec<RecordedViolation>,
}

impl LiveValidator {
    /// A validator of the open-design stream.
    pub fn new(started: Instant) -> Self {
        Self::for_surface(started, WireKind::OpenDesign)
    }

    /// A validator of `surface`'s stream.
    pub fn for_surface(started: Instant, surface: WireKind) -> Self {
        Self {
            surface,
            rpc: RpcWire::of(surface),
            host: HostSide::default(),
            checker: None,
            pending: Vec::new(),
            cancel_pending: false,
            stdout_lines: 0,
            violations: Vec::new(),
            violations_dropped: 0,
            first_stdout_ms: None,
            execute_ms: None,
            result_ms: None,
            result: None,
            started,
            host_framer: LineFramer::new(),
            unreported: Vec::new(),
        }
    }

    fn elapsed_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    pub fn host(&self) -> &HostSide {
        &self.host
    }

    /// Host bytes about to be forwarded to the runtime (called BEFORE forwarding, so the run's
    /// context is known before the runtime can answer).
    pub fn host_bytes(&mut self, chunk: &[u8]) {
        self.host.bytes += chunk.len() as u64;
        for event in self.host_framer.push(chunk) {
            if let LineEvent::Line { bytes, .. } = event {
                self.host_line(&bytes);
            }
        }
    }

    fn host_line(&mut self, bytes: &[u8]) {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        match (self.surface, &mut self.rpc) {
            (WireKind::OpenDesign, _) => self.host_command(bytes),
            (_, Some(rpc)) => {
                if !rpc.client_line(bytes) {
                    self.host.invalid_commands += 1;
                }
            }
            (_, None) => {}
        }
    }

    fn host_command(&mut self, bytes: &[u8]) {
        let Ok(command) = serde_json::from_slice::<Value>(bytes) else {
            self.host.invalid_commands += 1;
            return;
        };
        if dsh_protocol::schema::validate("command.schema.json", &command).is_err() {
            self.host.invalid_commands += 1;
        }
        let request_id = command
            .get("request_id")
            .and_then(Value::as_str)
            .map(str::to_string);
        match command.get("type").and_then(Value::as_str) {
            Some("execute") => {
                self.host.executes += 1;
                if self.host.request_id.is_none() {
                    self.host.request_id = request_id.clone();
                    self.host.resume_session_id = command
                        .get("resume_session_id")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    self.execute_ms = Some(self.elapsed_ms());
                    self.start_checker();
                }
            }
            Some("cancel") => {
                self.host.cancels += 1;
                if request_id.is_some() && request_id == self.host.request_id {
                    self.cancel_pending = true;
                    self.host
                        .cancel_after_stdout_lines
                        .get_or_insert(self.stdout_lines);
                }
            }
            _ => {}
        }
    }

    fn start_checker(&mut self) {
        let context = RunContext {
            request_id: self.host.request_id.clone().unwrap_or_default(),
            resume_session_id: self.host.resume_session_id.clone(),
        };
        self.checker = Some(StreamChecker::new(context));
        for event in std::mem::take(&mut self.pending) {
            self.check(&event);
        }
    }

    /// A framer event of the runtime's stdout.
    pub fn stdout_event(&mut self, event: LineEvent) {
        self.stdout_lines = match &event {
            LineEvent::Line { number, .. }
            | LineEvent::TooLarge { number }
            | LineEvent::Truncated { number, .. } => *number,
        };
        self.first_stdout_ms
            .get_or_insert_with(|| self.started.elapsed().as_millis() as u64);
        match self.surface {
            WireKind::OpenDesign => {}
            WireKind::Sdk | WireKind::Acp => return self.rpc_event(event),
            WireKind::Headless => return,
        }
        if self.checker.is_some() {
            self.check(&event);
        } else if self.pending.len() < MAX_PENDING_LINES {
            self.pending.push(event);
        } else {
            // A runtime that writes this much before any execute: check it as a run with no id,
            // so the stream still gets judged and memory stays bounded.
            self.start_checker();
            self.check(&event);
        }
    }

    /// One JSON-RPC stdout line: checked, unless it is over the framer's cap (counted then).
    fn rpc_event(&mut self, event: LineEvent) {
        let Some(rpc) = self.rpc.as_mut() else {
            return;
        };
        if let Some(violation) = rpc.runtime_event(event) {
            self.push_violation(violation);
        }
    }

    /// The JSON-RPC session's summary (`WireKind::Sdk` and `WireKind::Acp` only).
    pub fn rpc_summary(&self) -> Option<RpcSummary> {
        self.rpc.as_ref().map(RpcWire::summary)
    }

    pub fn surface(&self) -> WireKind {
        self.surface
    }

    fn check(&mut self, event: &LineEvent) {
        let Some(checker) = self.checker.as_mut() else {
            return;
        };
        if std::mem::take(&mut self.cancel_pending) {
            checker.note_cancel_sent();
        }
        match checker.check_event(event) {
            Step::Violation(violation) => self.push_violation(RecordedViolation::from(&violation)),
            Step::Accepted(_)
                if self.result.is_none()
                    && matches!(checker.terminal(), Some(Terminal::Result(_))) =>
            {
                self.result_ms = Some(self.started.elapsed().as_millis() as u64);
                if let LineEvent::Line { bytes, .. } | LineEvent::Truncated { bytes, .. } = event {
                    self.result = serde_json::from_slice(bytes).ok();
                }
            }
            _ => {}
        }
    }

    fn push_violation(&mut self, violation: RecordedViolation) {
        if self.violations.len() < MAX_VIOLATIONS {
            self.violations.push(violation.clone());
            self.unreported.push(violation);
        } else {
            self.violations_dropped += 1;
        }
    }

    /// stdout reached EOF: the run's terminal verdict is settled. A session that never sent an
    /// execute never started a run, so a missing result is no violation there.
    pub fn stdout_finished(&mut self) {
        if self.surface != WireKind::OpenDesign {
            return;
        }
        if self.checker.is_none() {
            if self.pending.is_empty() {
                return;
            }
            self.start_checker();
        }
        let had_violation = !self.violations.is_empty();
        let Some(checker) = self.checker.as_mut() else {
            return;
        };
        if let Terminal::Violation(violation) = checker.finish() {
            let missing_without_run = self.host.request_id.is_none()
                && violation.code == dsh_protocol::ViolationCode::MissingResult;
            if !had_violation && !missing_without_run {
                self.push_violation(RecordedViolation::from(&violation));
            }
        }
    }

    /// The host closed its side: a last command without a newline still counts.
    /// (On the SDK wire the runtime never handles such a line: it is ignored.)
    pub fn host_finished(&mut self) {
        if self.surface != WireKind::OpenDesign {
            return;
        }
        if let Some(LineEvent::Truncated { bytes, .. }) = self.host_framer.finish() {
            self.host_line(&bytes);
        }
    }

    /// The validated session frame's id, once seen.
    pub fn session_id(&self) -> Option<String> {
        self.checker
            .as_ref()
            .and_then(|checker| checker.session_id())
            .map(str::to_string)
    }

    pub fn foreign_frames(&self) -> usize {
        self.checker
            .as_ref()
            .map(StreamChecker::foreign_frames)
            .unwrap_or(0)
    }

    /// Violations not yet printed; printing is the caller's.
    pub fn take_unreported(&mut self) -> Vec<RecordedViolation> {
        std::mem::take(&mut self.unreported)
    }
}

/// The live check of a JSON-RPC surface.
enum RpcWire {
    Sdk(SdkWire),
    Acp(AcpWire),
}

impl RpcWire {
    fn of(surface: WireKind) -> Option<RpcWire> {
        match surface {
            WireKind::Sdk => Some(RpcWire::Sdk(SdkWire::default())),
            WireKind::Acp => Some(RpcWire::Acp(AcpWire::default())),
            WireKind::OpenDesign | WireKind::Headless => None,
        }
    }

    /// The state both wires keep.
    fn state(&mut self) -> &mut RpcState {
        match self {
            RpcWire::Sdk(wire) => &mut wire.rpc,
            RpcWire::Acp(wire) => &mut wire.rpc,
        }
    }

    fn client_line(&mut self, bytes: &[u8]) -> bool {
        self.state().client_line(bytes)
    }

    fn runtime_event(&mut self, event: LineEvent) -> Option<RecordedViolation> {
        match (self, event) {
            (_, LineEvent::Line { bytes, .. }) if bytes.iter().all(u8::is_ascii_whitespace) => None,
            (RpcWire::Sdk(wire), LineEvent::Line { number, bytes }) => {
                wire.runtime_line(number, &bytes)
            }
            (RpcWire::Acp(wire), LineEvent::Line { number, bytes }) => {
                wire.runtime_line(number, &bytes)
            }
            (RpcWire::Sdk(_), LineEvent::Truncated { number, .. }) => {
                Some(SdkWire::unterminated(number))
            }
            (RpcWire::Acp(_), LineEvent::Truncated { number, .. }) => {
                Some(AcpWire::unterminated(number))
            }
            (wire, LineEvent::TooLarge { .. }) => {
                wire.state().info.unchecked_lines += 1;
                None
            }
        }
    }

    fn summary(&self) -> RpcSummary {
        match self {
            RpcWire::Sdk(wire) => wire.rpc.summary(),
            RpcWire::Acp(wire) => wire.rpc.summary(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_execute_without_model_is_a_valid_command_and_a_null_model_is_not() {
        let mut validator = LiveValidator::new(Instant::now());
        validator.host_bytes(
            b"{\"v\":1,\"type\":\"execute\",\"request_id\":\"r1\",\"cwd\":\"/p\",\"prompt\":\"x\",\"mcp_servers\":[]}\n",
        );
        assert_eq!(validator.host().executes, 1);
        assert_eq!(validator.host().invalid_commands, 0);
        validator.host_bytes(
            b"{\"v\":1,\"type\":\"execute\",\"request_id\":\"r2\",\"cwd\":\"/p\",\"prompt\":\"x\",\"model\":null,\"mcp_servers\":[]}\n",
        );
        assert_eq!(validator.host().executes, 2);
        assert_eq!(validator.host().invalid_commands, 1);
    }
}
