//! Runs against fake-dsh: the two-process resume, key mismatches, rejected resumes, strictness
//! failures and event normalization.

use crate::support;

use dsh_protocol::frames::Status;
use serde_json::json;
use support::{kinds, read_project_file, run, World};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_resume_the_same_session_and_edit_the_same_file() {
    let world = World::new(json!({}));
    let host = world.host();
    let (first, events) = run(&host, &world.request("c1", "Create a landing page")).await;
    assert_eq!(first.status, Status::Completed, "{first:?}");
    assert!(!first.resumed);
    let session = first
        .session_id
        .clone()
        .unwrap_or_else(|| panic!("no session: {first:?}"));
    assert_eq!(kinds(&events).first(), Some(&"status"));
    assert!(
        kinds(&events).contains(&"tool_use") && kinds(&events).contains(&"usage"),
        "{events:?}"
    );
    let created = read_project_file(&world, "index.html");
    assert!(!created.is_empty(), "the first turn wrote no index.html");

    // A second host value: nothing survives in memory, only the store under the data dir.
    let host = world.host();
    let (second, _) = run(&host, &world.request("c1", "Make the header blue")).await;
    assert_eq!(second.status, Status::Completed, "{second:?}");
    assert!(second.resumed);
    assert_eq!(second.session_id.as_deref(), Some(session.as_str()));
    assert_ne!(
        read_project_file(&world, "index.html"),
        created,
        "the resumed turn did not edit the file"
    );

    assert_eq!(world.starts("stdio"), 2, "one process per run");
    let first_execute = &world.commands(0)[0];
    let second_execute = &world.commands(1)[0];
    assert!(first_execute.get("resume_session_id").is_none());
    assert!(first_execute["prompt"]
        .as_str()
        .is_some_and(|p| p.starts_with("OD-BOOTSTRAP") && p.ends_with("Create a landing page")));
    assert_eq!(second_execute["resume_session_id"], json!(session));
    assert_eq!(second_execute["prompt"], json!("Make the header blue"));
    assert_eq!(second_execute["mcp_servers"], json!([]));
    let canonical = std::fs::canonicalize(world.project()).unwrap_or_default();
    assert_eq!(second_execute["cwd"], json!(canonical.to_string_lossy()));
    assert!(world.live_processes().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_model_route_or_cwd_starts_a_new_session_with_bootstrap() {
    let world = World::new(json!({}));
    let host = world.host();
    let (first, _) = run(&host, &world.request("c1", "Create a landing page")).await;
    assert_eq!(first.status, Status::Completed, "{first:?}");

    let mut other_model = world.request("c1", "Again");
    if let Some(model) = other_model.model.as_mut() {
        model.id = "deepseek-reasoner".to_string();
    }
    let (second, _) = run(&host, &other_model).await;
    assert_eq!(second.status, Status::Completed, "{second:?}");
    assert!(!second.resumed);
    assert_ne!(second.session_id, first.session_id);
    let execute = &world.commands(1)[0];
    assert!(execute.get("resume_session_id").is_none());
    assert!(execute["prompt"]
        .as_str()
        .is_some_and(|p| p.starts_with("OD-BOOTSTRAP")));
    assert!(
        world.logs().iter().any(|line| line.contains("model")),
        "{:?}",
        world.logs()
    );

    let elsewhere = world.path("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap_or_else(|error| panic!("mkdir: {error}"));
    let mut moved = other_model.clone();
    moved.cwd = elsewhere;
    let (third, _) = run(&host, &moved).await;
    assert_eq!(third.status, Status::Completed, "{third:?}");
    assert!(!third.resumed);
    assert!(world.commands(2)[0].get("resume_session_id").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_compatibility_generation_starts_a_new_session() {
    let world = World::new(json!({
        "stdio": [[{"ready": {}}, {"read_execute": {}}, {"agent": {}}], [{"ready": {"patch": {"compatibility_generation": "g2"}}}, {"read_execute": {}}, {"agent": {}}]]
    }));
    let host = world.host();
    let (first, _) = run(&host, &world.request("c1", "Create a landing page")).await;
    assert_eq!(first.status, Status::Completed, "{first:?}");
    let (second, _) = run(&host, &world.request("c1", "Again")).await;
    assert_eq!(second.status, Status::Completed, "{second:?}");
    assert!(!second.resumed);
    assert!(world.commands(1)[0].get("resume_session_id").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_resume_fails_and_the_next_run_starts_new_with_bootstrap() {
    let world = World::new(json!({}));
    let host = world.host();
    let (first, _) = run(&host, &world.request("c1", "Create a landing page")).await;
    let session = first
        .session_id
        .clone()
        .unwrap_or_else(|| panic!("no session: {first:?}"));
    world.delete_session_record(&session);

    let (second, events) = run(&host, &world.request("c1", "Make it blue")).await;
    assert_eq!(second.status, Status::Failed, "{second:?}");
    assert_eq!(second.code.as_deref(), Some("DSH_PROFILE_RESUME_REJECTED"));
    assert_eq!(second.session_id, None, "the mapping must be forgotten");
    assert_eq!(kinds(&events).last(), Some(&"error"));
    assert_eq!(world.commands(1)[0]["resume_session_id"], json!(session));
    assert_eq!(
        world.starts("stdio"),
        2,
        "a rejected resume is never retried silently"
    );

    let (third, _) = run(&host, &world.request("c1", "Make it blue")).await;
    assert_eq!(third.status, Status::Completed, "{third:?}");
    assert!(!third.resumed);
    let execute = &world.commands(2)[0];
    assert!(execute.get("resume_session_id").is_none());
    assert!(execute["prompt"]
        .as_str()
        .is_some_and(|p| p.starts_with("OD-BOOTSTRAP")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_mapping_reads_as_none_with_a_warning() {
    let world = World::new(json!({}));
    let host = world.host();
    let (first, _) = run(&host, &world.request("c1", "Create a landing page")).await;
    assert_eq!(first.status, Status::Completed);
    let store = dsh_host::session_store::SessionStore::new(&world.data_dir());
    std::fs::write(store.file_of("c1"), b"{\"v\":1,\"sess")
        .unwrap_or_else(|error| panic!("corrupt: {error}"));
    let (second, _) = run(&host, &world.request("c1", "Again")).await;
    assert_eq!(second.status, Status::Completed, "{second:?}");
    assert!(!second.resumed);
    assert!(
        world.logs().iter().any(|line| line.contains("corrupt")),
        "{:?}",
        world.logs()
    );
    assert_eq!(
        store.load("c1").mapping.map(|m| m.session_id),
        second.session_id
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eof_without_result_fails_with_missing_result() {
    let world = World::new(json!({
        "stdio": [[{"ready": {}}, {"read_execute": {}}, {"session": {}}, {"text": "done!"}, {"exit": 0}]]
    }));
    let (outcome, _) = run(&world.host(), &world.request("c1", "Create a landing page")).await;
    assert_eq!(outcome.status, Status::Failed);
    assert_eq!(outcome.code.as_deref(), Some("DSH_PROFILE_MISSING_RESULT"));
    // The session frame was validated, so the handle is kept.
    assert!(outcome.session_id.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_before_session_fails_the_run() {
    let world = World::new(json!({
        "stdio": [[{"ready": {}}, {"read_execute": {}}, {"text": "early"}, {"session": {}}, {"result": {"status": "completed"}}]]
    }));
    let (outcome, events) = run(&world.host(), &world.request("c1", "Create a landing page")).await;
    assert_eq!(
        outcome.code.as_deref(),
        Some("DSH_PROFILE_CONTENT_BEFORE_SESSION"),
        "{outcome:?}"
    );
    assert_eq!(kinds(&events), ["error"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_result_fails_the_run() {
    let world = World::new(json!({
        "stdio": [[{"ready": {}}, {"read_execute": {}}, {"session": {}},
                   {"result": {"status": "completed"}}, {"result": {"status": "failed"}}]]
    }));
    let (outcome, _) = run(&world.host(), &world.request("c1", "Create a landing page")).await;
    assert_eq!(
        outcome.code.as_deref(),
        Some("DSH_PROFILE_DUPLICATE_RESULT"),
        "{outcome:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_frames_are_counted_and_never_leak() {
    let world = World::new(json!({
        "stdio": [[{"ready": {}}, {"read_execute": {}}, {"session": {}},
                   {"frame": {"v": 1, "type": "text", "request_id": "{{foreign_request_id}}", "content": "not yours"}},
                   {"text": "yours"}, {"result": {"status": "completed"}}]]
    }));
    let (outcome, events) = run(&world.host(), &world.request("c1", "Create a landing page")).await;
    assert_eq!(outcome.status, Status::Completed, "{outcome:?}");
    assert_eq!(outcome.foreign_frames, 1);
    assert_eq!(kinds(&events), ["status", "text_delta"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_is_opened_and_closed_and_failed_results_carry_the_runtime_code() {
    let world = World::new(json!({
        "stdio": [[{"ready": {}}, {"read_execute": {}}, {"session": {}}, {"thinking": "hmm"}, {"thinking": "ok"},
                   {"text": "answer"},
                   {"result": {"status": "failed", "error": {"code": "PROVIDER_DOWN", "message": "503"}}}]]
    }));
    let (outcome, events) = run(&world.host(), &world.request("c1", "Create a landing page")).await;
    assert_eq!(
        kinds(&events),
        [
            "status",
            "thinking_start",
            "thinking_delta",
            "thinking_delta",
            "thinking_end",
            "text_delta",
            "error"
        ]
    );
    assert_eq!(outcome.code.as_deref(), Some("DSH_PROFILE_RUN_FAILED"));
    assert!(
        outcome
            .message
            .as_deref()
            .is_some_and(|m| m.contains("PROVIDER_DOWN")),
        "{outcome:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_answered_with_another_session_fails_with_resume_mismatch() {
    let world = World::new(json!({
        "stdio": [[{"ready": {}}, {"read_execute": {}}, {"agent": {}}], [{"ready": {}}, {"read_execute": {}}, {"session": {"session_id": "od-other", "resumed": true}},
                       {"result": {"status": "completed", "session_id": "od-other"}}]]
    }));
    let host = world.host();
    let (first, _) = run(&host, &world.request("c1", "Create a landing page")).await;
    assert_eq!(first.status, Status::Completed);
    let (second, _) = run(&host, &world.request("c1", "Again")).await;
    assert_eq!(
        second.code.as_deref(),
        Some("DSH_PROFILE_RESUME_MISMATCH"),
        "{second:?}"
    );
    assert_eq!(
        second.session_id, first.session_id,
        "a mismatching answer does not replace the mapping"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_that_never_sends_ready_times_out() {
    let world = World::new(json!({"stdio": [[{"sleep_ms": 5000}]]}));
    let mut config = world.config();
    config.run_bounds.ready = std::time::Duration::from_millis(300);
    let host = dsh_host::Host::new(config);
    let (outcome, _) = run(&host, &world.request("c1", "Create a landing page")).await;
    assert_eq!(
        outcome.code.as_deref(),
        Some("DSH_PROFILE_READY_TIMEOUT"),
        "{outcome:?}"
    );
    assert!(world.live_processes().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_cwd_fails_to_spawn_without_starting_dsh() {
    let world = World::new(json!({}));
    let mut request = world.request("c1", "Create a landing page");
    request.cwd = world.path("does-not-exist");
    let (outcome, _) = run(&world.host(), &request).await;
    assert_eq!(
        outcome.code.as_deref(),
        Some("DSH_PROFILE_SPAWN_FAILED"),
        "{outcome:?}"
    );
    assert_eq!(world.starts("stdio"), 0);
}
