//! Criterion micro benches: parsing one frame of each common kind with the checker's parser
//! (`RuntimeFrame::parse_line`) against `serde_json::from_slice::<Value>`, and checking a short run.
//! `cargo bench -p dsh-protocol`; the 100 MB whole-transcript figure is `cargo xtask bench`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use dsh_protocol::frames::RuntimeFrame;
use dsh_protocol::{RunContext, StreamChecker};
use std::hint::black_box;

const FRAMES: [(&str, &str); 4] = [
    (
        "text",
        r#"{"v":1,"type":"text","request_id":"od-run-1","content":"I will write the landing page with a warm palette and a bold heading."}"#,
    ),
    (
        "tool_call",
        r#"{"v":1,"type":"tool_call","request_id":"od-run-1","call_id":"call-7","name":"write_file","arguments":"{\"path\":\"index.html\",\"content\":\"<!doctype html><title>Roastery</title>\"}"}"#,
    ),
    (
        "usage",
        r#"{"v":1,"type":"usage","request_id":"od-run-1","provider":"deepseek-official","model":"deepseek-chat","input_tokens":1200,"output_tokens":340,"cache_read_tokens":800}"#,
    ),
    (
        "result",
        r#"{"v":1,"type":"result","request_id":"od-run-1","status":"completed","session_id":"od-1","resume_rejected":false}"#,
    ),
];

fn parse(c: &mut Criterion) {
    let mut group = c.benchmark_group("parse");
    for (name, line) in FRAMES {
        group.throughput(Throughput::Bytes(line.len() as u64));
        group.bench_with_input(BenchmarkId::new("checker", name), line, |b, line| {
            b.iter(|| RuntimeFrame::parse_line(black_box(line.as_bytes())).is_ok())
        });
        group.bench_with_input(BenchmarkId::new("serde_json", name), line, |b, line| {
            b.iter(|| {
                serde_json::from_slice::<serde_json::Value>(black_box(line.as_bytes())).is_ok()
            })
        });
    }
    group.finish();
}

fn run(c: &mut Criterion) {
    let lines = [
        RuntimeFrame::ready("0.1.0").to_line(),
        r#"{"v":1,"type":"session","request_id":"od-run-1","session_id":"od-1","resumed":false}"#.to_string(),
        FRAMES[0].1.to_string(),
        FRAMES[1].1.to_string(),
        r#"{"v":1,"type":"tool_result","request_id":"od-run-1","call_id":"call-7","name":"write_file","output":"ok","is_error":false}"#.to_string(),
        FRAMES[2].1.to_string(),
        FRAMES[3].1.to_string(),
    ];
    c.bench_function("check a seven-frame run", |b| {
        b.iter(|| {
            let mut checker = StreamChecker::new(RunContext::new("od-run-1"));
            for (index, line) in lines.iter().enumerate() {
                black_box(checker.check_line(index + 1, line.trim_end().as_bytes()));
            }
            black_box(checker.finish())
        })
    });
}

criterion_group!(benches, parse, run);
criterion_main!(benches);
