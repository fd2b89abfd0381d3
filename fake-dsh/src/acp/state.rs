//! What the ACP agent holds while it runs: its settings (release, scenario, Harness home,
//! sandbox mode), the sessions open in this process, and each prompt in flight with what can
//! interrupt it (a cancel, an answer to its permission request). Turn threads wait on a
//! [`Turn`]; the request loop wakes them.

use super::config::Config;
use super::rpc::Answer;
use super::store::{Store, Stored};
use crate::sdk::session::Persona;
use dsh_formats::acp_scenario::AcpScenario;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// The sandbox modes, narrowest first (`DSH_PERMISSION_MODE`, F1.2, F7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SandboxMode {
    ReadOnly,
    WorkspaceWrite,
    DangerFullAccess,
}

impl SandboxMode {
    /// The mode a `DSH_PERMISSION_MODE` / `sandbox_permissions` value names.
    pub fn named(name: &str) -> Option<SandboxMode> {
        match name {
            "read-only" => Some(SandboxMode::ReadOnly),
            "workspace-write" => Some(SandboxMode::WorkspaceWrite),
            "danger-full-access" => Some(SandboxMode::DangerFullAccess),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::DangerFullAccess => "danger-full-access",
        }
    }
}

/// The agent's settings and open sessions.
pub struct Agent {
    pub persona: Persona,
    pub scenario: AcpScenario,
    /// The Harness home's session store (none: no home could be found; nothing is stored).
    pub store: Option<Store>,
    pub home: Option<PathBuf>,
    /// The outcome of claiming the home, once tried.
    pub claimed: OnceLock<Result<(), String>>,
    pub mode: SandboxMode,
    /// 0.1.5 with a bad `DSH_PERMISSION_MODE`: after its first answer the process ends, exit 1,
    /// with this on stderr (F1.2).
    pub fatal_after_answer: Option<String>,
    /// Whether `DEEPSEEK_API_KEY` is set: without it every prompt fails (F1.2).
    pub has_key: bool,
    pub sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// Accepted prompts so far: the index of the next scripted turn.
    pub prompts: AtomicUsize,
    /// The model requests made so far: tool call ids are numbered by request (F5.5).
    pub model_requests: AtomicU64,
    /// The agent's own request ids: 0, 1, 2, ... (F2.6).
    pub next_request_id: AtomicU64,
    /// The agent's requests awaiting an answer, by id (as JSON text), with the turn waiting.
    pub pending: Mutex<HashMap<String, Arc<Turn>>>,
    /// Held while a prompt's final answer is written, and by the signal thread for good when
    /// it answers every prompt in flight `cancelled` and ends the process: no prompt is ever
    /// answered twice.
    pub answering: Mutex<()>,
}

impl Agent {
    /// The session of this id open in this process.
    pub fn session(&self, id: &str) -> Option<Arc<Session>> {
        lock(&self.sessions).get(id).cloned()
    }

    /// The next model request's number (from 1).
    pub fn model_request(&self) -> u64 {
        self.model_requests.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The tool call id prefix of the release's model route (F5.5).
    pub fn tool_id(&self, request: u64, index: usize) -> String {
        let prefix = match self.persona {
            Persona::V015 => "call",
            _ => "toolu",
        };
        format!("{prefix}_{request}_{index}")
    }

    /// Claims the home once, before the first session is stored.
    pub fn claim_home(&self) -> Result<(), String> {
        let Some(home) = &self.home else {
            return Ok(());
        };
        self.claimed
            .get_or_init(|| crate::home::claim(home))
            .clone()
    }
}

/// One session open in this process.
pub struct Session {
    pub id: String,
    pub cwd: PathBuf,
    pub state: Mutex<SessionState>,
    /// The prompt in flight, if any.
    pub turn: Mutex<Option<Arc<Turn>>>,
}

/// A session's mutable part.
pub struct SessionState {
    pub config: Config,
    pub stored: Option<Stored>,
    /// The files the session read or wrote in this process: a write to an existing file it
    /// has not read is refused (F5.5).
    pub known_files: HashSet<PathBuf>,
    /// The context's token count (`usage_update.used`), growing across the session.
    pub used: u64,
    pub turns: u64,
}

/// The context a fresh session starts with (the system prompt and tools), in tokens.
pub const BASE_TOKENS: u64 = 5700;

impl Session {
    pub fn new(id: &str, cwd: PathBuf, config: Config, stored: Option<Stored>) -> Session {
        let (turns, used) = stored
            .as_ref()
            .map_or((0, BASE_TOKENS), |s| (s.turns, s.used.max(BASE_TOKENS)));
        Session {
            id: id.to_string(),
            cwd,
            state: Mutex::new(SessionState {
                config,
                stored,
                known_files: HashSet::new(),
                used,
                turns,
            }),
            turn: Mutex::new(None),
        }
    }
}

/// A prompt in flight: its request id and what may interrupt it.
pub struct Turn {
    pub prompt_id: Value,
    inner: Mutex<TurnState>,
    wake: Condvar,
}

#[derive(Default)]
struct TurnState {
    cancelled: bool,
    answer: Option<Answer>,
    done: bool,
}

/// What ended a wait.
#[derive(Debug, Clone, PartialEq)]
pub enum Woken {
    /// The time passed.
    Elapsed,
    Cancelled,
    Answered(Answer),
}

impl Turn {
    pub fn new(prompt_id: Value) -> Turn {
        Turn {
            prompt_id,
            inner: Mutex::new(TurnState::default()),
            wake: Condvar::new(),
        }
    }

    /// Cancels the turn (`session/cancel`, `$/cancel_request`, `session/close`).
    pub fn cancel(&self) {
        lock(&self.inner).cancelled = true;
        self.wake.notify_all();
    }

    pub fn is_cancelled(&self) -> bool {
        lock(&self.inner).cancelled
    }

    /// Hands the turn the answer to its permission request.
    pub fn answer(&self, answer: Answer) {
        lock(&self.inner).answer = Some(answer);
        self.wake.notify_all();
    }

    /// Waits `duration` (`None`: until woken), unless cancelled or answered first.
    pub fn wait(&self, duration: Option<Duration>) -> Woken {
        let deadline = duration.map(|d| Instant::now() + d);
        let mut state = lock(&self.inner);
        loop {
            if state.cancelled {
                return Woken::Cancelled;
            }
            if let Some(answer) = state.answer.take() {
                return Woken::Answered(answer);
            }
            state = match deadline {
                None => self.wake.wait(state).unwrap_or_else(|p| p.into_inner()),
                Some(deadline) => {
                    let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                        return Woken::Elapsed;
                    };
                    self.wake
                        .wait_timeout(state, left)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
            };
        }
    }

    /// Marks the turn answered (its final response written).
    pub fn finish(&self) {
        lock(&self.inner).done = true;
        self.wake.notify_all();
    }

    /// Waits until the turn's final response is written.
    pub fn wait_done(&self) {
        let mut state = lock(&self.inner);
        while !state.done {
            state = self.wake.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// A poisoned lock's data is still the data.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
