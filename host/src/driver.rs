//! The driver protocol of docs/host-driver.md: harness requests as NDJSON on an input stream,
//! replies on an output stream. Discovery and setup are done one at a time; each run is its own
//! task, so runs of different conversations are in flight at once (capability `concurrent`, as
//! OpenDesign's daemon runs them); `cancel` reaches only the run it names; invalid requests get
//! an `error` reply and never end the driver.

use crate::codes::Diagnostic;
use crate::discovery::Discovery;
use crate::events::Event;
use crate::host::Host;
use crate::mutants::Mutant;
use crate::run::{Outcome, RunRequest};
use dsh_protocol::frames::ModelRoute;
use dsh_protocol::{LineEvent, LineFramer};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch};

/// The driver's name in its handshake.
pub const DRIVER_NAME: &str = "dsh-host-driver";
/// The optional capabilities this driver implements.
pub const CAPABILITIES: [&str; 7] = [
    "discover",
    "setup",
    "sessions",
    "cancel",
    "restart",
    "concurrent",
    "models",
];
/// The longest request line accepted.
const MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

/// Work the driver takes in order (a run is started in order, then goes on as its own task).
enum Work {
    Discover {
        id: String,
    },
    Setup {
        id: String,
        tarball: PathBuf,
        manifest: PathBuf,
    },
    Run {
        id: String,
        request: Box<RunRequest>,
        cancelled: watch::Receiver<bool>,
    },
    /// Spec 12: the `--models` catalog.
    Models {
        id: String,
    },
    /// A run whose route is not `provider/id`: failed before any spawn.
    RejectRoute {
        id: String,
        conversation_id: String,
        diagnostic: Diagnostic,
    },
    Shutdown,
}

/// The runs accepted and not yet answered (queued or in progress), so `cancel` can reach them
/// even before the worker starts one.
#[derive(Default)]
struct Active {
    runs: Vec<(String, watch::Sender<bool>)>,
}

type Replies = mpsc::UnboundedSender<Value>;

/// Serve the driver protocol until `shutdown` (or the input ends). Returns the exit code.
pub async fn serve<R, W>(host: Arc<Host>, input: R, output: W) -> i32
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (replies, reply_queue) = mpsc::unbounded_channel::<Value>();
    let writer = tokio::spawn(write_replies(output, reply_queue));
    let active = Arc::new(Mutex::new(Active::default()));
    let (work, work_queue) = mpsc::unbounded_channel::<Work>();
    let worker = tokio::spawn(do_work(
        host.clone(),
        work_queue,
        replies.clone(),
        active.clone(),
    ));

    let cancel_all = host.config().mutants.on(Mutant::CancelAllRuns);
    if read_requests(input, &replies, &work, &active, cancel_all).await == Flow::InputEnded {
        // Nobody is listening any more: end the accepted runs promptly (spec 10).
        cancel_active(&active, None);
    }
    // Finish the accepted work (each run reaped), then say bye.
    let _ = work.send(Work::Shutdown);
    drop(work);
    let _ = worker.await;
    drop(replies);
    let _ = writer.await;
    0
}

async fn write_replies<W: AsyncWrite + Unpin>(
    mut output: W,
    mut queue: mpsc::UnboundedReceiver<Value>,
) {
    while let Some(reply) = queue.recv().await {
        let mut line = reply.to_string();
        line.push('\n');
        if output.write_all(line.as_bytes()).await.is_err() || output.flush().await.is_err() {
            return;
        }
    }
}

/// Cancel the run named `id` (every accepted run, when `None`).
fn cancel_active(active: &Mutex<Active>, id: Option<&str>) {
    let Ok(active) = active.lock() else { return };
    for (run_id, cancel) in &active.runs {
        if id.is_none_or(|id| id == run_id) {
            let _ = cancel.send(true);
        }
    }
}

fn error_reply(id: Option<&str>, message: String) -> Value {
    json!({"v": 1, "type": "error", "id": id, "message": message})
}

/// Read requests until `shutdown` or end of input; says which ended it.
async fn read_requests<R: AsyncRead + Unpin>(
    mut input: R,
    replies: &Replies,
    work: &mpsc::UnboundedSender<Work>,
    active: &Mutex<Active>,
    cancel_all: bool,
) -> Flow {
    let mut framer = LineFramer::with_limit(MAX_REQUEST_BYTES);
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let read = input.read(&mut chunk).await.unwrap_or(0);
        let events = if read == 0 {
            framer.finish().into_iter().collect()
        } else {
            framer.push(&chunk[..read])
        };
        for event in events {
            let line = match event {
                LineEvent::Line { bytes, .. } | LineEvent::Truncated { bytes, .. } => bytes,
                LineEvent::TooLarge { number } => {
                    let _ = replies.send(error_reply(
                        None,
                        format!("request line {number} is larger than {MAX_REQUEST_BYTES} bytes"),
                    ));
                    continue;
                }
            };
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if handle_request(&line, replies, work, active, cancel_all) == Flow::Shutdown {
                return Flow::Shutdown;
            }
        }
        if read == 0 {
            return Flow::InputEnded;
        }
    }
}

#[derive(PartialEq, Eq)]
enum Flow {
    Continue,
    Shutdown,
    InputEnded,
}

fn text(request: &Value, member: &str) -> String {
    request
        .get(member)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// One request line as JSON valid against `driver/request.schema.json`, with its `id`; otherwise
/// the error is replied and None returned.
fn parse_request(line: &[u8], replies: &Replies) -> Option<(String, Value)> {
    let request: Value = match serde_json::from_slice(line) {
        Ok(request) => request,
        Err(error) => {
            let _ = replies.send(error_reply(None, format!("request is not JSON: {error}")));
            return None;
        }
    };
    let id = request
        .get("id")
        .and_then(Value::as_str)
        .map(str::to_string);
    if let Err(errors) = dsh_protocol::schema::validate("driver/request.schema.json", &request) {
        let reasons: Vec<String> = errors.iter().take(3).map(ToString::to_string).collect();
        let _ = replies.send(error_reply(
            id.as_deref(),
            format!("invalid request ({})", reasons.join("; ")),
        ));
        return None;
    }
    Some((id.unwrap_or_default(), request))
}

/// A `run` request: its model route checked, then queued with a cancel switch of its own.
fn queue_run(
    id: String,
    request: &Value,
    work: &mpsc::UnboundedSender<Work>,
    active: &Mutex<Active>,
) {
    let model = match picked_route(request) {
        Ok(model) => model,
        Err(diagnostic) => {
            let conversation_id = text(request, "conversation_id");
            let _ = work.send(Work::RejectRoute {
                id,
                conversation_id,
                diagnostic,
            });
            return;
        }
    };
    let request = RunRequest {
        conversation_id: text(request, "conversation_id"),
        project_id: text(request, "project_id"),
        cwd: PathBuf::from(text(request, "cwd")),
        prompt: text(request, "prompt"),
        bootstrap: text(request, "bootstrap"),
        model,
        reasoning_effort: request
            .get("reasoning_effort")
            .and_then(Value::as_str)
            .map(str::to_string),
    };
    let (cancel, cancelled) = watch::channel(false);
    if let Ok(mut active) = active.lock() {
        active.runs.push((id.clone(), cancel));
    }
    let _ = work.send(Work::Run {
        id,
        request: Box::new(request),
        cancelled,
    });
}

fn handle_request(
    line: &[u8],
    replies: &Replies,
    work: &mpsc::UnboundedSender<Work>,
    active: &Mutex<Active>,
    cancel_all: bool,
) -> Flow {
    let Some((id, request)) = parse_request(line, replies) else {
        return Flow::Continue;
    };
    match request
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
    {
        "handshake" => {
            let _ = replies.send(json!({
                "v": 1, "type": "handshake", "driver": DRIVER_NAME,
                "version": env!("CARGO_PKG_VERSION"), "capabilities": CAPABILITIES,
                // The host reports the kit's own codes, so every code is compared exactly.
                "codes": "kit",
            }));
        }
        "discover" => {
            let _ = work.send(Work::Discover { id });
        }
        "setup" => {
            let _ = work.send(Work::Setup {
                id,
                tarball: PathBuf::from(text(&request, "tarball")),
                manifest: PathBuf::from(text(&request, "manifest")),
            });
        }
        "models" => {
            let _ = work.send(Work::Models { id });
        }
        "run" => queue_run(id, &request, work, active),
        // The mutant `cancel-all-runs` ends every run in flight (spec 10 forbids it).
        "cancel" => cancel_active(active, (!cancel_all).then_some(id.as_str())),
        "shutdown" => return Flow::Shutdown,
        other => {
            let _ = replies.send(error_reply(
                Some(&id),
                format!("unknown request type {other:?}"),
            ));
        }
    }
    Flow::Continue
}

async fn do_work(
    host: Arc<Host>,
    mut queue: mpsc::UnboundedReceiver<Work>,
    replies: Replies,
    active: Arc<Mutex<Active>>,
) {
    let mut runs = tokio::task::JoinSet::new();
    while let Some(item) = queue.recv().await {
        match item {
            Work::Discover { id } => {
                let discovery = host.discover().await;
                let _ = replies.send(discovered_reply(&id, &discovery));
            }
            Work::Setup {
                id,
                tarball,
                manifest,
            } => {
                let reply = match host.setup(&tarball, &manifest).await {
                    Ok(_) => {
                        json!({"v": 1, "type": "setup_done", "id": id, "ok": true, "code": null, "message": null})
                    }
                    Err(diagnostic) => json!({
                        "v": 1, "type": "setup_done", "id": id, "ok": false,
                        "code": diagnostic.code, "message": diagnostic.message,
                    }),
                };
                let _ = replies.send(reply);
            }
            Work::Run {
                id,
                request,
                cancelled,
            } => {
                let run = one_run(host.clone(), id, request, cancelled, replies.clone());
                runs.spawn(finish_run(run, active.clone()));
            }
            Work::Models { id } => {
                let _ = replies.send(models_reply(&id, host.models().await));
            }
            Work::RejectRoute {
                id,
                conversation_id,
                diagnostic,
            } => {
                let event = Event::failure(diagnostic.code, &diagnostic.message);
                let _ = replies.send(json!({"v": 1, "type": "event", "id": id, "event": event}));
                let outcome = host.route_failure(&conversation_id, diagnostic);
                let _ = replies.send(outcome_reply(&id, &outcome));
            }
            Work::Shutdown => {
                // Every accepted run is answered (its tree reaped) before `bye`.
                while runs.join_next().await.is_some() {}
                let _ = replies.send(json!({"v": 1, "type": "bye"}));
                return;
            }
        }
    }
}

/// One run: its events as they come, then its outcome; returns the run's id.
async fn one_run(
    host: Arc<Host>,
    id: String,
    request: Box<RunRequest>,
    cancelled: watch::Receiver<bool>,
    replies: Replies,
) -> String {
    let events = replies.clone();
    let event_id = id.clone();
    let mut emit = move |event: Event| {
        let _ = events.send(json!({"v": 1, "type": "event", "id": event_id, "event": event}));
    };
    let outcome = host.run(&request, cancelled, &mut emit).await;
    let _ = replies.send(outcome_reply(&id, &outcome));
    id
}

/// Awaits a run, then forgets it: a later `cancel` naming it is a no-op.
async fn finish_run(run: impl std::future::Future<Output = String>, active: Arc<Mutex<Active>>) {
    let id = run.await;
    if let Ok(mut active) = active.lock() {
        active.runs.retain(|(run_id, _)| *run_id != id);
    }
}

/// The `discovered` reply for a discovery.
pub fn discovered_reply(id: &str, discovery: &Discovery) -> Value {
    let (code, diagnostic) = match &discovery.unavailable {
        Some(diagnostic) => (Some(diagnostic.code), Some(diagnostic.message.clone())),
        None => (None, None),
    };
    json!({
        "v": 1, "type": "discovered", "id": id,
        "available": discovery.available(),
        "version": discovery.version.as_ref().map(ToString::to_string),
        "warnings": discovery.warnings,
        "diagnostic": diagnostic,
        "code": code,
    })
}

/// The run's model: its `route` as the user picked it (`default`: none), else its `model`.
fn picked_route(request: &Value) -> Result<Option<ModelRoute>, Diagnostic> {
    if let Some(route) = request.get("route").and_then(Value::as_str) {
        return crate::models::parse_route(route);
    }
    Ok(request.get("model").map(|model| ModelRoute {
        provider: text(model, "provider"),
        id: text(model, "id"),
    }))
}

/// The `models` reply: the catalog, or unavailable with the code and diagnostic.
pub fn models_reply(
    id: &str,
    catalog: Result<Vec<crate::models::CatalogModel>, Diagnostic>,
) -> Value {
    match catalog {
        Ok(models) => json!({
            "v": 1, "type": "models", "id": id, "available": true, "models": models,
            "code": null, "diagnostic": null,
        }),
        Err(diagnostic) => json!({
            "v": 1, "type": "models", "id": id, "available": false, "models": [],
            "code": diagnostic.code, "diagnostic": diagnostic.message,
        }),
    }
}

/// The `outcome` reply for a run.
pub fn outcome_reply(id: &str, outcome: &Outcome) -> Value {
    json!({
        "v": 1, "type": "outcome", "id": id,
        "status": outcome.status.as_str(),
        "session_id": outcome.session_id,
        "resumed": outcome.resumed,
        "code": outcome.code,
        "message": outcome.message,
        "foreign_frames": outcome.foreign_frames,
        "stderr": outcome.stderr,
    })
}
