//! The catalogue of runtime-side checks: each has a stable id, the spec rule it enforces, and a
//! procedure that judges either what its own runtime process did in a fresh world, or a turn
//! observed once for several checks ([`super::observed`]). What a check is and what it concludes
//! are in [`super::verdict`]; the catalog and product checks live in [`super::models`] and
//! [`super::product`].

use super::turn::{
    self, describe_terminal, Ending, LineKind, Plan, SeenLine, ANSWER_MS, EXIT_MS, READY_MS,
};
use super::verdict::{
    fail, inconclusive, informational, ms, no_result, pass, run_surface, schema_problem, Check,
    Outcome, Procedure, SurfaceRun, SURFACE_MS,
};
use super::world::{json_line, Target, World, PROFILE};
use dsh_engine::process::{describe_exit, Next, SpawnError, StdoutEvent};
use dsh_protocol::frames::{CONTENT_FRAME_TYPES, RUN_FRAME_TYPES};
use dsh_protocol::{RunContext, Terminal};
use serde_json::Value;
use std::time::Instant;

/// The most stderr a runtime may write in one turn (the same bound hosts keep, docs/host-driver.md).
pub const STDERR_LIMIT_BYTES: u64 = 64 * 1024;

/// Every check, in the order they run and are reported.
pub const CHECKS: &[Check] = &[
    Check {
        id: "rt.version-shape",
        rule: "s5.version-usable-identity",
        summary: "`dsh --version` exits 0 and its first line holds a semver",
        procedure: Procedure::Fresh(version_shape),
    },
    Check {
        id: "rt.probe-shape",
        rule: "s5.probe-compatible-frame",
        summary: "`--probe` exits 0 with exactly one schema-valid, compatible probe frame",
        procedure: Procedure::Fresh(probe_shape),
    },
    Check {
        id: "rt.models-shape",
        rule: "s12.models-discovery",
        summary: "`--models` exits 0 with exactly one schema-valid models frame: at least one model, each effort list with at most one default",
        procedure: Procedure::Observed(super::models::models_shape),
    },
    Check {
        id: "rt.models-routes-accepted",
        rule: "s12.route-reaches-execute",
        summary: "an execute with each listed route, and each of its efforts, is accepted and completes",
        procedure: Procedure::Fresh(super::models::routes_accepted),
    },
    Check {
        id: "rt.ready-before-read",
        rule: "s7.validate-ready",
        summary: "`ready` arrives before the host writes anything",
        procedure: Procedure::Observed(ready_before_read),
    },
    Check {
        id: "rt.ready-first",
        rule: "s6.ready-identity",
        summary: "the first stdout line is a compatible `ready` frame",
        procedure: Procedure::Observed(ready_first),
    },
    Check {
        id: "rt.stdout-frames-only",
        rule: "s14.stdout-frames-only",
        summary: "every non-empty stdout line is one JSON object (no banner, log line or partial line)",
        procedure: Procedure::Observed(stdout_frames_only),
    },
    Check {
        id: "rt.frames-schema-valid",
        rule: "s6.frame-matches-generation-1",
        summary: "every frame is valid against schemas/frame.schema.json (generation 1)",
        procedure: Procedure::Observed(frames_schema_valid),
    },
    Check {
        id: "rt.request-scoped",
        rule: "s6.request-id-after-ready",
        summary: "every run-scoped frame after `ready` carries the active request_id",
        procedure: Procedure::Observed(request_scoped),
    },
    Check {
        id: "rt.session-before-content",
        rule: "s6.session-before-content",
        summary: "`session` arrives before any content or tool frame",
        procedure: Procedure::Observed(session_before_content),
    },
    Check {
        id: "rt.stream-strict",
        rule: "s6.one-terminal-result",
        summary: "the whole turn passes the strict stream checker and ends in one terminal result",
        procedure: Procedure::Observed(stream_strict),
    },
    Check {
        id: "rt.exit-after-result",
        rule: "s6.runtime-exits-after-result",
        summary: "with stdin still open, the runtime exits after its terminal result and leaves no process behind",
        procedure: Procedure::Observed(exit_after_result),
    },
    Check {
        id: "rt.malformed-command",
        rule: "s6.protocol-error-fatal",
        summary: "a non-JSON host line is answered with `protocol_error` or a structured failure",
        procedure: Procedure::Fresh(malformed_command),
    },
    Check {
        id: "rt.unknown-command",
        rule: "s6.protocol-error-fatal",
        summary: "a host command of unknown type is answered with `protocol_error` or a structured failure",
        procedure: Procedure::Fresh(unknown_command),
    },
    Check {
        id: "rt.second-execute",
        rule: "s7.new-process-per-turn",
        summary: "a second execute in one process is refused without starting a second run",
        procedure: Procedure::Fresh(second_execute),
    },
    Check {
        id: "rt.cancel-honoured",
        rule: "s10.cancel-grace-for-cancelled",
        summary: "a protocol cancel yields `result: cancelled` within the grace bound",
        procedure: Procedure::Fresh(cancel_honoured),
    },
    Check {
        id: "rt.cancelled-names-announced-session",
        rule: "s6.result-session-matches",
        summary: "a cancel before the session frame is answered by a result naming only an announced session (informational: an interop hazard)",
        procedure: Procedure::Fresh(cancelled_names_announced_session),
    },
    Check {
        id: "rt.resume-unknown-refused",
        rule: "s6.no-silent-new-session",
        summary: "resuming an unknown session fails with resume_rejected and creates no session",
        procedure: Procedure::Observed(resume_unknown_refused),
    },
    Check {
        id: "rt.exit-after-failed-result",
        rule: "s6.runtime-exits-after-result",
        summary: "with stdin still open, the runtime exits after a failed terminal result (the unknown resume's) and leaves no process behind",
        procedure: Procedure::Observed(exit_after_failed_result),
    },
    Check {
        id: "rt.stderr-bounded",
        rule: "s6.diagnostics-bounded-stderr",
        summary: "a turn writes at most 64 KiB to stderr",
        procedure: Procedure::Observed(stderr_bounded),
    },
    Check {
        id: "rt.stderr-no-prompt",
        rule: "s6.no-secret-logging",
        summary: "the prompt never appears on stderr",
        procedure: Procedure::Observed(stderr_no_prompt),
    },
    Check {
        id: "rt.stderr-no-secret",
        rule: "s6.no-secret-logging",
        summary: "the DEEPSEEK_API_KEY value never appears on stderr or stdout",
        procedure: Procedure::Observed(stderr_no_secret),
    },
    Check {
        id: "rt.product-writes-html",
        rule: "s8.harness-writes-project-files",
        summary: "a completed turn whose model calls tools leaves an HTML file in the project",
        procedure: Procedure::Observed(super::product::writes_html),
    },
    Check {
        id: "rt.product-cold-resume-edits",
        rule: "s8.artifact-cold-resume-edit",
        summary: "a second process cold-resumes the session and edits the same HTML file",
        procedure: Procedure::Observed(super::product::cold_resume_edits),
    },
];

pub fn find(id: &str) -> Option<&'static Check> {
    CHECKS.iter().find(|check| check.id == id)
}

// ---------------------------------------------------------------------------------------------
// CLI surfaces

/// `0.1.7`, `v0.1.7-rc.1`, `dsh 0.1.7 (build x)`: a semver token somewhere in the line.
pub fn find_semver(line: &str) -> Option<&str> {
    line.split_whitespace()
        .map(|token| token.strip_prefix('v').unwrap_or(token))
        .find(|token| {
            let core = token.split(['-', '+']).next().unwrap_or("");
            let parts: Vec<&str> = core.split('.').collect();
            parts.len() == 3
                && parts
                    .iter()
                    .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
        })
}

fn version_shape(target: &Target, world: &World) -> Result<Outcome, SpawnError> {
    let mut process = world.spawn(target, &["--version"])?;
    process.close_stdin();
    let deadline = target.deadline(SURFACE_MS);
    let mut first_line: Option<Vec<u8>> = None;
    loop {
        match process.next_event(deadline) {
            Next::Event(StdoutEvent::Line(event), _) => {
                if first_line.is_none() {
                    first_line = Some(match event {
                        dsh_protocol::LineEvent::Line { bytes, .. }
                        | dsh_protocol::LineEvent::Truncated { bytes, .. } => bytes,
                        dsh_protocol::LineEvent::TooLarge { .. } => b"<a line over 1 MiB>".to_vec(),
                    });
                }
            }
            Next::Event(StdoutEvent::Eof, _) | Next::Closed => break,
            Next::Timeout => {
                return Ok(fail(format!(
                    "`--version` did not finish within {}",
                    ms(target.bound(SURFACE_MS))
                )))
            }
        }
    }
    let Some((status, _)) = process.wait_exit(deadline) else {
        return Ok(fail("`--version` closed stdout but did not exit"));
    };
    if !status.success() {
        return Ok(fail(format!(
            "`--version` ended with {}",
            describe_exit(&status)
        )));
    }
    let Some(first_line) = first_line else {
        return Ok(fail("`--version` printed nothing"));
    };
    let text = String::from_utf8_lossy(&first_line);
    match find_semver(&text) {
        Some(version) => Ok(pass(format!("version {version}"))),
        None => Ok(fail(format!(
            "the first line of `--version` holds no semver: {}",
            turn::excerpt(&first_line)
        ))),
    }
}

/// Why a ready or probe frame is not compatible (spec 5), or `None`.
pub fn identity_problem(frame: &Value) -> Option<String> {
    if frame.get("runtime").and_then(Value::as_str) != Some(dsh_protocol::RUNTIME_ID) {
        return Some(format!(
            "runtime is {}, not \"open-design\"",
            frame.get("runtime").unwrap_or(&Value::Null)
        ));
    }
    if frame.get("protocol_version").and_then(Value::as_u64) != Some(dsh_protocol::PROTOCOL_VERSION)
    {
        return Some(format!(
            "protocol_version is {}, not 1",
            frame.get("protocol_version").unwrap_or(&Value::Null)
        ));
    }
    for capability in ["session_resume", "session_cancel", "structured_events"] {
        let value = frame.pointer(&format!("/capabilities/{capability}"));
        if value != Some(&Value::Bool(true)) {
            return Some(format!(
                "capabilities.{capability} is {}, not true",
                value.unwrap_or(&Value::Null)
            ));
        }
    }
    None
}

fn probe_shape(target: &Target, world: &World) -> Result<Outcome, SpawnError> {
    let SurfaceRun { lines, exit, code } =
        match run_surface(target, world, &["--profile", PROFILE, "--probe"])? {
            Ok(done) => done,
            Err(why) => return Ok(fail(format!("`--probe` {why}"))),
        };
    if code != 0 {
        return Ok(fail(format!("`--probe` ended with {exit}")));
    }
    let [line] = lines.as_slice() else {
        return Ok(fail(format!(
            "`--probe` printed {} non-empty lines, not exactly one",
            lines.len()
        )));
    };
    let frame = match &line.kind {
        LineKind::Object { value, .. } => value,
        LineKind::NotAFrame { why } => return Ok(fail(format!("the probe line is {why}"))),
        LineKind::TooLarge => return Ok(fail("the probe line is over 1 MiB")),
    };
    if frame.get("type").and_then(Value::as_str) != Some("probe") {
        return Ok(fail(format!(
            "the probe line has type {}, not \"probe\"",
            frame.get("type").unwrap_or(&Value::Null)
        )));
    }
    if let Some(problem) = schema_problem(frame) {
        return Ok(fail(format!(
            "the probe frame is not schema-valid: {problem}"
        )));
    }
    if let Some(problem) = identity_problem(frame) {
        return Ok(fail(format!("the probe frame is incompatible: {problem}")));
    }
    let plugin_version = frame
        .get("plugin_version")
        .and_then(Value::as_str)
        .unwrap_or("?");
    Ok(pass(format!(
        "probe: open-design protocol 1, plugin {plugin_version}"
    )))
}

// ---------------------------------------------------------------------------------------------
// ready

fn ready_before_read(target: &Target) -> Result<Outcome, SpawnError> {
    let record = &target.observed.default_turn(target)?.record;
    let first = record.lines.first();
    Ok(match first {
        Some(line) if turn::is_ready(line) && record.ready_before_write => pass(format!(
            "ready after {} with nothing written",
            ms(line.at.duration_since(record.started))
        )),
        Some(line) if line.at < record.execute_at => fail(format!(
            "the first line, before the host wrote anything, is not ready: {}",
            describe_line(line)
        )),
        None if record.ending == Ending::Eof => {
            fail("stdout closed before any ready frame, with nothing written")
        }
        _ => fail(format!(
            "no ready frame within {} while the host wrote nothing",
            ms(target.bound(READY_MS))
        )),
    })
}

fn describe_line(line: &SeenLine) -> String {
    match &line.kind {
        LineKind::Object { value, .. } => format!(
            "line {} is a {} frame",
            line.number,
            value
                .get("type")
                .map(ToString::to_string)
                .unwrap_or_else(|| "type-less".to_string())
        ),
        LineKind::NotAFrame { why } => format!("line {} is {why}", line.number),
        LineKind::TooLarge => format!("line {} is over 1 MiB", line.number),
    }
}

fn ready_first(target: &Target) -> Result<Outcome, SpawnError> {
    let record = &target.observed.default_turn(target)?.record;
    let Some(first) = record.lines.first() else {
        return Ok(fail("the runtime wrote nothing on stdout"));
    };
    if !turn::is_ready(first) {
        return Ok(fail(format!(
            "the first stdout line is not ready: {}",
            describe_line(first)
        )));
    }
    let frame = first.object().expect("a ready line is an object");
    if let Some(problem) = schema_problem(frame) {
        return Ok(fail(format!(
            "the ready frame is not schema-valid: {problem}"
        )));
    }
    if let Some(problem) = identity_problem(frame) {
        return Ok(fail(format!("the ready frame is incompatible: {problem}")));
    }
    if let Some(second) = record
        .lines
        .iter()
        .skip(1)
        .find(|line| turn::is_ready(line))
    {
        return Ok(fail(format!(
            "a second ready frame on line {}",
            second.number
        )));
    }
    Ok(pass("line 1 is a compatible ready frame"))
}

// ---------------------------------------------------------------------------------------------
// the stream of one turn

fn stdout_frames_only(target: &Target) -> Result<Outcome, SpawnError> {
    let record = &target.observed.default_turn(target)?.record;
    for line in &record.lines {
        match &line.kind {
            LineKind::Object { .. } => {}
            LineKind::NotAFrame { why } => {
                return Ok(fail(format!("line {} is {why}", line.number)))
            }
            LineKind::TooLarge => return Ok(fail(format!("line {} is over 1 MiB", line.number))),
        }
    }
    if record.lines.is_empty() {
        return Ok(fail("the runtime wrote nothing on stdout"));
    }
    Ok(pass(format!(
        "{} lines, each one JSON object",
        record.lines.len()
    )))
}

fn frames_schema_valid(target: &Target) -> Result<Outcome, SpawnError> {
    let record = &target.observed.default_turn(target)?.record;
    let mut frames = 0;
    for line in &record.lines {
        if let Some(frame) = line.object() {
            frames += 1;
            if let Some(problem) = schema_problem(frame) {
                return Ok(fail(format!("line {}: {problem}", line.number)));
            }
        }
    }
    if frames == 0 {
        return Ok(fail("the runtime wrote no frames"));
    }
    Ok(pass(format!("{frames} frames, all schema-valid")))
}

fn request_scoped(target: &Target) -> Result<Outcome, SpawnError> {
    let record = &target.observed.default_turn(target)?.record;
    let mut scoped = 0;
    for line in &record.lines {
        let Some(kind) = line.frame_type() else {
            continue;
        };
        let id = line.object().and_then(|frame| frame.get("request_id"));
        let must_carry = RUN_FRAME_TYPES.contains(&kind);
        match id {
            None | Some(Value::Null) if must_carry => {
                return Ok(fail(format!(
                    "line {}: the {kind} frame has no request_id",
                    line.number
                )))
            }
            Some(Value::String(id)) if id != &record.request_id => {
                return Ok(fail(format!(
                    "line {}: the {kind} frame carries request_id {id:?}, not the active {:?}",
                    line.number, record.request_id
                )))
            }
            Some(Value::String(_)) => scoped += 1,
            None | Some(Value::Null) => {}
            Some(other) => {
                return Ok(fail(format!(
                    "line {}: request_id is {other}, not a string",
                    line.number
                )))
            }
        }
    }
    if scoped == 0 {
        return Ok(fail(format!(
            "no frame carried the request_id; {}",
            no_result(record)
        )));
    }
    Ok(pass(format!(
        "{scoped} run-scoped frames, all for the active request"
    )))
}

fn session_before_content(target: &Target) -> Result<Outcome, SpawnError> {
    let record = &target.observed.default_turn(target)?.record;
    let mut session_seen = false;
    let mut content = 0;
    for line in record.own_frames() {
        match line.frame_type() {
            Some("session") => session_seen = true,
            Some(kind) if CONTENT_FRAME_TYPES.contains(&kind) => {
                if !session_seen {
                    return Ok(fail(format!(
                        "line {}: a {kind} frame before the session frame",
                        line.number
                    )));
                }
                content += 1;
            }
            _ => {}
        }
    }
    match (session_seen, content) {
        (true, _) => Ok(pass(format!(
            "session first, then {content} content/tool frames"
        ))),
        (false, _) => Ok(inconclusive(format!(
            "the turn had no session frame and no content frames ({})",
            record
                .result_frame()
                .map(|result| format!("result {}", result.get("status").unwrap_or(&Value::Null)))
                .unwrap_or_else(|| no_result(record))
        ))),
    }
}

fn stream_strict(target: &Target) -> Result<Outcome, SpawnError> {
    let record = &target.observed.default_turn(target)?.record;
    match &record.terminal {
        Terminal::Result(_) => {
            let status = record
                .result_frame()
                .and_then(|result| result.get("status"))
                .and_then(Value::as_str)
                .unwrap_or("?");
            Ok(pass(format!(
                "one terminal result ({status}); the strict checker accepted the stream"
            )))
        }
        Terminal::Violation(_) if record.ending == Ending::Timeout => Ok(fail(format!(
            "{}; {}",
            no_result(record),
            describe_terminal(&record.terminal)
        ))),
        Terminal::Violation(_) => Ok(fail(describe_terminal(&record.terminal))),
    }
}

fn exit_after_result(target: &Target) -> Result<Outcome, SpawnError> {
    let record = &target.observed.default_turn(target)?.record;
    Ok(judge_exit(target, record, "its terminal result"))
}

fn exit_after_failed_result(target: &Target) -> Result<Outcome, SpawnError> {
    let (observed, _) = target.observed.unknown_resume(target)?;
    let record = &observed.record;
    let status = record
        .result_frame()
        .and_then(|result| result.get("status"))
        .and_then(Value::as_str);
    if record.ending == Ending::Result && status != Some("failed") {
        return Ok(inconclusive(format!(
            "the unknown resume ended {}, not failed (see rt.resume-unknown-refused)",
            status.unwrap_or("?")
        )));
    }
    Ok(judge_exit(target, record, "its failed result"))
}

/// Whether the runtime of a turn whose stdin stayed open exited by itself after `what`.
fn judge_exit(target: &Target, record: &turn::TurnRecord, what: &str) -> Outcome {
    if record.ending != Ending::Result {
        return inconclusive(format!(
            "{}, so exit after it cannot be judged",
            no_result(record)
        ));
    }
    match record.exit {
        None => fail(format!(
            "still running {} after {what}, with stdin open",
            ms(target.bound(EXIT_MS))
        )),
        Some(_) if record.left_processes => fail(format!(
            "exited after {what} but left processes of its group running"
        )),
        Some((status, after)) => pass(format!(
            "{} {} after {what}",
            describe_exit(&status),
            ms(after)
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// host misbehaviour

/// After `ready`, write `line`; an answer is a protocol_error frame or a failed result.
fn answered_with_error(
    target: &Target,
    world: &World,
    line: &[u8],
    what: &str,
) -> Result<Outcome, SpawnError> {
    let mut process = world.spawn_stdio(target)?;
    let context = RunContext {
        request_id: world.request_id.clone(),
        resume_session_id: None,
    };
    let mut reader = turn::Reader::new(&mut process, context);
    if reader.read_until(target.deadline(READY_MS), turn::is_ready) != turn::Stop::Matched {
        return Ok(inconclusive(
            "no ready frame, so the command was not sent (see rt.ready-first)",
        ));
    }
    reader.process.write(line);
    let bound = target.bound(ANSWER_MS);
    let is_answer = |line: &SeenLine| match line.frame_type() {
        Some("protocol_error") => true,
        Some("result") => {
            line.object().and_then(|frame| frame.get("status")) == Some(&Value::from("failed"))
        }
        _ => false,
    };
    let stop = reader.read_until(Instant::now() + bound, is_answer);
    let outcome = match stop {
        turn::Stop::Matched => {
            let answer = reader.lines.last().expect("a matched line");
            pass(format!(
                "answered with a {} frame on line {}",
                answer.frame_type().unwrap_or("?"),
                answer.number
            ))
        }
        turn::Stop::Eof => {
            drop(reader);
            let exit = process
                .wait_exit(target.deadline(EXIT_MS))
                .map(|(status, _)| describe_exit(&status))
                .unwrap_or_else(|| "no exit".to_string());
            return Ok(fail(format!(
                "{what}: stdout closed ({exit}) without a protocol_error or failed result"
            )));
        }
        turn::Stop::Timeout => fail(format!(
            "{what}: no protocol_error or failed result within {}",
            ms(bound)
        )),
    };
    drop(reader);
    process.close_stdin();
    process.wait_exit(target.deadline(EXIT_MS));
    Ok(outcome)
}

fn malformed_command(target: &Target, world: &World) -> Result<Outcome, SpawnError> {
    answered_with_error(
        target,
        world,
        b"this is not a protocol command {\n",
        "a non-JSON line",
    )
}

fn unknown_command(target: &Target, world: &World) -> Result<Outcome, SpawnError> {
    let line = json_line(&serde_json::json!({
        "v": 1, "type": "rt_unknown_command", "request_id": world.request_id
    }));
    answered_with_error(target, world, &line, "an unknown command type")
}

fn second_execute(target: &Target, world: &World) -> Result<Outcome, SpawnError> {
    let second_id = format!("{}-second", world.request_id);
    let plan = Plan {
        after_execute: world.execute_line(&second_id, None),
        ..Plan::default()
    };
    let record = turn::run(target, world, &plan)?;
    let for_second: Vec<&SeenLine> = record
        .lines
        .iter()
        .filter(|line| line.request_id() == Some(second_id.as_str()))
        .collect();
    if let Some(line) = for_second.iter().find(|line| {
        line.frame_type() == Some("session")
            || line
                .frame_type()
                .is_some_and(|kind| CONTENT_FRAME_TYPES.contains(&kind))
    }) {
        return Ok(fail(format!(
            "line {}: a {} frame for the second execute: a second run started",
            line.number,
            line.frame_type().unwrap_or("?")
        )));
    }
    let refusal = record
        .lines
        .iter()
        .skip_while(|line| line.at < record.execute_at)
        .find(|line| match line.frame_type() {
            Some("protocol_error") => true,
            Some("result") => {
                line.request_id() == Some(second_id.as_str())
                    && line.object().and_then(|frame| frame.get("status"))
                        == Some(&Value::from("failed"))
            }
            _ => false,
        });
    match refusal {
        Some(line) => Ok(pass(format!(
            "refused with a {} frame on line {}",
            line.frame_type().unwrap_or("?"),
            line.number
        ))),
        None => Ok(fail(
            "the second execute got no protocol_error or failed result: it was silently ignored",
        )),
    }
}

/// A turn whose cancel goes out right after the execute, before any frame of the run.
fn cancelled_at_once(target: &Target, world: &World) -> Result<turn::TurnRecord, SpawnError> {
    let plan = Plan {
        after_execute: world.cancel_line(&world.request_id),
        cancels: true,
        result_bound_ms: Some(ANSWER_MS),
        ..Plan::default()
    };
    turn::run(target, world, &plan)
}

fn cancel_honoured(target: &Target, world: &World) -> Result<Outcome, SpawnError> {
    let record = cancelled_at_once(target, world)?;
    let Some(result) = record.result_frame() else {
        return Ok(fail(format!("after the cancel: {}", no_result(&record))));
    };
    let status = result.get("status").and_then(Value::as_str).unwrap_or("?");
    let after = record.lines[record.result.expect("a result")]
        .at
        .saturating_duration_since(record.execute_at);
    match status {
        "cancelled" => Ok(pass(format!(
            "result: cancelled {} after the cancel",
            ms(after)
        ))),
        other => Ok(inconclusive(format!(
            "the turn ended with result: {other} before the cancel took effect"
        ))),
    }
}

/// What a host may make of a result naming a session no session frame announced.
pub const UNANNOUNCED_SESSION_HAZARD: &str = "the spec allows it (the session is kept only once a session frame was validated, spec 7), but a host that requires a result to name the announced session reports the turn as a protocol error: OpenDesign's own host did before it was fixed upstream. Send the session frame first, or expect older hosts to fail such a cancel";

/// A cancel sent right after the execute, before any session frame: the real open-design bundle
/// answers `result: cancelled` naming a session it never announced. Allowed, but an interop
/// hazard worth telling runtime authors about.
fn cancelled_names_announced_session(
    target: &Target,
    world: &World,
) -> Result<Outcome, SpawnError> {
    let record = cancelled_at_once(target, world)?;
    let Some(result) = record.result_frame() else {
        return Ok(inconclusive(format!(
            "after the cancel: {}",
            no_result(&record)
        )));
    };
    let announced = record
        .own_frames()
        .find(|line| line.frame_type() == Some("session"))
        .and_then(|line| line.object()?.get("session_id").cloned());
    let named = result.get("session_id").cloned().unwrap_or(Value::Null);
    let status = result.get("status").and_then(Value::as_str).unwrap_or("?");
    match announced {
        Some(announced) if announced == named => Ok(pass(format!(
            "result: {status} names session {named}, announced by the session frame"
        ))),
        Some(announced) => Ok(inconclusive(format!(
            "result: {status} names session {named} but the session frame said {announced} (rt.stream-strict judges that)"
        ))),
        None => Ok(informational(format!(
            "result: {status} names session {named}, which no session frame announced: {UNANNOUNCED_SESSION_HAZARD}"
        ))),
    }
}

fn resume_unknown_refused(target: &Target) -> Result<Outcome, SpawnError> {
    let (observed, unknown) = target.observed.unknown_resume(target)?;
    let record = &observed.record;
    if let Some(session) = record
        .own_frames()
        .find(|line| line.frame_type() == Some("session"))
    {
        let frame = session.object().expect("a session line is an object");
        return Ok(fail(format!(
            "line {}: a session frame (session_id {}, resumed {}) for a session that does not exist",
            session.number,
            frame.get("session_id").unwrap_or(&Value::Null),
            frame.get("resumed").unwrap_or(&Value::Null)
        )));
    }
    let Some(result) = record.result_frame() else {
        return Ok(fail(no_result(record)));
    };
    let status = result.get("status").and_then(Value::as_str).unwrap_or("?");
    if status != "failed" {
        return Ok(fail(format!(
            "result: {status} for a resume of an unknown session"
        )));
    }
    if result.get("resume_rejected") != Some(&Value::Bool(true)) {
        return Ok(fail("result: failed without resume_rejected: true"));
    }
    let code = result.pointer("/error/code").and_then(Value::as_str);
    let message = result.pointer("/error/message").and_then(Value::as_str);
    let (Some(code), Some(_)) = (code, message) else {
        return Ok(fail(
            "result: failed without a structured error {code, message}",
        ));
    };
    match result.get("session_id") {
        Some(Value::String(id)) if id != unknown => Ok(fail(format!(
            "the failed result names another session {id:?}: a new session was created"
        ))),
        _ => Ok(pass(format!(
            "result: failed, resume_rejected, error {code}"
        ))),
    }
}

// ---------------------------------------------------------------------------------------------
// hygiene

fn stderr_bounded(target: &Target) -> Result<Outcome, SpawnError> {
    let record = &target.observed.default_turn(target)?.record;
    let total = record.stderr.total_bytes;
    if total > STDERR_LIMIT_BYTES {
        return Ok(fail(format!(
            "{total} bytes on stderr in one turn (limit {STDERR_LIMIT_BYTES})"
        )));
    }
    Ok(pass(format!("{total} bytes on stderr")))
}

fn stderr_no_prompt(target: &Target) -> Result<Outcome, SpawnError> {
    let record = &target.observed.default_turn(target)?.record;
    if record.stderr.found.first() == Some(&true) {
        return Ok(fail("the prompt appeared on stderr"));
    }
    Ok(pass(format!(
        "prompt absent from {} bytes of stderr",
        record.stderr.total_bytes
    )))
}

fn stderr_no_secret(target: &Target) -> Result<Outcome, SpawnError> {
    let super::observed::Observed { world, record, .. } = target.observed.default_turn(target)?;
    if record.stderr.found.get(1) == Some(&true) {
        return Ok(fail("the DEEPSEEK_API_KEY value appeared on stderr"));
    }
    let key = Value::from(world.key_canary.as_str());
    let leaked = record.lines.iter().find(|line| match line.object() {
        Some(frame) => frame.to_string().contains(&world.key_canary) || frame == &key,
        None => false,
    });
    if let Some(line) = leaked {
        return Ok(fail(format!(
            "line {}: the DEEPSEEK_API_KEY value appeared on stdout",
            line.number
        )));
    }
    Ok(pass("the credential appeared on neither stream"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn semver_is_found_in_common_shapes() {
        assert_eq!(find_semver("0.1.7-rc.1"), Some("0.1.7-rc.1"));
        assert_eq!(find_semver("dsh v0.1.7 (linux)"), Some("0.1.7"));
        assert_eq!(find_semver("dsh version unknown"), None);
        assert_eq!(find_semver("1.2"), None);
    }

    #[test]
    fn check_ids_are_unique_and_stable_shaped() {
        let mut ids: Vec<&str> = CHECKS.iter().map(|check| check.id).collect();
        assert!(ids.iter().all(|id| id.starts_with("rt.")));
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), CHECKS.len());
    }

    #[test]
    fn identity_needs_every_capability() {
        let mut ready = serde_json::json!({
            "runtime": "open-design", "protocol_version": 1,
            "capabilities": {"session_resume": true, "session_cancel": true, "structured_events": true}
        });
        assert_eq!(identity_problem(&ready), None);
        ready["capabilities"]["session_cancel"] = Value::Bool(false);
        assert!(identity_problem(&ready).unwrap().contains("session_cancel"));
    }
}
