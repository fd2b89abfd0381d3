//! Every mutant of the `mutants` feature (the host's own test builds switch it on) really switches
//! on its bug: for each, a scenario the correct host handles and the mutant visibly gets wrong (the
//! kit's corpus must catch the same difference).

use crate::support;

use dsh_host::mutants::{Mutant, Mutants};
use dsh_host::Host;
use dsh_protocol::frames::Status;
use serde_json::{json, Value};
use support::{run, run_cancelling_on, World};

fn host_with(world: &World, mutant: Option<Mutant>) -> Host {
    let mutants = mutant.map_or_else(Mutants::default, |mutant| Mutants::default().with(mutant));
    Host::new(world.config()).with_mutants(mutants)
}

/// Run one turn of `scenario` with the correct host and with `mutant`, in separate worlds.
async fn both(scenario: Value, mutant: Mutant) -> (dsh_host::Outcome, dsh_host::Outcome) {
    let correct_world = World::new(scenario.clone());
    let (correct, _) = run(
        &host_with(&correct_world, None),
        &correct_world.request("c1", "Create a page"),
    )
    .await;
    let mutant_world = World::new(scenario);
    let (mutated, _) = run(
        &host_with(&mutant_world, Some(mutant)),
        &mutant_world.request("c1", "Create a page"),
    )
    .await;
    (correct, mutated)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eof_is_success() {
    let scenario = json!({"stdio": [[{"ready": {}}, {"read_execute": {}}, {"session": {}}, {"text": "hi"}, {"exit": 0}]]});
    let (correct, mutated) = both(scenario, Mutant::EofIsSuccess).await;
    assert_eq!(correct.code.as_deref(), Some("DSH_PROFILE_MISSING_RESULT"));
    assert_eq!(mutated.status, Status::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_second_result() {
    let scenario = json!({"stdio": [[{"ready": {}}, {"read_execute": {}}, {"session": {}},
        {"result": {"status": "completed"}}, {"result": {"status": "failed"}}]]});
    let (correct, mutated) = both(scenario, Mutant::AcceptSecondResult).await;
    assert_eq!(
        correct.code.as_deref(),
        Some("DSH_PROFILE_DUPLICATE_RESULT")
    );
    assert_eq!(
        mutated.code.as_deref(),
        Some("DSH_PROFILE_RUN_FAILED"),
        "{mutated:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_frame_leaks() {
    let world = World::new(
        json!({"stdio": [[{"ready": {}}, {"read_execute": {}}, {"session": {}},
        {"frame": {"v": 1, "type": "text", "request_id": "{{foreign_request_id}}", "content": "not yours"}},
        {"result": {"status": "completed"}}]]}),
    );
    let (_, events) = run(
        &host_with(&world, Some(Mutant::ForeignFrameLeaks)),
        &world.request("c1", "p"),
    )
    .await;
    assert!(
        support::kinds(&events).contains(&"text_delta"),
        "{events:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_under_changed_cwd() {
    let world = World::new(json!({}));
    let host = host_with(&world, Some(Mutant::ResumeUnderChangedCwd));
    run(&host, &world.request("c1", "first")).await;
    let elsewhere = world.path("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap_or_else(|e| panic!("mkdir: {e}"));
    let mut moved = world.request("c1", "second");
    moved.cwd = elsewhere;
    let (second, _) = run(&host, &moved).await;
    assert!(second.resumed, "{second:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_resume_new_session() {
    let world = World::new(json!({}));
    let host = host_with(&world, Some(Mutant::MissingResumeNewSession));
    let (first, _) = run(&host, &world.request("c1", "first")).await;
    let session = first.session_id.unwrap_or_default();
    world.delete_session_record(&session);
    let (second, _) = run(&host, &world.request("c1", "second")).await;
    assert_eq!(second.status, Status::Completed, "{second:?}");
    assert_eq!(world.starts("stdio"), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_stderr_drain() {
    let world = World::new(
        json!({"stdio": [[{"ready": {}}, {"read_execute": {}}, {"session": {}},
        {"stderr_flood": {"bytes": 16 * 1024 * 1024}}, {"result": {"status": "completed"}}]]}),
    );
    let mut config = world.config();
    config.run_bounds.run = std::time::Duration::from_secs(2);
    let host = Host::new(config).with_mutants(Mutants::default().with(Mutant::NoStderrDrain));
    let (outcome, _) = run(&host, &world.request("c1", "p")).await;
    assert_eq!(
        outcome.code.as_deref(),
        Some("DSH_PROFILE_RUN_TIMEOUT"),
        "{outcome:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_direct_child_only() {
    let world = World::new(
        json!({"stdio": [[{"ready": {}}, {"read_execute": {}}, {"session": {}},
        {"spawn_child": {"ignore_sigterm": true}}, {"text": "working"}, {"hang": {}}]]}),
    );
    let host = host_with(&world, Some(Mutant::KillDirectChildOnly));
    run_cancelling_on(&host, &world.request("c1", "p"), "text_delta").await;
    let survivors = world.live_processes();
    for pid in &survivors {
        // Clean up what the mutant left behind.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(
        !survivors.is_empty(),
        "the mutant should leave the grandchild behind"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_without_cancel() {
    let world = World::new(
        json!({"stdio": [[{"ready": {}}, {"read_execute": {}}, {"session": {}},
        {"text": "working"}, {"wait_cancel": {"timeout_ms": 10000}}, {"result": {"status": "cancelled"}}]]}),
    );
    let host = host_with(&world, Some(Mutant::SigkillWithoutCancel));
    let (outcome, _) = run_cancelling_on(&host, &world.request("c1", "p"), "text_delta").await;
    assert_eq!(outcome.status, Status::Cancelled);
    assert!(world
        .commands(0)
        .iter()
        .all(|command| command["type"] != "cancel"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_prompt_to_stderr() {
    let world = World::new(json!({}));
    run(
        &host_with(&world, Some(Mutant::LogPromptToStderr)),
        &world.request("c1", "secret plan for the page"),
    )
    .await;
    assert!(world
        .logs()
        .iter()
        .any(|line| line.contains("secret plan for the page")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_probe_gate() {
    let world = World::without_profile(json!({"profile": "missing"}));
    assert!(!host_with(&world, None).discover().await.available());
    assert!(host_with(&world, Some(Mutant::SkipProbeGate))
        .discover()
        .await
        .available());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_hash_check() {
    let world = World::without_profile(json!({}));
    let tarball = world.path("bundle.tgz");
    std::fs::write(&tarball, b"bytes").unwrap_or_else(|e| panic!("tarball: {e}"));
    let manifest = world.path("manifest.json");
    let body = json!({"package": "@open-design/dsh-runtime", "version": "0.1.0", "sha256": "0".repeat(64), "file": "bundle.tgz"});
    std::fs::write(&manifest, body.to_string()).unwrap_or_else(|e| panic!("manifest: {e}"));
    assert!(host_with(&world, None)
        .setup(&tarball, &manifest)
        .await
        .is_err());
    assert!(host_with(&world, Some(Mutant::SkipHashCheck))
        .setup(&tarball, &manifest)
        .await
        .is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_session_after_text() {
    let scenario = json!({"stdio": [[{"ready": {}}, {"read_execute": {}}, {"text": "early"}, {"session": {}},
        {"result": {"status": "completed"}}]]});
    let (correct, mutated) = both(scenario, Mutant::AcceptSessionAfterText).await;
    assert_eq!(
        correct.code.as_deref(),
        Some("DSH_PROFILE_CONTENT_BEFORE_SESSION")
    );
    assert_eq!(mutated.status, Status::Completed, "{mutated:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_resume_mismatch() {
    let world = World::new(
        json!({"stdio": [[{"ready": {}}, {"read_execute": {}}, {"agent": {}}],
        [{"ready": {}}, {"read_execute": {}}, {"session": {"session_id": "od-other", "resumed": false}},
         {"result": {"status": "completed", "session_id": "od-other"}}]]}),
    );
    let host = host_with(&world, Some(Mutant::IgnoreResumeMismatch));
    run(&host, &world.request("c1", "first")).await;
    let (second, _) = run(&host, &world.request("c1", "second")).await;
    assert_eq!(second.status, Status::Completed, "{second:?}");
    assert_eq!(second.session_id.as_deref(), Some("od-other"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_bootstrap_on_new_session() {
    let world = World::new(json!({}));
    run(
        &host_with(&world, Some(Mutant::NoBootstrapOnNewSession)),
        &world.request("c1", "first"),
    )
    .await;
    assert_eq!(world.commands(0)[0]["prompt"], json!("first"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_before_ready() {
    let scenario =
        json!({"stdio": [[{"sleep_ms": 300}, {"ready": {}}, {"read_execute": {}}, {"agent": {}}]]});
    let pending = |mutant: Option<Mutant>| {
        let world = World::new(scenario.clone());
        let host = host_with(&world, mutant);
        async move {
            run(&host, &world.request("c1", "Create a page")).await;
            world
                .stdio_process(0)
                .iter()
                .find(|entry| entry["frame_type"] == "ready")
                .map(|ready| ready["stdin_pending"].clone())
        }
    };
    assert_eq!(pending(None).await, Some(json!(false)));
    assert_eq!(
        pending(Some(Mutant::ExecuteBeforeReady)).await,
        Some(json!(true))
    );
}

#[test]
fn mapping_in_dsh_home() {
    let home = std::ffi::OsStr::new("/home/user/.dsh");
    let mutated = Mutants::default()
        .with(Mutant::MappingInDshHome)
        .session_store_in(Some(home));
    assert!(mutated.is_some_and(|store| store.dir().starts_with(home)));
    assert!(Mutants::default().session_store_in(Some(home)).is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_cwd_canonicalize() {
    let world = World::new(json!({}));
    let mut request = world.request("c1", "Create a page");
    request.cwd = std::path::PathBuf::from(format!("{}/./", world.project().display()));
    run(
        &host_with(&world, Some(Mutant::NoCwdCanonicalize)),
        &request,
    )
    .await;
    let cwd = world.commands(0)[0]["cwd"].clone();
    assert!(cwd.as_str().is_some_and(|cwd| cwd.contains("/./")), "{cwd}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_wrong_request() {
    let world = World::new(
        json!({"stdio": [[{"ready": {}}, {"read_execute": {}}, {"session": {}}, {"text": "working"},
        {"wait_cancel": {"timeout_ms": 5000}}, {"result": {"status": "cancelled"}}]]}),
    );
    let host = host_with(&world, Some(Mutant::CancelWrongRequest));
    run_cancelling_on(&host, &world.request("c1", "p"), "text_delta").await;
    let commands = world.commands(0);
    let cancel = commands.iter().find(|command| command["type"] == "cancel");
    assert!(
        cancel.is_some_and(|cancel| cancel["request_id"] != commands[0]["request_id"]),
        "{commands:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_empty_catalog() {
    let world = World::new(json!({"models": {"patch": {"models": []}}}));
    let correct = host_with(&world, None).models().await;
    assert_eq!(
        correct.err().map(|d| d.code),
        Some("DSH_PROFILE_MODELS_EMPTY")
    );
    let mutated = host_with(&world, Some(Mutant::AcceptEmptyCatalog))
        .models()
        .await;
    assert_eq!(mutated.ok().map(|models| models.len()), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_duplicate_models() {
    let model = json!({"provider": "p", "provider_name": "P", "id": "m", "name": "M",
        "reasoning_options": [{"id": "low", "name": "Low"}, {"id": "low", "name": "Low again"}]});
    let world = World::new(json!({"models": {"patch": {"models": [model.clone(), model]}}}));
    let shape = |catalog: Result<Vec<dsh_host::models::CatalogModel>, _>| {
        catalog.ok().map(|models| {
            let efforts: Vec<usize> = models.iter().map(|m| m.reasoning_options.len()).collect();
            efforts
        })
    };
    assert_eq!(shape(host_with(&world, None).models().await), Some(vec![1]));
    let mutated = host_with(&world, Some(Mutant::KeepDuplicateModels));
    assert_eq!(shape(mutated.models().await), Some(vec![2, 2]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_for_default() {
    let executes = |mutant: Option<Mutant>| {
        let world = World::new(json!({}));
        let host = host_with(&world, mutant);
        async move {
            let mut request = world.request("c1", "Create a page");
            request.model = None;
            run(&host, &request).await;
            world.commands(0)[0].get("model").cloned()
        }
    };
    assert_eq!(executes(None).await, None);
    assert!(executes(Some(Mutant::ModelForDefault)).await.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_reasoning_effort() {
    let executes = |mutant: Option<Mutant>| {
        let world = World::new(json!({}));
        let host = host_with(&world, mutant);
        async move {
            let mut request = world.request("c1", "Create a page");
            request.reasoning_effort = Some("max".to_string());
            run(&host, &request).await;
            world.commands(0)[0].get("reasoning_effort").cloned()
        }
    };
    assert_eq!(executes(None).await, Some(json!("max")));
    assert_eq!(executes(Some(Mutant::IgnoreReasoningEffort)).await, None);
}

#[test]
fn every_mutant_is_listed_in_the_reference_host_doc() {
    let doc = include_str!("../../../docs/reference-host.md");
    let unlisted: Vec<&str> = Mutant::ALL
        .iter()
        .map(|mutant| mutant.name())
        .filter(|name| !doc.contains(&format!("\n| `{name}` | ")))
        .collect();
    assert!(
        unlisted.is_empty(),
        "docs/reference-host.md's mutant table lacks {unlisted:?}"
    );
}

#[test]
fn every_mutant_has_a_test_here() {
    let source = include_str!("mutants.rs");
    // The driver-level mutants are switched on through `dsh-host-mutant-driver`, in
    // tests/driver.rs.
    let driver_tests = include_str!("../driver.rs");
    for mutant in Mutant::ALL {
        let test_name = format!("fn {}()", mutant.name().replace('-', "_"));
        let by_driver = format!("\"{}\")", mutant.name());
        let covered = source.contains(&test_name) || driver_tests.contains(&by_driver);
        assert!(covered, "no test for mutant {}", mutant.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn salvage_torn_mapping() {
    let resumed_after_a_torn_save = |mutant: Option<Mutant>| async move {
        let world = World::new(json!({}));
        let host = host_with(&world, mutant);
        run(&host, &world.request("c1", "first")).await;
        let sessions = world.data_dir().join("dsh-host").join("sessions");
        for entry in std::fs::read_dir(&sessions).unwrap_or_else(|e| panic!("{e}")) {
            let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
            let length = std::fs::metadata(&path).map_or(0, |meta| meta.len());
            let file = std::fs::OpenOptions::new().write(true).open(&path);
            file.and_then(|file| file.set_len(length / 2))
                .unwrap_or_else(|e| panic!("truncate {}: {e}", path.display()));
        }
        run(&host, &world.request("c1", "second")).await.0.resumed
    };
    assert!(!resumed_after_a_torn_save(None).await);
    assert!(resumed_after_a_torn_save(Some(Mutant::SalvageTornMapping)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn save_in_place() {
    use std::os::unix::fs::MetadataExt;
    // The inode of the conversation's mapping file after a first and a follow-up run: a save that
    // renames a new file over the old one changes it; a rewrite in place keeps it.
    let inodes = |mutant: Option<Mutant>| async move {
        let world = World::new(json!({}));
        let host = host_with(&world, mutant);
        let sessions = world.data_dir().join("dsh-host").join("sessions");
        let inode = || {
            let files: Vec<u64> = std::fs::read_dir(&sessions)
                .unwrap_or_else(|e| panic!("{e}"))
                .map(|entry| {
                    let entry = entry.unwrap_or_else(|e| panic!("{e}"));
                    entry.metadata().unwrap_or_else(|e| panic!("{e}")).ino()
                })
                .collect();
            assert_eq!(files.len(), 1, "one mapping file, no temp file left");
            files[0]
        };
        run(&host, &world.request("c1", "first")).await;
        let first = inode();
        let (outcome, _) = run(&host, &world.request("c1", "second")).await;
        assert!(outcome.resumed, "the follow-up resumed (and saved again)");
        (first, inode())
    };
    let (before, after) = inodes(None).await;
    assert_ne!(before, after, "the correct host replaces the file whole");
    let (before, after) = inodes(Some(Mutant::SaveInPlace)).await;
    assert_eq!(before, after, "the mutant rewrites the same file");
}
