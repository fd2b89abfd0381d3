//! Scripts that play what a host's own tests need: `on_execute` branching on new, known and
//! unknown resumes (with the rejection's code set by the scenario), scripted turns a later
//! process resumes, and one `stdio_default` script served to many processes.

use crate::support;

use serde_json::{json, Value};
use support::{code, entries, stdout_frames, World};

/// One `--stdio` process fed one execute (stdin then closes): its exit code and frames.
fn turn(world: &World, execute: &Value) -> (i32, Vec<Value>) {
    let output = world
        .cmd(&["--profile", "open-design", "--stdio"])
        .write_stdin(format!("{execute}\n"))
        .output()
        .unwrap();
    (code(output.status), stdout_frames(&output.stdout))
}

fn types(frames: &[Value]) -> Vec<&str> {
    frames
        .iter()
        .map(|frame| frame["type"].as_str().unwrap())
        .collect()
}

/// The stored record of a session, if the Harness home holds one.
fn record(world: &World, session_id: &str) -> Option<Value> {
    let path = world.home().join(format!("sessions/{session_id}.json"));
    path.is_file().then(|| support::read_json(&path))
}

/// A mode that serves new sessions, resumes stored ones and rejects unknown resume targets with
/// the host's own code, as one script for every process.
fn branching_mode() -> Value {
    json!({"stdio_default": [
        {"ready": {}},
        {"on_execute": {
            "new": [{"session": {}}, {"text": "new"}, {"result": {}}],
            "resume": [{"session": {}}, {"text": "resumed"}, {"result": {}}],
            "unknown_resume": [
                {"result": {"status": "failed", "resume_rejected": true,
                    "error": {"code": "DSH_PROFILE_SESSION_NOT_FOUND", "message": "no {{resume_session_id}}"}}},
                {"exit": 0}
            ]
        }},
        {"stderr": "after the branch\n"}
    ]})
}

#[test]
fn a_script_branches_on_new_and_resume_and_rejects_an_unknown_resume_with_its_own_code() {
    let world = World::new();
    world.scenario(branching_mode());

    let (exit, first) = turn(&world, &world.execute("r1", "a page", None));
    assert_eq!(exit, 0);
    assert_eq!(types(&first), ["ready", "session", "text", "result"]);
    assert_eq!(first[1]["resumed"], false);
    assert_eq!(first[2]["content"], "new");
    let session_id = first[1]["session_id"].as_str().unwrap().to_string();

    let (exit, second) = turn(&world, &world.execute("r2", "again", Some(&session_id)));
    assert_eq!(exit, 0);
    assert_eq!(types(&second), ["ready", "session", "text", "result"]);
    assert_eq!(second[1]["session_id"], session_id.as_str());
    assert_eq!(second[1]["resumed"], true);
    assert_eq!(second[2]["content"], "resumed");
    assert_eq!(second[3]["status"], "completed");

    let unknown = "od-00000000-0000-4000-8000-000000000000";
    let (exit, third) = turn(&world, &world.execute("r3", "again", Some(unknown)));
    assert_eq!(exit, 0);
    assert_eq!(types(&third), ["ready", "result"]);
    assert_eq!(
        third[1],
        json!({"v": 1, "type": "result", "request_id": "r3", "status": "failed",
               "session_id": unknown, "resume_rejected": true,
               "error": {"code": "DSH_PROFILE_SESSION_NOT_FOUND", "message": format!("no {unknown}")}})
    );
    assert!(
        record(&world, unknown).is_none(),
        "a rejected resume stores no session"
    );

    let journal = world.journal();
    let reasons: Vec<&str> = entries(&journal, "exit")
        .map(|entry| entry["reason"].as_str().unwrap())
        .collect();
    assert_eq!(
        reasons,
        ["script_end", "script_end", "exit_action"],
        "the branch's exit ends the script; the others go on after their branch"
    );
}

#[test]
fn a_later_process_resumes_a_scripted_turn() {
    let world = World::new();
    world.scenario(json!({"stdio": [[
        {"ready": {}}, {"read_execute": {}}, {"session": {}}, {"text": "scripted"},
        {"result": {"output": "done"}}
    ]]}));

    let (exit, scripted) = turn(&world, &world.execute("r1", "a page", None));
    assert_eq!(exit, 0);
    assert_eq!(types(&scripted), ["ready", "session", "text", "result"]);
    let session_id = scripted[1]["session_id"].as_str().unwrap().to_string();
    let stored = record(&world, &session_id).expect("the scripted session is stored");
    assert_eq!(stored["turns"][0]["request_id"], "r1");
    assert_eq!(
        stored["turns"][0]["status"], "completed",
        "the scripted result finishes the stored turn"
    );

    // The second process has no script: the default agent resumes the scripted session.
    let (exit, resumed) = turn(
        &world,
        &world.execute("r2", "make it green", Some(&session_id)),
    );
    assert_eq!(exit, 0);
    assert_eq!(resumed[1]["type"], "session");
    assert_eq!(resumed[1]["session_id"], session_id.as_str());
    assert_eq!(resumed[1]["resumed"], true);
    let result = resumed.last().unwrap();
    assert_eq!(
        (&result["status"], &result["resume_rejected"]),
        (&json!("completed"), &json!(false))
    );
    let stored = record(&world, &session_id).unwrap();
    let statuses: Vec<&Value> = stored["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|turn| &turn["status"])
        .collect();
    assert_eq!(statuses, [&json!("completed"), &json!("completed")]);
}

#[test]
fn a_scripted_result_without_a_session_frame_stores_the_session_it_names() {
    let world = World::new();
    world.scenario(json!({"stdio": [
        [{"ready": {}}, {"read_execute": {}},
         {"result": {"status": "cancelled", "session_id": "od-scripted-1"}}],
        [{"ready": {}}, {"on_execute": {
            "resume": [{"text": "found"}],
            "unknown_resume": [{"text": "not found"}]
        }}]
    ]}));
    let (_, first) = turn(&world, &world.execute("r1", "a page", None));
    assert_eq!(types(&first), ["ready", "result"]);
    let stored = record(&world, "od-scripted-1").expect("stored");
    assert_eq!(stored["turns"][0]["status"], "cancelled");

    let (_, second) = turn(&world, &world.execute("r2", "again", Some("od-scripted-1")));
    assert_eq!(second[1]["content"], "found");
}

#[test]
fn one_default_script_serves_every_process_without_its_own() {
    let world = World::new();
    world.scenario(json!({
        "stdio": [[{"ready": {}}, {"read_execute": {}}, {"text": "own script"}, {"exit": 3}]],
        "stdio_default": [{"ready": {}}, {"read_execute": {}}, {"text": "shared {{request_id}}"},
                          {"exit": 4}]
    }));
    let mut codes = Vec::new();
    let mut contents = Vec::new();
    for index in 0..6 {
        let (exit, frames) = turn(&world, &world.execute(&format!("r{index}"), "p", None));
        assert_eq!(types(&frames), ["ready", "text"], "process {index}");
        codes.push(exit);
        contents.push(frames[1]["content"].as_str().unwrap().to_string());
    }
    assert_eq!(codes, [3, 4, 4, 4, 4, 4]);
    assert_eq!(contents[0], "own script");
    assert_eq!(
        contents[1..],
        [
            "shared r1",
            "shared r2",
            "shared r3",
            "shared r4",
            "shared r5"
        ]
    );
}

#[test]
fn a_default_script_alone_needs_no_invocation_count() {
    let world = World::new();
    world.scenario(json!({"stdio_default": [{"text_line": {"bytes": 80}}]}));
    for _ in 0..3 {
        let (exit, frames) = turn(&world, &world.execute("r", "p", None));
        assert_eq!((exit, types(&frames)), (0, vec!["text"]));
    }
}

#[test]
fn a_drip_of_a_non_frame_inside_a_branch_is_refused_with_its_path() {
    let world = World::new();
    world.scenario(json!({"stdio_default": [{"on_execute": {"new": [
        {"text": "ok"}, {"drip": {"action": {"sleep_ms": 1}}}
    ]}}]}));
    let output = world
        .cmd(&["--profile", "open-design", "--stdio"])
        .output()
        .unwrap();
    assert_eq!(code(output.status), 2);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("/stdio_default/0"), "{stderr}");
}
