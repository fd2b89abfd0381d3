//! The corpus the kit embeds (`dsh_engine::corpus::embedded`): byte-identical to `fixtures/`
//! (and `docs/interpretations.md`) on disk, its case hash the one a full run reports, and found
//! last (after `--fixtures`, `$DSH_CONFORMANCE_FIXTURES` and the nearest `fixtures/` holding
//! `rules.json`). `--version`, `corpus export` and a run from an empty directory are the CLI's
//! test (`conformance/tests/it/corpus_cli.rs`).

use dsh_engine::corpus::{self, embedded, locate::Source};
use dsh_engine::selection::{corpus_hash, find_cases};
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    dsh_test_support::workspace_root()
}

#[test]
fn the_embedded_corpus_is_byte_identical_to_the_files_on_disk() {
    let on_disk = embedded::tree_hash_on_disk(&repo_root()).expect("the corpus on disk reads");
    assert_eq!(
        embedded::embedded_tree_hash(),
        on_disk,
        "the embedded corpus differs from fixtures/ (rebuild dsh-conformance)"
    );
    let rules = std::fs::read(repo_root().join("fixtures/rules.json")).expect("rules.json");
    let embedded_rules = embedded::files()
        .iter()
        .find(|(path, _)| *path == "fixtures/rules.json")
        .expect("rules.json is embedded");
    assert_eq!(embedded_rules.1, rules.as_slice());
}

#[test]
fn the_tree_hash_sees_one_changed_byte_and_one_extra_file() {
    let base = embedded::tree_hash([("fixtures/a.json", &b"{}"[..])]);
    assert_ne!(
        base,
        embedded::tree_hash([("fixtures/a.json", &b"{ }"[..])])
    );
    assert_ne!(
        base,
        embedded::tree_hash([("fixtures/a.json", &b"{}"[..]), ("fixtures/b", &b""[..])])
    );
    assert_ne!(base, embedded::tree_hash([("fixtures/b.json", &b"{}"[..])]));
}

#[test]
fn the_embedded_case_hash_is_the_one_a_full_run_of_the_corpus_reports() {
    let entries = find_cases(&repo_root().join("fixtures")).expect("the corpus lists");
    let all: Vec<_> = entries.iter().collect();
    assert_eq!(embedded::case_hash(), corpus_hash(&all));
    assert_eq!(embedded::case_count(), entries.len());
}

#[test]
fn the_lookup_order_is_flag_env_nearest_catalog_then_embedded() {
    let root = tempfile::tempdir().expect("temp dir");
    let project = root.path().join("project");
    let nested = project.join("src/deep");
    std::fs::create_dir_all(&nested).expect("mkdir");
    let flag = root.path().join("flag");
    let env = root.path().join("env");
    std::fs::create_dir_all(&flag).expect("mkdir");
    std::fs::create_dir_all(&env).expect("mkdir");
    let locate = |explicit: Option<&Path>, env: Option<PathBuf>| {
        corpus::locate::locate_from(explicit, env, Some(&nested)).expect("locates")
    };
    let by_flag = locate(Some(&flag), Some(env.clone()));
    assert_eq!(
        (by_flag.path(), by_flag.source()),
        (flag.as_path(), &Source::Flag)
    );
    let by_env = locate(None, Some(env.clone()));
    assert_eq!(
        (by_env.path(), by_env.source()),
        (env.as_path(), &Source::Env)
    );
    // A project's own fixtures/ without a rule catalog is not the corpus.
    std::fs::create_dir_all(project.join("fixtures")).expect("mkdir");
    let embedded_dir = locate(None, Some(PathBuf::new()));
    assert_eq!(embedded_dir.source(), &Source::Embedded);
    assert!(embedded_dir.path().join("rules.json").is_file());
    let written = embedded_dir.path().to_path_buf();
    drop(embedded_dir);
    assert!(
        !written.exists(),
        "the embedded corpus's temp dir is removed"
    );
    std::fs::write(project.join("fixtures/rules.json"), "{}").expect("write");
    let found = locate(None, None);
    assert_eq!(
        (found.path(), found.source()),
        (project.join("fixtures").as_path(), &Source::Found)
    );
}

#[test]
fn a_named_dir_that_does_not_exist_is_an_error_not_a_fallback() {
    let root = tempfile::tempdir().expect("temp dir");
    let missing = root.path().join("nope");
    let error = corpus::locate::locate_from(Some(&missing), None, Some(root.path()))
        .expect_err("a missing --fixtures dir fails");
    assert!(
        error.contains("--fixtures") && error.contains("nope"),
        "{error}"
    );
    let error = corpus::locate::locate_from(None, Some(missing), Some(root.path()))
        .expect_err("a missing env dir fails");
    assert!(error.contains("DSH_CONFORMANCE_FIXTURES"), "{error}");
}
