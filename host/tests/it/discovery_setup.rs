//! Discovery (spec 5) and setup (spec 4) against fake-dsh: executable resolution, the version
//! identity, the probe gate, and the hash-pinned bundle install.

use crate::support;

use dsh_host::discovery::DiscoveryEnv;
use dsh_host::Host;
use serde_json::{json, Value};
use support::World;

async fn discover(world: &World) -> dsh_host::discovery::Discovery {
    world.host().discover().await
}

fn code(discovery: &dsh_host::discovery::Discovery) -> Option<&'static str> {
    discovery
        .unavailable
        .as_ref()
        .map(|diagnostic| diagnostic.code)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tested_dsh_with_the_profile_is_available_without_warnings() {
    let world = World::new(json!({}));
    let discovery = discover(&world).await;
    assert!(discovery.available(), "{discovery:?}");
    assert_eq!(
        discovery.version.map(|v| v.to_string()).as_deref(),
        Some("0.1.7-rc.1")
    );
    assert!(discovery.warnings.is_empty());
    assert!(discovery
        .probe
        .is_some_and(|p| !p.plugin_version.is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relative_dsh_bin_is_ignored_in_favour_of_path() {
    let world = World::new(json!({}));
    let mut config = world.config();
    config.env = DiscoveryEnv {
        dsh_bin: Some("bin/dsh".into()),
        path: Some(world.path("bin").into_os_string()),
    };
    let discovery = Host::new(config.clone()).discover().await;
    assert!(discovery.available(), "{discovery:?}");
    assert_eq!(discovery.executable, Some(world.dsh()));
    assert!(
        world
            .logs()
            .iter()
            .any(|line| line.contains("DSH_BIN=bin/dsh ignored")),
        "{:?}",
        world.logs()
    );

    config.env.path = Some(world.path("project").into_os_string());
    let discovery = Host::new(config).discover().await;
    assert_eq!(code(&discovery), Some("DSH_PROFILE_BINARY_NOT_FOUND"));
    assert!(discovery
        .unavailable
        .is_some_and(|d| d.message.contains("DSH_BIN")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_versions_make_it_unavailable() {
    for (answer, expected) in [
        (
            json!({"stdout": "", "exit": 0}),
            "DSH_PROFILE_VERSION_FAILED",
        ),
        (
            json!({"stdout": "0.1.7\n", "exit": 1}),
            "DSH_PROFILE_VERSION_FAILED",
        ),
        (
            json!("DeepSeek Harness, latest"),
            "DSH_PROFILE_VERSION_UNPARSEABLE",
        ),
        (json!("0.1"), "DSH_PROFILE_VERSION_UNPARSEABLE"),
    ] {
        let world = World::new(json!({"version": answer}));
        let discovery = discover(&world).await;
        assert_eq!(
            code(&discovery),
            Some(expected),
            "version answer {answer}: {discovery:?}"
        );
        assert_eq!(world.starts("probe"), 0, "no probe after a failed version");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untested_version_is_available_with_a_warning() {
    let world = World::new(json!({"version": "v0.2.0"}));
    let discovery = discover(&world).await;
    assert!(discovery.available(), "{discovery:?}");
    assert_eq!(discovery.warnings.len(), 1);
    assert!(
        discovery.warnings[0].starts_with("DSH_PROFILE_UNTESTED_VERSION: "),
        "{:?}",
        discovery.warnings
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_gate_names_what_is_wrong() {
    let cases: [(Value, &str); 5] = [
        (json!({"profile": "missing"}), "DSH_PROFILE_PROBE_FAILED"),
        (
            json!({"probe": {"patch": {"runtime": "multica"}}}),
            "DSH_PROFILE_RUNTIME_MISMATCH",
        ),
        (
            json!({"probe": {"patch": {"protocol_version": 2}}}),
            "DSH_PROFILE_PROTOCOL_UNSUPPORTED",
        ),
        (
            json!({"probe": {"patch": {"capabilities": {"session_resume": null}}}}),
            "DSH_PROFILE_CAPABILITY_MISSING",
        ),
        (
            json!({"probe": {"stdout": "{\"v\":1,\"type\":\"probe\"\n", "exit": 0}}),
            "DSH_PROFILE_PROBE_INVALID",
        ),
    ];
    for (scenario, expected) in cases {
        let world = if scenario.get("profile").is_some() {
            World::without_profile(scenario.clone())
        } else {
            World::new(scenario.clone())
        };
        let discovery = discover(&world).await;
        assert_eq!(
            code(&discovery),
            Some(expected),
            "scenario {scenario}: {discovery:?}"
        );
        let diagnostic = discovery.unavailable.map(|d| d.message).unwrap_or_default();
        assert!(
            diagnostic.contains("setup") || diagnostic.contains("profile"),
            "not actionable: {diagnostic}"
        );
    }
}

/// A bundle tarball and its manifest in the world's root; `tamper` breaks the pinned hash.
fn bundle(world: &World, tamper: bool) -> (std::path::PathBuf, std::path::PathBuf) {
    let tarball = world.path("open-design-runtime-0.1.0.tgz");
    std::fs::write(&tarball, b"pretend this is a packed npm tarball")
        .unwrap_or_else(|e| panic!("tarball: {e}"));
    let mut sha256 = dsh_host::setup::sha256_of(&tarball).unwrap_or_default();
    if tamper {
        sha256 = sha256.replace(|c: char| c != '0', "0");
    }
    let manifest = world.path("manifest.json");
    let body = json!({"package": "@open-design/dsh-runtime", "version": "0.1.0", "sha256": sha256,
                      "file": "open-design-runtime-0.1.0.tgz"});
    std::fs::write(&manifest, body.to_string()).unwrap_or_else(|e| panic!("manifest: {e}"));
    (tarball, manifest)
}

fn profile_installed(world: &World) -> bool {
    world
        .home()
        .join("profiles/open-design/package.json")
        .is_file()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_matching_bundle_is_installed_and_probed_again() {
    let world = World::without_profile(json!({}));
    let (tarball, manifest) = bundle(&world, false);
    let installed = world.host().setup(&tarball, &manifest).await;
    assert!(installed.is_ok(), "{installed:?}");
    assert!(profile_installed(&world));
    assert_eq!(world.starts("plugin"), 1);
    assert_eq!(
        world.starts("probe"),
        1,
        "setup probes again after installing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_or_missing_bundle_never_invokes_dsh() {
    let world = World::without_profile(json!({}));
    let (tarball, manifest) = bundle(&world, true);
    let refused = world.host().setup(&tarball, &manifest).await;
    assert_eq!(
        refused.map_err(|d| d.code),
        Err("DSH_PROFILE_BUNDLE_HASH_MISMATCH")
    );
    std::fs::remove_file(&tarball).unwrap_or_else(|e| panic!("rm: {e}"));
    let missing = world.host().setup(&tarball, &manifest).await;
    assert_eq!(
        missing.map_err(|d| d.code),
        Err("DSH_PROFILE_BUNDLE_MISSING")
    );
    assert!(
        world.journal().is_empty(),
        "dsh was invoked: {:?}",
        world.journal()
    );
    assert!(!profile_installed(&world));
}
