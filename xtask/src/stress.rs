//! `cargo xtask stress`: the corpus under load, to show that no check blames a correct host for
//! the machine being busy (issue 32). While one busy-loop process per core holds every core, it
//! runs, round after round, the whole host corpus against the reference host and against the Node
//! host (`examples/node-host`, with `--supervisor`), and the client corpus against the example
//! clients, each at `--jobs` above the core count and the default time scale. Every host here is
//! correct, so every case that fails the run's gate (`fail`, `xpass`, `untestable`, `error`) is a
//! false failure: each is listed (round, host, case id, verdict, rule, message), then one summary
//! line; the exit code is 1 when there is any. `--short` is one round of a few tens of cases (the
//! concurrent and hygiene cases, and the Python clients), for CI.
//!
//! The busy loops are `sh` loops that also end when this process is gone; they are killed and
//! reaped when the stress run ends, on every path (a guard's `Drop`).
//!
//! The reports go to a private directory made for this run (a fresh random name, mode 0700,
//! never one that exists already), and a report counts only if it is this run's: a regular file
//! that was not there before its run started, naming the run's own random host name. A report
//! planted in advance, or a run that wrote none, is a false failure, never a pass.

use crate::kit::Kit;
use crate::{build_kit_binaries, workspace_root, Failure, Outcome};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The flags of `cargo xtask stress`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// How many times the whole set of runs is repeated.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// One round of a few tens of cases (the concurrent and hygiene host cases, the Python
    /// clients): the CI-sized check.
    #[arg(long)]
    pub short: bool,
    /// Cases in parallel (default: twice the core count, at least the core count plus two).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Busy-loop processes (default: one per core).
    #[arg(long)]
    pub busy: Option<usize>,
}

/// The host cases `--short` selects.
const SHORT_CASES: [&str; 2] = ["*concurrent*", "hygiene.*"];

/// The client corpus's example clients: surface, interpreter, script.
const CLIENTS: [(&str, &str, &str); 4] = dsh_test_support::EXAMPLE_CLIENTS;

/// One `dsh-conformance run` of the stress set.
struct Target {
    /// The name in the listing: `reference`, `node-host`, `sdk/python3`, ...
    name: String,
    /// The `run` arguments after `run` (host, surface, selection, expectations).
    args: Vec<String>,
}

/// A case whose verdict fails the run's gate, or a run that produced no report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NonPass {
    pub round: usize,
    pub host: String,
    pub case: String,
    pub verdict: String,
    pub rule: String,
    pub why: String,
}

/// The counts of one or more runs.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    pub cases: usize,
    pub passes: usize,
    /// Verdicts the gate accepts without a pass: skipped, xfail, informational, non-strict.
    pub accepted: usize,
    pub false_failures: Vec<NonPass>,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.cases += other.cases;
        self.passes += other.passes;
        self.accepted += other.accepted;
        self.false_failures.extend(other.false_failures);
    }
}

/// The verdicts that fail `dsh-conformance run` (`dsh_results::model::Verdict::is_failure`) or
/// blame the kit: with a correct host, each is a false failure.
const FAILING: [&str; 5] = ["fail", "xpass", "untestable", "error", "interrupted"];

/// The counts and the false failures of one run's JSON report.
pub fn tally(report: &Value, round: usize, host: &str) -> Tally {
    let mut tally = Tally::default();
    let cases = report
        .get("cases")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for case in cases {
        let text = |member: &str| {
            case.get(member)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let verdict = text("verdict");
        tally.cases += 1;
        if verdict == "pass" {
            tally.passes += 1;
        } else if FAILING.contains(&verdict.as_str()) || verdict.is_empty() {
            tally.false_failures.push(NonPass {
                round,
                host: host.to_string(),
                case: text("id"),
                verdict,
                rule: text("rule"),
                why: text("why"),
            });
        } else {
            tally.accepted += 1;
        }
    }
    tally
}

/// The summary line.
pub fn summary(rounds: usize, runs: usize, tally: &Tally, wall: Duration, load: &str) -> String {
    format!(
        "stress: {rounds} round(s), {runs} run(s), {} cases, {} passes, {} accepted non-passes (skipped, xfail, informational), {} false failures; {:.0} s wall; load {load}",
        tally.cases,
        tally.passes,
        tally.accepted,
        tally.false_failures.len(),
        wall.as_secs_f64()
    )
}

/// One busy-loop process per slot, killed and reaped on drop (every path out of the stress run).
pub struct BusyLoops(Vec<Child>);

impl BusyLoops {
    /// Starts `count` busy loops; each also ends by itself once this process is gone.
    pub fn start(count: usize) -> Result<BusyLoops, String> {
        let mut loops = BusyLoops(Vec::new());
        for _ in 0..count {
            let child = Command::new("sh")
                .args(["-c", "while kill -0 \"$PPID\" 2>/dev/null; do :; done"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot start a busy loop (sh): {e}"))?;
            loops.0.push(child);
        }
        Ok(loops)
    }

    pub fn pids(&self) -> Vec<u32> {
        self.0.iter().map(Child::id).collect()
    }
}

impl Drop for BusyLoops {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
        }
        for child in &mut self.0 {
            let _ = child.wait();
        }
    }
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".to_string())
}

/// Whether `program --version` runs.
fn available(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// The runs of one round: the reference host, the Node host when `node` is installed, the
/// example clients whose interpreter is installed (each skip said once).
fn targets(kit: &Kit, short: bool) -> Vec<Target> {
    let root = workspace_root();
    let selection: Vec<String> = match short {
        true => SHORT_CASES
            .iter()
            .flat_map(|glob| ["--case".to_string(), glob.to_string()])
            .collect(),
        false => Vec::new(),
    };
    let path = |path: &Path| path.display().to_string();
    let mut targets = vec![Target {
        name: "reference".to_string(),
        args: [
            vec!["--host".to_string(), path(&kit.host_driver)],
            selection.clone(),
        ]
        .concat(),
    }];
    let node = available("node");
    if node {
        let host = format!(
            "node {} --supervisor {}",
            path(&root.join("examples/node-host/driver.mjs")),
            path(&kit.conformance)
        );
        let expectations = root.join("examples/node-host/conformance-expectations.json");
        targets.push(Target {
            name: "node-host".to_string(),
            args: [
                vec![
                    "--host".to_string(),
                    host,
                    "--expectations".to_string(),
                    path(&expectations),
                ],
                selection,
            ]
            .concat(),
        });
    } else {
        eprintln!("xtask stress: node is not installed: the Node host and clients are skipped");
    }
    let python = available("python3");
    if !python {
        eprintln!("xtask stress: python3 is not installed: the Python clients are skipped");
    }
    for (surface, interpreter, script) in CLIENTS {
        let installed = match interpreter {
            "node" => node && !short,
            _ => python,
        };
        if installed {
            targets.push(Target {
                name: format!("{surface}/{interpreter}"),
                args: vec![
                    "--surface".to_string(),
                    surface.to_string(),
                    "--host".to_string(),
                    format!("{interpreter} {}", path(&root.join(script))),
                ],
            });
        }
    }
    targets
}

/// One run: its report's tally, or the run as one false failure when it wrote no report of its
/// own (see the module doc).
fn run_one(
    kit: &Kit,
    target: &Target,
    jobs: usize,
    round: usize,
    dir: &Path,
) -> Result<Tally, String> {
    let report = dir.join(format!(
        "round{round}-{}.json",
        target.name.replace('/', "-")
    ));
    let whole_run = |verdict: String, why: String| Tally {
        false_failures: vec![NonPass {
            round,
            host: target.name.clone(),
            case: "(the whole run)".to_string(),
            verdict,
            rule: String::new(),
            why,
        }],
        ..Tally::default()
    };
    if std::fs::symlink_metadata(&report).is_ok() {
        return Ok(whole_run(
            "no run".to_string(),
            format!("{} was there before the run", report.display()),
        ));
    }
    let host_name = format!("stress-{}-{}", target.name, random_hex()?);
    let mut command = Command::new(&kit.conformance);
    command
        .arg("run")
        .args(&target.args)
        .arg("--fake-dsh")
        .arg(&kit.fake_dsh)
        .arg("--fixtures")
        .arg(&kit.fixtures)
        .args(["--jobs", &jobs.to_string(), "--color", "never"])
        .args(["--host-name", &host_name])
        .arg("--json")
        .arg(&report)
        .current_dir(workspace_root())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let output = command
        .output()
        .map_err(|e| format!("cannot start dsh-conformance: {e}"))?;
    match report_of_this_run(&report, &host_name) {
        Ok(parsed) => Ok(tally(&parsed, round, &target.name)),
        Err(why) => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let last = stderr.lines().last().unwrap_or("").to_string();
            Ok(whole_run(
                format!("exit {:?}", output.status.code()),
                format!("{why}; stderr ends: {last}"),
            ))
        }
    }
}

/// The report at `path` if this run wrote it: a regular file (not a link) naming `host_name`.
fn report_of_this_run(path: &Path, host_name: &str) -> Result<Value, String> {
    let meta = std::fs::symlink_metadata(path).map_err(|_| "no JSON report".to_string())?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    let parsed: Value = std::fs::read_to_string(path)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .ok_or_else(|| format!("{} is no JSON report", path.display()))?;
    let named = parsed["host"]["name"].as_str().unwrap_or_default();
    if named != host_name {
        return Err(format!(
            "{} names the host {named:?}, not this run's {host_name:?}",
            path.display()
        ));
    }
    Ok(parsed)
}

/// 16 random hex digits, from the OS.
fn random_hex() -> Result<String, String> {
    use std::io::Read;
    let mut bytes = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .map_err(|e| format!("cannot read /dev/urandom: {e}"))?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// A directory for this run's reports under the temp dir: a fresh random name, created (never
/// one that exists already) with mode 0700.
fn private_dir() -> Result<PathBuf, String> {
    use std::os::unix::fs::DirBuilderExt;
    let mut last = String::new();
    for _ in 0..8 {
        let dir = std::env::temp_dir().join(format!("dsh-xtask-stress-{}", random_hex()?));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) => last = format!("{}: {e}", dir.display()),
        }
    }
    Err(format!("cannot create a private directory ({last})"))
}

pub fn stress(args: &Args) -> Outcome {
    let failure = |message: String| Failure { message, code: 2 };
    eprintln!("xtask stress: building the kit (fake-dsh, dsh-host-driver, dsh-conformance)");
    build_kit_binaries(false, false)?;
    let kit = Kit::built(false);
    let cores = cores();
    let jobs = args.jobs.unwrap_or((cores * 2).max(cores + 2));
    let busy = args.busy.unwrap_or(cores);
    let rounds = if args.short { 1 } else { args.rounds.max(1) };
    let targets = targets(&kit, args.short);
    let dir = private_dir().map_err(failure)?;
    let started = Instant::now();
    let result = {
        let loops = BusyLoops::start(busy).map_err(failure)?;
        eprintln!(
            "xtask stress: {busy} busy loop(s) (pids {:?}) on {cores} core(s); {rounds} round(s) of {} run(s) at --jobs {jobs}",
            loops.pids(),
            targets.len()
        );
        let mut all = Tally::default();
        let mut result = Ok(());
        for round in 1..=rounds {
            for target in &targets {
                let began = Instant::now();
                match run_one(&kit, target, jobs, round, &dir) {
                    Ok(tally) => {
                        eprintln!(
                            "xtask stress: round {round} {}: {} cases, {} passes, {} false failures ({:.0} s, load {})",
                            target.name,
                            tally.cases,
                            tally.passes,
                            tally.false_failures.len(),
                            began.elapsed().as_secs_f64(),
                            load_average()
                        );
                        all.add(tally);
                    }
                    Err(message) => result = Err(failure(message)),
                }
                if result.is_err() {
                    break;
                }
            }
            if result.is_err() {
                break;
            }
        }
        let load = load_average();
        drop(loops);
        result.map(|()| (all, load))
    };
    let _ = std::fs::remove_dir_all(&dir);
    let (all, load) = result?;
    for miss in &all.false_failures {
        println!(
            "round {} {} {} {} {}: {}",
            miss.round,
            miss.host,
            miss.case,
            miss.verdict,
            if miss.rule.is_empty() {
                "-"
            } else {
                &miss.rule
            },
            miss.why
        );
    }
    let runs = rounds * targets.len();
    println!("{}", summary(rounds, runs, &all, started.elapsed(), &load));
    if all.false_failures.is_empty() {
        Ok(())
    } else {
        Err(Failure {
            message: String::new(),
            code: 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_s_failing_verdicts_are_listed_and_the_rest_counted() {
        let report = serde_json::json!({"cases": [
            {"id": "a.one", "verdict": "pass"},
            {"id": "a.two", "verdict": "skipped", "why": "no cancel"},
            {"id": "a.three", "verdict": "xfail", "rule": "s10.x"},
            {"id": "b.one", "verdict": "fail", "rule": "s10.no-kill-other-runtime", "why": "killed"},
            {"id": "b.two", "verdict": "untestable", "rule": "s10.y", "why": "cannot tell"},
            {"id": "b.three", "verdict": "error", "rule": "kit", "why": "journal"},
        ]});
        let tally = tally(&report, 2, "reference");
        assert_eq!(
            (tally.cases, tally.passes, tally.accepted),
            (6, 1, 2),
            "{tally:?}"
        );
        let listed: Vec<(&str, &str)> = tally
            .false_failures
            .iter()
            .map(|miss| (miss.case.as_str(), miss.verdict.as_str()))
            .collect();
        assert_eq!(
            listed,
            [
                ("b.one", "fail"),
                ("b.two", "untestable"),
                ("b.three", "error")
            ]
        );
        assert_eq!(tally.false_failures[0].rule, "s10.no-kill-other-runtime");
        assert_eq!(
            (
                tally.false_failures[0].round,
                tally.false_failures[0].host.as_str()
            ),
            (2, "reference")
        );
        let line = summary(3, 6, &tally, Duration::from_secs(90), "2.0 2.0 2.0");
        assert!(
            line.contains("3 round(s), 6 run(s), 6 cases, 1 passes")
                && line.contains("3 false failures"),
            "{line}"
        );
    }

    /// A report planted where a run's report goes (a directory made in advance, a run that wrote
    /// nothing) is not this run's: the run counts as a false failure, never as passes (issue 40
    /// item 9).
    #[test]
    fn a_planted_report_is_not_taken_for_the_runs_own() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let silent = dir.path().join("dsh-conformance");
        std::fs::write(&silent, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&silent, std::fs::Permissions::from_mode(0o755)).unwrap();
        let kit = Kit {
            fake_dsh: silent.clone(),
            host_driver: silent.clone(),
            conformance: silent,
            fixtures: dir.path().to_path_buf(),
        };
        let target = Target {
            name: "reference".to_string(),
            args: Vec::new(),
        };
        let planted = serde_json::json!({"host": {"name": "reference"},
            "cases": [{"id": "a.b", "verdict": "pass"}]});
        std::fs::write(
            dir.path().join("round1-reference.json"),
            planted.to_string(),
        )
        .unwrap();
        let tally = run_one(&kit, &target, 1, 1, dir.path()).unwrap();
        assert_eq!(tally.passes, 0, "{tally:?}");
        assert_eq!(tally.false_failures.len(), 1, "{tally:?}");
        assert_eq!(tally.false_failures[0].case, "(the whole run)");
    }

    #[test]
    fn the_reports_directory_is_private_and_new_and_a_report_must_name_the_run() {
        use std::os::unix::fs::PermissionsExt;
        let first = private_dir().unwrap();
        let second = private_dir().unwrap();
        let mode = std::fs::metadata(&first).unwrap().permissions().mode();
        std::fs::remove_dir(&first).unwrap();
        std::fs::remove_dir(&second).unwrap();
        assert_ne!(first, second);
        assert_eq!(mode & 0o777, 0o700);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        std::fs::write(&path, r#"{"host": {"name": "stress-x-1"}, "cases": []}"#).unwrap();
        assert!(report_of_this_run(&path, "stress-x-1").is_ok());
        let other = report_of_this_run(&path, "stress-x-2").unwrap_err();
        assert!(other.contains("not this run's"), "{other}");
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let linked = report_of_this_run(&link, "stress-x-1").unwrap_err();
        assert!(linked.contains("not a regular file"), "{linked}");
    }

    #[test]
    fn a_report_without_cases_counts_nothing() {
        let tally = tally(&serde_json::json!({"v": 1}), 1, "sdk/python3");
        assert_eq!(tally, Tally::default());
    }

    #[test]
    fn the_busy_loops_are_killed_and_reaped_when_dropped() {
        let loops = BusyLoops::start(2).expect("sh starts");
        let pids = loops.pids();
        assert_eq!(pids.len(), 2);
        drop(loops);
        for pid in pids {
            // Reaped: no zombie left, the pid is gone from the process table (or already reused
            // by another program, never by a busy loop of ours: those were waited for).
            let comm = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            assert!(
                !comm.contains(") Z "),
                "busy loop {pid} left a zombie: {comm}"
            );
        }
    }
}
