//! `cargo xtask bench`: whole-process figures (fake-dsh cold start, the corpus's wall time against
//! its unavoidable floor, the reference host's peak RSS under hostile output), plus the checker's
//! throughput bench, printed as one table with ratios; [`crate::bench_runs`] adds the external
//! host and real-dsh rows. Nothing here asserts a timing: the figures are for docs/performance.md.

use crate::kit::Kit;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub struct Figure {
    pub name: String,
    pub value: String,
    pub baseline: String,
    pub ratio: String,
    pub goal: String,
}

/// A temp directory removed on drop (benches write nothing outside it).
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(label: &str) -> Result<Self, String> {
        let path = std::env::temp_dir().join(format!("dsh-bench-{label}-{}", std::process::id()));
        std::fs::create_dir_all(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Scratch(path))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

pub fn millis(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1000.0)
}

/// `root/dsh-home` holding the open-design profile fake-dsh looks for.
pub fn installed_dsh_home(root: &Path) -> Result<PathBuf, String> {
    let home = root.join("dsh-home");
    let profile = home.join("profiles/open-design");
    std::fs::create_dir_all(&profile).map_err(|e| e.to_string())?;
    std::fs::write(
        profile.join("package.json"),
        r#"{"name":"@open-design/dsh-runtime","version":"0.1.0"}"#,
    )
    .map_err(|e| e.to_string())?;
    Ok(home)
}

/// Spawn-to-first-line latency of `command`, median of `rounds`.
pub fn first_line_latency(
    make: impl FnMut() -> Command,
    rounds: usize,
) -> Result<Duration, String> {
    first_line_latency_after(make, rounds, b"").map(|(latency, _)| latency)
}

/// Spawn-to-first-line latency of `command` when `input` is written to its stdin right after the
/// spawn, median of `rounds`; also the last run's first line.
pub fn first_line_latency_after(
    mut make: impl FnMut() -> Command,
    rounds: usize,
    input: &[u8],
) -> Result<(Duration, String), String> {
    let mut samples = Vec::with_capacity(rounds);
    let mut line = String::new();
    for _ in 0..rounds {
        let mut command = make();
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let started = Instant::now();
        let mut child = command.spawn().map_err(|e| format!("spawn: {e}"))?;
        if let Some(stdin) = child.stdin.as_mut().filter(|_| !input.is_empty()) {
            // A process that answers without reading (`echo`) may be gone before the write: a
            // broken pipe is no error, its line is still read below.
            if let Err(error) = std::io::Write::write_all(stdin, input) {
                if error.kind() != std::io::ErrorKind::BrokenPipe {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!("write to the process: {error}"));
                }
            }
        }
        line.clear();
        let stdout = child.stdout.take().ok_or("no stdout")?;
        BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        samples.push(started.elapsed());
        drop(child.stdin.take());
        let _ = child.kill();
        let _ = child.wait();
        if line.is_empty() {
            return Err("the process wrote no line".into());
        }
    }
    Ok((median(samples), line))
}

pub fn cold_start(kit: &Kit) -> Result<Figure, String> {
    let scratch = Scratch::new("cold-start")?;
    let home = installed_dsh_home(&scratch.0)?;
    let rounds = 40;
    let fake = first_line_latency(
        || {
            let mut command = Command::new(&kit.fake_dsh);
            command
                .args(["--profile", "open-design", "--stdio"])
                .env("DSH_HOME", &home)
                .env_remove("FAKE_DSH_SCENARIO")
                .env_remove("FAKE_DSH_JOURNAL")
                .current_dir(&scratch.0);
            command
        },
        rounds,
    )?;
    let echo = first_line_latency(
        || {
            let mut command = Command::new("echo");
            command.arg(r#"{"v":1,"type":"ready"}"#);
            command
        },
        rounds,
    )?;
    Ok(Figure {
        name: "fake-dsh cold start to `ready` (median of 40)".into(),
        value: millis(fake),
        baseline: format!("{} (`echo`, one line)", millis(echo)),
        ratio: format!("{:.2}x", fake.as_secs_f64() / echo.as_secs_f64()),
        goal: "<= 1.5x".into(),
    })
}

/// The reference host's documented bounds (docs/reference-host.md), which some cases exist to
/// make it wait out.
const READY_TIMEOUT: Duration = Duration::from_millis(10_000);
const CANCEL_GRACE: Duration = Duration::from_millis(1_000);
const STDIN_CLOSE_GRACE: Duration = Duration::from_millis(500);
const TERM_GRACE: Duration = Duration::from_millis(1_000);
const EXIT_GRACE: Duration = Duration::from_millis(2_000);

/// What a case cannot avoid: its process spawns (one driver, two processes per discover and per
/// setup, one runtime per run, one driver per restart), its scripts' sleeps and drip delays, and
/// the host bounds its scripts make the host wait out (a runtime that never writes `ready`, that
/// hangs through a cancel or after its result, that ignores SIGTERM).
fn unavoidable(case: &Value) -> (usize, Duration) {
    let steps = case["steps"].as_array().cloned().unwrap_or_default();
    let mut spawns = 1;
    for step in &steps {
        if step.get("discover").is_some() || step.get("setup").is_some() {
            spawns += 2;
        }
        if step.get("run").is_some() || step.get("restart").is_some() {
            spawns += 1;
        }
    }
    let cancels = steps
        .iter()
        .any(|step| step["run"].get("cancel_on").is_some());
    let mut wait = Duration::ZERO;
    let scripts = case["runtime"]["stdio"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for script in &scripts {
        let actions = script.as_array().cloned().unwrap_or_default();
        let has = |name: &str| actions.iter().any(|a| a.get(name).is_some());
        let ignores_term = has("ignore_sigterm");
        let term = if ignores_term {
            TERM_GRACE
        } else {
            Duration::ZERO
        };
        for (index, action) in actions.iter().enumerate() {
            if let Some(ms) = action.get("sleep_ms").and_then(Value::as_u64) {
                wait += Duration::from_millis(ms);
            }
            if let Some(drip) = action.get("drip") {
                let delay = drip["delay_ms"].as_u64().unwrap_or(0);
                let chunk = drip["chunk"].as_u64().unwrap_or(1).max(1);
                let bytes = serde_json::to_string(&drip["action"])
                    .map(|s| s.len())
                    .unwrap_or(0) as u64;
                wait += Duration::from_millis(delay * bytes.div_ceil(chunk));
            }
            if action.get("hang").is_some() {
                let before = &actions[..index];
                let ready_before = before.iter().any(|a| a.get("ready").is_some());
                let result_before = before.iter().any(|a| a.get("result").is_some());
                wait += if !ready_before {
                    READY_TIMEOUT
                } else if result_before {
                    EXIT_GRACE + term
                } else if cancels {
                    CANCEL_GRACE + STDIN_CLOSE_GRACE + term
                } else {
                    Duration::ZERO
                };
            }
        }
        let stubborn_child = actions
            .iter()
            .any(|a| a["spawn_child"]["ignore_sigterm"] == true);
        if stubborn_child {
            wait += TERM_GRACE;
        }
    }
    (spawns, wait)
}

/// Wall time of the whole corpus at `jobs`, and the per-case results.
fn timed_corpus(kit: &Kit, jobs: usize, scratch: &Path) -> Result<(Duration, Vec<Value>), String> {
    let json_path = scratch.join(format!("suite-{jobs}.json"));
    let started = Instant::now();
    let status = kit
        .conformance_run()
        .arg("--jobs")
        .arg(jobs.to_string())
        .arg("--json")
        .arg(&json_path)
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("dsh-conformance: {e}"))?;
    let wall = started.elapsed();
    let report: Value = serde_json::from_slice(
        &std::fs::read(&json_path).map_err(|e| format!("no suite JSON ({status}): {e}"))?,
    )
    .map_err(|e| e.to_string())?;
    Ok((
        wall,
        report["cases"].as_array().cloned().unwrap_or_default(),
    ))
}

/// The corpus at the core count (the default `--jobs`) and at 8 jobs, each against its floor:
/// the longest single case's unavoidable time, or the sum of them spread over the jobs.
/// The corpus rows and the number of cases they ran.
pub struct CorpusFigures {
    pub figures: Vec<Figure>,
    pub cases: usize,
}

pub fn corpus(kit: &Kit, spawn_cost: Duration) -> Result<CorpusFigures, String> {
    let scratch = Scratch::new("corpus")?;
    let mut total = Duration::ZERO;
    let mut longest = Duration::ZERO;
    let mut spawn_total = 0;
    for file in fixture_files(&kit.fixtures)? {
        let case: Value = serde_json::from_slice(&std::fs::read(&file).map_err(|e| e.to_string())?)
            .map_err(|e| format!("{}: {e}", file.display()))?;
        let (spawns, wait) = unavoidable(&case);
        let case_floor = wait + spawn_cost * spawns as u32;
        spawn_total += spawns;
        total += case_floor;
        longest = longest.max(case_floor);
    }
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut figures = Vec::new();
    let mut case_count = 0;
    for jobs in [cores, 8] {
        let (wall, cases) = timed_corpus(kit, jobs, &scratch.0)?;
        case_count = cases.len();
        let floor = longest.max(total / jobs as u32);
        figures.push(Figure {
            name: format!(
                "whole corpus vs reference host ({} cases, --jobs {jobs}, {cores} cores, release)",
                cases.len()
            ),
            value: format!("{:.2} s", wall.as_secs_f64()),
            baseline: format!(
                "{:.2} s floor ({spawn_total} spawns x {}, scripted waits and host bounds {:.1} s in all, longest case {:.1} s)",
                floor.as_secs_f64(),
                millis(spawn_cost),
                total.as_secs_f64(),
                longest.as_secs_f64()
            ),
            ratio: format!("{:.2}x", wall.as_secs_f64() / floor.as_secs_f64()),
            goal: "< 10 s; spawn-bound".into(),
        });
    }
    Ok(CorpusFigures {
        figures,
        cases: case_count,
    })
}

fn fixture_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).map_err(|e| format!("{}: {e}", next.display()))? {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.is_dir() {
                if path
                    .file_name()
                    .is_some_and(|n| n != "transcripts" && n != "clients")
                {
                    pending.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "json")
                && path.file_name().is_some_and(|n| n != "rules.json")
            {
                files.push(path);
            }
        }
    }
    Ok(files)
}

/// Peak RSS (VmHWM) of the reference host driver while its runtime plays `action`.
fn host_peak_rss(kit: &Kit, label: &str, action: Value) -> Result<u64, String> {
    let scratch = Scratch::new(label)?;
    let home = installed_dsh_home(&scratch.0)?;
    let project = scratch.0.join("project");
    let data = scratch.0.join("host-data");
    std::fs::create_dir_all(&project).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&data).map_err(|e| e.to_string())?;
    let scenario = scratch.0.join("scenario.json");
    let script = json!({"stdio": [[{"ready": {}}, {"read_execute": {}}, {"session": {}}, action,
        {"text": "after"}, {"result": {"status": "completed"}}]]});
    std::fs::write(&scenario, script.to_string()).map_err(|e| e.to_string())?;
    let wrapper = scratch.0.join("dsh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nFAKE_DSH_SCENARIO='{}' exec '{}' \"$@\"\n",
            scenario.display(),
            kit.fake_dsh.display()
        ),
    )
    .map_err(|e| e.to_string())?;
    make_executable(&wrapper)?;
    let mut driver = Command::new(&kit.host_driver)
        .env("DSH_BIN", &wrapper)
        .env("DSH_HOME", &home)
        .env("RUNTIME_DATA_DIR", &data)
        .current_dir(&scratch.0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("dsh-host-driver: {e}"))?;
    let pid = driver.id();
    let mut stdin = driver.stdin.take().ok_or("no stdin")?;
    let requests = [
        json!({"v":1,"type":"handshake","kit":"dsh-conformance","kit_version":"bench"}),
        json!({"v":1,"type":"run","id":"r1","turn":0,"conversation_id":"c1","project_id":"p1",
            "cwd": project, "prompt":"bench","bootstrap":"bench bootstrap",
            "model":{"provider":"deepseek-official","id":"deepseek-chat"},"reasoning_effort":null}),
    ];
    for request in &requests {
        writeln!(stdin, "{request}").map_err(|e| e.to_string())?;
    }
    let mut reader = BufReader::new(driver.stdout.take().ok_or("no stdout")?);
    let mut line = String::new();
    let mut outcome = None;
    while reader.read_line(&mut line).map_err(|e| e.to_string())? > 0 {
        if let Ok(reply) = serde_json::from_str::<Value>(&line) {
            if reply["type"] == "outcome" {
                outcome = Some(reply);
                break;
            }
        }
        line.clear();
    }
    let peak = vm_hwm_kib(pid);
    let _ = writeln!(stdin, r#"{{"v":1,"type":"shutdown"}}"#);
    drop(stdin);
    let mut rest = Vec::new();
    let _ = reader.read_to_end(&mut rest);
    let _ = driver.wait();
    let outcome = outcome.ok_or("the driver sent no outcome")?;
    eprintln!("xtask: bench {label}: outcome {}", outcome["status"]);
    peak
}

fn vm_hwm_kib(pid: u32) -> Result<u64, String> {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|e| e.to_string())?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| "no VmHWM in /proc status".into())
}

fn make_executable(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| e.to_string())
}

pub fn peak_rss(kit: &Kit) -> Result<Vec<Figure>, String> {
    const GIB: u64 = 1024 * 1024 * 1024;
    let cases = [
        (
            "no-newline",
            "1 GiB line without a newline",
            json!({"repeat": {"text": "x", "bytes": GIB, "newline": false}}),
        ),
        (
            "stderr-flood",
            "1 GiB stderr flood",
            json!({"stderr_flood": {"bytes": GIB}}),
        ),
    ];
    let mut figures = Vec::new();
    for (label, what, action) in cases {
        let kib = host_peak_rss(kit, label, action)?;
        figures.push(Figure {
            name: format!("reference host peak RSS through a {what}"),
            value: format!("{:.1} MiB", kib as f64 / 1024.0),
            baseline: "32 MiB".into(),
            ratio: format!("{:.2}x", kib as f64 / (32.0 * 1024.0)),
            goal: "< 32 MiB".into(),
        });
    }
    Ok(figures)
}

/// The checker throughput bench (a release binary of the protocol crate): the strict checker
/// against `serde_json::from_str::<Value>` per line and Node's `JSON.parse` per line (when `node`
/// is on PATH), per CPU second (on-CPU time, which the machine's other load disturbs least).
pub fn checker_throughput(checker_bench: &Path) -> Result<Vec<Figure>, String> {
    let output = Command::new(checker_bench)
        .arg("--megabytes")
        .arg("100")
        .output()
        .map_err(|e| format!("{}: {e}", checker_bench.display()))?;
    if !output.status.success() {
        return Err(format!(
            "checker bench failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let figures: Value = serde_json::from_slice(&output.stdout).map_err(|e| e.to_string())?;
    let rate = |who: &Value| {
        format!(
            "{:.0} MB/s, {:.0} frames/s ({:.3} s CPU, {:.3} s wall)",
            who["mb_per_s"].as_f64().unwrap_or(0.0),
            who["frames_per_s"].as_f64().unwrap_or(0.0),
            who["cpu_seconds"].as_f64().unwrap_or(0.0),
            who["seconds"].as_f64().unwrap_or(0.0)
        )
    };
    let checker = &figures["checker"];
    let ratio = |other: &Value| {
        checker["mb_per_s"].as_f64().unwrap_or(0.0) / other["mb_per_s"].as_f64().unwrap_or(f64::NAN)
    };
    let name = format!(
        "strict checker on a {} MB transcript ({} frames, best of {} rounds)",
        figures["megabytes"], figures["frames"], figures["rounds"]
    );
    let mut rows = vec![Figure {
        name: name.clone(),
        value: rate(checker),
        baseline: format!(
            "{} (serde_json::from_str::<Value> per line)",
            rate(&figures["serde_json"])
        ),
        ratio: format!("{:.2}x", ratio(&figures["serde_json"])),
        goal: ">= 1x".into(),
    }];
    let node = &figures["node"];
    rows.push(match node["skipped"].as_str() {
        Some(why) => Figure {
            name,
            value: rate(checker),
            baseline: format!("Node's JSON.parse per line: not measured ({why})"),
            ratio: "-".into(),
            goal: ">= 3x".into(),
        },
        None => Figure {
            name,
            value: rate(checker),
            baseline: format!(
                "{} (Node's JSON.parse per line, decoding and splitting included)",
                rate(node)
            ),
            ratio: format!("{:.2}x", ratio(node)),
            goal: ">= 3x".into(),
        },
    });
    Ok(rows)
}

/// The figures as a Markdown table.
fn table(figures: &[Figure]) -> String {
    let mut text =
        String::from("| figure | measured | baseline | ratio | goal |\n|---|---|---|---|---|\n");
    for figure in figures {
        text.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            figure.name, figure.value, figure.baseline, figure.ratio, figure.goal
        ));
    }
    text
}

pub fn print_table(figures: &[Figure]) {
    print!("{}", table(figures));
}

const DOC_BEGIN: &str = "<!-- cargo xtask bench: begin -->";
const DOC_END: &str = "<!-- cargo xtask bench: end -->";

/// Replaces the measured section of `doc` (between its two markers) with this run: the command,
/// the date, the machine's load and the table.
pub fn write_doc(doc: &Path, figures: &[Figure]) -> Result<(), String> {
    let text = std::fs::read_to_string(doc).map_err(|e| format!("{}: {e}", doc.display()))?;
    let (Some(begin), Some(end)) = (text.find(DOC_BEGIN), text.find(DOC_END)) else {
        return Err(format!(
            "{}: the markers `{DOC_BEGIN}` and `{DOC_END}` are missing",
            doc.display()
        ));
    };
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown date".into());
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|load| {
            load.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let section = format!(
        "{DOC_BEGIN}\n`cargo xtask bench`, {date}, {cores} cores, load average at the end {load} \
         (release builds; written by the command).\n\n{}{DOC_END}",
        table(figures)
    );
    let updated = format!(
        "{}{section}{}",
        &text[..begin],
        &text[end + DOC_END.len()..]
    );
    std::fs::write(doc, updated).map_err(|e| format!("{}: {e}", doc.display()))
}

/// Median spawn-to-exit cost of a trivial process, the unit of the corpus floor.
pub fn spawn_cost() -> Result<Duration, String> {
    let mut samples = Vec::new();
    for _ in 0..40 {
        let started = Instant::now();
        Command::new("true")
            .status()
            .map_err(|e| format!("true: {e}"))?;
        samples.push(started.elapsed());
    }
    Ok(median(samples))
}
