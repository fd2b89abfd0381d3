//! Checker throughput against plain `serde_json::from_str` over the same lines, for
//! `cargo xtask bench`: prints one JSON object with MB/s and frames/s for both.
//! Usage: `checker-throughput [--megabytes N]` (default 100). Best of three rounds each.

use dsh_protocol::frames::RuntimeFrame;
use dsh_protocol::{LineFramer, RunContext, Step, StreamChecker};
use std::time::{Duration, Instant};

const REQUEST_ID: &str = "od-run-bench";

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
        call += 1;
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

fn best_of<F: FnMut() -> usize>(rounds: usize, mut run: F) -> (Duration, usize) {
    let mut best = Duration::MAX;
    let mut count = 0;
    for _ in 0..rounds {
        let started = Instant::now();
        count = run();
        best = best.min(started.elapsed());
    }
    (best, count)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut megabytes = 100;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--megabytes" => {
                megabytes = args.next().and_then(|n| n.parse().ok()).unwrap_or_else(|| {
                    eprintln!("--megabytes takes a whole number");
                    std::process::exit(2)
                })
            }
            other => {
                eprintln!("unknown argument {other}");
                std::process::exit(2)
            }
        }
    }
    let (bytes, frames) = transcript(megabytes);
    let text = std::str::from_utf8(&bytes).expect("generated transcript is UTF-8");

    let (serde_time, serde_frames) = best_of(3, || {
        text.lines()
            .filter(|line| serde_json::from_str::<serde_json::Value>(line).is_ok())
            .count()
    });
    let (checker_time, checker_frames) = best_of(3, || {
        let mut framer = LineFramer::new();
        let mut checker = StreamChecker::new(RunContext::new(REQUEST_ID));
        let mut accepted = 0;
        for chunk in bytes.chunks(64 * 1024) {
            for event in framer.push(chunk) {
                match checker.check_event(&event) {
                    Step::Accepted(_) => accepted += 1,
                    Step::Violation(violation) => {
                        panic!("bench transcript broke a rule: {violation:?}")
                    }
                    _ => {}
                }
            }
        }
        accepted
    });
    assert_eq!(
        serde_frames, frames,
        "serde_json parsed every generated line"
    );
    assert_eq!(
        checker_frames, frames,
        "the checker accepted every generated frame"
    );
    let mb = bytes.len() as f64 / (1024.0 * 1024.0);
    let figures = |time: Duration| {
        serde_json::json!({
            "seconds": time.as_secs_f64(),
            "mb_per_s": mb / time.as_secs_f64(),
            "frames_per_s": frames as f64 / time.as_secs_f64(),
        })
    };
    println!(
        "{}",
        serde_json::json!({
            "megabytes": megabytes,
            "frames": frames,
            "checker": figures(checker_time),
            "serde_json": figures(serde_time),
        })
    );
}
