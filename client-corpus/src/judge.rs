//! A played client case's verdict, checked in this order (the first broken expectation is the one
//! reported, blamed on the rule it breaks): the case's configuration reached the runtime (else
//! nothing the runtime did was the case's, and only [`configuration_rule`] is blamed); each run of
//! the client (a case may run it more than once on one home), in order, ended within the limit,
//! its stdout is one JSON report per line, and it ended as the case's `outcome` says with the
//! expected reports;
//! fake-dsh's journal shows the runtime it started (every case expects the client to start the
//! runtime it is given); it left no runtime running; the credential stayed in the environment. A
//! case resting on an interpretation is `informational` when it fails, except on a journal the
//! client broke or never had written: then nothing it did can be judged, and the case fails.

use super::play::Played;
use dsh_formats::client_case::{ClientCase, ClientSurface, Outcome};
use dsh_results::model::{Blame, CaseResult, Verdict};
use serde_json::Value;

/// A broken expectation: the rule it breaks and one line saying how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub rule: String,
    pub why: String,
    /// No interpretation softens it (the kit's evidence of the case is gone).
    pub hard: bool,
}

/// The rule a case breaks when its configuration never reached the runtime (the client did not
/// start the runtime it was given, the case's launcher): judged in every case before anything
/// else, so it needs no case of its own.
pub fn configuration_rule(surface: ClientSurface) -> &'static str {
    match surface {
        ClientSurface::Sdk => "sdk.start-the-given-runtime",
        ClientSurface::Headless => "headless.start-the-given-runtime",
        ClientSurface::Acp => "acp.start-the-given-runtime",
    }
}

/// The case's result from what it left behind.
pub fn verdict(case: &ClientCase, played: &Played) -> CaseResult {
    let finding = first_finding(case, played);
    let verdict = match (&finding, &case.interpretation) {
        (None, _) => Verdict::Pass,
        (Some(finding), Some(_)) if !finding.hard => Verdict::Informational,
        (Some(_), _) => Verdict::Fail,
    };
    CaseResult {
        id: case.id.clone(),
        summary: case.summary.clone(),
        spec: vec![case.surface.name().to_string()],
        rules: case.rules.clone(),
        verdict,
        blame: if finding.is_some() {
            Blame::Host
        } else {
            Blame::None
        },
        rule: finding.as_ref().map(|f| f.rule.clone()),
        why: finding.map(|f| f.why),
        interpretation: case.interpretation.clone(),
        duration_ms: u64::try_from(played.duration.as_millis()).unwrap_or(u64::MAX),
        transcript: transcript(played),
        flaky: Vec::new(),
        also_broken: Vec::new(),
    }
}

/// A case the run did not play: `skipped`, saying why (the client or the runtime persona lacks a
/// capability it requires).
pub fn skipped(case: &ClientCase, why: &str) -> CaseResult {
    CaseResult {
        id: case.id.clone(),
        summary: case.summary.clone(),
        spec: vec![case.surface.name().to_string()],
        rules: case.rules.clone(),
        verdict: Verdict::Skipped,
        blame: Blame::None,
        rule: None,
        why: Some(why.to_string()),
        interpretation: case.interpretation.clone(),
        duration_ms: 0,
        transcript: Vec::new(),
        flaky: Vec::new(),
        also_broken: Vec::new(),
    }
}

fn first_finding(case: &ClientCase, played: &Played) -> Option<Finding> {
    let blame = |rule: &str, why: String| {
        Some(Finding {
            rule: rule.to_string(),
            why,
            hard: false,
        })
    };
    if let Some(why) = &played.configuration_problem {
        return Some(Finding {
            rule: configuration_rule(case.surface).to_string(),
            why: format!("{why}{}", client_end(played)),
            hard: true,
        });
    }
    let first_rule = case.rules[0].as_str();
    let runs = played.earlier.len() + 1;
    for (n, run) in played.earlier.iter().enumerate() {
        let ended = Ran {
            exit: run.exit,
            hung: run.hung,
            stdout: &run.stdout,
            stderr: &run.stderr,
        };
        if let Err(why) = check_run(case, &ended) {
            return blame(first_rule, format!("run {} of {runs}: {why}", n + 1));
        }
    }
    let last = Ran {
        exit: played.exit,
        hung: played.hung,
        stdout: &played.stdout,
        stderr: &played.stderr,
    };
    if let Err(why) = check_run(case, &last) {
        let why = if runs > 1 {
            format!("run {runs} of {runs}: {why}")
        } else {
            why
        };
        return blame(first_rule, why);
    }
    if let Some(why) = &played.journal_problem {
        return Some(Finding {
            rule: first_rule.to_string(),
            why: why.clone(),
            hard: true,
        });
    }
    // The SDK's cold resume, judged from the journal (ACP's is `acp::wire`'s).
    if case.surface == ClientSurface::Sdk {
        if let Some(why) = check_resumed(case, played) {
            return blame(first_rule, why);
        }
    }
    if let Some(finding) = crate::acp::wire::finding(case, &played.journal) {
        return Some(finding);
    }
    let surface = case.surface.name();
    let teardown = match case.surface {
        ClientSurface::Sdk => "sdk.teardown-bounded",
        ClientSurface::Headless => "headless.exit-code",
        ClientSurface::Acp => "acp.reap-the-agent",
    };
    if !played.leftovers.is_empty() {
        let left: Vec<String> = played.leftovers.iter().map(ToString::to_string).collect();
        return blame(
            teardown,
            format!(
                "still running after the client exited (killed): {}",
                left.join(", ")
            ),
        );
    }
    if let Some((pipe, holders)) = played.held_open.first() {
        let held: Vec<String> = holders.iter().map(ToString::to_string).collect();
        return blame(
            teardown,
            format!(
                "the client's {pipe} was still open at the case's limit, held by {} (killed)",
                if held.is_empty() {
                    "a process the kit cannot see".to_string()
                } else {
                    held.join(", ")
                }
            ),
        );
    }
    let credentials = format!("{surface}.credentials-in-env");
    if !played.leaked.is_empty() {
        return blame(
            &credentials,
            format!("the API key was found in {}", played.leaked.join(", ")),
        );
    }
    if !played.unverified.is_empty() {
        return blame(
            &credentials,
            format!(
                "the kit cannot vouch for where the API key went: {}",
                played.unverified.join("; ")
            ),
        );
    }
    check_runtime_env(case, played).and_then(|why| blame(&credentials, why))
}

/// How one run of the client ended.
struct Ran<'a> {
    exit: Option<i32>,
    hung: bool,
    stdout: &'a [u8],
    stderr: &'a [u8],
}

/// One run: it ended within the limit, its stdout is reports, it ended as the case says.
fn check_run(case: &ClientCase, ran: &Ran) -> Result<(), String> {
    if ran.hung {
        return Err("the client did not exit within the case's limit (killed)".into());
    }
    let reports = parse_reports(ran.stdout)?;
    check_outcome(case, ran, &reports)
}

/// Each stdout line is one JSON object.
fn parse_reports(stdout: &[u8]) -> Result<Vec<Value>, String> {
    String::from_utf8_lossy(stdout)
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| match serde_json::from_str::<Value>(line) {
            Ok(value) if value.is_object() => Ok(value),
            _ => Err(format!(
                "stdout line {} is not a JSON report object: {}",
                n + 1,
                excerpt(line)
            )),
        })
        .collect()
}

/// The exit and the reports against `expect.outcome`.
fn check_outcome(case: &ClientCase, played: &Ran, reports: &[Value]) -> Result<(), String> {
    let expected = &case.expect.reports;
    let settled = || -> Result<(), String> {
        if played.exit != Some(0) {
            return Err(format!(
                "exit {}, expected 0 (every prompt settles){}",
                exit_name(played.exit),
                stderr_tail(played.stderr)
            ));
        }
        if reports.len() != expected.len() {
            return Err(format!(
                "{} reports for {} prompts",
                reports.len(),
                expected.len()
            ));
        }
        compare_all(expected, reports)
    };
    // `complete`: every prompt before the failure was reported (a case expecting the failure);
    // a client that chose to fail (settles-or-fails) may have failed earlier.
    let failed = |complete: bool| -> Result<(), String> {
        if played.exit == Some(0) {
            return Err(
                "exit 0, expected a failure (a prompt cannot settle: the runtime died, refused it or went silent)".into(),
            );
        }
        if played.stderr.iter().all(u8::is_ascii_whitespace) {
            return Err(format!(
                "exit {} with nothing on stderr (a failure says why)",
                exit_name(played.exit)
            ));
        }
        if complete && reports.len() < expected.len() {
            return Err(format!(
                "{} reports before the failure, expected {} (the prompts before the one that \
                 fails settle){}",
                reports.len(),
                expected.len(),
                stderr_tail(played.stderr)
            ));
        }
        let kept = reports.len().min(expected.len());
        compare_all(&expected[..kept], &reports[..kept])?;
        match reports[kept..]
            .iter()
            .find(|report| report.get("error").is_none())
        {
            Some(report) => Err(format!(
                "reported {} as settled, though it failed",
                excerpt(&report.to_string())
            )),
            None => Ok(()),
        }
    };
    match case.expect.outcome {
        Outcome::Settles => settled(),
        Outcome::Fails => failed(true),
        Outcome::SettlesOrFails if played.exit == Some(0) => settled(),
        Outcome::SettlesOrFails => failed(false),
    }
}

fn compare_all(expected: &[Value], reports: &[Value]) -> Result<(), String> {
    for (n, (want, got)) in expected.iter().zip(reports).enumerate() {
        compare(want, got).map_err(|why| format!("report {}: {why}", n + 1))?;
    }
    Ok(())
}

/// The members `want` names against the client's report: `text_bytes` is the length of `text`,
/// `error` a substring of the reported error, `cwd_ends_with` the end of the reported `cwd`,
/// every other member equal.
fn compare(want: &Value, got: &Value) -> Result<(), String> {
    let Some(members) = want.as_object() else {
        return Ok(());
    };
    for (name, value) in members {
        let holds = match name.as_str() {
            "text_bytes" => got["text"].as_str().map(|t| t.len() as u64) == value.as_u64(),
            "error" => got["error"]
                .as_str()
                .zip(value.as_str())
                .is_some_and(|(reported, part)| reported.contains(part)),
            "cwd_ends_with" => got["cwd"]
                .as_str()
                .zip(value.as_str())
                .is_some_and(|(reported, end)| reported.ends_with(end)),
            _ => &got[name] == value,
        };
        if !holds {
            let shown = match name.as_str() {
                "text_bytes" => {
                    format!("{} bytes of text", got["text"].as_str().map_or(0, str::len))
                }
                "error" => excerpt(&got["error"].to_string()),
                "cwd_ends_with" => excerpt(&got["cwd"].to_string()),
                _ => excerpt(&got[name].to_string()),
            };
            return Err(format!(
                "{name}: expected {}, reported {shown}",
                excerpt(&value.to_string())
            ));
        }
    }
    Ok(())
}

/// A case that resumes its session (`resume_from`), judged by what the runtime received rather
/// than by what the client reported: every runtime a resuming run started (found by where its
/// `start` entry falls among the runs' journal lengths) got `session/resume` for the case's
/// session before its first prompt, and prompted that session only. A client that ignores the
/// session and resume variables (a fresh session each process) settles every prompt, and fails
/// here.
fn check_resumed(case: &ClientCase, played: &Played) -> Option<String> {
    let (Some(from), Some(session)) = (case.resume_from, case.session.as_deref()) else {
        return None;
    };
    let runs = played.earlier.len() + 1;
    let run_of = |index: usize| {
        1 + played
            .earlier
            .iter()
            .filter(|run| run.journal_entries <= index)
            .count()
    };
    let runtimes: Vec<(i32, usize)> = played
        .journal
        .iter()
        .enumerate()
        .filter_map(|(index, entry)| match &entry.event {
            dsh_formats::journal::Event::Start { mode, .. }
                if *mode == dsh_formats::journal::Mode::Sdk =>
            {
                Some((entry.pid, run_of(index)))
            }
            _ => None,
        })
        .collect();
    for run in from as usize..=runs {
        let started: Vec<i32> = runtimes
            .iter()
            .filter(|(_, of)| *of == run)
            .map(|(pid, _)| *pid)
            .collect();
        let mut resumed_any = false;
        for pid in &started {
            match resumed_before_prompting(played, *pid, session) {
                Ok(resumed) => resumed_any |= resumed,
                Err(why) => return Some(format!("run {run} of {runs}: {why}")),
            }
        }
        if !resumed_any {
            return Some(format!(
                "run {run} of {runs}: no runtime it started received `session/resume` for \
                 session {session:?} (the client was told to resume it: DSH_SDK_SESSION, \
                 DSH_SDK_RESUME=1)"
            ));
        }
    }
    None
}

/// Whether runtime `pid` received `session/resume {sessionId: session}`; `Err` when it was
/// prompted before that, or prompted another session.
fn resumed_before_prompting(played: &Played, pid: i32, session: &str) -> Result<bool, String> {
    let mut resumed = false;
    for entry in played.journal.iter().filter(|entry| entry.pid == pid) {
        let dsh_formats::journal::Event::Command {
            command: Some(command),
            ..
        } = &entry.event
        else {
            continue;
        };
        let asked = command["params"]["sessionId"].as_str();
        match command["method"].as_str() {
            Some("session/resume") if asked == Some(session) => resumed = true,
            Some("session/prompt") if asked != Some(session) => {
                return Err(format!(
                    "the runtime (pid {pid}) was prompted for session {}, not the session the \
                     client was told to resume ({session:?})",
                    excerpt(&command["params"]["sessionId"].to_string())
                ))
            }
            Some("session/prompt") if !resumed => {
                return Err(format!(
                    "the runtime (pid {pid}) was prompted for session {session:?} before it was \
                     asked to resume it (`session/resume`)"
                ))
            }
            _ => {}
        }
    }
    Ok(resumed)
}

fn check_runtime_env(case: &ClientCase, played: &Played) -> Option<String> {
    if case.expect.runtime_env.is_empty() {
        return None;
    }
    let starts: Vec<&Vec<String>> = played
        .journal
        .iter()
        .filter_map(|entry| match &entry.event {
            dsh_formats::journal::Event::Start { env_names, .. } => Some(env_names),
            _ => None,
        })
        .collect();
    if starts.is_empty() {
        return Some("the runtime never started with the kit's environment (the client must pass its environment down)".into());
    }
    for names in starts {
        if let Some(missing) = case
            .expect
            .runtime_env
            .iter()
            .find(|want| !names.contains(want))
        {
            return Some(format!(
                "the runtime started without {missing} in its environment"
            ));
        }
    }
    None
}

/// How the client ended, for a configuration that never reached the runtime: a client that
/// could not start its runtime often says why.
fn client_end(played: &Played) -> String {
    if played.hung {
        "; the client did not exit within the case's limit (killed)".to_string()
    } else {
        format!(
            "; the client exited {}{}",
            exit_name(played.exit),
            stderr_tail(&played.stderr)
        )
    }
}

fn exit_name(exit: Option<i32>) -> String {
    exit.map_or_else(|| "by a signal".to_string(), |code| code.to_string())
}

fn stderr_tail(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    match text.trim().lines().last() {
        Some(last) => format!("; stderr: {}", excerpt(last)),
        None => String::new(),
    }
}

/// At most 160 characters of a line.
fn excerpt(text: &str) -> String {
    let mut shown: String = text.chars().take(160).collect();
    if shown.len() < text.len() {
        shown.push_str("...");
    }
    shown
}

/// What reports show of a case: the exit, the reports and stderr (bounded), the runtime's frames.
fn transcript(played: &Played) -> Vec<String> {
    let mut lines = vec![format!(
        "client exit: {}{}",
        exit_name(played.exit),
        if played.hung { " (hung, killed)" } else { "" }
    )];
    let stdout = String::from_utf8_lossy(&played.stdout);
    lines.extend(
        stdout
            .lines()
            .take(10)
            .map(|line| format!("report: {}", excerpt(line))),
    );
    let stderr = String::from_utf8_lossy(&played.stderr);
    lines.extend(
        stderr
            .lines()
            .rev()
            .take(10)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .map(|line| format!("stderr: {}", excerpt(line))),
    );
    let events: Vec<String> = played
        .journal
        .iter()
        .filter_map(|entry| match &entry.event {
            dsh_formats::journal::Event::Command {
                command: Some(command),
                ..
            } => command["method"].as_str().map(|m| format!("<- {m}")),
            dsh_formats::journal::Event::Signal { signal, .. } => Some(format!("signal {signal}")),
            dsh_formats::journal::Event::StdinClosed => Some("stdin closed".to_string()),
            dsh_formats::journal::Event::Exit { .. } => Some("exit".to_string()),
            _ => None,
        })
        .take(40)
        .collect();
    if !events.is_empty() {
        lines.push(format!("runtime: {}", events.join(", ")));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A case resting on an interpretation, played by a client that did everything right but
    /// left the journal in `problem`.
    fn judged(problem: Option<&str>) -> CaseResult {
        verdict(&case(), &played(problem))
    }

    fn case() -> ClientCase {
        serde_json::from_value(json!({
            "id": "sdk.x", "surface": "sdk", "summary": "s", "rules": ["sdk.line-framing"],
            "interpretation": "I-S01", "prompts": ["p"], "expect": {"reports": [{"text": "t"}]}
        }))
        .unwrap()
    }

    fn played(problem: Option<&str>) -> Played {
        Played {
            earlier: Vec::new(),
            exit: Some(0),
            hung: false,
            stdout: b"{\"text\": \"t\"}\n".to_vec(),
            stderr: Vec::new(),
            journal: Vec::new(),
            journal_problem: problem.map(str::to_string),
            configuration_problem: None,
            leftovers: Vec::new(),
            held_open: Vec::new(),
            leaked: Vec::new(),
            unverified: Vec::new(),
            duration: std::time::Duration::ZERO,
        }
    }

    #[test]
    fn an_earlier_run_is_judged_first_and_named() {
        let mut twice = played(None);
        twice.earlier.push(crate::play::EarlierRun {
            exit: Some(2),
            hung: false,
            stdout: Vec::new(),
            stderr: b"client: session \"s\" already exists\n".to_vec(),
            journal_entries: 0,
        });
        let result = verdict(&case(), &twice);
        assert_eq!(
            result.verdict,
            Verdict::Informational,
            "the case rests on I-S01"
        );
        let why = result.why.unwrap();
        assert!(
            why.starts_with("run 1 of 2: exit 2, expected 0") && why.contains("already exists"),
            "{why}"
        );
        twice.earlier[0] = crate::play::EarlierRun {
            exit: Some(0),
            hung: false,
            stdout: b"{\"text\": \"t\"}\n".to_vec(),
            stderr: Vec::new(),
            journal_entries: 0,
        };
        twice.exit = Some(1);
        let why = verdict(&case(), &twice).why.unwrap();
        assert!(why.starts_with("run 2 of 2: exit 1"), "{why}");
    }

    #[test]
    fn a_broken_journal_fails_the_case_whatever_it_rests_on() {
        assert_eq!(judged(None).verdict, Verdict::Pass);
        let broken = judged(Some("fake-dsh's journal is a link: j is a symbolic link"));
        assert_eq!(broken.verdict, Verdict::Fail, "never informational");
        assert_eq!(broken.rule.as_deref(), Some("sdk.line-framing"));
        assert_eq!(broken.blame, Blame::Host);
        assert_eq!(
            broken.why.as_deref(),
            Some("fake-dsh's journal is a link: j is a symbolic link")
        );
    }

    /// A configuration that never reached the runtime is said under its own rule, before
    /// anything the client reported (which the unconfigured runtime made wrong) is judged.
    #[test]
    fn a_configuration_that_never_reached_the_runtime_blames_only_its_rule() {
        let case: ClientCase = serde_json::from_value(json!({
            "id": "sdk.x", "surface": "sdk", "summary": "s", "rules": ["sdk.line-framing"],
            "interpretation": "I-S01", "prompts": ["p", "q"], "expect": {"reports": [{}, {}]}
        }))
        .unwrap();
        let played = Played {
            earlier: Vec::new(),
            exit: Some(2),
            hung: false,
            stdout: b"nonsense\n".to_vec(),
            stderr: b"client: the runtime said no\n".to_vec(),
            journal: Vec::new(),
            journal_problem: None,
            configuration_problem: Some("the configuration did not reach the runtime: x".into()),
            leftovers: Vec::new(),
            held_open: Vec::new(),
            leaked: Vec::new(),
            unverified: Vec::new(),
            duration: std::time::Duration::ZERO,
        };
        let result = verdict(&case, &played);
        assert_eq!(result.verdict, Verdict::Fail, "never informational");
        assert_eq!(result.rule.as_deref(), Some("sdk.start-the-given-runtime"));
        assert_eq!(
            result.why.as_deref(),
            Some(
                "the configuration did not reach the runtime: x; the client exited 2; \
                 stderr: client: the runtime said no"
            )
        );
    }

    /// A journal of two runs: each starts one runtime (`pid`) that receives `methods`, each
    /// `(method, session id)`.
    fn two_runs(first: &[(&str, &str)], second: &[(&str, &str)]) -> Played {
        let mut played = played(None);
        let mut journal = Vec::new();
        for (pid, methods) in [(10, first), (20, second)] {
            journal.push(
                json!({"v": 1, "event": "start", "pid": pid, "t_ms": 1, "mode": "sdk",
                "ppid": 1, "pgid": pid, "sid": 1, "argv": ["dsh"], "cwd": "/", "env_names": []}),
            );
            for (method, session) in methods {
                journal.push(json!({"v": 1, "event": "command", "pid": pid, "t_ms": 2,
                    "command": {"id": 1, "method": method, "params": {"sessionId": session}}}));
            }
            if pid == 10 {
                played.earlier.push(crate::play::EarlierRun {
                    exit: Some(0),
                    hung: false,
                    stdout: b"{\"text\": \"t\"}\n".to_vec(),
                    stderr: Vec::new(),
                    journal_entries: journal.len(),
                });
            }
        }
        played.journal = journal
            .into_iter()
            .map(|line| serde_json::from_value(line).unwrap())
            .collect();
        played
    }

    /// A resuming run is judged by what its runtime received: `session/resume` for the case's
    /// session before any prompt, and prompts to that session only.
    #[test]
    fn a_resumed_session_is_judged_by_what_the_runtime_received() {
        let case: ClientCase = serde_json::from_value(json!({
            "id": "sdk.x", "surface": "sdk", "summary": "s", "rules": ["sdk.cold-resume"],
            "prompts": ["p"], "runs": 2, "session": "s-1", "resume_from": 2,
            "expect": {"reports": [{"text": "t"}]}
        }))
        .unwrap();
        let first = [("initialize", ""), ("session/prompt", "s-1")];
        let good = two_runs(
            &first,
            &[("session/resume", "s-1"), ("session/prompt", "s-1")],
        );
        assert_eq!(verdict(&case, &good).verdict, Verdict::Pass);
        let fresh = two_runs(&[("session/prompt", "a")], &[("session/prompt", "b")]);
        let why = verdict(&case, &fresh).why.unwrap();
        assert_eq!(
            why,
            "run 2 of 2: the runtime (pid 20) was prompted for session \"b\", not the session \
             the client was told to resume (\"s-1\")"
        );
        let unresumed = two_runs(&first, &[("session/prompt", "s-1")]);
        assert!(verdict(&case, &unresumed)
            .why
            .unwrap()
            .contains("before it was asked to resume it"));
        let never = two_runs(&first, &[("initialize", "")]);
        let why = verdict(&case, &never).why.unwrap();
        assert!(
            why.starts_with("run 2 of 2: no runtime it started received `session/resume`"),
            "{why}"
        );
    }

    #[test]
    fn members_compare_as_documented() {
        assert!(compare(
            &json!({"text": "a", "children": 0}),
            &json!({"text": "a", "children": 0, "x": 1})
        )
        .is_ok());
        assert!(compare(&json!({"text_bytes": 3}), &json!({"text": "abc"})).is_ok());
        assert!(compare(
            &json!({"cwd_ends_with": "/work/site"}),
            &json!({"cwd": "/tmp/x/work/site"})
        )
        .is_ok());
        assert!(compare(
            &json!({"cwd_ends_with": "/work/site"}),
            &json!({"cwd": "site"})
        )
        .unwrap_err()
        .contains("\"site\""));
        let failed =
            json!({"tools": [{"name": "write", "ok": true}, {"name": "deploy", "ok": false}]});
        assert!(compare(&failed, &failed.clone()).is_ok());
        let all_ok =
            json!({"tools": [{"name": "write", "ok": true}, {"name": "deploy", "ok": true}]});
        assert!(compare(&failed, &all_ok)
            .unwrap_err()
            .starts_with("tools: expected"));
        assert!(compare(&json!({"text_bytes": 4}), &json!({"text": "abc"}))
            .unwrap_err()
            .contains("3 bytes"));
        assert!(compare(
            &json!({"error": "AUTH"}),
            &json!({"ok": false, "error": "dsh: AUTH: 401"})
        )
        .is_ok());
        assert!(compare(&json!({"error": "AUTH"}), &json!({"ok": false})).is_err());
        assert!(compare(&json!({"turn_ends": ["completed"]}), &json!({}))
            .unwrap_err()
            .contains("turn_ends"));
        assert!(parse_reports(b"{\"a\":1}\n\n{\"b\":2}\n").unwrap().len() == 2);
        assert!(parse_reports(b"{\"a\":1}\nnope\n")
            .unwrap_err()
            .contains("line 2"));
    }
}
