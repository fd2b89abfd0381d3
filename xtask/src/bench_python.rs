//! The `cargo xtask bench` row of the Python fixture (issue 41): what the pytest plugin's world
//! (`dsh_conformance.FakeDsh`: its directories and launcher, then at close the `/proc` scan for
//! leftovers and the canary scan of its files) adds to starting fake-dsh itself, each run a spawn,
//! `initialize` and its response, stdin closed and the exit waited for; pairs taken in turn, the
//! median of their differences (goal: within 50 ms). `bench_python.py` measures, with the module
//! from `python/` on `PYTHONPATH`; skipped, saying so, without python3. Printed, never asserted.

use crate::bench::{millis, Figure, Scratch};
use crate::kit::Kit;
use std::process::Command;
use std::time::Duration;

const SCRIPT: &str = include_str!("bench_python.py");

pub fn rows(kit: &Kit) -> Result<Vec<Figure>, String> {
    let scratch = Scratch::new("python-fixture")?;
    let output = Command::new("python3")
        .arg("-c")
        .arg(SCRIPT)
        .arg(&kit.fake_dsh)
        .arg(&scratch.0)
        .arg("40")
        .env("PYTHONPATH", crate::workspace_root().join("python"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output();
    let output = match output {
        Ok(output) => output,
        Err(error) => {
            eprintln!("xtask bench: skipped the Python fixture row: cannot run python3: {error}");
            return Ok(Vec::new());
        }
    };
    if !output.status.success() {
        return Err(format!(
            "the Python fixture bench failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let figures: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("the Python fixture bench printed no JSON: {e}"))?;
    let ms = |key: &str| {
        figures[key]
            .as_f64()
            .map(|value| Duration::from_secs_f64(value / 1000.0))
            .ok_or_else(|| format!("the Python fixture bench gave no {key}"))
    };
    let (bare, overhead) = (ms("bare_ms")?, ms("overhead_ms")?);
    Ok(vec![Figure {
        name: "pytest fixture `fake_dsh`: setup + teardown over starting fake-dsh itself (median of 40 pairs)".into(),
        value: format!("+{}", millis(overhead)),
        baseline: format!("fake-dsh alone {}", millis(bare)),
        ratio: "-".into(),
        goal: "within 50 ms".into(),
    }])
}
