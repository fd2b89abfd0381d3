//! The workspace's test binaries run side by side, cargo-nextest's way at the grain of a binary:
//! `cargo test` runs one binary after another, and the kit's slowest (the CLI's end-to-end tests,
//! the real-runtime differentials) spend most of their time waiting on the processes they drive,
//! so one core idles. Here the binaries `cargo test --no-run` built are listed, the slowest known
//! first, and run in lanes (one per core, and one more): each with the environment and working directory
//! `cargo test` gives it, its output kept whole and printed when it ends, so no two binaries'
//! lines interleave. Every binary runs even after one fails.

use serde_json::Value;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One test binary `cargo test --no-run` built.
#[derive(Clone, Debug)]
pub struct TestBinary {
    /// How cargo names it: `<package> <kind> <target>` (`dsh-conformance test it`).
    pub label: String,
    pub executable: PathBuf,
    /// The package's directory: the binary's working directory and `CARGO_MANIFEST_DIR`.
    pub package_dir: PathBuf,
    pub package_name: String,
    /// libtest arguments: the part of its tests this run takes (empty: all of them).
    pub args: Vec<String>,
}

/// How one binary ran.
pub struct Ran {
    pub binary: TestBinary,
    pub took: Duration,
    pub success: bool,
    /// Its stdout and stderr, stdout first.
    pub output: String,
}

/// The binaries whose runs take longest, slowest first, by the label's package and target: they
/// start first so no lane is left with one long binary at the end (both processes of a split
/// binary take its place). The rest follow in cargo's order. The real-runtime differentials lead:
/// in CI `sdk_differential` took 286 s and runtime-check's (with the ACP differential) 231 s,
/// while each half of a split binary takes about 130 to 170 s on a quiet machine.
const SLOWEST_FIRST: [(&str, &str); 11] = [
    ("dsh-conformance", "sdk_differential"),
    ("dsh-runtime-check", "it"),
    ("dsh-conformance", "it"),
    ("dsh-host-corpus", "it"),
    ("xtask", "it"),
    ("dsh-conformance", "corpus"),
    ("dsh-conformance", "real_dsh"),
    ("fake-dsh", "it"),
    ("dsh-model-server", "it"),
    ("dsh-report", "it"),
    ("dsh-record", "it"),
];

/// The test binaries of `cargo test --workspace --no-run` (built, or found fresh), from cargo's
/// JSON messages.
pub fn list(cargo: Command) -> Result<Vec<TestBinary>, String> {
    let mut cargo = cargo;
    cargo.args(["test", "--workspace", "--no-run", "--message-format=json"]);
    let output = cargo
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot start cargo: {e}"))?;
    if !output.status.success() {
        return Err(format!("cargo test --no-run failed ({})", output.status));
    }
    let binaries: Vec<TestBinary> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|message| test_binary(&message))
        .collect();
    let mut binaries: Vec<TestBinary> = binaries.into_iter().flat_map(split).collect();
    binaries.sort_by_key(|binary| {
        SLOWEST_FIRST
            .iter()
            .position(|(package, target)| binary.label.starts_with(&label(package, "test", target)))
            .unwrap_or(SLOWEST_FIRST.len())
    });
    Ok(binaries)
}

/// The binaries that would hold one lane alone long after the others drained, each run as two
/// processes of the same binary: its heaviest modules (each runs whole corpora or kill matrices
/// against hosts or clients), and the rest. (package, target, the heavy modules.) Chosen by
/// running the per-crate binaries in 3 lanes on 2 cores both ways (docs/performance.md,
/// "Per-crate integration tests"): the host corpus's example hosts (`node_host`: two whole
/// corpus runs of the Node host; `go_host`) against its kill matrix and the rest gave halves of
/// 191 s and 118 s, where the kill matrix and `go_host` against the rest gave 115 s and 248 s;
/// the CLI's client kill matrix and official client against the rest, 158 s and 214 s.
const SPLITS: [(&str, &str, &[&str]); 2] = [
    ("dsh-host-corpus", "it", &["node_host::", "go_host::"]),
    (
        "dsh-conformance",
        "it",
        &["client_kill_matrix::", "official_python_client::"],
    ),
];

/// `binary` as the runs it is split into ([`SPLITS`]): itself, or its heavy modules and the rest.
fn split(binary: TestBinary) -> Vec<TestBinary> {
    let Some((_, _, heavy)) = SPLITS
        .iter()
        .find(|(package, target, _)| binary.label == label(package, "test", target))
    else {
        return vec![binary];
    };
    let part = |suffix: &str, args: Vec<String>| TestBinary {
        label: format!("{} ({suffix})", binary.label),
        args,
        ..binary.clone()
    };
    let rest = heavy
        .iter()
        .flat_map(|module| ["--skip".to_string(), module.to_string()]);
    vec![
        part("the rest", rest.collect()),
        part(
            "corpora and kill matrices",
            heavy.iter().map(|m| m.to_string()).collect(),
        ),
    ]
}

fn label(package: &str, kind: &str, target: &str) -> String {
    format!("{package} {kind} {target}")
}

/// A `compiler-artifact` message for a test executable, as a [`TestBinary`].
fn test_binary(message: &Value) -> Option<TestBinary> {
    if message["reason"] != "compiler-artifact" || message["profile"]["test"] != true {
        return None;
    }
    let executable = PathBuf::from(message["executable"].as_str()?);
    let manifest = Path::new(message["manifest_path"].as_str()?);
    let package_name = message["package_id"]
        .as_str()
        .and_then(package_name_of)
        .unwrap_or_default();
    let target = message["target"]["name"].as_str()?;
    let kind = message["target"]["kind"][0].as_str().unwrap_or("lib");
    let kind = if kind == "test" { "test" } else { kind };
    Some(TestBinary {
        label: label(&package_name, kind, target),
        executable,
        package_dir: manifest.parent()?.to_path_buf(),
        package_name,
        args: Vec::new(),
    })
}

/// The package's name in a package id: `path+file:///…/xtask#0.1.0` or (older cargo)
/// `xtask 0.1.0 (path+file:///…)`, and `…#name@0.1.0` when the directory is named otherwise.
fn package_name_of(id: &str) -> Option<String> {
    if let Some((_, rest)) = id.rsplit_once('#') {
        let name = match rest.split_once('@') {
            Some((name, _)) => name.to_string(),
            None => id[..id.len() - rest.len() - 1]
                .rsplit('/')
                .next()?
                .to_string(),
        };
        return Some(name);
    }
    id.split_whitespace().next().map(str::to_string)
}

/// Runs every binary, `lanes` at a time, each with `env` added; calls `started` as each starts
/// and `finished` as each ends (from the lanes' threads, one at a time). No test may rebuild what
/// the others run (xtask's `dist` test packages the test build's binaries: `dist --bins`).
pub fn run(
    binaries: Vec<TestBinary>,
    lanes: usize,
    env: &[(&str, &str)],
    started: impl Fn(&TestBinary) + Sync,
    finished: impl Fn(&Ran) + Sync,
) -> Vec<Ran> {
    let queue = Arc::new(Mutex::new(VecDeque::from(binaries)));
    let done = Mutex::new(Vec::new());
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    std::thread::scope(|scope| {
        for _ in 0..lanes.max(1) {
            scope.spawn(|| loop {
                let next = queue.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
                let Some(binary) = next else { break };
                started(&binary);
                let ran = run_one(binary, &env);
                let mut done = done.lock().unwrap_or_else(|p| p.into_inner());
                finished(&ran);
                done.push(ran);
            });
        }
    });
    done.into_inner().unwrap_or_else(|p| p.into_inner())
}

/// One binary, as `cargo test` runs it: in its package's directory, with its package's variables.
fn run_one(binary: TestBinary, env: &[(String, String)]) -> Ran {
    let start = Instant::now();
    let mut command = Command::new(&binary.executable);
    command
        .args(&binary.args)
        .current_dir(&binary.package_dir)
        .env("CARGO_MANIFEST_DIR", &binary.package_dir)
        .env("CARGO_PKG_NAME", &binary.package_name)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null());
    let (success, output) = match command.output() {
        Ok(out) => (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        ),
        Err(error) => (false, format!("could not start: {error}\n")),
    };
    Ran {
        binary,
        took: start.elapsed(),
        success,
        output,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_test_artifact_becomes_a_binary_and_others_are_left_out() {
        let it = json!({"reason": "compiler-artifact",
            "package_id": "path+file:///w/conformance#dsh-conformance@0.1.0",
            "manifest_path": "/w/conformance/Cargo.toml",
            "target": {"name": "it", "kind": ["test"]},
            "profile": {"test": true}, "executable": "/w/target/debug/deps/it-1"});
        let binary = test_binary(&it).expect("a test binary");
        assert_eq!(binary.label, "dsh-conformance test it");
        assert_eq!(binary.package_dir, Path::new("/w/conformance"));
        let lib = json!({"reason": "compiler-artifact", "profile": {"test": false},
            "executable": null, "manifest_path": "/w/x/Cargo.toml", "target": {"name": "x"}});
        assert!(test_binary(&lib).is_none());
    }

    #[test]
    fn each_split_binary_runs_as_two_processes_that_together_take_every_test() {
        for (package, target, heavy) in SPLITS {
            let binary = TestBinary {
                label: label(package, "test", target),
                executable: PathBuf::from("/x/it"),
                package_dir: PathBuf::from("/x"),
                package_name: package.to_string(),
                args: Vec::new(),
            };
            let parts = split(binary);
            assert_eq!(parts.len(), 2);
            assert_eq!(parts[1].args, heavy);
            let skipped: Vec<&str> = parts[0]
                .args
                .chunks(2)
                .map(|pair| {
                    assert_eq!(pair[0], "--skip");
                    pair[1].as_str()
                })
                .collect();
            assert_eq!(
                skipped, heavy,
                "the rest skips exactly what the other takes"
            );
        }
        let other = TestBinary {
            label: "fake-dsh test it".to_string(),
            executable: PathBuf::from("/x/it"),
            package_dir: PathBuf::from("/x"),
            package_name: "fake-dsh".to_string(),
            args: Vec::new(),
        };
        assert_eq!(split(other).len(), 1);
    }

    /// The directory of the workspace member named `package`.
    fn package_dir(root: &Path, package: &str) -> PathBuf {
        std::fs::read_dir(root)
            .unwrap()
            .flatten()
            .map(|entry| entry.path())
            .find(|dir| {
                std::fs::read_to_string(dir.join("Cargo.toml"))
                    .is_ok_and(|text| text.contains(&format!("\nname = \"{package}\"\n")))
            })
            .unwrap_or_else(|| panic!("no package {package} in the workspace"))
    }

    #[test]
    fn every_slow_or_split_binary_and_module_exists() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let named = SLOWEST_FIRST.iter().copied().chain(
            SPLITS
                .iter()
                .map(|(package, target, _)| (*package, *target)),
        );
        for (package, target) in named {
            let dir = package_dir(root, package);
            let test = match target {
                "it" => dir.join("tests/it/main.rs"),
                _ => dir.join(format!("tests/{target}.rs")),
            };
            assert!(test.is_file(), "{package}: no test target {target}");
        }
        for (package, _, heavy) in SPLITS {
            let main = package_dir(root, package).join("tests/it/main.rs");
            let main = std::fs::read_to_string(main).unwrap();
            for module in heavy {
                let name = module.trim_end_matches("::");
                assert!(
                    main.contains(&format!("\nmod {name};")),
                    "{package}: no module {name} to split off"
                );
            }
        }
    }

    #[test]
    fn package_names_come_from_both_id_forms() {
        assert_eq!(
            package_name_of("path+file:///w/xtask#0.1.0").as_deref(),
            Some("xtask")
        );
        assert_eq!(
            package_name_of("path+file:///w/host#dsh-host@0.1.0").as_deref(),
            Some("dsh-host")
        );
        assert_eq!(
            package_name_of("xtask 0.1.0 (path+file:///w/xtask)").as_deref(),
            Some("xtask")
        );
    }

    #[test]
    fn every_binary_runs_even_after_one_fails_and_each_is_reported_once() {
        let binary = |name: &str, exe: &str| TestBinary {
            label: name.to_string(),
            executable: PathBuf::from(exe),
            package_dir: std::env::temp_dir(),
            package_name: "p".to_string(),
            args: Vec::new(),
        };
        let binaries = vec![
            binary("fails", "/bin/false"),
            binary("passes", "/bin/true"),
            binary("missing", "/nonexistent/binary"),
        ];
        let starts = Mutex::new(0);
        let ran = run(binaries, 2, &[], |_| *starts.lock().unwrap() += 1, |_| {});
        assert_eq!(*starts.lock().unwrap(), 3);
        let mut outcomes: Vec<(String, bool)> = ran
            .iter()
            .map(|r| (r.binary.label.clone(), r.success))
            .collect();
        outcomes.sort();
        assert_eq!(
            outcomes,
            [
                ("fails".to_string(), false),
                ("missing".to_string(), false),
                ("passes".to_string(), true)
            ]
        );
    }
}
