//! The SDK and headless surfaces' checks (`dsh_runtime_check::sdk_check`), through the library:
//! fake-dsh passes every check of `sdk`, `sdk-minimal` and `headless`; a runtime that only echoes
//! its input (`cat`) fails; the real SDK runtime (`cargo xtask real-dsh --runtime-bin`) passes
//! every check of every surface, skipped with a message when absent. `check-runtime --surface`
//! itself (the `jsonrpc-agent` surface configured from the caller's environment, the daemons it
//! sweeps as the kit's own process) is the CLI's test: `conformance/tests/it/check_runtime_cli.rs`.

use dsh_engine::surface::Surface;
use dsh_runtime_check::sdk_check::{run, Target};
use std::path::Path;
use std::time::Duration;

/// Every check of `surface` against `dsh`: the ones that failed, each with its id and why.
fn failures(surface: &str, dsh: &Path) -> Vec<String> {
    let target = Target {
        dsh: dsh.to_path_buf(),
        surface: Surface::named(surface).unwrap(),
        conformance: dsh_test_support::binary("dsh-conformance"),
        limit: Duration::from_secs(60),
    };
    run(&target, &|_| true, &mut |_| {})
        .into_iter()
        .filter_map(|result| {
            result
                .outcome
                .err()
                .map(|why| format!("{}: {why}", result.id))
        })
        .collect()
}

#[test]
fn fake_dsh_passes_every_check_of_every_sdk_surface() {
    let fake = dsh_test_support::binary("fake-dsh");
    for surface in ["sdk", "sdk-minimal", "headless"] {
        let failed = failures(surface, &fake);
        assert!(failed.is_empty(), "{surface}: {failed:#?}");
    }
}

#[test]
fn a_runtime_that_echoes_its_input_fails_the_checks() {
    let failed = failures("sdk-minimal", Path::new("/bin/cat"));
    for id in ["sdk.conversation", "sdk.dropped-input"] {
        assert!(
            failed
                .iter()
                .any(|failure| failure.starts_with(&format!("{id}: "))),
            "{id} passed: {failed:#?}"
        );
    }
}

#[test]
fn the_real_sdk_runtime_passes_every_check() {
    let Some(target) =
        dsh_test_support::target_profile_dir().and_then(|d| d.parent().map(Path::to_path_buf))
    else {
        return;
    };
    let dir = target.join("real-dsh-runtime-bin");
    if !dir.join("dsh").is_file() {
        dsh_test_support::skip(format!(
            "the real SDK runtime is not installed in {}",
            dir.display()
        ));
        return;
    }
    // Every surface of every pinned release (0.1.5 `dsh` and the 0.1.1 `dsh-jsonrpc-agent`, then
    // 0.2.1 `dsh-0.2.1`, which talks to the kit's model server in the Anthropic Messages format),
    // one release's surfaces at once: each boots the real runtime several times.
    let waves: [&[(&str, &str)]; 2] = [
        &[
            ("sdk", "dsh"),
            ("sdk-minimal", "dsh"),
            ("headless", "dsh"),
            ("jsonrpc-agent", "dsh-jsonrpc-agent"),
        ],
        &[
            ("sdk", "dsh-0.2.1"),
            ("sdk-minimal", "dsh-0.2.1"),
            ("headless", "dsh-0.2.1"),
        ],
    ];
    for wave in waves {
        let runs: Vec<_> = wave
            .iter()
            .map(|&(surface, program)| {
                let dsh = dir.join(program);
                let name = format!("{surface} on {program}");
                std::thread::spawn(move || (name, failures(surface, &dsh)))
            })
            .collect();
        for run in runs {
            let (surface, failures) = run.join().unwrap();
            assert!(failures.is_empty(), "{surface}: {failures:#?}");
        }
    }
}
