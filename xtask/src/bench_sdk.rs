//! The `cargo xtask bench` row of the SDK surface (issue 24): how long fake-dsh `--profile sdk`
//! takes from spawn to its `initialize` response, beside `echo`'s spawn-to-line time (goal:
//! within 1.5x), and the real SDK runtime's figure beside it when `cargo xtask real-dsh
//! --runtime-bin` has installed it. The runtimes run in a scratch directory with a closed
//! loopback port as their model (`initialize` contacts no model). fake-dsh and `echo` run in
//! turn, pair by pair, so a change in this shared machine's load hits both series alike; the
//! ratio is the median of the pairs' ratios. Timings are printed, never asserted.

use crate::bench::{first_line_latency, first_line_latency_after, median, millis, Figure, Scratch};
use crate::kit::Kit;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"cwd":".","provider":"deepseek-official","model":"deepseek-flash"}}"#;

/// Spawn, write `initialize`, read the first stdout line (which must be its response): median
/// of `rounds`.
pub fn initialize_latency(
    make: impl FnMut() -> Command,
    rounds: usize,
) -> Result<Duration, String> {
    let (latency, line) =
        first_line_latency_after(make, rounds, format!("{INITIALIZE}\n").as_bytes())?;
    if !line.contains("\"id\":1") {
        return Err(format!("the first line was not the response: {line:?}"));
    }
    Ok(latency)
}

fn runtime(program: &Path, args: &[&str], scratch: &Scratch) -> Command {
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(&scratch.0)
        .env("DSH_HOME", scratch.0.join("dsh-home"))
        .env("HOME", scratch.0.join("home"))
        .env("TMPDIR", &scratch.0)
        .env("DEEPSEEK_BASE_URL", "http://127.0.0.1:9")
        .env("DEEPSEEK_API_KEY", "bench")
        .env_remove("FAKE_DSH_SCENARIO")
        .env_remove("FAKE_DSH_JOURNAL");
    command
}

/// `echo` printing a response-shaped line.
fn echo() -> Command {
    let mut command = Command::new("echo");
    command.arg(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    command
}

/// `rounds` pairs of (fake-dsh, `echo`) latencies, taken in turn.
fn paired(
    kit: &Kit,
    scratch: &Scratch,
    rounds: usize,
) -> Result<Vec<(Duration, Duration)>, String> {
    let fake = || runtime(&kit.fake_dsh, &["--profile", "sdk"], scratch);
    (0..rounds)
        .map(|_| Ok((initialize_latency(fake, 1)?, first_line_latency(echo, 1)?)))
        .collect()
}

/// The rows: fake-dsh against `echo`, and the real runtime when installed.
pub fn rows(kit: &Kit) -> Result<Vec<Figure>, String> {
    let scratch = Scratch::new("sdk-initialize")?;
    let rounds = 40;
    let pairs = paired(kit, &scratch, rounds)?;
    let fake = median(pairs.iter().map(|pair| pair.0).collect());
    let echo = median(pairs.iter().map(|pair| pair.1).collect());
    let mut ratios: Vec<f64> = pairs
        .iter()
        .map(|(fake, echo)| fake.as_secs_f64() / echo.as_secs_f64())
        .collect();
    ratios.sort_by(f64::total_cmp);
    let ratio = ratios[ratios.len() / 2];
    let real = crate::real_runtime_bin::install_dir().join("dsh");
    let real_figure = if real.is_file() {
        let measured = initialize_latency(|| runtime(&real, &["--profile", "sdk"], &scratch), 5)?;
        format!(
            "; the real runtime 0.1.5-rc.1: {} (median of 5)",
            millis(measured)
        )
    } else {
        "; the real runtime: not installed (`cargo xtask real-dsh --runtime-bin`)".to_string()
    };
    Ok(vec![Figure {
        name: format!(
            "fake-dsh `--profile sdk` spawn to `initialize` response (median of {rounds}, paired with `echo`)"
        ),
        value: millis(fake),
        baseline: format!("{} (`echo`, one line){real_figure}", millis(echo)),
        ratio: format!("{ratio:.2}x (median of the pairs)"),
        goal: "<= 1.5x".into(),
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latency_is_taken_to_the_response_line() {
        let echo_back = || {
            let mut command = Command::new("head");
            command.args(["-n", "1"]);
            command
        };
        assert!(initialize_latency(echo_back, 3).is_ok());
        let silent_then_other = || {
            let mut command = Command::new("echo");
            command.arg("not the response");
            command
        };
        let refused = initialize_latency(silent_then_other, 1).unwrap_err();
        assert!(refused.contains("not the response"), "{refused}");
    }
}
