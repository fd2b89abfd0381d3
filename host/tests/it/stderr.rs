//! Stderr hygiene: a flood is drained concurrently (a host that does not would deadlock) and kept
//! bounded; the prompt and credentials never survive into what the host keeps.

use crate::support;

use dsh_host::stderr_capture::KEPT_STDERR_BYTES;
use dsh_protocol::frames::Status;
use serde_json::json;
use support::{run, World, CANARY};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_16_mib_stderr_flood_before_the_result_does_not_deadlock() {
    let world = World::new(json!({
        "stdio": [[{"ready": {}}, {"read_execute": {}}, {"session": {}},
                   {"stderr_flood": {"bytes": 16 * 1024 * 1024}}, {"text": "done"},
                   {"result": {"status": "completed"}}]]
    }));
    let (outcome, _) = run(&world.host(), &world.request("c1", "Create a landing page")).await;
    assert_eq!(
        outcome.status,
        Status::Completed,
        "{:?}",
        (outcome.status, &outcome.code, &outcome.message)
    );
    assert!(
        outcome.stderr.len() <= KEPT_STDERR_BYTES,
        "kept {} bytes",
        outcome.stderr.len()
    );
    assert!(!outcome.stderr.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_and_credential_never_reach_the_kept_stderr() {
    let world = World::new(json!({
        "stdio": [[{"ready": {}}, {"read_execute": {}}, {"stderr": "starting turn\n"},
                   {"stderr_prompt": {}}, {"stderr_env": "DEEPSEEK_API_KEY"}, {"session": {}},
                   {"result": {"status": "completed"}}]]
    }));
    let prompt = "Create a landing page for Marta's bakery with a sourdough hero";
    let (outcome, _) = run(&world.host(), &world.request("c1", prompt)).await;
    assert_eq!(outcome.status, Status::Completed, "{outcome:?}");
    assert!(
        outcome.stderr.contains("starting turn"),
        "{:?}",
        outcome.stderr
    );
    assert!(
        outcome.stderr.contains("[redacted]"),
        "{:?}",
        outcome.stderr
    );
    assert!(
        !outcome.stderr.contains(prompt),
        "prompt kept: {:?}",
        outcome.stderr
    );
    assert!(
        !outcome.stderr.contains("OD-BOOTSTRAP"),
        "bootstrap kept: {:?}",
        outcome.stderr
    );
    assert!(
        !outcome.stderr.contains(CANARY),
        "credential kept: {:?}",
        outcome.stderr
    );
    assert!(world
        .logs()
        .iter()
        .all(|line| !line.contains(prompt) && !line.contains(CANARY)));
}
