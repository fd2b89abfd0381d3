//! A step's own expectations (the case file's `expect`), judged against the driver's reply and
//! what the runtime saw. Each miss names the expectation member it broke, so the case's
//! `interpretations` map can mark just that expectation as resting on an interpretation.

use serde_json::Value;
use std::path::Path;

use super::driver::{clip, contains};
use super::events;
use super::world::World;
use dsh_engine::journal::Entry;
use dsh_formats::case::{
    CatalogModel, DiscoverExpect, ExecuteExpect, ExpectedCode, ModelsExpect, ResumeExpect,
    RunExpect, SessionExpect, SetupExpect,
};
use dsh_results::codes::{Declared, Vocabulary};

/// An expectation that did not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Miss {
    /// The `expect` member it broke (`status`, `code`, `events`, ...).
    pub member: &'static str,
    pub why: String,
    /// The interpretation entry the kit itself knows this expectation rests on (the events
    /// comparison's open details, `mapping_write`); the case file's `interpretations` may name one
    /// too.
    pub interpretation: Option<&'static str>,
}

fn miss(member: &'static str, why: impl Into<String>) -> Miss {
    Miss {
        member,
        why: why.into(),
        interpretation: None,
    }
}

/// How codes are compared in this case: under the host's declared vocabulary, or not at all.
#[derive(Clone, Copy)]
pub struct CodeJudge<'a> {
    pub vocabulary: Option<&'a Vocabulary>,
}

impl CodeJudge<'_> {
    /// Why `got` is not the code the host declared for `want` (None when it is, or when the
    /// host declared nothing for that code's class). `runtime_code` is the runtime's own error
    /// code, for a `passthrough` declaration.
    pub fn mismatch(
        &self,
        want: &ExpectedCode,
        got: Option<&str>,
        runtime_code: Option<&str>,
    ) -> Option<String> {
        let vocabulary = self.vocabulary?;
        let expected = match want {
            ExpectedCode::Unchecked => return None,
            ExpectedCode::Is(None) => None,
            ExpectedCode::Is(Some(kit)) => match vocabulary.expected(kit)? {
                Declared::Code(code) => Some(code),
                Declared::Passthrough => Some(runtime_code?.to_string()),
            },
        };
        let shown = |code: Option<&str>| code.unwrap_or("null").to_string();
        (expected.as_deref() != got).then(|| {
            let kit = match want {
                ExpectedCode::Is(Some(kit)) if Some(kit.as_str()) != expected.as_deref() => {
                    format!(" (the kit's {kit}, as the host declared it)")
                }
                _ => String::new(),
            };
            format!(
                "expected code {}{kit}, got {}",
                shown(expected.as_deref()),
                shown(got)
            )
        })
    }

    /// The prefix a warning of kit code `kit` must start with (None: any warning will do).
    fn warning_prefix(&self, kit: &str) -> Option<String> {
        match self.vocabulary?.expected(kit)? {
            Declared::Code(code) => Some(code),
            Declared::Passthrough => None,
        }
    }
}

/// A reply's `available` against the expected one; when it is as expected, its `code` against
/// the expected code (`step` names the step in the why).
fn availability(
    step: &str,
    expected: Option<bool>,
    expected_code: &ExpectedCode,
    reply: &Value,
    codes: CodeJudge,
) -> Vec<Miss> {
    let available = reply.get("available").and_then(Value::as_bool);
    let code = reply.get("code").and_then(Value::as_str);
    match expected {
        Some(want) if available != Some(want) => vec![miss(
            "available",
            format!(
                "{step}: expected available={want}, got available={} (code {})",
                available.unwrap_or(false),
                code.unwrap_or("null")
            ),
        )],
        _ => codes
            .mismatch(expected_code, code, None)
            .map(|why| miss("code", format!("{step}: {why}")))
            .into_iter()
            .collect(),
    }
}

/// A `discovered` reply against its expectations.
pub fn discover(expect: &DiscoverExpect, reply: &Value, codes: CodeJudge) -> Vec<Miss> {
    let mut misses = availability("discover", expect.available, &expect.code, reply, codes);
    if let Some(wanted) = &expect.warnings {
        let warnings: Vec<&str> = reply
            .get("warnings")
            .and_then(Value::as_array)
            .map(|w| w.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if wanted.is_empty() && !warnings.is_empty() {
            misses.push(miss(
                "warnings",
                format!("discover: expected no warnings, got {warnings:?}"),
            ));
        }
        for kit in wanted {
            let found = match codes.warning_prefix(kit) {
                Some(prefix) => warnings.iter().any(|w| w.starts_with(prefix.as_str())),
                None => !warnings.is_empty(),
            };
            if !found {
                misses.push(miss(
                    "warnings",
                    format!("discover: expected a {kit} warning, got {warnings:?}"),
                ));
            }
        }
    }
    misses
}

/// A `models` reply against its expectations (spec 12): availability, code, and the catalog in
/// order after the host's de-duplication.
pub fn models(expect: &ModelsExpect, reply: &Value, codes: CodeJudge) -> Vec<Miss> {
    let mut misses = availability("models", expect.available, &expect.code, reply, codes);
    if let Some(wanted) = &expect.models {
        let got = reply
            .get("models")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        misses.extend(
            catalog_difference(wanted, got).map(|why| miss("models", format!("models: {why}"))),
        );
    }
    misses
}

/// The first difference between the expected catalog and the host's, in words.
fn catalog_difference(wanted: &[CatalogModel], got: &[Value]) -> Option<String> {
    let route = |model: &Value| {
        let part = |member| model.get(member).and_then(Value::as_str).unwrap_or("?");
        format!("{}/{}", part("provider"), part("id"))
    };
    let got_routes: Vec<String> = got.iter().map(route).collect();
    let wanted_routes: Vec<String> = wanted
        .iter()
        .map(|model| format!("{}/{}", model.provider, model.id))
        .collect();
    if got_routes != wanted_routes {
        return Some(format!(
            "expected the models {wanted_routes:?}, got {got_routes:?}"
        ));
    }
    wanted
        .iter()
        .zip(got)
        .find_map(|(want, got)| model_difference(want, got))
}

fn model_difference(want: &CatalogModel, got: &Value) -> Option<String> {
    let route = format!("{}/{}", want.provider, want.id);
    let str_of = |value: &Value, member| {
        value
            .get(member)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    if let Some(name) = &want.name {
        if str_of(got, "name").as_ref() != Some(name) {
            return Some(format!(
                "{route}: expected name {name:?}, got {:?}",
                str_of(got, "name")
            ));
        }
    }
    let options = got
        .get("reasoning_options")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let shown = |id: Option<String>, default: bool| {
        format!(
            "{}{}",
            id.unwrap_or_default(),
            if default { "*" } else { "" }
        )
    };
    let got_options: Vec<String> = options
        .iter()
        .map(|option| {
            let default = option.get("default").and_then(Value::as_bool) == Some(true);
            shown(str_of(option, "id"), default)
        })
        .collect();
    let wanted_options: Vec<String> = want
        .reasoning_options
        .iter()
        .map(|option| shown(Some(option.id.clone()), option.default))
        .collect();
    if got_options != wanted_options {
        return Some(format!(
            "{route}: expected reasoning options {wanted_options:?} (* = default), got {got_options:?}"
        ));
    }
    want.reasoning_options
        .iter()
        .zip(options)
        .find_map(|(want, got)| {
            let name = want.name.as_ref()?;
            (str_of(got, "name").as_ref() != Some(name)).then(|| {
                format!(
                    "{route}: expected option {} named {name:?}, got {:?}",
                    want.id,
                    str_of(got, "name")
                )
            })
        })
}

/// A `setup_done` reply, and what it installed, against its expectations.
pub fn setup(
    expect: &SetupExpect,
    reply: &Value,
    installed: (bool, bool),
    codes: CodeJudge,
) -> Vec<Miss> {
    let mut misses = Vec::new();
    let ok = reply.get("ok").and_then(Value::as_bool);
    let code = reply.get("code").and_then(Value::as_str);
    match expect.ok {
        Some(want) if ok != Some(want) => misses.push(miss(
            "ok",
            format!(
                "setup: expected ok={want}, got ok={} (code {})",
                ok.unwrap_or(false),
                code.unwrap_or("null")
            ),
        )),
        _ => misses.extend(
            codes
                .mismatch(&expect.code, code, None)
                .map(|why| miss("code", format!("setup: {why}"))),
        ),
    }
    let (profile, invoked) = installed;
    match expect.installed {
        Some(true) if !(profile && invoked) => misses.push(miss(
            "installed",
            format!("setup: expected the bundle installed, got profile file present={profile}, `dsh plugin ... add` invoked={invoked}"),
        )),
        Some(false) if profile || invoked => misses.push(miss(
            "installed",
            format!("setup: expected nothing installed, got profile file present={profile}, `dsh plugin ... add` invoked={invoked}"),
        )),
        _ => {}
    }
    misses
}

/// What a run step's expectations are judged against.
pub struct RunSeen<'a> {
    pub outcome: &'a Value,
    pub events: &'a [Value],
    pub execute: Option<&'a Value>,
    /// The entries of the run's own `--stdio` process.
    pub process: &'a [&'a Entry],
    /// The session the conversation's previous run reported.
    pub previous_session: Option<&'a str>,
    pub world: &'a World,
    pub cwd: &'a Path,
}

impl RunSeen<'_> {
    fn str(&self, member: &str) -> Option<&str> {
        self.outcome.get(member).and_then(Value::as_str)
    }

    /// The runtime's own error code: the last `result` error or `protocol_error` code it wrote.
    fn runtime_code(&self) -> Option<&str> {
        self.process
            .iter()
            .rev()
            .filter(|entry| entry.event() == "frame")
            .find_map(|entry| entry.frame_code())
    }
}

/// A run's outcome, events and effects against its expectations.
pub fn run(expect: &RunExpect, seen: &RunSeen, codes: CodeJudge) -> Vec<Miss> {
    let mut misses = Vec::new();
    misses.extend(status_and_code(expect, seen, codes));
    misses.extend(expect.session.and_then(|want| session(want, seen)));
    if let Some(want) = &expect.events {
        misses.extend(events_miss(
            "events",
            events::compare_sequence(want, seen.events),
        ));
    }
    if let Some(want) = &expect.events_include {
        misses.extend(events_miss(
            "events_include",
            events::compare_include(want, seen.events),
        ));
    }
    if let Some(want) = expect.foreign_frames {
        let got = seen
            .outcome
            .get("foreign_frames")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        if got != want {
            misses.push(miss(
                "foreign_frames",
                format!("expected foreign_frames {want}, got {got}"),
            ));
        }
    }
    if let Some(want) = &expect.execute {
        misses.extend(execute(want, seen));
    }
    misses.extend(journal(expect, seen));
    misses.extend(files(expect, seen));
    misses
}

fn events_miss(member: &'static str, mismatch: Option<events::Mismatch>) -> Option<Miss> {
    mismatch.map(|mismatch| Miss {
        member,
        why: mismatch.why,
        interpretation: mismatch.interpretation,
    })
}

fn status_and_code(expect: &RunExpect, seen: &RunSeen, codes: CodeJudge) -> Option<Miss> {
    let status = seen.str("status").unwrap_or("");
    let code = seen.str("code");
    match expect.status {
        Some(want) if want.as_str() != status => {
            let message = seen
                .str("message")
                .map(|m| format!(" ({})", clip(m, 120)))
                .unwrap_or_default();
            Some(miss(
                "status",
                format!(
                    "expected status {}, got status {status}, code {}{message}",
                    want.as_str(),
                    code.unwrap_or("null")
                ),
            ))
        }
        _ => codes
            .mismatch(&expect.code, code, seen.runtime_code())
            .map(|why| miss("code", format!("{why} (status {status})"))),
    }
}

fn session(want: SessionExpect, seen: &RunSeen) -> Option<Miss> {
    let session = seen.str("session_id");
    let previous = seen.previous_session;
    let resumed = seen
        .outcome
        .get("resumed")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let why = match want {
        SessionExpect::None => session.map(|s| format!("expected no session, got {s}")),
        SessionExpect::New => match session {
            None => Some("expected a new session, got none".to_string()),
            Some(s) if Some(s) == previous => {
                Some(format!("expected a new session, got the previous one {s}"))
            }
            Some(_) if resumed => Some("expected a new session, got resumed=true".to_string()),
            Some(_) => None,
        },
        SessionExpect::Resumed => match (session, previous) {
            (_, None) => Some(
                "expected a resumed session, but no earlier run of this conversation reported one"
                    .to_string(),
            ),
            (Some(s), Some(p)) if s == p && resumed => None,
            (s, Some(p)) => Some(format!(
                "expected session {p} resumed, got {} (resumed={resumed})",
                s.unwrap_or("none")
            )),
        },
    };
    why.map(|why| miss("session", why))
}

fn execute(want: &ExecuteExpect, seen: &RunSeen) -> Vec<Miss> {
    let Some(execute) = seen.execute else {
        return vec![miss(
            "execute",
            "expected an execute command, the runtime received none",
        )];
    };
    let previous = seen.previous_session;
    let mut misses = Vec::new();
    let resume = execute
        .get("resume_session_id")
        .filter(|value| !value.is_null());
    let resume_why = match (want.resume, resume) {
        (Some(ResumeExpect::None), Some(id)) => {
            Some(format!("expected a new session, the execute resumes {id}"))
        }
        (Some(ResumeExpect::Previous), None) => Some(format!(
            "expected the execute to resume {}, it has no resume_session_id",
            previous.unwrap_or("the previous session")
        )),
        (Some(ResumeExpect::Previous), Some(id)) if id.as_str() != previous => Some(format!(
            "expected the execute to resume {}, it resumes {id}",
            previous.unwrap_or("the previous session (none was reported)")
        )),
        _ => None,
    };
    misses.extend(resume_why.map(|why| miss("execute", why)));
    if let Some(want) = want.bootstrap {
        let has = execute
            .get("prompt")
            .and_then(Value::as_str)
            .is_some_and(|prompt| prompt.contains(seen.world.bootstrap_marker.as_str()));
        if has != want {
            let what = if want {
                "carry the bootstrap context"
            } else {
                "hold only the new turn (it carries the bootstrap context)"
            };
            misses.push(miss(
                "execute",
                format!("expected the execute's prompt to {what}"),
            ));
        }
    }
    misses
}

fn journal(expect: &RunExpect, seen: &RunSeen) -> Vec<Miss> {
    let tokens: Vec<String> = seen.process.iter().map(|entry| entry.token()).collect();
    let mut misses = Vec::new();
    if let Some(order) = &expect.journal_order {
        let mut remaining = tokens.iter();
        if let Some(missing) = order
            .iter()
            .find(|token| !remaining.by_ref().any(|got| got == *token))
        {
            misses.push(miss(
                "journal_order",
                format!("journal: expected {order:?} in order, {missing} missing (got {tokens:?})"),
            ));
        }
    }
    if let Some(absent) = &expect.journal_absent {
        if let Some(present) = absent.iter().find(|token| tokens.contains(token)) {
            misses.push(miss(
                "journal_absent",
                format!(
                    "journal: {present} must not appear for the run's process (got {tokens:?})"
                ),
            ));
        }
    }
    misses
}

fn files(expect: &RunExpect, seen: &RunSeen) -> Vec<Miss> {
    let Some(files) = &expect.files else {
        return Vec::new();
    };
    let mut misses = Vec::new();
    for (name, want) in files {
        match super::project_files::read_project_file(seen.cwd, name) {
            Err(error) => misses.push(miss("files", error.to_string())),
            Ok(bytes) => {
                if let Some(needle) = &want.contains {
                    if !contains(&bytes, needle.as_bytes()) {
                        misses.push(miss(
                            "files",
                            format!("the file {name} does not contain {needle:?}"),
                        ));
                    }
                }
            }
        }
    }
    misses
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn expect(value: Value) -> ModelsExpect {
        serde_json::from_value(value).expect("a models expect")
    }

    fn members(misses: &[Miss]) -> Vec<&'static str> {
        misses.iter().map(|miss| miss.member).collect()
    }

    #[test]
    fn a_models_reply_is_judged_route_by_route_and_effort_by_effort() {
        let reply = json!({"available": true, "code": null, "models": [
            {"provider": "p", "id": "a", "name": "A", "reasoning_options": [
                {"id": "low", "name": "Low"}, {"id": "high", "name": "High", "default": true}]},
            {"provider": "p", "id": "b", "name": "B"}]});
        let judge = CodeJudge { vocabulary: None };
        let exact = expect(json!({"available": true, "models": [
            {"provider": "p", "id": "a", "name": "A", "reasoning_options": [{"id": "low"}, {"id": "high", "default": true}]},
            {"provider": "p", "id": "b"}]}));
        assert!(models(&exact, &reply, judge).is_empty());
        let order =
            expect(json!({"models": [{"provider": "p", "id": "b"}, {"provider": "p", "id": "a"}]}));
        assert_eq!(members(&models(&order, &reply, judge)), vec!["models"]);
        let default = expect(json!({"models": [
            {"provider": "p", "id": "a", "reasoning_options": [{"id": "low", "default": true}, {"id": "high"}]},
            {"provider": "p", "id": "b"}]}));
        let why = models(&default, &reply, judge);
        assert!(why[0].why.contains("low*"), "{why:?}");
        let unavailable = expect(json!({"available": false}));
        assert_eq!(
            members(&models(&unavailable, &reply, judge)),
            vec!["available"]
        );
    }
}
