//! "Never touch what is not yours" (issue 23): what `run` passes to a driver, what it echoes, where
//! it writes. Each hostile input gets a clear error and exit 2 with nothing written or lost: a
//! secret on the host command line is redacted in every output, the caller's environment reaches
//! the driver only through the allowlist, variant env names cannot inject shell code into the
//! case's `bin/dsh`, a planted link at an output path is refused, and the temp dirs a killed run
//! leaves are swept by the next one.

use dsh_test_support::shell_driver as shell_driver_support;
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use shell_driver_support::ShellDriverKit;

/// A canned driver that first dumps its environment into the pid dir, and hangs at start when
/// the case's scenario says `hostile-hang`.
const ENV_PRELUDE: &str = r#"env > "$HOSTILE_PID_DIR/env.txt"
if grep -q hostile-hang scenario.json 2>/dev/null; then sleep 600 & wait; fi"#;

const CASE_ID: &str = "discovery.safe-files";

fn kit() -> ShellDriverKit {
    let kit = ShellDriverKit::new(&shell_driver_support::canned_driver(ENV_PRELUDE));
    kit.write_case(
        CASE_ID,
        &format!(
            r#"{{"v":1,"id":"{CASE_ID}","summary":"s","spec":["5"],"rules":["s5.test-rule"],
               "steps":[{{"discover":{{}},"expect":{{"available":true}}}}]}}"#
        ),
    );
    kit
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn secrets_on_the_host_command_line_are_redacted_in_every_output() {
    let kit = kit();
    let host = format!(
        "env API_TOKEN=tok-s3cr3t-one {} --password=hunter2-two --db postgres://me:pw-three@db/x",
        kit.driver().display()
    );
    let outputs = ["junit.xml", "summary.md", "report.json"].map(|name| kit.path().join(name));
    let output = kit
        .command(&kit.fixtures(), &host)
        .arg("--junit")
        .arg(&outputs[0])
        .arg("--markdown")
        .arg(&outputs[1])
        .arg("--json")
        .arg(&outputs[2])
        .args(["--verbose", "--color", "never"])
        .output()
        .expect("runs");
    let stdout = text(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        text(&output.stderr)
    );
    let mut seen = vec![
        ("stdout".to_string(), stdout),
        ("stderr".to_string(), text(&output.stderr)),
    ];
    for path in &outputs {
        seen.push((
            path.display().to_string(),
            fs::read_to_string(path).expect("written"),
        ));
    }
    for (name, contents) in &seen {
        for secret in ["tok-s3cr3t-one", "hunter2-two", "pw-three"] {
            assert!(
                !contents.contains(secret),
                "{name} holds {secret}:\n{contents}"
            );
        }
    }
    for (name, contents) in &seen[..1].iter().chain(&seen[2..]).collect::<Vec<_>>() {
        assert!(
            contents.contains("API_TOKEN=[redacted]"),
            "{name}:\n{contents}"
        );
    }
    let report: Value = serde_json::from_str(&seen[4].1).expect("json");
    let command: Vec<&str> = report["host"]["command"]
        .as_array()
        .expect("command")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(command.contains(&"--password=[redacted]"), "{command:?}");
    assert!(
        command.contains(&"postgres://me:[redacted]@db/x"),
        "{command:?}"
    );
}

#[test]
fn the_driver_gets_the_allowlist_and_what_the_case_sets_nothing_else() {
    let kit = kit();
    let output = kit
        .run()
        .env("DATABASE_URL", "postgres://u:p@db/prod")
        .env("FAKE_DSH_IDENTITY_PATCH", r#"{"plugin_version":"9.9.9"}"#)
        .env("FAKE_DSH_VERSION", "9.9.9")
        .env("DSH_HOST_MUTANT", "cancel-all-runs")
        .env("LC_ALL", "C")
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let env = fs::read_to_string(kit.pid_dir().join("env.txt")).expect("the driver dumped its env");
    let names: Vec<&str> = env
        .lines()
        .filter_map(|line| line.split('=').next())
        .collect();
    for absent in [
        "DATABASE_URL",
        "FAKE_DSH_IDENTITY_PATCH",
        "FAKE_DSH_VERSION",
        "DSH_HOST_MUTANT",
    ] {
        assert!(
            !names.contains(&absent),
            "{absent} reached the driver:\n{env}"
        );
    }
    for present in [
        "PATH",
        "LC_ALL",
        "DSH_BIN",
        "DSH_HOME",
        "RUNTIME_DATA_DIR",
        "HOSTILE_PID_DIR",
    ] {
        assert!(names.contains(&present), "{present} missing:\n{env}");
    }
}

#[test]
fn pass_env_may_not_smuggle_a_runtime_change_or_a_harness_variable() {
    let kit = kit();
    for name in ["FAKE_DSH_IDENTITY_PATCH", "FAKE_DSH_*", "DSH_HOME", "A;B"] {
        let output = kit.run().args(["--pass-env", name]).output().expect("runs");
        assert_eq!(output.status.code(), Some(2), "{name}");
        let stderr = text(&output.stderr);
        assert!(stderr.contains("--pass-env"), "{name}: {stderr}");
        assert!(
            !kit.pid_dir().join("env.txt").exists(),
            "{name}: a driver started"
        );
    }
}

#[test]
fn a_variant_env_name_holding_shell_code_is_refused_before_anything_runs() {
    let kit = kit();
    let planted = kit.path().join("pwned");
    let pair = format!("X;touch {};Y=1", planted.display());
    let output = kit
        .run()
        .args(["--variant-env", &pair])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("not an environment variable name"),
        "{stderr}"
    );
    assert!(!planted.exists());
    assert!(!kit.pid_dir().join("env.txt").exists(), "no driver started");
}

#[test]
fn a_planted_link_at_any_output_path_stops_the_run_before_it_starts() {
    let kit = kit();
    let victim = kit.path().join("victim-rc");
    fs::write(&victim, "export SAFE=1\n").expect("victim");
    for flag in ["--junit", "--markdown", "--json", "--write-expectations"] {
        let link = kit.path().join(format!("out{flag}"));
        std::os::unix::fs::symlink(&victim, &link).expect("link");
        let output = kit.run().arg(flag).arg(&link).output().expect("runs");
        assert_eq!(output.status.code(), Some(2), "{flag}");
        let stderr = text(&output.stderr);
        assert!(stderr.contains("is a symbolic link"), "{flag}: {stderr}");
        assert!(
            !text(&output.stdout).contains(CASE_ID),
            "{flag}: a case ran"
        );
        assert_eq!(
            fs::read_to_string(&victim).unwrap(),
            "export SAFE=1\n",
            "{flag}"
        );
    }
}

#[test]
fn corpus_export_refuses_a_planted_link_inside_its_directory() {
    let dir = tempfile::tempdir().expect("temp dir");
    let elsewhere = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("corpus");
    fs::create_dir(&out).expect("out");
    std::os::unix::fs::symlink(elsewhere.path(), out.join("fixtures")).expect("link");
    let output = Command::new(env!("CARGO_BIN_EXE_dsh-conformance"))
        .args(["corpus", "export"])
        .arg(&out)
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("symbolic link"),
        "{}",
        text(&output.stderr)
    );
    assert_eq!(
        fs::read_dir(elsewhere.path()).unwrap().count(),
        0,
        "nothing written through it"
    );
    assert_eq!(
        fs::read_dir(&out).unwrap().count(),
        1,
        "nothing written beside it"
    );
}

/// The kit temp dirs in `tmp`.
fn kit_dirs(tmp: &Path) -> Vec<PathBuf> {
    fs::read_dir(tmp)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with("dsh-conformance-"))
        })
        .collect()
}

#[test]
fn dirs_a_killed_run_left_are_private_and_swept_by_the_next_run() {
    use std::os::unix::fs::PermissionsExt;
    let kit = kit();
    kit.write_case(
        "discovery.safe-files-hang",
        r#"{"v":1,"id":"discovery.safe-files-hang","summary":"s","spec":["5"],
            "rules":["s5.test-rule"],"runtime":{"version":"hostile-hang"},
            "steps":[{"discover":{},"expect":{"available":true}}]}"#,
    );
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut killed = kit
        .run()
        .args(["--case", "discovery.safe-files-hang"])
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    // Both of the case's dirs exist and carry their marker (a dir is made a moment before its
    // marker is written; one killed in between is, by design, not the kit's to sweep).
    let marked = |dirs: &[PathBuf]| {
        dirs.len() >= 2
            && dirs.iter().all(|dir| {
                fs::metadata(dir.join(".dsh-conformance-owner")).is_ok_and(|m| m.len() > 0)
            })
    };
    while !marked(&kit_dirs(tmp.path())) {
        assert!(Instant::now() < deadline, "no case temp dir appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    killed.kill().expect("SIGKILL");
    killed.wait().expect("reaped");
    let left = kit_dirs(tmp.path());
    assert!(left.len() >= 2, "{left:?}");
    for dir in &left {
        let mode = fs::metadata(dir).expect("dir").permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", dir.display());
    }
    let foreign = tmp.path().join("dsh-conformance-not-the-kits");
    fs::create_dir(&foreign).expect("a dir without the kit's marker");
    let output = kit
        .run()
        .args(["--case", CASE_ID])
        .env("TMPDIR", tmp.path())
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(
        kit_dirs(tmp.path()),
        vec![foreign],
        "the killed run's dirs are swept"
    );
}

#[test]
fn a_runtime_chosen_by_fake_dsh_bin_is_named_not_silent() {
    let kit = kit();
    let json = kit.path().join("report.json");
    let fake_dsh = dsh_test_support::binary("fake-dsh");
    let output = Command::new(env!("CARGO_BIN_EXE_dsh-conformance"))
        .arg("run")
        .arg("--host")
        .arg(kit.driver())
        .arg("--fixtures")
        .arg(kit.fixtures())
        .args(["--pass-env", "HOSTILE_PID_DIR"])
        .env("HOSTILE_PID_DIR", kit.pid_dir())
        .env("FAKE_DSH_BIN", &fake_dsh)
        .arg("--json")
        .arg(&json)
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains("$FAKE_DSH_BIN"),
        "{}",
        text(&output.stderr)
    );
    let report: Value = serde_json::from_str(&fs::read_to_string(&json).expect("json")).unwrap();
    let rerun: Vec<&str> = report["rerun_args"]
        .as_array()
        .expect("rerun_args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let at = rerun
        .iter()
        .position(|arg| *arg == "--runtime")
        .expect("--runtime is named");
    assert_eq!(rerun[at + 1], fake_dsh.to_str().unwrap());
}
