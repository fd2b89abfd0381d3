//! fake-dsh against the real SDK runtime (the PyPI wheel `deepseek-harness-runtime-bin`,
//! installed by `cargo xtask real-dsh --runtime-bin` under `target/real-dsh-runtime-bin/`): the
//! same scripted model conversation through both, on every SDK surface (`--profile sdk`,
//! `--profile sdk-minimal`, 0.1.1's `dsh-jsonrpc-agent`, `--profile headless`), comparing the wire:
//! methods, notification kinds and order, ids, error messages, exit codes, the stdout/stderr
//! split and the files left in the project. Any difference is a fake-dsh bug unless
//! docs/surface-sdk.md or docs/surface-headless.md explains it. The real runtime talks only to
//! the kit's model server on 127.0.0.1 (`dsh-conformance model-server`), with a dummy key;
//! everything it writes stays in the test's temp dir. The example clients of the client corpus
//! (docs/sdk-clients.md) run on both sides too and must report the same. Skips, saying so, when
//! the real runtime is not installed.

use dsh_engine::programs::resolve_program;
use dsh_runtime_check::sdk_check::{
    drive, initialize, prompt, request, shapes, ModelServer, Step, World,
};
use nix::sys::signal::Signal;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The longest any one run may take (the real 0.1.5 boots in 2 to 5 s).
const RUN_LIMIT: Duration = Duration::from_secs(60);

/// The real runtime's wrappers, or `None` after saying why the test skips.
fn real_runtime() -> Option<PathBuf> {
    let target = dsh_test_support::target_profile_dir()?
        .parent()?
        .to_path_buf();
    let dir = target.join("real-dsh-runtime-bin");
    if dir.join("dsh").is_file() && dir.join("dsh-jsonrpc-agent").is_file() {
        return Some(dir);
    }
    eprintln!(
        "skipped: the real SDK runtime is not installed in {} (run `cargo xtask real-dsh \
         --runtime-bin`)",
        dir.display()
    );
    None
}

/// One side of the comparison.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Side {
    Real,
    Fake,
}

/// The command for one side: the real wrapper, or fake-dsh (as the 0.1.1 persona for
/// `dsh-jsonrpc-agent`) with `scenario` mirroring the model script.
fn command(
    world: &World,
    side: Side,
    real: &Path,
    program: &str,
    args: &[&str],
    model: &str,
    scenario: Option<&Value>,
) -> Command {
    let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let program = match side {
        Side::Real => real.join(program),
        Side::Fake => {
            if program == "dsh-jsonrpc-agent" {
                args.splice(0..0, ["--persona".into(), "0.1.1".into()]);
                args.push("cordis.yml".into());
            } else {
                // The real `dsh` here is the 0.1.5 wheel; fake-dsh plays 0.2.1 by default.
                args.splice(0..0, ["--persona".into(), "0.1.5".into()]);
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

/// What a comparison keys on: shapes, non-JSON lines, exit, whether stderr is empty, files.
type Seen = (Vec<String>, usize, Option<i32>, bool, Vec<String>);

/// Runs `steps` through the real runtime (against `model_script`) and fake-dsh (with
/// `fake_scenario`) and fails on any difference.
fn compare(
    program: &str,
    args: &[&str],
    model_script: Option<Value>,
    fake_scenario: Option<Value>,
    steps: &[Step],
) {
    let Some(real) = real_runtime() else { return };
    let conformance = Path::new(env!("CARGO_BIN_EXE_dsh-conformance"));
    let mut seen: Vec<Seen> = Vec::new();
    for side in [Side::Real, Side::Fake] {
        let world = World::new().unwrap();
        let server =
            ModelServer::start(conformance, model_script.as_ref(), world.root.path()).unwrap();
        let scenario = fake_scenario.as_ref();
        let command = command(&world, side, &real, program, args, &server.url, scenario);
        let wire = drive(command, steps, &world, RUN_LIMIT).unwrap();
        let stderr_empty = wire.stderr.is_empty();
        seen.push((
            shapes(&wire.frames),
            wire.junk,
            wire.exit,
            stderr_empty,
            wire.files,
        ));
    }
    assert_eq!(
        seen[0], seen[1],
        "{program} {args:?}: the real runtime (left) and fake-dsh (right) differ on the wire"
    );
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
        Step::Send(request(json!(4), "shutdown", json!({}))),
        Step::Send(prompt(5, "s-1", "too late")),
    ]
}

#[test]
fn sdk_profile_conversation_matches_the_real_runtime() {
    compare("dsh", &["--profile", "sdk"], None, None, &conversation());
}

#[test]
fn sdk_minimal_profile_conversation_matches_the_real_runtime() {
    compare(
        "dsh",
        &["--profile", "sdk-minimal"],
        None,
        None,
        &conversation(),
    );
}

#[test]
fn jsonrpc_agent_0_1_1_conversation_matches_the_real_runtime() {
    compare("dsh-jsonrpc-agent", &[], None, None, &conversation());
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
    compare(
        "dsh",
        &["--profile", "sdk-minimal"],
        Some(model),
        Some(scenario),
        &steps,
    );
}

/// A slow turn, cut by a signal or EOF once the model request is out: no `turn/end`, the
/// runtime's exit code. The cut waits for the last event the first step writes before the model
/// answers (`session/title` in 0.1.5, `request/context` in 0.1.1, whose title comes earlier), so
/// neither side is caught between two preamble events; the model server's first chunk is 2 s
/// away, far behind the cut.
fn cut_turn(program: &str, args: &[&str], cut: Step) {
    let model = json!({"replies": [{"text": "slow answer that streams for a long while",
                                    "chunk_chars": 2, "drip_ms": 2000, "reuse": true}]});
    let scenario = json!({"sdk": {"turns": [{"steps": [{"delay_ms": 30000, "text": "never"}]}]}});
    let last_preamble_event = if program == "dsh-jsonrpc-agent" {
        "request/context"
    } else {
        "session/title"
    };
    let steps = vec![
        Step::Send(initialize()),
        Step::Response(json!(1)),
        Step::Send(prompt(2, "s-1", "hello")),
        Step::Response(json!(2)),
        Step::Event(last_preamble_event),
        cut,
    ];
    compare(program, args, Some(model), Some(scenario), &steps);
}

#[test]
fn sigterm_mid_turn_exits_0_like_the_real_runtime() {
    cut_turn(
        "dsh",
        &["--profile", "sdk-minimal"],
        Step::Signal(Signal::SIGTERM),
    );
}

#[test]
fn sigint_mid_turn_exits_130_like_the_real_runtime() {
    cut_turn("dsh-jsonrpc-agent", &[], Step::Signal(Signal::SIGINT));
}

#[test]
fn stdin_eof_mid_turn_exits_0_like_the_real_runtime() {
    cut_turn("dsh-jsonrpc-agent", &[], Step::Eof);
}

/// `--profile headless`: exit code, stdout, the `dsh: `/`error: ` lines of stderr, the files.
fn headless(args: &[&str], model: Option<Value>, scenario: Option<Value>) {
    let Some(real) = real_runtime() else { return };
    let conformance = Path::new(env!("CARGO_BIN_EXE_dsh-conformance"));
    let mut seen = Vec::new();
    for side in [Side::Real, Side::Fake] {
        let world = World::new().unwrap();
        let server = ModelServer::start(conformance, model.as_ref(), world.root.path()).unwrap();
        let patch = world.no_title_patch().unwrap();
        let mut full = vec!["--profile", "headless", "--patch", patch.to_str().unwrap()];
        full.extend_from_slice(args);
        let command = command(
            &world,
            side,
            &real,
            "dsh",
            &full,
            &server.url,
            scenario.as_ref(),
        );
        let output = dsh_runtime_check::output_within(command, Stdio::null(), RUN_LIMIT).unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let reported: Vec<String> = stderr
            .lines()
            .filter(|l| l.starts_with("dsh: ") || l.starts_with("error: "))
            .map(str::to_string)
            .collect();
        seen.push((
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            reported,
            world.project_files(),
        ));
    }
    assert_eq!(
        seen[0], seen[1],
        "headless {args:?}: real (left) and fake-dsh (right) differ"
    );
}

#[test]
fn headless_writes_the_file_and_prints_the_final_text_like_the_real_runtime() {
    headless(&["Make a landing page"], None, None);
}

#[test]
fn headless_failed_turn_and_usage_errors_match_the_real_runtime() {
    let model = json!({"replies": [{"status": 401, "reuse": true}]});
    let error =
        json!({"message": "model-server: scripted HTTP 401", "code": "AUTH", "status": 401});
    let scenario = json!({"sdk": {"turns": [{"end": "error", "error": error}]}});
    headless(&["say hi"], Some(model), Some(scenario));
    headless(&[], None, None);
    headless(&["--bogus", "x"], None, None);
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
            eprintln!("skipped: {interpreter} is not on PATH");
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
        eprintln!("skipped: no dsh-0.2.1 in {}", real.display());
        return;
    }
    let conformance = Path::new(env!("CARGO_BIN_EXE_dsh-conformance"));
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    for (interpreter, script) in [
        ("python3", "examples/sdk-client-python/dsh_sdk_client.py"),
        ("node", "examples/sdk-client-node/dsh-sdk-client.mjs"),
    ] {
        if resolve_program(interpreter).is_none() {
            eprintln!("skipped: {interpreter} is not on PATH");
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
