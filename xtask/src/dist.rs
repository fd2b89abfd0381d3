//! `cargo xtask dist`: the kit's binaries packaged for people without a Rust toolchain.
//!
//! For the machine it runs on (one of [`PLATFORMS`]) it writes, under `target/dist/` (or `--out`):
//! - `dsh-conformance-<version>-<platform>.tar.gz`, the three binaries and the README, and beside
//!   it `<archive>.sha256` (`<hex>  <file name>`, as `sha256sum -c` reads);
//! - `python/`: the wheel `dsh_conformance-<version>-py3-none-<platform tag>.whl` (the binaries as
//!   its scripts, the `dsh_conformance` module and pytest plugin; see [`crate::wheel`]);
//! - `npm/`: the platform package `@dsh-conformance/<platform>` (binaries, `os`/`cpu` fields) and
//!   the main package `dsh-conformance` (JS shims from `npm/dsh-conformance/`), both packed by
//!   `npm pack`.
//!
//! The main package names no other package (no `optionalDependencies`): the npm names are not
//! claimed yet, so a name it gave would make a user's next `npm install` ask the registry for a
//! package anyone could register. Users install the platform tarball beside it explicitly (README);
//! docs/releasing.md restores the per-platform `optionalDependencies` once the names are claimed.
//!
//! The release workflow runs it once per platform and publishes the platform packages before the
//! main one.

use crate::{cargo, run, workspace_root, Failure, Outcome};
use serde_json::json;
use sha2::{Digest, Sha256};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The binaries every archive and platform package holds.
pub const BINARIES: [&str; 3] = ["dsh-conformance", "fake-dsh", "dsh-host-driver"];
/// The platforms the kit builds for, in npm's `<process.platform>-<process.arch>` names.
pub const PLATFORMS: [&str; 4] = ["linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64"];
/// The npm scope of the platform packages.
const SCOPE: &str = "@dsh-conformance";
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The `cargo xtask dist` flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The cargo profile to build (`release` for distribution; `dev` reuses the test build).
    #[arg(long, default_value = "release")]
    pub profile: String,
    /// Where to write the archives and `npm/` (default: target/dist).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Package the binaries already built in this directory instead of building (the tests
    /// package the test build's, so they relink nothing that other tests are running).
    #[arg(long, value_name = "DIR", conflicts_with = "profile")]
    pub bins: Option<PathBuf>,
}

/// What `dist` wrote.
#[derive(Debug)]
pub struct Written {
    pub archive: PathBuf,
    pub checksum: PathBuf,
    pub npm_main: PathBuf,
    pub npm_platform: PathBuf,
    pub wheel: PathBuf,
}

fn failure(message: String) -> Failure {
    Failure { message, code: 2 }
}

/// This machine's platform name, if the kit supports it.
pub fn host_platform() -> Result<&'static str, String> {
    let os = match std::env::consts::OS {
        "linux" => "linux",
        "macos" => "darwin",
        other => {
            return Err(format!(
                "the kit does not build for {other} (Linux and macOS only)"
            ))
        }
    };
    let cpu = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => {
            return Err(format!(
                "the kit does not build for {other} CPUs (x64 and arm64)"
            ))
        }
    };
    let name = format!("{os}-{cpu}");
    PLATFORMS
        .into_iter()
        .find(|platform| *platform == name)
        .ok_or_else(|| format!("no platform package for {name}"))
}

pub fn main(args: &Args) -> Outcome {
    let platform = host_platform().map_err(failure)?;
    let bins = match &args.bins {
        Some(bins) => bins.clone(),
        None => build(&args.profile)?,
    };
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| crate::target_root().join("dist"));
    // npm pack runs in the staging dirs, so every path it is given must be absolute.
    let out = std::path::absolute(&out).map_err(|e| failure(format!("{}: {e}", out.display())))?;
    let written = package(&bins, &out, platform).map_err(failure)?;
    for path in [
        &written.archive,
        &written.checksum,
        &written.npm_platform,
        &written.npm_main,
        &written.wheel,
    ] {
        println!("{}", path.display());
    }
    Ok(())
}

/// The kit's binaries built with `profile`; the directory they are in.
fn build(profile: &str) -> Result<PathBuf, Failure> {
    let mut build = cargo();
    build.args(["build", "--quiet", "--bins", "--profile", profile]);
    for package in ["fake-dsh", "dsh-host", "dsh-conformance"] {
        build.args(["--package", package]);
    }
    run(&format!("cargo build --profile {profile}"), build)?;
    Ok(crate::target_root().join(profile_dir(profile)))
}

/// The target subdirectory cargo builds a profile into.
fn profile_dir(profile: &str) -> &str {
    match profile {
        "dev" | "test" => "debug",
        "bench" => "release",
        other => other,
    }
}

/// Writes the archive, its checksum and both npm packages from the binaries in `bins`.
pub fn package(bins: &Path, out: &Path, platform: &str) -> Result<Written, String> {
    let npm_dir = out.join("npm");
    let stage = out.join("stage");
    let _ = fs::remove_dir_all(&stage);
    for dir in [&npm_dir, &stage] {
        fs::create_dir_all(dir).map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
    }
    let (archive, checksum) = archive(bins, out, &stage, platform)?;
    // The archive's staging dir holds the stripped binaries: the wheel takes the same ones.
    let stripped = stage.join(format!("dsh-conformance-{VERSION}-{platform}"));
    let wheel = crate::wheel::write(&stripped, &out.join("python"), platform)?;
    let platform_dir = stage.join(format!("npm-{platform}"));
    stage_platform_package(bins, &platform_dir, platform)?;
    let main_dir = stage.join("npm-main");
    stage_main_package(&main_dir)?;
    let npm_platform = npm_pack(&platform_dir, &npm_dir)?;
    let npm_main = npm_pack(&main_dir, &npm_dir)?;
    fs::remove_dir_all(&stage).map_err(|e| format!("{}: cannot remove: {e}", stage.display()))?;
    Ok(Written {
        archive,
        checksum,
        npm_main,
        npm_platform,
        wheel,
    })
}

/// Copies the three binaries into `dir` and strips their debug info (`strip -S`, on Linux and
/// macOS alike): a release build has little, a `dev` build's would make 90 MB packages.
pub fn copy_binaries(bins: &Path, dir: &Path) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
    for name in BINARIES {
        let from = bins.join(name);
        let to = dir.join(name);
        fs::copy(&from, &to)
            .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))?;
        let mut strip = Command::new("strip");
        strip.arg("-S").arg(&to);
        run_tool("strip", strip)?;
    }
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    fs::write(path, text).map_err(|e| format!("{}: cannot write: {e}", path.display()))
}

/// `dsh-conformance-<version>-<platform>.tar.gz` and its `.sha256`.
fn archive(
    bins: &Path,
    out: &Path,
    stage: &Path,
    platform: &str,
) -> Result<(PathBuf, PathBuf), String> {
    let name = format!("dsh-conformance-{VERSION}-{platform}");
    let top = stage.join(&name);
    copy_binaries(bins, &top)?;
    let readme = workspace_root().join("README.md");
    fs::copy(&readme, top.join("README.md"))
        .map_err(|e| format!("cannot copy {}: {e}", readme.display()))?;
    let archive = out.join(format!("{name}.tar.gz"));
    let mut tar = Command::new("tar");
    tar.arg("-czf")
        .arg(&archive)
        .arg("-C")
        .arg(stage)
        .arg(&name);
    run_tool("tar", tar)?;
    let bytes =
        fs::read(&archive).map_err(|e| format!("{}: cannot read: {e}", archive.display()))?;
    let checksum = out.join(format!("{name}.tar.gz.sha256"));
    write(
        &checksum,
        &format!("{}  {name}.tar.gz\n", sha256_hex(&bytes)),
    )?;
    Ok((archive, checksum))
}

/// SHA-256 of `bytes` as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// `@dsh-conformance/<platform>`: `bin/` and a package.json whose `os`/`cpu` fields make npm
/// install it only where it runs.
fn stage_platform_package(bins: &Path, dir: &Path, platform: &str) -> Result<(), String> {
    copy_binaries(bins, &dir.join("bin"))?;
    let (os, cpu) = platform.split_once('-').expect("platform names are os-cpu");
    let manifest = json!({
        "name": format!("{SCOPE}/{platform}"),
        "version": VERSION,
        "description": format!("The dsh-conformance binaries for {platform}."),
        "license": "MIT OR Apache-2.0",
        "os": [os],
        "cpu": [cpu],
        "files": ["bin/"],
        "preferUnplugged": true
    });
    write(&dir.join("package.json"), &format!("{manifest:#}\n"))?;
    write(
        &dir.join("README.md"),
        &format!("The native binaries of `dsh-conformance` for {platform}; install `dsh-conformance`, which depends on this package.\n"),
    )
}

/// `dsh-conformance`: the shims and `lib/` from `npm/dsh-conformance/`, the README, and a
/// package.json that names no other package (see the module's doc: the names are not claimed yet).
fn stage_main_package(dir: &Path) -> Result<(), String> {
    let source = workspace_root().join("npm/dsh-conformance");
    for sub in ["bin", "lib"] {
        let to = dir.join(sub);
        fs::create_dir_all(&to).map_err(|e| format!("{}: cannot create: {e}", to.display()))?;
        let from = source.join(sub);
        let entries =
            fs::read_dir(&from).map_err(|e| format!("{}: cannot list: {e}", from.display()))?;
        for entry in entries {
            let file = entry
                .map_err(|e| format!("{}: {e}", from.display()))?
                .path();
            let target = to.join(file.file_name().expect("a listed file has a name"));
            fs::copy(&file, &target).map_err(|e| format!("cannot copy {}: {e}", file.display()))?;
        }
    }
    let readme = workspace_root().join("README.md");
    fs::copy(&readme, dir.join("README.md"))
        .map_err(|e| format!("cannot copy {}: {e}", readme.display()))?;
    let bin: serde_json::Map<String, serde_json::Value> = BINARIES
        .iter()
        .map(|name| (name.to_string(), json!(format!("bin/{name}.js"))))
        .collect();
    let manifest = json!({
        "name": "dsh-conformance",
        "version": VERSION,
        "description": "Conformance kit and keyless fake runtime for the DeepSeek Harness profile stdio protocol (dsh-profile-jsonl, generation 1).",
        "license": "MIT OR Apache-2.0",
        "main": "lib/index.js",
        "bin": bin,
        "files": ["bin/", "lib/"],
        "engines": { "node": ">=18" }
    });
    write(&dir.join("package.json"), &format!("{manifest:#}\n"))
}

/// `npm pack` of `dir` into `dest`; returns the tarball's path.
fn npm_pack(dir: &Path, dest: &Path) -> Result<PathBuf, String> {
    let mut pack = Command::new("npm");
    pack.args(["pack", "--silent", "--pack-destination"])
        .arg(dest)
        .current_dir(dir);
    let output = pack
        .output()
        .map_err(|e| format!("cannot start npm (needed to pack the npm packages): {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "npm pack in {} failed: {}",
            dir.display(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let name = String::from_utf8_lossy(&output.stdout)
        .lines()
        .rev()
        .find(|line| line.ends_with(".tgz"))
        .map(str::trim)
        .map(str::to_string)
        .ok_or_else(|| format!("npm pack in {} named no tarball", dir.display()))?;
    Ok(dest.join(name))
}

/// Runs a helper tool; a failure names it.
fn run_tool(name: &str, mut command: Command) -> Result<(), String> {
    let status = command
        .status()
        .map_err(|e| format!("cannot start {name}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{name} failed ({status})"))
    }
}
