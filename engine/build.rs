//! Embeds the fixture corpus in `dsh-conformance`: every file under the workspace's `fixtures/`
//! (cases, `rules.json`, transcripts) and `docs/interpretations.md` (what `lint` checks cases
//! against). Generates a table of `(path relative to the workspace root, include_bytes!(...))`
//! that `src/corpus/embedded.rs` includes. Whatever is in `fixtures/` at build time goes in, never
//! a fixed list: cargo reruns this script when anything under the tree changes.

use std::fs;
use std::path::{Path, PathBuf};

/// The files outside `fixtures/` that travel with the corpus.
const EXTRA_FILES: &[&str] = &["docs/interpretations.md"];

fn main() {
    let manifest_dir =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let root = manifest_dir
        .parent()
        .expect("the crate lives one level below the workspace root")
        .to_path_buf();
    let fixtures = root.join("fixtures");
    println!("cargo:rerun-if-changed={}", fixtures.display());
    assert!(
        fixtures.join("rules.json").is_file(),
        "{} holds no rules.json: dsh-conformance embeds the fixture corpus and needs it at build time",
        fixtures.display()
    );
    let mut files = Vec::new();
    collect(&root, &fixtures, &mut files);
    for extra in EXTRA_FILES {
        let path = root.join(extra);
        println!("cargo:rerun-if-changed={}", path.display());
        assert!(path.is_file(), "{} is missing", path.display());
        files.push((extra.to_string(), path));
    }
    files.sort();
    let mut table = String::from(
        "/// `(path relative to the workspace root, contents)` of every embedded corpus file, sorted.\n",
    );
    table.push_str("pub(super) static FILES: &[(&str, &[u8])] = &[\n");
    for (relative, absolute) in &files {
        table.push_str(&format!(
            "    ({relative:?}, include_bytes!({:?})),\n",
            absolute.display().to_string()
        ));
    }
    table.push_str("];\n");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"))
        .join("embedded_corpus.rs");
    fs::write(out, table).expect("write the embedded corpus table");
}

/// Every file under `dir` (dot-files and dot-dirs skipped), as `(relative to root, absolute)`.
fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, PathBuf)>) {
    let entries =
        fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    for entry in entries {
        let path = entry
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
            .path();
        if path
            .file_name()
            .is_some_and(|name| name.to_string_lossy().starts_with('.'))
        {
            continue;
        }
        if path.is_dir() {
            println!("cargo:rerun-if-changed={}", path.display());
            collect(root, &path, files);
        } else {
            println!("cargo:rerun-if-changed={}", path.display());
            let relative = path
                .strip_prefix(root)
                .expect("collected under root")
                .components()
                .map(|part| part.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            let absolute = path.canonicalize().unwrap_or(path);
            files.push((relative, absolute));
        }
    }
}
