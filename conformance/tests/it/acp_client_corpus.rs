//! The ACP client corpus through the CLI (`dsh-conformance run --surface acp`, docs/surface-acp.md,
//! "The client corpus"): each example ACP client passes every case (or fails only the cases its
//! expectations file lists), each client in a lane of its own, every case played once; the outputs
//! name the rules and the corpus; `--write-expectations` writes the failures; a client that
//! reports nothing fails each case on its first rule, and one that never answers is killed at the
//! case's limit, saying so; a malformed ACP case stops the run naming its file and the rule it
//! breaks. A client whose SDK or interpreter is missing is skipped, saying so.

use crate::node_support::repo_root;
use dsh_report::document::{schema_errors, SchemaPart};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

/// The ACP example clients: name, command (from the workspace root), what it needs to run (a
/// program, then a file that must exist: its installed SDK), its expectations file.
pub const ACP_EXAMPLES: [(&str, &str, &str, Option<&str>); 3] = [
    (
        "python",
        "python3 examples/acp-client-python/acp_corpus_client.py",
        "python3",
        None,
    ),
    (
        "typescript",
        "node examples/acp-client-ts/acp-corpus-client.mjs",
        "node",
        None,
    ),
    (
        "acpx",
        "node examples/acp-client-acpx/acpx-driver.mjs",
        "node",
        Some("examples/acp-client-acpx/corpus-expectations.json"),
    ),
];

/// Whether an example can run here: its interpreter, and its SDK installed (the Python SDK
/// importable; the npm examples' `node_modules`, which `.ci/run` installs with `npm ci`).
pub fn example_runs(name: &str, interpreter: &str) -> bool {
    if !dsh_test_support::tool_available(interpreter) {
        dsh_test_support::skip(format!("the ACP example {name}: no {interpreter}"));
        return false;
    }
    let ready = match name {
        "python" => Command::new("python3")
            .args(["-c", "import acp"])
            .output()
            .is_ok_and(|out| out.status.success()),
        "typescript" => repo_root()
            .join("examples/acp-client-ts/node_modules/@agentclientprotocol/sdk")
            .is_dir(),
        _ => repo_root()
            .join("examples/acp-client-acpx/node_modules/acpx")
            .is_dir(),
    };
    if !ready {
        dsh_test_support::skip(format!(
            "the ACP example {name}: its SDK is not installed (.ci/run installs it)"
        ));
    }
    ready
}

/// A shell client's first lines: the agent's path in `$rt` (the one element of DSH_ACP_COMMAND).
const RUNTIME: &str =
    "#!/bin/sh\nrt=$(printf '%s' \"$DSH_ACP_COMMAND\" | sed 's/^\\[\"//; s/\"\\]$//')";

fn run(host: &str, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dsh-conformance"))
        .args(["run", "--surface", "acp", "--host", host])
        .arg("--fake-dsh")
        .arg(dsh_test_support::binary("fake-dsh"))
        .args(extra)
        .current_dir(repo_root())
        .output()
        .unwrap()
}

fn case_count() -> usize {
    std::fs::read_dir(repo_root().join("fixtures/clients/acp"))
        .unwrap()
        .filter(|entry| entry.as_ref().unwrap().file_name() != "rules.json")
        .count()
}

/// One example's whole run, checked: exit 0, every case passed (or xfail as listed), the JSON,
/// JUnit and Markdown outputs name the rules and the corpus.
fn check_example(name: &str, command: &str, expectations: Option<&str>, dir: &Path) {
    let json = dir.join(format!("{name}.json"));
    let junit = dir.join(format!("{name}.xml"));
    let markdown = dir.join(format!("{name}.md"));
    let mut extra = vec![
        "--json",
        json.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
        "--markdown",
        markdown.to_str().unwrap(),
    ];
    if let Some(file) = expectations {
        extra.extend(["--expectations", file]);
    }
    // acpx starts two Node processes of its own a command (its CLI, its queue owner) and several
    // commands a case: on a loaded machine its bounds need room.
    if name == "acpx" {
        extra.extend(["--time-scale", "2"]);
    }
    let output = run(command, &extra);
    let table = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{name}:\n{table}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let cases = report["cases"].as_array().unwrap();
    assert_eq!(cases.len(), case_count(), "{name}: every case played once");
    let listed: Vec<String> = expectations
        .map(|file| {
            let text = std::fs::read_to_string(repo_root().join(file)).unwrap();
            let value: Value = serde_json::from_str(&text).unwrap();
            value["xfail"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    for case in cases {
        let id = case["id"].as_str().unwrap();
        let want = if listed.iter().any(|listed| listed == id) {
            "xfail"
        } else {
            "pass"
        };
        assert_eq!(case["verdict"], want, "{name} {id}:\n{table}");
        assert!(id.starts_with("acp."), "{id}");
        assert!(!case["rules"].as_array().unwrap().is_empty(), "{id}");
    }
    assert_eq!(report["surface"], "acp");
    assert_eq!(report["corpus"]["embedded"], true, "{name}");
    let problems = schema_errors(&report, SchemaPart::Suite);
    assert!(problems.is_empty(), "{name}: {problems:?}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("name=\"rule\" value=\"acp."), "{xml}");
    let md = std::fs::read_to_string(&markdown).unwrap();
    assert!(md.contains("/ `fake-dsh acp`"), "{md}");
}

#[test]
fn every_acp_example_client_passes_the_corpus_each_in_its_lane() {
    let dir = tempfile::tempdir().unwrap();
    std::thread::scope(|scope| {
        for (name, command, interpreter, expectations) in ACP_EXAMPLES {
            let dir = dir.path();
            scope.spawn(move || {
                if example_runs(name, interpreter) {
                    check_example(name, command, expectations, dir);
                }
            });
        }
    });
}

/// A client that starts its agent, says nothing to it and reports nothing: each case fails on
/// its own first rule (a hang on the agent's side is not the client's), and `--write-expectations`
/// writes those failures in the host run's format.
#[test]
fn a_client_that_reports_nothing_fails_each_case_and_the_failures_can_be_written() {
    let dir = tempfile::tempdir().unwrap();
    let client = dir.path().join("silent.sh");
    std::fs::write(
        &client,
        format!("{RUNTIME}\n\"$rt\" </dev/null >/dev/null 2>&1\n"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&client, std::fs::Permissions::from_mode(0o755)).unwrap();
    let written = dir.path().join("expectations.json");
    let output = run(
        client.to_str().unwrap(),
        &[
            "--format",
            "json",
            "--case",
            "acp.max-tokens",
            "--case",
            "acp.agent-exits-mid-turn",
            "--write-expectations",
            written.to_str().unwrap(),
        ],
    );
    let cases = crate::client_corpus::every_case_fails_on_its_first_rule(&output, 2);
    let why = |id: &str| {
        let case = cases.iter().find(|c| c["id"] == id).unwrap();
        case["why"].as_str().unwrap().to_string()
    };
    assert!(why("acp.max-tokens").contains("0 reports for 1 prompts"));
    assert!(why("acp.agent-exits-mid-turn").contains("exit 0, expected a failure"));
    let expectations: Value =
        serde_json::from_str(&std::fs::read_to_string(&written).unwrap()).unwrap();
    let listed: Vec<&String> = expectations["xfail"].as_object().unwrap().keys().collect();
    assert_eq!(listed, ["acp.agent-exits-mid-turn", "acp.max-tokens"]);
}

/// A client that starts its agent and then never exits (it waits forever) is killed at the case's limit and
/// the case says so; the run ends.
#[test]
fn a_client_that_never_answers_is_killed_at_the_limit_saying_so() {
    let dir = tempfile::tempdir().unwrap();
    let client = dir.path().join("stuck.sh");
    std::fs::write(
        &client,
        format!("{RUNTIME}\n\"$rt\" </dev/null >/dev/null 2>&1\nexec sleep 600\n"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&client, std::fs::Permissions::from_mode(0o755)).unwrap();
    let output = run(
        client.to_str().unwrap(),
        &[
            "--format",
            "json",
            "--time-scale",
            "0.1",
            "--case",
            "acp.write-page",
        ],
    );
    assert_eq!(output.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let case = &report["cases"][0];
    assert_eq!(case["verdict"], "fail", "{case}");
    assert_eq!(case["rule"], "acp.stop-reason-ends-the-turn", "{case}");
    assert!(
        case["why"]
            .as_str()
            .unwrap()
            .contains("did not exit within the case's limit (killed)"),
        "{case}"
    );
}

/// A malformed ACP case (a scenario member its schema refuses; a `cancel` naming no prompt)
/// stops the run, exit 2, naming the file and the rule it breaks.
#[test]
fn a_malformed_acp_case_names_its_file_and_the_rule() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = dir.path().join("fixtures");
    let clients = fixtures.join("clients");
    let acp = clients.join("acp");
    std::fs::create_dir_all(&acp).unwrap();
    std::fs::copy(
        repo_root().join("fixtures/clients/rules.json"),
        clients.join("rules.json"),
    )
    .unwrap();
    std::fs::copy(
        repo_root().join("fixtures/clients/acp/rules.json"),
        acp.join("rules.json"),
    )
    .unwrap();
    let case = |acp_member: &str| {
        format!(
            r#"{{"id": "acp.bad", "surface": "acp", "summary": "s", "rules": ["acp.max-tokens"],
                "acp": {acp_member}, "prompts": ["p"], "expect": {{"reports": [{{}}]}}}}"#
        )
    };
    let expect_refusal = |member: &str, says: &[&str]| {
        std::fs::write(acp.join("bad.json"), case(member)).unwrap();
        let output = run(
            "true",
            &[
                "--fixtures",
                fixtures.to_str().unwrap(),
                "--case",
                "acp.bad",
            ],
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("bad.json"), "{stderr}");
        for part in says {
            assert!(stderr.contains(part), "{part}: {stderr}");
        }
    };
    expect_refusal(
        r#"{"scenario": {"turns": [{"stop": "bored"}]}}"#,
        &["client-case.schema.json", "bored"],
    );
    expect_refusal(
        r#"{"cancel": 2}"#,
        &["acp.cancel 2 is not one of the 1 prompts"],
    );
}

#[test]
fn the_acp_docs_list_every_rule_and_case_with_its_source() {
    let docs = std::fs::read_to_string(repo_root().join("docs/surface-acp.md")).unwrap();
    let rules: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("fixtures/clients/acp/rules.json")).unwrap(),
    )
    .unwrap();
    let mut named: Vec<String> = rules["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rule| rule["id"].as_str().unwrap().to_string())
        .collect();
    for entry in std::fs::read_dir(repo_root().join("fixtures/clients/acp")).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap() != "rules.json" {
            let case: Value =
                serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
            named.push(case["id"].as_str().unwrap().to_string());
        }
    }
    let mutants: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("examples/acp-client-mutants.json")).unwrap(),
    )
    .unwrap();
    for mutant in mutants["mutants"].as_array().unwrap() {
        named.push(mutant["name"].as_str().unwrap().to_string());
    }
    let missing: Vec<&String> = named
        .iter()
        .filter(|id| !docs.contains(&format!("`{id}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/surface-acp.md does not list {missing:?}"
    );
}
