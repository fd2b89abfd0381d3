//! The report commands end to end, as a user runs them: `report` rejects a bad config with exit
//! 2 naming the file and writes nothing, runs the reference host against fake-dsh and writes its
//! files (the same report.json twice, JUnit with `--junit`, `--case` selecting as `run` does);
//! `diff` exits 0, 1 on a regression (`--format text` is `table`), 2 naming an unreadable file.
//! What the reports hold is dsh-report's own test (`report/tests/it/`).

use assert_cmd::Command;
use dsh_report::document::{schema_errors, ReportDocument, SchemaPart};
use dsh_results::model::{Blame, CaseResult, HostInfo, SuiteReport, Verdict};
use std::path::{Path, PathBuf};

fn kit() -> Command {
    Command::new(dsh_test_support::binary("dsh-conformance"))
}

#[test]
fn report_cli_rejects_a_bad_config_with_exit_2_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("matrix.json");
    std::fs::write(&config, "{\"hosts\":[{\"name\":\"x\",\"command\":[]}]}").unwrap();
    let output = kit()
        .args(["report", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("matrix.json"), "{stderr}");
    assert!(
        stderr.contains("\"command\" must start with a program"),
        "{stderr}"
    );
    assert!(
        !dir.path().join("out").exists(),
        "nothing is written for a config that cannot run"
    );
    let missing = kit()
        .args(["report", "--config"])
        .arg(dir.path().join("nope.json"))
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("nope.json: cannot read report config")
    );
}

/// The whole `report` command against the reference host and fake-dsh, on a two-case corpus and
/// one variant: the harness library is wired in and the files land.
#[test]
fn report_cli_runs_the_reference_host_end_to_end() {
    for binary in ["fake-dsh", "dsh-host-driver"] {
        dsh_test_support::binary(binary);
    }
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
    let dir = tempfile::tempdir().unwrap();
    let fixtures = dir.path().join("fixtures");
    for (area, id) in [
        ("discovery", "discovery.default-available"),
        ("artifact", "artifact.two-turn-cold-resume"),
    ] {
        std::fs::create_dir_all(fixtures.join(area)).unwrap();
        let name = format!("{id}.json");
        std::fs::copy(
            corpus.join(area).join(&name),
            fixtures.join(area).join(&name),
        )
        .unwrap();
    }
    std::fs::copy(corpus.join("rules.json"), fixtures.join("rules.json")).unwrap();
    let config = dir.path().join("matrix.json");
    std::fs::write(
        &config,
        r#"{"variants":[{"name":"dsh-0.1.7-rc.1","env":{"FAKE_DSH_VERSION":"0.1.7-rc.1"}}]}"#,
    )
    .unwrap();
    let out = dir.path().join("out");
    let output = kit()
        .args(["report", "--jobs", "2", "--config"])
        .arg(&config)
        .arg("--fixtures")
        .arg(&fixtures)
        .arg("--out")
        .arg(&out)
        .env_remove("FAKE_DSH_BIN")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(
        schema_errors(&json, SchemaPart::Report),
        Vec::<String>::new()
    );
    let document: ReportDocument = serde_json::from_value(json).unwrap();
    assert_eq!(document.suites.len(), 1);
    let suite = &document.suites[0];
    assert_eq!(
        (suite.host.name.as_str(), suite.runtime_variant.as_str()),
        ("reference", "dsh-0.1.7-rc.1")
    );
    assert_eq!(suite.cases.len(), 2);
    assert!(
        suite.cases.iter().all(|case| case.verdict == Verdict::Pass),
        "{suite:#?}"
    );
    assert_eq!(suite.host.handshake["type"], "handshake");
    assert!(
        suite
            .cases
            .iter()
            .all(|case| case.transcript.is_empty() && case.duration_ms == 0),
        "a passing cell keeps no transcript and no duration"
    );
    assert!(out.join("report.html").is_file() && out.join("report.md").is_file());

    // A second run of the same code gives the same report.json; --junit writes JUnit XML too.
    let again = dir.path().join("again");
    let junit = dir.path().join("junit.xml");
    let output = kit()
        .args(["report", "--jobs", "2", "--config"])
        .arg(&config)
        .arg("--fixtures")
        .arg(&fixtures)
        .arg("--out")
        .arg(&again)
        .arg("--junit")
        .arg(&junit)
        .env_remove("FAKE_DSH_BIN")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(out.join("report.json")).unwrap(),
        std::fs::read_to_string(again.join("report.json")).unwrap()
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("<testsuite name=\"reference/dsh-0.1.7-rc.1\""),
        "{xml}"
    );

    // --case/--skip select as `run` does, and each cell shows its cases as they finish.
    let selected = dir.path().join("selected");
    let output = kit()
        .args(["report", "--jobs", "2", "--config"])
        .arg(&config)
        .arg("--fixtures")
        .arg(&fixtures)
        .args(["--case", "discovery.*", "--out"])
        .arg(&selected)
        .env_remove("FAKE_DSH_BIN")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout
            .lines()
            .any(|line| line.starts_with("pass") && line.contains("discovery.default-available")),
        "a live line per case: {stdout}"
    );
    assert!(
        !stdout.contains("artifact.two-turn-cold-resume"),
        "{stdout}"
    );
    let document: ReportDocument =
        serde_json::from_str(&std::fs::read_to_string(selected.join("report.json")).unwrap())
            .unwrap();
    assert_eq!(document.suites[0].cases.len(), 1);
}

/// A one-case suite of the reference host whose case has `verdict`.
fn one_case_suite(verdict: Verdict) -> SuiteReport {
    SuiteReport {
        kit_version: "0.1.0".to_string(),
        corpus_hash: "0".repeat(64),
        host: HostInfo {
            name: "reference".to_string(),
            command: vec!["dsh-host-driver".to_string()],
            handshake: serde_json::Value::Null,
        },
        runtime_variant: "default".to_string(),
        cases: vec![CaseResult {
            id: "events.text-delta".to_string(),
            summary: "A text delta.".to_string(),
            spec: vec!["9".to_string()],
            rules: vec!["s9.text-delta".to_string()],
            verdict,
            blame: if verdict.is_failure() {
                Blame::Host
            } else {
                Blame::None
            },
            rule: verdict.is_failure().then(|| "s9.text-delta".to_string()),
            why: verdict.is_failure().then(|| "no text".to_string()),
            interpretation: None,
            duration_ms: 0,
            transcript: Vec::new(),
            flaky: Vec::new(),
            also_broken: Vec::new(),
        }],
        duration_ms: 0,
        rerun_args: Vec::new(),
        corpus: None,
        surface: None,
        dialect: None,
        rerun_as: None,
    }
}

fn write_suite(dir: &Path, name: &str, suite: &SuiteReport) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string(suite).unwrap()).unwrap();
    path
}

#[test]
fn diff_cli_exits_0_1_on_a_regression_and_2_naming_an_unreadable_file() {
    let dir = tempfile::tempdir().unwrap();
    let base = write_suite(dir.path(), "base.json", &one_case_suite(Verdict::Pass));
    let new = write_suite(dir.path(), "new.json", &one_case_suite(Verdict::Fail));
    let diff = |base: &Path, new: &Path, format: &str| {
        kit()
            .args(["diff", "--format", format])
            .arg(base)
            .arg(new)
            .output()
            .unwrap()
    };
    let same = diff(&base, &base, "table");
    assert_eq!(same.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&same.stdout).ends_with("no regression\n"));
    let regressed = diff(&base, &new, "text");
    assert_eq!(regressed.status.code(), Some(1));
    let text = String::from_utf8_lossy(&regressed.stdout);
    assert!(
        text.contains("new failure  events.text-delta  pass -> fail"),
        "{text}"
    );
    assert_eq!(
        diff(&base, &new, "table").stdout,
        regressed.stdout,
        "`text` is `table`"
    );
    let json = diff(&base, &new, "json");
    assert_eq!(json.status.code(), Some(1));
    let listed: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(listed["cases"][0]["kind"], "new-failure");
    let missing = diff(&base, &dir.path().join("missing.json"), "markdown");
    assert_eq!(missing.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(stderr.contains("missing.json: cannot read"), "{stderr}");
    assert!(missing.stdout.is_empty());
}
