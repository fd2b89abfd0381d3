//! Cancellation (spec 10): the protocol cancel honoured, a runtime that ignores it and has a
//! grandchild ignoring SIGTERM (nothing of the tree survives), and the session handle kept.

use crate::support;

use dsh_protocol::frames::Status;
use serde_json::{json, Value};
use support::{run, run_cancelling_on, World};

/// The journal events of one process, as `"command:cancel"`, `"stdin_closed"`, `"signal:SIGTERM"`...
fn timeline(entries: &[Value]) -> Vec<String> {
    entries
        .iter()
        .filter_map(|entry| match entry["event"].as_str()? {
            "command" => Some(format!(
                "command:{}",
                entry["command"]["type"].as_str().unwrap_or("raw")
            )),
            "signal" => Some(format!(
                "signal:{}",
                entry["signal"].as_str().unwrap_or("?")
            )),
            other => Some(other.to_string()),
        })
        .collect()
}

fn position(timeline: &[String], item: &str) -> Option<usize> {
    timeline.iter().position(|entry| entry == item)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_is_honoured_and_the_session_kept_for_the_next_run() {
    let world = World::new(json!({
        "stdio": [[{"ready": {}}, {"read_execute": {}}, {"session": {}}, {"text": "working"},
                   {"wait_cancel": {"timeout_ms": 10000}}, {"result": {"status": "cancelled"}}]]
    }));
    let host = world.host();
    let (outcome, _) = run_cancelling_on(
        &host,
        &world.request("c1", "Create a landing page"),
        "text_delta",
    )
    .await;
    assert_eq!(outcome.status, Status::Cancelled, "{outcome:?}");
    let session = outcome
        .session_id
        .clone()
        .unwrap_or_else(|| panic!("a validated session is kept: {outcome:?}"));
    let events = timeline(&world.stdio_process(0));
    assert!(position(&events, "command:cancel").is_some(), "{events:?}");
    assert!(
        position(&events, "signal:SIGTERM").is_none(),
        "a cooperative runtime needs no signal: {events:?}"
    );
    assert!(world.live_processes().is_empty());

    let (next, _) = run(&host, &world.request("c1", "Continue")).await;
    assert_eq!(next.status, Status::Completed, "{next:?}");
    assert!(next.resumed);
    assert_eq!(next.session_id.as_deref(), Some(session.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ignored_cancel_escalates_and_no_process_of_the_tree_survives() {
    let world = World::new(json!({
        "stdio": [[{"ready": {}}, {"read_execute": {}}, {"session": {}},
                   {"spawn_child": {"ignore_sigterm": true}}, {"ignore_sigterm": true},
                   {"text": "working"}, {"hang": {}}]]
    }));
    let host = world.host();
    let (outcome, _) = run_cancelling_on(
        &host,
        &world.request("c1", "Create a landing page"),
        "text_delta",
    )
    .await;
    assert_eq!(
        outcome.status,
        Status::Cancelled,
        "a cancelled run reports cancelled even when killed: {outcome:?}"
    );
    let events = timeline(&world.stdio_process(0));
    let cancel = position(&events, "command:cancel");
    let closed = position(&events, "stdin_closed");
    let term = position(&events, "signal:SIGTERM");
    assert!(
        cancel.is_some() && cancel < closed && closed < term,
        "spec 10 order: {events:?}"
    );
    let grandchild = world
        .journal()
        .iter()
        .find(|entry| entry["event"] == "child")
        .and_then(|entry| entry["child_pid"].as_u64());
    let grandchild = grandchild.unwrap_or_else(|| panic!("the scenario spawned no grandchild"));
    assert!(
        !support::is_alive_fake_dsh(grandchild),
        "the SIGTERM-ignoring grandchild survived"
    );
    assert!(
        world.live_processes().is_empty(),
        "alive: {:?}",
        world.live_processes()
    );
    assert!(
        outcome.session_id.is_some(),
        "the session frame was validated before the cancel"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_before_ready_ends_the_run_without_execute() {
    let world = World::new(json!({"stdio": [[{"sleep_ms": 3000}, {"ready": {}}]]}));
    let host = world.host();
    let (cancel, signal) = tokio::sync::watch::channel(true);
    let mut emit = |_event: dsh_host::events::Event| {};
    let outcome = host
        .run(
            &world.request("c1", "Create a landing page"),
            signal,
            &mut emit,
        )
        .await;
    drop(cancel);
    assert_eq!(outcome.status, Status::Cancelled, "{outcome:?}");
    assert!(world.commands(0).is_empty(), "no execute after a cancel");
    assert!(world.live_processes().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_that_hangs_after_its_result_is_reaped() {
    let world = World::new(json!({
        "stdio": [[{"ready": {}}, {"read_execute": {}}, {"session": {}}, {"spawn_child": {"ignore_sigterm": true}},
                   {"result": {"status": "completed"}}, {"ignore_sigterm": true}, {"hang": {}}]]
    }));
    let (outcome, _) = run(&world.host(), &world.request("c1", "Create a landing page")).await;
    assert_eq!(outcome.status, Status::Completed, "{outcome:?}");
    assert!(
        world.live_processes().is_empty(),
        "alive: {:?}",
        world.live_processes()
    );
}
