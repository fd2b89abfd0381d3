//! `report` with clients beside the hosts: a config's `clients` (SDK, headless and ACP clients,
//! each on the runtime personas it lists) run the client corpus as `run --surface S --host
//! CLIENT --persona P` does, one cell per client x persona, in the same report.json, HTML page and
//! Markdown; `--case` globs apply to each corpus they match.

use assert_cmd::Command;
use serde_json::{json, Value};
use std::path::Path;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

fn report(config: &Value, cases: &[&str]) -> (std::process::Output, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.json");
    std::fs::write(&file, config.to_string()).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_dsh-conformance"));
    command.arg("report").arg("--config").arg(&file);
    command.arg("--out").arg(dir.path().join("out"));
    for case in cases {
        command.args(["--case", case]);
    }
    (command.output().unwrap(), dir)
}

fn sdk_client(personas: &[&str]) -> Value {
    let script = repo().join("examples/sdk-client-python/dsh_sdk_client.py");
    json!({"name": "python-sdk", "surface": "sdk", "command": ["python3", script],
           "personas": personas})
}

fn acp_client() -> Value {
    let script = repo().join("examples/acp-client-python/acp_corpus_client.py");
    json!({"name": "python-acp", "surface": "acp", "command": ["python3", script]})
}

#[test]
fn clients_sit_beside_the_hosts_one_cell_per_persona() {
    let with_acp = crate::acp_client_corpus::example_runs("python", "python3");
    let mut clients = vec![sdk_client(&["0.2.1", "0.1.5"])];
    clients.extend(with_acp.then(acp_client));
    let config = json!({"clients": clients,
                        "variants": [{"name": "dsh-0.1.7-rc.1", "env": {"FAKE_DSH_VERSION": "0.1.7-rc.1"}}]});
    let (out, dir) = report(
        &config,
        &["lifecycle.first-run*", "sdk.crlf-lines", "acp.write-page"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let text = std::fs::read_to_string(dir.path().join("out/report.json")).unwrap();
    let document: Value = serde_json::from_str(&text).unwrap();
    let cells: Vec<(String, String, Vec<String>)> = document["suites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|suite| {
            let ids = suite["cases"].as_array().unwrap().iter();
            let ids = ids.map(|case| case["id"].as_str().unwrap().to_string());
            (
                suite["host"]["name"].as_str().unwrap().to_string(),
                suite["runtime_variant"].as_str().unwrap().to_string(),
                ids.collect(),
            )
        })
        .collect();
    let names: Vec<(&str, &str)> = cells
        .iter()
        .map(|(h, v, _)| (h.as_str(), v.as_str()))
        .collect();
    let mut expected = vec![
        ("reference", "dsh-0.1.7-rc.1"),
        ("python-sdk", "fake-dsh 0.2.1"),
        ("python-sdk", "fake-dsh 0.1.5"),
    ];
    expected.extend(with_acp.then_some(("python-acp", "fake-dsh 0.2.1")));
    assert_eq!(names, expected);
    if with_acp {
        assert_eq!(cells[3].2, ["acp.write-page"], "{cells:?}");
        let verdict = &document["suites"][3]["cases"][0]["verdict"];
        assert_eq!(verdict, "pass", "{:#}", document["suites"][3]);
    }
    assert!(
        cells[0]
            .2
            .iter()
            .all(|id| id.starts_with("lifecycle.first-run")),
        "{cells:?}"
    );
    assert_eq!(
        cells[1].2,
        ["sdk.crlf-lines"],
        "the client cell takes only the globs of its corpus"
    );
    let case = &document["suites"][1]["cases"][0];
    assert!(
        case["rules"]
            .as_array()
            .is_some_and(|rules| !rules.is_empty()),
        "{case:#}"
    );
    let markdown = std::fs::read_to_string(dir.path().join("out/report.md")).unwrap();
    assert!(
        markdown.contains("| `python-sdk` | `fake-dsh 0.1.5` |"),
        "{markdown}"
    );
    let html = std::fs::read_to_string(dir.path().join("out/report.html")).unwrap();
    assert!(html.contains("python-sdk") && html.contains("fake-dsh 0.1.5"));
}

#[test]
fn a_bad_client_entry_or_a_glob_no_cell_has_is_exit_2_naming_it() {
    let mut bad = sdk_client(&["9.9"]);
    let (out, _dir) = report(&json!({"clients": [bad.clone()]}), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("client \"python-sdk\": persona \"9.9\""),
        "{stderr}"
    );

    bad["surface"] = json!("telnet");
    let (out, _dir) = report(&json!({"clients": [bad]}), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("invalid report config") && stderr.contains("telnet"),
        "{stderr}"
    );

    let (out, _dir) = report(
        &json!({"clients": [sdk_client(&["0.2.1"])]}),
        &["nothing.*"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("\"nothing.*\" matches no case of any cell"),
        "{stderr}"
    );
}
