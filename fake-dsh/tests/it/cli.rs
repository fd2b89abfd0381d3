//! The one-shot CLI surfaces: --version, --probe, --models, plugin add, bad usage (exit 1, like
//! the real dsh), and scenario loading errors (exit 2: fake-dsh could not run).

use crate::support;

use predicates::prelude::*;
use serde_json::{json, Value};
use support::{entries, first_entry, read_json, World};

fn stdout_json(output: &std::process::Output) -> Value {
    serde_json::from_slice(&output.stdout).expect("stdout is one JSON frame")
}

#[test]
fn version_defaults_and_is_overridden_by_scenario_then_env() {
    let world = World::new();
    world
        .cmd(&["--version"])
        .assert()
        .success()
        .stdout("0.1.7-rc.1\n");
    world.scenario(json!({"version": "0.1.8"}));
    world
        .cmd(&["--version"])
        .assert()
        .success()
        .stdout("0.1.8\n");
    world
        .cmd(&["--version"])
        .env("FAKE_DSH_VERSION", "0.2.0")
        .assert()
        .success()
        .stdout("0.2.0\n");
}

#[test]
fn version_raw_overrides_give_empty_unparseable_and_failing_answers() {
    let world = World::new();
    world.scenario(json!({"version": {"stdout": ""}}));
    world.cmd(&["--version"]).assert().success().stdout("");
    world.scenario(json!({"version": {"stdout": "dsh build banana\n", "stderr": "warn\n"}}));
    world
        .cmd(&["--version"])
        .assert()
        .success()
        .stdout("dsh build banana\n")
        .stderr("warn\n");
    world.scenario(json!({"version": {"stderr": "boom\n", "exit": 3}}));
    world.cmd(&["--version"]).assert().code(3).stdout("");
}

#[test]
fn probe_prints_one_compatible_frame() {
    let world = World::new();
    let output = world
        .cmd(&["--profile", "open-design", "--probe"])
        .output()
        .unwrap();
    assert!(output.status.success());
    assert_eq!(output.stdout.iter().filter(|&&b| b == b'\n').count(), 1);
    let probe = stdout_json(&output);
    support::assert_valid_frame(&probe);
    assert_eq!(probe["v"], 1);
    assert_eq!(probe["type"], "probe");
    assert_eq!(probe["runtime"], "open-design");
    assert_eq!(probe["protocol_version"], 1);
    assert_eq!(probe["plugin_version"], "0.1.0");
    assert_eq!(probe["compatibility_generation"], "od-profile-1");
    assert_eq!(
        probe["capabilities"],
        json!({"session_resume": true, "session_cancel": true, "structured_events": true})
    );
}

#[test]
fn probe_patches_and_raw_overrides() {
    let world = World::new();
    world.scenario(json!({"probe": {"patch": {
        "runtime": "multica", "protocol_version": 2, "capabilities": {"session_resume": null}}}}));
    let probe = stdout_json(
        &world
            .cmd(&["--profile", "open-design", "--probe"])
            .output()
            .unwrap(),
    );
    assert_eq!(probe["runtime"], "multica");
    assert_eq!(probe["protocol_version"], 2);
    assert!(probe["capabilities"].get("session_resume").is_none());
    assert_eq!(probe["capabilities"]["session_cancel"], true);

    world.scenario(json!({"probe": {"stdout": "not json\n", "exit": 1}}));
    world
        .cmd(&["--profile", "open-design", "--probe"])
        .assert()
        .code(1)
        .stdout("not json\n");
}

#[test]
fn a_missing_profile_fails_probe_stdio_and_models() {
    let world = World::without_profile();
    for surface in ["--probe", "--stdio", "--models"] {
        world
            .cmd(&["--profile", "open-design", surface])
            .assert()
            .code(1)
            .stdout("")
            .stderr(
                "Error: dsh: profile \"open-design\" does not exist; create it with 'dsh plugin \
                 --profile open-design add <package>'\n",
            );
    }
}

#[test]
fn models_prints_one_models_frame_and_list_models_is_unknown() {
    let world = World::new();
    world
        .cmd(&["--profile", "open-design", "--list-models"])
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::contains("--list-models"));
    let output = world
        .cmd(&["--profile", "open-design", "--models"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let models = stdout_json(&output);
    support::assert_valid_frame(&models);
    assert_eq!(models["type"], "models");
    assert_eq!(models["runtime"], "open-design");
    let listed = models["models"].as_array().unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0]["provider"], "deepseek-official");
    assert_eq!(listed[0]["id"], "deepseek-chat");
    assert!(listed.iter().all(|model| model["reasoning_options"]
        .as_array()
        .is_some_and(|o| !o.is_empty())));
    let big = "x".repeat(70 * 1024);
    world.scenario(json!({"models": {"stdout": format!("{{\"pad\":\"{big}\"}}\n")}}));
    let output = world
        .cmd(&["--profile", "open-design", "--models"])
        .output()
        .unwrap();
    assert!(output.stdout.len() > 64 * 1024);
}

#[test]
fn plugin_add_installs_the_profile_so_a_later_probe_succeeds() {
    let world = World::without_profile();
    world
        .cmd(&["--profile", "open-design", "--probe"])
        .assert()
        .code(1);
    let tarball = world.root.path().join("open-design-runtime.tgz");
    std::fs::write(&tarball, b"packed bundle").unwrap();
    world
        .cmd(&[
            "plugin",
            "--profile",
            "open-design",
            "add",
            tarball.to_str().unwrap(),
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("@open-design/dsh-runtime"));
    let manifest = read_json(&world.home().join("profiles/open-design/package.json"));
    assert_eq!(manifest["name"], "@open-design/dsh-runtime");
    assert_eq!(manifest["version"], "0.1.0");
    assert_eq!(manifest["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(
        manifest["tarball"],
        std::fs::canonicalize(&tarball).unwrap().to_str().unwrap()
    );
    world
        .cmd(&["--profile", "open-design", "--probe"])
        .assert()
        .success();
    let journal = world.journal();
    assert!(journal
        .iter()
        .any(|entry| entry["event"] == "start" && entry["mode"] == "plugin"));
}

#[test]
fn plugin_add_refuses_a_file_that_does_not_exist() {
    let world = World::without_profile();
    let missing = world.root.path().join("missing.tgz");
    world
        .cmd(&[
            "plugin",
            "--profile",
            "open-design",
            "add",
            missing.to_str().unwrap(),
        ])
        .assert()
        .code(254)
        .stdout(predicate::str::contains("does not exist"))
        .stderr(predicate::str::contains(
            "dsh: pnpm failed in profile directory",
        ));
    assert!(!world
        .home()
        .join("profiles/open-design/package.json")
        .exists());
}

/// A Harness home holding a real dsh installation: the shared packages the real dsh makes on
/// every boot, and an installed open-design profile with its own packages.
fn real_dsh_home(home: &std::path::Path) -> Vec<u8> {
    let profile = home.join("profiles/open-design");
    std::fs::create_dir_all(profile.join("node_modules/@open-design/dsh-runtime")).unwrap();
    std::fs::create_dir_all(home.join("profiles/node_modules")).unwrap();
    let manifest = b"{\"dependencies\":{\"@open-design/dsh-runtime\":\"0.1.0\"}}\n".to_vec();
    std::fs::write(profile.join("package.json"), &manifest).unwrap();
    manifest
}

/// `plugin --profile open-design add` of a bundle file in the world.
fn add_a_bundle(world: &World) -> assert_cmd::assert::Assert {
    let tarball = world.root.path().join("open-design-runtime.tgz");
    std::fs::write(&tarball, b"packed bundle").unwrap();
    world
        .cmd(&["plugin", "--profile", "open-design", "add"])
        .arg(&tarball)
        .assert()
}

#[test]
fn a_home_holding_a_real_dsh_installation_is_never_written() {
    let world = World::without_profile();
    let manifest = real_dsh_home(&world.home());
    add_a_bundle(&world)
        .code(2)
        .stderr(predicate::str::contains(
            "will not write into the Harness home",
        ))
        .stderr(predicate::str::contains("DSH_HOME"));
    let stdio = world
        .cmd(&["--profile", "open-design", "--stdio"])
        .write_stdin("")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("profiles/node_modules"));
    assert!(stdio.get_output().stdout.is_empty(), "no ready frame");
    let profile = world.home().join("profiles/open-design/package.json");
    assert_eq!(
        std::fs::read(profile).unwrap(),
        manifest,
        "the real profile is untouched"
    );
    assert!(!world.home().join("sessions").exists());
    assert!(!world.home().join(".fake-dsh").exists());
}

#[test]
fn a_home_holding_only_a_real_profile_manifest_is_never_claimed_nor_overwritten() {
    let world = World::without_profile();
    let profile = world.home().join("profiles/open-design/package.json");
    std::fs::create_dir_all(profile.parent().unwrap()).unwrap();
    let manifest = b"{\"dependencies\":{\"@open-design/dsh-runtime\":\"0.1.0\"}}\n";
    std::fs::write(&profile, manifest).unwrap();
    add_a_bundle(&world)
        .code(2)
        .stderr(predicate::str::contains(
            "profiles/open-design/package.json",
        ))
        .stderr(predicate::str::contains("DSH_HOME"));
    assert_eq!(std::fs::read(&profile).unwrap(), manifest, "untouched");
    assert!(!world.home().join(".fake-dsh").exists(), "not marked");

    std::fs::create_dir_all(world.home().join(".fake-dsh")).unwrap();
    std::fs::write(world.home().join(fake_dsh::home::MARKER), b"{}").unwrap();
    add_a_bundle(&world)
        .code(2)
        .stderr(predicate::str::contains("will not replace"))
        .stderr(predicate::str::contains("DSH_HOME"));
    assert_eq!(
        std::fs::read(&profile).unwrap(),
        manifest,
        "even a marked home's real package.json is never overwritten"
    );
}

#[test]
fn without_dsh_home_a_real_installation_in_home_dot_dsh_is_refused() {
    let world = World::without_profile();
    let user_home = world.root.path().join("user-home");
    let manifest = real_dsh_home(&user_home.join(".dsh"));
    world
        .cmd(&["--profile", "open-design", "--stdio"])
        .env_remove("DSH_HOME")
        .env("HOME", &user_home)
        .write_stdin("")
        .assert()
        .code(2)
        .stderr(predicate::str::contains(".dsh"))
        .stderr(predicate::str::contains("DSH_HOME"));
    let profile = user_home.join(".dsh/profiles/open-design/package.json");
    assert_eq!(std::fs::read(profile).unwrap(), manifest);
}

#[test]
fn an_empty_home_is_marked_as_fake_dsh_s_own_on_first_write() {
    let world = World::without_profile();
    add_a_bundle(&world).success();
    assert!(world.home().join(fake_dsh::home::MARKER).is_file());
}

#[test]
fn unknown_profiles_and_flags_are_usage_errors() {
    let world = World::new();
    world
        .cmd(&["--profile", "web", "--probe"])
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::contains(
            "profile \"web\" does not exist; create it with",
        ));
    world
        .cmd(&["plugin", "--profile", "web", "add", "/nope.tgz"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "only the open-design and multica profiles",
        ));
    world
        .cmd(&["--profile", "open-design", "--frobnicate"])
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::contains("--frobnicate"));
    world
        .cmd(&["--profile", "open-design"])
        .assert()
        .code(1)
        .stderr("error: a profile mode needs exactly one of --models, --probe, --stdio\n");
    world
        .cmd(&[])
        .assert()
        .code(1)
        .stdout("")
        .stderr("error: --profile <name> is required\n");
    for args in [
        &["plugin"][..],
        &["plugin", "--help"],
        &["plugin", "--profile", "open-design"],
    ] {
        world.cmd(args).assert().code(1).stdout("");
    }
    world
        .cmd(&["--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains("--stdio"))
        .stdout(predicate::str::contains("FAKE_DSH_SCENARIO"))
        .stdout(predicate::str::contains("--profile acp"))
        .stdout(predicate::str::contains("--persona 0.2.1|0.1.5|0.1.1"));
    let journal = world.journal();
    let modes: Vec<Value> = entries(&journal, "start")
        .map(|entry| entry["mode"].clone())
        .collect();
    assert!(modes.iter().all(|mode| mode == "error"), "{modes:?}");
    // Like the real dsh, --version answers whatever else is on the line.
    world
        .cmd(&["--version", "--frobnicate"])
        .assert()
        .success()
        .stdout("0.1.7-rc.1\n");
}

#[test]
fn a_scenario_that_fails_its_schema_names_the_file_and_path() {
    let world = World::new();
    world.scenario(json!({"stdio": [[{"ready": {}}, {"text": 5}]]}));
    let scenario = world.scenario_path();
    world
        .cmd(&["--profile", "open-design", "--stdio"])
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains(scenario.to_str().unwrap()))
        .stderr(predicate::str::contains("/stdio/0/1/text"));
    std::fs::write(&scenario, b"{ not json").unwrap();
    world
        .cmd(&["--version"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not JSON"));
}

#[test]
fn a_whole_case_file_is_accepted_as_the_scenario() {
    let world = World::new();
    std::fs::write(
        world.scenario_path(),
        serde_json::to_vec(&json!({
            "v": 1, "id": "discover.odd-version", "summary": "s", "spec": ["5"], "rules": [],
            "requires": [], "interpretation": null,
            "runtime": {"version": "9.9.9-case"}, "steps": []
        }))
        .unwrap(),
    )
    .unwrap();
    world
        .cmd(&["--version"])
        .assert()
        .success()
        .stdout("9.9.9-case\n");
}

#[test]
fn start_entries_hold_argv_process_ids_and_env_names_only() {
    let world = World::new();
    world.cmd(&["--version"]).assert().success();
    let journal = world.journal();
    let start = first_entry(&journal, "start");
    assert_eq!(start["v"], 1);
    assert_eq!(start["mode"], "version");
    assert_eq!(start["invocation"], Value::Null);
    assert_eq!(start["argv"][1], "--version");
    // assert_cmd spawns fake-dsh in this test's process group and session. Compare with our own
    // ids rather than with zero: getsid answers 0 when the session leader lives in another PID
    // namespace, as it does under some CI sandboxes.
    let own_pgid = nix::unistd::getpgrp().as_raw();
    let own_sid = nix::unistd::getsid(None).unwrap().as_raw();
    assert_eq!(start["pgid"].as_i64().unwrap(), i64::from(own_pgid));
    assert_eq!(start["sid"].as_i64().unwrap(), i64::from(own_sid));
    assert!(start["ppid"].as_i64().unwrap() > 0);
    assert!(start["t_ms"].as_u64().unwrap() > 1_600_000_000_000);
    let names: Vec<&str> = start["env_names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(names.contains(&"DEEPSEEK_API_KEY"));
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    let text = std::fs::read_to_string(world.journal_path()).unwrap();
    assert!(!text.contains("canary-key-value"));
    let exit = first_entry(&journal, "exit");
    assert_eq!(exit["code"], 0);
    assert_eq!(exit["reason"], "script_end");
}

#[test]
fn identity_patch_env_changes_probe_and_ready_and_rejects_non_json() {
    let world = World::new();
    let patch = r#"{"plugin_version":"0.2.0","x_future":{"a":1},"compatibility_generation":null}"#;
    let output = world
        .cmd(&["--profile", "open-design", "--probe"])
        .env("FAKE_DSH_IDENTITY_PATCH", patch)
        .output()
        .unwrap();
    assert!(output.status.success());
    let probe = stdout_json(&output);
    assert_eq!(probe["plugin_version"], "0.2.0");
    assert_eq!(probe["x_future"], json!({"a": 1}));
    assert!(probe.get("compatibility_generation").is_none());
    assert_eq!(probe["runtime"], "open-design");

    let output = world
        .cmd(&["--profile", "open-design", "--stdio"])
        .env("FAKE_DSH_IDENTITY_PATCH", patch)
        .output()
        .unwrap();
    let ready: Value = serde_json::from_slice(
        output
            .stdout
            .split(|b| *b == b'\n')
            .next()
            .expect("a first line"),
    )
    .expect("ready is JSON");
    assert_eq!(ready["type"], "ready");
    assert_eq!(ready["plugin_version"], "0.2.0");

    world
        .cmd(&["--profile", "open-design", "--probe"])
        .env("FAKE_DSH_IDENTITY_PATCH", "[1]")
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains(
            "FAKE_DSH_IDENTITY_PATCH must be a JSON object",
        ));
    world
        .cmd(&["--profile", "open-design", "--probe"])
        .env("FAKE_DSH_IDENTITY_PATCH", "{oops")
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "FAKE_DSH_IDENTITY_PATCH is not JSON",
        ));
}
