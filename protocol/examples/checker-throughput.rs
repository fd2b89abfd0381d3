//! Checker throughput against plain `serde_json::from_str` over the same lines, and against Node's
//! `JSON.parse` per line over the same transcript written to a temp file (when `node` is on PATH),
//! for `cargo xtask bench`: prints one JSON object with seconds, MB/s and frames/s for each.
//! Usage: `checker-throughput [--megabytes N] [--no-node] [--checker-only]` (default 100 MB).
//! Best of five interleaved rounds each, wall and on-CPU time (MB/s and frames/s are per CPU
//! second, which a shared machine's load disturbs least); `--checker-only` times just the checker (for a profiler).
//! The checker is timed the way a host runs it: 64 KiB reads through `LineFramer::push_each`
//! (lines borrowed from the read buffer) into `StreamChecker::check_event`, whose accepted frames
//! borrow from the line (`FrameRef`): like `validate`, the bench only checks, so it never converts
//! a frame to an owned `RuntimeFrame`.

use dsh_protocol::frames::RuntimeFrame;
use dsh_protocol::{LineFramer, RunContext, Step, StreamChecker};
use std::time::Instant;

const REQUEST_ID: &str = "od-run-bench";
/// Rounds per contender; each keeps its best.
const ROUNDS: usize = 5;

/// A realistic run: ready, session, then a long mix of content, tool and usage frames.
fn transcript(megabytes: usize) -> (Vec<u8>, usize) {
    let mut out = Vec::with_capacity(megabytes * 1024 * 1024 + 4096);
    let mut frames = 0;
    let push = |out: &mut Vec<u8>, line: String| {
        out.extend_from_slice(line.as_bytes());
        if !line.ends_with('\n') {
            out.push(b'\n');
        }
    };
    push(&mut out, RuntimeFrame::ready("0.1.0").to_line());
    frames += 1;
    push(
        &mut out,
        format!(
            r#"{{"v":1,"type":"session","request_id":"{REQUEST_ID}","session_id":"od-bench","resumed":false}}"#
        ),
    );
    frames += 1;
    let target = megabytes * 1024 * 1024;
    let mut call = 0u64;
    while out.len() < target {
        push(
            &mut out,
            format!(
                r#"{{"v":1,"type":"thinking","request_id":"{REQUEST_ID}","content":"Considering the layout of the hero section and its typography."}}"#
            ),
        );
        push(
            &mut out,
            format!(
                r#"{{"v":1,"type":"text","request_id":"{REQUEST_ID}","content":"I will write the landing page with a warm palette, a bold heading and a call to action.\n"}}"#
            ),
        );
        // Ids repeat after 10,000 calls: a run may announce at most 100,000 distinct ones
        // (interpretation I-17b), and a repeated id is accepted.
        call = call % 10_000 + 1;
        push(
            &mut out,
            format!(
                r#"{{"v":1,"type":"tool_call","request_id":"{REQUEST_ID}","call_id":"call-{call}","name":"write_file","arguments":"{{\"path\":\"index.html\",\"content\":\"<!doctype html><title>Roastery</title>\"}}"}}"#
            ),
        );
        push(
            &mut out,
            format!(
                r#"{{"v":1,"type":"tool_result","request_id":"{REQUEST_ID}","call_id":"call-{call}","name":"write_file","output":"wrote 38 bytes","is_error":false}}"#
            ),
        );
        push(
            &mut out,
            format!(
                r#"{{"v":1,"type":"usage","request_id":"{REQUEST_ID}","provider":"deepseek-official","model":"deepseek-chat","input_tokens":1200,"output_tokens":340}}"#
            ),
        );
        frames += 5;
    }
    push(
        &mut out,
        format!(
            r#"{{"v":1,"type":"result","request_id":"{REQUEST_ID}","status":"completed","session_id":"od-bench","resume_rejected":false}}"#
        ),
    );
    frames += 1;
    (out, frames)
}

/// Wall and on-CPU time of one run (`/proc/thread-self/schedstat`; on-CPU time equals wall time
/// where that file is missing). On-CPU time leaves out the waits for a core on a shared machine.
#[derive(Clone, Copy)]
struct Times {
    wall: f64,
    cpu: f64,
}

impl Times {
    const NONE: Times = Times {
        wall: f64::MAX,
        cpu: f64::MAX,
    };

    fn min(self, other: Times) -> Times {
        Times {
            wall: self.wall.min(other.wall),
            cpu: self.cpu.min(other.cpu),
        }
    }
}

/// Nanoseconds this thread has run on a CPU, if the kernel says.
fn on_cpu_nanos() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

fn timed<F: FnMut() -> usize>(mut run: F) -> (Times, usize) {
    let cpu_before = on_cpu_nanos();
    let started = Instant::now();
    let count = run();
    let wall = started.elapsed().as_secs_f64();
    let cpu = match (cpu_before, on_cpu_nanos()) {
        (Some(before), Some(after)) => (after - before) as f64 / 1e9,
        _ => wall,
    };
    (Times { wall, cpu }, count)
}

/// Node's `JSON.parse` on every line of the file (decoding and splitting included), best of two
/// rounds in one process, timed inside Node so its start-up is not counted; on-CPU time is the
/// whole process's (its garbage collector's threads included).
const NODE_SCRIPT: &str = r#"
const buf = require('fs').readFileSync(process.argv[1]);
let wall = Infinity, cpu = Infinity, frames = 0;
for (let round = 0; round < 2; round++) {
  const started = process.hrtime.bigint();
  const cpuStarted = process.cpuUsage();
  const text = buf.toString('utf8');
  frames = 0;
  for (const line of text.split('\n')) if (line.length) { JSON.parse(line); frames++; }
  const used = process.cpuUsage(cpuStarted);
  wall = Math.min(wall, Number(process.hrtime.bigint() - started) / 1e9);
  cpu = Math.min(cpu, (used.user + used.system) / 1e6);
}
console.log(JSON.stringify({ wall, cpu, frames }));
"#;

/// One Node process over the transcript file `path`: its times, or why it was not measured.
fn node_times(path: &std::path::Path, frames: usize) -> Result<Times, String> {
    let output = std::process::Command::new("node")
        .args(["-e", NODE_SCRIPT])
        .arg(path)
        .output()
        .map_err(|e| format!("node: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "node failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let figures: serde_json::Value =
        serde_json::from_slice(&output.stdout).map_err(|e| format!("node's output: {e}"))?;
    if figures["frames"].as_u64() != Some(frames as u64) {
        return Err(format!(
            "node parsed {} lines, not {frames}",
            figures["frames"]
        ));
    }
    match (figures["wall"].as_f64(), figures["cpu"].as_f64()) {
        (Some(wall), Some(cpu)) => Ok(Times { wall, cpu }),
        _ => Err("node reported no time".into()),
    }
}

/// The transcript in a temp file for Node, removed on drop.
struct TempTranscript(std::path::PathBuf);

impl TempTranscript {
    fn write(bytes: &[u8]) -> Result<Self, String> {
        let path =
            std::env::temp_dir().join(format!("checker-throughput-{}.jsonl", std::process::id()));
        std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(TempTranscript(path))
    }
}

impl Drop for TempTranscript {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The strict path over `bytes` in 64 KiB reads; the number of accepted frames.
fn check_transcript(bytes: &[u8]) -> usize {
    let mut framer = LineFramer::new();
    let mut checker = StreamChecker::new(RunContext::new(REQUEST_ID));
    let mut accepted = 0;
    for chunk in bytes.chunks(64 * 1024) {
        framer.push_each(chunk, |event| match checker.check_event(&event) {
            Step::Accepted(_) => accepted += 1,
            Step::Violation(violation) => panic!("bench transcript broke a rule: {violation:?}"),
            _ => {}
        });
    }
    accepted
}

/// The command line: `--megabytes N`, `--no-node`, `--checker-only`.
struct Args {
    megabytes: usize,
    node: bool,
    checker_only: bool,
}

fn parse_args() -> Args {
    let mut args = std::env::args().skip(1);
    let mut parsed = Args {
        megabytes: 100,
        node: true,
        checker_only: false,
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--megabytes" => {
                parsed.megabytes = args.next().and_then(|n| n.parse().ok()).unwrap_or_else(|| {
                    eprintln!("--megabytes takes a whole number");
                    std::process::exit(2)
                })
            }
            "--no-node" => parsed.node = false,
            "--checker-only" => parsed.checker_only = true,
            other => {
                eprintln!("unknown argument {other}");
                std::process::exit(2)
            }
        }
    }
    parsed
}

/// The best round of each contender.
struct Best {
    serde: Times,
    checker: Times,
    node: Result<Times, String>,
}

/// The three contenders take turns, round after round, so a burst of load on this shared
/// machine hurts each about equally; each keeps its best round.
fn race(bytes: &[u8], frames: usize, node: bool) -> Best {
    let text = std::str::from_utf8(bytes).expect("generated transcript is UTF-8");
    let file = if node {
        TempTranscript::write(bytes).map_err(|why| why.to_string())
    } else {
        Err("--no-node".to_string())
    };
    let mut node_best: Result<Times, String> = Err("not measured".into());
    let (mut serde_best, mut checker_best) = (Times::NONE, Times::NONE);
    for _ in 0..ROUNDS {
        let (times, count) = timed(|| {
            text.lines()
                .filter(|line| serde_json::from_str::<serde_json::Value>(line).is_ok())
                .count()
        });
        assert_eq!(count, frames, "serde_json parsed every generated line");
        serde_best = serde_best.min(times);
        let (times, count) = timed(|| check_transcript(bytes));
        assert_eq!(count, frames, "the checker accepted every generated frame");
        checker_best = checker_best.min(times);
        node_best = match (&file, node_best) {
            (Err(why), _) => Err(why.clone()),
            (Ok(file), Ok(best)) => node_times(&file.0, frames).map(|now| now.min(best)),
            (Ok(file), Err(_)) => node_times(&file.0, frames),
        };
    }
    Best {
        serde: serde_best,
        checker: checker_best,
        node: node_best,
    }
}

fn main() {
    let args = parse_args();
    let megabytes = args.megabytes;
    if args.checker_only {
        let (bytes, _) = transcript(megabytes);
        let (times, _) = timed(|| check_transcript(&bytes));
        println!(
            "{}",
            serde_json::json!({ "checker": { "seconds": times.wall } })
        );
        return;
    }
    let (bytes, frames) = transcript(megabytes);
    let best = race(&bytes, frames, args.node);
    let mb = bytes.len() as f64 / (1024.0 * 1024.0);
    let figures = |times: Times| {
        serde_json::json!({
            "seconds": times.wall,
            "cpu_seconds": times.cpu,
            "mb_per_s": mb / times.cpu,
            "frames_per_s": frames as f64 / times.cpu,
        })
    };
    let node = match best.node {
        Ok(seconds) => figures(seconds),
        Err(why) => serde_json::json!({ "skipped": why }),
    };
    println!(
        "{}",
        serde_json::json!({
            "megabytes": megabytes,
            "frames": frames,
            "rounds": ROUNDS,
            "checker": figures(best.checker),
            "serde_json": figures(best.serde),
            "node": node,
        })
    );
}
