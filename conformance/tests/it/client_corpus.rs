//! The client corpus through the CLI (`dsh-conformance run --surface sdk|headless`): the four
//! example clients pass every case of their surface and the outputs name the rules and the
//! corpus; a client that reports nothing fails each case on the case's own first rule; a client
//! that cannot start, or no client, is exit 2; a glob that matches nothing is exit 3; a capability
//! the client lacks skips its cases. A client whose interpreter is missing is skipped, saying so.

use crate::node_support::repo_root;
use dsh_report::document::{schema_errors, SchemaPart};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(surface: &str, host: &str, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dsh-conformance"))
        .args(["run", "--surface", surface, "--host", host])
        .arg("--fake-dsh")
        .arg(dsh_test_support::binary("fake-dsh"))
        .args(extra)
        .current_dir(repo_root())
        .output()
        .unwrap()
}

#[test]
fn every_example_client_passes_its_surface_with_rules_and_corpus_in_the_outputs() {
    let examples = dsh_test_support::EXAMPLE_CLIENTS;
    let dir = tempfile::tempdir().unwrap();
    for (surface, interpreter, script) in examples {
        if !dsh_test_support::tool_available(interpreter) {
            continue;
        }
        let json = dir.path().join(format!("{surface}-{interpreter}.json"));
        let junit = dir.path().join(format!("{surface}-{interpreter}.xml"));
        let output = run(
            surface,
            &format!("{interpreter} {script}"),
            &[
                "--json",
                json.to_str().unwrap(),
                "--junit",
                junit.to_str().unwrap(),
            ],
        );
        let table = String::from_utf8_lossy(&output.stdout);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{script}:\n{table}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let cases = report["cases"].as_array().unwrap();
        assert!(
            cases.len() >= if surface == "sdk" { 14 } else { 4 },
            "{script}: {}",
            cases.len()
        );
        assert!(
            cases.iter().all(|c| c["verdict"] == "pass"),
            "{script}:\n{table}"
        );
        assert!(cases
            .iter()
            .all(|c| c["id"].as_str().unwrap().starts_with(surface)));
        assert!(cases
            .iter()
            .all(|c| !c["rules"].as_array().unwrap().is_empty()));
        assert_eq!(
            report["corpus"]["embedded"], true,
            "{script}: the workspace's corpus is the embedded one"
        );
        assert_eq!(report["surface"], surface);
        let problems = schema_errors(&report, SchemaPart::Suite);
        assert!(problems.is_empty(), "{script}: {problems:?}");
        assert_eq!(
            report["corpus"]["cases"].as_u64().unwrap() as usize,
            cases.len()
        );
        let xml = std::fs::read_to_string(&junit).unwrap();
        assert!(
            xml.contains(&format!("name=\"rule\" value=\"{surface}.")),
            "{xml}"
        );
    }
}

/// The client starts the runtime it is given (so the case's configuration reached it), gives it
/// nothing to do and reports nothing.
#[test]
fn a_client_that_reports_nothing_fails_each_case_on_its_first_rule() {
    let dir = tempfile::tempdir().unwrap();
    let client = script_client(
        dir.path(),
        "silent",
        &format!("{RUNTIME}\n\"$rt\" </dev/null >/dev/null 2>&1"),
    );
    let output = run(
        "sdk",
        client.to_str().unwrap(),
        &[
            "--format",
            "json",
            "--case",
            "sdk.receipt-*",
            "--case",
            "sdk.sig*",
        ],
    );
    let cases = every_case_fails_on_its_first_rule(&output, 3);
    for case in &cases {
        assert_eq!(case["blame"], "host", "{case}");
    }
    let why = |id: &str| {
        let case = cases.iter().find(|c| c["id"] == id).unwrap();
        case["why"].as_str().unwrap().to_string()
    };
    assert!(why("sdk.receipt-before-response").contains("0 reports for 2 prompts"));
    assert!(why("sdk.sigterm-mid-turn").contains("exit 0, expected a failure"));
}

#[test]
fn what_cannot_run_is_exit_2_a_glob_matching_nothing_exit_3_a_lacking_capability_skips() {
    let missing = run("sdk", "/nonexistent/client", &[]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/client"));
    let no_host = Command::new(env!("CARGO_BIN_EXE_dsh-conformance"))
        .args(["run", "--surface", "headless"])
        .output()
        .unwrap();
    assert_eq!(no_host.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&no_host.stderr).contains("--host"));
    let nothing = run("sdk", "true", &["--case", "sdk.no-such-*"]);
    assert_eq!(nothing.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&nothing.stderr).contains("sdk.no-such-*"));
    let malformed = run("sdk", "true", &["--case", "sdk.[x"]);
    assert_eq!(
        malformed.status.code(),
        Some(2),
        "a glob that does not compile"
    );
    assert!(String::from_utf8_lossy(&malformed.stderr).contains("not a valid glob"));
    if dsh_test_support::tool_available("python3") {
        let skipped = run(
            "sdk",
            "python3 examples/sdk-client-python/dsh_sdk_client.py",
            &[
                "--format",
                "json",
                "--case",
                "sdk.background-*",
                "--client-lacks",
                "background-subagents",
            ],
        );
        let report: Value = serde_json::from_slice(&skipped.stdout).unwrap();
        assert_eq!(report["cases"][0]["verdict"], "skipped", "{report}");
        assert_eq!(skipped.status.code(), Some(3), "nothing measured");
    }
}

#[test]
fn the_client_docs_list_every_rule_case_and_mutant() {
    let docs = std::fs::read_to_string(repo_root().join("docs/sdk-clients.md")).unwrap();
    let read = |path: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(repo_root().join(path)).unwrap()).unwrap()
    };
    let mut named: Vec<String> = read("fixtures/clients/rules.json")["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rule| rule["id"].as_str().unwrap().to_string())
        .collect();
    for surface in ["sdk", "headless"] {
        for file in std::fs::read_dir(repo_root().join("fixtures/clients").join(surface)).unwrap() {
            let case: Value =
                serde_json::from_str(&std::fs::read_to_string(file.unwrap().path()).unwrap())
                    .unwrap();
            named.push(case["id"].as_str().unwrap().to_string());
        }
    }
    for mutant in read("examples/client-mutants.json")["mutants"]
        .as_array()
        .unwrap()
    {
        named.push(mutant["name"].as_str().unwrap().to_string());
    }
    let missing: Vec<&String> = named
        .iter()
        .filter(|id| !docs.contains(&format!("`{id}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/sdk-clients.md does not list {missing:?} (regenerate its tables)"
    );
}

#[test]
fn the_sdk_examples_pass_on_the_0_1_1_persona_and_headless_has_none() {
    for (interpreter, script) in [
        ("python3", "examples/sdk-client-python/dsh_sdk_client.py"),
        ("node", "examples/sdk-client-node/dsh-sdk-client.mjs"),
    ] {
        if !dsh_test_support::tool_available(interpreter) {
            continue;
        }
        let host = format!("{interpreter} {script}");
        let output = run(
            "sdk",
            &host,
            &["--runtime-persona", "0.1.1", "--format", "json"],
        );
        assert_eq!(output.status.code(), Some(0), "{script}");
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(report["runtime_variant"], "fake-dsh sdk 0.1.1");
        assert!(
            report["rerun_args"].to_string().contains("0.1.1"),
            "{report}"
        );
    }
    let headless = run("headless", "true", &["--runtime-persona", "0.1.1"]);
    assert_eq!(headless.status.code(), Some(2));
}

/// A client is told where fake-dsh's journal is (`FAKE_DSH_JOURNAL`), so it can break it; and a
/// client that never starts the runtime leaves it unwritten (the case's configuration reached no
/// runtime: said under the configuration rule alone). Either way the case fails, saying
/// exactly what happened to the journal, even when the client otherwise ended as the case asks
/// (here: `sdk.sigterm-mid-turn` wants a failure on stderr and a non-zero exit, which these
/// clients fake). A link (to `/dev/zero`, which the kit once read to a gigabyte) or a FIFO is
/// never followed nor read, and the run goes on to judge the case.
#[test]
fn a_client_that_never_starts_the_runtime_or_breaks_its_journal_fails_saying_how() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let modes = [
        (
            "never",
            "",
            "the configuration did not reach the runtime: fake-dsh's journal of the case was never \
             written",
        ),
        (
            "removed",
            r#"rm -f "$FAKE_DSH_JOURNAL""#,
            "fake-dsh's journal is missing: ",
        ),
        (
            "emptied",
            r#": > "$FAKE_DSH_JOURNAL""#,
            "fake-dsh's journal was emptied: ",
        ),
        (
            "fifo",
            r#"rm -f "$FAKE_DSH_JOURNAL" && mkfifo "$FAKE_DSH_JOURNAL""#,
            "fake-dsh's journal is not a regular file: ",
        ),
        (
            "linked",
            r#"rm -f "$FAKE_DSH_JOURNAL" && ln -s /dev/zero "$FAKE_DSH_JOURNAL""#,
            "fake-dsh's journal is a link: ",
        ),
    ];
    for (mode, tamper, said) in modes {
        let client = dir.path().join(format!("{mode}.sh"));
        std::fs::write(
            &client,
            format!("#!/bin/sh\n{tamper}\necho 'the runtime died' >&2\nexit 1\n"),
        )
        .unwrap();
        std::fs::set_permissions(&client, std::fs::Permissions::from_mode(0o755)).unwrap();
        let output = run(
            "sdk",
            client.to_str().unwrap(),
            &["--format", "json", "--case", "sdk.sigterm-mid-turn"],
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{mode}: {stderr}");
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        let case = &report["cases"][0];
        assert_eq!(case["verdict"], "fail", "{mode}: {case}");
        assert_eq!(case["blame"], "host", "{mode}: {case}");
        let rule = if mode == "never" {
            "sdk.start-the-given-runtime"
        } else {
            "sdk.runtime-death-fails-pending"
        };
        assert_eq!(case["rule"], rule, "{mode}: {case}");
        let why = case["why"].as_str().unwrap();
        assert!(why.starts_with(said), "{mode}: {why}");
    }
}

/// A shell-script client in `dir` (made executable) running `body`.
fn script_client(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The pid a client wrote to `file`.
fn pid_in(file: &Path) -> i32 {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("the client wrote no pid to {}", file.display()))
}

const HAIKU: &str = r#"{"ok": true, "text": "Autumn moon rises", "error": null}"#;

/// A shell line setting `rt` to the runtime the kit gives the client (the first word of its
/// command), so a test client starts it as a real client would (the journal must show it).
const RUNTIME: &str =
    r#"rt=$(printf '%s' "$DSH_HEADLESS_COMMAND$DSH_SDK_COMMAND" | sed 's/^\["\([^"]*\)".*/\1/')"#;

/// A daemon started with `setsid` and an emptied environment carries no case token, yet it
/// outlives its client: `run` (a subreaper) adopts it, kills it and fails the case on the
/// teardown rule (issue 33 item 2). The same daemon holding the client's stdout does not keep
/// `run` waiting on the pipe: it is killed with the rest, and named.
#[test]
fn an_escaped_daemon_without_the_case_token_fails_the_case_and_is_killed() {
    if !std::path::Path::new("/proc/self/stat").exists() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (name, redirect) in [
        ("quiet-daemon", "</dev/null >/dev/null 2>&1"),
        ("stdout-holder", "</dev/null 2>/dev/null"),
    ] {
        let pid_file = dir.path().join(format!("{name}.pid"));
        let client = script_client(
            dir.path(),
            name,
            &format!(
                "{RUNTIME}\n\"$rt\" --profile headless \"write a haiku\" >/dev/null 2>&1\n\
                 setsid env -i sleep 60 {redirect} &\necho $! > {}\necho '{HAIKU}'",
                pid_file.display()
            ),
        );
        let output = run(
            "headless",
            client.to_str().unwrap(),
            &["--case", "headless.completed", "--format", "json"],
        );
        let report: Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|_| panic!("{name}: {}", String::from_utf8_lossy(&output.stderr)));
        assert_eq!(output.status.code(), Some(1), "{name}: {report}");
        let case = &report["cases"][0];
        assert_eq!(case["verdict"], "fail", "{name}: {case}");
        assert_eq!(case["rule"], "headless.exit-code", "{name}: {case}");
        let pid = pid_in(&pid_file);
        let why = case["why"].as_str().unwrap();
        assert!(
            why.contains(&format!("pid {pid} (sleep)")) && why.contains("after the client exited"),
            "{name}: {why}"
        );
        assert!(
            !dsh_engine::procfs::is_live(pid),
            "{name}: the daemon {pid} outlived run"
        );
    }
}

/// A daemon that escapes with `setsid` and an emptied environment holding a forged case token
/// (`DSH_CONFORMANCE_CASE=<anything>`, no live case's) is not spared as another case's: on both
/// surfaces `run` kills it and fails the case on its teardown rule (issue 40 item 1).
#[test]
fn a_daemon_with_a_forged_case_token_fails_the_case_and_is_killed() {
    if !std::path::Path::new("/proc/self/stat").exists() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sdk_report = r#"{"turn_ends": ["completed"], "text": "I wrote index.html."}"#;
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#;
    let clients = [
        (
            "headless",
            "headless.completed",
            "headless.exit-code",
            format!("\"$rt\" --profile headless \"write a haiku\" >/dev/null 2>&1\necho '{HAIKU}'"),
        ),
        (
            "sdk",
            "sdk.key-only-in-env",
            "sdk.teardown-bounded",
            format!(
                "echo '{initialize}' | \"$rt\" --profile sdk >/dev/null 2>&1\necho '{sdk_report}'"
            ),
        ),
    ];
    for (surface, case_id, rule, body) in clients {
        let pid_file = dir.path().join(format!("{surface}.pid"));
        let client = script_client(
            dir.path(),
            &format!("{surface}-forged"),
            &format!(
                "{RUNTIME}\nsetsid env -i DSH_CONFORMANCE_CASE=forged-token sleep 60 \
                 </dev/null >/dev/null 2>&1 &\necho $! > {}\n{body}",
                pid_file.display()
            ),
        );
        let output = run(
            surface,
            client.to_str().unwrap(),
            &["--case", case_id, "--format", "json"],
        );
        let pid = pid_in(&pid_file);
        let outlived = dsh_engine::procfs::is_live(pid);
        if outlived {
            // Not left behind by the test either.
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let report: Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|_| panic!("{surface}: {}", String::from_utf8_lossy(&output.stderr)));
        assert!(
            !outlived,
            "{surface}: the daemon {pid} outlived run: {report}"
        );
        let case = &report["cases"][0];
        assert_eq!(output.status.code(), Some(1), "{surface}: {case}");
        assert_eq!(case["verdict"], "fail", "{surface}: {case}");
        assert_eq!(case["rule"], rule, "{surface}: {case}");
        let why = case["why"].as_str().unwrap();
        assert!(
            why.contains(&format!("pid {pid} (sleep)")),
            "{surface}: {why}"
        );
    }
}

/// The key canary is looked for in its encoded and split forms, in every file under the case's
/// root, in what the runtime received on stdin, and what hides it is itself reported (issue 33
/// item 3): each of these clients reports the case's expected answer and leaks the key (or
/// blinds the kit) one way, and fails the case on the credentials rule, saying where.
#[test]
fn a_key_hidden_from_the_canary_search_is_still_found() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = RUNTIME;
    let report = HAIKU;
    let sdk_report = r#"{"turn_ends": ["completed"], "text": "I wrote index.html."}"#;
    let clients: Vec<(&str, &str, String, &str)> = vec![
        (
            "base64-on-stderr",
            "headless",
            format!("{runtime}\n\"$rt\" --profile headless \"write a haiku\" >/dev/null 2>&1\nprintf '%s' \"$DEEPSEEK_API_KEY\" | base64 >&2\necho '{report}'"),
            "the client's stderr (base64)",
        ),
        (
            "split-on-stderr",
            "headless",
            format!(
                "{runtime}\n\"$rt\" --profile headless \"write a haiku\" >/dev/null 2>&1\n\
                 echo \"$DEEPSEEK_API_KEY\" | cut -c1-35 >&2\necho ... >&2\n\
                 echo \"$DEEPSEEK_API_KEY\" | cut -c36- >&2\necho '{report}'"
            ),
            "the client's stderr (a piece of it)",
        ),
        (
            "file-beside-the-working-dir",
            "headless",
            format!("{runtime}\n\"$rt\" --profile headless \"write a haiku\" >/dev/null 2>&1\necho \"$DEEPSEEK_API_KEY\" > ../beside.txt\necho '{report}'"),
            "the file beside.txt (raw)",
        ),
        (
            "file-past-2000-entries",
            "headless",
            format!(
                "{runtime}\n\"$rt\" --profile headless \"write a haiku\" >/dev/null 2>&1\n\
                 mkdir many\nfor i in $(seq 2100); do : > many/f$i; done\n\
                 mkdir -p zz/deeper\necho \"$DEEPSEEK_API_KEY\" > zz/deeper/key\necho '{report}'"
            ),
            "the file work/zz/deeper/key (raw)",
        ),
        (
            "file-in-home",
            "headless",
            format!("{runtime}\n\"$rt\" --profile headless \"write a haiku\" >/dev/null 2>&1\necho \"$DEEPSEEK_API_KEY\" > \"$HOME/.dsh-client.log\"\necho '{report}'"),
            "the file home/.dsh-client.log (raw)",
        ),
        (
            "journal-emptied",
            "headless",
            format!(
                "{runtime}\n\"$rt\" --profile headless \"write a haiku\" \
                 >/dev/null 2>&1\n: > \"$FAKE_DSH_JOURNAL\"\necho '{report}'"
            ),
            "journal was emptied",
        ),
        (
            "working-dir-swapped",
            "headless",
            format!("{runtime}\n\"$rt\" --profile headless \"write a haiku\" >/dev/null 2>&1\ncd ..\nmkdir elsewhere\nmv work moved\nln -s elsewhere work\necho '{report}'"),
            "working directory was replaced",
        ),
        (
            "sparse-files",
            "headless",
            format!("{runtime}\n\"$rt\" --profile headless \"write a haiku\" >/dev/null 2>&1\nfor i in $(seq 200); do truncate -s 16M f$i; done\necho '{report}'"),
            "were not all read",
        ),
        (
            "key-in-initialize",
            "sdk",
            format!(
                "{runtime}\nprintf '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\
                 \"params\":{{\"token\":\"%s\"}}}}\\n' \"$DEEPSEEK_API_KEY\" \
                 | \"$rt\" --profile sdk >/dev/null 2>&1\necho '{sdk_report}'"
            ),
            "what the runtime received on stdin (`initialize`",
        ),
    ];
    for (name, surface, body, expected) in clients {
        let client = script_client(dir.path(), name, &body);
        // The emptied journal would also fail key-only-in-env's runtime_env expectation.
        let case = if name == "journal-emptied" {
            "headless.completed".to_string()
        } else {
            format!("{surface}.key-only-in-env")
        };
        let output = run(
            surface,
            client.to_str().unwrap(),
            &["--case", &case, "--format", "json"],
        );
        // An emptied journal is judged before the key (docs/sdk-clients.md, step 4), on the
        // case's first rule; every other hiding place fails the credentials rule.
        let rule = (name != "journal-emptied").then(|| format!("{surface}.credentials-in-env"));
        assert_the_one_case_fails(name, &output, rule.as_deref(), expected);
    }
}

/// The `--format json` run's cases, after asserting it exited 1 with `count` cases, each failing
/// on its first rule (the rule a client that does nothing breaks first).
pub fn every_case_fails_on_its_first_rule(output: &Output, count: usize) -> Vec<Value> {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let cases = report["cases"].as_array().unwrap().clone();
    assert_eq!(cases.len(), count, "{stderr}");
    for case in &cases {
        assert_eq!(case["verdict"], "fail", "{case}");
        assert_eq!(case["rule"], case["rules"][0], "{case}");
    }
    cases
}

/// `output` is a `--format json` run of one case that failed (exit 1, verdict `fail`), on `rule`
/// when one is given, saying `expected` in its why.
fn assert_the_one_case_fails(name: &str, output: &Output, rule: Option<&str>, expected: &str) {
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("{name}: {}", String::from_utf8_lossy(&output.stderr)));
    let case = &report["cases"][0];
    assert_eq!(output.status.code(), Some(1), "{name}: {case}");
    assert_eq!(case["verdict"], "fail", "{name}: {case}");
    if let Some(rule) = rule {
        assert_eq!(case["rule"], rule, "{name}: {case}");
    }
    let why = case["why"].as_str().unwrap();
    assert!(why.contains(expected), "{name}: {why}");
}

/// The canary's former blind spots (issue 40 item 3): each client reports the case's expected
/// answer and puts the key in one place the kit did not look, and fails the case on the
/// credentials rule, saying where.
#[test]
fn a_key_in_the_canarys_former_blind_spots_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let start = format!(
        "{RUNTIME}\n\"$rt\" --profile headless \"write a haiku\" >/dev/null 2>&1\n\
         key=\"$DEEPSEEK_API_KEY\""
    );
    let clients: Vec<(&str, &str, &str)> = vec![
        (
            "a-directory-named-by-the-key",
            r#"mkdir -p "$HOME/.cache/$key""#,
            "the name of home/.cache/sk-dsh-conformance-",
        ),
        (
            "a-dangling-link",
            r#"ln -s "/nonexistent/$key" cached"#,
            "the target of the link work/cached (raw)",
        ),
        (
            "an-extended-attribute",
            r#"python3 -c 'import os; open("tagged", "w").close(); os.setxattr("tagged", "user.k", os.environ["DEEPSEEK_API_KEY"].encode())'"#,
            "the extended attribute user.k of work/tagged (raw)",
        ),
        (
            "a-helpers-argv",
            r#"sh -c 'sleep 1; exit 0' "x-api-key: $key""#,
            "the argv of a process of the client's (pid ",
        ),
        (
            "a-helpers-name",
            r#"python3 -c 'import os, time; open("/proc/self/comm", "w").write(os.environ["DEEPSEEK_API_KEY"][-15:]); time.sleep(1)'"#,
            "the name of a process of the client's (pid ",
        ),
        (
            "base64-halves",
            r#"printf '%s' "$key" | cut -c1-25 | base64 >&2; printf '%s' "$key" | cut -c26- | base64 >&2"#,
            "the client's stderr (a piece of it, base64)",
        ),
        (
            "reversed",
            r#"printf '%s\n' "$key" | rev >&2"#,
            "the client's stderr (reversed)",
        ),
        (
            "utf-16le",
            r#"printf '%s' "$key" | iconv -f UTF-8 -t UTF-16LE > key.txt"#,
            "the file work/key.txt (UTF-16LE)",
        ),
        (
            "gzip-on-stderr",
            r#"printf 'debug %s\n' "$key" | gzip >&2"#,
            "the client's stderr (gzip-compressed)",
        ),
        (
            "gzip-in-a-file",
            r#"printf 'debug %s\n' "$key" | gzip > "$TMPDIR/state.gz""#,
            "the file tmp/state.gz (gzip-compressed)",
        ),
    ];
    // The case's directory is under the temp dir: a file system there without user extended
    // attributes (tmpfs before Linux 6.6) has nowhere to hide one.
    let attributes = dsh_test_support::tool_available("python3")
        && Command::new("python3")
            .args([
                "-c",
                "import os, tempfile\nwith tempfile.NamedTemporaryFile() as f: os.setxattr(f.name, 'user.t', b'1')",
            ])
            .status()
            .is_ok_and(|status| status.success());
    for (name, leak, expected) in clients {
        if leak.starts_with("python3") && !dsh_test_support::tool_available("python3") {
            continue;
        }
        if name == "an-extended-attribute" && !attributes {
            dsh_test_support::skip(format!(
                "{name}: no user extended attributes in the temp dir"
            ));
            continue;
        }
        let body = format!("{start}\n{leak}\necho '{HAIKU}'");
        let client = script_client(dir.path(), name, &body);
        let output = run(
            "headless",
            client.to_str().unwrap(),
            &["--case", "headless.key-only-in-env", "--format", "json"],
        );
        assert_the_one_case_fails(name, &output, Some("headless.credentials-in-env"), expected);
    }
}

/// A client that passes the key in the runtime's argv, then overwrites the key's bytes in
/// fake-dsh's journal in place (same inode, same length), still fails on the credentials rule:
/// the kit judges the journal it received from fake-dsh while the case ran, not the file the
/// client can edit (issue 40 item 4; docs/journal.md).
#[test]
fn a_journal_edited_in_place_does_not_hide_a_key_in_the_runtimes_argv() {
    let dir = tempfile::tempdir().unwrap();
    let body = format!(
        "{RUNTIME}\n\"$rt\" --profile headless --api-key \"$DEEPSEEK_API_KEY\" \"write a haiku\" \
         >/dev/null 2>&1\n\
         python3 -c 'import os\nkey = os.environ[\"DEEPSEEK_API_KEY\"].encode()\n\
         with open(os.environ[\"FAKE_DSH_JOURNAL\"], \"r+b\") as f:\n    \
         text = f.read()\n    f.seek(0)\n    f.write(text.replace(key, b\"x\" * len(key)))'\n\
         echo '{HAIKU}'"
    );
    if !dsh_test_support::tool_available("python3") {
        return;
    }
    let client = script_client(dir.path(), "journal-edited", &body);
    let output = run(
        "headless",
        client.to_str().unwrap(),
        &["--case", "headless.key-only-in-env", "--format", "json"],
    );
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&output.stderr)));
    let case = &report["cases"][0];
    assert_eq!(output.status.code(), Some(1), "{case}");
    assert_eq!(case["rule"], "headless.credentials-in-env", "{case}");
    let why = case["why"].as_str().unwrap();
    assert!(why.contains("the runtime's argv"), "{why}");
}

/// A client that ignores its `TMPDIR` and writes the key into a temp dir every process shares
/// (here the run's own temp dir, which the kit scans with `/tmp`: what changed there since the
/// case began) fails on the credentials rule, naming the file: also when it set the file's
/// modification time back (the change time counts), and when it hid the file in a directory
/// named like the kit's own case directories (only the case's own directory is skipped, by path:
/// issue 40 item 3).
#[test]
fn a_key_written_to_a_shared_temp_dir_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let shared = tempfile::tempdir().unwrap();
    let clients = [
        (
            "shared-tmp",
            r#"echo "$DEEPSEEK_API_KEY" > "$SHARED_TMP/client-debug.log""#,
            "client-debug.log (a shared temp dir, raw)",
        ),
        (
            "mtime-set-back",
            r#"echo "$DEEPSEEK_API_KEY" > "$SHARED_TMP/old.log" && touch -d 2001-01-01 "$SHARED_TMP/old.log""#,
            "old.log (a shared temp dir, raw)",
        ),
        (
            "kit-lookalike",
            r#"mkdir -p "$SHARED_TMP/dsh-conformance-client-lookalike" && echo "$DEEPSEEK_API_KEY" > "$SHARED_TMP/dsh-conformance-client-lookalike/k""#,
            "dsh-conformance-client-lookalike/k (a shared temp dir, raw)",
        ),
    ];
    for (name, leak, expected) in clients {
        let body = format!(
            "{RUNTIME}\n\"$rt\" --profile headless \"write a haiku\" >/dev/null 2>&1\n\
             {leak}\necho '{HAIKU}'"
        );
        let client = script_client(dir.path(), name, &body);
        let output = Command::new(env!("CARGO_BIN_EXE_dsh-conformance"))
            .args(["run", "--surface", "headless", "--host"])
            .arg(&client)
            .arg("--fake-dsh")
            .arg(dsh_test_support::binary("fake-dsh"))
            .args(["--case", "headless.key-only-in-env", "--format", "json"])
            .args(["--pass-env", "SHARED_TMP"])
            .env("TMPDIR", shared.path())
            .env("SHARED_TMP", shared.path())
            .current_dir(repo_root())
            .output()
            .unwrap();
        assert_the_one_case_fails(name, &output, Some("headless.credentials-in-env"), expected);
    }
}
