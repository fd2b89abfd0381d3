//! Whole-process rows of `cargo xtask bench` beyond the kit's own: the CI gate's cost for an
//! external host (the corpus against `examples/node-host` beside the reference host, and the
//! harness's own CPU per case). [`crate::bench_real_dsh`] adds fake-dsh against the real dsh.
//! Timings are measured and printed, never asserted.

use crate::bench::Figure;
use crate::kit::Kit;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Linux's `USER_HZ`: the unit of the CPU times in `/proc/PID/stat` (100 on every mainstream
/// architecture).
const TICKS_PER_SECOND: f64 = 100.0;

/// A finished run: wall time, and CPU seconds of the process itself and of its waited-for
/// descendants (drivers, runtimes), from its last `/proc/PID/stat` sample (taken every 20 ms, so
/// the last 20 ms may be missing).
pub struct Sampled {
    pub wall: Duration,
    pub own_cpu: f64,
    pub children_cpu: f64,
    pub success: bool,
}

/// `(utime + stime, cutime + cstime)` of `pid` in seconds.
fn cpu_of(pid: u32) -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at the state, field 3.
    let fields: Vec<&str> = stat
        .get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<f64>().ok();
    Some((
        (field(14)? + field(15)?) / TICKS_PER_SECOND,
        (field(16)? + field(17)?) / TICKS_PER_SECOND,
    ))
}

/// Runs `command` to its end (stdout and stderr discarded), sampling its CPU times.
pub fn sample_run(mut command: Command) -> Result<Sampled, String> {
    let started = Instant::now();
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{command:?}: {e}"))?;
    let mut last = (0.0, 0.0);
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if let Some(now) = cpu_of(child.id()) {
            last = now;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(Sampled {
        wall: started.elapsed(),
        own_cpu: last.0,
        children_cpu: last.1,
        success: status.success(),
    })
}

/// `dsh-conformance run` of the whole corpus at `--jobs 8` against `host`.
fn corpus_run(kit: &Kit, host: &str) -> Command {
    let mut command = Command::new(&kit.conformance);
    command
        .arg("run")
        .arg("--host")
        .arg(host)
        .arg("--fake-dsh")
        .arg(&kit.fake_dsh)
        .arg("--fixtures")
        .arg(&kit.fixtures)
        .args(["--jobs", "8"]);
    command
}

pub fn seconds(duration: Duration) -> String {
    format!("{:.2} s", duration.as_secs_f64())
}

/// The harness's own CPU per case and its share of all the run's CPU.
fn harness_share(run: &Sampled, cases: usize) -> String {
    let total = run.own_cpu + run.children_cpu;
    format!(
        "{:.1} ms harness CPU per case ({:.0}% of the run's {:.1} s CPU)",
        run.own_cpu * 1000.0 / cases.max(1) as f64,
        100.0 * run.own_cpu / total.max(f64::MIN_POSITIVE),
        total
    )
}

/// The corpus against `examples/node-host` beside the reference host, both at `--jobs 8`.
pub fn external_host(kit: &Kit, root: &Path, cases: usize) -> Result<Vec<Figure>, String> {
    let have_node = Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !have_node {
        return Ok(vec![Figure {
            name: "whole corpus vs examples/node-host (--jobs 8)".into(),
            value: "not measured: no `node` on PATH".into(),
            baseline: "-".into(),
            ratio: "-".into(),
            goal: "<= 1.5x the reference host".into(),
        }]);
    }
    let reference = sample_run(corpus_run(kit, &kit.host_driver.display().to_string()))?;
    let driver = root.join("examples/node-host/driver.mjs");
    // Judged against the example's committed expectations (its known failures), as its CI does,
    // with its runtimes under the kit's supervisor (escaped daemons).
    let mut node_run = corpus_run(
        kit,
        &format!(
            "node {} --supervisor {}",
            driver.display(),
            kit.conformance.display()
        ),
    );
    node_run
        .arg("--expectations")
        .arg(root.join("examples/node-host/conformance-expectations.json"));
    let node = sample_run(node_run)?;
    let verdict = |run: &Sampled| {
        if run.success {
            ""
        } else {
            ", some cases failed"
        }
    };
    Ok(vec![
        Figure {
            name: format!("whole corpus vs examples/node-host ({cases} cases, --jobs 8)"),
            value: format!("{}{}", seconds(node.wall), verdict(&node)),
            baseline: format!(
                "{} (reference host, same run of the bench{})",
                seconds(reference.wall),
                verdict(&reference)
            ),
            ratio: format!(
                "{:.2}x",
                node.wall.as_secs_f64() / reference.wall.as_secs_f64()
            ),
            goal: "<= 1.5x the reference host (issue 18 item 5)".into(),
        },
        Figure {
            name: "the harness's own share of a case (--jobs 8)".into(),
            value: format!("node-host: {}", harness_share(&node, cases)),
            baseline: format!("reference host: {}", harness_share(&reference, cases)),
            ratio: format!(
                "{:.2}x",
                node.own_cpu / reference.own_cpu.max(f64::MIN_POSITIVE)
            ),
            goal: "a few ms; the rest is the host's and runtime's".into(),
        },
    ])
}
