//! `dsh-conformance check-runtime --surface sdk|sdk-minimal|jsonrpc-agent|headless --dsh PATH`:
//! judges an SDK runtime (the real one, or fake-dsh) on the behaviours docs/surface-sdk.md and
//! docs/surface-headless.md record, driving it as a client would, against a scripted model on
//! loopback (the kit's own `model-server` command, started as a subprocess). Also the wire
//! driver the SDK differential test uses: [`drive`] runs client [`Step`]s and returns what the
//! runtime showed as [`Wire`].

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub use dsh_engine::surface::Surface;

/// The surfaces these checks judge (open-design is the crate root's).
pub const SURFACES: [Surface; 4] = [
    Surface::Sdk,
    Surface::SdkMinimal,
    Surface::JsonrpcAgent,
    Surface::Headless,
];

/// The runtime's arguments for the JSON-RPC surfaces: `DSH --profile sdk`, `DSH --profile
/// sdk-minimal`; `DSH` itself for the 0.1.1 `dsh-jsonrpc-agent` (its config preset), and headless
/// takes its own (`DSH --profile headless --patch NO-TITLE TASK`).
pub fn surface_args(surface: Surface) -> &'static [&'static str] {
    match surface {
        Surface::Sdk => &["--profile", "sdk"],
        Surface::SdkMinimal => &["--profile", "sdk-minimal"],
        Surface::OpenDesign | Surface::JsonrpcAgent | Surface::Headless | Surface::Acp => &[],
    }
}

/// `dsh-conformance model-server` as a subprocess on loopback, stopped and reaped on drop.
pub struct ModelServer {
    child: Child,
    pub url: String,
    /// Its request log (`--log`): one JSON line per request, written when the request is
    /// answered (before the reply streams).
    pub log: PathBuf,
}

impl ModelServer {
    /// Starts `conformance model-server` with `script` (none: the default script) in `dir`.
    pub fn start(conformance: &Path, script: Option<&Value>, dir: &Path) -> Result<Self, String> {
        let url_file = dir.join("model-url");
        let log = dir.join("model-log.jsonl");
        let mut command = Command::new(conformance);
        command.arg("model-server").arg("--url-file").arg(&url_file);
        command.arg("--log").arg(&log);
        if let Some(script) = script {
            let file = dir.join("model-script.json");
            std::fs::write(&file, script.to_string()).map_err(|e| e.to_string())?;
            command.arg("--script").arg(file);
        }
        command.stdout(Stdio::null()).stderr(Stdio::null());
        // Owned: check-runtime is a subreaper, and a child it did not start on purpose is an
        // orphan the runtime left behind.
        let child = dsh_engine::process::spawn_owned(&mut command)
            .map_err(|e| format!("cannot start {} model-server: {e}", conformance.display()))?;
        let mut server = ModelServer {
            child,
            url: String::new(),
            log,
        };
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(20) {
            let url = std::fs::read_to_string(&url_file).unwrap_or_default();
            if url.trim().starts_with("http://127.0.0.1:") {
                server.url = url.trim().to_string();
                return Ok(server);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err("the model server did not say its URL within 20 s".into())
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        dsh_engine::process::disown(self.child.id() as i32);
    }
}

/// A throwaway world for one run: `project/` (cwd), `dsh-home/`, `home/`, `tmp/`.
pub struct World {
    pub root: tempfile::TempDir,
}

impl World {
    pub fn new() -> Result<World, String> {
        let root = tempfile::tempdir().map_err(|e| e.to_string())?;
        for dir in ["project", "dsh-home", "home", "tmp"] {
            std::fs::create_dir_all(root.path().join(dir)).map_err(|e| e.to_string())?;
        }
        Ok(World { root })
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    /// `program args` in this world: a clean environment that reaches only `model`, with a dummy
    /// key, in its own process group.
    pub fn command(&self, program: &Path, args: &[String], model: &str) -> Command {
        let mut command = Command::new(program);
        command
            .args(args)
            .current_dir(self.path("project"))
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("DSH_HOME", self.path("dsh-home"))
            .env("HOME", self.path("home"))
            .env("TMPDIR", self.path("tmp"))
            .env("DEEPSEEK_BASE_URL", model)
            .env("DEEPSEEK_API_KEY", "keyless-dummy")
            .process_group(0);
        // The 0.1.1 binary's config path, and the release fake-dsh plays (`check-runtime
        // --persona`), when the caller names them.
        for name in ["DSH_CORDIS_CONFIG", dsh_engine::surface::Persona::ENV] {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        command
    }

    /// The project's top-level names.
    pub fn project_files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.path("project"))
            .map(|dir| {
                dir.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// The `--patch` overlay the 0.1.5rc1 wheel's headless profile needs to boot
    /// (docs/surface-headless.md): the title-LLM row disabled.
    pub fn no_title_patch(&self) -> Result<PathBuf, String> {
        let patch = self.path("no-title.yml");
        std::fs::write(&patch, "- id: session-title-llm\n  disabled: true\n")
            .map_err(|e| e.to_string())?;
        Ok(patch)
    }
}

/// What a client does, in order.
#[derive(Clone, Debug)]
pub enum Step {
    Send(Value),
    /// Write these bytes to stdin as they are (a headless task piped in).
    Text(String),
    /// Wait for the response to this id.
    Response(Value),
    /// Wait until this session reports `idle`.
    Idle(&'static str),
    /// Wait until a `session.event` of this type arrives.
    Event(&'static str),
    /// Send this request with every `<session>` in it replaced by the session id the last
    /// response naming one gave (`sessionId`, or the first of `sessions`): an ACP agent mints
    /// its session ids.
    SendToSession(Value),
    /// Wait until a request of the runtime's own with this method arrives (ACP's
    /// `session/request_permission`).
    Method(&'static str),
    /// Wait until the model server's log (its path) holds this many requests that offer tools:
    /// turn requests, not the headless profile's title request.
    ModelRequests(PathBuf, usize),
    /// Wait until the runtime has stored this session in the world's Harness home (a non-empty
    /// `session.*` log in `dsh-home/sessions/<cwd slug>/<id>/`): the real runtime writes it some
    /// time after the turn's `idle`, later on a busy machine, and a run that ends before then
    /// leaves no session for the next process to find.
    Stored(&'static str),
    /// Wait this long (for a runtime with nothing to wait on, such as fake-dsh in the middle of
    /// a long scripted pause).
    Pause(Duration),
    Signal(nix::sys::signal::Signal),
    Eof,
}

/// Everything one run showed.
#[derive(Debug, PartialEq)]
pub struct Wire {
    pub frames: Vec<Value>,
    /// Lines that were not JSON.
    pub junk: usize,
    pub exit: Option<i32>,
    /// stdout as written (the first 64 MiB).
    pub stdout: String,
    pub stderr: String,
    pub files: Vec<String>,
}

/// The placeholder [`Step::SendToSession`] replaces with the session id.
pub const SESSION_PLACEHOLDER: &str = "<session>";

/// The most of a runtime's raw stdout a [`Wire`] keeps.
const RAW_STDOUT_BOUND: usize = 64 << 20;

/// Runs the client `steps` against `command`; the process is killed (its group) after `limit`.
/// Stdin stays open until the process ends unless a [`Step::Eof`] closes it.
pub fn drive(
    mut command: Command,
    steps: &[Step],
    world: &World,
    limit: Duration,
) -> Result<Wire, String> {
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let interpreter = script_interpreter(Path::new(command.get_program()));
    let mut child = dsh_engine::process::spawn_owned(&mut command)
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let (lines, received) = mpsc::channel::<String>();
    let stdout = child.stdout.take().ok_or("no stdout")?;
    // Lines as they come, and the raw stream (the headless surface's answer), bounded.
    let reader = std::thread::spawn(move || {
        let mut raw = Vec::new();
        let mut stdout = BufReader::new(stdout);
        loop {
            let mut line = Vec::new();
            match stdout.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return raw,
                Ok(_) => {}
            }
            if raw.len() < RAW_STDOUT_BOUND {
                raw.extend_from_slice(&line);
            }
            let text = String::from_utf8_lossy(&line);
            let _ = lines.send(text.strip_suffix('\n').unwrap_or(&text).to_string());
        }
    });
    let mut stderr = child.stderr.take().ok_or("no stderr")?;
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        text
    });
    let deadline = Instant::now() + limit;
    let mut stdin = child.stdin.take();
    let mut seen: Vec<String> = Vec::new();
    for step in steps {
        let wait = |seen: &mut Vec<String>, done: &dyn Fn(&Value) -> bool| {
            let left = || deadline.saturating_duration_since(Instant::now());
            while let Ok(line) = received.recv_timeout(left()) {
                let value: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
                seen.push(line);
                if done(&value) {
                    return;
                }
            }
        };
        match step {
            Step::Send(request) => {
                if let Some(stdin) = stdin.as_mut() {
                    let _ = stdin.write_all(format!("{request}\n").as_bytes());
                }
            }
            Step::Text(text) => {
                if let Some(stdin) = stdin.as_mut() {
                    let _ = stdin.write_all(text.as_bytes());
                }
            }
            Step::Response(id) => wait(&mut seen, &|v| &v["id"] == id && v.get("method").is_none()),
            Step::Idle(session) => wait(&mut seen, &|v| {
                v["method"] == "session.status"
                    && v["params"]["sessionId"] == *session
                    && v["params"]["status"] == "idle"
            }),
            Step::Event(kind) => wait(&mut seen, &|v| v["params"]["event"]["type"] == *kind),
            Step::SendToSession(request) => {
                let session = seen
                    .iter()
                    .rev()
                    .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                    .find_map(|v| {
                        let result = &v["result"];
                        let id = result["sessionId"].as_str();
                        id.or(result["sessions"][0]["sessionId"].as_str())
                            .map(str::to_string)
                    })
                    .unwrap_or_default();
                let request = request.to_string().replace(SESSION_PLACEHOLDER, &session);
                if let Some(stdin) = stdin.as_mut() {
                    let _ = stdin.write_all(format!("{request}\n").as_bytes());
                }
            }
            Step::Method(method) => wait(&mut seen, &|v| {
                v["method"] == *method && v.get("id").is_some()
            }),
            Step::Signal(signal) => {
                if let Some(interpreter) = &interpreter {
                    wait_exec(child.id(), interpreter, deadline);
                }
                let _ =
                    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), *signal);
            }
            Step::ModelRequests(log, count) => wait_model_requests(log, *count, deadline),
            Step::Stored(session) => {
                wait_stored(&world.path("dsh-home/sessions"), session, deadline)
            }
            Step::Pause(pause) => std::thread::sleep(*pause),
            Step::Eof => drop(stdin.take()),
        }
    }
    let exit = wait_exit(&mut child, deadline);
    drop(stdin);
    // What the runtime left running holds its pipes: killed (and noted) before they are read to
    // their end.
    tear_down(&child);
    let raw = reader.join().unwrap_or_default();
    seen.extend(received.try_iter());
    let junk = seen
        .iter()
        .filter(|l| serde_json::from_str::<Value>(l).is_err())
        .count();
    Ok(Wire {
        frames: seen
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect(),
        junk,
        exit,
        stdout: String::from_utf8_lossy(&raw).into_owned(),
        stderr: errors.join().unwrap_or_default(),
        files: world.project_files(),
    })
}

/// Waits (until `deadline`) for `log` to hold `count` requests offering tools.
fn wait_model_requests(log: &Path, count: usize, deadline: Instant) {
    let offered = || {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .filter(|line| line.contains("\"tools\":"))
            .count()
    };
    while offered() < count && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The interpreter of `program` (a path, or a name on `PATH`) when it is a script (`#!` and a
/// path): the real runtimes' installs are shell wrappers that `exec` the runtime.
fn script_interpreter(program: &Path) -> Option<PathBuf> {
    let program = if program.components().count() > 1 {
        program.to_path_buf()
    } else {
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|dir| dir.join(program))
            .find(|path| path.is_file())?
    };
    let mut head = [0u8; 256];
    let read = std::io::Read::read(&mut std::fs::File::open(program).ok()?, &mut head).ok()?;
    let line = head[..read]
        .strip_prefix(b"#!")?
        .split(|b| *b == b'\n')
        .next()?;
    let path = String::from_utf8_lossy(line)
        .split_whitespace()
        .next()?
        .to_string();
    std::fs::canonicalize(path).ok()
}

/// Waits until process `pid` no longer runs `interpreter` (it has exec'd the program its script
/// starts), or `deadline`: a signal meant for the runtime must not reach its wrapper script,
/// which catches SIGINT while it runs (dash) and may then exec the runtime with the signal lost.
fn wait_exec(pid: u32, interpreter: &Path, deadline: Instant) {
    let exe = format!("/proc/{pid}/exe");
    while std::fs::canonicalize(&exe).is_ok_and(|running| running == interpreter)
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until `sessions/<cwd slug>/<session>/` holds a non-empty `session.*` log, or `deadline`.
fn wait_stored(sessions: &Path, session: &str, deadline: Instant) {
    let stored = || {
        let slugs = std::fs::read_dir(sessions).into_iter().flatten().flatten();
        slugs.into_iter().any(|slug| {
            let logs = std::fs::read_dir(slug.path().join(session));
            logs.into_iter().flatten().flatten().any(|log| {
                log.file_name().to_string_lossy().starts_with("session.")
                    && log.metadata().is_ok_and(|meta| meta.len() > 0)
            })
        })
    };
    while !stored() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What runs of the runtime left behind so far (`pid N (command)`, killed), emptied: for a
/// process-hygiene check of another surface's (ACP's).
pub fn take_left_behind() -> Vec<String> {
    std::mem::take(&mut *LEFT_BEHIND.lock().unwrap_or_else(|p| p.into_inner()))
}

/// The processes runs of the runtime left behind so far (`pid N (command)`), for the
/// `*.process-hygiene` check.
static LEFT_BEHIND: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// How long what a runtime started may take to exit on its own once the runtime has exited.
const TEARDOWN_GRACE: Duration = Duration::from_secs(2);

/// After the runtime (`child`, already reaped) exited: check-runtime is a child subreaper
/// (`dsh_engine::process`), so whatever the runtime left running (a daemon that called `setsid`,
/// whatever its group or environment) was re-parented here. It gets [`TEARDOWN_GRACE`] to exit,
/// then is killed and reaped, and noted in [`LEFT_BEHIND`]; the runtime's group is killed too.
fn tear_down(child: &Child) {
    let group = nix::unistd::Pid::from_raw(child.id() as i32);
    let deadline = Instant::now() + TEARDOWN_GRACE;
    while Instant::now() < deadline
        && (!dsh_engine::process::adopted().is_empty()
            || nix::sys::signal::killpg(group, None).is_ok())
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
    let killed = dsh_engine::process::kill_adopted(Duration::from_secs(2), |_| false);
    dsh_engine::process::disown(child.id() as i32);
    if !killed.is_empty() {
        LEFT_BEHIND
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(killed.iter().map(ToString::to_string));
    }
}

/// The exit code (128 + n for a signal), or `None` after killing the group at the deadline.
fn wait_exit(child: &mut Child, deadline: Instant) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return status.code().or_else(|| status.signal().map(|s| 128 + s));
        }
        if Instant::now() > deadline {
            let group = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Each frame's shape: what a client keys on, without times, seqs, uuids or payloads.
/// Consecutive `assistant/chunk`s of one chunk type are one shape (their count follows the model
/// server's chunking, not the runtime).
pub fn shapes(frames: &[Value]) -> Vec<String> {
    let mut shapes: Vec<String> = Vec::new();
    for frame in frames {
        let shape = shape(frame);
        if shape.contains(" assistant/chunk ") && shapes.last() == Some(&shape) {
            continue;
        }
        shapes.push(shape);
    }
    shapes
}

fn shape(v: &Value) -> String {
    let params = &v["params"];
    // A child session's id is a fresh UUID on every run.
    let text = |value: &Value| crate::members::replace_uuids(value.as_str().unwrap_or("?"));
    match v["method"].as_str() {
        Some("session.event") => {
            let event = &params["event"];
            let data = &event["data"];
            let detail = match event["type"].as_str() {
                Some("turn/end") => format!(" {}", data["reason"]["kind"]),
                Some("assistant/chunk") => format!(" {}", data["chunk"]["type"]),
                // 0.1.5 flags the error on the content block; 0.2.1's tool message
                // (`role: "tool"`) carries `isError` on the message itself.
                Some("tool/result") => {
                    let message = &data["message"];
                    let error = message["content"][0]["isError"] == true
                        || (message["role"] == "tool" && message["isError"] == true);
                    format!(" error={error}")
                }
                _ => String::new(),
            };
            format!(
                "event {} {}{detail}",
                text(&params["sessionId"]),
                text(&event["type"])
            )
        }
        Some("session.status") => format!(
            "status {} {}",
            text(&params["sessionId"]),
            text(&params["status"])
        ),
        Some(method) => format!("notify {method}"),
        None if v.get("error").is_some() => {
            format!(
                "error id={} {} {}",
                v["id"], v["error"]["code"], v["error"]["message"]
            )
        }
        None => {
            let mut keys: Vec<&String> = v["result"]
                .as_object()
                .map(|o| o.keys().collect())
                .unwrap_or_default();
            keys.sort();
            format!("response id={} {keys:?}", v["id"])
        }
    }
}

/// A JSON-RPC request.
pub fn request(id: Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// The `initialize` request (id 1).
pub fn initialize() -> Value {
    request(
        json!(1),
        "initialize",
        json!({"cwd": ".", "provider": "deepseek-official", "model": "deepseek-flash"}),
    )
}

/// A text prompt.
pub fn prompt(id: u64, session: &str, text: &str) -> Value {
    request(
        json!(id),
        "session/prompt",
        json!({"sessionId": session, "contentBlocks": [{"type": "text", "text": text}]}),
    )
}

/// What the checks need.
pub struct Target {
    pub dsh: PathBuf,
    /// One of [`SURFACES`].
    pub surface: Surface,
    /// `dsh-conformance` itself (for `model-server`).
    pub conformance: PathBuf,
    /// The longest one run of the runtime may take (60 s, scaled by `--time-scale`).
    pub limit: Duration,
}

/// One check: its id, the docs/surface-sdk.md (or surface-headless.md) section it traces to, and
/// its body.
pub struct Check {
    pub id: &'static str,
    pub rule: &'static str,
    pub run: fn(&Target) -> Result<(), String>,
}

/// A scripted model conversation: what the model server plays for a real runtime, and the same
/// turn as a fake-dsh scenario (`FAKE_DSH_SCENARIO`, which a real runtime ignores).
struct Script {
    model: Option<Value>,
    fake: Option<Value>,
}

const DEFAULT: Script = Script {
    model: None,
    fake: None,
};

impl World {
    /// Points `FAKE_DSH_SCENARIO` at the script's fake-dsh side.
    fn scripted(&self, command: &mut Command, script: &Script) -> Result<(), String> {
        if let Some(scenario) = &script.fake {
            let file = self.path("scenario.json");
            std::fs::write(&file, scenario.to_string()).map_err(|e| e.to_string())?;
            command.env("FAKE_DSH_SCENARIO", file);
        }
        Ok(())
    }
}

/// A fresh world, the model server playing `script`, and the runtime's command in that world
/// (its arguments from `args`) with the script's fake-dsh side.
fn staged(
    target: &Target,
    script: &Script,
    args: impl FnOnce(&World) -> Result<Vec<String>, String>,
) -> Result<(World, ModelServer, Command), String> {
    let world = World::new()?;
    let server = ModelServer::start(
        &target.conformance,
        script.model.as_ref(),
        world.root.path(),
    )?;
    let mut command = world.command(&target.dsh, &args(&world)?, &server.url);
    world.scripted(&mut command, script)?;
    Ok((world, server, command))
}

/// Runs the JSON-RPC surface with `script` through `steps`.
fn rpc(target: &Target, script: &Script, steps: &[Step]) -> Result<Wire, String> {
    let surface_args = |_: &World| {
        Ok(surface_args(target.surface)
            .iter()
            .map(|a| a.to_string())
            .collect())
    };
    let (world, _server, command) = staged(target, script, surface_args)?;
    drive(command, steps, &world, target.limit)
}

fn expect(ok: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(why())
    }
}

/// `initialize`, its response, then prompt 2 on session `s-1`, followed by `then`.
fn one_prompt(text: &str, then: &[Step]) -> Vec<Step> {
    let mut steps = vec![
        Step::Send(initialize()),
        Step::Response(json!(1)),
        Step::Send(prompt(2, "s-1", text)),
    ];
    steps.extend_from_slice(then);
    steps
}

fn conversation(target: &Target) -> Result<(), String> {
    let steps = one_prompt(
        "Make a landing page",
        &[
            Step::Idle("s-1"),
            Step::Send(request(json!("x"), "bogus/method", json!({}))),
            Step::Response(json!("x")),
            Step::Send(request(json!(4), "shutdown", json!({}))),
        ],
    );
    let wire = rpc(target, &DEFAULT, &steps)?;
    let shapes = shapes(&wire.frames);
    let at = |wanted: &str| shapes.iter().position(|s| s.starts_with(wanted));
    let show = || format!("{shapes:#?}");
    let info = wire
        .frames
        .iter()
        .find(|f| f["id"] == 1)
        .map(|f| f["result"]["serverInfo"]["name"].clone());
    expect(info == Some(json!("deepseek-harness-sdk-runtime")), || {
        format!("initialize: {info:?}")
    })?;
    let (Some(receipt), Some(running), Some(response), Some(end), Some(idle)) = (
        at("event s-1 agent/inbox/spliced"),
        at("status s-1 running"),
        at("response id=2"),
        at("event s-1 turn/end \"completed\""),
        at("status s-1 idle"),
    ) else {
        return Err(format!(
            "missing receipt, running, response, turn/end or idle: {}",
            show()
        ));
    };
    expect(receipt < response && running < response, || {
        format!("receipt and running come before the response: {}", show())
    })?;
    expect(response < end && end < idle, || {
        format!("the turn ends, then idle: {}", show())
    })?;
    expect(
        at("error id=\"x\" -32603 \"unknown DeepSeek Harness SDK runtime method: bogus/method\"")
            .is_some(),
        || format!("an unknown method is -32603 naming it: {}", show()),
    )?;
    expect(
        shapes
            .last()
            .is_some_and(|s| s.starts_with("response id=4")),
        || format!("shutdown's response is last: {}", show()),
    )?;
    expect(wire.exit == Some(0), || {
        format!("shutdown exits 0, not {:?}", wire.exit)
    })?;
    expect(wire.junk == 0, || {
        format!("{} stdout lines were not JSON", wire.junk)
    })
}

fn dropped_input(target: &Target) -> Result<(), String> {
    let bogus = |id: Value| request(id, "bogus", json!({}));
    let wire = rpc(
        target,
        &DEFAULT,
        &[
            Step::Send(json!("junk")),
            Step::Send(json!([bogus(json!(7))])),
            Step::Send(bogus(Value::Null)),
            Step::Send(json!({"jsonrpc": "2.0", "method": "bogus"})),
            Step::Send(bogus(json!(1))),
            Step::Response(json!(1)),
            Step::Eof,
        ],
    )?;
    let ids: Vec<&Value> = wire.frames.iter().map(|f| &f["id"]).collect();
    expect(ids == [&json!(1)], || {
        format!("only id 1 is answered, got {ids:?}")
    })?;
    expect(wire.exit == Some(0), || {
        format!("stdin EOF exits 0, not {:?}", wire.exit)
    })
}

fn signal_exit(target: &Target, signal: nix::sys::signal::Signal, code: i32) -> Result<(), String> {
    let slow = Script {
        model: Some(
            json!({"replies": [{"text": "slow", "chunk_chars": 1, "drip_ms": 500, "reuse": true}]}),
        ),
        fake: Some(json!({"sdk": {"turns": [{"steps": [{"delay_ms": 30000, "text": "slow"}]}]}})),
    };
    let steps = one_prompt(
        "hello",
        &[Step::Event("request/context"), Step::Signal(signal)],
    );
    let wire = rpc(target, &slow, &steps)?;
    let ended = shapes(&wire.frames).iter().any(|s| s.contains("turn/end"));
    expect(!ended, || {
        "a turn cut by the signal has no turn/end".to_string()
    })?;
    expect(wire.exit == Some(code), || {
        format!("{signal}: exit {:?}, not {code}", wire.exit)
    })
}

fn sigterm(target: &Target) -> Result<(), String> {
    signal_exit(target, nix::sys::signal::Signal::SIGTERM, 0)
}

fn sigint(target: &Target) -> Result<(), String> {
    signal_exit(target, nix::sys::signal::Signal::SIGINT, 130)
}

/// What a headless run showed: exit, stdout, stderr, the project's files.
type HeadlessRun = (Option<i32>, String, String, Vec<String>);

/// `headless TASK` with `script`.
fn headless_run(target: &Target, script: &Script, task: &[&str]) -> Result<HeadlessRun, String> {
    let headless_args = |world: &World| {
        let mut args = vec!["--profile".to_string(), "headless".into(), "--patch".into()];
        args.push(world.no_title_patch()?.to_string_lossy().into_owned());
        args.extend(task.iter().map(|t| t.to_string()));
        Ok(args)
    };
    let (world, _server, command) = staged(target, script, headless_args)?;
    let wire = drive(command, &[Step::Eof], &world, target.limit)?;
    Ok((wire.exit, wire.stdout, wire.stderr, world.project_files()))
}

fn headless_completed(target: &Target) -> Result<(), String> {
    let (exit, stdout, _, files) = headless_run(target, &DEFAULT, &["Make a landing page"])?;
    expect(exit == Some(0), || {
        format!("a completed turn exits 0, not {exit:?}")
    })?;
    expect(stdout == "I wrote index.html.\n", || {
        format!("stdout is the final text and a newline: {stdout:?}")
    })?;
    expect(files.contains(&"index.html".to_string()), || {
        format!("the write tool wrote index.html: {files:?}")
    })
}

fn headless_failed(target: &Target) -> Result<(), String> {
    let failing = Script {
        model: Some(json!({"replies": [{"status": 401, "reuse": true}]})),
        fake: Some(json!({"sdk": {"turns": [{"end": "error",
            "error": {"code": "AUTH", "message": "model-server: scripted HTTP 401"}}]}})),
    };
    let (exit, stdout, stderr, _) = headless_run(target, &failing, &["say hi"])?;
    expect(exit == Some(1), || {
        format!("a failed turn exits 1, not {exit:?}")
    })?;
    expect(stdout.trim().is_empty(), || {
        format!("no final text on stdout: {stdout:?}")
    })?;
    let last = stderr.lines().last().unwrap_or_default();
    expect(last.starts_with("dsh: AUTH: "), || {
        format!("stderr ends with `dsh: AUTH: ...`: {last:?}")
    })
}

/// Nothing a run of the runtime started outlives it: one run of its own (a completed turn, then
/// `shutdown` and EOF on the JSON-RPC surfaces), then every process any run of this command left
/// running after the runtime exited (killed by then: [`tear_down`]).
fn process_hygiene(target: &Target) -> Result<(), String> {
    if target.surface == Surface::Headless {
        headless_run(target, &DEFAULT, &["Make a landing page"])?;
    } else {
        let steps = one_prompt(
            "Make a landing page",
            &[
                Step::Idle("s-1"),
                Step::Send(request(json!(3), "shutdown", json!({}))),
                Step::Response(json!(3)),
                Step::Eof,
            ],
        );
        rpc(target, &DEFAULT, &steps)?;
    }
    let left = take_left_behind();
    expect(left.is_empty(), || {
        format!(
            "processes the runtime started were still running after it exited (killed): {}",
            left.join(", ")
        )
    })
}

/// The checks of a surface.
pub fn checks(surface: Surface) -> Vec<Check> {
    if surface == Surface::Headless {
        return vec![
            Check {
                id: "headless.completed",
                rule: "headless: completed turn",
                run: headless_completed,
            },
            Check {
                id: "headless.failed-turn",
                rule: "headless: failed turn",
                run: headless_failed,
            },
            // Last: it also judges what the runs of the checks before it left.
            Check {
                id: "headless.process-hygiene",
                rule: "headless: process lifecycle",
                run: process_hygiene,
            },
        ];
    }
    vec![
        Check {
            id: "sdk.conversation",
            rule: "Methods; Notifications",
            run: conversation,
        },
        Check {
            id: "sdk.dropped-input",
            rule: "Framing",
            run: dropped_input,
        },
        Check {
            id: "sdk.sigterm",
            rule: "Process lifecycle",
            run: sigterm,
        },
        Check {
            id: "sdk.sigint",
            rule: "Process lifecycle",
            run: sigint,
        },
        // Last: it also judges what the runs of the checks before it left.
        Check {
            id: "sdk.process-hygiene",
            rule: "Process lifecycle",
            run: process_hygiene,
        },
    ]
}

/// One check's outcome: `Err` with what failed.
pub struct CheckResult {
    pub id: &'static str,
    pub rule: &'static str,
    pub outcome: Result<(), String>,
}

/// Runs the checks of `target.surface` whose id `selected` accepts, in order, handing each
/// outcome to `on_check` as it comes (the command line prints it).
pub fn run(
    target: &Target,
    selected: &dyn Fn(&str) -> bool,
    on_check: &mut dyn FnMut(&CheckResult),
) -> Vec<CheckResult> {
    let mut results = Vec::new();
    for check in checks(target.surface) {
        if !selected(check.id) {
            continue;
        }
        let result = CheckResult {
            id: check.id,
            rule: check.rule,
            outcome: (check.run)(target),
        };
        on_check(&result);
        results.push(result);
    }
    results
}

/// The JSON report of a run (`--format json`; the same shape `jsonl` splits into lines).
pub fn report_json(target: &Target, results: &[CheckResult]) -> Value {
    let checks: Vec<Value> = results
        .iter()
        .map(|result| {
            json!({
                "id": result.id,
                "rule": result.rule,
                "status": if result.outcome.is_ok() { "pass" } else { "fail" },
                "detail": result.outcome.as_ref().err(),
            })
        })
        .collect();
    let failed = results.iter().filter(|r| r.outcome.is_err()).count();
    json!({
        "v": 1,
        "runtime": target.dsh.to_string_lossy(),
        "surface": target.surface.name(),
        "checks": checks,
        "totals": {"pass": results.len() - failed, "fail": failed},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wrapper script's interpreter is found, and a signal step waits until the script has
    /// exec'd what it starts.
    #[test]
    fn a_signal_waits_for_the_wrapper_script_to_exec_the_runtime() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("dsh");
        std::fs::write(&script, "#!/bin/sh\nexec cat\n").unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let shell = std::fs::canonicalize("/bin/sh").unwrap();
        assert_eq!(
            script_interpreter(&script).as_deref(),
            Some(shell.as_path())
        );
        let cat = std::fs::canonicalize("/bin/cat").unwrap();
        assert_eq!(
            script_interpreter(Path::new("cat")),
            None,
            "a binary is no script"
        );
        let mut child = Command::new(&script).stdin(Stdio::piped()).spawn().unwrap();
        wait_exec(child.id(), &shell, Instant::now() + Duration::from_secs(60));
        let running = std::fs::canonicalize(format!("/proc/{}/exe", child.id()));
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(running.unwrap(), cat);
    }
}
