//! The ACP surface's runtime checks (docs/surface-acp.md): judges `DSH --profile acp` (the real
//! 0.2.1rc2 or 0.1.5rc1, or fake-dsh) keylessly, driving it as an ACP client would against the
//! kit's scripted model on loopback, one fresh world and process per check (two for the cold
//! resume). Each check names the facts of docs/surface-acp.md it rests on. The wire driver, the
//! world and the model server are [`crate::sdk_check`]'s; the command line (`check-runtime
//! --surface acp`) is the CLI crate's, which calls [`check_all`].

use crate::sdk_check::{drive, request, ModelServer, Step, Wire, World, SESSION_PLACEHOLDER};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

/// What the checks need.
pub struct AcpTarget {
    pub dsh: PathBuf,
    /// `dsh-conformance` itself (for `model-server`).
    pub conformance: PathBuf,
    pub limit: Duration,
    /// The frames of every run so far, in order (the fake-vs-real differential compares them).
    pub recorded: Mutex<Vec<Vec<Value>>>,
}

impl AcpTarget {
    /// A target with nothing recorded yet.
    pub fn new(dsh: PathBuf, conformance: PathBuf, limit: Duration) -> AcpTarget {
        AcpTarget {
            dsh,
            conformance,
            limit,
            recorded: Mutex::new(Vec::new()),
        }
    }

    /// Drives one run and records its frames.
    fn drive(&self, command: Command, steps: &[Step], world: &World) -> Result<Wire, String> {
        let wire = drive(command, steps, world, self.limit)?;
        self.recorded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(wire.frames.clone());
        Ok(wire)
    }
}

/// One check: its id, the facts it rests on, its body.
pub struct AcpCheck {
    pub id: &'static str,
    pub rule: &'static str,
    pub run: fn(&AcpTarget) -> Result<(), String>,
}

/// The kit's model script for every check (a reply per keyword, as the captures' script), and
/// the same turns as fake-dsh's `acp` scenario, per check.
fn model_script() -> Value {
    let done = json!({"when": {"last_role": "tool"}, "reasoning": "The file is written.",
                      "text": "I wrote index.html.", "reuse": true});
    // `textonly` first, whatever the last message's role: after a turn cancelled during its
    // tool call, 0.2.1's next request folds the tool result into the new prompt (facts §12).
    json!({"replies": [
        {"when": {"user_contains": "textonly"}, "text": "Hi.", "reuse": true},
        done,
        {"when": {"last_role": "user", "user_contains": "fail401"}, "status": 401, "reuse": true},
        {"when": {"last_role": "user", "user_contains": "escalate"}, "reuse": true,
         "tool_calls": [{"name": "bash", "arguments": {"description": "Write a file",
             "command": "echo escalated > esc.txt", "sandbox_permissions": "danger-full-access",
             "justification": "The test needs it."}}]},
        {"when": {"last_role": "user"}, "reasoning": "I will write the page.", "reuse": true,
         "tool_calls": [{"name": "write", "arguments": {"file_path": "index.html",
             "content": "<!doctype html><title>Landing</title><h1>Landing page</h1>\n"}}]}]})
}

/// fake-dsh's turns for the prompts a check sends, in order (its default agent beyond them).
fn fake_turns(turns: Value) -> Value {
    json!({"acp": {"turns": turns}})
}

/// The escalating turn of [`model_script`] as a fake-dsh turn.
fn fake_escalation() -> Value {
    json!({"replies": [{"tool_calls": [{"name": "bash", "arguments": {"description": "Write a file",
        "command": "echo escalated > esc.txt", "sandbox_permissions": "danger-full-access",
        "justification": "The test needs it."}}]},
        {"reasoning": "The file is written.", "text": "I wrote index.html."}]})
}

/// The writing turn of [`model_script`] as a fake-dsh turn.
fn fake_write() -> Value {
    json!({"replies": [{"reasoning": "I will write the page.", "tool_calls": [{"name": "write",
        "arguments": {"file_path": "index.html",
                      "content": "<!doctype html><title>Landing</title><h1>Landing page</h1>\n"}}]},
        {"reasoning": "The file is written.", "text": "I wrote index.html."}]})
}

/// `initialize` (id 1) and `session/new` (id 2) in the world's project: how every ACP run opens.
pub fn open(world: &World) -> Vec<Step> {
    vec![
        Step::Send(request(
            json!(1),
            "initialize",
            json!({"protocolVersion": 1}),
        )),
        Step::Response(json!(1)),
        Step::Send(request(
            json!(2),
            "session/new",
            json!({"cwd": world.path("project"), "mcpServers": []}),
        )),
        Step::Response(json!(2)),
    ]
}

/// A text prompt to the session the run opened.
pub fn prompt(id: i64, text: &str) -> Step {
    Step::SendToSession(request(
        json!(id),
        "session/prompt",
        json!({"sessionId": SESSION_PLACEHOLDER, "prompt": [{"type": "text", "text": text}]}),
    ))
}

/// The runtime's ACP command in `world`, the model server playing [`model_script`] and fake-dsh
/// playing `fake`.
fn command(
    target: &AcpTarget,
    world: &World,
    fake: &Value,
) -> Result<(Command, ModelServer), String> {
    let server = ModelServer::start(
        &target.conformance,
        Some(&model_script()),
        world.root.path(),
    )?;
    let args = ["--profile".to_string(), "acp".to_string()];
    let mut command = world.command(&target.dsh, &args, &server.url);
    let scenario = world.path("scenario.json");
    std::fs::write(&scenario, fake.to_string()).map_err(|e| e.to_string())?;
    command.env("FAKE_DSH_SCENARIO", scenario);
    Ok((command, server))
}

/// One process in a fresh world: `initialize`, `session/new`, then `steps`.
fn run(target: &AcpTarget, fake: Value, steps: &[Step]) -> Result<(Wire, World), String> {
    let world = World::new()?;
    let (command, _server) = command(target, &world, &fake)?;
    let mut all = open(&world);
    all.extend_from_slice(steps);
    let wire = target.drive(command, &all, &world)?;
    Ok((wire, world))
}

fn expect(ok: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(why())
    }
}

/// The response to `id`.
fn response<'w>(wire: &'w Wire, id: &Value) -> Result<&'w Value, String> {
    wire.frames
        .iter()
        .find(|f| f["id"] == *id && f.get("method").is_none())
        .ok_or_else(|| format!("no response to id {id}"))
}

/// The `session/update`s of a run, in order.
fn updates(wire: &Wire) -> Vec<&Value> {
    wire.frames
        .iter()
        .filter(|f| f["method"] == "session/update")
        .map(|f| &f["params"]["update"])
        .collect()
}

/// F3.1, F4.1, F9.1: the exact `initialize` result, a session with its two config options, and
/// exit 0 at EOF.
fn initialize(target: &AcpTarget) -> Result<(), String> {
    let (wire, _) = run(target, fake_turns(json!([])), &[Step::Eof])?;
    let result = &response(&wire, &json!(1))?["result"];
    let exact = json!({"protocolVersion": 1,
        "agentInfo": {"name": "deepseek-harness-acp", "version": "0.0.1"},
        "agentCapabilities": {"mcpCapabilities": {"http": true},
            "promptCapabilities": {"image": false, "audio": false, "embeddedContext": false},
            "sessionCapabilities": {"close": {}, "list": {}, "resume": {}}},
        "authMethods": []});
    expect(*result == exact, || format!("initialize answered {result}"))?;
    let session = &response(&wire, &json!(2))?["result"];
    let ids: Vec<&Value> = session["configOptions"]
        .as_array()
        .map(|options| options.iter().map(|o| &o["id"]).collect())
        .unwrap_or_default();
    expect(
        session["sessionId"]
            .as_str()
            .is_some_and(|id| id.len() == 36)
            && ids == [&json!("model"), &json!("reasoning_effort")],
        || format!("session/new answered {session}"),
    )?;
    expect(wire.exit == Some(0), || {
        format!("stdin EOF exits 0, not {:?}", wire.exit)
    })
}

/// F5.3, F5.5, F5.7: a turn that writes a file: the tool call and its completed update, then
/// the final text, `end_turn`, and the file on disk.
fn write_turn(target: &AcpTarget) -> Result<(), String> {
    let steps = [
        prompt(3, "Make a landing page"),
        Step::Response(json!(3)),
        Step::Eof,
    ];
    let (wire, world) = run(target, fake_turns(json!([fake_write()])), &steps)?;
    let updates = updates(&wire);
    let kinds: Vec<&str> = updates
        .iter()
        .filter_map(|u| u["sessionUpdate"].as_str())
        .collect();
    let call = updates.iter().position(|u| {
        u["sessionUpdate"] == "tool_call"
            && u["title"] == "write"
            && u["kind"] == "other"
            && u["status"] == "in_progress"
    });
    let done = updates
        .iter()
        .position(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed");
    let text = updates.iter().position(|u| {
        u["sessionUpdate"] == "agent_message_chunk" && u["content"]["text"] == "I wrote index.html."
    });
    expect(
        matches!((call, done, text), (Some(c), Some(d), Some(t)) if c < d && d < t),
        || format!("tool_call, its completed update, then the text: {kinds:?}"),
    )?;
    expect(kinds.last() == Some(&"usage_update"), || {
        format!("a reply's updates end with usage_update: {kinds:?}")
    })?;
    let stop = &response(&wire, &json!(3))?["result"]["stopReason"];
    expect(*stop == "end_turn", || format!("stopReason {stop}"))?;
    expect(
        world.project_files().contains(&"index.html".to_string()),
        || format!("index.html written: {:?}", world.project_files()),
    )
}

/// F5.8: a failed turn is `-32603 "Internal error: turn failed: <message>"`, and the session
/// takes the next prompt.
fn failed_turn(target: &AcpTarget) -> Result<(), String> {
    let fake = fake_turns(json!([{"fail": "model-server: scripted HTTP 401"},
                                 {"replies": [{"text": "Hi."}]}]));
    let steps = [
        prompt(3, "fail401 please"),
        Step::Response(json!(3)),
        prompt(4, "textonly please"),
        Step::Response(json!(4)),
        Step::Eof,
    ];
    let (wire, _) = run(target, fake, &steps)?;
    let failed = &response(&wire, &json!(3))?["error"];
    let wanted = json!({"code": -32603,
                        "message": "Internal error: turn failed: model-server: scripted HTTP 401"});
    expect(*failed == wanted, || {
        format!("the failed turn answered {failed}")
    })?;
    let next = &response(&wire, &json!(4))?["result"]["stopReason"];
    expect(*next == "end_turn", || format!("the next prompt: {next}"))
}

/// The permission request of an escalating turn, answered with `answer` (none: not answered
/// before `then`).
fn escalation(target: &AcpTarget, answer: Option<Value>, then: &[Step]) -> Result<Wire, String> {
    let fake = fake_turns(json!([fake_escalation(), {"replies": [{"text": "Hi."}]}]));
    let mut steps = vec![
        prompt(3, "escalate a command"),
        Step::Method("session/request_permission"),
    ];
    if let Some(answer) = answer {
        steps.push(Step::Send(
            json!({"jsonrpc": "2.0", "id": 0, "result": answer}),
        ));
    }
    steps.extend_from_slice(then);
    run(target, fake, &steps).map(|(wire, _)| wire)
}

/// F2.6, F7.2, F7.3: the permission request is the agent's request 0 with the two options and
/// only the call's id; a rejection fails the call and the turn ends `end_turn`.
fn permission(target: &AcpTarget) -> Result<(), String> {
    let reject = json!({"outcome": {"outcome": "selected", "optionId": "reject-once"}});
    let wire = escalation(target, Some(reject), &[Step::Response(json!(3)), Step::Eof])?;
    let asked = wire
        .frames
        .iter()
        .find(|f| f["method"] == "session/request_permission")
        .ok_or("no session/request_permission")?;
    let options = json!([
        {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
        {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"}]);
    let params = &asked["params"];
    expect(
        asked["id"] == 0
            && params["options"] == options
            && params["toolCall"]
                .as_object()
                .is_some_and(|call| call.len() == 1),
        || format!("the permission request: {asked}"),
    )?;
    let failed = updates(&wire).into_iter().any(|u| {
        u["sessionUpdate"] == "tool_call_update"
            && u["status"] == "failed"
            && u["content"][0]["content"]["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("Error: the user rejected escalating this command"))
    });
    expect(failed, || "the rejected call fails".to_string())?;
    let stop = &response(&wire, &json!(3))?["result"]["stopReason"];
    expect(*stop == "end_turn", || format!("stopReason {stop}"))
}

/// F8.2: `session/cancel` while the permission request waits fails the call as cancelled, the
/// prompt ends `cancelled`, and the session takes the next prompt.
fn cancel(target: &AcpTarget) -> Result<(), String> {
    let cancel = Step::SendToSession(json!({"jsonrpc": "2.0", "method": "session/cancel",
                                            "params": {"sessionId": SESSION_PLACEHOLDER}}));
    let then = [
        cancel,
        Step::Response(json!(3)),
        prompt(4, "textonly please"),
        Step::Response(json!(4)),
        Step::Eof,
    ];
    let wire = escalation(target, None, &then)?;
    let stop = &response(&wire, &json!(3))?["result"]["stopReason"];
    expect(*stop == "cancelled", || {
        format!("the cancelled prompt: {stop}")
    })?;
    let failed = updates(&wire).into_iter().any(|u| {
        u["status"] == "failed"
            && u["content"][0]["content"]["text"]
                == "Error: approval for escalating to \"danger-full-access\" was cancelled"
    });
    expect(failed, || "the waiting call fails as cancelled".to_string())?;
    let next = &response(&wire, &json!(4))?["result"]["stopReason"];
    expect(*next == "end_turn", || format!("the next prompt: {next}"))
}

/// F9.1: a signal mid-turn answers the prompt `cancelled`, then the process exits `code`.
fn signal_mid_turn(
    target: &AcpTarget,
    signal: nix::sys::signal::Signal,
    code: i32,
) -> Result<(), String> {
    let wire = escalation(target, None, &[Step::Signal(signal)])?;
    let stop = &response(&wire, &json!(3))?["result"]["stopReason"];
    expect(*stop == "cancelled", || {
        format!("{signal}: the prompt: {stop}")
    })?;
    expect(wire.exit == Some(code), || {
        format!("{signal}: exit {:?}, not {code}", wire.exit)
    })
}

/// The kit's own rule on every surface (docs/surface-acp.md, "Process hygiene"): whatever the
/// runtime started ends with it. check-runtime is a child subreaper, so a daemon that left the
/// runtime's group is adopted, killed once the runtime exited, and reported here; the runs of the
/// checks before this one count too.
fn process_hygiene(target: &AcpTarget) -> Result<(), String> {
    let steps = [
        prompt(3, "Make a landing page"),
        Step::Response(json!(3)),
        Step::Eof,
    ];
    run(target, fake_turns(json!([fake_write()])), &steps)?;
    let left = crate::sdk_check::take_left_behind();
    expect(left.is_empty(), || {
        format!(
            "processes the runtime started were still running after it exited (killed): {}",
            left.join(", ")
        )
    })
}

fn sigterm(target: &AcpTarget) -> Result<(), String> {
    signal_mid_turn(target, nix::sys::signal::Signal::SIGTERM, 0)
}

fn sigint(target: &AcpTarget) -> Result<(), String> {
    signal_mid_turn(target, nix::sys::signal::Signal::SIGINT, 130)
}

/// F2.3, F4.6, F5.1: the transport's own answers and the method refusals, exact.
fn errors(target: &AcpTarget) -> Result<(), String> {
    let steps = [
        Step::Text("this is not json\n".to_string()),
        Step::Response(Value::Null),
        Step::Send(request(json!(5), "session/load", json!({}))),
        Step::Response(json!(5)),
        Step::Send(request(
            json!(6),
            "session/prompt",
            json!({"sessionId": "nope", "prompt": [{"type": "text", "text": "x"}]}),
        )),
        Step::Response(json!(6)),
        Step::Eof,
    ];
    let (wire, _) = run(target, fake_turns(json!([])), &steps)?;
    let wanted = [
        (
            Value::Null,
            json!({"code": -32700, "message": "Parse error"}),
        ),
        (
            json!(5),
            json!({"code": -32601, "message": "\"Method not found\": session/load",
                          "data": {"method": "session/load"}}),
        ),
        (
            json!(6),
            json!({"code": -32602, "message": "Invalid params: unknown session: nope"}),
        ),
    ];
    for (id, error) in wanted {
        let got = &response(&wire, &id)?["error"];
        expect(*got == error, || format!("id {id}: {got}, not {error}"))?;
    }
    Ok(())
}

/// F4.3, F4.4: a session stored by one process is listed by the next, resumed cold (no
/// history replayed) and prompted again.
fn cold_resume(target: &AcpTarget) -> Result<(), String> {
    let world = World::new()?;
    let (first, _server) = command(target, &world, &fake_turns(json!([fake_write()])))?;
    let mut steps = open(&world);
    steps.extend([
        prompt(3, "Make a landing page"),
        Step::Response(json!(3)),
        Step::Eof,
    ]);
    target.drive(first, &steps, &world)?;
    let hi = fake_turns(json!([{"replies": [{"text": "Hi."}]}]));
    let (second, _server) = command(target, &world, &hi)?;
    let project = world.path("project");
    let steps = [
        Step::Send(request(json!(1), "session/list", json!({}))),
        Step::Response(json!(1)),
        Step::SendToSession(request(
            json!(2),
            "session/resume",
            json!({"sessionId": SESSION_PLACEHOLDER, "cwd": project, "mcpServers": []}),
        )),
        Step::Response(json!(2)),
        prompt(3, "textonly please"),
        Step::Response(json!(3)),
        Step::Eof,
    ];
    let wire = target.drive(second, &steps, &world)?;
    let listed = &response(&wire, &json!(1))?["result"]["sessions"];
    expect(listed.as_array().is_some_and(|s| s.len() == 1), || {
        format!("session/list in a new process: {listed}")
    })?;
    let resumed = response(&wire, &json!(2))?;
    let before: Vec<&Value> = wire
        .frames
        .iter()
        .take_while(|f| f["id"] != 2 || f.get("method").is_some())
        .filter(|f| f["method"] == "session/update")
        .collect();
    expect(
        resumed["result"]["configOptions"].is_array() && before.is_empty(),
        || {
            format!(
                "session/resume answered {resumed} after {} updates",
                before.len()
            )
        },
    )?;
    let stop = &response(&wire, &json!(3))?["result"]["stopReason"];
    expect(*stop == "end_turn", || {
        format!("the resumed session's prompt: {stop}")
    })
}

/// The checks, in order.
pub fn checks() -> Vec<AcpCheck> {
    vec![
        AcpCheck {
            id: "acp.initialize",
            rule: "F3.1 F4.1 F9.1",
            run: initialize,
        },
        AcpCheck {
            id: "acp.write-turn",
            rule: "F5.3 F5.5 F5.7",
            run: write_turn,
        },
        AcpCheck {
            id: "acp.failed-turn",
            rule: "F5.8",
            run: failed_turn,
        },
        AcpCheck {
            id: "acp.permission",
            rule: "F2.6 F7.2 F7.3",
            run: permission,
        },
        AcpCheck {
            id: "acp.cancel",
            rule: "F8.2",
            run: cancel,
        },
        AcpCheck {
            id: "acp.sigterm",
            rule: "F9.1",
            run: sigterm,
        },
        AcpCheck {
            id: "acp.sigint",
            rule: "F9.1",
            run: sigint,
        },
        AcpCheck {
            id: "acp.errors",
            rule: "F2.3 F4.6 F5.1",
            run: errors,
        },
        AcpCheck {
            id: "acp.cold-resume",
            rule: "F4.3 F4.4",
            run: cold_resume,
        },
        AcpCheck {
            id: "acp.process-hygiene",
            rule: "kit",
            run: process_hygiene,
        },
    ]
}

/// Runs the checks `selected` keeps, in order, handing each outcome to `on_check` as it ends;
/// the JSON report (`checks`, `totals`) of those that ran. The caller prints and decides the exit.
pub fn check_all(
    target: &AcpTarget,
    selected: &dyn Fn(&str) -> bool,
    on_check: &mut dyn FnMut(&AcpCheck, &Result<(), String>),
) -> Value {
    let mut results = Vec::new();
    for check in checks().into_iter().filter(|check| selected(check.id)) {
        let outcome = (check.run)(target);
        on_check(&check, &outcome);
        results.push(json!({"id": check.id, "rule": check.rule,
            "status": if outcome.is_ok() { "pass" } else { "fail" }, "detail": outcome.err()}));
    }
    let failed = results.iter().filter(|r| r["status"] == "fail").count();
    json!({"v": 1, "runtime": target.dsh.to_string_lossy(), "surface": "acp",
        "checks": results, "totals": {"pass": results.len() - failed, "fail": failed}})
}
