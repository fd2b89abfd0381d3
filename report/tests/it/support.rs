//! A fixed, hand-built results model for the report tests: every verdict, hostile text (markup,
//! pipes, quotes, escape sequences, line breaks), fixed durations and paths, so output is stable.

#![allow(dead_code)]

use dsh_results::model::{Blame, BrokenRule, CaseResult, HostInfo, SuiteReport, Verdict};

pub const CORPUS_HASH: &str = "3f1d2c4b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff001";

fn case(id: &str, spec: &str, rules: &[&str], verdict: Verdict) -> CaseResult {
    CaseResult {
        id: id.to_string(),
        summary: format!("Summary of {id}."),
        spec: vec![spec.to_string()],
        rules: rules.iter().map(|rule| rule.to_string()).collect(),
        verdict,
        blame: Blame::None,
        rule: None,
        why: None,
        interpretation: None,
        duration_ms: 40,
        transcript: Vec::new(),
        flaky: Vec::new(),
        also_broken: Vec::new(),
    }
}

fn failing(mut case: CaseResult, blame: Blame, rule: &str, why: &str) -> CaseResult {
    case.blame = blame;
    case.rule = Some(rule.to_string());
    case.why = Some(why.to_string());
    case
}

/// The suite of the reference host under the default variant.
pub fn sample_suite() -> SuiteReport {
    let mut cancel = failing(
        case(
            "cancel.grandchild-ignores-sigterm",
            "10",
            &["s10.force-kill"],
            Verdict::Fail,
        ),
        Blame::Host,
        "s10.force-kill",
        "process 4242 (fake-dsh child) alive 2000 ms after the outcome",
    );
    cancel.transcript = vec![
        "-> {\"v\":1,\"type\":\"cancel\",\"id\":\"r1\"}".to_string(),
        "<- {\"v\":1,\"type\":\"outcome\",\"id\":\"r1\",\"status\":\"cancelled\"}".to_string(),
        "journal: {\"event\":\"signal\",\"signal\":\"SIGTERM\",\"ignored\":true}".to_string(),
    ];
    cancel.duration_ms = 2150;
    cancel.also_broken = vec![
        BrokenRule {
            rule: "s10.process-tree-reaped".to_string(),
            why: "run r1: the stdio process 4240 outlived the outcome | <b>pipe</b>".to_string(),
            interpretation: None,
        },
        BrokenRule {
            rule: "s7.session-before-result".to_string(),
            why: "run r1: the outcome's session id came from no `session` frame".to_string(),
            interpretation: Some("I-07".to_string()),
        },
    ];
    let mut hostile = failing(
        case("strict.session-before-content", "6", &["s6.session-before-content"], Verdict::Fail),
        Blame::Host,
        "s6.session-before-content",
        "expected failed/DSH_PROFILE_CONTENT_BEFORE_SESSION, got <script>alert('x')</script> | \"completed\" & \u{1b}[31mred\u{1b}[0m\nsecond line",
    );
    hostile.summary =
        "A text frame before `session` fails the run <b>deterministically</b>.".to_string();
    hostile.transcript = vec!["<- {\"type\":\"event\",\"event\":{\"type\":\"text_delta\",\"delta\":\"</script><img src=x>\"}}".to_string()];
    let mut non_strict = failing(
        case("strict.malformed-frame", "6", &["s6.malformed-fails"], Verdict::NonStrict),
        Blame::Host,
        "s6.malformed-fails",
        "status failed as expected, code DSH_PROFILE_INVALID_FRAME instead of DSH_PROFILE_MALFORMED_FRAME",
    );
    non_strict.rules.push("s6.frame-valid-json".to_string());
    let mut informational = failing(
        case(
            "resume.corrupt-target",
            "7",
            &["s6.corrupt-resume-fails"],
            Verdict::Informational,
        ),
        Blame::Host,
        "s6.corrupt-resume-fails",
        "expected failed, got completed with a new session",
    );
    informational.interpretation = Some("I-03".to_string());
    informational.also_broken = vec![BrokenRule {
        rule: "s7.resume-mapping-stable".to_string(),
        why: "the mapping file was rewritten in place".to_string(),
        interpretation: Some("I-C28".to_string()),
    }];
    let mut skipped = case(
        "setup.tampered-bundle",
        "4",
        &["s4.hash-verified"],
        Verdict::Skipped,
    );
    skipped.why = Some("needs capability `setup`, which the driver did not claim".to_string());
    let xfail = failing(
        case(
            "framing.line-over-1mib",
            "6",
            &["s6.frame-too-large"],
            Verdict::Xfail,
        ),
        Blame::Host,
        "s6.frame-too-large",
        "expected failed/DSH_PROFILE_FRAME_TOO_LARGE, got run timeout",
    );
    let xpass = failing(
        case("framing.bom", "6", &["s6.frame-valid-json"], Verdict::Xpass),
        Blame::Host,
        "s6.frame-valid-json",
        "passed, but the expectations file lists it as failing: remove the entry",
    );
    let untestable = failing(
        case(
            "restart.session-survives",
            "7",
            &["s7.restart-mapping"],
            Verdict::Untestable,
        ),
        Blame::Host,
        "s7.restart-mapping",
        "the driver claimed `restart` but lost the session mapping",
    );
    let error = failing(
        case(
            "hygiene.canary-in-stderr",
            "14",
            &["s14.stderr-no-credentials"],
            Verdict::Error,
        ),
        Blame::Kit,
        "kit.harness",
        "fixture runtime: unknown action \"explode\" at steps[0]",
    );
    let mut flaky = case(
        "discovery.untested-version",
        "5",
        &["s5.untested-version"],
        Verdict::Pass,
    );
    flaky.flaky = vec![Verdict::Pass, Verdict::Fail, Verdict::Pass];
    SuiteReport {
        kit_version: "0.1.0".to_string(),
        corpus_hash: CORPUS_HASH.to_string(),
        host: HostInfo {
            name: "reference".to_string(),
            command: vec![
                "dsh-host-driver".to_string(),
                "--log level=debug".to_string(),
            ],
            handshake: serde_json::json!({
                "v": 1, "type": "handshake", "driver": "dsh-host-driver", "version": "0.1.0",
                "capabilities": ["cancel", "restart"]
            }),
        },
        runtime_variant: "default".to_string(),
        cases: vec![
            case(
                "discovery.tested-version",
                "5",
                &["s5.tested-version"],
                Verdict::Pass,
            ),
            flaky,
            case("events.text-delta", "9", &["s9.text-delta"], Verdict::Pass),
            hostile,
            non_strict,
            informational,
            skipped,
            xfail,
            xpass,
            untestable,
            error,
            cancel,
        ],
        duration_ms: 12_345,
        rerun_args: Vec::new(),
        corpus: None,
        surface: None,
        dialect: None,
        rerun_as: None,
    }
}

/// The sample with every case passing (a clean run).
pub fn passing_suite() -> SuiteReport {
    let mut suite = sample_suite();
    for case in &mut suite.cases {
        case.verdict = Verdict::Pass;
        case.blame = Blame::None;
        case.rule = None;
        case.why = None;
        case.flaky.clear();
    }
    suite
}

/// A suite renamed to another host and variant.
pub fn renamed(mut suite: SuiteReport, host: &str, variant: &str) -> SuiteReport {
    suite.host.name = host.to_string();
    suite.runtime_variant = variant.to_string();
    suite
}

/// The rule catalog matching the sample's rules (one rule left uncovered).
pub const RULES_JSON: &str = r#"{"v":1,"rules":[
  {"id":"s5.tested-version","section":"5","text":"A tested version is available without warning."},
  {"id":"s5.untested-version","section":"5","text":"An untested parseable version warns."},
  {"id":"s6.session-before-content","section":"6","text":"session must arrive before content/tool frames."},
  {"id":"s6.malformed-fails","section":"6","text":"Malformed frames fail the run deterministically."},
  {"id":"s6.frame-valid-json","section":"6","text":"Every frame must be valid JSON."},
  {"id":"s10.force-kill","section":"10","text":"Force-kill remaining owned processes after a second bound."},
  {"id":"s14.stdout-frames-only","section":"14","text":"Stdout contains protocol frames only."}
]}"#;
