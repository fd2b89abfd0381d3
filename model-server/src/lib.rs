//! A scripted, loopback-only model endpoint, so a real dsh runs keylessly and deterministically
//! (`DEEPSEEK_BASE_URL=<url>`, any `DEEPSEEK_API_KEY`). It speaks both APIs a dsh may use, from
//! the same script: OpenAI-compatible chat completions streamed as DeepSeek-style server-sent
//! events (dsh 0.1.x), and Anthropic Messages (dsh 0.2.1). `dsh-conformance model-server` is its
//! CLI; `check-runtime` runs one in process. It imports nothing else of the kit.
//!
//! - [`script`]: which reply each request gets (text, reasoning, tool calls, usage, faults).
//! - [`sse`]: a reply as `chat.completion.chunk` events.
//! - [`messages`]: a reply as Messages events (or one `message`), and a Messages request as the
//!   chat-completions shape the script matches.
//! - [`http`]: the small HTTP/1.1 layer on tokio, every input bounded.
//! - [`cost`]: what a JSON body would cost parsed, estimated from its text before it is parsed.
//! - [`files`]: the request log and the URL file, created without following links.
//!
//! It binds 127.0.0.1 only (port 0 unless told), answers `POST <any prefix>/chat/completions`
//! (the real dsh 0.1.x posts to `$DEEPSEEK_BASE_URL/chat/completions`, no `/v1`; a `/v1` prefix
//! works too), `POST <any prefix>/messages` (dsh 0.2.1 posts to `$DEEPSEEK_BASE_URL/v1/messages`)
//! and `GET .../models`; a query string is ignored when routing. Errors on a Messages path take
//! the Messages error shape, others the OpenAI one. It logs every request as one JSON line: its
//! number, method, path, whether it carried an `Authorization` or an `x-api-key` header (never
//! their values), the body (a refused body's text, cut to its first 4 KiB when it was too
//! costly to parse), and the reply given. Whatever a client sends, the server's memory stays
//! bounded by [`Limits`], on every route alike: connections are capped, idle ones time out, heads
//! and bodies are bounded, a body whose parsed form would cost more than its bound is refused
//! (413) before it is parsed, a parsed body is never held while a reply is written, requests not
//! addressed to loopback are refused, and the log kept in memory is bounded by what its entries
//! cost parsed, not by their text.

pub mod cost;
pub mod files;
pub mod http;
pub mod messages;
pub mod script;
pub mod sse;

use script::{Reply, Script};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::BufReader;
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

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

/// What bounds the server's memory and time, whatever clients send.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Connections served at once; one more is answered 503 and closed at once.
    pub max_connections: usize,
    /// A request's line and headers together (431 beyond).
    pub max_head_bytes: usize,
    /// One request body (413 beyond).
    pub max_body_bytes: usize,
    /// What one body may cost parsed into JSON values (estimated from its text by
    /// [`cost::parsed_cost`]; 413 beyond, before it is parsed): small values cost far more
    /// parsed than written.
    pub max_parsed_body_bytes: usize,
    /// The bodies of all connections together (503 when a body would go beyond).
    pub max_body_bytes_in_flight: usize,
    /// How long a client may take to send a whole request (408 after, then closed).
    pub read_timeout: Duration,
    /// How long one write of a reply may wait for a client that does not read.
    pub write_timeout: Duration,
    /// What the log entries kept in memory for [`ModelServer::requests`] may cost parsed (their
    /// text's [`cost::parsed_cost`]), oldest dropped first (the log file gets every entry).
    pub remembered_log_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: 64,
            max_head_bytes: 64 * 1024,
            max_body_bytes: 8 * 1024 * 1024,
            max_parsed_body_bytes: 24 * 1024 * 1024,
            max_body_bytes_in_flight: 32 * 1024 * 1024,
            read_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(10),
            remembered_log_bytes: 16 * 1024 * 1024,
        }
    }
}

/// How to start a server, besides its script.
#[derive(Debug, Default)]
pub struct Options {
    /// The port on 127.0.0.1 (0: any free one).
    pub port: u16,
    /// Where to append one JSON line per request (see [`files::create_log`]).
    pub log_file: Option<std::fs::File>,
    pub limits: Limits,
}

/// The mutable state every connection shares.
struct State {
    script: Script,
    used: Vec<bool>,
    requests: u64,
    log: Log,
}

/// The request log: the file, and the most recent entries as text, within a budget of what they
/// cost parsed (what [`ModelServer::requests`] makes of them).
struct Log {
    file: Option<std::fs::File>,
    kept: VecDeque<(usize, String)>,
    kept_cost: usize,
    budget: usize,
}

impl Log {
    fn record(&mut self, line: String) {
        if let Some(file) = self.file.as_mut() {
            writeln!(file, "{line}").and_then(|()| file.flush()).ok();
        }
        let cost = cost::parsed_cost(line.as_bytes(), self.budget).max(line.len());
        if cost > self.budget {
            return;
        }
        while self.kept_cost + cost > self.budget {
            let Some((size, _)) = self.kept.pop_front() else {
                break;
            };
            self.kept_cost -= size;
        }
        self.kept_cost += cost;
        self.kept.push_back((cost, line));
    }
}

/// A running model server; dropping it stops it.
pub struct ModelServer {
    url: String,
    state: Arc<Mutex<State>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ModelServer {
    /// Starts serving `script` on 127.0.0.1 at any free port, with the default [`Limits`].
    pub fn start(script: Script) -> std::io::Result<ModelServer> {
        ModelServer::start_with(script, Options::default())
    }

    /// Starts serving `script` as `options` say, on a thread of its own.
    pub fn start_with(script: Script, options: Options) -> std::io::Result<ModelServer> {
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, options.port)))?;
        listener.set_nonblocking(true)?;
        let url = format!("http://{}", listener.local_addr()?);
        let state = Arc::new(Mutex::new(State {
            used: vec![false; script.replies.len()],
            script,
            requests: 0,
            log: Log {
                file: options.log_file,
                kept: VecDeque::new(),
                kept_cost: 0,
                budget: options.limits.remembered_log_bytes,
            },
        }));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = Server::new(Arc::clone(&state), options.limits);
        let thread = std::thread::Builder::new()
            .name("model-server".into())
            .spawn(move || runtime.block_on(server.accept_loop(listener, stopped)))?;
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

    /// The log entries of the requests received so far (the most recent ones, as many as
    /// [`Limits::remembered_log_bytes`] holds).
    pub fn requests(&self) -> Vec<Value> {
        let guard = lock(&self.state);
        guard
            .log
            .kept
            .iter()
            .filter_map(|(_, line)| serde_json::from_str(line).ok())
            .collect()
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

/// What every connection task shares: the state, the bounds, and the connection slots.
#[derive(Clone)]
struct Server {
    state: Arc<Mutex<State>>,
    limits: Arc<Limits>,
    bounds: http::RequestBounds,
    slots: Arc<Semaphore>,
}

/// How long the accept loop pauses when accepting fails (out of file descriptors), instead of
/// spinning on a listener that stays readable.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

impl Server {
    fn new(state: Arc<Mutex<State>>, limits: Limits) -> Server {
        let bounds = http::RequestBounds {
            max_head_bytes: limits.max_head_bytes,
            max_body_bytes: limits.max_body_bytes,
            in_flight: Arc::new(Semaphore::new(limits.max_body_bytes_in_flight)),
        };
        Server {
            state,
            slots: Arc::new(Semaphore::new(limits.max_connections)),
            limits: Arc::new(limits),
            bounds,
        }
    }

    async fn accept_loop(
        self,
        listener: TcpListener,
        mut stopped: tokio::sync::oneshot::Receiver<()>,
    ) {
        let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
            return;
        };
        loop {
            tokio::select! {
                _ = &mut stopped => return,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => self.admit(stream),
                    Err(_) => tokio::time::sleep(ACCEPT_BACKOFF).await,
                },
            }
        }
    }

    /// Serves a new connection in a task of its own, or, with every slot taken, answers 503
    /// without waiting (a write that does not fit the socket buffer is dropped) and closes it.
    fn admit(&self, stream: TcpStream) {
        match Arc::clone(&self.slots).try_acquire_owned() {
            Ok(slot) => {
                tokio::spawn(self.clone().connection(stream, slot));
            }
            Err(_) => {
                let message = format!(
                    "model-server: {} connections are open already; retry later",
                    self.limits.max_connections
                );
                let reply = http::whole_reply(503, &sse::error_body(503, &message));
                stream.try_write(reply.as_bytes()).ok();
            }
        }
    }

    /// Serves one connection: one request (read within the read timeout), one reply.
    async fn connection(self, stream: TcpStream, _slot: OwnedSemaphorePermit) {
        let mut reader = BufReader::new(stream);
        let read = http::read_request(&mut reader, &self.bounds);
        let refusal = match tokio::time::timeout(self.limits.read_timeout, read).await {
            Ok(Ok(Some(request))) => return self.route(reader.get_mut(), request).await,
            Ok(Ok(None)) => return,
            Ok(Err(error)) => error,
            Err(_) => http::HttpError {
                status: 408,
                message: format!(
                    "no whole request within {} ms",
                    self.limits.read_timeout.as_millis()
                ),
                path: None,
            },
        };
        let dialect = refusal.path.as_deref().map_or(Dialect::Chat, Dialect::of);
        let body = dialect.error_body(
            refusal.status,
            &format!("model-server: {}", refusal.message),
        );
        http::write_refusal(
            &mut reader,
            refusal.status,
            &body,
            self.limits.write_timeout,
        )
        .await;
    }

    async fn route(&self, stream: &mut TcpStream, request: http::Request) {
        let path = request.path.split('?').next().unwrap_or_default();
        let dialect = Dialect::of(&request.path);
        let completes = path.ends_with("/chat/completions") || path.ends_with("/messages");
        let limit = self.limits.write_timeout;
        if request.method == "POST" && completes {
            match self.plan(&request, dialect) {
                Planned::Refuse(status, message) => {
                    http::write_whole(stream, status, &dialect.error_body(status, &message), limit)
                        .await
                        .ok();
                }
                Planned::Reply(chosen) => {
                    self.answer(stream, *chosen, dialect).await.ok();
                }
            }
        } else if request.method == "GET" && path.ends_with("/models") {
            let models = json!({ "object": "list", "data": [
                { "id": "deepseek-chat", "object": "model", "owned_by": "model-server" },
                { "id": "deepseek-reasoner", "object": "model", "owned_by": "model-server" } ] });
            http::write_whole(stream, 200, &models.to_string(), limit)
                .await
                .ok();
        } else {
            let message = format!(
                "model-server: no route for {} {}",
                request.method, request.path
            );
            match self.parse_body(&request.body) {
                Body::Json(body) => self.log_refusal(&request, Logged::Json(&body), 404, &message),
                Body::NotJson => self.log_refusal(&request, Logged::Text, 404, &message),
                Body::TooCostly(_) => self.log_refusal(&request, Logged::Cut, 404, &message),
            }
            http::write_whole(stream, 404, &dialect.error_body(404, &message), limit)
                .await
                .ok();
        }
    }

    /// The body of `bytes`: parsed when its parsed form fits [`Limits::max_parsed_body_bytes`].
    fn parse_body(&self, bytes: &[u8]) -> Body {
        let bound = self.limits.max_parsed_body_bytes;
        let cost = cost::parsed_cost(bytes, bound);
        if cost > bound {
            return Body::TooCostly(cost);
        }
        serde_json::from_slice(bytes).map_or(Body::NotJson, Body::Json)
    }

    /// What a completions request gets, decided (its body checked, its reply picked, the request
    /// logged) before anything is written: the parsed body is dropped here, never held while a
    /// slow client reads the reply.
    fn plan(&self, request: &http::Request, dialect: Dialect) -> Planned {
        let body = match self.parse_body(&request.body) {
            Body::Json(body) if body.is_object() => body,
            Body::TooCostly(cost) => {
                let message = format!(
                    "model-server: the body would take about {} MiB parsed, over the {} MiB bound \
                     ({} bytes of small JSON values)",
                    cost.div_ceil(1 << 20),
                    self.limits.max_parsed_body_bytes >> 20,
                    request.body.len()
                );
                self.log_refusal(request, Logged::Cut, 413, &message);
                return Planned::Refuse(413, message);
            }
            _ => {
                let message = "model-server: the body is not a JSON object".to_string();
                self.log_refusal(request, Logged::Text, 400, &message);
                return Planned::Refuse(400, message);
            }
        };
        let view = match dialect {
            Dialect::Chat => None,
            Dialect::Messages => match messages::check_request(&body) {
                Ok(()) => Some(messages::chat_view(&body)),
                Err(problem) => {
                    let message = format!("model-server: a Messages request: {problem}");
                    self.log_refusal(request, Logged::Json(&body), 400, &message);
                    return Planned::Refuse(400, message);
                }
            },
        };
        let (n, reply) = self.choose(request, &body, view.as_ref().unwrap_or(&body));
        Planned::Reply(Box::new(Chosen {
            n,
            reply,
            model: body
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("deepseek-chat")
                .to_string(),
            streams: messages::wants_stream(&body),
        }))
    }

    /// Logs a request refused with `status` and `message`.
    fn log_refusal(&self, request: &http::Request, body: Logged<'_>, status: u16, message: &str) {
        self.log_request(request, body, json!({ "status": status, "error": message }));
    }

    /// Picks the reply for a completions request (matching its `view`, the chat-completions
    /// shape of its `body`), logs the request, and returns its number.
    fn choose(
        &self,
        request: &http::Request,
        body: &Value,
        view: &Value,
    ) -> (u64, Result<Reply, String>) {
        let mut guard = lock(&self.state);
        guard.requests += 1;
        let n = guard.requests;
        let found = guard
            .script
            .replies
            .iter()
            .enumerate()
            .find(|(index, reply)| !guard.used[*index] && reply.when.matches(view))
            .map(|(index, reply)| (index, reply.clone()));
        if let Some((index, reply)) = &found {
            guard.used[*index] = !reply.reuse;
        }
        drop(guard);
        let (outcome, reply) = match found {
            Some((index, reply)) => (
                json!({ "reply": index, "status": reply.status.unwrap_or(200) }),
                Ok(reply),
            ),
            None => {
                let message = format!(
                    "model-server: no scripted reply fits request {n} (every reply is used up or \
                     its `when` does not match)"
                );
                (
                    json!({ "reply": null, "status": 500, "error": message }),
                    Err(message),
                )
            }
        };
        self.log_request(request, Logged::Json(body), outcome);
        (n, reply)
    }

    /// Records one request in the log, its body as `body` says.
    fn log_request(&self, request: &http::Request, body: Logged<'_>, outcome: Value) {
        let mut guard = lock(&self.state);
        let mut entry = json!({
            "n": guard.requests,
            "method": request.method,
            "path": request.path,
            "authorization": request.header("authorization").is_some(),
            "x_api_key": request.header("x-api-key").is_some(),
        });
        let Some(members) = entry.as_object_mut() else {
            return;
        };
        if let Value::Object(outcome) = outcome {
            members.extend(outcome);
        }
        match body {
            Logged::Json(_) => {}
            Logged::Text => {
                let text = String::from_utf8_lossy(&request.body).into_owned();
                members.insert("body".into(), Value::String(text));
            }
            Logged::Cut => {
                let cut = &request.body[..request.body.len().min(LOGGED_PREFIX)];
                let text = String::from_utf8_lossy(cut).into_owned();
                members.insert("body".into(), Value::String(text));
                members.insert("body_bytes".into(), request.body.len().into());
            }
        }
        let mut line = entry.to_string();
        if let Logged::Json(body) = body {
            // Written from the parsed body without a copy of it: `{...,"body":<body>}`.
            line.pop();
            line.push_str(",\"body\":");
            line.push_str(&body.to_string());
            line.push('}');
        }
        guard.log.record(line);
    }

    /// Streams (or refuses with an HTTP error, or sends whole) one reply.
    async fn answer(
        &self,
        stream: &mut TcpStream,
        chosen: Chosen,
        dialect: Dialect,
    ) -> std::io::Result<()> {
        let limit = self.limits.write_timeout;
        let Chosen {
            n,
            reply,
            model,
            streams,
        } = chosen;
        let reply = match reply {
            Ok(reply) => reply,
            Err(message) => {
                return http::write_whole(stream, 500, &dialect.error_body(500, &message), limit)
                    .await;
            }
        };
        if let Some(status) = reply.status {
            let message = format!("model-server: scripted HTTP {status}");
            let error = dialect.error_body(status, &message);
            return http::write_whole(stream, status, &error, limit).await;
        }
        let events = match dialect {
            Dialect::Messages if !streams => {
                let whole = messages::message(&reply, n, &model).to_string();
                return http::write_whole(stream, 200, &whole, limit).await;
            }
            Dialect::Messages => messages::events(&reply, n, &model),
            Dialect::Chat => sse::events(&reply, n, &model),
        };
        self.stream_events(stream, &reply, &events).await
    }

    /// Sends `events` as an event stream, with the reply's drip and cut.
    async fn stream_events(
        &self,
        stream: &mut TcpStream,
        reply: &Reply,
        events: &[String],
    ) -> std::io::Result<()> {
        let drip = Duration::from_millis(reply.drip_ms.unwrap_or(0));
        let mut out = http::EventStream::start(stream, self.limits.write_timeout).await?;
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
}

/// How much of a body too costly to parse its log entry keeps.
const LOGGED_PREFIX: usize = 4096;

/// A request body, parsed only when its parsed form fits the bound.
enum Body {
    Json(Value),
    NotJson,
    /// Its estimated parsed cost, over the bound.
    TooCostly(usize),
}

/// A request's body as its log entry holds it.
enum Logged<'a> {
    /// The parsed JSON.
    Json(&'a Value),
    /// Its text, whole (no JSON, or JSON that is no object).
    Text,
    /// Its first [`LOGGED_PREFIX`] bytes as text, and its length (`body_bytes`): too costly to
    /// parse.
    Cut,
}

/// What a completions request gets.
enum Planned {
    /// An error reply: its status and message.
    Refuse(u16, String),
    Reply(Box<Chosen>),
}

/// The reply picked for a request, and what of its body the reply needs.
struct Chosen {
    n: u64,
    reply: Result<Reply, String>,
    model: String,
    /// Whether a Messages request asked for a stream.
    streams: bool,
}

/// The two model APIs the server speaks, told apart by the request's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dialect {
    /// OpenAI-compatible chat completions (`.../chat/completions`).
    Chat,
    /// Anthropic Messages (`.../messages`).
    Messages,
}

impl Dialect {
    fn of(path: &str) -> Dialect {
        if messages::is_messages_path(path) {
            Dialect::Messages
        } else {
            Dialect::Chat
        }
    }

    /// An error reply's JSON body in this dialect's shape.
    fn error_body(self, status: u16, message: &str) -> String {
        match self {
            Dialect::Chat => sse::error_body(status, message),
            Dialect::Messages => messages::error_body(status, message),
        }
    }
}
