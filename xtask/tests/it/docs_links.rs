//! Every relative link in the repository's Markdown (README, ARCHITECTURE, docs/, the examples'
//! and npm's READMEs) names a file or directory that exists, so a doc never points a newcomer at
//! something a merge removed.

use crate::support;

use support::repo_root;

use std::path::{Path, PathBuf};

/// The Markdown files a reader starts from: top-level, docs/, examples/*/, npm/.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let dirs = [
        root.to_path_buf(),
        root.join("docs"),
        root.join("npm"),
        root.join("examples"),
    ];
    for dir in dirs {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() && dir.ends_with("examples") {
                files.extend(
                    std::fs::read_dir(&path)
                        .into_iter()
                        .flatten()
                        .flatten()
                        .map(|entry| entry.path())
                        .filter(|path| path.extension().is_some_and(|ext| ext == "md")),
                );
            } else if path.extension().is_some_and(|ext| ext == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The targets of inline links `[text](target)` outside code spans and fenced blocks.
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = prose.as_str();
        while let Some(start) = rest.find("](") {
            let after = &rest[start + 2..];
            let Some(end) = after.find(')') else { break };
            targets.push(after[..end].trim().to_string());
            rest = &after[end..];
        }
    }
    targets
}

/// The repository's top-level directories: a code span starting with one names a repository path.
const TOP_DIRS: [&str; 12] = [
    "docs/",
    "conformance/",
    "fake-dsh/",
    "host/",
    "protocol/",
    "xtask/",
    "fixtures/",
    "schemas/",
    "examples/",
    "scripts/",
    "npm/",
    "model-server/",
];

/// Repository paths written as code spans (`` `fake-dsh/tests/x.rs` ``), without placeholders.
fn path_mentions(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| TOP_DIRS.iter().any(|dir| span.starts_with(dir)))
        .filter(|span| !span.contains(|c: char| c.is_whitespace() || "<>*{}$:".contains(c)))
        .map(|span| span.trim_end_matches(['.', ',']).to_string())
        .collect()
}

fn is_relative(target: &str) -> bool {
    !(target.is_empty()
        || target.starts_with('#')
        || target.contains("://")
        || target.starts_with("mailto:"))
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let root = repo_root();
    let files = markdown_files(&root);
    assert!(files.len() > 10, "found the docs: {files:?}");
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("readable");
        let base = file.parent().expect("a file has a directory");
        for target in link_targets(&text).into_iter().filter(|t| is_relative(t)) {
            let path = target.split('#').next().unwrap_or_default();
            if !base.join(path).exists() {
                let shown = file.strip_prefix(&root).unwrap_or(file);
                broken.push(format!("{}: ({target})", shown.display()));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links to nothing:\n{}",
        broken.join("\n")
    );
}

#[test]
fn every_repository_path_the_docs_name_exists() {
    let root = repo_root();
    let mut missing = Vec::new();
    for file in markdown_files(&root) {
        let text = std::fs::read_to_string(&file).expect("readable");
        for mention in path_mentions(&text) {
            if !root.join(&mention).exists() {
                let shown = file.strip_prefix(&root).unwrap_or(&file);
                missing.push(format!("{}: `{mention}`", shown.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "paths that do not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_link_reader_finds_links_and_skips_code() {
    let text = "see [a](docs/a.md) and [b](../b.md#part) `[c](c.md)`\n```\n[d](d.md)\n```\n[e](https://x.org)";
    assert_eq!(
        link_targets(text),
        ["docs/a.md", "../b.md#part", "https://x.org"]
    );
    assert!(!is_relative("https://x.org") && !is_relative("#anchor") && is_relative("a.md"));
    assert_eq!(
        path_mentions("`docs/a.md`, `target/x`, `host/src/<name>.rs` and `fake-dsh/src/lib.rs`."),
        ["docs/a.md", "fake-dsh/src/lib.rs"]
    );
}
