//! `report`'s files for a fixed matrix (2 hosts x 2 variants, one cell that could not run):
//! report.json valid against its schema, report.md snapshot, report.html self-contained and
//! escaped, the exit codes. (The `report` command itself, its bad configs and a whole run against
//! the reference host, is the CLI's test: `conformance/tests/it/report_cli.rs`.)

use crate::support;
use dsh_results::reporter::Silent;

use dsh_report::config::{default_variants, HostSpec, MatrixConfig, VariantSpec};
use dsh_report::document::{schema_errors, ReportDocument, SchemaPart};
use dsh_report::{build_document, exit_code_of, run_matrix, write_report_files};
use dsh_results::model::Verdict;
use std::collections::BTreeMap;
use std::path::Path;
use support::{passing_suite, renamed, sample_suite, RULES_JSON};

fn two_by_two() -> MatrixConfig {
    MatrixConfig {
        clients: Vec::new(),
        hosts: vec![
            HostSpec {
                name: "reference".to_string(),
                command: vec!["dsh-host-driver".to_string()],
                expectations: None,
                pass_env: Vec::new(),
                dialect: None,
            },
            HostSpec {
                name: "node <host>".to_string(),
                command: vec![
                    "node".to_string(),
                    "examples/node-host/driver.js".to_string(),
                ],
                expectations: None,
                pass_env: Vec::new(),
                dialect: None,
            },
        ],
        variants: vec![
            VariantSpec {
                name: "dsh-0.1.7-rc.1".to_string(),
                env: BTreeMap::from([("FAKE_DSH_VERSION".to_string(), "0.1.7-rc.1".to_string())]),
            },
            VariantSpec {
                name: "dsh-0.1.8".to_string(),
                env: BTreeMap::from([("FAKE_DSH_VERSION".to_string(), "0.1.8".to_string())]),
            },
        ],
    }
}

/// The fixed matrix: reference passes everything on the tested version and shows the sample's
/// failures on the untested one; the node host's untested cell could not run.
fn sample_document(fixtures: &Path) -> ReportDocument {
    let config = two_by_two();
    let (suites, errors) = run_matrix(
        &config,
        &mut |host, variant| match (host.name.as_str(), variant.name.as_str()) {
            ("node <host>", "dsh-0.1.8") => {
                Err("driver exited during handshake: status 127".to_string())
            }
            (_, "dsh-0.1.7-rc.1") => Ok(passing_suite()),
            _ => Ok(sample_suite()),
        },
        &Silent,
    );
    build_document(&config, suites, errors, fixtures, &Silent)
}

fn fixtures_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rules.json"), RULES_JSON).unwrap();
    dir
}

#[test]
fn run_matrix_names_cells_after_the_config_and_keeps_harness_errors() {
    let fixtures = fixtures_dir();
    let document = sample_document(fixtures.path());
    let cells: Vec<(&str, &str)> = document
        .suites
        .iter()
        .map(|suite| (suite.host.name.as_str(), suite.runtime_variant.as_str()))
        .collect();
    assert_eq!(
        cells,
        [
            ("reference", "dsh-0.1.7-rc.1"),
            ("reference", "dsh-0.1.8"),
            ("node <host>", "dsh-0.1.7-rc.1")
        ]
    );
    assert_eq!(document.errors.len(), 1);
    assert_eq!(document.errors[0].host, "node <host>");
    assert_eq!(document.kit_version, env!("CARGO_PKG_VERSION"));
    assert_eq!(document.corpus_hash, support::CORPUS_HASH);
}

#[test]
fn coverage_lists_cases_per_rule_and_flags_uncovered_and_uncatalogued_rules() {
    let fixtures = fixtures_dir();
    let document = sample_document(fixtures.path());
    let rule = |id: &str| document.rules.iter().find(|rule| rule.id == id).unwrap();
    assert_eq!(
        rule("s6.frame-valid-json").cases,
        ["framing.bom", "strict.malformed-frame"]
    );
    assert!(rule("s14.stdout-frames-only").cases.is_empty());
    assert_eq!(
        rule("s7.restart-mapping").text,
        dsh_report::coverage::UNCATALOGUED
    );
}

#[test]
fn report_files_are_written_and_report_json_is_schema_valid() {
    let fixtures = fixtures_dir();
    let out = tempfile::tempdir().unwrap();
    let document = sample_document(fixtures.path());
    let written = write_report_files(&document, &out.path().join("nested/report")).unwrap();
    assert_eq!(written.len(), 3);
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("nested/report/report.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        schema_errors(&json, SchemaPart::Report),
        Vec::<String>::new()
    );
    let back: ReportDocument = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(back, document);
    assert_eq!(
        json["suites"][1]["host"]["handshake"]["capabilities"],
        serde_json::json!(["cancel", "restart"])
    );
    let mut broken = json;
    broken["suites"][0]["cases"][0]["verdict"] = serde_json::json!("green");
    broken["kind"] = serde_json::json!("something-else");
    assert_eq!(schema_errors(&broken, SchemaPart::Report).len(), 2);
}

#[test]
fn report_markdown_snapshot() {
    let fixtures = fixtures_dir();
    let mut bytes = Vec::new();
    dsh_report::markdown::write_report_markdown(&sample_document(fixtures.path()), &mut bytes)
        .unwrap();
    insta::assert_snapshot!("report_markdown", String::from_utf8(bytes).unwrap());
}

#[test]
fn report_json_snapshot() {
    let fixtures = fixtures_dir();
    let document = sample_document(fixtures.path());
    insta::assert_json_snapshot!("report_json", document);
}

fn html_of(document: &ReportDocument) -> String {
    let mut bytes = Vec::new();
    dsh_report::html::write_report_html(document, &mut bytes).unwrap();
    String::from_utf8(bytes).unwrap()
}

#[test]
fn report_html_is_self_contained() {
    let fixtures = fixtures_dir();
    let page = html_of(&sample_document(fixtures.path()));
    for forbidden in [
        "<link",
        "src=\"http",
        "src=\"//",
        "href=\"http",
        "@import",
        "url(http",
        "fetch(",
    ] {
        assert!(
            !page.contains(forbidden),
            "report.html must not load anything: found {forbidden:?}"
        );
    }
    assert_eq!(
        page.matches("<script").count(),
        2,
        "the data block and the inline script"
    );
    assert!(
        page.contains("default-src 'none'"),
        "a CSP forbids every network load"
    );
}

#[test]
fn report_html_escapes_every_report_string() {
    let fixtures = fixtures_dir();
    let page = html_of(&sample_document(fixtures.path()));
    assert!(!page.contains("<script>alert"));
    assert!(!page.contains("<img src=x>"));
    assert!(!page.contains("<b>deterministically"));
    assert!(page.contains("&lt;b&gt;deterministically&lt;/b&gt;"));
    assert!(page.contains(
        "<th colspan=\"2\" class=\"host\" data-host=\"node &lt;host&gt;\">node &lt;host&gt;</th>"
    ));
    let data_start = page
        .find("<script id=\"report-data\" type=\"application/json\">")
        .unwrap();
    let data_end = data_start + page[data_start..].find("</script>").unwrap();
    let data = &page[data_start..data_end];
    assert!(
        !data[1..].contains('<'),
        "the embedded JSON has no raw '<' that could close its element"
    );
    let json_text = &data[data.find('>').unwrap() + 1..];
    let embedded: ReportDocument = serde_json::from_str(json_text).unwrap();
    assert_eq!(embedded, sample_document(fixtures.path()));
}

#[test]
fn report_html_shows_the_matrix_grouped_by_spec_section() {
    let fixtures = fixtures_dir();
    let document = sample_document(fixtures.path());
    let page = html_of(&document);
    let section_order: Vec<usize> = [
        "Section 4:",
        "Section 5:",
        "Section 6:",
        "Section 7:",
        "Section 9:",
        "Section 10:",
        "Section 14:",
    ]
    .iter()
    .map(|heading| {
        page.find(heading)
            .unwrap_or_else(|| panic!("missing {heading}"))
    })
    .collect();
    assert!(
        section_order.windows(2).all(|pair| pair[0] < pair[1]),
        "sections in numeric order"
    );
    assert_eq!(page.matches("<tr class=\"case\"").count(), 12);
    let failing_cells = page.matches("data-verdict=\"fail\"").count();
    assert_eq!(
        failing_cells, 2,
        "only the reference host's untested cell fails"
    );
    assert_eq!(
        page.matches("class=\"v v-not-run\"").count(),
        12,
        "one column could not run"
    );
    assert!(page.contains("id=\"case-cancel.grandchild-ignores-sigterm\""));
    assert!(page.contains("<tr class=\"uncovered\"><th><code>s14.stdout-frames-only</code>"));
}

#[test]
fn exit_codes_mirror_run() {
    let fixtures = fixtures_dir();
    let config = MatrixConfig {
        clients: Vec::new(),
        hosts: two_by_two().hosts[..1].to_vec(),
        variants: default_variants(),
    };
    let document_with = |suite: &dyn Fn() -> dsh_results::model::SuiteReport| {
        let (suites, errors) = run_matrix(&config, &mut |_, _| Ok(suite()), &Silent);
        build_document(&config, suites, errors, fixtures.path(), &Silent)
    };
    assert_eq!(exit_code_of(&document_with(&passing_suite)), 0);
    assert_eq!(exit_code_of(&document_with(&sample_suite)), 1);
    let empty = || {
        let mut suite = passing_suite();
        suite.cases.clear();
        suite
    };
    assert_eq!(exit_code_of(&document_with(&empty)), 3);
    let mut xfail_only = passing_suite();
    xfail_only.cases[0].verdict = Verdict::Xfail;
    assert_eq!(
        exit_code_of(&document_with(&|| xfail_only.clone())),
        0,
        "an expected failure is not a failure"
    );
    let (suites, errors) = run_matrix(
        &config,
        &mut |_, variant| {
            if variant.name == "dsh-v0.1.7" {
                Err("cannot start".to_string())
            } else {
                Ok(passing_suite())
            }
        },
        &Silent,
    );
    assert_eq!(
        exit_code_of(&build_document(
            &config,
            suites,
            errors,
            fixtures.path(),
            &Silent
        )),
        2
    );
}

#[test]
fn renamed_suites_keep_their_cases() {
    let suite = renamed(sample_suite(), "other", "v");
    assert_eq!(suite.cases, sample_suite().cases);
}
