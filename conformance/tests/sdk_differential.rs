//! fake-dsh against the real SDK runtime (the PyPI wheels `deepseek-harness-runtime-bin` 0.1.1,
//! 0.1.5 and 0.2.1, installed by `cargo xtask real-dsh --runtime-bin` under
//! `target/real-dsh-runtime-bin/`): the same scripted model conversation through both, on every
//! surface (`sdk`, `sdk-minimal`, 0.1.1's `dsh-jsonrpc-agent`, `headless`) and release, compared
//! member by member: every frame's member tree (names, value types, nesting; ids, times, token
//! counts, temp paths and free text as placeholders: `dsh_runtime_check::members`), the order of
//! each session's frames (a background child's and the wake turn included), exit codes, the
//! stdout/stderr split and the files left in the project. Any difference is a fake-dsh bug unless
//! docs/surface-sdk.md's "Differences fake-dsh keeps" allows it, with its reason; a failure
//! prints each difference as the frame, the member's path, and the real and fake values
//! (`DSH_DIFFERENTIAL_DUMP=DIR` keeps both normalized sides). The real runtime talks only to the
//! kit's model server on 127.0.0.1 (`dsh-conformance model-server`), with a dummy key; everything
//! it writes stays in the test's temp dir. The example clients of the client corpus
//! (docs/sdk-clients.md) run on both sides too and must report the same. Skips, saying so, when
//! the real runtime is not installed.

use dsh_engine::programs::resolve_program;
use dsh_runtime_check::members::{self, Allowance, Normalizer};
use dsh_runtime_check::sdk_check::{
    drive, initialize, prompt, request, ModelServer, Step, Wire, World,
};
use nix::sys::signal::Signal;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The longest any one run may take (the real 0.1.5 boots in 2 to 5 s).
const RUN_LIMIT: Duration = Duration::from_secs(60);

/// The real runtime's wrappers, or `None` after saying why the test skips: all three releases
/// are installed together.
fn real_runtime() -> Option<PathBuf> {
    let target = dsh_test_support::target_profile_dir()?
        .parent()?
        .to_path_buf();
    let dir = target.join("real-dsh-runtime-bin");
    let wrappers = ["dsh", "dsh-jsonrpc-agent", "dsh-0.2.1"];
    if wrappers.iter().all(|w| dir.join(w).is_file()) {
        return Some(dir);
    }
    dsh_test_support::skip(format!(
        "the real SDK runtime is not installed in {} (run `cargo xtask real-dsh \
         --runtime-bin`)",
        dir.display()
    ));
    None
}

/// One side of the comparison.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Side {
    Real,
    Fake,
}

/// A release of the SDK runtime: the real wrapper that runs it and the fake-dsh persona playing it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Release {
    /// 0.1.1's `dsh-jsonrpc-agent` (its bundled config).
    V011,
    /// 0.1.5's `dsh`.
    V015,
    /// 0.2.1's `dsh` (`dsh-0.2.1`).
    V021,
}

impl Release {
    /// The real wrapper's file name.
    fn real_program(self) -> &'static str {
        match self {
            Release::V011 => "dsh-jsonrpc-agent",
            Release::V015 => "dsh",
            Release::V021 => "dsh-0.2.1",
        }
    }

    /// The release as docs/surface-sdk.md's allowances name it.
    fn name(self) -> &'static str {
        match self {
            Release::V011 => "0.1.1",
            Release::V015 => "0.1.5",
            Release::V021 => "0.2.1",
        }
    }
}

/// The command for one side: the real wrapper, or fake-dsh as the release's persona (with the
/// 0.1.1 config path) and `scenario` mirroring the model script.
fn command(
    world: &World,
    side: Side,
    real: &Path,
    release: Release,
    args: &[&str],
    model: &str,
    scenario: Option<&Value>,
) -> Command {
    let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let program = match side {
        Side::Real => real.join(release.real_program()),
        Side::Fake => {
            args.splice(0..0, ["--persona".into(), release.name().into()]);
            if release == Release::V011 {
                args.push("cordis.yml".into());
            }
            dsh_test_support::binary("fake-dsh")
        }
    };
    let mut command = world.command(&program, &args, model);
    if let (Side::Fake, Some(scenario)) = (side, scenario) {
        let file = world.path("scenario.json");
        std::fs::write(&file, scenario.to_string()).unwrap();
        command.env("FAKE_DSH_SCENARIO", file);
    }
    command
}

/// The differences docs/surface-sdk.md allows ("Differences fake-dsh keeps"), each with its reason.
fn allowances() -> Vec<Allowance> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let doc = workspace.join("docs/surface-sdk.md");
    let text = std::fs::read_to_string(&doc).unwrap();
    members::parse_allowances(&text).unwrap_or_else(|e| panic!("{}: {e}", doc.display()))
}

/// One side's run, normalized: its frames, and the process (exit, non-JSON lines, whether stderr
/// is empty, the project's files) as members of a last pseudo-frame.
fn observed(wire: &Wire, world: &World) -> Vec<Value> {
    let root = world.root.path().display().to_string();
    let normalizer = Normalizer::default().with_root(&root, "<world>");
    let mut frames = by_session(members::normalize_frames(&normalizer, &wire.frames));
    frames.push(json!({"method": "process", "params": {
        "exit": wire.exit,
        "nonJsonLines": wire.junk,
        "stderrEmpty": wire.stderr.is_empty(),
        "stderrFirstLine": wire.stderr.lines().next().map(|l| l.replace(&root, "<world>")),
        "files": wire.files,
    }}));
    frames
}

/// The frames grouped by session, each session's in their order, the sessions in the order they
/// first appear (responses first): two sessions (a parent and its background child) run
/// concurrently, so how their frames interleave is timing, not behaviour. `subagent.*`
/// notifications belong to the parent.
fn by_session(frames: Vec<Value>) -> Vec<Value> {
    let session = |frame: &Value| -> String {
        let params = &frame["params"];
        let id = params["sessionId"]
            .as_str()
            .or(params["parentSessionId"].as_str());
        id.unwrap_or_default().to_string()
    };
    let mut order: Vec<String> = vec![String::new()];
    for frame in &frames {
        let id = session(frame);
        if !order.contains(&id) {
            order.push(id);
        }
    }
    let mut frames = frames;
    frames.sort_by_key(|frame| order.iter().position(|id| *id == session(frame)));
    frames
}

/// Fails, with every difference by member path, when the two sides' normalized wires differ in
/// a way docs/surface-sdk.md does not allow.
fn judge(what: &str, release: Release, real: &[Value], fake: &[Value]) {
    // To look at both sides: DSH_DIFFERENTIAL_DUMP=DIR keeps them as `<release>-real.json` and
    // `<release>-fake.json` there (the last comparison of each release wins).
    if let Some(dir) = std::env::var_os("DSH_DIFFERENTIAL_DUMP") {
        for (side, frames) in [("real", real), ("fake", fake)] {
            let file = Path::new(&dir).join(format!("{}-{side}.json", release.name()));
            std::fs::write(file, serde_json::to_string_pretty(frames).unwrap()).unwrap();
        }
    }
    let differences = members::compare(real, fake);
    let left = members::unexplained(release.name(), differences, &allowances());
    assert!(
        left.is_empty(),
        "{what} ({}): the real runtime and fake-dsh differ (frame, member path, real vs fake; \
         a difference docs/surface-sdk.md does not allow is a fake-dsh bug):\n{}",
        release.name(),
        members::render(&left)
    );
}

/// Runs `steps` through the real `release` (against `model_script`) and fake-dsh (with
/// `fake_scenario`) and fails on any difference docs/surface-sdk.md does not allow.
fn compare(
    release: Release,
    args: &[&str],
    model_script: Option<Value>,
    fake_scenario: Option<Value>,
    steps: &[Step],
) {
    compare_runs(release, args, model_script, fake_scenario, &[steps]);
}

/// Like [`compare`], for several processes one after the other in the same world (one model
/// server, the same home and project): each run's frames, then its process pseudo-frame.
fn compare_runs(
    release: Release,
    args: &[&str],
    model_script: Option<Value>,
    fake_scenario: Option<Value>,
    runs: &[&[Step]],
) {
    compare_runs_normalized(release, args, model_script, fake_scenario, runs, |frames| {
        frames
    });
}

/// Like [`compare_runs`], each side's frames through `normalize` before they are compared.
fn compare_runs_normalized(
    release: Release,
    args: &[&str],
    model_script: Option<Value>,
    fake_scenario: Option<Value>,
    runs: &[&[Step]],
    normalize: fn(Vec<Value>) -> Vec<Value>,
) {
    let Some(real) = real_runtime() else { return };
    let conformance = Path::new(env!("CARGO_BIN_EXE_dsh-conformance"));
    let mut seen: Vec<Vec<Value>> = Vec::new();
    for side in [Side::Real, Side::Fake] {
        let world = World::new().unwrap();
        let server =
            ModelServer::start(conformance, model_script.as_ref(), world.root.path()).unwrap();
        let scenario = fake_scenario.as_ref();
        let mut frames = Vec::new();
        for steps in runs {
            let command = command(&world, side, &real, release, args, &server.url, scenario);
            let wire = drive(command, steps, &world, RUN_LIMIT).unwrap();
            frames.extend(observed(&wire, &world));
        }
        seen.push(normalize(frames));
    }
    judge(&format!("{args:?}"), release, &seen[0], &seen[1]);
}

/// A full conversation: initialize, one prompt (a `write` then text, the model server's default
/// script), an unknown method, shutdown, a prompt after it.
fn conversation() -> Vec<Step> {
    vec![
        Step::Send(initialize()),
        Step::Response(json!(1)),
        Step::Send(prompt(2, "s-1", "Make a landing page")),
        Step::Idle("s-1"),
        Step::Send(request(json!(3), "bogus/method", json!({}))),
        Step::Response(json!(3)),
        // Written together, as a client that sends on without waiting does: sent apart, whether
        // the runtime reads the late prompt before its `shutdown` response ends the wire is
        // timing (the real 0.1.1 once did not, on a loaded machine).
        together(&[
            request(json!(4), "shutdown", json!({})),
            prompt(5, "s-1", "too late"),
        ]),
    ]
}

/// These requests written to stdin in one write.
fn together(requests: &[Value]) -> Step {
    Step::Text(requests.iter().map(|r| format!("{r}\n")).collect())
}

#[test]
fn sdk_profile_conversation_matches_the_real_runtime_0_2_1() {
    compare(
        Release::V021,
        &["--profile", "sdk"],
        None,
        None,
        &conversation(),
    );
}

#[test]
fn positional_sdk_profile_conversation_matches_the_real_runtime_0_2_1() {
    compare(Release::V021, &["sdk"], None, None, &conversation());
}

#[test]
fn sdk_minimal_profile_conversation_matches_the_real_runtime_0_2_1() {
    compare(
        Release::V021,
        &["--profile", "sdk-minimal"],
        None,
        None,
        &conversation(),
    );
}

#[test]
fn sdk_profile_conversation_matches_the_real_runtime_0_1_5() {
    compare(
        Release::V015,
        &["--profile", "sdk"],
        None,
        None,
        &conversation(),
    );
}

#[test]
fn sdk_minimal_profile_conversation_matches_the_real_runtime_0_1_5() {
    compare(
        Release::V015,
        &["--profile", "sdk-minimal"],
        None,
        None,
        &conversation(),
    );
}

#[test]
fn jsonrpc_agent_0_1_1_conversation_matches_the_real_runtime() {
    compare(Release::V011, &[], None, None, &conversation());
}

/// `initialize` asking for another model, token limit and effort: the events report them.
#[test]
fn initialize_model_settings_reach_the_events_like_the_real_runtime() {
    let initialize = request(
        json!(1),
        "initialize",
        json!({"cwd": ".", "provider": "deepseek-official", "model": "deepseek-pro",
               "maxTokens": 1000, "reasoningEffort": "low"}),
    );
    let steps = vec![
        Step::Send(initialize),
        Step::Response(json!(1)),
        Step::Send(prompt(2, "s-1", "Make a landing page")),
        Step::Idle("s-1"),
        Step::Eof,
    ];
    for release in [Release::V015, Release::V021] {
        compare(release, &["--profile", "sdk-minimal"], None, None, &steps);
    }
}

/// A prompt, in a second process, to the session id the first one stored: 0.1.5 and 0.2.1
/// refuse it (`already exists`); 0.1.1 takes it and ends the turn in error (id collision).
#[test]
fn a_session_an_earlier_process_stored_is_handled_like_the_real_runtime() {
    // The first process ends only once its session is on disk: the real runtime stores it some
    // time after `idle` (later on a busy machine), and the second process is about that session.
    let first = |stores: bool| {
        let mut first = vec![
            Step::Send(initialize()),
            Step::Response(json!(1)),
            Step::Send(prompt(2, "s-1", "Make a landing page")),
            Step::Idle("s-1"),
        ];
        if stores {
            first.push(Step::Stored("s-1"));
        }
        first.push(Step::Eof);
        first
    };
    let second = |accepted: bool| {
        let mut second = vec![
            Step::Send(initialize()),
            Step::Response(json!(1)),
            Step::Send(prompt(2, "s-1", "again")),
            Step::Response(json!(2)),
        ];
        if accepted {
            second.push(Step::Idle("s-1"));
        }
        second.push(Step::Eof);
        second
    };
    for (release, args) in [
        (Release::V011, &[][..]),
        (Release::V015, &["--profile", "sdk-minimal"][..]),
        (Release::V021, &["--profile", "sdk-minimal"][..]),
    ] {
        // 0.1.1 keeps no session in the Harness home: its second process accepts the prompt.
        let first = first(release != Release::V011);
        let second = second(release == Release::V011);
        compare_runs(release, args, None, None, &[&first, &second]);
    }
}

/// Runs of `steps` one after the other in one world (the same Harness home and project) on each
/// side, each run with a model server of its own (its tool call ids count its requests, which
/// fake-dsh counts per process), and fails on any difference docs/surface-sdk.md does not allow.
fn compare_processes(release: Release, args: &[&str], runs: &[&[Step]]) {
    let Some(real) = real_runtime() else { return };
    let conformance = Path::new(env!("CARGO_BIN_EXE_dsh-conformance"));
    let mut seen = Vec::new();
    for side in [Side::Real, Side::Fake] {
        let world = World::new().unwrap();
        let mut frames = Vec::new();
        for (n, steps) in runs.iter().enumerate() {
            let dir = world.path(&format!("model-{n}"));
            std::fs::create_dir_all(&dir).unwrap();
            let server = ModelServer::start(conformance, None, &dir).unwrap();
            let command = command(&world, side, &real, release, args, &server.url, None);
            let wire = drive(command, steps, &world, RUN_LIMIT).unwrap();
            frames.extend(observed(&wire, &world));
        }
        seen.push(frames);
    }
    judge(
        &format!("{args:?}, {} processes", runs.len()),
        release,
        &seen[0],
        &seen[1],
    );
}

/// 0.2.1's cold resume: a session a first process stored (`initialize`d with `deepseek-flash`),
/// resumed by a second process `initialize`d with `deepseek-pro`, then two turns. The second
/// process's turns use its own model (`request/header.header.config.model`, the
/// `assistant/message` source's model and both `replayState.response.model` members), its first
/// request says `reason: "resume"`, the model change is recorded once (`request/context` in the
/// first resumed turn only), and neither later turn repeats the session's preamble.
#[test]
fn later_turns_after_a_cold_resume_match_the_real_runtime_0_2_1() {
    let first = [
        Step::Send(initialize()),
        Step::Response(json!(1)),
        Step::Send(prompt(2, "s-1", "Make a landing page")),
        Step::Idle("s-1"),
        Step::Stored("s-1"),
        Step::Eof,
    ];
    let pro = json!({"cwd": ".", "provider": "deepseek-official", "model": "deepseek-pro"});
    let second = [
        Step::Send(request(json!(1), "initialize", pro)),
        Step::Response(json!(1)),
        Step::Send(request(
            json!(2),
            "session/resume",
            json!({"sessionId": "s-1"}),
        )),
        Step::Response(json!(2)),
        Step::Send(prompt(3, "s-1", "Make the heading larger")),
        Step::Idle("s-1"),
        Step::Send(prompt(4, "s-1", "Make it blue")),
        Step::Idle("s-1"),
        Step::Eof,
    ];
    compare_processes(Release::V021, &["--profile", "sdk"], &[&first, &second]);
}

/// A background child (0.1.5 and 0.2.1 `sdk`): the model's `subagent` call, the child's turn after
/// the parent went idle, the parent's wake turn on the child's settled notice, and
/// `subagent.finished` once that turn started. The child answers slowly (its model reply drips),
/// so the parent is idle when it finishes, as fake-dsh's `finish_after_ms` plays it.
#[test]
fn a_background_child_and_the_wake_turn_match_the_real_runtime() {
    let model = json!({"replies": [
        {"when": {"user_contains": "background task"}, "text": "child result",
         "chunk_chars": 4, "drip_ms": 150},
        {"when": {"user_contains": "delegate", "last_role": "user", "tools": true},
         "tool_calls": [{"name": "subagent",
                         "arguments": {"description": "background task",
                                       "prompt": "background task"}}]},
        {"when": {"after_tool": "subagent"}, "text": "started a child"},
        {"when": {"tools": true}, "text": "child is done"}]});
    let scenario = json!({"sdk": {"turns": [{"steps": [{"text": "started a child"}],
        "background_subagent": {"finish_after_ms": 300, "text": "child result",
                                "wake_text": "child is done"}}]}});
    let steps = vec![
        Step::Send(initialize()),
        Step::Response(json!(1)),
        Step::Send(prompt(2, "s-1", "delegate")),
        Step::Idle("s-1"),
        Step::Idle("s-1"),
        Step::Eof,
    ];
    for release in [Release::V015, Release::V021] {
        compare(
            release,
            &["--profile", "sdk"],
            Some(model.clone()),
            Some(scenario.clone()),
            &steps,
        );
    }
}

/// `--patch FILE`: a loader overlay the launcher takes (the no-title row) and ones it refuses
/// before anything is answered (exit 1, `Error: dsh: ...` first on stderr): a missing file, a
/// mapping, an entry that is not a mapping.
#[test]
fn patch_overlays_are_taken_and_refused_like_the_real_runtime() {
    let overlays = [
        (
            "no-title.yml",
            Some("- id: session-title-llm\n  disabled: true\n"),
        ),
        ("missing.yml", None),
        ("map.yml", Some("foo: bar\n")),
        ("scalar.yml", Some("- id: x\n- nope\n")),
    ];
    let Some(real) = real_runtime() else { return };
    let conformance = Path::new(env!("CARGO_BIN_EXE_dsh-conformance"));
    for release in [Release::V015, Release::V021] {
        for (name, text) in overlays {
            let mut seen = Vec::new();
            for side in [Side::Real, Side::Fake] {
                let world = World::new().unwrap();
                let server = ModelServer::start(conformance, None, world.root.path()).unwrap();
                let patch = world.path(name);
                if let Some(text) = text {
                    std::fs::write(&patch, text).unwrap();
                }
                let args = [
                    "--profile",
                    "sdk-minimal",
                    "--patch",
                    patch.to_str().unwrap(),
                ];
                let command = command(&world, side, &real, release, &args, &server.url, None);
                let steps = [
                    Step::Send(initialize()),
                    Step::Response(json!(1)),
                    Step::Eof,
                ];
                let wire = drive(command, &steps, &world, RUN_LIMIT).unwrap();
                seen.push(observed(&wire, &world));
            }
            judge(&format!("--patch {name}"), release, &seen[0], &seen[1]);
        }
    }
}

/// 0.2.1 `sdk`: a valid `--patch` that has the `llm-pi-ai` row declare a provider the profile
/// already declares (`deepseek-official`) boots all the same, with a warning block on stderr (its
/// first two lines compared; the rest is the runtime's stack); naming a provider of its own, the
/// patch boots silently.
#[test]
fn a_route_patch_conflicting_with_a_declared_provider_warns_like_the_real_runtime() {
    let Some(real) = real_runtime() else { return };
    let conformance = Path::new(env!("CARGO_BIN_EXE_dsh-conformance"));
    for provider in ["deepseek-official", "my-provider"] {
        let patch = format!(
            "- id: llm-pi-ai\n  config:\n    providers:\n      {provider}:\n        api: \
             openai-completions\n        baseURL: http://127.0.0.1:9/v1\n        models:\n          \
             - id: deepseek-flash\n"
        );
        let mut seen = Vec::new();
        for side in [Side::Real, Side::Fake] {
            let world = World::new().unwrap();
            let server = ModelServer::start(conformance, None, world.root.path()).unwrap();
            let file = world.path("route.yml");
            std::fs::write(&file, &patch).unwrap();
            let args = ["--profile", "sdk", "--patch", file.to_str().unwrap()];
            let command = command(&world, side, &real, Release::V021, &args, &server.url, None);
            let steps = [
                Step::Send(initialize()),
                Step::Response(json!(1)),
                Step::Eof,
            ];
            let wire = drive(command, &steps, &world, RUN_LIMIT).unwrap();
            let mut frames = observed(&wire, &world);
            let head: Vec<&str> = wire.stderr.lines().take(2).collect();
            frames.push(json!({"method": "stderr", "params": {"head": head}}));
            seen.push(frames);
        }
        judge(
            &format!("--patch ({provider})"),
            Release::V021,
            &seen[0],
            &seen[1],
        );
    }
}

/// `--dump-config-schema`: 0.2.1 prints the profile's loader configuration as one JSON Schema
/// document (compared member by member; its plugin-by-plugin content is allowed to differ), exit
/// 0; 0.1.5 does not know the option.
#[test]
fn the_config_schema_dump_matches_the_real_runtime() {
    let Some(real) = real_runtime() else { return };
    let conformance = Path::new(env!("CARGO_BIN_EXE_dsh-conformance"));
    for (release, profile) in [
        (Release::V021, "sdk-minimal"),
        (Release::V021, "headless"),
        (Release::V015, "sdk"),
    ] {
        let mut seen = Vec::new();
        for side in [Side::Real, Side::Fake] {
            let world = World::new().unwrap();
            let server = ModelServer::start(conformance, None, world.root.path()).unwrap();
            let args = ["--profile", profile, "--dump-config-schema"];
            let command = command(&world, side, &real, release, &args, &server.url, None);
            let wire = drive(command, &[Step::Eof], &world, RUN_LIMIT).unwrap();
            let normalizer = Normalizer::default();
            let mut frames: Vec<Value> = serde_json::from_str::<Value>(&wire.stdout)
                .map(|doc| vec![normalizer.normalize(&doc)])
                .unwrap_or_default();
            frames.push(json!({"method": "process", "params": {
                "exit": wire.exit,
                "stdoutEmpty": wire.stdout.is_empty(),
                "stderrFirstLine": wire.stderr.lines().next(),
            }}));
            seen.push(frames);
        }
        judge(
            &format!("--profile {profile} --dump-config-schema"),
            release,
            &seen[0],
            &seen[1],
        );
    }
}

/// Two prompts to one session, one after the other, and one to a second session: the later
/// turn's preamble (only its `user/message`), `seq` and turn count going on, the second
/// session's own preamble.
#[test]
fn later_turns_and_a_second_session_match_the_real_runtime() {
    let model = json!({"replies": [{"reasoning": "thinking", "text": "hello", "reuse": true}]});
    let step = json!({"reasoning": "thinking", "text": "hello"});
    let scenario = json!({"sdk": {"turns": [{"steps": [step]}, {"steps": [step]},
                                            {"steps": [step]}]}});
    let steps = vec![
        Step::Send(initialize()),
        Step::Response(json!(1)),
        Step::Send(prompt(2, "s-1", "first")),
        Step::Idle("s-1"),
        Step::Send(prompt(3, "s-1", "second")),
        Step::Idle("s-1"),
        Step::Send(prompt(4, "s-2", "another session")),
        Step::Idle("s-2"),
        Step::Eof,
    ];
    for (release, args) in [
        (Release::V011, &[][..]),
        (Release::V015, &["--profile", "sdk"][..]),
        (Release::V021, &["--profile", "sdk"][..]),
    ] {
        compare(
            release,
            args,
            Some(model.clone()),
            Some(scenario.clone()),
            &steps,
        );
    }
}

/// A session may modify a file it wrote; another session in the same process may not modify
/// that file before it reads it (the default model writes `index.html` every turn).
#[test]
fn a_file_only_another_session_wrote_is_refused_like_the_real_runtime() {
    let steps = vec![
        Step::Send(initialize()),
        Step::Response(json!(1)),
        Step::Send(prompt(2, "s-1", "Make a landing page")),
        Step::Idle("s-1"),
        Step::Send(prompt(3, "s-1", "Make a landing page")),
        Step::Idle("s-1"),
        Step::Send(prompt(4, "s-2", "Make a landing page")),
        Step::Idle("s-2"),
        Step::Eof,
    ];
    for release in [Release::V015, Release::V021] {
        compare(release, &["--profile", "sdk"], None, None, &steps);
    }
}

#[test]
fn an_error_turn_then_a_completed_one_and_junk_input_match_the_real_runtime() {
    // The 401 is used once (a 401 is not retried), so the next turn gets the text.
    let model = json!({"replies": [{"status": 401}, {"text": "ok answer", "reuse": true}]});
    let error =
        json!({"message": "model-server: scripted HTTP 401", "code": "AUTH", "status": 401});
    let scenario = json!({"sdk": {"turns": [
        {"end": "error", "error": error},
        {"steps": [{"text": "ok answer"}]}]}});
    let steps = vec![
        Step::Send(prompt(9, "s-0", "before initialize")),
        Step::Response(json!(9)),
        Step::Send(initialize()),
        Step::Response(json!(1)),
        Step::Send(json!("not a request")),
        Step::Send(json!([request(json!(7), "bogus", json!({}))])),
        Step::Send(json!({"jsonrpc": "2.0", "id": null, "method": "bogus"})),
        Step::Send(request(json!(8), "session/prompt", json!({}))),
        Step::Response(json!(8)),
        Step::Send(prompt(2, "s-1", "fail please")),
        Step::Idle("s-1"),
        Step::Send(prompt(3, "s-1", "now succeed")),
        Step::Idle("s-1"),
        Step::Eof,
    ];
    for release in [Release::V015, Release::V021] {
        compare(
            release,
            &["--profile", "sdk-minimal"],
            Some(model.clone()),
            Some(scenario.clone()),
            &steps,
        );
    }
}

/// A client that pipelines its requests behind `initialize` (written in one go, as a client that
/// does not wait for the response writes them): the real runtime reads them once it has booted
/// (seconds) and refuses each session request with `-32603 SDK server is not initialized`, after
/// the unknown methods' errors and before `initialize`'s response; 0.1.5 knows no
/// `session/resume` nor working-directory method. fake-dsh given a boot latency (the scenario's
/// `initialize_delay_ms`; `FAKE_DSH_INITIALIZE_DELAY_MS` does the same) answers the same frames in
/// the same order; the prompt the client then sends once initialized runs as usual.
#[test]
fn requests_pipelined_behind_initialize_are_refused_like_the_real_runtime() {
    let batch: String = [
        initialize(),
        request(json!(2), "session/resume", json!({"sessionId": "s-1"})),
        prompt(3, "s-1", "Make a landing page"),
        request(
            json!("4"),
            "session/working-directory/get",
            json!({"sessionId": "s-1"}),
        ),
        request(json!(5), "bogus/method", json!({})),
    ]
    .iter()
    .map(|line| format!("{line}\n"))
    .collect();
    let steps = vec![
        Step::Text(batch),
        Step::Response(json!(1)),
        Step::Send(prompt(6, "s-1", "Make a landing page")),
        Step::Idle("s-1"),
        Step::Eof,
    ];
    let slow = json!({"sdk": {"initialize_delay_ms": 1500}});
    for release in [Release::V015, Release::V021] {
        compare(
            release,
            &["--profile", "sdk-minimal"],
            None,
            Some(slow.clone()),
            &steps,
        );
    }
}

/// Requests written together (one write, read at once): 0.1.5 and 0.2.1 answer an unknown method
/// at once and handle `session/prompt` a tick later, so a later unknown method's error comes
/// before an earlier prompt's (on an idle machine: the comparison is by id, [`answers_by_id`]);
/// a prompt whose `contentBlocks` is no array (`null`, absent, a
/// string) is refused with the runtime's TypeError; after `shutdown`, the prompts written with it
/// are refused after the unknown method, and `{}` comes last.
/// Each run of consecutive responses in id order: the real runtime dispatches the requests of
/// one read concurrently, and on a busy machine it answered them in another order than on an
/// idle one (0.1.5 once answered id 12 two frames later than it usually does, in a CI run), so only what each answer holds
/// is compared, by id.
fn answers_by_id(mut frames: Vec<Value>) -> Vec<Value> {
    let is_answer = |frame: &Value| frame.get("method").is_none() && frame.get("id").is_some();
    let mut start = 0;
    while start < frames.len() {
        let end = start + frames[start..].iter().take_while(|f| is_answer(f)).count();
        frames[start..end].sort_by_key(|frame| frame["id"].to_string());
        start = end + 1;
    }
    frames
}

#[test]
fn requests_written_together_are_answered_like_the_real_runtime() {
    let prompt_with = |id: u64, params: Value| request(json!(id), "session/prompt", params);
    let refused = together(&[
        prompt_with(10, json!({})),
        request(json!(11), "bogus/a", json!({})),
        prompt_with(12, json!({"sessionId": "s-3", "contentBlocks": "x"})),
        prompt_with(13, json!({"sessionId": "s-4", "contentBlocks": null})),
        prompt_with(14, json!({"sessionId": "s-5"})),
        request(json!(15), "bogus/b", json!({})),
    ]);
    let shutdown = together(&[
        request(json!(4), "shutdown", json!({})),
        prompt(5, "s-1", "too late"),
        request(json!(6), "bogus/c", json!({})),
    ]);
    let steps = vec![
        Step::Send(initialize()),
        Step::Response(json!(1)),
        refused,
        Step::Response(json!(14)),
        shutdown,
        Step::Response(json!(4)),
        Step::Eof,
    ];
    for release in [Release::V015, Release::V021] {
        let args = ["--profile", "sdk-minimal"];
        compare_runs_normalized(release, &args, None, None, &[&steps], answers_by_id);
    }
}

/// A slow turn, cut by a signal or EOF once the model request is out: no `turn/end`, the
/// runtime's exit code. The cut waits for the last event the first step writes before the model
/// answers (`session/title` in 0.1.5, `request/context` in 0.1.1, whose title comes earlier, and
/// in 0.2.1 `delivery-accepted`, written as the request goes out, then silence while the model
/// streams), so neither side is caught between two preamble events; the model server's first
/// chunk is 2 s away, far behind the cut.
fn cut_turn(release: Release, args: &[&str], cut: Step) {
    let model = json!({"replies": [{"text": "slow answer that streams for a long while",
                                    "chunk_chars": 2, "drip_ms": 2000, "reuse": true}]});
    let scenario = json!({"sdk": {"turns": [{"steps": [{"delay_ms": 30000, "text": "never"}]}]}});
    let last_preamble_event = match release {
        Release::V011 => "request/context",
        Release::V015 => "session/title",
        Release::V021 => "session-log-deepseek/delivery-accepted",
    };
    let steps = vec![
        Step::Send(initialize()),
        Step::Response(json!(1)),
        Step::Send(prompt(2, "s-1", "hello")),
        Step::Response(json!(2)),
        Step::Event(last_preamble_event),
        cut,
    ];
    compare(release, args, Some(model), Some(scenario), &steps);
}

#[test]
fn sigterm_mid_turn_exits_0_like_the_real_runtime() {
    for release in [Release::V015, Release::V021] {
        cut_turn(
            release,
            &["--profile", "sdk-minimal"],
            Step::Signal(Signal::SIGTERM),
        );
    }
}

#[test]
fn sigint_mid_turn_exits_130_like_the_real_runtime() {
    cut_turn(Release::V011, &[], Step::Signal(Signal::SIGINT));
}

#[test]
fn stdin_eof_mid_turn_exits_0_like_the_real_runtime() {
    cut_turn(Release::V011, &[], Step::Eof);
}

/// `headless` on `release` (0.1.5 with the no-title patch its wheel needs to boot): the exit
/// code, stdout (as lines of JSON under `--json`, member by member), stderr and the files.
fn headless(release: Release, args: &[&str], model: Option<Value>, scenario: Option<Value>) {
    headless_cut(release, args, model, scenario, None);
}

/// [`headless`] with `input` piped to its stdin (then closed).
fn headless_piped(release: Release, args: &[&str], input: &str) {
    headless_run(
        release,
        args,
        None,
        None,
        vec![Step::Text(input.into()), Step::Eof],
    );
}

/// [`headless`], with the run cut by a signal once the model server has had `requests` turn
/// requests (fake-dsh: 2 s into the run, its scenario then in a 30 s pause).
fn headless_cut(
    release: Release,
    args: &[&str],
    model: Option<Value>,
    scenario: Option<Value>,
    cut: Option<(usize, Signal)>,
) {
    let mut steps = vec![Step::Eof];
    if let Some((requests, signal)) = cut {
        steps.splice(
            0..0,
            [
                Step::ModelRequests(PathBuf::new(), requests),
                Step::Signal(signal),
            ],
        );
    }
    headless_run(release, args, model, scenario, steps);
}

/// One headless run on each side, compared: `steps` driven as given, but a
/// [`Step::ModelRequests`] waits for this side's model server on the real runtime and is a 2 s
/// pause on fake-dsh (its scenario then in a 30 s pause: any moment of it is the same point of
/// the turn, as fake-dsh asks no model).
fn headless_run(
    release: Release,
    args: &[&str],
    model: Option<Value>,
    scenario: Option<Value>,
    steps: Vec<Step>,
) {
    let Some(real) = real_runtime() else { return };
    let conformance = Path::new(env!("CARGO_BIN_EXE_dsh-conformance"));
    let mut seen = Vec::new();
    for side in [Side::Real, Side::Fake] {
        let world = World::new().unwrap();
        let server = ModelServer::start(conformance, model.as_ref(), world.root.path()).unwrap();
        let patch = world.no_title_patch().unwrap();
        let mut full = vec!["--profile", "headless"];
        if release == Release::V015 {
            full.extend(["--patch", patch.to_str().unwrap()]);
        }
        full.extend_from_slice(args);
        let scenario = scenario.as_ref();
        let command = command(&world, side, &real, release, &full, &server.url, scenario);
        let steps: Vec<Step> = steps
            .iter()
            .map(|step| match (step, side) {
                (Step::ModelRequests(_, n), Side::Real) => {
                    Step::ModelRequests(server.log.clone(), *n)
                }
                (Step::ModelRequests(..), Side::Fake) => Step::Pause(Duration::from_secs(2)),
                (step, _) => step.clone(),
            })
            .collect();
        let wire = drive(command, &steps, &world, RUN_LIMIT).unwrap();
        seen.push(headless_observed(&wire, &world));
    }
    judge(&format!("headless {args:?}"), release, &seen[0], &seen[1]);
}

/// A headless run, normalized: the `--json` lines as frames, then the process (exit, the text
/// of stdout when it is not JSON lines, stderr, the files) as a last pseudo-frame.
fn headless_observed(wire: &Wire, world: &World) -> Vec<Value> {
    let root = world.root.path().display().to_string();
    let normalizer = Normalizer::default().with_root(&root, "<world>");
    let json_lines = wire.junk == 0 && !wire.frames.is_empty();
    let mut frames = if json_lines {
        members::normalize_frames(&normalizer, &wire.frames)
    } else {
        Vec::new()
    };
    let stdout = (!json_lines).then(|| wire.stdout.replace(&root, "<world>"));
    frames.push(json!({"method": "process", "params": {
        "exit": wire.exit,
        "stdout": stdout,
        "stderrLines": wire.stderr.replace(&root, "<world>").lines().collect::<Vec<_>>(),
        "files": wire.files,
    }}));
    frames
}

#[test]
fn headless_writes_the_file_and_prints_the_final_text_like_the_real_runtime() {
    for release in [Release::V015, Release::V021] {
        headless(release, &["Make a landing page"], None, None);
    }
    headless(
        Release::V021,
        &["--json", "Make a landing page"],
        None,
        None,
    );
}

/// A max-tokens turn: the cut text on stdout, nothing on stderr, exit 1.
#[test]
fn headless_max_tokens_turn_matches_the_real_runtime() {
    let model = json!({"replies": [
        {"when": {"tools": true}, "text": "cut", "max_tokens": true, "reuse": true},
        {"text": "title", "reuse": true}]});
    let scenario = json!({"sdk": {"turns": [{"steps": [{"text": "cut"}], "end": "max-tokens"}]}});
    for release in [Release::V015, Release::V021] {
        headless(
            release,
            &["write an essay"],
            Some(model.clone()),
            Some(scenario.clone()),
        );
    }
    let args = ["--json", "write an essay"];
    headless(Release::V021, &args, Some(model), Some(scenario));
}

/// SIGTERM and SIGINT while the model answers a turn's second step: the first step's text on
/// stdout, nothing on stderr, exit 0 and 130. (Not under `--json`: there the real runtime writes
/// the last events late, and a signal drops those not yet written, so what it shows is timing.)
#[test]
fn headless_cut_by_a_signal_prints_the_text_so_far_like_the_real_runtime() {
    let model = json!({"replies": [
        {"when": {"last_role": "user", "tools": true}, "text": "partial answer",
         "tool_calls": [{"name": "read", "arguments": {"file_path": "missing.txt"}}]},
        {"when": {"after_tool": "read"}, "text": "never seen", "drip_ms": 3000, "reuse": true},
        {"text": "title", "reuse": true}]});
    let scenario = json!({"sdk": {"turns": [{"steps": [
        {"text": "partial answer",
         "tool_calls": [{"name": "read", "arguments": {"file_path": "missing.txt"}}]},
        {"delay_ms": 30000, "text": "never seen"}]}]}});
    for (release, args, signal) in [
        (Release::V015, &["say"][..], Signal::SIGTERM),
        (Release::V021, &["say"][..], Signal::SIGTERM),
        (Release::V021, &["say"][..], Signal::SIGINT),
    ] {
        let (model, scenario) = (Some(model.clone()), Some(scenario.clone()));
        headless_cut(release, args, model, scenario, Some((2, signal)));
    }
}

/// Headless on 0.1.5 and 0.2.1: an unknown option close to one the profile lists gets the
/// launcher's second error line, `(Did you mean --help?)` (0.2.1's `--json` too); and a SIGTERM
/// or SIGINT that arrives while the runtime is still starting (sent as it is spawned: the real one
/// loads its plugin tree for seconds; fake-dsh's scenario holds it in `initialize_delay_ms`) ends
/// it with nothing printed and the signal's status, not as a cut turn's text so far.
#[test]
fn headless_suggestions_and_signals_while_starting_match_the_real_runtime() {
    let starting = json!({"sdk": {"initialize_delay_ms": 30000}});
    for release in [Release::V015, Release::V021] {
        headless(release, &["--hel", "say"], None, None);
        for signal in [Signal::SIGTERM, Signal::SIGINT] {
            let steps = vec![Step::Signal(signal), Step::Eof];
            headless_run(release, &["say"], None, Some(starting.clone()), steps);
        }
    }
    headless(Release::V021, &["--jsn", "say"], None, None);
}

/// 0.2.1's task from stdin (`-`, or nothing on the command line with stdin piped), an empty
/// piped task (the no-task message), and `--session-id` naming the session.
#[test]
fn headless_stdin_task_and_session_id_match_the_real_runtime() {
    headless_piped(Release::V021, &["-"], "Make a landing page\n");
    headless_piped(Release::V021, &[], "Make a landing page\n");
    headless_piped(Release::V021, &["-"], "");
    headless(
        Release::V021,
        &["--session-id", "design-1", "Make a landing page"],
        None,
        None,
    );
    headless(
        Release::V021,
        &["--json", "--session-id", "design-1", "Make a landing page"],
        None,
        None,
    );
}

/// 0.2.1's `--session-id` resuming, in a second process, the session a first headless run made
/// (its id read from the first run's `--json` `session` line): both runs compared. The second
/// run's `write` of the page the first one created is refused: a session may modify only a file
/// it read (or wrote) in this process.
#[test]
fn headless_session_id_resumes_an_earlier_run_like_the_real_runtime() {
    let Some(real) = real_runtime() else { return };
    let conformance = Path::new(env!("CARGO_BIN_EXE_dsh-conformance"));
    let mut seen = Vec::new();
    for side in [Side::Real, Side::Fake] {
        let world = World::new().unwrap();
        // A model server per run: its call ids count its requests, which fake-dsh, asking no
        // model, counts per process.
        let run = |args: &[&str]| {
            let dir = world.root.path().join(format!("model-{}", args.len()));
            std::fs::create_dir_all(&dir).unwrap();
            let server = ModelServer::start(conformance, None, &dir).unwrap();
            let mut full = vec!["--profile", "headless", "--json"];
            full.extend_from_slice(args);
            let command = command(&world, side, &real, Release::V021, &full, &server.url, None);
            drive(command, &[Step::Eof], &world, RUN_LIMIT).unwrap()
        };
        let first = run(&["Make a landing page"]);
        let id = first
            .frames
            .iter()
            .find(|frame| frame["type"] == "session")
            .and_then(|frame| frame["sessionId"].as_str())
            .unwrap_or_else(|| panic!("{side:?}: no session line: {first:?}"))
            .to_string();
        let second = run(&["--session-id", &id, "Make the heading larger"]);
        let mut frames = headless_observed(&first, &world);
        frames.extend(headless_observed(&second, &world));
        seen.push(frames);
    }
    judge("headless --session-id", Release::V021, &seen[0], &seen[1]);
}

#[test]
fn headless_failed_turn_and_usage_errors_match_the_real_runtime() {
    let model = json!({"replies": [{"status": 401, "reuse": true}]});
    let error =
        json!({"message": "model-server: scripted HTTP 401", "code": "AUTH", "status": 401});
    let scenario = json!({"sdk": {"turns": [{"end": "error", "error": error}]}});
    for release in [Release::V015, Release::V021] {
        headless(
            release,
            &["say hi"],
            Some(model.clone()),
            Some(scenario.clone()),
        );
        headless(release, &[], None, None);
        headless(release, &["--bogus", "x"], None, None);
    }
    let args = ["--json", "say hi"];
    headless(Release::V021, &args, Some(model), Some(scenario));
}

/// An example client's reports (messageIds left out) and exit, run against one side's runtime.
fn client_reports(
    side: Side,
    real: &Path,
    surface: &str,
    client: &[&str],
    prompts: &[&str],
) -> (Option<i32>, Vec<Value>) {
    let conformance = Path::new(env!("CARGO_BIN_EXE_dsh-conformance"));
    let world = World::new().unwrap();
    let server = ModelServer::start(conformance, None, world.root.path()).unwrap();
    let words = |list: &[&str]| -> Vec<String> { list.iter().map(|w| w.to_string()).collect() };
    // (variable, the real runtime's program and arguments, fake-dsh's arguments)
    let (variable, real_program, mut real_args, fake_args) = match surface {
        "sdk" => (
            "DSH_SDK_COMMAND",
            "dsh",
            words(&["--profile", "sdk"]),
            words(&["--persona", "0.1.5", "--profile", "sdk"]),
        ),
        "sdk-0.1.1" => (
            "DSH_SDK_COMMAND",
            "dsh-jsonrpc-agent",
            Vec::new(),
            words(&["--persona", "0.1.1", "cordis.yml"]),
        ),
        "sdk-0.2.1" => (
            "DSH_SDK_COMMAND",
            "dsh-0.2.1",
            words(&["--profile", "sdk"]),
            words(&["--persona", "0.2.1", "--profile", "sdk"]),
        ),
        "headless-0.2.1" => (
            "DSH_HEADLESS_COMMAND",
            "dsh-0.2.1",
            words(&["--profile", "headless"]),
            words(&["--persona", "0.2.1", "--profile", "headless"]),
        ),
        _ => (
            "DSH_HEADLESS_COMMAND",
            "dsh",
            words(&["--profile", "headless"]),
            words(&["--persona", "0.1.5", "--profile", "headless"]),
        ),
    };
    if surface == "headless" {
        let patch = world.no_title_patch().unwrap();
        real_args.extend(["--patch".to_string(), patch.display().to_string()]);
    }
    let mut runtime = match side {
        Side::Real => vec![real.join(real_program).display().to_string()],
        Side::Fake => vec![dsh_test_support::binary("fake-dsh").display().to_string()],
    };
    runtime.extend(if side == Side::Real {
        real_args
    } else {
        fake_args
    });
    let interpreter = resolve_program(client[0]).unwrap();
    let mut args: Vec<String> = client[1..].iter().map(|a| a.to_string()).collect();
    args.extend(prompts.iter().map(|p| p.to_string()));
    let mut command = world.command(&interpreter, &args, &server.url);
    command.env(variable, serde_json::to_string(&runtime).unwrap());
    let output = dsh_runtime_check::output_within(command, Stdio::null(), RUN_LIMIT).unwrap();
    let reports = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| {
            let mut report: Value = serde_json::from_str(line).unwrap();
            report.as_object_mut().unwrap().remove("messageId");
            report
        })
        .collect();
    (output.status.code(), reports)
}

/// The example clients of the client corpus (docs/sdk-clients.md) settle on the real runtime
/// exactly as on fake-dsh: the same reports, exit 0.
#[test]
fn example_clients_report_the_same_on_the_real_runtime() {
    let Some(real) = real_runtime() else { return };
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let script = |path: &str| workspace.join(path).display().to_string();
    let clients = [
        (
            "sdk-0.2.1",
            "python3",
            script("examples/sdk-client-python/dsh_sdk_client.py"),
        ),
        (
            "sdk-0.2.1",
            "node",
            script("examples/sdk-client-node/dsh-sdk-client.mjs"),
        ),
        (
            "headless-0.2.1",
            "python3",
            script("examples/headless-client-python/dsh_headless_client.py"),
        ),
        (
            "headless-0.2.1",
            "node",
            script("examples/headless-client-node/dsh-headless-client.mjs"),
        ),
        (
            "sdk",
            "python3",
            script("examples/sdk-client-python/dsh_sdk_client.py"),
        ),
        (
            "sdk",
            "node",
            script("examples/sdk-client-node/dsh-sdk-client.mjs"),
        ),
        (
            "sdk-0.1.1",
            "python3",
            script("examples/sdk-client-python/dsh_sdk_client.py"),
        ),
        (
            "sdk-0.1.1",
            "node",
            script("examples/sdk-client-node/dsh-sdk-client.mjs"),
        ),
        (
            "headless",
            "python3",
            script("examples/headless-client-python/dsh_headless_client.py"),
        ),
        (
            "headless",
            "node",
            script("examples/headless-client-node/dsh-headless-client.mjs"),
        ),
    ];
    for (surface, interpreter, script) in &clients {
        if resolve_program(interpreter).is_none() {
            dsh_test_support::skip(format!("{interpreter} is not on PATH"));
            continue;
        }
        let prompts: &[&str] = if surface.starts_with("sdk") {
            &["Make a landing page", "Make a landing page"]
        } else {
            &["Make a landing page"]
        };
        let client = [*interpreter, script.as_str()];
        let real_side = client_reports(Side::Real, &real, surface, &client, prompts);
        let fake_side = client_reports(Side::Fake, &real, surface, &client, prompts);
        assert_eq!(
            real_side.0,
            Some(0),
            "{script} on the real runtime: {real_side:?}"
        );
        assert_eq!(real_side.1.len(), prompts.len(), "{script}: {real_side:?}");
        assert_eq!(
            real_side, fake_side,
            "{script}: the real runtime (left) and fake-dsh (right) differ"
        );
    }
}

/// One run of an example SDK client on the real 0.2.1 runtime in `world` (its home kept between
/// runs), with the optional driver-contract variables (docs/sdk-clients.md): the exit code and
/// the last stderr line.
fn run_on_0_2_1(
    world: &World,
    model: &str,
    client: &[String],
    session: &str,
    resume: bool,
) -> (Option<i32>, String) {
    let (exit, _, stderr) = run_on_0_2_1_with(world, model, client, session, resume, None);
    (exit, stderr)
}

/// [`run_on_0_2_1`] with `DSH_SDK_CWD` when `cwd` is given: the exit code, the reports and the
/// last stderr line.
fn run_on_0_2_1_with(
    world: &World,
    model: &str,
    client: &[String],
    session: &str,
    resume: bool,
    cwd: Option<&str>,
) -> (Option<i32>, Vec<Value>, String) {
    let real = real_runtime().unwrap().join("dsh-0.2.1");
    let interpreter = resolve_program(&client[0]).unwrap();
    let args = [client[1].clone(), "Make a landing page".to_string()];
    let mut command = world.command(&interpreter, &args, model);
    let runtime = json!([real.display().to_string(), "--profile", "sdk"]);
    command
        .env("DSH_SDK_COMMAND", runtime.to_string())
        .env("DSH_SDK_SESSION", session);
    if resume {
        command.env("DSH_SDK_RESUME", "1");
    }
    if let Some(cwd) = cwd {
        command.env("DSH_SDK_CWD", cwd);
    }
    let output = dsh_runtime_check::output_within(command, Stdio::null(), RUN_LIMIT).unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let reports = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    (
        output.status.code(),
        reports,
        stderr.trim().lines().last().unwrap_or_default().to_string(),
    )
}

/// The client corpus's `sdk.second-run-same-home`, `sdk.cold-resume` and
/// `sdk.decoy-before-refusal` rest on what the real 0.2.1 does with a kept home: a session id a
/// first process stored is refused to a second one unless it resumes it first, and a resume of a
/// session the home lacks is refused; `sdk.working-directory-set` on what it answers a move. The
/// example clients, through the optional contract variables, see exactly that.
#[test]
fn example_clients_resume_and_move_a_session_on_the_real_0_2_1_runtime() {
    let Some(real) = real_runtime() else { return };
    if !real.join("dsh-0.2.1").is_file() {
        dsh_test_support::skip(format!("no dsh-0.2.1 in {}", real.display()));
        return;
    }
    let conformance = Path::new(env!("CARGO_BIN_EXE_dsh-conformance"));
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    for (interpreter, script) in [
        ("python3", "examples/sdk-client-python/dsh_sdk_client.py"),
        ("node", "examples/sdk-client-node/dsh-sdk-client.mjs"),
    ] {
        if resolve_program(interpreter).is_none() {
            dsh_test_support::skip(format!("{interpreter} is not on PATH"));
            continue;
        }
        let client = [
            interpreter.to_string(),
            workspace.join(script).display().to_string(),
        ];
        let world = World::new().unwrap();
        let server = ModelServer::start(conformance, None, world.root.path()).unwrap();
        let url = &server.url;
        let first = run_on_0_2_1(&world, url, &client, "kept-1", false);
        assert_eq!(first.0, Some(0), "{script}: {first:?}");
        let unresumed = run_on_0_2_1(&world, url, &client, "kept-1", false);
        assert_eq!(unresumed.0, Some(2), "{script}: {unresumed:?}");
        assert!(
            unresumed.1.ends_with("session \"kept-1\" already exists"),
            "{script}: {unresumed:?}"
        );
        let resumed = run_on_0_2_1(&world, url, &client, "kept-1", true);
        assert_eq!(resumed.0, Some(0), "{script}: {resumed:?}");
        let unknown = run_on_0_2_1(&world, url, &client, "never-stored", true);
        assert_eq!(unknown.0, Some(2), "{script}: {unknown:?}");
        assert!(
            unknown.1.ends_with("session \"never-stored\" not found"),
            "{script}: {unknown:?}"
        );
        // `sdk.working-directory-set`: the runtime's answer is the absolute directory, and the
        // page is written there.
        std::fs::create_dir(world.path("project/site")).unwrap();
        let moved = run_on_0_2_1_with(&world, url, &client, "moved-1", false, Some("site"));
        assert_eq!(moved.0, Some(0), "{script}: {moved:?}");
        let cwd = moved.1[0]["cwd"].as_str().unwrap_or_default();
        assert!(cwd.ends_with("/project/site"), "{script}: {moved:?}");
        assert!(world.path("project/site/index.html").is_file(), "{script}");
    }
}
