//! `dsh-conformance model-server`: a scripted, loopback-only, OpenAI-compatible chat-completions
//! endpoint that streams DeepSeek-style server-sent events, so a real dsh runs keylessly and
//! deterministically (`DEEPSEEK_BASE_URL=<url>`, any `DEEPSEEK_API_KEY`).
//!
//! - [`script`]: which reply each request gets (text, reasoning, tool calls, usage, faults).
//! - [`sse`]: a reply as `chat.completion.chunk` events.
//! - [`http`]: the small HTTP/1.1 layer on tokio.
//!
//! It binds 127.0.0.1 only (port 0 unless told), answers `POST <any prefix>/chat/completions`
//! (the real dsh posts to `$DEEPSEEK_BASE_URL/chat/completions`, no `/v1`; a `/v1` prefix works
//! too) and `GET .../models`, and logs every request as one JSON line: its number, method, path,
//! whether it carried an `Authorization` header (never its value), the body, and the reply given.
//! [`ModelServer`] runs it on its own thread for in-process users such as `check-runtime`.

pub mod http;
pub mod script;
pub mod sse;

use script::{Reply, Script};
use serde_json::{json, Value};
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::BufReader;
use tokio::net::TcpStream;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The script of replies (JSON, see docs/runtime-checks.md); without it, the default script
    /// (`default_script`): a `write` of index.html, then a short final text.
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// The port on 127.0.0.1 (0: any free one).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Also write the base URL (and a newline) to this file once the server listens.
    #[arg(long, value_name = "FILE")]
    pub url_file: Option<PathBuf>,
    /// Append one JSON line per request received to this file.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
}

/// The page the default script writes.
pub const DEFAULT_HTML: &str = "<!doctype html>\n<html><head><title>Model server page</title>\
</head><body><h1>Written through the model server</h1></body></html>\n";

/// The page after an edit asked for with "green" (check-runtime's cold-resume turn).
pub const GREEN_HTML: &str = "<!doctype html>\n<html><head><title>Model server page</title>\
</head><body style=\"background:green\"><h1>Written through the model server</h1></body></html>\n";

/// The default script: write index.html (when the turn asks for "green": read it, then write a
/// green one), then say so; a request without tools (a session title) gets a short title.
pub fn default_script() -> Script {
    Script::write_edit_finish(
        "index.html",
        DEFAULT_HTML,
        Some(("green", GREEN_HTML)),
        "I wrote index.html.",
    )
}

/// The CLI: serve until SIGINT or SIGTERM; exit 2 when the script or a file is unusable.
pub fn main(args: Args) -> ExitCode {
    match serve(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("dsh-conformance model-server: {message}");
            ExitCode::from(2)
        }
    }
}

fn serve(args: &Args) -> Result<(), String> {
    use nix::sys::signal::{SigSet, Signal};
    let script = match &args.script {
        None => default_script(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read script {}: {e}", path.display()))?;
            Script::parse(&text).map_err(|e| format!("script {}: {e}", path.display()))?
        }
    };
    let log = match &args.log {
        None => None,
        Some(path) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("cannot open log {}: {e}", path.display()))?,
        ),
    };
    // Block the stop signals before any thread starts, so only the wait below receives them.
    let mut stop = SigSet::empty();
    stop.add(Signal::SIGINT);
    stop.add(Signal::SIGTERM);
    stop.thread_block()
        .map_err(|e| format!("cannot block signals: {e}"))?;
    let server = ModelServer::start_with(script, log, args.port)
        .map_err(|e| format!("cannot listen on 127.0.0.1:{}: {e}", args.port))?;
    if let Some(path) = &args.url_file {
        std::fs::write(path, format!("{}\n", server.url()))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    println!("{}", server.url());
    std::io::stdout().flush().ok();
    stop.wait()
        .map_err(|e| format!("waiting for a signal: {e}"))?;
    drop(server);
    Ok(())
}

/// The mutable state every connection shares.
struct State {
    script: Script,
    used: Vec<bool>,
    requests: u64,
    log: Vec<Value>,
    log_file: Option<std::fs::File>,
}

/// A running model server; dropping it stops it.
pub struct ModelServer {
    url: String,
    state: Arc<Mutex<State>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ModelServer {
    /// Starts serving `script` on 127.0.0.1 at any free port.
    pub fn start(script: Script) -> std::io::Result<ModelServer> {
        ModelServer::start_with(script, None, 0)
    }

    /// Starts serving `script` on 127.0.0.1:`port`, logging to `log_file` too.
    pub fn start_with(
        script: Script,
        log_file: Option<std::fs::File>,
        port: u16,
    ) -> std::io::Result<ModelServer> {
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))?;
        listener.set_nonblocking(true)?;
        let url = format!("http://{}", listener.local_addr()?);
        let state = Arc::new(Mutex::new(State {
            used: vec![false; script.replies.len()],
            script,
            requests: 0,
            log: Vec::new(),
            log_file,
        }));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let shared = Arc::clone(&state);
        let thread = std::thread::Builder::new()
            .name("model-server".into())
            .spawn(move || runtime.block_on(accept_loop(listener, shared, stopped)))?;
        Ok(ModelServer {
            url,
            state,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The base URL for `DEEPSEEK_BASE_URL`, e.g. `http://127.0.0.1:40123`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The log entries of every request received so far.
    pub fn requests(&self) -> Vec<Value> {
        lock(&self.state).log.clone()
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            stop.send(()).ok();
        }
        if let Some(thread) = self.thread.take() {
            thread.join().ok();
        }
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn accept_loop(
    listener: TcpListener,
    state: Arc<Mutex<State>>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    tokio::spawn(connection(stream, Arc::clone(&state)));
                }
            }
        }
    }
}

/// Serves one connection: one request, one reply.
async fn connection(stream: TcpStream, state: Arc<Mutex<State>>) {
    let mut reader = BufReader::new(stream);
    let request = match http::read_request(&mut reader).await {
        Ok(Some(request)) => request,
        Ok(None) => return,
        Err(message) => {
            let body = sse::error_body(400, &message);
            http::write_whole(reader.get_mut(), 400, &body).await.ok();
            return;
        }
    };
    let stream = reader.get_mut();
    let is_post = request.method == "POST";
    if is_post && request.path.ends_with("/chat/completions") {
        let (n, reply) = choose(&state, &request);
        answer(stream, n, reply, &request).await.ok();
    } else if request.method == "GET" && request.path.ends_with("/models") {
        let models = json!({ "object": "list", "data": [
            { "id": "deepseek-chat", "object": "model", "owned_by": "model-server" },
            { "id": "deepseek-reasoner", "object": "model", "owned_by": "model-server" } ] });
        http::write_whole(stream, 200, &models.to_string())
            .await
            .ok();
    } else {
        let message = format!(
            "model-server: no route for {} {}",
            request.method, request.path
        );
        log_request(&state, &request, json!({ "status": 404, "error": message }));
        http::write_whole(stream, 404, &sse::error_body(404, &message))
            .await
            .ok();
    }
}

/// Picks the reply for a completions request, logs the request, and returns its number.
fn choose(state: &Mutex<State>, request: &http::Request) -> (u64, Result<Reply, String>) {
    let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    let mut guard = lock(state);
    guard.requests += 1;
    let n = guard.requests;
    let found = guard
        .script
        .replies
        .iter()
        .enumerate()
        .find(|(index, reply)| !guard.used[*index] && reply.when.matches(&body))
        .map(|(index, reply)| (index, reply.clone()));
    drop(guard);
    let (outcome, reply) = match found {
        Some((index, reply)) => {
            let mut guard = lock(state);
            guard.used[index] = !reply.reuse;
            drop(guard);
            (
                json!({ "reply": index, "status": reply.status.unwrap_or(200) }),
                Ok(reply),
            )
        }
        None => {
            let message = format!(
                "model-server: no scripted reply fits request {n} (every reply is used up or its \
                 `when` does not match)"
            );
            (
                json!({ "reply": null, "status": 500, "error": message }),
                Err(message),
            )
        }
    };
    log_request(state, request, outcome);
    (n, reply)
}

/// Records one request in memory and in the log file.
fn log_request(state: &Mutex<State>, request: &http::Request, outcome: Value) {
    let mut guard = lock(state);
    let body = serde_json::from_slice::<Value>(&request.body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&request.body).into_owned()));
    let mut entry = json!({
        "n": guard.requests,
        "method": request.method,
        "path": request.path,
        "authorization": request.header("authorization").is_some(),
        "body": body,
    });
    if let (Some(entry), Value::Object(outcome)) = (entry.as_object_mut(), outcome) {
        entry.extend(outcome);
    }
    if let Some(file) = guard.log_file.as_mut() {
        writeln!(file, "{entry}").and_then(|()| file.flush()).ok();
    }
    guard.log.push(entry);
}

/// Streams (or refuses with an HTTP error) one reply.
async fn answer(
    stream: &mut TcpStream,
    n: u64,
    reply: Result<Reply, String>,
    request: &http::Request,
) -> std::io::Result<()> {
    let reply = match reply {
        Ok(reply) => reply,
        Err(message) => {
            return http::write_whole(stream, 500, &sse::error_body(500, &message)).await;
        }
    };
    if let Some(status) = reply.status {
        let message = format!("model-server: scripted HTTP {status}");
        return http::write_whole(stream, status, &sse::error_body(status, &message)).await;
    }
    let model = serde_json::from_slice::<Value>(&request.body)
        .ok()
        .and_then(|body| body.get("model").and_then(Value::as_str).map(String::from))
        .unwrap_or_else(|| "deepseek-chat".into());
    let events = sse::events(&reply, n, &model);
    let drip = Duration::from_millis(reply.drip_ms.unwrap_or(0));
    let mut out = http::EventStream::start(stream).await?;
    for (index, event) in events.iter().enumerate() {
        if !drip.is_zero() {
            tokio::time::sleep(drip).await;
        }
        if reply.cut_after_events == Some(index) {
            return out.cut(event).await;
        }
        out.event(event).await?;
    }
    out.finish().await
}
