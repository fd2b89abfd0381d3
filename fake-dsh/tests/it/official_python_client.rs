//! The official Python client `deepseek-harness-sdk` 0.2.1 on fake-dsh: runs the example
//! application tests in `examples/official-python-client/` (a prompt, the working directory got
//! and set, a cold resume in a new process) with the client's `dsh_bin` pointing at fake-dsh. No
//! key, no network: fake-dsh plays the default agent. Skips, saying why, without python3 with
//! pydantic 2 or without the client wheel `cargo xtask real-dsh --runtime-bin` unpacks.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const CLIENT: &str = "deepseek-harness-sdk-0.2.1rc2";
const LIMIT: Duration = Duration::from_secs(120);

/// The unpacked client, beside the real runtimes under `target/real-dsh-runtime-bin/`.
fn client_dir() -> Option<PathBuf> {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_fake-dsh"));
    let target = exe.parent()?.parent()?;
    let dir = target.join("real-dsh-runtime-bin").join(CLIENT);
    dir.is_dir().then_some(dir)
}

#[test]
fn the_official_python_client_runs_resumes_and_moves_the_working_directory_on_fake_dsh() {
    let Some(client) = client_dir().filter(|_| dsh_test_support::python_with_pydantic_2()) else {
        dsh_test_support::skip(format!(
            "needs python3 with pydantic 2 and the client {CLIENT} \
             (cargo xtask real-dsh --runtime-bin)"
        ));
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/official-python-client/test_official_client.py");
    let scratch = tempfile::tempdir().unwrap();
    let output = crate::support::output_within(
        Command::new("python3")
            .arg(&script)
            .current_dir(scratch.path())
            .env("FAKE_DSH", env!("CARGO_BIN_EXE_fake-dsh"))
            .env("PYTHONPATH", &client)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("TMPDIR", scratch.path())
            .env("FAKE_DSH_WATCHDOG_SECS", "60")
            .env_remove("DSH_HOME")
            .env_remove("FAKE_DSH_SCENARIO")
            .env_remove("FAKE_DSH_PERSONA")
            .env_remove("DEEPSEEK_API_KEY")
            .env_remove("DEEPSEEK_BASE_URL"),
        LIMIT,
        "the client tests",
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("3 passed, 0 failed"), "{stdout}\n{stderr}");
    for test in [
        "test_a_prompt_writes_the_page_and_completes",
        "test_the_working_directory_moves_and_the_next_turn_writes_there",
        "test_a_stored_session_resumes_in_a_new_process",
    ] {
        assert!(stdout.contains(&format!("ok {test}")), "{stdout}");
    }
}
