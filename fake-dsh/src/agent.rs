//! The default agent's turn: session (new or resumed), thinking, text deltas, a tool call that
//! really writes (or, on a resumed turn, edits) the HTML design file, its result, usage and a
//! terminal result; honouring cancel and answering stray commands between frames.

use crate::design;
use crate::frames;
use crate::inbox::{remaining, Wait};
use crate::sessions::{self, LoadError, SessionRecord};
use crate::stdio::{Command, Context, Execute};
use dsh_protocol::frames::TokenCounts;
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnEnd {
    Completed,
    Cancelled,
    Failed,
}

/// Code of the `protocol_error` for a line that is not JSON.
pub const MALFORMED_COMMAND: &str = "MALFORMED_COMMAND";
/// Code of the `protocol_error` for JSON that is not a valid command.
pub const INVALID_COMMAND: &str = "INVALID_COMMAND";
/// Code of the `protocol_error` for an `execute` while one is active.
pub const DUPLICATE_EXECUTE: &str = "DUPLICATE_EXECUTE";

/// Answers a command that arrived while no turn runs (before the execute).
pub fn answer_idle(context: &mut Context, command: &Command) {
    match command {
        Command::Cancel(request_id) => {
            context.cancelled.insert(request_id.clone());
        }
        Command::Invalid(request_id, why) => {
            let frame = frames::protocol_error(request_id.as_deref(), INVALID_COMMAND, why);
            context.out.write_frame(&frame);
        }
        Command::Unparseable => {
            let frame =
                frames::protocol_error(None, MALFORMED_COMMAND, "command is not a JSON object");
            context.out.write_frame(&frame);
        }
        Command::Execute(_) | Command::Closed => {}
    }
}

/// Answers a command during a turn; true when it cancels the active request.
fn answer_during_turn(context: &mut Context, command: &Command) -> bool {
    match command {
        Command::Execute(second) => {
            let frame = frames::protocol_error(
                Some(&second.request_id),
                DUPLICATE_EXECUTE,
                "an execute is already active in this process",
            );
            context.out.write_frame(&frame);
            false
        }
        Command::Cancel(request_id) => {
            context.cancelled.insert(request_id.clone());
            context.active_cancelled()
        }
        other => {
            answer_idle(context, other);
            false
        }
    }
}

/// Waits out the step delay (at least polls once), answering commands; true when cancelled.
fn between_frames(context: &mut Context) -> bool {
    if context.active_cancelled() {
        return true;
    }
    let delay = Duration::from_millis(context.knobs.step_delay_ms.unwrap_or(0));
    let deadline = Instant::now() + delay;
    loop {
        let wait = if context.inbox.is_closed() {
            std::thread::sleep(remaining(deadline));
            Wait::TimedOut
        } else {
            context.inbox.next(Some(remaining(deadline)))
        };
        match wait {
            Wait::Got(inbound) => {
                let command = crate::stdio::classify(&inbound);
                if answer_during_turn(context, &command) {
                    return true;
                }
            }
            Wait::TimedOut => return false,
        }
        if remaining(deadline).is_zero() {
            while let Some(inbound) = context.inbox.poll() {
                let command = crate::stdio::classify(&inbound);
                if answer_during_turn(context, &command) {
                    return true;
                }
            }
            return false;
        }
    }
}

/// The session a turn serves.
struct Served {
    record: SessionRecord,
    resumed: bool,
}

/// The session an execute asks for: the stored one it resumes (else the rejection's code and
/// message; the scenario's `agent.resume_rejected_code` replaces the code), or a new one.
fn resolve_session(context: &Context, execute: &Execute) -> Result<Served, (String, String)> {
    if let Some(resume) = &execute.resume_session_id {
        let code = |default: &str| {
            let set = context.knobs.resume_rejected_code.as_deref();
            set.unwrap_or(default).to_string()
        };
        return match sessions::load(&context.session_dir, resume) {
            Ok(record) => Ok(Served {
                record,
                resumed: true,
            }),
            Err(LoadError::NotFound) => Err((
                code("SESSION_NOT_FOUND"),
                format!("no session {resume:?} in this Harness home"),
            )),
            Err(LoadError::Corrupt(_)) => Err((
                code("SESSION_CORRUPT"),
                format!("the record of session {resume:?} cannot be read"),
            )),
        };
    }
    let session_id = context
        .session_sent
        .clone()
        .unwrap_or_else(|| context.fresh_session_id.clone());
    let record = sessions::load(&context.session_dir, &session_id)
        .unwrap_or_else(|_| SessionRecord::new(&session_id, &execute.cwd));
    Ok(Served {
        record,
        resumed: false,
    })
}

fn store(context: &Context, record: &SessionRecord) {
    if let Err(error) = sessions::save(&context.session_dir, record) {
        eprintln!("fake-dsh: cannot store the session record: {error}");
    }
}

fn cancel(context: &mut Context, request_id: &str, record: &mut SessionRecord) -> TurnEnd {
    record.finish_turn("cancelled");
    store(context, record);
    let frame = frames::result_cancelled(request_id, &record.session_id);
    context.out.write_frame(&frame);
    TurnEnd::Cancelled
}

/// Runs one turn for the bound execute and writes its terminal result.
pub fn run_turn(context: &mut Context) -> TurnEnd {
    let Some(execute) = context.execute.clone() else {
        return TurnEnd::Failed;
    };
    let mut served = match open_session(context, &execute) {
        Ok(served) => served,
        Err(end) => return end,
    };
    let turn = Turn::new(context, execute, &served);
    match play_turn(context, &turn, &mut served.record) {
        Ok(end) => end,
        Err(Cancelled) => cancel(context, &turn.request_id, &mut served.record),
    }
}

/// A cancel arrived between two frames: the turn ends with a cancelled result.
struct Cancelled;

/// What one turn works with, decided once its session is open.
struct Turn {
    execute: Execute,
    request_id: String,
    session_id: String,
    html_name: String,
    /// The turn's number in its session (1 for the first).
    revision: usize,
    /// Whether the turn edits an existing design (resumed, or not the session's first turn).
    edit: bool,
}

impl Turn {
    fn new(context: &Context, execute: Execute, served: &Served) -> Turn {
        let revision = served.record.turns.len();
        Turn {
            request_id: execute.request_id.clone(),
            session_id: served.record.session_id.clone(),
            html_name: context.knobs.html_file().to_string(),
            revision,
            edit: served.resumed || revision > 1,
            execute,
        }
    }
}

/// The design file written, and the tool result that reported it.
struct ToolOutcome {
    plan: ToolCallPlan,
    output: String,
    is_error: bool,
}

/// Opens the turn's session: a cancel that came first, or a session that cannot be resumed, ends
/// the turn here (its result written); otherwise the turn is recorded and `session` announced
/// once per process.
fn open_session(context: &mut Context, execute: &Execute) -> Result<Served, TurnEnd> {
    let request_id = &execute.request_id;
    if context.active_cancelled() {
        let session = context
            .session_sent
            .clone()
            .unwrap_or_else(|| context.session_id());
        let frame = frames::result_cancelled(request_id, &session);
        context.out.write_frame(&frame);
        return Err(TurnEnd::Cancelled);
    }
    let mut served = match resolve_session(context, execute) {
        Ok(served) => served,
        Err((code, message)) => {
            let requested = context.session_id();
            let frame = frames::result_failed(request_id, &requested, true, &code, &message);
            context.out.write_frame(&frame);
            return Err(TurnEnd::Failed);
        }
    };
    let record = &mut served.record;
    let announced_by_script =
        record.turns.last().map(|turn| turn.request_id.as_str()) == Some(request_id.as_str());
    if !announced_by_script {
        record.begin_turn(request_id, &execute.prompt, &execute.cwd);
    }
    store(context, record);
    let session_id = record.session_id.clone();
    if context.session_sent.as_deref() != Some(session_id.as_str()) {
        let frame = frames::session(request_id, &session_id, served.resumed);
        context.out.write_frame(&frame);
        context.session_sent = Some(session_id);
    }
    Ok(served)
}

/// The turn after its session: narrate, use the tool, close, and the terminal result.
fn play_turn(
    context: &mut Context,
    turn: &Turn,
    record: &mut SessionRecord,
) -> Result<TurnEnd, Cancelled> {
    narrate(context, turn)?;
    let outcome = write_design(context, turn, record)?;
    close(context, turn, &outcome)?;
    Ok(finish(context, turn, record, &outcome))
}

/// Writes `frame` unless a cancel arrived before it.
fn step(context: &mut Context, frame: &Value) -> Result<(), Cancelled> {
    if between_frames(context) {
        return Err(Cancelled);
    }
    context.out.write_frame(frame);
    Ok(())
}

/// The thinking and the two texts that say what the turn will do.
fn narrate(context: &mut Context, turn: &Turn) -> Result<(), Cancelled> {
    let (request_id, html_name) = (&turn.request_id, &turn.html_name);
    let (thinking, opening, plan) = if turn.edit {
        (
            "A follow-up turn in the same session: edit the existing design instead of starting over.",
            format!("Picking up the existing design in `{html_name}`."),
            " I'll update its hero section to match your request.".to_string(),
        )
    } else {
        (
            "The request is for a design: one self-contained HTML file fits best.",
            format!("I'll create a single-page design in `{html_name}`."),
            " It has a hero section, a call to action and a feature grid.".to_string(),
        )
    };
    let mut steps = Vec::new();
    if context.profile.identity().progress_and_acceptance {
        let data = json!({"file": html_name, "edit": turn.edit});
        steps.push(frames::progress(
            request_id,
            "planning",
            "Planning the design",
            data,
        ));
    }
    steps.extend([
        frames::thinking(request_id, thinking),
        frames::text(request_id, &opening),
        frames::text(request_id, &plan),
    ]);
    for frame in &steps {
        step(context, frame)?;
    }
    Ok(())
}

/// The tool call, the write it stands for (inside the project only), and its tool result.
fn write_design(
    context: &mut Context,
    turn: &Turn,
    record: &mut SessionRecord,
) -> Result<ToolOutcome, Cancelled> {
    if between_frames(context) {
        return Err(Cancelled);
    }
    let (request_id, html_name, revision) = (&turn.request_id, &turn.html_name, turn.revision);
    let cwd = Path::new(&turn.execute.cwd);
    let html_path = cwd.join(html_name);
    let hero = design::hero_for(&turn.execute.prompt, revision);
    let plan = plan_tool_call(&html_path, html_name, &hero, turn.edit);
    let call_id = format!("call_{}_{revision}", &short_id(&turn.session_id));
    context.out.write_frame(&frames::tool_call(
        request_id,
        &call_id,
        plan.name,
        &plan.arguments,
    ));
    let written = crate::project::write_inside(cwd, &html_path, plan.new_contents.as_bytes());
    if written.is_ok() {
        record.html_file = Some(html_path.to_string_lossy().into_owned());
    }
    if between_frames(context) {
        return Err(Cancelled);
    }
    let (output, is_error) = match &written {
        Ok(_) if plan.name == "edit_file" => {
            (format!("Edited {html_name} (revision {revision})"), false)
        }
        Ok(_) => (
            format!("Wrote {} bytes to {html_name}", plan.new_contents.len()),
            false,
        ),
        Err(error) => (
            format!("error: cannot write {html_name}: {}", error.kind()),
            true,
        ),
    };
    context.out.write_frame(&frames::tool_result(
        request_id,
        &call_id,
        frames::TOOL_RESULT_NAME,
        &output,
        is_error,
    ));
    Ok(ToolOutcome {
        plan,
        output,
        is_error,
    })
}

/// The closing text and the usage of the turn.
fn close(context: &mut Context, turn: &Turn, outcome: &ToolOutcome) -> Result<(), Cancelled> {
    let html_name = &turn.html_name;
    let closing = if outcome.is_error {
        format!(" I could not write `{html_name}`.")
    } else {
        format!(" Done: `{html_name}` now shows revision {}.", turn.revision)
    };
    let written = &outcome.plan.new_contents;
    let mut closing_frames = Vec::new();
    if context.profile.identity().progress_and_acceptance && !outcome.is_error {
        let data = json!({"file": html_name, "checks": 1});
        let message = format!("Checking {html_name}");
        closing_frames.push(frames::progress(
            &turn.request_id,
            "verifying",
            &message,
            data,
        ));
    }
    closing_frames.extend([
        frames::text(&turn.request_id, &closing),
        usage_frame(&turn.execute, written, turn.edit, turn.revision),
    ]);
    for frame in &closing_frames {
        step(context, frame)?;
    }
    if between_frames(context) {
        return Err(Cancelled);
    }
    Ok(())
}

/// The terminal result (failed when the write failed), with the session record updated first.
fn finish(
    context: &mut Context,
    turn: &Turn,
    record: &mut SessionRecord,
    outcome: &ToolOutcome,
) -> TurnEnd {
    let (request_id, session_id) = (&turn.request_id, &turn.session_id);
    if outcome.is_error {
        record.finish_turn("failed");
        store(context, record);
        let frame = frames::result_failed(
            request_id,
            session_id,
            false,
            "TOOL_FAILED",
            &outcome.output,
        );
        context.out.write_frame(&frame);
        return TurnEnd::Failed;
    }
    record.finish_turn("completed");
    store(context, record);
    let summary = if turn.edit {
        format!("Updated {}", turn.html_name)
    } else {
        format!("Created {}", turn.html_name)
    };
    let mut frame = frames::result_completed(request_id, session_id, &summary);
    if context.profile.identity().progress_and_acceptance {
        frame["acceptance"] = acceptance(&turn.execute, &turn.html_name);
    }
    context.out.write_frame(&frame);
    TurnEnd::Completed
}

/// A completed result's `acceptance` (Multica at PR #7169: `{passed, checks: [{command,
/// exit_code, passed, output, truncated}]}`): one check, that the design file is not empty,
/// evaluated here rather than by a shell, and reported as the command that would check it.
fn acceptance(execute: &Execute, html_name: &str) -> Value {
    let path = Path::new(&execute.cwd).join(html_name);
    let passed = std::fs::metadata(&path).is_ok_and(|meta| meta.is_file() && meta.len() > 0);
    json!({
        "passed": passed,
        "checks": [{
            "command": format!("test -s {html_name}"),
            "exit_code": if passed { 0 } else { 1 },
            "passed": passed,
            "output": "",
            "truncated": false
        }]
    })
}

fn short_id(session_id: &str) -> String {
    session_id
        .trim_start_matches("od-")
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(8)
        .collect()
}

struct ToolCallPlan {
    name: &'static str,
    arguments: Value,
    new_contents: String,
}

/// `edit_file` replacing the hero block when editing a file that has one, else `write_file`.
fn plan_tool_call(path: &Path, html_name: &str, hero: &design::Hero, edit: bool) -> ToolCallPlan {
    if edit {
        if let Ok(current) = std::fs::read_to_string(path) {
            if let Some(old_block) = design::current_hero_block(&current) {
                let new_block = design::hero_block(hero);
                let new_contents = current.replacen(old_block, &new_block, 1);
                return ToolCallPlan {
                    name: "edit_file",
                    arguments: json!({ "path": html_name, "old_string": old_block, "new_string": new_block }),
                    new_contents,
                };
            }
        }
    }
    let content = design::page(hero);
    ToolCallPlan {
        name: "write_file",
        arguments: json!({ "path": html_name, "content": content }),
        new_contents: content,
    }
}

fn usage_frame(execute: &Execute, written: &str, resumed: bool, revision: usize) -> Value {
    let prompt_tokens = execute.prompt.chars().count() as u64 / 4;
    let tokens = TokenCounts {
        input_tokens: 1200 + prompt_tokens,
        output_tokens: 40 + written.len() as u64 / 4,
        cache_read_tokens: Some(if resumed { 1024 * revision as u64 } else { 0 }),
        cache_write_tokens: Some(1024),
    };
    frames::usage(
        &execute.request_id,
        &execute.provider,
        &execute.model,
        &tokens,
    )
}
