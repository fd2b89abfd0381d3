//! `dsh-conformance run` end to end with tiny shell-script drivers: exit codes 0/1/2/3, `--list`,
//! the expectations file, output files, and hostile drivers (hang, flood, garbage, early exit)
//! reported as host failures while the other cases still run.

use serde_json::Value;
use std::fs;
mod shell_driver_support;

use shell_driver_support::ShellDriverKit;

/// A driver that answers handshake, discover and shutdown with canned replies; on discover it
/// misbehaves when the case's scenario (in its cwd, the case root) names a hostile mode.
const SHELL_DRIVER: &str = r#"#!/bin/sh
mode=good
for m in hostile-hang hostile-garbage hostile-flood hostile-exit hostile-invalid; do
  if grep -q "$m" scenario.json 2>/dev/null; then mode=$m; fi
done
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
  case "$line" in
    *'"type":"handshake"'*)
      printf '%s\n' '{"v":1,"type":"handshake","driver":"sh-canned","version":"0.0.1","capabilities":[]}' ;;
    *'"type":"discover"'*)
      case "$mode" in
        hostile-hang)
          sleep 600 &
          echo "$$ $!" > "$HOSTILE_PID_DIR/hang.pids"
          wait ;;
        hostile-garbage) printf '%s\n' 'this is not JSON' ;;
        hostile-invalid) printf '{"v":1,"type":"discovered","id":"%s","available":"yes","warnings":[]}\n' "$id" ;;
        hostile-flood) head -c 20000000 /dev/zero | tr '\0' 'x' ;;
        hostile-exit) exit 3 ;;
        *) printf '{"v":1,"type":"discovered","id":"%s","available":true,"version":"0.1.7-rc.1","warnings":[],"diagnostic":null,"code":null}\n' "$id" ;;
      esac ;;
    *'"type":"shutdown"'*)
      printf '%s\n' '{"v":1,"type":"bye"}'
      exit 0 ;;
  esac
done
"#;

/// Writes a discover-only case.
fn discover_case(kit: &ShellDriverKit, id: &str, extra: &str, expect: &str) {
    kit.write_case(
        id,
        &format!(
            r#"{{"v":1,"id":"{id}","summary":"{id} summary","spec":["5"],"rules":["s5.test-rule"]{extra},
               "steps":[{{"discover":{{}},"expect":{expect}}}]}}"#
        ),
    );
}

/// The case every good driver passes: a discover that finds dsh available.
fn canned_available(kit: &ShellDriverKit) {
    discover_case(
        kit,
        "discovery.canned-available",
        "",
        r#"{"available":true}"#,
    );
}

fn kit() -> ShellDriverKit {
    ShellDriverKit::new(SHELL_DRIVER)
}

fn stdout_of(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The verdict and why of every case in a `--format json` report.
fn verdicts(output: &std::process::Output) -> Vec<(String, String, String)> {
    let report: Value = serde_json::from_slice(&output.stdout).expect("json report");
    report["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|case| {
            (
                case["id"].as_str().unwrap_or("").to_string(),
                case["verdict"].as_str().unwrap_or("").to_string(),
                case["why"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn passing_host_exits_0_and_writes_reports() {
    let kit = kit();
    discover_case(
        &kit,
        "discovery.canned-available",
        "",
        r#"{"available":true,"warnings":[]}"#,
    );
    let junit = kit.path().join("junit.xml");
    let markdown = kit.path().join("summary.md");
    let json = kit.path().join("report.json");
    let output = kit
        .run()
        .arg("--junit")
        .arg(&junit)
        .arg("--markdown")
        .arg(&markdown)
        .arg("--json")
        .arg(&json)
        .arg("--verify")
        .arg("2")
        .output()
        .expect("runs");
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}{}",
        stdout_of(&output),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout_of(&output).contains("discovery.canned-available"));
    assert!(fs::read_to_string(&junit)
        .expect("junit")
        .contains("discovery.canned-available"));
    assert!(fs::metadata(&markdown).expect("markdown").len() > 0);
    let report: Value =
        serde_json::from_str(&fs::read_to_string(&json).expect("json")).expect("parses");
    assert_eq!(report["cases"][0]["verdict"], "pass");
    assert_eq!(report["host"]["handshake"]["driver"], "sh-canned");
}

#[test]
fn failing_case_exits_1_with_rule_why_and_rerun_command() {
    let kit = kit();
    canned_available(&kit);
    discover_case(
        &kit,
        "discovery.expects-unavailable",
        "",
        r#"{"available":false,"code":"DSH_PROFILE_PROBE_FAILED"}"#,
    );
    let output = kit.run().output().expect("runs");
    assert_eq!(output.status.code(), Some(1));
    let stdout = stdout_of(&output);
    assert!(stdout.contains("s5.test-rule"), "{stdout}");
    assert!(stdout.contains("expected available=false"), "{stdout}");
    assert!(
        stdout.contains("--case discovery.expects-unavailable --verbose"),
        "{stdout}"
    );

    let verbose = kit
        .run()
        .args(["--case", "discovery.expects-unavailable", "--verbose"])
        .output()
        .expect("runs");
    let stdout = stdout_of(&verbose);
    assert!(
        stdout.contains("> {"),
        "the transcript shows requests: {stdout}"
    );
    assert!(
        stdout.contains("\"type\":\"discovered\""),
        "the transcript shows replies: {stdout}"
    );
}

#[test]
fn expectations_file_xfail_xpass_and_baseline() {
    let kit = kit();
    canned_available(&kit);
    discover_case(
        &kit,
        "discovery.expects-unavailable",
        "",
        r#"{"available":false}"#,
    );
    let baseline = kit.path().join("baseline.json");
    let output = kit
        .run()
        .arg("--write-expectations")
        .arg(&baseline)
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(1));
    let written: Value =
        serde_json::from_str(&fs::read_to_string(&baseline).expect("baseline")).expect("parses");
    let xfail = written["xfail"].as_object().expect("xfail map");
    assert_eq!(
        xfail.keys().collect::<Vec<_>>(),
        ["discovery.expects-unavailable"]
    );

    let output = kit
        .run()
        .arg("--expectations")
        .arg(&baseline)
        .args(["--format", "json"])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(0), "{}", stdout_of(&output));
    let found = verdicts(&output);
    assert!(
        found
            .iter()
            .any(|(id, verdict, _)| id == "discovery.expects-unavailable" && verdict == "xfail"),
        "{found:?}"
    );

    let stale = kit.path().join("stale.json");
    fs::write(
        &stale,
        r#"{"v":1,"xfail":{"discovery.canned-available":"was broken"}}"#,
    )
    .expect("write");
    let output = kit
        .run()
        .arg("--expectations")
        .arg(&stale)
        .args(["--format", "json", "--case", "discovery.canned-*"])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(verdicts(&output)[0].1, "xpass");

    fs::write(&stale, "{not json").expect("write");
    let output = kit
        .run()
        .arg("--expectations")
        .arg(&stale)
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn harness_problems_exit_2() {
    let kit = kit();
    canned_available(&kit);
    let missing_fixtures = kit
        .command(
            &kit.path().join("nope"),
            &kit.driver().display().to_string(),
        )
        .output()
        .expect("runs");
    assert_eq!(missing_fixtures.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing_fixtures.stderr).contains("fixtures dir not found"));

    let missing_host = kit
        .command(
            &kit.fixtures(),
            &kit.path().join("no-such-driver").display().to_string(),
        )
        .output()
        .expect("runs");
    assert_eq!(missing_host.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing_host.stderr).contains("host driver not found"));

    let bad_flag = kit.run().arg("--no-such-flag").output().expect("runs");
    assert_eq!(bad_flag.status.code(), Some(2));
    let bad_scale = kit
        .run()
        .args(["--time-scale", "0"])
        .output()
        .expect("runs");
    assert_eq!(bad_scale.status.code(), Some(2));
    let bad_quote = kit
        .command(&kit.fixtures(), "'unterminated")
        .output()
        .expect("runs");
    assert_eq!(bad_quote.status.code(), Some(2));
}

#[test]
fn nothing_selected_or_measured_exits_3() {
    let kit = kit();
    canned_available(&kit);
    discover_case(
        &kit,
        "setup.needs-setup",
        r#","requires":["setup"]"#,
        r#"{"available":true}"#,
    );
    let none = kit
        .run()
        .args(["--case", "nothing.*"])
        .output()
        .expect("runs");
    assert_eq!(none.status.code(), Some(3));
    let by_section = kit.run().args(["--section", "14"]).output().expect("runs");
    assert_eq!(by_section.status.code(), Some(3));
    let all_skipped = kit
        .run()
        .args(["--case", "setup.*", "--format", "json"])
        .output()
        .expect("runs");
    assert_eq!(all_skipped.status.code(), Some(3));
    let found = verdicts(&all_skipped);
    assert_eq!(found[0].1, "skipped");
    assert!(found[0].2.contains("setup"), "{found:?}");
}

#[test]
fn list_prints_the_selection() {
    let kit = kit();
    canned_available(&kit);
    discover_case(&kit, "setup.needs-setup", "", r#"{"available":true}"#);
    let output = kit
        .run()
        .args(["--list", "--case", "setup.*"])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        stdout_of(&output),
        "setup.needs-setup\tsetup.needs-setup summary\n"
    );
    let output = kit
        .run()
        .args(["--list", "--section", "5"])
        .output()
        .expect("runs");
    assert_eq!(stdout_of(&output).lines().count(), 2);
}

#[test]
fn a_broken_case_file_is_a_kit_error_naming_the_file() {
    let kit = kit();
    canned_available(&kit);
    fs::create_dir_all(kit.fixtures().join("broken")).expect("dir");
    fs::write(
        kit.fixtures().join("broken/broken.case.json"),
        r#"{"v":1,"id":"broken.case","surprise":true}"#,
    )
    .expect("write");
    let output = kit.run().args(["--format", "json"]).output().expect("runs");
    assert_eq!(
        output.status.code(),
        Some(2),
        "a kit error with no host failure exits 2"
    );
    let found = verdicts(&output);
    let broken = found
        .iter()
        .find(|(id, _, _)| id == "broken.case")
        .expect("reported");
    assert_eq!(broken.1, "error");
    assert!(broken.2.contains("broken.case.json"), "{broken:?}");
    assert!(found
        .iter()
        .any(|(id, verdict, _)| id == "discovery.canned-available" && verdict == "pass"));
}

#[test]
fn hostile_drivers_are_host_failures_and_the_rest_still_runs() {
    let kit = kit();
    canned_available(&kit);
    let timeout = r#","timeout_ms":1500"#;
    for mode in ["hang", "garbage", "invalid", "flood", "exit"] {
        let extra = format!(r#"{timeout},"runtime":{{"version":"hostile-{mode}"}}"#);
        discover_case(
            &kit,
            &format!("hostile.{mode}"),
            &extra,
            r#"{"available":true}"#,
        );
    }
    let output = kit
        .run()
        .args(["--format", "json", "--jobs", "2"])
        .output()
        .expect("runs");
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let found = verdicts(&output);
    let why_of = |id: &str| {
        let (_, verdict, why) = found
            .iter()
            .find(|(found_id, _, _)| found_id == id)
            .expect("case reported");
        assert_eq!(verdict, "fail", "{id}: {why}");
        why.clone()
    };
    assert!(why_of("hostile.hang").contains("process group was killed"));
    assert!(why_of("hostile.garbage").contains("not JSON"));
    assert!(why_of("hostile.invalid").contains("reply.schema.json"));
    assert!(why_of("hostile.flood").contains("bytes"));
    assert!(why_of("hostile.exit").contains("ended its stdout"));
    assert!(found
        .iter()
        .any(|(id, verdict, _)| id == "discovery.canned-available" && verdict == "pass"));

    let hung: Vec<i32> = kit
        .recorded_pids()
        .into_iter()
        .filter(|(mode, _)| mode == "hang")
        .map(|(_, pid)| pid)
        .collect();
    assert!(!hung.is_empty(), "the hanging driver wrote its pids");
    for pid in hung {
        assert!(
            !dsh_conformance::run::procfs::is_live(pid),
            "process {pid} of the hung driver's group is still alive"
        );
    }
}
