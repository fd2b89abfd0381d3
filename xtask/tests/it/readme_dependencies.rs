//! Every crates.io dependency of every workspace member is either in the project's chosen set or
//! named, with its reason, in the README's Dependencies table.

use crate::support;

use support::repo_root;

use std::path::{Path, PathBuf};

/// The dependency set the project chose up front (the developer guide's list).
const CHOSEN: [&str; 14] = [
    "serde",
    "serde_json",
    "jsonschema",
    "proptest",
    "insta",
    "assert_cmd",
    "predicates",
    "tokio",
    "clap",
    "libtest-mimic",
    "nix",
    "tempfile",
    "criterion",
    "sha2",
];

/// The member directories listed in the root manifest's `members = [...]`.
fn members(root: &Path) -> Vec<PathBuf> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("root manifest");
    let line = manifest
        .lines()
        .find(|line| line.trim_start().starts_with("members"))
        .expect("a members line");
    line.split('"')
        .skip(1)
        .step_by(2)
        .map(|member| root.join(member))
        .collect()
}

/// The names under `[dependencies]` (not dev- or build-dependencies) of one manifest.
fn dependencies(manifest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut inside = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == "[dependencies]";
            continue;
        }
        if inside && !line.is_empty() && !line.starts_with('#') {
            let name = line.split(['=', '.']).next().unwrap_or_default().trim();
            names.push(name.to_string());
        }
    }
    names
}

#[test]
fn every_added_dependency_has_a_line_in_the_readme() {
    let root = repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README");
    let section = readme
        .split("## Dependencies")
        .nth(1)
        .expect("a Dependencies section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut unexplained = Vec::new();
    for member in members(&root) {
        let manifest = std::fs::read_to_string(member.join("Cargo.toml")).expect("manifest");
        for name in dependencies(&manifest) {
            let ours = name.starts_with("dsh-") || name == "fake-dsh";
            if !ours && !CHOSEN.contains(&name.as_str()) && !section.contains(&format!("`{name}`"))
            {
                unexplained.push(format!("{name} ({})", member.display()));
            }
        }
    }
    assert!(
        unexplained.is_empty(),
        "dependencies without a line in the README's Dependencies table: {unexplained:?}"
    );
}

#[test]
fn the_manifest_reader_sees_only_normal_dependencies() {
    let manifest = "[package]\nname = \"x\"\n[dependencies]\nserde.workspace = true\n\
                    memchr = \"2\"\n# a comment\n[dev-dependencies]\ninsta = \"1\"\n";
    assert_eq!(dependencies(manifest), ["serde", "memchr"]);
}
