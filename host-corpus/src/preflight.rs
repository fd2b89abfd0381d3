//! The pre-flight check: one handshake with the host driver before the corpus runs, so a driver
//! that cannot start or answer (a wrong command, a crash on import) is one infrastructure error
//! (exit 2) naming the command, its exit status and the tail of its stderr, instead of every
//! case failing after the whole run.

use serde_json::{json, Value};
use std::time::{Duration, Instant};

use super::driver::{Driver, DriverError, DriverSpec};
use super::transcript::Transcript;
use dsh_results::output::escape::{stderr_tail, terminal};
use dsh_results::output::secrets::display_command;

/// How long the driver has to answer the pre-flight handshake (times `--time-scale`).
const PREFLIGHT_MS: u64 = 15_000;
/// How many lines of the driver's stderr an error shows.
pub const STDERR_TAIL_LINES: usize = 20;

/// Starts the driver in a scratch dir, handshakes and shuts it down; the handshake reply, or the
/// error to print.
pub fn handshake(
    host: &[String],
    time_scale: dsh_engine::timing::TimeScale,
    pass_env: &[String],
) -> Result<Value, String> {
    let scratch = dsh_engine::scratch::tempdir("dsh-preflight-")
        .map_err(|e| format!("cannot create a scratch dir for the pre-flight check: {e}"))?;
    let spec = DriverSpec {
        command: host.to_vec(),
        cwd: scratch.path().to_path_buf(),
        env: dsh_engine::child_env::inherited(pass_env)
            .into_iter()
            .chain([("DSH_CONFORMANCE".to_string(), "preflight".to_string())])
            .collect(),
        stderr_needles: Vec::new(),
        fsize_limit: None,
    };
    let mut transcript = Transcript::default();
    let mut driver = Driver::start(&spec, Vec::new())
        .map_err(|error| explain(host, &message(error), "not started", ""))?;
    let deadline = Instant::now() + time_scale.scale_ms(PREFLIGHT_MS);
    let request = json!({"v": 1, "type": "handshake", "kit": "dsh-conformance", "kit_version": env!("CARGO_PKG_VERSION")});
    let reply = driver
        .send(&request, &mut transcript)
        .and_then(|()| driver.recv(deadline, "the handshake reply", &mut transcript));
    let failure = match reply {
        Ok(reply) if reply.get("type").and_then(Value::as_str) == Some("handshake") => {
            let _ = driver.shutdown(Duration::from_secs(5), &mut transcript);
            return Ok(reply);
        }
        Ok(reply) => format!("it answered the handshake with {reply}"),
        Err(error) => message(error),
    };
    let status = driver.exit_status_within(Duration::from_millis(500));
    driver.kill();
    driver.wait_stderr_drained(Duration::from_secs(1));
    let stderr = stderr_tail(&driver.stderr().kept, STDERR_TAIL_LINES);
    Err(explain(host, &failure, &status, &stderr))
}

fn message(error: DriverError) -> String {
    match error {
        DriverError::Timeout(why)
        | DriverError::Exited(why)
        | DriverError::Invalid(why)
        | DriverError::Io(why)
        | DriverError::Kit(why) => why,
        DriverError::ExitedBeforeReply(exit) => exit.why,
    }
}

fn explain(host: &[String], failure: &str, status: &str, stderr: &str) -> String {
    let stderr = if stderr.is_empty() {
        "  stderr: (empty)".to_string()
    } else {
        format!("  stderr (last {STDERR_TAIL_LINES} lines at most):\n{stderr}")
    };
    format!(
        "the host driver failed the pre-flight handshake, so no case was run: {}\n  command: {}{}\n  status: {status}\n{stderr}",
        terminal(failure),
        terminal(&display_command(host)),
        super::suite::unexpanded_hint(host)
            .lines()
            .map(terminal)
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_driver_that_dies_is_explained_with_its_stderr() {
        let host = vec![
            "sh".to_string(),
            "-c".to_string(),
            "echo 'Error: Cannot find module x' >&2; exit 7".to_string(),
        ];
        let error =
            handshake(&host, dsh_engine::timing::TimeScale::ONE, &[]).expect_err("the driver dies");
        assert!(error.contains("exit status 7"), "{error}");
        assert!(error.contains("Cannot find module x"), "{error}");
        assert!(error.contains("command: sh -c"), "{error}");
    }

    #[test]
    fn the_tail_keeps_the_last_lines() {
        let text: String = (0..30).map(|n| format!("line {n}\n")).collect();
        let tail = stderr_tail(text.as_bytes(), 3);
        assert_eq!(tail, "    line 27\n    line 28\n    line 29");
    }
}
