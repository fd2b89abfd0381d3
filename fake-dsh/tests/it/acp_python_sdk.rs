//! The official Python ACP SDK (PyPI `agent-client-protocol` 0.12.1, module `acp`) on fake-dsh:
//! runs `examples/acp-client-python/acp_client_check.py` (a new session, a model switch, a
//! prompt that writes the page, then a second process that lists, resumes and prompts) against
//! `fake-dsh --profile acp` as 0.2.1 and 0.1.5. The SDK's pydantic models check every frame.
//! Skips, saying why, when no Python with the SDK is found (`ACP_PYTHON`, else `python3`; install
//! it with `pip install agent-client-protocol==0.12.1`).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

/// A Python that imports the SDK.
fn python_with_acp() -> Option<String> {
    let python = std::env::var("ACP_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let imports = Command::new(&python)
        .args(["-c", "import acp, acp.schema"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    imports.then_some(python)
}

#[test]
fn the_official_python_acp_sdk_runs_and_resumes_on_fake_dsh_as_both_releases() {
    let Some(python) = python_with_acp() else {
        dsh_test_support::skip(
            "no Python with the ACP SDK (ACP_PYTHON, else python3; \
             pip install agent-client-protocol==0.12.1)",
        );
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/acp-client-python/acp_client_check.py");
    let work = tempfile::tempdir().unwrap();
    let output = crate::support::output_within(
        Command::new(python)
            .arg(&script)
            .env("DSH", env!("CARGO_BIN_EXE_fake-dsh"))
            .env("WORK", work.path())
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("FAKE_DSH_WATCHDOG_SECS", "60")
            .env_remove("FAKE_DSH_SCENARIO")
            .env_remove("FAKE_DSH_JOURNAL"),
        LIMIT,
        "the ACP client",
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(stdout, "0.2.1: ok\n0.1.5: ok\n");
}
