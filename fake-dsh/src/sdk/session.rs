//! One SDK session: its event log (`seq` from 0, kept on disk like the real runtime's
//! `$DSH_HOME/sessions/<cwd slug>/<id>/session.v3.jsonl`) and the playing of a turn as session
//! events: steps with reasoning, text and tool calls that really read and write files in the
//! session's cwd (writes never outside it, never through a link: [`crate::project`]), then
//! `turn/end`. Which events a turn carries depends on the [`Flavor`].

use super::scenario::{EndKind, StepScript, ToolCallScript, TurnScript};
use crate::journal::now_ms;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The runtime generation a fake-dsh process imitates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persona {
    /// `dsh-jsonrpc-agent` of 0.1.0-rc.6 to 0.1.1: `assistant/chunk` streaming, no file tools,
    /// prompts accepted before `initialize`.
    V011,
    /// `dsh` 0.1.5: `--profile sdk`, `sdk-minimal`, `headless`.
    V015,
    /// `dsh` 0.2.1 (the default): 0.1.5's surfaces plus `session/resume`, the working-directory
    /// methods, `session-log-deepseek/delivery-accepted` before every `assistant/message`, a
    /// `tool/result` whose message has `role: "tool"` and a top-level `toolCallId`, and session
    /// logs in zstd (`session.v4.jsonl.zstd`).
    V021,
}

/// What a surface's event stream carries (docs/surface-sdk.md, "Notifications").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flavor {
    pub persona: Persona,
    /// `sdk-minimal` (and 0.1.1): no permission, sandbox or runtime-context events.
    pub minimal: bool,
}

impl Flavor {
    fn policy_events(self) -> bool {
        self.persona != Persona::V011 && !self.minimal
    }
    fn system_message(self) -> bool {
        self.persona != Persona::V011
    }
    fn chunks(self) -> bool {
        self.persona == Persona::V011
    }
    /// `sdk` 0.1.5 and 0.2.1 only: neither `sdk-minimal` nor 0.1.1's bundled config has file
    /// tools.
    fn file_tools(self) -> bool {
        self.persona != Persona::V011 && !self.minimal
    }
    /// 0.1.5 and 0.2.1 reject a prompt until `initialize` has answered; 0.1.1 accepts it.
    pub fn rejects_early_prompt(self) -> bool {
        self.persona != Persona::V011
    }
    /// 0.2.1: `session/resume` and `session/working-directory/get|set`, v4 session logs.
    pub fn v021(self) -> bool {
        self.persona == Persona::V021
    }
    /// The runtime-context user message: `sdk`, and 0.2.1's `sdk-minimal` too (with only the
    /// working directory in it).
    fn runtime_context(self) -> bool {
        self.policy_events() || self.v021()
    }
    /// The session log's file name: 0.2.1's `sdk` writes zstd, its `sdk-minimal` plain JSON
    /// lines (both observed), 0.1.5 `session.v3.jsonl`.
    fn log_name(self) -> &'static str {
        match (self.v021(), self.minimal) {
            (true, false) => V4_LOG,
            (true, true) => V4_PLAIN_LOG,
            (false, _) => "session.v3.jsonl",
        }
    }
}

/// Where a session's events go.
pub type Sink = Box<dyn Fn(&str, &Value) + Send + Sync>;

/// Starts a background child for the `subagent` tool: `(parent, label, prompt)`, the child's
/// session id back (the server owns the child and plays it after the parent's turn).
pub type Spawn = Box<dyn Fn(&Session, &str, &str) -> Option<String> + Send + Sync>;

/// The model settings a session's requests carry: what `initialize` asked for, the runtime's
/// defaults for the rest (`deepseek-official`, `deepseek-flash`, 256000 tokens, effort `high`).
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    pub provider: String,
    pub model: String,
    pub max_tokens: Option<u64>,
    pub reasoning_effort: Option<String>,
}

impl Default for ModelConfig {
    fn default() -> ModelConfig {
        ModelConfig {
            provider: "deepseek-official".into(),
            model: "deepseek-flash".into(),
            max_tokens: None,
            reasoning_effort: None,
        }
    }
}

impl ModelConfig {
    /// The settings of an `initialize` request's params (already checked).
    pub fn from_initialize(params: &Value) -> ModelConfig {
        let default = ModelConfig::default();
        let text = |name: &str, default: String| {
            params[name]
                .as_str()
                .filter(|s| !s.is_empty())
                .map_or(default, str::to_string)
        };
        ModelConfig {
            provider: text("provider", default.provider),
            model: text("model", default.model),
            max_tokens: params["maxTokens"].as_u64(),
            reasoning_effort: params["reasoningEffort"].as_str().map(str::to_string),
        }
    }

    /// `request/header`'s `header` (observed): the config with the defaults filled in, and
    /// `adapterDefaults` naming the settings that came from the defaults.
    fn header(&self) -> Value {
        let mut config = json!({"provider": self.provider, "model": self.model,
            "maxTokens": self.max_tokens.unwrap_or(256_000),
            "reasoningEffort": self.reasoning_effort.as_deref().unwrap_or("high")});
        let mut defaults = serde_json::Map::new();
        if self.reasoning_effort.is_none() {
            defaults.insert("reasoningEffort".into(), json!(true));
        }
        if self.max_tokens.is_none() {
            defaults.insert("maxTokens".into(), json!(true));
        }
        let mut header = json!({"config": config.take()});
        if !defaults.is_empty() {
            header["adapterDefaults"] = Value::Object(defaults);
        }
        header
    }
}

/// The model requests this process has made: the model server numbers its tool call ids by
/// request (`call_<n>_<i>`, `toolu_<n>_<i>` on 0.2.1's Messages route), and so does fake-dsh.
static MODEL_REQUESTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The number of the model request being made now (from 1).
fn next_model_request() -> u64 {
    MODEL_REQUESTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1
}

/// The `system/message`'s and runtime context's source plugin in 0.1.5.
const SYSTEM_PROMPT_PLUGIN: &str = "@deepseek-ai/dsh-system-prompt";

/// One session's log and counters.
pub struct Session {
    pub id: String,
    /// The effective working directory (0.2.1's `session/working-directory/set` moves it).
    pub cwd: PathBuf,
    /// The session's origin: the cwd it was created in (0.2.1 falls back to it when the
    /// effective directory is gone).
    pub origin: PathBuf,
    pub flavor: Flavor,
    /// The model settings of `initialize` (the defaults before it).
    pub config: ModelConfig,
    seq: u64,
    /// The last turn number used.
    pub turn: u64,
    /// Whether this process has sent the session's first model request (`request/header`).
    header_sent: bool,
    /// Why this process's first model request is made (`request/header.reason`): `initial`, or
    /// `resume` for a session a cold resume opened.
    header_reason: &'static str,
    /// The provider and model of the last `request/context` recorded (in this process or, after
    /// a resume, in the stored log): a turn whose model differs records it again.
    last_context: Option<(String, String)>,
    /// The seq of the session's last `system/message` (restored on resume): a new system prompt
    /// replaces it on the surface.
    system_seq: Option<u64>,
    /// The runtime context changed (the working directory): the next turn records it again.
    context_stale: bool,
    /// 0.2.1's working-directory notices spliced for the next step, not yet taken by a turn.
    pending_notices: Vec<Value>,
    /// The notices the current turn took, recorded as user messages in its first step.
    turn_notices: Vec<Value>,
    log: Option<Log>,
    /// 0.2.1's `session.lock`, held (an exclusive `flock`) while this process has the session
    /// open: another process's resume is refused.
    lock: Locked,
    sink: Sink,
    /// 0.1.1: an earlier process stored a session of this id; every turn ends in error.
    collided: bool,
    /// A background child's parent session id (its runtime context says it is delegated).
    pub child_of: Option<String>,
    /// How the `subagent` tool starts a child (0.1.5 and 0.2.1 `sdk`; none: an unknown tool).
    pub spawn: Option<Spawn>,
    /// Whether a turn is being played (the session is `running`).
    pub running: bool,
    /// Prompts accepted while running, each with the turn it will play.
    pub queue: std::collections::VecDeque<(Value, TurnScript)>,
    /// The files this session (in this process) read or wrote: 0.1.5 and 0.2.1 refuse to
    /// modify an existing file the session has not read (another session's, or this session's
    /// before a resume in a new process).
    known_files: std::collections::HashSet<PathBuf>,
}

/// The real runtime's session directory name for a cwd: the path without its leading `/`, every
/// `/` a `-`, wrapped in `--` (`/tmp/a/project` is `--tmp-a-project--`).
pub fn cwd_slug(cwd: &Path) -> String {
    let path = cwd.to_string_lossy();
    format!("--{}--", path.trim_start_matches('/').replace('/', "-"))
}

impl Session {
    /// A new session whose log lives under `log_root/<cwd slug>/<id>/` (when a root is given).
    /// A log that already exists means a previous process made this session: the real runtime
    /// refuses it (`session "ID" already exists`), and so does this.
    pub fn create(
        id: &str,
        cwd: &Path,
        flavor: Flavor,
        log_root: Option<&Path>,
        sink: Sink,
    ) -> Result<Session, String> {
        let storable = log_root.filter(|_| crate::sessions::is_storable_id(id));
        // 0.1.1 takes a prompt to a session an earlier process stored, and fails its turn.
        let collided = flavor.persona == Persona::V011
            && storable.is_some_and(|root| log_path(root, id, cwd, flavor).exists());
        let (log, lock) = match storable {
            Some(root) if !collided => {
                let (log, lock) = open_log(root, id, cwd, flavor)?;
                (Some(log), lock)
            }
            _ => (None, None),
        };
        let mut session = Session::blank(id, cwd, flavor, log, sink);
        session.lock = lock;
        session.collided = collided;
        if flavor.policy_events() {
            session.emit("permission/preset", json!({"preset": "workspace-write"}));
            session.emit("sandbox/mode", json!({"mode": "workspace-write"}));
            session.emit("approval/policy", json!({"policy": "ask"}));
        }
        Ok(session)
    }

    fn blank(id: &str, cwd: &Path, flavor: Flavor, log: Option<Log>, sink: Sink) -> Session {
        Session {
            id: id.to_string(),
            cwd: cwd.to_path_buf(),
            origin: cwd.to_path_buf(),
            flavor,
            config: ModelConfig::default(),
            seq: 0,
            turn: 0,
            header_sent: false,
            header_reason: "initial",
            last_context: None,
            system_seq: None,
            context_stale: false,
            pending_notices: Vec::new(),
            turn_notices: Vec::new(),
            log,
            lock: None,
            sink,
            collided: false,
            child_of: None,
            spawn: None,
            running: false,
            queue: Default::default(),
            known_files: Default::default(),
        }
    }

    /// A background child of `parent` (observed): not stored, its three policy events recorded
    /// but not sent (its `seq` starts at 3 on `sdk`), the parent's model settings with the effort
    /// explicit.
    pub fn child(id: &str, parent: &Session, sink: Sink) -> Session {
        let mut child = Session::blank(id, &parent.cwd, parent.flavor, None, sink);
        child.child_of = Some(parent.id.clone());
        child.config = parent.config.clone();
        child.config.reasoning_effort = Some(
            child
                .config
                .reasoning_effort
                .take()
                .unwrap_or_else(|| "high".into()),
        );
        if parent.flavor.policy_events() {
            child.seq = 3;
        }
        child
    }

    /// 0.2.1's cold resume: the session a previous process stored under `log_root` (any cwd's
    /// directory), with its `seq`, turn count, working directory and last model context restored
    /// and its log appended to; its first model request in this process says `resume` (observed).
    /// No event is emitted; the caller gives it this process's model settings. Unknown: `session "ID" not found`, as the real one says.
    pub fn resume(
        id: &str,
        flavor: Flavor,
        log_root: Option<&Path>,
        sink: Sink,
    ) -> Result<Session, String> {
        let not_found = || format!("session {} not found", Value::from(id));
        let root = log_root.ok_or_else(not_found)?;
        if !crate::sessions::is_storable_id(id) {
            return Err(not_found());
        }
        let path = std::fs::read_dir(root)
            .into_iter()
            .flatten()
            .flatten()
            .flat_map(|slug| [V4_LOG, V4_PLAIN_LOG].map(|name| slug.path().join(id).join(name)))
            .find(|path| path.is_file())
            .ok_or_else(not_found)?;
        let unreadable = |e: String| {
            format!(
                "cannot resume session {}: {}: {e}",
                Value::from(id),
                path.display()
            )
        };
        let lock = lock_session(&path.with_file_name("session.lock"), id)?;
        let bytes = read_log(&path).map_err(unreadable)?;
        let zstd = path.extension().is_some_and(|ext| ext == "zstd");
        let text = if zstd {
            zstd_raw::decode(&bytes).map_err(unreadable)?
        } else {
            String::from_utf8(bytes).map_err(|e| unreadable(e.to_string()))?
        };
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let header: Value = lines
            .next()
            .and_then(|l| serde_json::from_str(l).ok())
            .filter(|h: &Value| h["type"] == "session" && h["id"] == id)
            .ok_or_else(|| unreadable("no session header".to_string()))?;
        let origin = PathBuf::from(header["cwd"].as_str().unwrap_or_default());
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|e| unreadable(e.to_string()))?;
        let log = if zstd {
            Log::Zstd(file)
        } else {
            Log::Plain(file)
        };
        let mut session = Session::blank(id, &origin, flavor, Some(log), sink);
        session.lock = Some(lock);
        session.header_reason = "resume";
        for line in lines {
            let Ok(event) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            if let Some(seq) = event["seq"].as_u64() {
                session.seq = session.seq.max(seq + 1);
            }
            match event["type"].as_str() {
                Some("turn/start") => {
                    session.turn = session
                        .turn
                        .max(event["data"]["turn"].as_u64().unwrap_or(0));
                }
                Some("working-directory/change") => {
                    if let Some(cwd) = event["data"]["cwd"].as_str() {
                        session.cwd = PathBuf::from(cwd);
                    }
                }
                Some("request/context") => {
                    session.last_context = context_key(&event["data"]);
                }
                Some("system/message") => session.system_seq = event["seq"].as_u64(),
                _ => {}
            }
        }
        Ok(session)
    }

    /// 0.2.1's `session/working-directory/get`: the effective directory. One that is no longer a
    /// directory falls back to the origin, recorded as a change with its own notice (`The working
    /// directory "OLD" is unavailable. The working directory is now "ORIGIN".`), as observed.
    pub fn working_directory(&mut self) -> PathBuf {
        if !self.cwd.is_dir() && self.cwd != self.origin {
            let text = format!(
                "The working directory {} is unavailable. The working directory is now {}.",
                Value::from(self.cwd.to_string_lossy()),
                Value::from(self.origin.to_string_lossy())
            );
            let origin = self.origin.clone();
            self.change_directory(origin, text);
        }
        self.cwd.clone()
    }

    /// Records a move to `target` and splices `text` as a notice for the next step.
    fn change_directory(&mut self, target: PathBuf, text: String) {
        let notice = json!({"content": [{"type": "text", "text": text}],
            "source": {"kind": "working-directory"}, "role": "user",
            "id": uuid::Uuid::new_v4().to_string()});
        self.emit(
            "working-directory/change",
            json!({"cwd": target.to_string_lossy()}),
        );
        self.emit(
            "agent/inbox/spliced",
            json!({"target": "next-step", "start": self.pending_notices.len(),
                   "inserted": [notice]}),
        );
        self.pending_notices.push(notice);
        self.cwd = target;
        self.context_stale = true;
    }

    /// Takes the pending notices for the step about to start (`agent/inbox/spliced` removing
    /// them); they are recorded as user messages once the step has started.
    fn take_notices(&mut self) {
        if self.pending_notices.is_empty() {
            return;
        }
        self.turn_notices = std::mem::take(&mut self.pending_notices);
        self.emit(
            "agent/inbox/spliced",
            json!({"target": "next-step", "start": 0,
                   "removedCount": self.turn_notices.len(), "inserted": []}),
        );
    }

    /// 0.2.1's `session/working-directory/set`: `path` absolute or relative to the effective
    /// directory (`..` folded, links kept, as `path.resolve`); it must be a directory. A change
    /// records `working-directory/change` and splices a notice for the next step (the model reads
    /// it as a user message in the next turn's first step, with the runtime context again).
    pub fn set_working_directory(&mut self, path: &str) -> Result<PathBuf, String> {
        if path.is_empty() {
            return Err("working-directory: cd must not be empty".to_string());
        }
        let target = resolve(&self.cwd, path);
        if !target.is_dir() {
            return Err(format!(
                "working-directory: directory does not exist: {}",
                Value::from(path)
            ));
        }
        if target == self.cwd {
            return Ok(target);
        }
        let text = format!(
            "The working directory changed from {} to {}.",
            Value::from(self.cwd.to_string_lossy()),
            Value::from(target.to_string_lossy())
        );
        self.change_directory(target.clone(), text);
        Ok(target)
    }

    /// Appends one event to the log and hands it to the sink.
    pub fn emit(&mut self, kind: &str, data: Value) {
        self.emit_with(kind, data, &[]);
    }

    fn emit_with(&mut self, kind: &str, data: Value, extra: &[(&str, Value)]) {
        let mut event = json!({"type": kind, "seq": self.seq, "time": now_ms(), "data": data});
        for (name, value) in extra {
            event[*name] = value.clone();
        }
        self.seq += 1;
        if let Some(log) = self.log.as_mut() {
            log.append(&event);
        }
        (self.sink)(&self.id, &event);
    }

    /// The receipt: the queued user message spliced into the inbox.
    pub fn receipt(&mut self, message: &Value) {
        self.emit(
            "agent/inbox/spliced",
            json!({"target": "next-turn", "start": 0, "inserted": [message]}),
        );
    }

    /// `turn/start` and the inbox splice that takes the message out; returns the turn number.
    pub fn start_turn(&mut self) -> u64 {
        self.turn += 1;
        self.emit("turn/start", json!({"turn": self.turn}));
        self.take_notices();
        self.emit(
            "agent/inbox/spliced",
            json!({"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []}),
        );
        self.turn
    }
}

/// 0.2.1's session log name on `sdk` (zstd); 0.1.5's is `session.v3.jsonl`.
pub const V4_LOG: &str = "session.v4.jsonl.zstd";
/// 0.2.1's session log name on `sdk-minimal` (plain JSON lines).
pub const V4_PLAIN_LOG: &str = "session.v4.jsonl";

/// `path.resolve(base, path)`: `path` made absolute against `base`, `.` and `..` folded away
/// (links kept).
pub fn resolve(base: &Path, path: &str) -> PathBuf {
    use std::path::Component;
    let mut resolved = PathBuf::new();
    for component in base.join(path).components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                resolved.pop();
            }
            other => resolved.push(other),
        }
    }
    resolved
}

/// A stored session log's bytes, at most [`zstd_raw::MAX_DECODED`] of them (fake-dsh's own logs
/// are far smaller): a larger one is refused as unreadable, not read whole.
fn read_log(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let bound = zstd_raw::MAX_DECODED as u64;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(bound + 1).read_to_end(&mut bytes))
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > bound {
        return Err(format!("the log is larger than {} MiB", bound >> 20));
    }
    Ok(bytes)
}

/// A session log file: 0.1.5's JSON lines, or 0.2.1's zstd (each event one raw-block frame,
/// which any zstd reader decodes: fake-dsh compresses nothing).
enum Log {
    Plain(std::fs::File),
    Zstd(std::fs::File),
}

impl Log {
    fn append(&mut self, value: &Value) {
        let mut line = value.to_string().into_bytes();
        line.push(b'\n');
        let _ = match self {
            Log::Plain(file) => file.write_all(&line),
            Log::Zstd(file) => file.write_all(&zstd_raw::frame(&line)),
        };
    }
}

/// zstd frames of raw (uncompressed) blocks: written for 0.2.1's session logs, and read back
/// (raw and RLE blocks only: a compressed block, which fake-dsh never writes, is refused).
pub mod zstd_raw {
    const MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
    /// Blocks are at most 128 KiB (the window the header declares).
    const BLOCK: usize = 128 * 1024;
    /// The most a session log may decode to (fake-dsh's own logs are far smaller): past it the
    /// log is refused as unreadable before the memory is taken.
    pub const MAX_DECODED: usize = 64 << 20;

    /// One frame holding `data`: no content size, no checksum, a 128 KiB window.
    pub fn frame(data: &[u8]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.push(0x00); // frame header descriptor: no size, not single-segment, no checksum
        out.push(7 << 3); // window descriptor: 2^(10+7) bytes
        let mut chunks: Vec<&[u8]> = data.chunks(BLOCK).collect();
        if chunks.is_empty() {
            chunks.push(&[]);
        }
        let last = chunks.len() - 1;
        for (index, chunk) in chunks.iter().enumerate() {
            let header = ((chunk.len() as u32) << 3) | u32::from(index == last);
            out.extend_from_slice(&header.to_le_bytes()[..3]);
            out.extend_from_slice(chunk);
        }
        out
    }

    /// The concatenated content of the frames in `bytes`; an error (never an allocation) for a
    /// block over 128 KiB or a content over [`MAX_DECODED`].
    pub fn decode(bytes: &[u8]) -> Result<String, String> {
        let mut out = Vec::new();
        let mut at = 0;
        let take = |at: &mut usize, n: usize| -> Result<&[u8], String> {
            let slice = bytes
                .get(*at..*at + n)
                .ok_or_else(|| "truncated zstd frame".to_string())?;
            *at += n;
            Ok(slice)
        };
        while at < bytes.len() {
            if take(&mut at, 4)? != MAGIC {
                return Err("not a zstd frame".to_string());
            }
            let descriptor = take(&mut at, 1)?[0];
            let single_segment = descriptor & 0x20 != 0;
            if !single_segment {
                take(&mut at, 1)?;
            }
            let dict = [0, 1, 2, 4][usize::from(descriptor & 0x03)];
            take(&mut at, dict)?;
            let size_flag = descriptor >> 6;
            let size_bytes = match size_flag {
                0 if single_segment => 1,
                0 => 0,
                1 => 2,
                2 => 4,
                _ => 8,
            };
            take(&mut at, size_bytes)?;
            loop {
                let header = take(&mut at, 3)?;
                let header =
                    u32::from(header[0]) | u32::from(header[1]) << 8 | u32::from(header[2]) << 16;
                let size = (header >> 3) as usize;
                if size > BLOCK {
                    return Err(format!(
                        "a zstd block of {size} bytes (over the 128 KiB a block may hold)"
                    ));
                }
                if out.len() + size > MAX_DECODED {
                    return Err(format!("it decodes to more than {} MiB", MAX_DECODED >> 20));
                }
                match (header >> 1) & 0x03 {
                    0 => out.extend_from_slice(take(&mut at, size)?),
                    1 => {
                        let byte = take(&mut at, 1)?[0];
                        out.extend(std::iter::repeat_n(byte, size));
                    }
                    _ => return Err("a compressed zstd block (not fake-dsh's)".to_string()),
                }
                if header & 1 == 1 {
                    break;
                }
            }
            if descriptor & 0x04 != 0 {
                take(&mut at, 4)?;
            }
        }
        String::from_utf8(out).map_err(|e| e.to_string())
    }
}

/// Takes 0.2.1's `session.lock` (created when missing) for this process; held by another live
/// process, the real runtime's refusal.
fn lock_session(path: &Path, id: &str) -> Result<nix::fcntl::Flock<std::fs::File>, String> {
    use nix::fcntl::{Flock, FlockArg};
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| format!("cannot lock session {}: {e}", Value::from(id)))?;
    Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|_| {
        format!(
            "session {} is already owned by an active write handle",
            Value::from(id)
        )
    })
}

/// A held session lock, if the persona keeps one.
type Locked = Option<nix::fcntl::Flock<std::fs::File>>;

/// Where a session's log lives under `root`.
fn log_path(root: &Path, id: &str, cwd: &Path, flavor: Flavor) -> PathBuf {
    root.join(cwd_slug(cwd)).join(id).join(flavor.log_name())
}

fn open_log(root: &Path, id: &str, cwd: &Path, flavor: Flavor) -> Result<(Log, Locked), String> {
    let dir = root.join(cwd_slug(cwd)).join(id);
    let version = if flavor.v021() { 4 } else { 3 };
    let path = log_path(root, id, cwd, flavor);
    if path.exists() {
        return Err(format!("session {} already exists", Value::from(id)));
    }
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("cannot create session {}: {e}", dir.display()))?;
    let file = std::fs::OpenOptions::new()
        .create_new(true)
        .append(true)
        .open(&path)
        .map_err(|e| format!("cannot create session {}: {e}", path.display()))?;
    let header = json!({"type": "session", "version": version, "id": id, "createdAt": now_ms(),
        "cwd": cwd.to_string_lossy(), "isSeeded": false, "delegationDepth": 0});
    // The real 0.2.1 keeps an (empty) `session.lock` beside the log, held while it runs.
    let lock = if flavor.v021() {
        Some(lock_session(&dir.join("session.lock"), id)?)
    } else {
        None
    };
    let mut log = if flavor.log_name() == V4_LOG {
        Log::Zstd(file)
    } else {
        Log::Plain(file)
    };
    log.append(&header);
    Ok((log, lock))
}

/// A user message as the runtime queues it (a fresh UUID as its id).
pub fn user_message(content: Value) -> Value {
    json!({"content": content, "source": {"kind": "user"}, "role": "user",
           "id": uuid::Uuid::new_v4().to_string()})
}

/// The text of a user message's content blocks.
pub fn message_text(message: &Value) -> String {
    let blocks = message["content"].as_array().cloned().unwrap_or_default();
    let texts: Vec<&str> = blocks.iter().filter_map(|b| b["text"].as_str()).collect();
    texts.join("\n")
}

/// Whether the process is ending: a session stops emitting at once (an aborted turn gets no
/// `turn/end`).
pub type Stop = dyn Fn() -> bool + Send + Sync;

/// Plays one turn's body (after [`Session::start_turn`]) and its `turn/end`, taking the session
/// lock for each event and releasing it while the model "thinks" (a step's `delay_ms`, after the
/// step's start). A turn that ends in `error` has one more step: the failed model attempt.
/// Returns false when stopped mid-way (no more events, no `turn/end`).
pub fn play_turn(
    session: &std::sync::Mutex<Session>,
    message: &Value,
    script: &TurnScript,
    stop: &Stop,
) -> bool {
    let lock = || session.lock().unwrap_or_else(|p| p.into_inner());
    if script.stderr_bytes > 0 {
        // A runtime logging as it works: blocks here while nobody drains stderr.
        crate::output::stderr_flood(script.stderr_bytes);
    }
    let turn = lock().turn;
    if lock().collided {
        collided_turn(&mut lock(), turn);
        return true;
    }
    let count = script.steps.len() + usize::from(script.end == EndKind::Error);
    for index in 0..count {
        let number = index as u64 + 1;
        let step = script.steps.get(index).map(|step| echoed(step, message));
        let step = step.as_ref();
        {
            let mut session = lock();
            if index > 0 {
                // 0.2.1: notices spliced during the turn reach the model at the next step.
                session.take_notices();
            }
            session.emit("step/start", json!({"turn": turn, "step": number}));
            if index == 0 {
                preamble(&mut session, turn, message);
            } else {
                step_notices(&mut session);
            }
            if step.is_some() {
                delivered(&mut session);
            }
        }
        if let Some(delay) = step.map(|step| step.delay_ms).filter(|ms| *ms > 0) {
            std::thread::sleep(std::time::Duration::from_millis(delay));
        }
        if stop() {
            return false;
        }
        let mut session = lock();
        match step {
            Some(step) => answer(&mut session, turn, number, step),
            None => failed_attempt(&mut session, turn, number, &error_of(script)),
        }
        session.emit("step/end", json!({"turn": turn, "step": number}));
    }
    if stop() {
        return false;
    }
    end_turn(&mut lock(), turn, script);
    true
}

/// 0.2.1 records that the step's model request was delivered, through the last event so far, as
/// the request goes out: before the model answers, so a slow answer (the step's `delay_ms`)
/// leaves the wire silent after it (observed). An `error` turn's failed request records none.
fn delivered(session: &mut Session) {
    if session.flavor.v021() {
        let data = json!({"sessionId": session.id, "sessionFormatVersion": 4,
                          "throughSeq": session.seq.saturating_sub(1)});
        session.emit("session-log-deepseek/delivery-accepted", data);
    }
}

/// The step with the prompt's text put before its text when it says `echo_prompt`.
fn echoed(step: &StepScript, message: &Value) -> StepScript {
    let mut step = step.clone();
    if step.echo_prompt {
        let text = step.text.take().unwrap_or_default();
        step.text = Some(format!("{}{text}", message_text(message)));
    }
    step
}

/// 0.1.1's turn on a session id an earlier process stored (observed): no step, `turn/end` in
/// error.
fn collided_turn(session: &mut Session, turn: u64) {
    let message = format!(
        "session {} already has a persisted log on disk that does not match this live session \
         (id collision)",
        Value::from(session.id.as_str())
    );
    let error = json!({"message": message, "code": "UNKNOWN"});
    session.emit(
        "turn/end",
        json!({"turn": turn, "reason": {"kind": "error", "error": error}}),
    );
}

/// The model's answer in one step: `assistant/message` (after 0.1.1's chunks), then its tools.
/// Tool call ids are the model's: numbered by model request like the model server's.
fn answer(session: &mut Session, turn: u64, step: u64, script: &StepScript) {
    let request = next_model_request();
    let prefix = if session.flavor.v021() {
        "toolu"
    } else {
        "call"
    };
    let mut content = Vec::new();
    if let Some(reasoning) = script.padded_reasoning() {
        content.push(json!({"type": "reasoning", "text": reasoning}));
    }
    if let Some(text) = script.padded_text() {
        content.push(json!({"type": "text", "text": text}));
    }
    let calls: Vec<(String, &ToolCallScript)> = script
        .tool_calls
        .iter()
        .enumerate()
        .map(|(n, call)| (format!("{prefix}_{request}_{n}"), call))
        .collect();
    for (id, call) in &calls {
        content.push(json!({"type": "tool-call", "id": id, "name": call.name,
                            "arguments": call.arguments.to_string()}));
    }
    let reason = if calls.is_empty() {
        "stop"
    } else {
        "tool-calls"
    };
    let usage = usage(session.flavor, &content);
    let mut chunk_seqs = Vec::new();
    if session.flavor.chunks() {
        chunk_seqs = chunks(session, turn, step, &content, &usage, reason);
    }
    let mut source = json!({"kind": "model", "provider": session.config.provider,
                            "model": session.config.model});
    let replay = session
        .flavor
        .v021()
        .then(|| replay_state(&session.config.model, &content, request));
    if let Some(replay) = &replay {
        source["replayState"] = replay.clone();
    }
    let mut data = json!({"turn": turn, "step": step, "message": {"role": "assistant",
        "content": content, "source": source, "id": uuid::Uuid::new_v4().to_string()},
        "usage": usage});
    let mut extra = vec![("surfaceOp", json!("append"))];
    if session.flavor.chunks() {
        extra.push(("sourceEventSeqs", json!(chunk_seqs)));
    } else {
        data["stream"] = stream(session.flavor, &content, &usage, reason, replay);
    }
    session.emit_with("assistant/message", data, &extra);
    for (id, call) in &calls {
        tool(session, turn, step, id, call);
    }
}

/// A step's token usage, with the members each release reports (the counts made up like the
/// model server's).
fn usage(flavor: Flavor, content: &[Value]) -> Value {
    let chars: usize = content
        .iter()
        .map(|b| {
            b["text"]
                .as_str()
                .or(b["arguments"].as_str())
                .unwrap_or("")
                .len()
        })
        .sum();
    let (input, output) = (1000u64, (chars / 4).max(1) as u64);
    match flavor.persona {
        Persona::V011 => {
            json!({"inputTokens": input, "outputTokens": output, "cacheReadTokens": 0})
        }
        Persona::V015 => json!({"inputTokens": input, "outputTokens": output,
                                "totalTokens": input + output, "cacheReadTokens": 0}),
        Persona::V021 => json!({"inputTokens": input, "outputTokens": output,
                                "cacheReadTokens": 0, "cacheWriteTokens": 0,
                                "totalTokens": input + output}),
    }
}

/// 0.2.1's `replayState`: the Messages response and each block (a reasoning block with its
/// signature).
fn replay_state(model: &str, content: &[Value], request: u64) -> Value {
    let blocks: Vec<Value> = content
        .iter()
        .map(|block| match block["type"].as_str() {
            Some("reasoning") => {
                json!({"type": "reasoning", "signature": format!("fake-dsh-signature-{request}")})
            }
            _ => json!({"type": block["type"]}),
        })
        .collect();
    json!({"response": {"kind": "deepseek-messages", "version": 1, "model": model},
           "blocks": blocks})
}

/// The `stream` record of an `assistant/message` (0.1.5 and 0.2.1, observed): per block a
/// `block-start`, its `<kind>-chunks` (a tool call's first record names it, with an empty
/// argument piece), and a `block-end`, then `usage` and `finish`. 0.2.1 closes each block before
/// the next starts and puts `replayState` on `finish`; 0.1.5 (chat completions) starts every
/// block, then ends them all.
fn stream(
    flavor: Flavor,
    content: &[Value],
    usage: &Value,
    reason: &str,
    replay: Option<Value>,
) -> Value {
    let time = now_ms();
    let chunk = |chunk: Value| json!({"type": "chunk", "time": time, "chunk": chunk});
    let mut opened = Vec::new();
    let mut ended = Vec::new();
    for (index, block) in content.iter().enumerate() {
        let kind = block["type"].as_str().unwrap_or("text");
        let mut records = vec![chunk(
            json!({"type": "block-start", "index": index, "blockType": kind}),
        )];
        let pieces = |more: Value| {
            let mut record = json!({"type": format!("{kind}-chunks"), "time0": time,
                                    "index": index, "dt": []});
            for (name, value) in more.as_object().into_iter().flatten() {
                record[name] = value.clone();
            }
            record
        };
        if kind == "tool-call" {
            let (id, name, args) = (&block["id"], &block["name"], &block["arguments"]);
            if flavor.v021() {
                records.push(pieces(json!({"id": id, "name": name, "args": [""]})));
                records.push(pieces(json!({"id": id, "args": [args]})));
            } else {
                records.push(pieces(json!({"id": id, "name": name, "args": ["", args]})));
            }
        } else {
            records.push(pieces(json!({"texts": [block["text"]]})));
        }
        let end = chunk(json!({"type": "block-end", "index": index, "block": block}));
        if flavor.v021() {
            opened.extend(records);
            opened.push(end);
        } else {
            opened.extend(records);
            ended.push(end);
        }
    }
    opened.extend(ended);
    opened.push(chunk(json!({"type": "usage", "usage": usage})));
    let mut finish = json!({"type": "finish", "reason": {"kind": reason}});
    if let Some(replay) = replay {
        finish["replayState"] = replay;
    }
    opened.push(chunk(finish));
    Value::Array(opened)
}

/// The failed model request of an `error` turn (0.1.5 records it; 0.1.1 records nothing).
fn failed_attempt(session: &mut Session, turn: u64, step: u64, error: &Value) {
    next_model_request();
    if session.flavor.persona != Persona::V011 {
        session.emit(
            "assistant/attempt",
            json!({"turn": turn, "step": step, "stream": [{"type": "chunk", "time": now_ms(),
                   "chunk": {"type": "finish", "reason": {"kind": "error", "failure": error}}}]}),
        );
    }
}

/// The error an `error` turn reports (default: an AUTH failure like a 401's).
fn error_of(script: &TurnScript) -> Value {
    script.error.clone().unwrap_or_else(
        || json!({"message": "fake-dsh: scripted model failure", "code": "AUTH", "status": 401}),
    )
}

/// What the first step of a turn records before the model answers: the user message (after
/// 0.2.1's working-directory notices); on the session's first turn also the system prompt, the
/// runtime context (`sdk`, and again after a working-directory change), the request header (on
/// the first turn this process plays, so again after a resume, then with reason `resume`), the
/// model context (again when the model changed, with 0.2.1 `sdk`'s system prompt before the user
/// message) and title (0.1.1 titles before the request, 0.1.5 after it).
fn preamble(session: &mut Session, turn: u64, message: &Value) {
    let first_turn = turn == 1;
    let context = model_context(session);
    let key = context_key(&context);
    let model_changed = !first_turn && session.last_context != key;
    // `sdk`'s system prompt names the model: 0.2.1 records it again when the model changed, and
    // the request then starts a new series (observed after a resume under another model).
    let new_series = model_changed && session.flavor.v021() && session.flavor.policy_events();
    if (first_turn || new_series) && session.flavor.system_message() {
        system_message(session, turn);
    }
    let append = [("surfaceOp", json!("append"))];
    for notice in std::mem::take(&mut session.turn_notices) {
        session.emit_with("user/message", notice, &append);
    }
    let message_seq = session.seq;
    session.emit_with("user/message", message.clone(), &append);
    if session.flavor.runtime_context() && (first_turn || session.context_stale) {
        runtime_context(session);
    }
    let early_title = session.flavor.persona == Persona::V011;
    if first_turn && early_title {
        title(session, message, message_seq);
    }
    if !session.header_sent {
        session.header_sent = true;
        let mut header = session.config.header();
        if session.flavor.persona == Persona::V011 {
            // 0.1.1 sends its system prompt in the header (0.1.5 and 0.2.1 as `system/message`).
            header["system"] = json!("You are fake-dsh's default agent.");
        }
        let mut data = json!({"header": header, "reason": session.header_reason});
        if new_series {
            data["startsSeries"] = json!(true);
        }
        session.emit("request/header", data);
    }
    // The first turn records the context; a later one only when the model changed (observed: a
    // session resumed by a process `initialize`d with another model).
    if first_turn || model_changed {
        session.last_context = key;
        session.emit("request/context", context);
    }
    if first_turn && !early_title {
        title(session, message, message_seq);
    }
}

/// The system prompt as a `system/message` of the turn's first step (0.2.1 attributes it to the
/// system prompt, 0.1.5 to its plugin); a later one replaces the earlier on the surface (its
/// `surfaceOp` and `sourceEventSeqs` name the earlier one's seq, observed).
fn system_message(session: &mut Session, turn: u64) {
    let source = if session.flavor.v021() {
        json!({"kind": "system-prompt"})
    } else {
        json!({"kind": "plugin", "plugin": SYSTEM_PROMPT_PLUGIN})
    };
    let extra = match session.system_seq {
        Some(earlier) => vec![
            ("sourceEventSeqs", json!([earlier])),
            (
                "surfaceOp",
                json!({"op": "replace", "startSeq": earlier, "endSeq": earlier}),
            ),
        ],
        None => vec![("surfaceOp", json!("append"))],
    };
    session.system_seq = Some(session.seq);
    session.emit_with(
        "system/message",
        json!({"turn": turn, "step": 1, "message": {"role": "system",
               "content": [{"type": "text", "text": "You are fake-dsh's default agent."}],
               "source": source, "id": uuid::Uuid::new_v4().to_string()}}),
        &extra,
    );
}

/// `request/context`'s data: the provider and model the session's requests use.
fn model_context(session: &Session) -> Value {
    let mut context = json!({"provider": session.config.provider, "model": session.config.model,
                             "contextWindow": 1_000_000});
    // Observed with `deepseek-flash` only (`deepseek-pro` has none; why is not known).
    if session.flavor.persona != Persona::V011 && session.config.model == "deepseek-flash" {
        context["systemPromptUpdate"] = json!("in-history");
    }
    context
}

/// The provider and model a `request/context` names.
fn context_key(context: &Value) -> Option<(String, String)> {
    let text = |name: &str| context[name].as_str().map(str::to_string);
    Some((text("provider")?, text("model")?))
}

/// The runtime-context user message, the stale mark cleared (observed): a snapshot of sections,
/// the working directory (0.2.1), the file sandbox and the approval policy (`sdk` only); 0.1.5
/// attributes it to the system-prompt plugin.
fn runtime_context(session: &mut Session) {
    session.context_stale = false;
    let append = [("surfaceOp", json!("append"))];
    let cwd = Value::from(session.cwd.to_string_lossy());
    let mut sections = Vec::new();
    if session.flavor.v021() {
        let text = format!("Current working directory: {cwd}.");
        sections.push(json!({"name": "working-directory:current", "text": text}));
    }
    if session.flavor.policy_events() {
        let delegated = session.child_of.is_some();
        let sandbox = format!(
            "Current DSH file policy: workspace-write. Any available operation enforced by the \
             DSH file sandbox may modify files under the session workspace: {cwd}. Some \
             platform temporary areas may also be writable."
        );
        sections.push(json!({"name": "sandbox:policy", "text": sandbox}));
        let approval = if delegated {
            "Approval prompts are disabled in this session: actions that require approval are \
             rejected automatically \u{2014} do not request sandbox escalation (do not set \
             `sandbox_permissions`)."
        } else {
            "Approval policy: ask. Operations that require approval may ask through the \
             configured answerers; without an available answerer, the request fails closed."
        };
        sections.push(json!({"name": "approval:policy", "text": approval}));
        if delegated {
            sections.extend(delegation_sections(session.flavor));
        }
    }
    let mut text = "Current runtime context. This snapshot supersedes earlier runtime-context \
                    snapshots."
        .to_string();
    for section in &sections {
        text.push_str("\n\n");
        text.push_str(section["text"].as_str().unwrap_or_default());
    }
    let mut source = json!({"kind": "runtime-context", "form": "snapshot", "sections": sections});
    if !session.flavor.v021() {
        source["kind"] = json!("plugin");
        source["plugin"] = json!(SYSTEM_PROMPT_PLUGIN);
    }
    session.emit_with(
        "user/message",
        json!({"content": [{"type": "text", "text": text}], "source": source,
                   "role": "user", "id": uuid::Uuid::new_v4().to_string()}),
        &append,
    );
}

/// A background child's runtime-context sections after the approval policy (observed): 0.2.1's
/// delegation depth of each delegating tool, then the delegation notice.
fn delegation_sections(flavor: Flavor) -> Vec<Value> {
    let mut sections = Vec::new();
    if flavor.v021() {
        for tool in ["subagent", "subagent_fork"] {
            let text = format!(
                "Delegation depth for `{tool}`: current 1, maximum 1, remaining levels 0. Do not \
                 call `{tool}` at this depth; carry out the work directly."
            );
            sections.push(json!({"name": format!("tool:{tool}:depth"), "text": text}));
        }
    }
    let text = "You are a delegated subagent: your permission scope was fixed when you were \
                started and cannot be widened from inside this session \u{2014} operations that \
                require approval are rejected automatically. When the task needs access beyond \
                that scope, do not retry the denied operation; state the limitation in your \
                reply so the delegating agent can handle it.";
    sections.push(json!({"name": "subagent:delegation", "text": text}));
    sections
}

/// A later step's input: the notices it took, then the runtime context again when the
/// directory changed.
fn step_notices(session: &mut Session) {
    let append = [("surfaceOp", json!("append"))];
    let notices = std::mem::take(&mut session.turn_notices);
    if notices.is_empty() {
        return;
    }
    for notice in notices {
        session.emit_with("user/message", notice, &append);
    }
    if session.context_stale {
        runtime_context(session);
    }
}

/// `session/title` from the first prompt (the fallback title: its first words), naming the
/// `user/message` it came from.
fn title(session: &mut Session, message: &Value, message_seq: u64) {
    let title: String = message_text(message).chars().take(40).collect();
    session.emit(
        "session/title",
        json!({"title": title, "messageSeqs": [message_seq], "source": {"kind": "fallback"}}),
    );
}

/// 0.1.1's streaming: one `assistant/chunk` per block start and delta, then every block's end,
/// usage and finish (observed). Returns the chunks' seqs (the message's `sourceEventSeqs`).
fn chunks(
    session: &mut Session,
    turn: u64,
    step: u64,
    content: &[Value],
    usage: &Value,
    reason: &str,
) -> Vec<u64> {
    let mut seqs = Vec::new();
    let mut chunk = |session: &mut Session, chunk: Value| {
        seqs.push(session.seq);
        session.emit(
            "assistant/chunk",
            json!({"turn": turn, "step": step, "chunk": chunk}),
        );
    };
    for (index, block) in content.iter().enumerate() {
        let kind = block["type"].as_str().unwrap_or("text");
        chunk(
            session,
            json!({"type": "block-start", "index": index, "blockType": kind}),
        );
        let delta = match kind {
            "tool-call" => json!({"type": "tool-call-delta", "index": index, "id": block["id"],
                                  "name": block["name"], "argumentsDelta": block["arguments"]}),
            _ => json!({"type": format!("{kind}-delta"), "index": index, "text": block["text"]}),
        };
        chunk(session, delta);
    }
    for (index, block) in content.iter().enumerate() {
        chunk(
            session,
            json!({"type": "block-end", "index": index, "block": block}),
        );
    }
    chunk(session, json!({"type": "usage", "usage": usage}));
    chunk(
        session,
        json!({"type": "finish", "reason": {"kind": reason}}),
    );
    seqs
}

/// Runs one tool call for real and records `tool/call` and `tool/result` (with the approval
/// nobody answers first, when the call needs one).
fn tool(session: &mut Session, turn: u64, step: u64, id: &str, call: &ToolCallScript) {
    if call.needs_approval {
        session.emit(
            "approval/asked",
            json!({"turn": turn, "step": step, "callId": id, "name": call.name}),
        );
        session.emit(
            "approval/decided",
            json!({"turn": turn, "step": step, "callId": id, "outcome": "unavailable"}),
        );
    }
    let call_seq = session.seq;
    session.emit(
        "tool/call",
        json!({"turn": turn, "step": step, "callId": id, "name": call.name,
               "arguments": call.arguments.to_string()}),
    );
    let target = written_path(session, call);
    let created = target.clone().filter(|path| !path.exists());
    let outcome = if call.needs_approval {
        Err("Error: approval unavailable: no one can answer approvals on this surface".to_string())
    } else if call.name == "subagent" && session.spawn.is_some() {
        start_subagent(session, call)
    } else {
        run_tool(session, call)
    };
    let (text, is_error) = match outcome {
        Ok(text) => (text, false),
        Err(text) => (text, true),
    };
    let written = target.filter(|_| !is_error);
    let mut data = if session.flavor.v021() {
        tool_result_0_2_1(id, &text, is_error, created, written)
    } else {
        tool_result_0_1(id, &text, is_error, written.is_some())
    };
    data["turn"] = json!(turn);
    data["step"] = json!(step);
    if let Some(error) = is_error.then(|| tool_error(&text)).flatten() {
        data["error"] = error;
    }
    session.emit_with(
        "tool/result",
        data,
        &[
            ("sourceEventSeqs", json!([call_seq])),
            ("surfaceOp", json!("append")),
        ],
    );
}

/// 0.2.1's `tool/result` data (observed): the message is the tool's, with `toolCallId` at its
/// top and the text blocks as its content; a write's result says whether it created or updated
/// the file (`written`, the path of a successful write; `created`, when it did not exist before).
fn tool_result_0_2_1(
    id: &str,
    text: &str,
    is_error: bool,
    created: Option<PathBuf>,
    written: Option<PathBuf>,
) -> Value {
    let operation = written.map(|path| match created {
        Some(_) => ("create", "Created", path),
        None => ("update", "Updated", path),
    });
    let text = match &operation {
        Some((_, done, path)) => format!(
            "<path>{}</path>\n<type>file</type>\n<content>\n{done} file\n</content>",
            path.display()
        ),
        None => text.to_string(),
    };
    let mut data = json!({"message": {"role": "tool",
        "source": {"kind": "tool", "callId": id}, "toolCallId": id,
        "content": [{"type": "text", "text": text}], "isError": is_error,
        "id": uuid::Uuid::new_v4().to_string()}});
    if let Some((operation, _, path)) = operation {
        data["meta"] = json!({"operation": operation, "path": path.to_string_lossy(), "diffs": []});
    }
    data
}

/// 0.1.x's `tool/result` data (observed): a user message of one `tool-result` block, `isError`
/// always there; `meta.diffs` after a successful write.
fn tool_result_0_1(id: &str, text: &str, is_error: bool, wrote: bool) -> Value {
    let result = json!({"type": "tool-result", "toolCallId": id,
                        "content": [{"type": "text", "text": text}], "isError": is_error});
    let mut data = json!({"message": {
        "source": {"kind": "tool", "callId": id}, "content": [result], "role": "user",
        "id": uuid::Uuid::new_v4().to_string()}});
    if wrote {
        data["meta"] = json!({"diffs": []});
    }
    data
}

/// The `subagent` tool (observed): the child started in the background (`subagent.started` and
/// its first events come from the spawn), `subagent/catalog` naming it, and the result text.
fn start_subagent(session: &mut Session, call: &ToolCallScript) -> Result<String, String> {
    let label = call.arguments["description"].as_str().unwrap_or_default();
    let prompt = call.arguments["prompt"].as_str().unwrap_or_default();
    let child = session
        .spawn
        .as_ref()
        .and_then(|spawn| spawn(session, label, prompt))
        .ok_or_else(|| "Error: the subagent could not be started".to_string())?;
    session.emit(
        "subagent/catalog",
        json!({"version": 0, "childId": child, "childCreatedAt": now_ms(),
               "mode": "continuable", "label": label}),
    );
    Ok(format!("started subagent {child}"))
}

/// `write` and `read` on real files under the session's cwd (`sdk` 0.1.5 and `headless` only).
/// A `write` outside the cwd or through a link is refused by [`crate::project::write_inside`]:
/// an error result (`Error: cannot write PATH: refusing to write: ...`), as the real runtime
/// reports a failed tool, and the turn goes on.
/// The file a `write` call names, under the session's cwd.
fn written_path(session: &Session, call: &ToolCallScript) -> Option<PathBuf> {
    (call.name == "write")
        .then(|| call.arguments["file_path"].as_str())
        .flatten()
        .map(|p| session.cwd.join(p))
}

/// The `error` member the real runtime gives a failed tool's result, for the failures it names:
/// an unknown tool, and a `write` to a file the session has not read.
fn tool_error(text: &str) -> Option<Value> {
    if text.starts_with("Error: unknown tool ") {
        Some(json!({"name": "ToolNotFoundError", "code": "UNKNOWN_TOOL"}))
    } else if text.ends_with(NOT_READ) {
        Some(json!({"name": "FsError", "code": "FS_NOT_OBSERVED"}))
    } else {
        None
    }
}

/// How 0.1.5 and 0.2.1 end the refusal to modify a file the session has not read.
const NOT_READ: &str = "file has not been read — read the file, then retry";

fn run_tool(session: &mut Session, call: &ToolCallScript) -> Result<String, String> {
    let unknown = || {
        Err(format!(
            "Error: unknown tool {}",
            Value::from(call.name.as_str())
        ))
    };
    if !session.flavor.file_tools() {
        return unknown();
    }
    let path = call.arguments["file_path"]
        .as_str()
        .map(|p| session.cwd.join(p));
    match (call.name.as_str(), path) {
        ("write", Some(path)) => {
            // A link is refused as a link (crate::project::write_inside), before this rule.
            let existing_file = path.symlink_metadata().is_ok_and(|meta| meta.is_file());
            if existing_file && !session.known_files.contains(&path) {
                return Err(format!(
                    "Error: cannot modify {}: {NOT_READ}",
                    Value::from(path.display().to_string())
                ));
            }
            let content = call.arguments["content"].as_str().unwrap_or_default();
            crate::project::write_inside(&session.cwd, &path, content.as_bytes())
                .map_err(|e| format!("Error: cannot write {}: {e}", path.display()))?;
            session.known_files.insert(path.clone());
            Ok(format!(
                "<path>{}</path>\nWrote {} bytes.",
                path.display(),
                content.len()
            ))
        }
        ("read", Some(path)) => {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("Error: cannot read {}: {e}", path.display()))?;
            session.known_files.insert(path);
            Ok(text)
        }
        ("write" | "read", None) => Err("Error: file_path is required".to_string()),
        _ => unknown(),
    }
}

fn end_turn(session: &mut Session, turn: u64, script: &TurnScript) {
    let mut reason = json!({"kind": script.end.name()});
    if script.end == EndKind::Error {
        reason["error"] = error_of(script);
    }
    session.emit("turn/end", json!({"turn": turn, "reason": reason}));
}

/// The default agent's turn for a prompt, the kit's default model conversation: a `write` of
/// `index.html` then `I wrote index.html.`; a prompt saying "green" on a session whose cwd has the
/// page reads it first and writes a green one.
pub fn default_turn(prompt: &str, cwd: &Path) -> TurnScript {
    let write = |content: String| ToolCallScript {
        name: "write".to_string(),
        arguments: json!({"file_path": "index.html", "content": content}),
        needs_approval: false,
    };
    let step = |reasoning: &str, text: Option<&str>, calls: Vec<ToolCallScript>| StepScript {
        reasoning: Some(reasoning.to_string()),
        text: text.map(str::to_string),
        tool_calls: calls,
        ..StepScript::default()
    };
    let green = prompt.to_lowercase().contains("green") && cwd.join("index.html").is_file();
    let steps = if green {
        let read = ToolCallScript {
            name: "read".to_string(),
            arguments: json!({"file_path": "index.html"}),
            needs_approval: false,
        };
        let page = crate::design::page(&crate::design::hero_for(prompt, 2));
        vec![
            step("I will read index.html first.", None, vec![read]),
            step("Now I make it green.", None, vec![write(page)]),
            step("Done.", Some("I made index.html green."), vec![]),
        ]
    } else {
        let page = crate::design::page(&crate::design::hero_for(prompt, 1));
        vec![
            step(
                "The user wants a page: I will write index.html.",
                None,
                vec![write(page)],
            ),
            step(
                "The file is written; I will say so.",
                Some("I wrote index.html."),
                vec![],
            ),
        ]
    };
    TurnScript {
        steps,
        ..TurnScript::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn recording(flavor: Flavor, cwd: &Path) -> (Arc<Mutex<Vec<Value>>>, Mutex<Session>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let copy = seen.clone();
        let sink: Sink = Box::new(move |_, event| copy.lock().unwrap().push(event.clone()));
        let session = Session::create("s-1", cwd, flavor, None, sink).unwrap();
        (seen, Mutex::new(session))
    }

    fn kinds(seen: &Mutex<Vec<Value>>) -> Vec<String> {
        let seen = seen.lock().unwrap();
        seen.iter()
            .map(|e| e["type"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn the_default_turn_writes_the_page_and_records_the_real_event_order() {
        let dir = tempfile::tempdir().unwrap();
        let flavor = Flavor {
            persona: Persona::V015,
            minimal: false,
        };
        let (seen, session) = recording(flavor, dir.path());
        let message = user_message(json!([{"type": "text", "text": "Make a landing page"}]));
        session.lock().unwrap().receipt(&message);
        session.lock().unwrap().start_turn();
        let script = default_turn("Make a landing page", dir.path());
        assert!(play_turn(&session, &message, &script, &|| false));
        assert!(std::fs::read_to_string(dir.path().join("index.html"))
            .unwrap()
            .contains("<html"));
        let expected = "permission/preset sandbox/mode approval/policy agent/inbox/spliced \
            turn/start agent/inbox/spliced step/start system/message user/message user/message \
            request/header request/context session/title \
            assistant/message tool/call tool/result step/end step/start assistant/message \
            step/end turn/end";
        assert_eq!(
            kinds(&seen).join(" "),
            expected.split_whitespace().collect::<Vec<_>>().join(" ")
        );
        let seqs: Vec<u64> = seen
            .lock()
            .unwrap()
            .iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
        let last = seen.lock().unwrap().last().cloned().unwrap();
        assert_eq!(last["data"]["reason"], json!({"kind": "completed"}));
    }

    #[test]
    fn sdk_minimal_has_no_file_tools() {
        let dir = tempfile::tempdir().unwrap();
        let flavor = Flavor {
            persona: Persona::V015,
            minimal: true,
        };
        let (seen, session) = recording(flavor, dir.path());
        let message = user_message(json!([{"type": "text", "text": "hi"}]));
        session.lock().unwrap().start_turn();
        assert!(play_turn(
            &session,
            &message,
            &default_turn("hi", dir.path()),
            &|| false
        ));
        assert!(!dir.path().join("index.html").exists());
        assert!(!kinds(&seen).contains(&"permission/preset".to_string()));
        let seen = seen.lock().unwrap();
        let result = seen.iter().find(|e| e["type"] == "tool/result").unwrap();
        let text = &result["data"]["message"]["content"][0]["content"][0]["text"];
        assert_eq!(text, "Error: unknown tool \"write\"");
    }

    #[test]
    fn the_old_persona_streams_chunks_and_has_no_file_tools() {
        let dir = tempfile::tempdir().unwrap();
        let flavor = Flavor {
            persona: Persona::V011,
            minimal: true,
        };
        let (seen, session) = recording(flavor, dir.path());
        let message = user_message(json!([{"type": "text", "text": "hi"}]));
        session.lock().unwrap().start_turn();
        play_turn(&session, &message, &default_turn("hi", dir.path()), &|| {
            false
        });
        assert!(kinds(&seen).contains(&"assistant/chunk".to_string()));
        assert!(!kinds(&seen).contains(&"system/message".to_string()));
        assert!(!dir.path().join("index.html").exists());
        let result = seen
            .lock()
            .unwrap()
            .iter()
            .find(|e| e["type"] == "tool/result")
            .cloned()
            .unwrap();
        assert_eq!(result["data"]["message"]["content"][0]["isError"], true);
    }

    #[test]
    fn an_error_turn_and_a_stopped_turn() {
        let dir = tempfile::tempdir().unwrap();
        let flavor = Flavor {
            persona: Persona::V015,
            minimal: false,
        };
        let (seen, session) = recording(flavor, dir.path());
        let message = user_message(json!([{"type": "text", "text": "x"}]));
        session.lock().unwrap().start_turn();
        let failing = TurnScript {
            end: EndKind::Error,
            ..TurnScript::default()
        };
        assert!(play_turn(&session, &message, &failing, &|| false));
        let last = seen.lock().unwrap().last().cloned().unwrap();
        assert_eq!(last["data"]["reason"]["kind"], "error");
        assert_eq!(last["data"]["reason"]["error"]["code"], "AUTH");
        let before = seen.lock().unwrap().len();
        session.lock().unwrap().start_turn();
        assert!(!play_turn(
            &session,
            &message,
            &default_turn("x", dir.path()),
            &|| true
        ));
        let after: Vec<String> = kinds(&seen)[before..].to_vec();
        assert_eq!(
            after,
            [
                "turn/start",
                "agent/inbox/spliced",
                "step/start",
                "user/message"
            ],
            "a stopped turn ends where it was: no answer, no turn/end"
        );
    }

    /// A frame of RLE blocks: each block `size` copies of `x`.
    fn rle_frame(blocks: usize, size: u32) -> Vec<u8> {
        let mut bytes = vec![0x28, 0xB5, 0x2F, 0xFD, 0x00, 7 << 3];
        for index in 0..blocks {
            let header = (size << 3) | (1 << 1) | u32::from(index + 1 == blocks);
            bytes.extend_from_slice(&header.to_le_bytes()[..3]);
            bytes.push(b'x');
        }
        bytes
    }

    /// A few KiB of RLE blocks cannot ask for gigabytes (issue 40 item 10): a block larger than
    /// the 128 KiB a zstd block may hold is refused, and so is a log that decodes past
    /// [`zstd_raw::MAX_DECODED`], each with an error that says so, before the memory is taken.
    #[test]
    fn a_session_log_that_would_decode_past_its_bound_is_refused() {
        let huge_block = zstd_raw::decode(&rle_frame(1, (1 << 21) - 1)).unwrap_err();
        assert!(huge_block.contains("over the 128 KiB"), "{huge_block}");
        let blocks = zstd_raw::MAX_DECODED / (128 << 10) + 1;
        let bomb = rle_frame(blocks, 128 << 10);
        assert!(bomb.len() < 4096, "{} bytes", bomb.len());
        let past = zstd_raw::decode(&bomb).unwrap_err();
        assert!(past.contains("decodes to more than 64 MiB"), "{past}");
        let within = zstd_raw::decode(&rle_frame(8, 128 << 10)).unwrap();
        assert_eq!(within.len(), 8 << 17);
    }

    #[test]
    fn zstd_raw_frames_round_trip_and_foreign_frames_are_refused() {
        let big = "x".repeat(300 * 1024);
        for text in ["", "{\"a\":1}\n", big.as_str()] {
            let mut bytes = zstd_raw::frame(text.as_bytes());
            bytes.extend(zstd_raw::frame(b"tail\n"));
            assert_eq!(zstd_raw::decode(&bytes).unwrap(), format!("{text}tail\n"));
        }
        assert!(zstd_raw::decode(b"not zstd").is_err());
        let mut compressed = zstd_raw::frame(b"abc");
        compressed[6] |= 0b100; // block type 2: compressed
        assert!(zstd_raw::decode(&compressed).is_err());
        let truncated = zstd_raw::frame(b"abcdef");
        assert!(zstd_raw::decode(&truncated[..truncated.len() - 2]).is_err());
    }

    #[test]
    fn a_session_a_previous_process_made_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let flavor = Flavor {
            persona: Persona::V015,
            minimal: true,
        };
        let sink = || -> Sink { Box::new(|_, _| {}) };
        Session::create("s-1", dir.path(), flavor, Some(dir.path()), sink()).unwrap();
        let refused = Session::create("s-1", dir.path(), flavor, Some(dir.path()), sink());
        assert_eq!(refused.err().unwrap(), "session \"s-1\" already exists");
        assert_eq!(cwd_slug(Path::new("/tmp/a/project")), "--tmp-a-project--");
    }
    /// A session stored by one process and resumed by another `initialize`d with another model
    /// (0.2.1 `sdk`, observed): the resumed turn's first request says `resume`, starts a new
    /// series under the new model with the system prompt replaced (naming the stored one's
    /// seq) and the model context recorded again; the turn after it repeats none of that.
    #[test]
    fn a_resumed_session_takes_the_new_model_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let (home, cwd) = (dir.path().join("sessions"), dir.path().join("project"));
        std::fs::create_dir_all(&cwd).unwrap();
        let flavor = Flavor {
            persona: Persona::V021,
            minimal: false,
        };
        let turn = |session: &Mutex<Session>, text: &str| {
            let message = user_message(json!([{"type": "text", "text": text}]));
            session.lock().unwrap().start_turn();
            let script = TurnScript {
                steps: vec![StepScript {
                    text: Some("ok".into()),
                    ..Default::default()
                }],
                ..Default::default()
            };
            assert!(play_turn(session, &message, &script, &|| false));
        };
        let first = Session::create("s-1", &cwd, flavor, Some(&home), Box::new(|_, _| {}));
        let first = Mutex::new(first.unwrap());
        turn(&first, "one");
        let system_seq = first.lock().unwrap().system_seq.unwrap();
        drop(first);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let copy = seen.clone();
        let sink: Sink = Box::new(move |_, event| copy.lock().unwrap().push(event.clone()));
        let mut resumed = Session::resume("s-1", flavor, Some(&home), sink).unwrap();
        resumed.config.model = "deepseek-pro".into();
        let resumed = Mutex::new(resumed);
        turn(&resumed, "two");
        let events = std::mem::take(&mut *seen.lock().unwrap());
        let of = |kind: &str| events.iter().find(|e| e["type"] == kind).cloned().unwrap();
        let header = of("request/header");
        assert_eq!(header["data"]["reason"], "resume");
        assert_eq!(header["data"]["startsSeries"], true);
        assert_eq!(header["data"]["header"]["config"]["model"], "deepseek-pro");
        assert_eq!(of("request/context")["data"]["model"], "deepseek-pro");
        let system = of("system/message");
        assert_eq!(system["sourceEventSeqs"], json!([system_seq]));
        assert_eq!(system["surfaceOp"]["op"], "replace");
        let message = of("assistant/message");
        let source = &message["data"]["message"]["source"];
        assert_eq!(source["model"], "deepseek-pro");
        assert_eq!(source["replayState"]["response"]["model"], "deepseek-pro");
        turn(&resumed, "three");
        let later = kinds(&seen);
        for kind in ["system/message", "request/header", "request/context"] {
            assert!(!later.contains(&kind.to_string()), "{kind} in {later:?}");
        }
    }
}
