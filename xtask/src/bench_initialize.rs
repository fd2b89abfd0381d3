//! The `cargo xtask bench` rows of the JSON-RPC surfaces: how long fake-dsh takes from spawn to
//! its `initialize` response on the SDK surface (issue 24, goal: within 1.5x `echo`'s
//! spawn-to-line time) and on ACP (issue 39, goal: within 1.25x), each with the real runtime's
//! figure beside it when `cargo xtask real-dsh --runtime-bin` has installed it (its first
//! `initialize` takes seconds: it loads its plugin tree first). The runtimes run in a scratch
//! directory with a closed loopback port as their model (`initialize` contacts no model). fake-dsh
//! and `echo` run in turn, pair by pair, so a change in this shared machine's load hits both
//! series alike; the ratio is the median of the pairs' ratios. Timings are printed, never
//! asserted.

use crate::bench::{first_line_latency, first_line_latency_after, median, millis, Figure, Scratch};
use crate::kit::Kit;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// One surface's row.
pub struct InitializeRow {
    /// fake-dsh's (and the real runtime's) arguments.
    args: &'static [&'static str],
    /// The `initialize` request line.
    request: &'static str,
    /// What the response line holds besides `"id":1`.
    response_holds: &'static str,
    /// The real runtime's executable under the runtime wheels' install dir, its release, and
    /// how many rounds it gets (each takes seconds).
    real: (&'static str, &'static str, usize),
    goal: &'static str,
}

/// `--profile sdk`.
pub const SDK: InitializeRow = InitializeRow {
    args: &["--profile", "sdk"],
    request: r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"cwd":".","provider":"deepseek-official","model":"deepseek-flash"}}"#,
    response_holds: "\"jsonrpc\"",
    real: ("dsh", "0.1.5-rc.1", 5),
    goal: "<= 1.5x",
};

/// `--profile acp`.
pub const ACP: InitializeRow = InitializeRow {
    args: &["--profile", "acp"],
    request: r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#,
    response_holds: "deepseek-harness-acp",
    real: ("dsh-0.2.1", "0.2.1-rc.2", 3),
    goal: "<= 1.25x (issue 39)",
};

impl InitializeRow {
    /// Spawn, write `initialize`, read the first stdout line (which must be its response):
    /// median of `rounds`.
    pub fn latency(
        &self,
        make: impl FnMut() -> Command,
        rounds: usize,
    ) -> Result<Duration, String> {
        let request = format!("{}\n", self.request);
        let (latency, line) = first_line_latency_after(make, rounds, request.as_bytes())?;
        if !line.contains("\"id\":1") || !line.contains(self.response_holds) {
            return Err(format!("the first line was not the response: {line:?}"));
        }
        Ok(latency)
    }

    fn runtime(&self, program: &Path, scratch: &Scratch) -> Command {
        let mut command = Command::new(program);
        command
            .args(self.args)
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

    /// The row: fake-dsh against `echo`, and the real runtime when installed.
    pub fn rows(&self, kit: &Kit) -> Result<Vec<Figure>, String> {
        let scratch = Scratch::new("initialize")?;
        let rounds = 40;
        let fake = || self.runtime(&kit.fake_dsh, &scratch);
        let pairs = (0..rounds)
            .map(|_| Ok((self.latency(fake, 1)?, first_line_latency(echo, 1)?)))
            .collect::<Result<Vec<(Duration, Duration)>, String>>()?;
        let fake = median(pairs.iter().map(|pair| pair.0).collect());
        let echo = median(pairs.iter().map(|pair| pair.1).collect());
        let mut ratios: Vec<f64> = pairs
            .iter()
            .map(|(fake, echo)| fake.as_secs_f64() / echo.as_secs_f64())
            .collect();
        ratios.sort_by(f64::total_cmp);
        let ratio = ratios[ratios.len() / 2];
        Ok(vec![Figure {
            name: format!(
                "fake-dsh `{}` spawn to `initialize` response (median of {rounds}, paired with `echo`)",
                self.args.join(" ")
            ),
            value: millis(fake),
            baseline: format!(
                "{} (`echo`, one line){}",
                millis(echo),
                self.real_figure(&scratch)?
            ),
            ratio: format!("{ratio:.2}x (median of the pairs)"),
            goal: self.goal.into(),
        }])
    }

    /// The real runtime's figure, or why there is none.
    fn real_figure(&self, scratch: &Scratch) -> Result<String, String> {
        let (name, release, rounds) = self.real;
        let real = crate::real_runtime_bin::install_dir().join(name);
        if !real.is_file() {
            return Ok(
                "; the real runtime: not installed (`cargo xtask real-dsh --runtime-bin`)".into(),
            );
        }
        let measured = self.latency(|| self.runtime(&real, scratch), rounds)?;
        Ok(format!(
            "; the real runtime {release}: {} (median of {rounds})",
            millis(measured)
        ))
    }
}

/// `echo` printing a response-shaped line.
fn echo() -> Command {
    let mut command = Command::new("echo");
    command.arg(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    command
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
        assert!(SDK.latency(echo_back, 3).is_ok());
        for row in [SDK, ACP] {
            let other = || {
                let mut command = Command::new("echo");
                command.arg(r#"{"jsonrpc":"2.0","id":2,"result":{}}"#);
                command
            };
            let refused = row.latency(other, 1).unwrap_err();
            assert!(refused.contains("not the response"), "{refused}");
        }
        let not_acp = || {
            let mut command = Command::new("echo");
            command.arg(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
            command
        };
        assert!(
            ACP.latency(not_acp, 1).is_err(),
            "an ACP response names the agent"
        );
    }
}
