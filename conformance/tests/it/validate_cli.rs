//! `dsh-conformance validate` against every transcript under `fixtures/transcripts/`: insta
//! snapshots of its output, exit codes, and each bad transcript naming the code its file name
//! starts with (`content-before-session.text-first.jsonl` -> `DSH_PROFILE_CONTENT_BEFORE_SESSION`).
//! A transcript's extra CLI arguments live beside it in `<name>.args`.

use assert_cmd::Command;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

fn transcripts(kind: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/transcripts")
        .join(kind);
    let mut paths: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
        .map(|entry| entry.expect("readable dir entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no transcripts in {}", dir.display());
    paths
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .expect("named file")
        .to_string_lossy()
        .into_owned()
}

/// Runs `validate` on a transcript with its sidecar arguments; returns (exit code, stdout).
fn validate(path: &Path) -> (i32, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_dsh-conformance"));
    command.arg("validate").arg(path);
    if let Ok(extra) = fs::read_to_string(path.with_extension("args")) {
        command.args(extra.split_whitespace());
    }
    let output = command.output().expect("dsh-conformance runs");
    let code = output.status.code().expect("exited normally");
    (code, String::from_utf8_lossy(&output.stdout).into_owned())
}

fn expected_code(path: &Path) -> String {
    let stem = stem(path);
    let slug = stem.split('.').next().expect("non-empty stem");
    format!("DSH_PROFILE_{}", slug.replace('-', "_").to_uppercase())
}

#[test]
fn good_transcripts_pass() {
    for path in transcripts("good") {
        let (code, stdout) = validate(&path);
        let name = stem(&path);
        assert_eq!(code, 0, "{name}: {stdout}");
        assert!(stdout.starts_with("ok: "), "{name}: {stdout}");
        insta::assert_snapshot!(format!("good__{name}"), stdout);
    }
}

#[test]
fn bad_transcripts_fail_with_their_code() {
    let mut codes_seen = std::collections::BTreeSet::new();
    for path in transcripts("bad") {
        let (code, stdout) = validate(&path);
        let name = stem(&path);
        let expected = expected_code(&path);
        assert_eq!(code, 1, "{name}: {stdout}");
        let first = stdout.lines().next().unwrap_or_default();
        let reported = first.split(':').nth(1).unwrap_or_default();
        assert_eq!(reported, expected, "{name}: {stdout}");
        assert!(
            dsh_protocol::ViolationCode::from_code(reported).is_some(),
            "{name}: unknown code {reported}"
        );
        codes_seen.insert(reported.to_string());
        insta::assert_snapshot!(format!("bad__{name}"), stdout);
    }
    for code in dsh_protocol::ViolationCode::ALL {
        // RESUME_REJECTED is a legitimate terminal the host maps, not a stream violation: it
        // is covered by good/resume-rejected.jsonl.
        if code != dsh_protocol::ViolationCode::ResumeRejected {
            assert!(
                codes_seen.contains(code.as_str()),
                "no bad transcript for {code}"
            );
        }
    }
}

#[test]
fn resume_rejected_summary_names_its_code() {
    let path = transcripts("good")
        .into_iter()
        .find(|path| stem(path) == "resume-rejected")
        .expect("good/resume-rejected.jsonl");
    let (_, stdout) = validate(&path);
    assert!(stdout.contains("DSH_PROFILE_RESUME_REJECTED"), "{stdout}");
}

#[test]
fn a_line_over_one_mebibyte_is_too_large() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("huge.jsonl");
    let mut file = fs::File::create(&path).expect("create");
    writeln!(file, r#"{{"v":1,"type":"ready","runtime":"open-design","protocol_version":1,"plugin_version":"0.1.0","capabilities":{{"session_resume":true,"session_cancel":true,"structured_events":true}}}}"#).expect("write");
    let big = vec![b'x'; 2 * 1024 * 1024];
    file.write_all(&big).expect("write");
    drop(file);
    let (code, stdout) = validate(&path);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.starts_with("2:DSH_PROFILE_FRAME_TOO_LARGE: line 2:"),
        "{stdout}"
    );
}

#[test]
fn explicit_request_id_makes_other_frames_foreign() {
    let path = transcripts("good")
        .into_iter()
        .find(|path| stem(path) == "new-session")
        .expect("good/new-session.jsonl");
    let output = Command::new(env!("CARGO_BIN_EXE_dsh-conformance"))
        .arg("validate")
        .arg(&path)
        .args(["--request-id", "run-9"])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.starts_with("EOF:DSH_PROFILE_MISSING_RESULT: EOF after line 8"),
        "{stdout}"
    );
}

#[test]
fn unusable_input_exits_2() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("missing.jsonl");
    let output = Command::new(env!("CARGO_BIN_EXE_dsh-conformance"))
        .arg("validate")
        .arg(&missing)
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot open"), "{stderr}");
    let output = Command::new(env!("CARGO_BIN_EXE_dsh-conformance"))
        .arg("validate")
        .arg(dir.path())
        .output()
        .expect("runs");
    assert_eq!(
        output.status.code(),
        Some(2),
        "a directory is unusable input"
    );
}

fn good_stream() -> Vec<u8> {
    let path = transcripts("good")
        .into_iter()
        .find(|path| stem(path) == "new-session")
        .expect("good/new-session.jsonl");
    fs::read(path).expect("readable transcript")
}

/// Runs `validate` with `args`, feeding `stdin`; returns (exit code, stdout).
fn validate_stdin(args: &[&str], stdin: Vec<u8>) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_dsh-conformance"))
        .arg("validate")
        .args(args)
        .write_stdin(stdin)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .expect("dsh-conformance runs");
    let code = output.status.code().expect("exited normally");
    (code, String::from_utf8_lossy(&output.stdout).into_owned())
}

#[test]
fn dash_reads_standard_input_once() {
    let (code, stdout) = validate_stdin(&["-"], good_stream());
    assert_eq!(code, 0, "{stdout}");
    assert!(
        stdout.starts_with("ok: 8 frames, 0 foreign, result completed"),
        "{stdout}"
    );
    let mut bad = b"NOT JSON\n".to_vec();
    bad.extend(good_stream());
    let (code, stdout) = validate_stdin(&["-"], bad);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.starts_with("1:DSH_PROFILE_MALFORMED_FRAME"),
        "{stdout}"
    );
}

#[test]
fn a_pipe_is_read_once_without_request_id() {
    // /dev/stdin on a pipe cannot be re-opened from the start: a second pass would see nothing.
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("good.jsonl");
    fs::write(&path, good_stream()).expect("write");
    let script = format!(
        "cat '{}' | '{}' validate /dev/stdin",
        path.display(),
        env!("CARGO_BIN_EXE_dsh-conformance")
    );
    let output = Command::new("sh")
        .args(["-c", &script])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .expect("sh runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(stdout.starts_with("ok: 8 frames"), "{stdout}");
}

#[test]
fn an_endless_input_stops_at_the_first_fatal_violation() {
    let output = Command::new(env!("CARGO_BIN_EXE_dsh-conformance"))
        .args(["validate", "/dev/zero", "--request-id", "r1"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.starts_with("1:DSH_PROFILE_FRAME_TOO_LARGE"),
        "{stdout}"
    );
}

#[test]
fn json_format_is_one_object() {
    let (code, stdout) = validate_stdin(&["-", "--format", "json"], good_stream());
    assert_eq!(code, 0, "{stdout}");
    let value: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    assert_eq!(value["ok"], true);
    assert_eq!(value["request_id"], "run-1");
    assert_eq!(value["frames"], 8);
    assert_eq!(value["outcome"], "result completed");
    assert!(value["violation"].is_null());
    let (code, stdout) = validate_stdin(&["-", "--format", "json"], b"[1]\n".to_vec());
    assert_eq!(code, 1, "{stdout}");
    let value: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    assert_eq!(value["ok"], false);
    assert_eq!(value["violation"]["line"], 1);
    assert_eq!(value["violation"]["code"], "DSH_PROFILE_INVALID_FRAME");
}

#[test]
fn runtime_strings_are_escaped_in_text_output() {
    let ready = r#"{"v":1,"type":"ready","runtime":"open-design","protocol_version":1,"plugin_version":"0.1.0","capabilities":{"session_resume":true,"session_cancel":true,"structured_events":true}}"#;
    let error = r#"{"v":1,"type":"protocol_error","code":"X","message":"boom\u001b[2J\nok: 9 frames, 0 foreign, result completed"}"#;
    let (code, stdout) = validate_stdin(&["-"], format!("{ready}\n{error}\n").into_bytes());
    assert_eq!(code, 1, "{stdout}");
    assert_eq!(stdout.lines().count(), 1, "a forged second line: {stdout}");
    assert!(!stdout.contains('\u{1b}'), "raw escape: {stdout:?}");
    assert!(
        stdout.contains("boom\\u{1b}[2J\\u{a}ok: 9 frames"),
        "{stdout}"
    );
}
