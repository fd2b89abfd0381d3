//! fake-dsh against the real `@deepseek-ai/dsh` (installed by `cargo xtask real-dsh` under
//! `target/real-dsh/`) over the same CLI surfaces: exit status, whether stdout and stderr are
//! empty, and the files each leaves in a fresh `DSH_HOME`. Any difference not listed in
//! [`DELIBERATE`] (and in docs/fake-dsh.md, "Fidelity") fails. Skips, saying so, when the real
//! dsh is not installed. (It lives with the kit's tests to share their bounded spawn helper.)

use dsh_runtime_check::output_within;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// One surface: the arguments (`{missing}` stands for a tarball path that does not exist).
const SURFACES: &[&[&str]] = &[
    &["--version"],
    &["-V"],
    &["--version", "--bogus"],
    &["--help"],
    &[],
    &["--bogus"],
    &["--profile"],
    &["--profile", "open-design"],
    &["--profile", "open-design", "--probe"],
    &["--profile", "open-design", "--stdio"],
    &["--profile", "open-design", "--models"],
    &["--profile", "open-design", "--list-models"],
    &["--profile", "multica", "--stdio"],
    &["--list-models"],
    &["plugin"],
    &["plugin", "--help"],
    &["plugin", "--profile", "open-design"],
    &["plugin", "--profile", "open-design", "add"],
    &["plugin", "--profile", "open-design", "add", "{missing}"],
];

/// Differences kept on purpose: (surface, aspect, why). Aspects: `exit`, `stdout`, `stderr`,
/// `files`.
const DELIBERATE: &[(&str, &str, &str)] = &[
    (
        "plugin --profile open-design add",
        "stdout",
        "the real dsh runs `pnpm add` with no package and forwards pnpm's complaint on stdout; \
         fake-dsh's clap reports the missing tarball on stderr",
    ),
    (
        "plugin --profile open-design add",
        "files",
        "the real dsh initializes the profile directory before pnpm fails, leaving a profile \
         that later hangs; fake-dsh leaves nothing",
    ),
    (
        "plugin --profile open-design add {missing}",
        "files",
        "the real dsh initializes the profile directory before pnpm fails, leaving a profile \
         that later hangs; fake-dsh leaves nothing",
    ),
];

/// What one run showed.
#[derive(Debug, PartialEq)]
struct Seen {
    exit: Option<i32>,
    stdout: bool,
    stderr: bool,
    files: BTreeSet<String>,
}

/// Runs `program args` in a fresh world (`HOME`, `TMPDIR` and `DSH_HOME` inside it; own process
/// group, stdin closed, killed with its group after 60 s) and records what it showed.
fn observe(program: &Path, args: &[&str]) -> Seen {
    let world = tempfile::tempdir().unwrap();
    let (home, tmp) = (world.path().join("dsh-home"), world.path().join("tmp"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    let missing = world.path().join("missing.tgz");
    let args: Vec<String> = args
        .iter()
        .map(|arg| arg.replace("{missing}", &missing.to_string_lossy()))
        .collect();
    let mut command = Command::new(program);
    command
        .args(&args)
        .current_dir(world.path())
        .env("DSH_HOME", &home)
        .env("HOME", world.path())
        .env("TMPDIR", &tmp)
        .env("DEEPSEEK_BASE_URL", "http://127.0.0.1:9")
        .env("DEEPSEEK_API_KEY", "differential-canary")
        .env_remove("FAKE_DSH_SCENARIO")
        .env_remove("FAKE_DSH_JOURNAL");
    let output = output_within(command, Stdio::null(), Duration::from_secs(60)).unwrap();
    Seen {
        exit: output.status.code(),
        stdout: !output.stdout.is_empty(),
        stderr: !output.stderr.is_empty(),
        files: files_under(&home),
    }
}

/// The real dsh materializes a shared `profiles/node_modules` (its runtime packages, for profiles
/// to import) on every profile boot, even a failing one; fake-dsh has no packages to share. This
/// one deliberate difference applies to every surface, so it is taken out before comparing.
const SHARED_PACKAGES: &str = "profiles/node_modules";

/// The paths under `dir`, two levels deep, relative (what a run created in the home), without
/// [`SHARED_PACKAGES`] and a `profiles` directory that held only it.
fn files_under(dir: &Path) -> BTreeSet<String> {
    let mut found = all_files_under(dir);
    found.remove(SHARED_PACKAGES);
    if !found.iter().any(|path| path.starts_with("profiles/")) {
        found.remove("profiles");
    }
    found
}

fn all_files_under(dir: &Path) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        found.insert(name.clone());
        if entry.path().is_dir() {
            for inner in std::fs::read_dir(entry.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                found.insert(format!("{name}/{}", inner.file_name().to_string_lossy()));
            }
        }
    }
    found
}

/// The aspects in which two runs differ.
fn differences(real: &Seen, fake: &Seen) -> Vec<&'static str> {
    let mut differ = Vec::new();
    if real.exit != fake.exit {
        differ.push("exit");
    }
    if real.stdout != fake.stdout {
        differ.push("stdout");
    }
    if real.stderr != fake.stderr {
        differ.push("stderr");
    }
    if real.files != fake.files {
        differ.push("files");
    }
    differ
}

#[test]
fn fake_dsh_matches_the_real_dsh_on_every_cli_surface_but_the_listed_ones() {
    let Some(real) = dsh_test_support::real_dsh() else {
        return;
    };
    let fake = dsh_test_support::binary("fake-dsh");
    let mut unexplained = Vec::new();
    for args in SURFACES {
        let surface = args.join(" ");
        let (seen_real, seen_fake) = (observe(&real, args), observe(&fake, args));
        for aspect in differences(&seen_real, &seen_fake) {
            if !DELIBERATE
                .iter()
                .any(|(s, a, _)| *s == surface && *a == aspect)
            {
                unexplained.push(format!(
                    "`dsh {surface}` differs in {aspect}: real {seen_real:?}, fake {seen_fake:?}"
                ));
            }
        }
    }
    assert!(unexplained.is_empty(), "{}", unexplained.join("\n"));
}

#[test]
fn every_deliberate_difference_names_a_surface_that_is_compared() {
    for (surface, aspect, why) in DELIBERATE {
        assert!(
            SURFACES.iter().any(|args| args.join(" ") == *surface),
            "{surface}"
        );
        assert!(["exit", "stdout", "stderr", "files"].contains(aspect));
        assert!(why.len() > 20);
    }
}
