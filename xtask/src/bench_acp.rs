//! The `cargo xtask bench` row of the ACP surface (issue 39): how long fake-dsh `--profile acp`
//! takes from spawn to its `initialize` response, beside `echo`'s spawn-to-line time (goal:
//! within 1.25x), and the real runtime's figure beside it when `cargo xtask real-dsh
//! --runtime-bin` has installed it (its first `initialize` takes seconds: it loads its plugin
//! tree first). fake-dsh and `echo` run in turn, pair by pair, so a change in this shared
//! machine's load hits both series alike; the ratio is the median of the pairs' ratios. Timings
//! are printed, never asserted.

use crate::bench::{first_line_latency, first_line_latency_after, median, millis, Figure, Scratch};
use crate::kit::Kit;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#;

/// Spawn, write `initialize`, read the first stdout line (which must be its response): median
/// of `rounds`.
pub fn initialize_latency(
    make: impl FnMut() -> Command,
    rounds: usize,
) -> Result<Duration, String> {
    let (latency, line) =
        first_line_latency_after(make, rounds, format!("{INITIALIZE}\n").as_bytes())?;
    if !line.contains("\"id\":1") || !line.contains("deepseek-harness-acp") {
        return Err(format!("the first line was not the ACP response: {line:?}"));
    }
    Ok(latency)
}

fn runtime(program: &Path, scratch: &Scratch) -> Command {
    let mut command = Command::new(program);
    command
        .args(["--profile", "acp"])
        .current_dir(&scratch.0)
        .env("DSH_HOME", scratch.0.join("dsh-home"))
        .env("HOME", scratch.0.join("home"))
        .env("TMPDIR", &scratch.0)
        .env("DEEPSEEK_BASE_URL", "http://127.0.0.1:9")
        .env("DEEPSEEK_API_KEY", "bench")
        .env_remove("FAKE_DSH_SCENARIO")
        .env_remove("FAKE_DSH_JOURNAL")
        .env_remove("FAKE_DSH_PERSONA");
    command
}

/// `echo` printing a response-shaped line.
fn echo() -> Command {
    let mut command = Command::new("echo");
    command.arg(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    command
}

/// The row: fake-dsh against `echo`, and the real 0.2.1 when installed.
pub fn rows(kit: &Kit) -> Result<Vec<Figure>, String> {
    let scratch = Scratch::new("acp-initialize")?;
    let rounds = 40;
    let fake = || runtime(&kit.fake_dsh, &scratch);
    let pairs = (0..rounds)
        .map(|_| Ok((initialize_latency(fake, 1)?, first_line_latency(echo, 1)?)))
        .collect::<Result<Vec<(Duration, Duration)>, String>>()?;
    let fake = median(pairs.iter().map(|pair| pair.0).collect());
    let echo = median(pairs.iter().map(|pair| pair.1).collect());
    let mut ratios: Vec<f64> = pairs
        .iter()
        .map(|(fake, echo)| fake.as_secs_f64() / echo.as_secs_f64())
        .collect();
    ratios.sort_by(f64::total_cmp);
    let ratio = ratios[ratios.len() / 2];
    let real = crate::real_runtime_bin::install_dir().join("dsh-0.2.1");
    let real_figure = if real.is_file() {
        let measured = initialize_latency(|| runtime(&real, &scratch), 3)?;
        format!(
            "; the real runtime 0.2.1-rc.2: {} (median of 3)",
            millis(measured)
        )
    } else {
        "; the real runtime: not installed (`cargo xtask real-dsh --runtime-bin`)".to_string()
    };
    Ok(vec![Figure {
        name: format!(
            "fake-dsh `--profile acp` spawn to `initialize` response (median of {rounds}, paired with `echo`)"
        ),
        value: millis(fake),
        baseline: format!("{} (`echo`, one line){real_figure}", millis(echo)),
        ratio: format!("{ratio:.2}x (median of the pairs)"),
        goal: "<= 1.25x (issue 39)".into(),
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latency_is_taken_to_the_acp_response_line() {
        let wrong = || {
            let mut command = Command::new("echo");
            command.arg(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
            command
        };
        let refused = initialize_latency(wrong, 1).unwrap_err();
        assert!(refused.contains("not the ACP response"), "{refused}");
    }
}
