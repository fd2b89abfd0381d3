//! `cargo xtask dist --bins <the test build>` (the test build's binaries packaged as they are,
//! not a second build): the archive matches its checksum file, the Python wheel is no bigger than the npm platform package
//! (`python_wheel.rs` installs it), and the npm tarballs install offline, in a directory of their
//! own, into an npm project that has a dependency of its own (never installed) and whose PATH has
//! no cargo, where `npx fake-dsh`, `npx dsh-conformance run` (the embedded
//! corpus against the reference host) and the same against the Node.js example host work. No
//! package.json the dist writes names a package the same run did not write (an unclaimed npm name
//! would be asked of the registry by the project's next `npm install`), and neither does the
//! kit's lockfile after the install; the project's own manifest is left alone.
//! (action.yml's shell steps have their own tests: `action_scripts.rs`.) Skipped, saying so, when
//! npm is not installed (`.ci/run` installs it).

use crate::support;

use support::{checked, repo_root};

use sha2::{Digest, Sha256};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

fn has_program(dir: &Path, name: &str) -> bool {
    dir.join(name).is_file()
}

/// The PATH entries that hold no `cargo` (npm and node stay reachable).
fn path_without_cargo() -> OsString {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let kept: Vec<PathBuf> = std::env::split_paths(&path)
        .filter(|dir| !has_program(dir, "cargo"))
        .collect();
    std::env::join_paths(kept).expect("PATH entries rejoin")
}

/// The one file in `dir` whose name starts with `prefix` and ends with `suffix`.
fn one_file(dir: &Path, prefix: &str, suffix: &str) -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("lists")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            name.starts_with(prefix) && name.ends_with(suffix)
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{prefix}*{suffix} in {}: {found:?}",
        dir.display()
    );
    found[0].clone()
}

/// A command in the npm project with the cargo-less PATH and a cache inside the temp dir.
fn in_project(program: &str, project: &Path, cache: &Path, path: &OsString) -> Command {
    let mut command = Command::new(program);
    command
        .current_dir(project)
        .env("PATH", path)
        .env("npm_config_cache", cache)
        .env("npm_config_update_notifier", "false")
        .env_remove("DSH_CONFORMANCE_FIXTURES")
        .env_remove("FAKE_DSH_BIN");
    command
}

fn assert_checksum_matches(dist: &Path) {
    let archive = one_file(dist, "dsh-conformance-", ".tar.gz");
    let checksum = std::fs::read_to_string(archive.with_extension("gz.sha256")).expect("checksum");
    let bytes = std::fs::read(&archive).expect("archive");
    let hex: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let name = archive.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(checksum, format!("{hex}  {name}\n"));
}

/// A package.json's name and every package its dependency fields name.
fn names_in(manifest: &serde_json::Value) -> (String, Vec<String>) {
    let name = manifest["name"].as_str().expect("a name").to_string();
    let mut named = Vec::new();
    for field in [
        "dependencies",
        "optionalDependencies",
        "peerDependencies",
        "devDependencies",
    ] {
        if let Some(map) = manifest[field].as_object() {
            named.extend(map.keys().cloned());
        }
    }
    for field in ["bundleDependencies", "bundledDependencies"] {
        if let Some(list) = manifest[field].as_array() {
            named.extend(list.iter().filter_map(|v| v.as_str()).map(str::to_string));
        }
    }
    (name, named)
}

/// The package.json inside an `npm pack` tarball.
fn packed_manifest(tarball: &Path) -> serde_json::Value {
    let mut tar = Command::new("tar");
    tar.arg("-xzOf").arg(tarball).arg("package/package.json");
    let output = checked(tar, "tar -xzOf package/package.json");
    serde_json::from_slice(&output.stdout).expect("package.json is JSON")
}

/// Every package the dist's tarballs name is one of the dist's own packages; returns their names.
fn assert_names_only_its_own_packages(tarballs: &[&Path]) -> Vec<String> {
    let manifests: Vec<(String, Vec<String>)> = tarballs
        .iter()
        .map(|tarball| names_in(&packed_manifest(tarball)))
        .collect();
    let written: Vec<String> = manifests.iter().map(|(name, _)| name.clone()).collect();
    for (name, named) in &manifests {
        let foreign: Vec<&String> = named.iter().filter(|n| !written.contains(n)).collect();
        assert!(
            foreign.is_empty(),
            "{name}'s package.json names {foreign:?}, which this dist did not write ({written:?}): \
             a project's next `npm install` would ask the registry for them"
        );
    }
    written
}

#[test]
fn npm_tarballs_install_offline_beside_a_projects_own_dependencies_and_run_the_gate_without_cargo()
{
    let npm_found = Command::new("npm").arg("--version").output();
    if !npm_found.is_ok_and(|output| output.status.success()) {
        dsh_test_support::skip("npm not installed");
        return;
    }
    let temp = tempfile::tempdir().expect("temp dir");
    let dist = temp.path().join("dist");
    let mut xtask = Command::new(env!("CARGO_BIN_EXE_xtask"));
    // The test build's binaries, packaged as they are: building them again here would relink
    // the kit's binaries that other test binaries are running.
    let bins = dsh_test_support::target_profile_dir().expect("the test runs under cargo");
    for name in ["fake-dsh", "dsh-conformance", "dsh-host-driver"] {
        dsh_test_support::binary(name);
    }
    xtask
        .args(["dist", "--bins"])
        .arg(&bins)
        .arg("--out")
        .arg(&dist);
    checked(xtask, "cargo xtask dist --bins");
    assert_checksum_matches(&dist);
    let npm_dir = dist.join("npm");
    let main_name = format!("dsh-conformance-{}.tgz", env!("CARGO_PKG_VERSION"));
    let main = npm_dir.join(&main_name);
    assert!(main.is_file(), "no {main_name} in {}", npm_dir.display());
    let platforms: Vec<PathBuf> = std::fs::read_dir(&npm_dir)
        .expect("lists")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path != &main)
        .collect();
    assert_eq!(platforms.len(), 1, "one platform package: {platforms:?}");
    let platform = &platforms[0];
    // The Python wheel is written beside them, and is no bigger than the npm platform package.
    let wheel = one_file(&dist.join("python"), "dsh_conformance-", ".whl");
    let size = |path: &Path| std::fs::metadata(path).expect("stat").len();
    assert!(
        size(&wheel) <= size(platform),
        "{} is {} bytes, the npm platform package {}",
        wheel.display(),
        size(&wheel),
        size(platform)
    );
    let written = assert_names_only_its_own_packages(&[&main, platform]);

    // A real project has dependencies of its own, which an offline install into the project
    // would have to resolve from an empty cache (ENOTCACHED): the guide installs the kit in a
    // directory of its own (`--prefix`), which leaves the project's manifest alone.
    let project = temp.path().join("project");
    let cache = temp.path().join("npm-cache");
    std::fs::create_dir_all(&project).expect("mkdir");
    let manifest = r#"{"name":"gate-test","version":"0.0.0","private":true,"dependencies":{"left-pad":"1.3.0"}}"#;
    std::fs::write(project.join("package.json"), manifest).expect("write");
    let kit = project.join(".dsh-conformance");
    let path = path_without_cargo();
    assert!(
        std::env::split_paths(&path).all(|dir| !has_program(&dir, "cargo")),
        "cargo is still on the test's PATH"
    );
    let mut install = in_project("npm", &project, &cache, &path);
    install.args(["install", "--prefix", ".dsh-conformance", "--offline"]);
    install.args(["--ignore-scripts", "--no-audit", "--no-fund"]);
    install.arg(&main).arg(platform);
    checked(install, "npm install --prefix .dsh-conformance --offline");
    assert_eq!(
        std::fs::read_to_string(project.join("package.json")).expect("package.json"),
        manifest,
        "the project's manifest is left alone"
    );
    // What the next ordinary `npm install` of the kit would resolve: only the two packages.
    let lock: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(kit.join("package-lock.json")).expect("package-lock.json"),
    )
    .expect("the lockfile is JSON");
    let locked: Vec<&String> = lock["packages"]
        .as_object()
        .expect("lockfile packages")
        .keys()
        .filter(|key| !key.is_empty())
        .collect();
    for key in &locked {
        let name = key.strip_prefix("node_modules/").unwrap_or(key);
        assert!(
            written.iter().any(|own| own == name),
            "the lockfile holds {key}, not one of {written:?}: {locked:?}"
        );
    }

    let mut version = in_project("npx", &project, &cache, &path);
    version.args([
        "--prefix",
        ".dsh-conformance",
        "--offline",
        "fake-dsh",
        "--version",
    ]);
    let output = checked(version, "npx fake-dsh --version");
    assert!(!String::from_utf8_lossy(&output.stdout).trim().is_empty());

    let mut reference = in_project("npx", &project, &cache, &path);
    reference.args([
        "--prefix",
        ".dsh-conformance",
        "--offline",
        "dsh-conformance",
        "run",
        "--case",
        "lifecycle.*",
    ]);
    reference.args(["--jobs", "8"]);
    let output = checked(reference, "npx dsh-conformance run (reference host)");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("using the embedded corpus"), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("lifecycle.three-turns-one-session"),
        "{stdout}"
    );

    let driver = repo_root().join("examples/node-host/driver.mjs");
    let mut node_host = in_project("npx", &project, &cache, &path);
    node_host.args([
        "--prefix",
        ".dsh-conformance",
        "--offline",
        "dsh-conformance",
    ]);
    node_host.args(["run", "--host"]);
    node_host.arg(format!("node {}", driver.display()));
    node_host.args(["--case", "lifecycle.*", "--jobs", "8"]);
    let output = checked(node_host, "npx dsh-conformance run (Node.js host)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("lifecycle.three-turns-one-session"),
        "{stdout}"
    );
}
