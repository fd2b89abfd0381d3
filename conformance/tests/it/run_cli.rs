//! `dsh-conformance run` end to end with tiny shell-script drivers: exit codes 0/1/2/3, `--list`,
//! the expectations file, output files, and hostile drivers (hang, flood, garbage, early exit)
//! reported as host failures while the other cases still run.

use dsh_test_support::shell_driver as shell_driver_support;
use serde_json::Value;
use std::fs;

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
      printf '%s\n' '{"v":1,"type":"handshake","driver":"sh-canned","version":"0.0.1","capabilities":["discover"]}' ;;
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
    assert_names_a_swapped_corpus(&output, &junit, &markdown, &report, &kit);
}

/// A corpus other than the embedded one is named, with its hash and size, and warned about in
/// every output, so a green run over an easy corpus cannot pass for the kit's own.
fn assert_names_a_swapped_corpus(
    output: &std::process::Output,
    junit: &std::path::Path,
    markdown: &std::path::Path,
    report: &Value,
    kit: &ShellDriverKit,
) {
    let source = format!("--fixtures {}", kit.fixtures().display());
    assert_eq!(report["corpus"]["source"], source.as_str());
    assert_eq!(report["corpus"]["cases"], 1);
    assert_eq!(report["corpus"]["embedded"], false);
    let hash = report["corpus"]["hash"].as_str().expect("hash");
    assert_eq!(hash.len(), 64);
    let stdout = stdout_of(output);
    assert!(
        stdout.contains("WARNING: NOT the kit's embedded corpus"),
        "{stdout}"
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("NOT the kit's embedded corpus"));
    let junit = fs::read_to_string(junit).expect("junit");
    assert!(
        junit.contains(r#"name="corpus_embedded" value="false""#),
        "{junit}"
    );
    assert!(junit.contains(&format!(r#"name="corpus_sha256" value="{hash}""#)));
    let markdown = fs::read_to_string(markdown).expect("markdown");
    assert!(
        markdown.contains("[!WARNING]") && markdown.contains("1 cases"),
        "{markdown}"
    );
}

/// `--embedded-corpus` runs the kit's own corpus whatever `$DSH_CONFORMANCE_FIXTURES` or a
/// `fixtures/rules.json` in the working directory says (issue 23: a repository with one easy case
/// passed the gate).
#[test]
fn embedded_corpus_ignores_a_planted_fixtures_dir_and_env() {
    let kit = kit();
    canned_available(&kit);
    fs::write(kit.fixtures().join("rules.json"), r#"{"v":1,"rules":[{"id":"s5.test-rule","section":"5","kind":"normative","text":"A test."}]}"#).expect("rules");
    let listed = |env: bool, embedded: bool| {
        let mut command = assert_cmd::Command::new(env!("CARGO_BIN_EXE_dsh-conformance"));
        command
            .args(["run", "--list", "--format", "json"])
            .env_remove("DSH_CONFORMANCE_FIXTURES")
            .current_dir(kit.path());
        if env {
            command.env("DSH_CONFORMANCE_FIXTURES", kit.fixtures());
        }
        if embedded {
            command.arg("--embedded-corpus");
        }
        let output = command.output().expect("runs");
        let items: Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stderr)));
        items.as_array().expect("array").len()
    };
    assert_eq!(listed(true, false), 1, "the corpus the variable names");
    assert_eq!(listed(false, false), 1, "the fixtures/ found from the cwd");
    assert!(
        listed(true, true) > 100,
        "the embedded corpus, whatever the variable says"
    );
    assert!(
        listed(false, true) > 100,
        "the embedded corpus, whatever the cwd holds"
    );
    cli(&kit)
        .args(["--embedded-corpus", "--list"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--fixtures"));
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
    assert!(why_of("hostile.exit").contains("exited before its first reply (exit status 3)"));
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
            !dsh_engine::procfs::is_live(pid),
            "process {pid} of the hung driver's group is still alive"
        );
    }
}

/// `dsh-conformance run` through assert_cmd, against this kit's fixtures and canned driver.
fn cli(kit: &ShellDriverKit) -> assert_cmd::Command {
    assert_cmd::Command::from_std(kit.run())
}

fn stderr_of(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_driver_that_cannot_handshake_is_an_infrastructure_error_with_its_stderr() {
    let kit = kit();
    canned_available(&kit);
    discover_case(&kit, "discovery.second", "", r#"{"available":true}"#);
    let crashing = kit.path().join("crash.sh");
    fs::write(
        &crashing,
        "#!/bin/sh\necho 'SyntaxError: Unexpected token in driver.mjs' >&2\nexit 5\n",
    )
    .expect("write");
    std::os::unix::fs::PermissionsExt::set_mode(
        &mut fs::metadata(&crashing).expect("meta").permissions(),
        0o755,
    );
    let started = std::time::Instant::now();
    let output = assert_cmd::Command::from_std(
        kit.command(&kit.fixtures(), &format!("sh {}", crashing.display())),
    )
    .output()
    .expect("runs");
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("pre-flight handshake"), "{stderr}");
    assert!(stderr.contains("exit status 5"), "{stderr}");
    assert!(stderr.contains("SyntaxError: Unexpected token"), "{stderr}");
    assert!(stderr.contains("command: sh "), "{stderr}");
    assert!(
        !stdout_of(&output).contains("discovery.second"),
        "no case ran"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(30));

    let missing = assert_cmd::Command::from_std(kit.command(&kit.fixtures(), "./no/such/driver"))
        .output()
        .expect("runs");
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr_of(&missing).contains("./no/such/driver"));
}

#[test]
fn a_handshake_that_fails_inside_a_case_shows_the_drivers_stderr() {
    let kit = kit();
    canned_available(&kit);
    let flaky = kit.path().join("flaky.sh");
    fs::write(
        &flaky,
        format!(
            "#!/bin/sh\nif [ \"$DSH_CONFORMANCE\" != preflight ]; then\n  echo 'loading driver.mjs' >&2\n  \
             echo 'Error: Cannot find module ./adapter.js' >&2\n  exit 7\nfi\nexec sh {}\n",
            kit.driver().display()
        ),
    )
    .expect("write");
    let output = assert_cmd::Command::from_std(
        kit.command(&kit.fixtures(), &format!("sh {}", flaky.display())),
    )
    .args(["--verbose", "--color", "never"])
    .output()
    .expect("runs");
    let stdout = stdout_of(&output);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{stdout}{}",
        stderr_of(&output)
    );
    assert!(
        stdout.contains("s6.driver-reply-valid  handshake: the host exited before its first reply (exit status 7) while waiting for the handshake reply; its stderr ends: loading driver.mjs / Error: Cannot find module ./adapter.js"),
        "the why names the exit status and the stderr's end: {stdout}"
    );
    assert!(
        stdout.contains("driver stderr ("),
        "the verbose transcript holds the driver's stderr: {stdout}"
    );
}

#[test]
fn verdicts_stream_as_jsonl_and_the_table_ends_with_a_sorted_summary() {
    let kit = kit();
    canned_available(&kit);
    discover_case(
        &kit,
        "discovery.expects-unavailable",
        "",
        r#"{"available":false}"#,
    );
    let output = cli(&kit)
        .args(["--format", "jsonl"])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(1));
    let events: Vec<Value> = stdout_of(&output)
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON object per line"))
        .collect();
    assert_eq!(events.len(), 3, "two cases and the summary");
    assert!(events[..2].iter().all(|event| event["type"] == "case"));
    assert_eq!(events[2]["type"], "summary");
    assert_eq!(events[2]["failed"], 1);

    let table = cli(&kit)
        .args(["--color", "always"])
        .output()
        .expect("runs");
    let stdout = stdout_of(&table);
    assert!(stdout.contains("\x1b[1m\x1b[31mfail"), "{stdout}");
    let summary_at = stdout.find("Summary (not passing):").expect("summary");
    assert!(stdout[summary_at..].contains("re-run: dsh-conformance run"));
    assert!(
        stdout.trim_end().ends_with("2 cases: 1 pass, 1 fail"),
        "{stdout}"
    );

    let plain = cli(&kit)
        .env_remove("CLICOLOR_FORCE")
        .output()
        .expect("runs");
    assert!(
        !stdout_of(&plain).contains('\x1b'),
        "not a terminal: no colour"
    );
    let forced = cli(&kit)
        .env("CLICOLOR_FORCE", "1")
        .env_remove("NO_COLOR")
        .output()
        .expect("runs");
    assert!(
        stdout_of(&forced).contains("\x1b[32mpass"),
        "CLICOLOR_FORCE colours a pipe too"
    );
    let vetoed = cli(&kit)
        .env("CLICOLOR_FORCE", "1")
        .env("NO_COLOR", "1")
        .output()
        .expect("runs");
    assert!(
        !stdout_of(&vetoed).contains('\x1b'),
        "NO_COLOR wins over CLICOLOR_FORCE"
    );
}

#[test]
fn ctrl_c_prints_a_partial_summary() {
    let kit = kit();
    canned_available(&kit);
    discover_case(&kit, "discovery.canned-second", "", r#"{"available":true}"#);
    discover_case(
        &kit,
        "discovery.hangs",
        r#","timeout_ms":3000,"runtime":{"version":"hostile-hang"}"#,
        r#"{"available":true}"#,
    );
    let child = kit
        .run()
        .args(["--jobs", "1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starts");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .expect("signal");
    let output = child.wait_with_output().expect("reaped");
    let (stdout, stderr) = (stdout_of(&output), stderr_of(&output));
    assert_eq!(output.status.code(), Some(130), "{stdout}{stderr}");
    assert!(stderr.contains("stopped early (interrupted)"), "{stderr}");
    // The hanging case was in flight: ended at once and reported interrupted, not failed.
    assert!(
        stdout
            .trim_end()
            .ends_with("1 case: 0 pass, 1 interrupted, 0 fail"),
        "{stdout}"
    );
}

#[test]
fn selection_skip_list_json_fail_fast_shards_and_closed_pipes() {
    let kit = kit();
    canned_available(&kit);
    for id in ["discovery.fails-a", "discovery.fails-b"] {
        discover_case(&kit, id, "", r#"{"available":false}"#);
    }
    let listed = cli(&kit)
        .args(["--list", "--format", "json", "--skip", "*-b"])
        .output()
        .expect("runs");
    let items: Value = serde_json::from_slice(&listed.stdout).expect("a JSON array");
    let ids: Vec<&str> = items
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|item| item["id"].as_str())
        .collect();
    assert_eq!(ids, ["discovery.canned-available", "discovery.fails-a"]);

    cli(&kit)
        .args(["--list", "--case", "nothing.*"])
        .assert()
        .code(3)
        .stderr(predicates::str::contains("--case \"nothing.*\" (nearest: "))
        .stderr(predicates::str::contains(
            "matches none of the 3 cases of the corpus in",
        ));
    // One glob of several matching nothing is a typo, not a smaller selection: exit 3, named.
    cli(&kit)
        .args(["--case", "discovery.*", "--case", "lifecycle.*"])
        .assert()
        .code(3)
        .stderr(predicates::str::contains("--case \"lifecycle.*\""));
    cli(&kit)
        .args(["--list", "--skip", "*-b", "--skip", "*-c"])
        .assert()
        .code(3)
        .stderr(predicates::str::contains("--skip \"*-c\" (nearest: "))
        .stderr(predicates::str::contains("matches none of the 3 cases"));
    let by_section_only = cli(&kit)
        .args(["--list", "--section", "14"])
        .output()
        .expect("runs");
    assert_eq!(by_section_only.status.code(), Some(3));
    cli(&kit)
        .args(["--list", "--skip", "["])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "--skip \"[\" is not a valid glob",
        ));

    let shard = |k: &str| -> Vec<String> {
        let output = cli(&kit)
            .args(["--list", "--shard", k])
            .output()
            .expect("runs");
        stdout_of(&output)
            .lines()
            .map(|line| line.split('\t').next().unwrap_or("").to_string())
            .filter(|id| !id.is_empty())
            .collect()
    };
    let (one, two) = (shard("1/2"), shard("2/2"));
    assert_eq!(one.len() + two.len(), 3, "{one:?} {two:?}");
    assert!(one.iter().all(|id| !two.contains(id)));
    assert_eq!(shard("1/2"), one, "deterministic");

    let fast = cli(&kit)
        .args(["--fail-fast", "--jobs", "1", "--case", "*.fails-*"])
        .output()
        .expect("runs");
    assert_eq!(fast.status.code(), Some(1));
    assert!(stderr_of(&fast).contains("stopped early (--fail-fast): 1 of 2 cases ran"));

    let mut piped = kit.run();
    let program = piped.get_program().to_owned();
    let args: Vec<String> = piped
        .get_args()
        .map(|arg| shell_quote(&arg.to_string_lossy()))
        .collect();
    piped = std::process::Command::new("sh");
    piped.current_dir(kit.path()).arg("-c").arg(format!(
        "{} {} --list | true",
        shell_quote(&program.to_string_lossy()),
        args.join(" ")
    ));
    let output = piped.output().expect("runs");
    assert!(
        !stderr_of(&output).contains("Broken pipe") && !stderr_of(&output).contains("panicked"),
        "{}",
        stderr_of(&output)
    );
}

fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

#[test]
fn rerun_lines_carry_the_flags_and_xpass_counts_as_a_failure() {
    let kit = kit();
    canned_available(&kit);
    discover_case(
        &kit,
        "discovery.expects-unavailable",
        "",
        r#"{"available":false}"#,
    );
    let expectations = kit.path().join("xfail.json");
    fs::write(
        &expectations,
        r#"{"v":1,"xfail":{"discovery.canned-available":"known"}}"#,
    )
    .expect("write");
    let output = cli(&kit)
        .args([
            "--time-scale",
            "2",
            "--variant-env",
            "A=b",
            "--expectations",
        ])
        .arg(&expectations)
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(1));
    let stdout = stdout_of(&output);
    let rerun = stdout
        .lines()
        .find(|line| line.contains("re-run:") && line.contains("expects-unavailable"))
        .expect("a re-run line");
    for flag in [
        "--fixtures /",
        "--time-scale 2",
        "--variant-env A=b",
        "--expectations /",
    ] {
        assert!(rerun.contains(flag), "{flag} in {rerun}");
    }
    assert!(
        stdout
            .trim_end()
            .ends_with("2 cases: 0 pass, 2 fail (1 xpass)"),
        "{stdout}"
    );
}

#[test]
fn the_reference_driver_answers_help_and_version() {
    let driver = dsh_test_support::binary("dsh-host-driver");
    assert_cmd::Command::new(&driver)
        .arg("--help")
        .assert()
        .success()
        .stdout(predicates::str::contains("DSH_HOST_RUN_TIMEOUT_MS"))
        .stdout(predicates::str::contains("Usage: dsh-host-driver"));
    assert_cmd::Command::new(&driver)
        .arg("--version")
        .assert()
        .success()
        .stdout(predicates::str::starts_with("dsh-host-driver 0."));
}

/// `--time-scale` is checked once, where the flags are parsed, for every surface and every
/// command taking it: a value that is not finite, not above 0 or above 100 is a usage error
/// (exit 2) naming the flag and the range, never a panic nor a run (`1e300` overflowed a
/// `Duration`, `inf` and `-1` ran under `--surface sdk`).
#[test]
fn a_time_scale_out_of_range_is_exit_2_naming_the_range_on_every_surface() {
    let cwd = tempfile::tempdir().expect("temp dir");
    let fake_dsh = dsh_test_support::binary("fake-dsh");
    let bad = ["1e300", "inf", "-1", "0", "NaN", "101"];
    let mut commands: Vec<(String, Vec<String>)> = Vec::new();
    for surface in ["open-design", "sdk", "headless"] {
        for value in bad {
            let args = [
                "run",
                "--surface",
                surface,
                "--host",
                "true",
                "--fake-dsh",
                fake_dsh.to_str().unwrap(),
                "--case",
                "sdk.receipt-before-response",
                "--time-scale",
                value,
            ];
            commands.push((
                format!("run --surface {surface} --time-scale {value}"),
                args.iter().map(|a| a.to_string()).collect(),
            ));
        }
    }
    for value in bad {
        commands.push((
            format!("report --time-scale {value}"),
            ["report", "--time-scale", value].map(String::from).to_vec(),
        ));
        commands.push((
            format!("check-runtime --time-scale {value}"),
            [
                "check-runtime",
                "--dsh",
                fake_dsh.to_str().unwrap(),
                "--time-scale",
                value,
            ]
            .map(String::from)
            .to_vec(),
        ));
    }
    for (label, args) in commands {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_dsh-conformance"))
            .args(&args)
            .current_dir(cwd.path())
            .output()
            .expect("runs");
        let stderr = stderr_of(&output);
        assert_eq!(output.status.code(), Some(2), "{label}: {stderr}");
        assert!(
            stderr.contains("--time-scale")
                && stderr.contains("must be a finite number above 0 and at most 100"),
            "{label}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{label}: {stderr}");
        assert!(output.stdout.is_empty(), "{label}: nothing ran");
    }
}

/// Every command taking `--surface` accepts every surface's name: one it cannot do is a usage
/// error it names itself (exit 2, saying what it does), never clap's "invalid value"; and
/// `check-runtime`'s own default, `open-design`, may be named.
#[test]
fn a_surface_a_command_cannot_do_is_exit_2_naming_what_it_does() {
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_dsh-conformance"))
            .args(args)
            .output()
            .expect("runs")
    };
    for surface in ["sdk-minimal", "jsonrpc-agent"] {
        let output = run(&["run", "--surface", surface, "--host", "true"]);
        let stderr = stderr_of(&output);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "run cannot do --surface {surface} (it does open-design, sdk, headless, acp)"
            )),
            "{stderr}"
        );
    }
    let listed = run(&["check-runtime", "--surface", "open-design", "--list"]);
    assert!(listed.status.success(), "{}", stderr_of(&listed));
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(text.contains("rt.version-shape"), "{text}");
}
