//! The ACP driver contract's per-run variables (docs/surface-acp.md, "The driver contract"),
//! from the case's `acp` member: how to answer permission requests (`DSH_ACP_PERMISSION`), the
//! prompt to cancel (`DSH_ACP_CANCEL`), the model to select (`DSH_ACP_MODEL`), and, from the
//! case's `resume_from` run on, the session to resume (`DSH_ACP_RESUME`), read from what the
//! runtime received in the earlier runs (fake-dsh's journal), never from what the client said.

use dsh_formats::client_case::ClientCase;
use dsh_formats::journal::{Entry, Event};
use std::path::Path;
use std::process::Command;

/// `allow` or `reject`: the kind of option to select when asked permission.
pub const PERMISSION_ENV: &str = "DSH_ACP_PERMISSION";
/// The prompt (counting from 1) to cancel at its first permission request.
pub const CANCEL_ENV: &str = "DSH_ACP_CANCEL";
/// The `name` of the model option to select before prompting.
pub const MODEL_ENV: &str = "DSH_ACP_MODEL";
/// The id of a stored session to resume (`session/resume`) instead of opening one.
pub const RESUME_ENV: &str = "DSH_ACP_RESUME";

/// Sets run `run`'s (counting from 1) ACP variables on the client's command; nothing for a case
/// of another surface. `journal` is fake-dsh's journal of the case so far.
pub fn run_env(command: &mut Command, case: &ClientCase, run: u32, journal: &Path) {
    let Some(acp) = &case.acp else {
        return;
    };
    if let Some(answer) = acp.permission {
        command.env(PERMISSION_ENV, answer.name());
    }
    if let Some(prompt) = acp.cancel {
        command.env(CANCEL_ENV, prompt.to_string());
    }
    if let Some(model) = &acp.model {
        command.env(MODEL_ENV, &model.name);
    }
    if acp.resume_from.is_some_and(|from| run >= from) {
        let entries = dsh_engine::journal::Journal::new(journal)
            .read()
            .map(|lines| lines.into_iter().map(|line| line.entry).collect::<Vec<_>>())
            .unwrap_or_default();
        // None when the earlier run prompted nothing: that run's failure is the case's finding.
        if let Some(session) = first_prompted_session(&entries) {
            command.env(RESUME_ENV, session);
        }
    }
}

/// The `sessionId` of the first `session/prompt` the runtime received.
pub fn first_prompted_session(journal: &[Entry]) -> Option<String> {
    journal.iter().find_map(|entry| match &entry.event {
        Event::Command {
            command: Some(command),
            ..
        } if command["method"] == "session/prompt" => {
            command["params"]["sessionId"].as_str().map(str::to_string)
        }
        _ => None,
    })
}
