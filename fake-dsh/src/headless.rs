//! `dsh --profile headless TASK...`: one task, one turn, as the real 0.1.5 and 0.2.1 runners show
//! it (docs/surface-headless.md): reasoning streamed to stderr under `dsh: reasoning:`, the
//! last assistant text plus a newline on stdout, exit 0 for a completed turn; a max-tokens turn
//! prints the text too and exits 1 with nothing on stderr; SIGTERM and SIGINT mid-turn print the
//! text so far and exit 0 and 130 (while the runtime is still starting they end it at once, with
//! nothing printed); any other end prints a lone newline on stdout,
//! `dsh: <code>: <message>` on stderr and exits 1. The turn is the
//! scenario's first `sdk` turn or the default agent's, with real file writes in the cwd (never
//! outside it, never through a link: [`crate::project`]); the session log goes into the Harness
//! home only once [`crate::home::claim`] allows it (else exit 2 before the turn).

mod unknown_option;

use crate::journal::ExitReason;
use crate::output::{stderr_bytes, Stdout};
use crate::process::finish;
use crate::sdk::scenario;
use crate::sdk::session::{self, Flavor, Persona, Session, Sink};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

/// 0.2.1's help (observed).
const HELP_021: &str = "Usage: dsh --profile headless [options] [task...]

Answer one task and exit; the answer goes to stdout and diagnostics to stderr.

Arguments:
  task               the task text; multiple words are joined by spaces, and `-`
                     reads stdin

Options:
  --json             write newline-delimited run events to stdout instead of the
                     final message
  --session-id <id>  adopt the persisted Session with this id; an unknown id is
                     an error
  -h, --help         show this help

Examples:
  dsh --profile headless \"run the tests\"          answer one task and exit
  echo \"run the tests\" | dsh --profile headless   read the task from stdin
  dsh --profile headless --json \"run the tests\"   emit machine-readable run events
  dsh --profile headless --session-id session-… \"continue\"   resume an existing Session
";

const HELP: &str = "Usage: dsh --profile headless [options] [task...]

Answer one task, stream reasoning to stderr, print the final assistant message,
and exit.

Arguments:
  task        the task text; multiple words are joined by spaces

Options:
  -h, --help  show this help

Examples:
  dsh --profile headless \"run the tests\"     answer one task and exit
";

/// The long options 0.2.1's help lists (an unknown option close to one gets a suggestion).
const LONG_OPTIONS_021: &[&str] = &["--json", "--session-id", "--help"];
/// The long options 0.1.5's help lists.
const LONG_OPTIONS: &[&str] = &["--help"];

/// What the turn left for the final report.
#[derive(Default)]
struct Outcome {
    last_text: String,
    end: Option<Value>,
    /// `--json`: stdout holds only events (no lone newline for a failed turn).
    json_mode: bool,
    /// `--json`: the current step got the model's answer (its `step_end` then has a `usage`).
    answered: bool,
}

/// What the command line asked for.
#[derive(Debug, Default, PartialEq, Eq)]
struct Request {
    task: String,
    /// 0.2.1's `--json`: run events on stdout, one per line.
    json: bool,
    /// 0.2.1's `--session-id ID`: continue that stored session.
    session_id: Option<String>,
}

/// Runs one headless task (the arguments after `--profile headless`); never returns.
pub fn run(persona: Persona, args: &[String]) -> ! {
    let v021 = persona == Persona::V021;
    let parsed = if v021 {
        request_of(args, read_stdin)
    } else {
        task_of(args).map(|task| Request {
            task,
            ..Request::default()
        })
    };
    let request = match parsed {
        Ok(request) => request,
        Err(Some(message)) => usage(&message),
        Err(None) => {
            Stdout::new().write_bytes(if v021 { HELP_021 } else { HELP }.as_bytes());
            finish(0, ExitReason::ScriptEnd)
        }
    };
    let task = request.task.clone();
    let outcome = Arc::new(Mutex::new(Outcome {
        json_mode: request.json,
        ..Outcome::default()
    }));
    crate::process::start_background();
    let scenario = scenario::load_from_env().unwrap_or_else(|message| {
        stderr_bytes(format!("{message}\n").as_bytes());
        finish(2, ExitReason::Error)
    });
    start_up(scenario.initialize_delay_ms);
    crate::process::on_signal(cut_short(outcome.clone()));
    let events = if request.json {
        json_sink(outcome.clone())
    } else {
        sink(outcome.clone())
    };
    let session = open_session(&request, persona, events);
    if request.json {
        json_line(&json!({"type": "session", "sessionId": session.id,
                          "cwd": session.cwd.to_string_lossy()}));
    }
    let cwd = session.cwd.clone();
    let script = match scenario.turns.first() {
        Some(script) => script.clone(),
        None => session::default_turn(&task, &cwd),
    };
    let message = session::user_message(json!([{"type": "text", "text": task}]));
    let session = Mutex::new(session);
    session
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .start_turn();
    session::play_turn(&session, &message, &script, &|| false);
    let outcome = outcome.lock().unwrap_or_else(|p| p.into_inner());
    if request.json {
        report_json(&outcome);
    }
    report(&outcome)
}

/// The runtime starting (the real one loads its plugin tree for seconds before the turn; fake-dsh
/// takes the scenario's `initialize_delay_ms`): a SIGTERM or SIGINT meanwhile ends the process at
/// once with nothing printed and the signal's status (observed on 0.1.5 and 0.2.1: no handler
/// yet), not as a cut turn ([`cut_short`], set after this).
fn start_up(delay_ms: u64) {
    if delay_ms > 0 {
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
    }
}

/// The turn's session: the stored one `--session-id` names (its absence is the real message on
/// stderr, and under `--json` an `error` line, exit 1), else a new one in the cwd (0.2.1 names it
/// `session-<uuid>`).
fn open_session(request: &Request, persona: Persona, events: Sink) -> Session {
    let v021 = persona == Persona::V021;
    // The full profile: headless has the file tools.
    let flavor = Flavor {
        persona: if v021 { Persona::V021 } else { Persona::V015 },
        minimal: false,
    };
    let log_root = claimed_log_root();
    if let Some(id) = &request.session_id {
        return Session::resume(id, flavor, log_root.as_deref(), events).unwrap_or_else(
            |message| {
                let message = if message.ends_with("not found") {
                    format!(
                        "session {} does not exist; omit --session-id to start a new Session",
                        Value::from(id.as_str())
                    )
                } else {
                    message
                };
                // Under --json the real one says it on stdout too (0.2.1rc2, observed).
                if request.json {
                    json_line(&json!({"type": "error", "message": message}));
                }
                stderr_bytes(format!("dsh: {message}\n").as_bytes());
                finish(1, ExitReason::Error)
            },
        );
    }
    let uuid = uuid::Uuid::new_v4();
    let id = if v021 {
        format!("session-{uuid}")
    } else {
        uuid.to_string()
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    Session::create(&id, &cwd, flavor, log_root.as_deref(), events).unwrap_or_else(|message| {
        stderr_bytes(format!("dsh: SESSION: {message}\n").as_bytes());
        finish(1, ExitReason::Error)
    })
}

/// Stdin's text (the task from `-` or a pipe), at most 16 MiB.
fn read_stdin() -> String {
    use std::io::Read;
    let mut bytes = Vec::new();
    let _ = std::io::stdin()
        .lock()
        .take(16 << 20)
        .read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes).into_owned()
}

/// 0.2.1's command line: the task words (`-` reads stdin, as does no word at all when stdin is
/// not a terminal), `--json`, `--session-id ID`, `--patch FILE` (checked before, by
/// [`crate::sdk::patch`]), `-h`/`--help`.
fn request_of(args: &[String], stdin: impl FnOnce() -> String) -> Result<Request, Option<String>> {
    use std::io::IsTerminal;
    let mut request = Request::default();
    let mut words = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--patch" => {
                iter.next();
            }
            "--json" => request.json = true,
            "--session-id" => match iter.next() {
                Some(id) => request.session_id = Some(id.clone()),
                None => {
                    return Err(Some(
                        "error: option '--session-id <id>' argument missing".to_string(),
                    ))
                }
            },
            "-h" | "--help" => return Err(None),
            option if option.starts_with("--session-id=") => {
                request.session_id = Some(option["--session-id=".len()..].to_string())
            }
            option if option.starts_with('-') && option.len() > 1 => {
                return Err(Some(unknown_option::message(option, LONG_OPTIONS_021)))
            }
            word => words.push(word.to_string()),
        }
    }
    let from_stdin = words == ["-"] || (words.is_empty() && !std::io::stdin().is_terminal());
    request.task = if from_stdin { stdin() } else { words.join(" ") };
    if request.task.trim().is_empty() {
        return Err(Some(
            "dsh: a task is required, for example: dsh --profile headless \"run the tests\""
                .to_string(),
        ));
    }
    request.task = request.task.trim_end_matches(['\n', '\r']).to_string();
    Ok(request)
}

/// One `--json` line.
fn json_line(value: &Value) {
    Stdout::new().write_bytes(format!("{value}\n").as_bytes());
}

/// 0.2.1's `--json` run events, from the session's (observed): `status` phases, `thinking`,
/// `text`, `tool_call`, `tool_result`; a step's `usage` is fake-dsh's placeholder.
fn json_sink(outcome: Arc<Mutex<Outcome>>) -> Sink {
    Box::new(move |_, event| {
        let data = &event["data"];
        match event["type"].as_str() {
            Some("turn/start") => {
                json_line(&json!({"type": "status", "phase": "turn_start", "turn": data["turn"]}))
            }
            Some("step/start") => {
                outcome.lock().unwrap_or_else(|p| p.into_inner()).answered = false;
                json_line(&json!({"type": "status", "phase": "step_start",
                    "turn": data["turn"], "step": data["step"]}))
            }
            Some("step/end") => {
                let mut line = json!({"type": "status", "phase": "step_end",
                    "turn": data["turn"], "step": data["step"]});
                // A step the model never answered (an error turn's) has no usage (observed).
                if outcome.lock().unwrap_or_else(|p| p.into_inner()).answered {
                    line["usage"] = json!({"inputTokens": 1000, "outputTokens": 20,
                        "cacheReadTokens": 0, "cacheWriteTokens": 0, "totalTokens": 1020});
                }
                json_line(&line)
            }
            Some("assistant/message") => {
                outcome.lock().unwrap_or_else(|p| p.into_inner()).answered = true;
                let parts = data["message"]["content"].as_array().cloned();
                for part in parts.unwrap_or_default() {
                    let text = part["text"].as_str().unwrap_or_default();
                    match part["type"].as_str() {
                        Some("reasoning") if !text.is_empty() => {
                            json_line(&json!({"type": "thinking", "text": text}))
                        }
                        Some("text") if !text.is_empty() => {
                            json_line(&json!({"type": "text", "text": text}));
                            outcome.lock().unwrap_or_else(|p| p.into_inner()).last_text =
                                text.to_string();
                        }
                        _ => {}
                    }
                }
            }
            Some("tool/call") => {
                let input = data["arguments"]
                    .as_str()
                    .and_then(|text| serde_json::from_str::<Value>(text).ok())
                    .unwrap_or(Value::Null);
                json_line(&json!({"type": "tool_call", "callId": data["callId"],
                                  "tool": data["name"], "input": input}));
            }
            Some("tool/result") => {
                let message = &data["message"];
                let status = if message["isError"] == true {
                    "error"
                } else {
                    "completed"
                };
                json_line(
                    &json!({"type": "tool_result", "callId": message["toolCallId"],
                    "status": status, "result": message["content"][0]["text"]}),
                );
            }
            Some("turn/end") => {
                json_line(
                    &json!({"type": "status", "phase": "turn_end", "turn": data["turn"],
                                  "reason": data["reason"]}),
                );
                outcome.lock().unwrap_or_else(|p| p.into_inner()).end =
                    Some(data["reason"].clone());
            }
            _ => {}
        }
    })
}

/// The `--json` run's end (observed): `final` with the last text (empty without one) whatever the
/// turn's end; exit 0 for a completed turn, 1 with nothing on stderr for a max-tokens one; any
/// other end goes on to [`report`]: the error on stderr, exit 1.
fn report_json(outcome: &Outcome) {
    json_line(&json!({"type": "final", "text": outcome.last_text}));
    let reason = outcome.end.clone().unwrap_or(Value::Null);
    if reason["kind"] == "completed" {
        finish(0, ExitReason::ScriptEnd)
    }
    if reason["kind"] == "max-tokens" {
        finish(1, ExitReason::ScriptEnd)
    }
}

/// `$DSH_HOME/sessions` (none without a home) once the home is claimed
/// ([`crate::home::claim`]); a refused home ends the run before anything is written: the claim's
/// error (naming the home and `DSH_HOME`) on stderr, exit 2.
fn claimed_log_root() -> Option<std::path::PathBuf> {
    let home = crate::home::dsh_home().ok()?;
    crate::home::claim(&home).unwrap_or_else(|message| {
        stderr_bytes(format!("{message}\n").as_bytes());
        finish(2, ExitReason::Error)
    });
    Some(home.join("sessions"))
}

/// The task from the arguments: `--patch FILE` (the launcher's overlay) is skipped, `-h`/`--help`
/// asks for help (`Err(None)`), any other option and a blank task are usage errors.
fn task_of(args: &[String]) -> Result<String, Option<String>> {
    let mut words = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--patch" => {
                iter.next();
            }
            "-h" | "--help" => return Err(None),
            option if option.starts_with('-') && option.len() > 1 => {
                return Err(Some(unknown_option::message(option, LONG_OPTIONS)))
            }
            word => words.push(word.to_string()),
        }
    }
    let task = words.join(" ");
    if task.trim().is_empty() {
        return Err(Some(
            "error: a task is required, for example: dsh --profile headless \"run the tests\""
                .to_string(),
        ));
    }
    Ok(task)
}

fn usage(message: &str) -> ! {
    stderr_bytes(format!("{message}\n").as_bytes());
    finish(1, ExitReason::Error)
}

/// Streams reasoning to stderr and keeps the last text and the turn's end.
fn sink(outcome: Arc<Mutex<Outcome>>) -> Sink {
    Box::new(move |_, event| match event["type"].as_str() {
        Some("assistant/message") => {
            let parts = event["data"]["message"]["content"].as_array().cloned();
            for part in parts.unwrap_or_default() {
                let text = part["text"].as_str().unwrap_or_default();
                match part["type"].as_str() {
                    Some("reasoning") if !text.is_empty() => {
                        stderr_bytes(format!("dsh: reasoning:\n{text}\n").as_bytes())
                    }
                    Some("text") if !text.is_empty() => {
                        outcome.lock().unwrap_or_else(|p| p.into_inner()).last_text =
                            text.to_string()
                    }
                    _ => {}
                }
            }
        }
        Some("turn/end") => {
            outcome.lock().unwrap_or_else(|p| p.into_inner()).end =
                Some(event["data"]["reason"].clone())
        }
        _ => {}
    })
}

/// A run cut by a signal mid-turn (observed on 0.1.5 and 0.2.1): the text so far and a newline
/// on stdout (`--json`: a `final` event with it), nothing on stderr; SIGTERM exits 0, SIGINT 130
/// (SIGHUP: 129, stdout untouched).
fn cut_short(outcome: Arc<Mutex<Outcome>>) -> crate::process::SignalHook {
    use nix::sys::signal::Signal;
    Box::new(move |signal| {
        let code = match signal {
            Signal::SIGTERM => 0,
            Signal::SIGINT => 130,
            _ => return None,
        };
        let outcome = outcome.lock().unwrap_or_else(|p| p.into_inner());
        if outcome.json_mode {
            json_line(&json!({"type": "final", "text": outcome.last_text}));
        } else {
            Stdout::new().write_bytes(format!("{}\n", outcome.last_text).as_bytes());
        }
        Some(code)
    })
}

/// The final report: the text and exit 0 for a completed turn; the text so far and exit 1, with
/// nothing on stderr, for a max-tokens turn (observed); else a lone newline, the error on stderr
/// and exit 1.
fn report(outcome: &Outcome) -> ! {
    let reason = outcome.end.clone().unwrap_or(Value::Null);
    if reason["kind"] == "completed" {
        Stdout::new().write_bytes(format!("{}\n", outcome.last_text).as_bytes());
        finish(0, ExitReason::ScriptEnd)
    }
    if reason["kind"] == "max-tokens" && !outcome.json_mode {
        Stdout::new().write_bytes(format!("{}\n", outcome.last_text).as_bytes());
        finish(1, ExitReason::ScriptEnd)
    }
    if !outcome.json_mode {
        Stdout::new().write_bytes(b"\n");
    }
    let kind = reason["kind"].as_str().unwrap_or("error");
    let code = reason["error"]["code"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_uppercase().replace('-', "_"));
    let message = reason["error"]["message"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| format!("the turn ended: {kind}"));
    stderr_bytes(format!("dsh: {code}: {message}\n").as_bytes());
    finish(1, ExitReason::Error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(args: &[&str]) -> Result<String, Option<String>> {
        task_of(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn the_0_2_1_command_line_takes_json_a_session_id_and_the_task_from_stdin() {
        let args = |list: &[&str]| list.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        let parsed = request_of(&args(&["--json", "--session-id", "s-9", "-"]), || {
            "from stdin\n".to_string()
        });
        assert_eq!(
            parsed,
            Ok(Request {
                task: "from stdin".to_string(),
                json: true,
                session_id: Some("s-9".to_string()),
            })
        );
        assert_eq!(
            request_of(&args(&["-"]), || " \n".to_string())
                .unwrap_err()
                .unwrap(),
            "dsh: a task is required, for example: dsh --profile headless \"run the tests\""
        );
        assert_eq!(
            request_of(&args(&["--session-id"]), String::new)
                .unwrap_err()
                .unwrap(),
            "error: option '--session-id <id>' argument missing"
        );
        assert_eq!(request_of(&args(&["-h"]), String::new), Err(None));
    }

    #[test]
    fn the_task_is_the_words_and_options_are_checked() {
        assert_eq!(
            task(&["--patch", "p.yml", "run", "the tests"]).unwrap(),
            "run the tests"
        );
        assert_eq!(task(&["--help"]), Err(None));
        assert!(task(&[])
            .unwrap_err()
            .unwrap()
            .contains("a task is required"));
        assert!(task(&["  "])
            .unwrap_err()
            .unwrap()
            .contains("a task is required"));
        assert_eq!(
            task(&["--bogus", "x"]).unwrap_err().unwrap(),
            "error: unknown option '--bogus'"
        );
    }
}
