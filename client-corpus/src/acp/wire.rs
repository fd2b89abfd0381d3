//! What an ACP client must have sent on the wire, judged from fake-dsh's journal (every line the
//! runtime received, and every frame it wrote by name; docs/journal.md): checked after the
//! client's reports and before its processes and the key (crate::judge), each broken expectation
//! blamed on the rule it breaks (docs/surface-acp.md, "The client corpus"):
//!
//! - every prompt of the case goes to one session: the runs' prompts, a prompt after a failed
//!   turn (F5.8) and a resumed run's (F4.4) alike (the case's first rule);
//! - the model is chosen with `session/set_config_option {configId: "model", value}` before the
//!   first prompt, the value the offered option's (F4.1, F6.1) (`acp.model-by-config-option`);
//! - from the case's `resume_from` run on, the runtime of the run got `session/resume` with the
//!   session the first run prompted, before its prompts, and no `session/new` (F4.4)
//!   (`acp.cold-resume`);
//! - every permission request is answered, by an option of the kind the case asks for (F7.2,
//!   F7.3) (`acp.permission-by-kind`), or, in a case that cancels, with the outcome `cancelled`
//!   (F8.2, and the ACP schema's "MUST") (`acp.cancel-answers-permission`), whose `session/cancel`
//!   (or `$/cancel_request`, F8.3) the runtime received.

use crate::judge::Finding;
use dsh_formats::acp_client_case::{AcpCase, PermissionAnswer};
use dsh_formats::client_case::ClientCase;
use dsh_formats::journal::{Entry, Event, Mode};
use serde_json::Value;

/// The options fake-dsh offers in every `session/request_permission`, as the real runtime does
/// (F7.2): id and kind.
const OFFERED: &[(&str, &str)] = &[("allow-once", "allow_once"), ("reject-once", "reject_once")];

/// One ACP runtime process the client started: what it received, in order.
struct Agent<'a> {
    pid: i32,
    received: Vec<&'a Value>,
    /// How many permission requests it sent.
    asked: usize,
}

/// The first broken expectation of an ACP case's wire; `None` for another surface's case.
pub fn finding(case: &ClientCase, journal: &[Entry]) -> Option<Finding> {
    let acp = case.acp.as_ref()?;
    let agents = agents(journal);
    let blame = |rule: &str, why: String| {
        Some(Finding {
            rule: rule.to_string(),
            why,
            hard: false,
        })
    };
    if let Some(why) = one_session(&agents) {
        return blame(&case.rules[0], why);
    }
    if let Some(why) = model_chosen(acp, &agents) {
        return blame("acp.model-by-config-option", why);
    }
    if let Some(why) = resumed(acp, &agents) {
        return blame("acp.cold-resume", why);
    }
    if acp.cancel.is_some() {
        return cancelled(&agents).and_then(|why| blame("acp.cancel-answers-permission", why));
    }
    permissions(acp.permission, &agents).and_then(|why| blame("acp.permission-by-kind", why))
}

/// The ACP runtimes of the journal (fake-dsh's helper children left out), in start order.
fn agents(journal: &[Entry]) -> Vec<Agent<'_>> {
    let mut agents: Vec<Agent> = Vec::new();
    for entry in journal {
        match &entry.event {
            Event::Start { mode, .. } if *mode != Mode::Child => agents.push(Agent {
                pid: entry.pid,
                received: Vec::new(),
                asked: 0,
            }),
            Event::Command {
                command: Some(command),
                ..
            } => {
                if let Some(agent) = agents.iter_mut().find(|a| a.pid == entry.pid) {
                    agent.received.push(command);
                }
            }
            Event::Frame { frame_type, .. } if frame_type == "session/request_permission" => {
                if let Some(agent) = agents.iter_mut().find(|a| a.pid == entry.pid) {
                    agent.asked += 1;
                }
            }
            _ => {}
        }
    }
    agents
}

fn method_of(command: &Value) -> Option<&str> {
    command["method"].as_str()
}

/// The `sessionId`s of an agent's `session/prompt`s, in order.
fn prompted<'a>(agent: &Agent<'a>) -> Vec<&'a str> {
    agent
        .received
        .iter()
        .filter(|command| method_of(command) == Some("session/prompt"))
        .filter_map(|command| command["params"]["sessionId"].as_str())
        .collect()
}

fn one_session(agents: &[Agent]) -> Option<String> {
    let sessions: Vec<&str> = agents.iter().flat_map(prompted).collect();
    let first = sessions.first()?;
    sessions.iter().find(|other| *other != first).map(|other| {
        format!(
            "the prompts went to more than one session ({first}, then {other}): a failed turn, \
             a cancelled one and a resumed session all keep theirs"
        )
    })
}

fn model_chosen(acp: &AcpCase, agents: &[Agent]) -> Option<String> {
    let model = acp.model.as_ref()?;
    let agent = agents.iter().find(|agent| !prompted(agent).is_empty())?;
    let before_prompt = agent
        .received
        .iter()
        .take_while(|command| method_of(command) != Some("session/prompt"));
    let mut sent = Vec::new();
    for command in before_prompt {
        match method_of(command) {
            Some("session/set_config_option") => {
                let params = &command["params"];
                if params["configId"] == "model" && params["value"] == model.value.as_str() {
                    return None;
                }
                sent.push(format!("set_config_option {}", excerpt(params)));
            }
            Some(other @ ("session/set_model" | "session/set_mode")) => {
                sent.push(format!("{other} (dsh answers -32601, F6.4)"));
            }
            _ => {}
        }
    }
    Some(format!(
        "the model {:?} was not selected before the first prompt with \
         session/set_config_option {{configId: \"model\", value: {}}} (the offered option's \
         value); sent: {}",
        model.name,
        model.value,
        if sent.is_empty() {
            "nothing of the kind".to_string()
        } else {
            sent.join(", ")
        }
    ))
}

fn resumed(acp: &AcpCase, agents: &[Agent]) -> Option<String> {
    acp.resume_from?;
    let prompting: Vec<&Agent> = agents
        .iter()
        .filter(|agent| !prompted(agent).is_empty())
        .collect();
    let first = prompted(prompting.first()?)[0];
    if prompting.len() < 2 {
        return Some(format!(
            "no second runtime process prompted session {first}: a cold resume is a new process"
        ));
    }
    for agent in &prompting[1..] {
        let mut resumed = false;
        for command in &agent.received {
            match method_of(command) {
                Some("session/new") if !resumed => {
                    return Some(format!(
                        "the runtime (pid {}) got session/new before resuming session {first}: \
                         a stored session is resumed with session/resume",
                        agent.pid
                    ))
                }
                Some("session/resume") if command["params"]["sessionId"] == first => {
                    resumed = true;
                }
                Some("session/prompt") if !resumed => {
                    return Some(format!(
                        "the runtime (pid {}) was prompted before it got session/resume \
                         {{sessionId: {first}}} (dsh answers a stored session prompted before \
                         resuming -32602 unknown session)",
                        agent.pid
                    ))
                }
                _ => {}
            }
        }
    }
    None
}

/// The client's responses to the agent's requests (the only agent requests are permission
/// requests: F10.1).
fn answers<'a>(agent: &Agent<'a>) -> Vec<&'a Value> {
    agent
        .received
        .iter()
        .copied()
        .filter(|command| {
            command.get("method").is_none()
                && command.get("id").is_some()
                && (command.get("result").is_some() || command.get("error").is_some())
        })
        .collect()
}

fn unanswered(agents: &[Agent]) -> Option<String> {
    let asked: usize = agents.iter().map(|agent| agent.asked).sum();
    let answered: usize = agents.iter().map(|agent| answers(agent).len()).sum();
    (answered < asked).then(|| {
        format!(
            "{asked} permission request(s), {answered} answered: every session/request_permission \
             is answered (the turn waits for it, F7.3)"
        )
    })
}

fn permissions(answer: Option<PermissionAnswer>, agents: &[Agent]) -> Option<String> {
    if let Some(why) = unanswered(agents) {
        return Some(why);
    }
    let answer = answer.unwrap_or(PermissionAnswer::Allow);
    for response in agents.iter().flat_map(answers) {
        let outcome = &response["result"]["outcome"];
        let chosen = outcome["optionId"].as_str();
        let kind = OFFERED
            .iter()
            .find(|(id, _)| Some(*id) == chosen)
            .map(|(_, kind)| *kind);
        let right = outcome["outcome"] == "selected"
            && kind.is_some_and(|kind| answer.kinds().contains(&kind));
        if !right {
            return Some(format!(
                "asked to {} (an option of kind {}), the client answered {} (offered: \
                 allow-once allow_once, reject-once reject_once)",
                answer.name(),
                answer.kinds().join(" or "),
                excerpt(response)
            ));
        }
    }
    None
}

fn cancelled(agents: &[Agent]) -> Option<String> {
    let cancels = agents
        .iter()
        .flat_map(|agent| &agent.received)
        .any(|command| {
            command.get("id").is_none()
                && matches!(
                    method_of(command),
                    Some("session/cancel" | "$/cancel_request")
                )
        });
    if !cancels {
        return Some(
            "the runtime never got the session/cancel notification (nor $/cancel_request)".into(),
        );
    }
    if let Some(why) = unanswered(agents) {
        return Some(format!(
            "{why}; a client that cancels answers each pending request {{\"outcome\": \
             \"cancelled\"}} (ACP schema: MUST)"
        ));
    }
    agents
        .iter()
        .flat_map(answers)
        .find(|response| response["result"]["outcome"]["outcome"] != "cancelled")
        .map(|response| {
            format!(
                "the permission request pending at the cancel was answered {}, not \
                 {{\"outcome\": {{\"outcome\": \"cancelled\"}}}}",
                excerpt(response)
            )
        })
}

fn excerpt(value: &Value) -> String {
    let text = value.to_string();
    let mut shown: String = text.chars().take(160).collect();
    if shown.len() < text.len() {
        shown.push_str("...");
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(pid: i32, event: Value) -> Entry {
        let mut line = json!({"v": 1, "pid": pid, "t_ms": 1});
        for (key, value) in event.as_object().unwrap() {
            line[key] = value.clone();
        }
        serde_json::from_value(line).unwrap()
    }

    fn start(pid: i32) -> Entry {
        entry(
            pid,
            json!({"event": "start", "ppid": 1, "pgid": pid, "sid": 1, "argv": ["dsh"],
                   "cwd": "/", "env_names": [], "mode": "acp"}),
        )
    }

    fn got(pid: i32, command: Value) -> Entry {
        entry(pid, json!({"event": "command", "command": command}))
    }

    fn asked(pid: i32) -> Entry {
        entry(
            pid,
            json!({"event": "frame", "frame_type": "session/request_permission"}),
        )
    }

    fn prompt(session: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
               "params": {"sessionId": session, "prompt": []}})
    }

    fn answer(outcome: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": 0, "result": {"outcome": outcome}})
    }

    fn case(acp: Value, runs: u32) -> ClientCase {
        serde_json::from_value(json!({"id": "acp.x", "surface": "acp", "summary": "s",
            "rules": ["acp.first"], "prompts": ["p"], "runs": runs, "acp": acp,
            "expect": {"reports": [{}]}}))
        .unwrap()
    }

    fn judged(case: &ClientCase, journal: &[Entry]) -> Option<(String, String)> {
        finding(case, journal).map(|f| (f.rule, f.why))
    }

    #[test]
    fn permission_answers_are_judged_by_the_kind_asked_for() {
        let reject = case(json!({"permission": "reject"}), 1);
        let with = |outcome: Value| {
            vec![
                start(5),
                got(5, prompt("s")),
                asked(5),
                got(5, answer(outcome)),
            ]
        };
        let right = with(json!({"outcome": "selected", "optionId": "reject-once"}));
        assert_eq!(judged(&reject, &right), None);
        let wrong = with(json!({"outcome": "selected", "optionId": "allow-once"}));
        let (rule, why) = judged(&reject, &wrong).unwrap();
        assert_eq!(rule, "acp.permission-by-kind");
        assert!(
            why.contains("reject_once") && why.contains("allow-once"),
            "{why}"
        );
        let never = vec![start(5), got(5, prompt("s")), asked(5)];
        assert!(judged(&reject, &never)
            .unwrap()
            .1
            .contains("1 permission request(s), 0 answered"));
    }

    #[test]
    fn a_cancel_needs_the_notification_and_a_cancelled_answer() {
        let cancel = case(json!({"cancel": 1}), 1);
        let notification = json!({"jsonrpc": "2.0", "method": "session/cancel",
                                  "params": {"sessionId": "s"}});
        let good = vec![
            start(5),
            got(5, prompt("s")),
            asked(5),
            got(5, notification.clone()),
            got(5, answer(json!({"outcome": "cancelled"}))),
        ];
        assert_eq!(judged(&cancel, &good), None);
        let selected = vec![
            start(5),
            got(5, prompt("s")),
            asked(5),
            got(5, notification),
            got(
                5,
                answer(json!({"outcome": "selected", "optionId": "reject-once"})),
            ),
        ];
        let (rule, why) = judged(&cancel, &selected).unwrap();
        assert_eq!(rule, "acp.cancel-answers-permission");
        assert!(why.contains("reject-once"), "{why}");
        let silent = vec![start(5), got(5, prompt("s")), asked(5)];
        assert!(judged(&cancel, &silent)
            .unwrap()
            .1
            .contains("never got the session/cancel"));
    }

    #[test]
    fn a_resume_and_a_model_are_proven_by_what_the_runtime_received() {
        let resume = case(json!({"resume_from": 2}), 2);
        let resume_then_prompt = json!({"jsonrpc": "2.0", "id": 2, "method": "session/resume",
                                        "params": {"sessionId": "s", "cwd": "/w"}});
        let good = vec![
            start(5),
            got(5, prompt("s")),
            start(6),
            got(6, resume_then_prompt),
            got(6, prompt("s")),
        ];
        assert_eq!(judged(&resume, &good), None);
        let fresh = vec![
            start(5),
            got(5, prompt("s")),
            start(6),
            got(
                6,
                json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {}}),
            ),
            got(6, prompt("t")),
        ];
        let (rule, why) = judged(&resume, &fresh).unwrap();
        assert_eq!(rule, "acp.first", "two sessions: the case's first rule");
        assert!(why.contains("more than one session"), "{why}");
        let unresumed = vec![start(5), got(5, prompt("s")), start(6), got(6, prompt("s"))];
        assert_eq!(judged(&resume, &unresumed).unwrap().0, "acp.cold-resume");
        let model = case(
            json!({"model": {"name": "Pro", "value": "[\"p\",\"pro\"]"}}),
            1,
        );
        let set = |value: &str| {
            json!({"jsonrpc": "2.0", "id": 3, "method": "session/set_config_option",
                   "params": {"sessionId": "s", "configId": "model", "value": value}})
        };
        let chosen = vec![
            start(5),
            got(5, set("[\"p\",\"pro\"]")),
            got(5, prompt("s")),
        ];
        assert_eq!(judged(&model, &chosen), None);
        let bare = vec![start(5), got(5, set("pro")), got(5, prompt("s"))];
        let (rule, why) = judged(&model, &bare).unwrap();
        assert_eq!(rule, "acp.model-by-config-option");
        assert!(why.contains("\"pro\""), "{why}");
    }
}
