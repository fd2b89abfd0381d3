//! `scripts/gate.sh` keeps the host command line out of the uploaded results: the HTML report's
//! config (which must hold the real command to start the host) is written to a private temp dir
//! that is removed when the gate ends, never into the results directory.

use std::path::Path;
use std::process::Command;

/// A stand-in for `dsh-conformance`: `run` succeeds; `report --config FILE` copies FILE (and its
/// directory's mode) into `$SEEN`.
const FAKE_KIT: &str = r#"#!/bin/sh
case "$1" in
  run) exit 0 ;;
  report)
    cp "$3" "$SEEN/config.json"
    stat -c %a "$(dirname "$3")" > "$SEEN/dir-mode" 2>/dev/null || stat -f %Lp "$(dirname "$3")" > "$SEEN/dir-mode"
    echo "$(dirname "$3")" > "$SEEN/dir" ;;
esac
"#;

#[test]
fn the_report_config_with_the_host_command_never_lands_in_the_results() {
    let temp = tempfile::tempdir().unwrap();
    let kit = temp.path().join("fake-kit");
    std::fs::write(&kit, FAKE_KIT).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&kit, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (seen, out) = (temp.path().join("seen"), temp.path().join("results"));
    std::fs::create_dir(&seen).unwrap();
    let gate = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/gate.sh");
    let output = Command::new("bash")
        .arg(gate)
        .env("GATE_HOST", "env API_TOKEN=tok-s3cr3t node /w/driver.mjs")
        .env("GATE_OUT", &out)
        .env("GATE_HTML_REPORT", "true")
        .env("DSH_CONFORMANCE", &kit)
        .env("SEEN", &seen)
        .env("TMPDIR", temp.path())
        .env_remove("GITHUB_STEP_SUMMARY")
        .output()
        .expect("bash runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let config =
        std::fs::read_to_string(seen.join("config.json")).expect("the report got a config");
    assert!(
        config.contains("tok-s3cr3t"),
        "the report step still starts the real host"
    );
    assert!(!out.join("report-config.json").exists());
    let dir = std::fs::read_to_string(seen.join("dir")).unwrap();
    assert!(!Path::new(dir.trim()).starts_with(&out), "{dir}");
    assert!(
        !Path::new(dir.trim()).exists(),
        "the private dir is removed"
    );
    assert_eq!(
        std::fs::read_to_string(seen.join("dir-mode"))
            .unwrap()
            .trim(),
        "700"
    );
}
