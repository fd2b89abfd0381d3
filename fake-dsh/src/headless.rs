//! `dsh --profile headless TASK...`: one task, one turn, as the real 0.1.5 runner shows it
//! (docs/surface-headless.md): reasoning streamed to stderr under `dsh: reasoning:`, the
//! last assistant text plus a newline on stdout, exit 0 only for a completed turn; otherwise a
//! lone newline on stdout, `dsh: <code>: <message>` on stderr and exit 1. The turn is the
//! scenario's first `sdk` turn or the default agent's, with real file writes in the cwd (never
//! outside it, never through a link: [`crate::project`]); the session log goes into the Harness
//! home only once [`crate::home::claim`] allows it (else exit 2 before the turn).

use crate::journal::ExitReason;
use crate::output::{stderr_bytes, Stdout};
use crate::process::finish;
use crate::sdk::scenario;
use crate::sdk::session::{self, Flavor, Persona, Session, Sink};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

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

/// What the turn left for the final report.
#[derive(Default)]
struct Outcome {
    last_text: String,
    end: Option<Value>,
}

/// Runs one headless task (the arguments after `--profile headless`); never returns.
pub fn run(args: &[String]) -> ! {
    let task = match task_of(args) {
        Ok(task) => task,
        Err(Some(message)) => usage(&message),
        Err(None) => {
            Stdout::new().write_bytes(HELP.as_bytes());
            finish(0, ExitReason::ScriptEnd)
        }
    };
    crate::process::start_background();
    let scenario = scenario::load_from_env().unwrap_or_else(|message| {
        stderr_bytes(format!("{message}\n").as_bytes());
        finish(2, ExitReason::Error)
    });
    let cwd = std::env::current_dir().unwrap_or_default();
    let outcome = Arc::new(Mutex::new(Outcome::default()));
    // The full profile: headless has the file tools.
    let flavor = Flavor {
        persona: Persona::V015,
        minimal: false,
    };
    let log_root = claimed_log_root();
    let id = uuid::Uuid::new_v4().to_string();
    let session = Session::create(
        &id,
        &cwd,
        flavor,
        log_root.as_deref(),
        sink(outcome.clone()),
    )
    .unwrap_or_else(|message| {
        stderr_bytes(format!("dsh: SESSION: {message}\n").as_bytes());
        finish(1, ExitReason::Error)
    });
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
    report(&outcome)
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
                return Err(Some(format!("error: unknown option '{option}'")))
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

/// The final report: the text and exit 0 for a completed turn, else a lone newline, the error on
/// stderr and exit 1.
fn report(outcome: &Outcome) -> ! {
    let reason = outcome.end.clone().unwrap_or(Value::Null);
    if reason["kind"] == "completed" {
        Stdout::new().write_bytes(format!("{}\n", outcome.last_text).as_bytes());
        finish(0, ExitReason::ScriptEnd)
    }
    Stdout::new().write_bytes(b"\n");
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
