//! `dsh-conformance run --surface sdk --host CMD`: the client-side corpus for SDK clients
//! (docs/sdk-surfaces.md, "Testing an SDK client"). Each case starts the client through its driver
//! contract against fake-dsh's SDK runtime playing one scenario, and judges what the client
//! reported. Every expectation traces to a runtime behaviour observed on the real runtime (the
//! `rule` of each case names the docs/sdk-surfaces.md section); a case the real runtime never
//! produces but a robust client should survive is informational: reported, never failing the run.
//!
//! The driver contract: the client runs with `DSH_SDK_COMMAND` (a JSON array: the runtime's
//! argv) in an empty cwd, the prompts as arguments; it prints one JSON line per settled prompt
//! with at least `turn_ends` (the session's `turn/end` kinds from the prompt's receipt until it
//! settled), `text` (the last assistant text) and `children` (background children seen), and
//! exits 0.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Whether a failed case fails the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strength {
    Strict,
    Informational,
}

/// One situation: the fake runtime's scenario, the prompts, what the client must report.
pub struct Case {
    pub id: &'static str,
    /// The docs/sdk-surfaces.md section the expectation traces to.
    pub rule: &'static str,
    pub strength: Strength,
    pub scenario: Option<Value>,
    pub prompts: &'static [&'static str],
    /// Per prompt: (turn/end kinds, last assistant text, background children).
    pub expected: &'static [(&'static [&'static str], &'static str, u64)],
}

/// The corpus.
pub fn cases() -> Vec<Case> {
    let error = json!({"end": "error", "error": {"code": "AUTH", "message": "401"}});
    let strict = Strength::Strict;
    vec![
        Case {
            id: "sdk.client.receipt-before-response",
            rule:
                "Notifications: the receipt and `running` come before the session/prompt response",
            strength: strict,
            scenario: None,
            prompts: &["A landing page", "make it green"],
            expected: &[
                (&["completed"], "I wrote index.html.", 0),
                (&["completed"], "I made index.html green.", 0),
            ],
        },
        Case {
            id: "sdk.client.error-then-completed",
            rule: "Notifications: turn/end {kind: error} is a turn's end; a later prompt runs",
            strength: strict,
            scenario: Some(json!({"sdk": {"turns": [error, {"steps": [{"text": "recovered"}]}]}})),
            prompts: &["first", "second"],
            expected: &[(&["error"], "", 0), (&["completed"], "recovered", 0)],
        },
        Case {
            id: "sdk.client.background-child-then-wake",
            rule: "Notifications: subagent.started/finished; the root idles, then wakes (source)",
            strength: strict,
            scenario: Some(
                json!({"sdk": {"turns": [{"steps": [{"text": "started a child"}],
                "background_subagent": {"finish_after_ms": 300, "wake_text": "child is done"}}]}}),
            ),
            prompts: &["delegate"],
            expected: &[(&["completed", "completed"], "child is done", 1)],
        },
        Case {
            id: "sdk.client.max-tokens",
            rule: "Notifications: turn/end kinds include max-tokens (source)",
            strength: strict,
            scenario: Some(
                json!({"sdk": {"turns": [{"steps": [{"text": "cut"}], "end": "max-tokens"}]}}),
            ),
            prompts: &["long"],
            expected: &[(&["max-tokens"], "cut", 0)],
        },
        Case {
            id: "sdk.client.slow-initialize",
            rule: "Methods: initialize waits for the plugin tree (0.5 to 5 s)",
            strength: strict,
            scenario: Some(json!({"sdk": {"initialize_delay_ms": 1500}})),
            prompts: &["A landing page"],
            expected: &[(&["completed"], "I wrote index.html.", 0)],
        },
        Case {
            id: "sdk.client.approval-nobody-answers",
            rule: "Not observed: approvals never reach the wire as requests (source)",
            strength: strict,
            scenario: Some(json!({"sdk": {"turns": [{"steps": [
                {"tool_calls": [{"name": "write", "needs_approval": true,
                                 "arguments": {"file_path": "x.txt", "content": "x"}}]},
                {"text": "could not write"}]}]}})),
            prompts: &["write x"],
            expected: &[(&["completed"], "could not write", 0)],
        },
        Case {
            id: "sdk.client.tolerates-junk-and-unknown-notifications",
            rule: "Framing: stdout carries only protocol frames (so junk is a robustness extra)",
            strength: Strength::Informational,
            scenario: Some(json!({"sdk": {"stdout_noise": [
                "not json at all",
                "{\"jsonrpc\":\"2.0\",\"method\":\"x.unknown\",\"params\":{\"t\":\"a\u{2028}b\"}}"]}})),
            prompts: &["A landing page"],
            expected: &[(&["completed"], "I wrote index.html.", 0)],
        },
    ]
}

/// Where and how to run the clients.
pub struct Setup {
    /// The client's command line.
    pub client: Vec<String>,
    /// fake-dsh.
    pub fake_dsh: PathBuf,
    /// The longest one case may take.
    pub limit: Duration,
    /// Extra environment for the client (the kit's mutants use it).
    pub env: Vec<(String, String)>,
}

/// Runs one case; `Err` says how the client's report differs from the expectation.
pub fn run_case(setup: &Setup, case: &Case) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| format!("cannot make a temp dir: {e}"))?;
    let runtime = json!([setup.fake_dsh, "--profile", "sdk"]);
    let (program, args) = setup
        .client
        .split_first()
        .ok_or("the client command is empty")?;
    let mut command = Command::new(program);
    command
        .args(args)
        .args(case.prompts)
        .current_dir(dir.path())
        .env("DSH_SDK_COMMAND", runtime.to_string())
        .env("DSH_HOME", dir.path().join("dsh-home"))
        .env(
            "FAKE_DSH_WATCHDOG_SECS",
            setup.limit.as_secs().max(1).to_string(),
        )
        .env_remove("FAKE_DSH_SCENARIO")
        .envs(setup.env.iter().map(|(k, v)| (k, v)));
    if let Some(scenario) = &case.scenario {
        let file = dir.path().join("scenario.json");
        std::fs::write(&file, scenario.to_string()).map_err(|e| e.to_string())?;
        command.env("FAKE_DSH_SCENARIO", file);
    }
    let output = crate::check_runtime::output_within(command, Stdio::null(), setup.limit)
        .map_err(|e| format!("could not run the client: {e:?}"))?;
    judge(case, output.status.code(), &output.stdout, &output.stderr)
}

fn judge(case: &Case, exit: Option<i32>, stdout: &[u8], stderr: &[u8]) -> Result<(), String> {
    let stdout = String::from_utf8_lossy(stdout);
    let reports: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).map_err(|e| format!("report {line:?}: {e}")))
        .collect::<Result<_, _>>()?;
    let expected: Vec<Value> = case
        .expected
        .iter()
        .map(
            |(ends, text, children)| json!({"turn_ends": ends, "text": text, "children": children}),
        )
        .collect();
    let got: Vec<Value> = reports
        .iter()
        .map(|r| json!({"turn_ends": r["turn_ends"], "text": r["text"], "children": r["children"]}))
        .collect();
    if exit == Some(0) && got == expected {
        return Ok(());
    }
    Err(format!(
        "exit {exit:?}, reported {got:?}, expected {expected:?}; stderr: {}",
        String::from_utf8_lossy(stderr).trim()
    ))
}

/// `run --surface sdk`: every case against the client, a table on stdout; exit 0 when every
/// strict case passed, 1 otherwise.
pub fn run(host: &str, fake_dsh: Option<&Path>, time_scale: f64) -> Result<u8, String> {
    let client = shlex::split(host).ok_or_else(|| format!("--host {host:?}: unbalanced quotes"))?;
    let client = client.into_iter().map(absolute_if_a_file).collect();
    let fake_dsh = match fake_dsh {
        Some(path) => path.to_path_buf(),
        None => sibling("fake-dsh")?,
    };
    let setup = Setup {
        client,
        fake_dsh,
        limit: Duration::from_secs_f64(60.0 * time_scale.max(0.1)),
        env: Vec::new(),
    };
    let mut failed = 0;
    for case in cases() {
        let verdict = run_case(&setup, &case);
        let (word, why) = match (&verdict, case.strength) {
            (Ok(()), _) => ("pass", String::new()),
            (Err(why), Strength::Strict) => {
                failed += 1;
                ("FAIL", format!("  {why}"))
            }
            (Err(why), Strength::Informational) => ("info", format!("  {why}")),
        };
        println!("{word:<5} {}{why}", case.id);
    }
    println!("{failed} strict case(s) failed");
    Ok(u8::from(failed > 0))
}

/// A relative path in the client command that names an existing file, made absolute (each case
/// runs the client in its own empty cwd).
fn absolute_if_a_file(arg: String) -> String {
    let path = Path::new(&arg);
    if arg.contains('/') && path.is_relative() && path.exists() {
        if let Ok(absolute) = std::path::absolute(path) {
            return absolute.to_string_lossy().into_owned();
        }
    }
    arg
}

/// A kit binary next to this executable.
fn sibling(name: &str) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let path = exe.with_file_name(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "{name} not found next to {} (pass --fake-dsh)",
            exe.display()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_judged_on_exit_ends_text_and_children() {
        let case = &cases()[1];
        let good =
            b"{\"turn_ends\":[\"error\"],\"text\":\"\",\"children\":0,\"messageId\":\"m\"}\n\
                     {\"turn_ends\":[\"completed\"],\"text\":\"recovered\",\"children\":0}\n";
        assert!(judge(case, Some(0), good, b"").is_ok());
        assert!(judge(case, Some(1), good, b"").is_err());
        let short = b"{\"turn_ends\":[\"error\"],\"text\":\"\",\"children\":0}\n";
        assert!(judge(case, Some(0), short, b"")
            .unwrap_err()
            .contains("expected"));
        assert!(judge(case, Some(0), b"junk\n", b"")
            .unwrap_err()
            .contains("junk"));
        let ids: std::collections::BTreeSet<&str> = cases().iter().map(|c| c.id).collect();
        assert_eq!(ids.len(), cases().len(), "ids are unique");
    }
}
