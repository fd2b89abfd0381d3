//! The ACP surface's runtime checks ([`dsh_runtime_check::acp_check`]) hold for fake-dsh as
//! both releases, and for the real 0.2.1rc2 and 0.1.5rc1 when they are installed (the checks
//! are the facts of docs/surface-acp.md, so fake and real pass the same ones).

use dsh_runtime_check::acp_check::{checks, AcpTarget};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn target(dsh: PathBuf) -> AcpTarget {
    AcpTarget {
        dsh,
        conformance: dsh_test_support::binary("dsh-conformance"),
        limit: Duration::from_secs(60),
        format: dsh_results::output::Format::Table,
    }
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
