//! The corpus built into `dsh-conformance`, end to end: `--version` names its hash, `corpus
//! export` writes a corpus that lints clean (both corpora) and refuses to overwrite a changed
//! file, and `run` and `lint` in an empty directory use it; a `--fixtures` dir that does not
//! exist exits 2. The embedded tree itself is dsh-host-corpus's test
//! (`host-corpus/tests/it/embedded_corpus.rs`).

use assert_cmd::Command;
use dsh_engine::corpus::embedded;

fn conformance() -> Command {
    let mut command = Command::cargo_bin("dsh-conformance").expect("the binary is built");
    command.env_remove("DSH_CONFORMANCE_FIXTURES");
    command
}

#[test]
fn version_names_the_hash_a_full_run_of_the_corpus_reports() {
    let output = conformance().arg("--version").output().expect("runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success());
    assert!(
        stdout.contains(&format!(
            "corpus sha256 {}, {} cases",
            embedded::case_hash(),
            embedded::case_count()
        )),
        "{stdout}"
    );
}

#[test]
fn export_writes_a_corpus_that_lints_clean_and_refuses_to_overwrite_a_changed_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    conformance()
        .args(["corpus", "export"])
        .arg(dir.path())
        .assert()
        .success();
    let fixtures = dir.path().join("fixtures");
    assert_eq!(dsh_host_corpus::corpus::lint(&fixtures), Vec::new());
    assert_eq!(
        dsh_client_corpus::corpus::lint(&fixtures, &dir.path().join("docs")),
        Vec::new()
    );
    assert_eq!(
        embedded::tree_hash_on_disk(dir.path()).expect("reads"),
        embedded::embedded_tree_hash()
    );
    let rules = fixtures.join("rules.json");
    std::fs::write(&rules, "{}").expect("write");
    let output = conformance()
        .args(["corpus", "export"])
        .arg(dir.path())
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&rules.display().to_string()) && stderr.contains("differs"),
        "{stderr}"
    );
}

#[test]
fn a_named_dir_that_does_not_exist_exits_2() {
    let root = tempfile::tempdir().expect("temp dir");
    let output = conformance()
        .current_dir(root.path())
        .args(["run", "--list", "--fixtures", "nope"])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("nope"), "{stderr}");
}

#[test]
fn run_and_lint_in_an_empty_directory_use_the_embedded_corpus() {
    let dir = tempfile::tempdir().expect("temp dir");
    let output = conformance()
        .current_dir(dir.path())
        .args(["run", "--list"])
        .output()
        .expect("runs");
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(stdout.lines().count(), embedded::case_count());
    assert!(stdout.contains("lifecycle.three-turns-one-session"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("using the embedded corpus"), "{stderr}");
    let lint = conformance()
        .current_dir(dir.path())
        .arg("lint")
        .output()
        .expect("runs");
    assert!(lint.status.success(), "{lint:?}");
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("lists").count(),
        0,
        "nothing is written into the working directory"
    );
}
