//! The rows of `cargo xtask bench` that put fake-dsh beside the real dsh (when `cargo xtask
//! real-dsh` has installed it): `--version`, a `--stdio` start to `ready` with the open-design
//! profile (the kit's bundle, `examples/real-dsh-profile`, installed into a scratch home), and
//! `check-runtime` against each. Everything the runtimes write stays in a scratch directory;
//! the only endpoint they get is a closed loopback port. Timings are printed, never asserted.

use crate::bench::{first_line_latency, installed_dsh_home, millis, Figure, Scratch};
use crate::bench_runs::{sample_run, seconds};
use crate::kit::Kit;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A closed loopback port: no runtime process of the bench reaches a network.
const NO_MODEL: &str = "http://127.0.0.1:9";

/// A scratch world both runtimes run in: `TMPDIR`, `HOME`, a fake-dsh home with the profile and
/// a real-dsh home with the kit's bundle installed.
struct World {
    scratch: Scratch,
    fake_home: PathBuf,
    real_home: PathBuf,
}

impl World {
    fn env(&self, home: &Path) -> Vec<(&'static str, PathBuf)> {
        vec![
            ("TMPDIR", self.scratch.0.clone()),
            ("HOME", self.scratch.0.join("user-home")),
            ("DSH_HOME", home.to_path_buf()),
            ("DEEPSEEK_BASE_URL", PathBuf::from(NO_MODEL)),
            ("DEEPSEEK_API_KEY", PathBuf::from("bench")),
        ]
    }

    fn command(&self, program: &Path, home: &Path, args: &[&str]) -> Command {
        let mut command = Command::new(program);
        command
            .args(args)
            .current_dir(&self.scratch.0)
            .envs(self.env(home))
            .env_remove("FAKE_DSH_SCENARIO")
            .env_remove("FAKE_DSH_JOURNAL");
        command
    }
}

/// `dsh plugin --profile open-design add` of the kit's bundle (packed with `tar` as an npm
/// tarball) into `home`, with pnpm's registry a closed port (the bundle has no dependencies).
fn install_bundle(real: &Path, root: &Path, scratch: &Path, home: &Path) -> Result<(), String> {
    let tarball = scratch.join("bundle.tgz");
    let status = Command::new("tar")
        .arg("-czf")
        .arg(&tarball)
        .args([
            "--exclude",
            "node_modules",
            "--transform",
            "s,^real-dsh-profile,package,",
        ])
        .arg("-C")
        .arg(root.join("examples"))
        .arg("real-dsh-profile")
        .status()
        .map_err(|e| format!("tar: {e}"))?;
    if !status.success() {
        return Err(format!("tar could not pack the kit's bundle ({status})"));
    }
    let output = Command::new(real)
        .args(["plugin", "--profile", "open-design", "add"])
        .arg(&tarball)
        .current_dir(scratch)
        .env("TMPDIR", scratch)
        .env("HOME", scratch.join("user-home"))
        .env("DSH_HOME", home)
        .env("DEEPSEEK_BASE_URL", NO_MODEL)
        .env("npm_config_registry", "http://127.0.0.1:9/")
        .output()
        .map_err(|e| format!("{}: {e}", real.display()))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "plugin add of the kit's bundle failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    ))
}

/// Peak RSS in KiB of `program args` in the world and its waited-for descendants (GNU `time`'s
/// `%M`), whatever its exit status (a `--stdio` start whose stdin closes before an execute exits
/// 1); `None` without `/usr/bin/time`.
fn peak_rss_kib(world: &World, program: &Path, home: &Path, args: &[&str]) -> Option<u64> {
    let out = world.scratch.0.join("time.out");
    let mut timed = world.command(Path::new("/usr/bin/time"), home, &["-f", "%M", "-o"]);
    timed
        .arg(&out)
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    timed.status().ok()?;
    let text = std::fs::read_to_string(&out).ok()?;
    let _ = std::fs::remove_file(&out);
    text.lines().last()?.trim().parse().ok()
}

fn mib(kib: Option<u64>) -> String {
    match kib {
        Some(kib) => format!("{:.1} MiB", kib as f64 / 1024.0),
        None => "peak RSS not measured (no /usr/bin/time)".into(),
    }
}

/// One surface of both runtimes: exec to first line (median of `rounds`) and peak RSS.
fn side_by_side(
    world: &World,
    kit: &Kit,
    real: &Path,
    args: &[&str],
    rounds: usize,
    name: String,
) -> Result<Figure, String> {
    let fake_time = first_line_latency(
        || world.command(&kit.fake_dsh, &world.fake_home, args),
        rounds,
    )?;
    let real_time = first_line_latency(|| world.command(real, &world.real_home, args), rounds)?;
    let fake_rss = peak_rss_kib(world, &kit.fake_dsh, &world.fake_home, args);
    let real_rss = peak_rss_kib(world, real, &world.real_home, args);
    let memory_ratio = match (fake_rss, real_rss) {
        (Some(fake), Some(real)) => format!(", {:.3}x memory", fake as f64 / real as f64),
        _ => String::new(),
    };
    Ok(Figure {
        name,
        value: format!("fake-dsh: {}, {}", millis(fake_time), mib(fake_rss)),
        baseline: format!("real dsh: {}, {}", millis(real_time), mib(real_rss)),
        ratio: format!(
            "{:.3}x time{memory_ratio}",
            fake_time.as_secs_f64() / real_time.as_secs_f64()
        ),
        goal: "fake-dsh far cheaper (it exists for keyless tests)".into(),
    })
}

/// `dsh-conformance check-runtime` (every check, `--jobs 1`) against both runtimes, each with
/// its home.
fn check_runtime(world: &World, kit: &Kit, real: &Path, real_name: &str) -> Result<Figure, String> {
    let run = |dsh: &Path, home: &Path| {
        let mut command = Command::new(&kit.conformance);
        command
            .arg("check-runtime")
            .arg("--runtime")
            .arg(dsh)
            .arg("--dsh-home")
            .arg(home)
            .current_dir(&world.scratch.0)
            .env("TMPDIR", &world.scratch.0)
            .env_remove("FAKE_DSH_SCENARIO")
            .env_remove("FAKE_DSH_JOURNAL");
        sample_run(command)
    };
    let fake = run(&kit.fake_dsh, &world.fake_home)?;
    let real = run(real, &world.real_home)?;
    let verdict = |success: bool| if success { "" } else { ", some checks failed" };
    Ok(Figure {
        name: "check-runtime, every check, --jobs 1, the profile in --dsh-home".into(),
        value: format!(
            "{real_name}: {}{}",
            seconds(real.wall),
            verdict(real.success)
        ),
        baseline: format!("fake-dsh: {}{}", seconds(fake.wall), verdict(fake.success)),
        ratio: format!("{:.1}x", real.wall.as_secs_f64() / fake.wall.as_secs_f64()),
        goal: "the real dsh in seconds, not minutes (issue 12)".into(),
    })
}

/// The rows, or one row saying why they were not measured.
pub fn rows(kit: &Kit, root: &Path) -> Result<Vec<Figure>, String> {
    let real_name = format!("the real dsh {}", crate::real_dsh::DSH_VERSION);
    let real = crate::real_dsh::install_dir().join("dsh");
    if !real.is_file() {
        return Ok(vec![Figure {
            name: format!("fake-dsh vs {real_name}"),
            value: "not measured: run `cargo xtask real-dsh` first".into(),
            baseline: "-".into(),
            ratio: "-".into(),
            goal: "fake-dsh far cheaper".into(),
        }]);
    }
    let scratch = Scratch::new("real-dsh")?;
    let fake_home = installed_dsh_home(&scratch.0)?;
    let real_home = scratch.0.join("real-home");
    for dir in [&real_home, &scratch.0.join("user-home")] {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    install_bundle(&real, root, &scratch.0, &real_home)?;
    let world = World {
        scratch,
        fake_home,
        real_home,
    };
    Ok(vec![
        side_by_side(
            &world,
            kit,
            &real,
            &["--version"],
            10,
            format!("fake-dsh vs {real_name}: `--version`, exec to first line (median of 10), peak RSS"),
        )?,
        side_by_side(
            &world,
            kit,
            &real,
            &["--profile", "open-design", "--stdio"],
            10,
            format!(
                "fake-dsh vs {real_name} with the kit's open-design bundle: `--stdio`, exec to `ready` (median of 10), peak RSS"
            ),
        )?,
        check_runtime(&world, kit, &real, &real_name)?,
    ])
}
