//! The Python route's chores besides `dist`:
//! - `cargo xtask wheel --bins DIR --out DIR`: the wheel alone, from binaries already built (the
//!   kit's test packages the debug binaries its own run has, instead of a release build);
//! - `cargo xtask python-wheelhouse`: downloads what `examples/python-app`'s tests need besides
//!   the wheel (`examples/python-app/requirements-test.txt`, pinned, and the official client
//!   `deepseek-harness-sdk` without its runtime) into `target/python-wheelhouse/`, once, so the
//!   test installs them offline. `cargo xtask ci` runs it before the tests.

use crate::{dist, Failure, Outcome};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The official client's release the example app's tests install (fake-dsh stands in for the
/// runtime it pins, so it is installed without its dependencies, pydantic named apart).
pub const CLIENT: &str = "deepseek-harness-sdk==0.2.1rc2";

/// The `cargo xtask wheel` flags.
#[derive(Debug, clap::Args)]
pub struct WheelArgs {
    /// The directory holding the built binaries (`target/debug`, `target/release`).
    #[arg(long, value_name = "DIR")]
    pub bins: PathBuf,
    /// Where to write the wheel.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

fn failure(message: String) -> Failure {
    Failure { message, code: 2 }
}

/// `cargo xtask wheel`: strips copies of the binaries in `--bins`, writes the host's wheel.
pub fn wheel(args: &WheelArgs) -> Outcome {
    let platform = dist::host_platform().map_err(failure)?;
    let stage = args.out.join(".stage");
    let _ = std::fs::remove_dir_all(&stage);
    dist::copy_binaries(&args.bins, &stage).map_err(failure)?;
    let written = crate::wheel::write(&stage, &args.out, platform).map_err(failure)?;
    std::fs::remove_dir_all(&stage)
        .map_err(|e| failure(format!("{}: cannot remove: {e}", stage.display())))?;
    println!("{}", written.display());
    Ok(())
}

/// `target/python-wheelhouse`.
pub fn wheelhouse_dir() -> PathBuf {
    crate::target_root().join("python-wheelhouse")
}

/// The stamp a complete download leaves: the requirements it was made from.
fn recipe(requirements: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(requirements)
        .map_err(|e| format!("{}: cannot read: {e}", requirements.display()))?;
    Ok(format!("{text}{CLIENT} --no-deps\n"))
}

/// `cargo xtask python-wheelhouse`: download (or reuse) the wheelhouse; a registry that cannot
/// be reached fails loudly.
pub fn wheelhouse() -> Outcome {
    let requirements = crate::workspace_root().join("examples/python-app/requirements-test.txt");
    let recipe = recipe(&requirements).map_err(failure)?;
    let dir = wheelhouse_dir();
    let stamp = dir.join("complete.txt");
    if std::fs::read_to_string(&stamp).is_ok_and(|done| done == recipe) {
        eprintln!("xtask: python wheelhouse up to date: {}", dir.display());
        return Ok(());
    }
    let _ = std::fs::remove_dir_all(&dir);
    let download = |extra: &[&str]| {
        let mut pip = Command::new("python3");
        pip.args(["-m", "pip", "download", "--quiet", "--dest"])
            .arg(&dir)
            .args(extra);
        pip
    };
    let requirements_arg = requirements.display().to_string();
    crate::run(
        "pip download the example app's test requirements",
        download(&["-r", &requirements_arg]),
    )?;
    crate::run(
        "pip download the official Python client",
        download(&["--no-deps", "--pre", CLIENT]),
    )?;
    std::fs::write(&stamp, recipe)
        .map_err(|e| failure(format!("{}: cannot write: {e}", stamp.display())))?;
    eprintln!("xtask: python wheelhouse in {}", dir.display());
    Ok(())
}
