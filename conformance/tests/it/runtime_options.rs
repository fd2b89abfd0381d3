//! The runtime-under-test options `run` and `check-runtime` share (`--runtime`, `--persona`):
//! `check-runtime --persona` reaches every runtime process its checks start, through the checks'
//! cleared environment, as `FAKE_DSH_PERSONA` (fake-dsh's own variable).

use assert_cmd::Command;
use std::os::unix::fs::PermissionsExt;

#[test]
fn check_runtime_persona_reaches_the_runtime_of_every_surface() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("personas");
    // A "runtime" that notes the persona it was given and exits at once.
    let runtime = dir.path().join("runtime");
    std::fs::write(
        &runtime,
        format!(
            "#!/bin/sh\necho \"$FAKE_DSH_PERSONA\" >> {}\n",
            seen.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o755)).unwrap();
    for (surface, check) in [("sdk", "sdk.sigterm"), ("acp", "acp.initialize")] {
        let out = Command::new(env!("CARGO_BIN_EXE_dsh-conformance"))
            .args(["check-runtime", "--surface", surface, "--case", check])
            .arg("--runtime")
            .arg(&runtime)
            .args(["--persona", "0.1.5"])
            .output()
            .unwrap();
        // Judged (0 or 1), not refused (2).
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{surface}: {out:?}"
        );
    }
    let personas = std::fs::read_to_string(&seen).unwrap();
    let lines: Vec<&str> = personas.lines().collect();
    assert!(
        lines.len() >= 2 && lines.iter().all(|line| *line == "0.1.5"),
        "{personas}"
    );
}

#[test]
fn an_unknown_persona_is_a_usage_error_naming_the_known_ones() {
    let out = Command::new(env!("CARGO_BIN_EXE_dsh-conformance"))
        .args([
            "check-runtime",
            "--runtime",
            "/bin/true",
            "--persona",
            "9.9",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("0.2.1") && stderr.contains("0.1.5"),
        "{stderr}"
    );
}
