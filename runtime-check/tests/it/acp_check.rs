//! The ACP surface's runtime checks ([`dsh_runtime_check::acp_check`]) hold for fake-dsh as
//! both releases, and for the real 0.2.1rc2 and 0.1.5rc1 when they are installed (the checks
//! are the facts of docs/surface-acp.md, so fake and real pass the same ones); and the
//! member-level differential: every check's conversation, played by the real release and by
//! fake-dsh as that release, gives the same frames (UUIDs, the world's path and token counts as
//! placeholders; notifications and agent requests in order, responses by id), but for the
//! differences [`ALLOWED`] lists with their reasons.

use dsh_runtime_check::acp_check::{checks, AcpTarget};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn target(dsh: PathBuf) -> AcpTarget {
    AcpTarget::new(
        dsh,
        dsh_test_support::binary("dsh-conformance"),
        Duration::from_secs(60),
    )
}

/// Runs every check; the failures, each with its id and why.
fn failures(target: &AcpTarget) -> Vec<String> {
    checks()
        .into_iter()
        .filter_map(|check| {
            (check.run)(target)
                .err()
                .map(|why| format!("{}: {why}", check.id))
        })
        .collect()
}

/// fake-dsh as `persona`, through a wrapper (the checks run the runtime with a clean
/// environment and `--profile acp` only).
fn fake_dsh(dir: &Path, persona: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let wrapper = dir.join(format!("dsh-{persona}"));
    let fake = dsh_test_support::binary("fake-dsh");
    let script = format!(
        "#!/bin/sh\nexec '{}' --persona {persona} \"$@\"\n",
        fake.display()
    );
    std::fs::write(&wrapper, script).unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    wrapper
}

#[test]
fn fake_dsh_passes_every_acp_check_as_both_releases() {
    let dir = tempfile::tempdir().unwrap();
    for persona in ["0.2.1", "0.1.5"] {
        let failed = failures(&target(fake_dsh(dir.path(), persona)));
        assert!(failed.is_empty(), "fake-dsh {persona}: {failed:#?}");
    }
}

#[test]
fn the_real_runtimes_pass_every_acp_check() {
    for name in ["dsh-0.2.1", "dsh"] {
        let Some(real) = dsh_test_support::real_runtime_bin(name) else {
            continue;
        };
        let failed = failures(&target(real));
        assert!(failed.is_empty(), "{name}: {failed:#?}");
    }
}

/// The differences the differential allows: (check id, member masked on both sides, why).
const ALLOWED: &[(&str, &str, &str)] = &[];

/// A run's frames as the differential compares them: UUIDs numbered by first appearance, the
/// run's world (its `project` parent) as `<world>`, token counts as `<used>`, the allowed
/// members masked; (notifications and requests in order, responses sorted by id).
fn comparable(check: &str, frames: &[serde_json::Value]) -> (Vec<String>, Vec<String>) {
    use serde_json::Value;
    let masked: Vec<&str> = ALLOWED
        .iter()
        .filter(|(id, ..)| *id == check)
        .map(|(_, member, _)| *member)
        .collect();
    fn walk(value: &Value, masked: &[&str], out: &mut Value) {
        *out = match value {
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(key, member)| {
                        let mut v = Value::Null;
                        if key == "used" || masked.contains(&key.as_str()) {
                            v = Value::String("<masked>".into());
                        } else {
                            walk(member, masked, &mut v);
                        }
                        (key.clone(), v)
                    })
                    .collect(),
            ),
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|item| {
                        let mut v = Value::Null;
                        walk(item, masked, &mut v);
                        v
                    })
                    .collect(),
            ),
            other => other.clone(),
        };
    }
    let mut ordered = Vec::new();
    let mut responses = Vec::new();
    for frame in frames {
        let mut clean = Value::Null;
        walk(frame, &masked, &mut clean);
        let text = worlds_and_uuids(&clean.to_string());
        if frame.get("method").is_some() {
            ordered.push(text);
        } else {
            responses.push(text);
        }
    }
    responses.sort();
    (ordered, responses)
}

/// A temp world's path (`/tmp/.tmpXXXX`, the `project` parent) as `<world>`, and UUIDs as
/// `<uuid>` (the order of first appearance is kept by the frames' order itself).
fn worlds_and_uuids(text: &str) -> String {
    let text = dsh_runtime_check::members::replace_uuids(text);
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("/project") {
        let start = rest[..at].rfind('"').map_or(0, |q| q + 1);
        out.push_str(&rest[..start]);
        out.push_str("<world>/project");
        rest = &rest[at + "/project".len()..];
    }
    out.push_str(rest);
    out
}

#[test]
fn fake_dsh_and_the_real_runtimes_write_the_same_frames_in_every_check() {
    let dir = tempfile::tempdir().unwrap();
    let mut differences = Vec::new();
    for (name, persona) in [("dsh-0.2.1", "0.2.1"), ("dsh", "0.1.5")] {
        let Some(real) = dsh_test_support::real_runtime_bin(name) else {
            continue;
        };
        let (real, fake) = (target(real), target(fake_dsh(dir.path(), persona)));
        for check in checks() {
            for side in [&real, &fake] {
                side.recorded.lock().unwrap().clear();
                let _ = (check.run)(side);
            }
            let real_runs = real.recorded.lock().unwrap().clone();
            let fake_runs = fake.recorded.lock().unwrap().clone();
            assert_eq!(
                real_runs.len(),
                fake_runs.len(),
                "{name} {}: runs",
                check.id
            );
            for (real_frames, fake_frames) in real_runs.iter().zip(&fake_runs) {
                let (real, fake) = (
                    comparable(check.id, real_frames),
                    comparable(check.id, fake_frames),
                );
                if real != fake {
                    differences.push(format!(
                        "{name} {}:\n  real: {real:#?}\n  fake: {fake:#?}",
                        check.id
                    ));
                }
            }
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}
