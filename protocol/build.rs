//! Embeds every `*.json` under the workspace's `schemas/` directory: generates a table of
//! `(path relative to schemas/, include_str!(...))` that `src/schema.rs` includes.

use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    let manifest_dir =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let schemas = manifest_dir.join("..").join("schemas");
    println!("cargo:rerun-if-changed={}", schemas.display());
    let mut files = Vec::new();
    if schemas.is_dir() {
        collect(&schemas, &schemas, &mut files);
    }
    files.sort();
    let mut table =
        String::from("/// `(path relative to schemas/, contents)` of every embedded schema.\n");
    table.push_str("pub(crate) static EMBEDDED: &[(&str, &str)] = &[\n");
    for (relative, absolute) in &files {
        println!("cargo:rerun-if-changed={}", absolute.display());
        table.push_str(&format!(
            "    ({relative:?}, include_str!({:?})),\n",
            absolute.display().to_string()
        ));
    }
    table.push_str("];\n");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"))
        .join("embedded_schemas.rs");
    fs::write(out, table).expect("write the embedded schema table");
}

fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            println!("cargo:rerun-if-changed={}", path.display());
            collect(root, &path, files);
        } else if path.extension().is_some_and(|ext| ext == "json") {
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
