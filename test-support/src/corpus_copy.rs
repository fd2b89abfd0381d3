//! A temp copy of the corpus (`fixtures/` and `docs/interpretations.md` beside it), for tests
//! that break a case or the rule catalog and lint the copy: the host corpus's tests through the
//! library, the CLI's through `dsh-conformance lint`.

use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};

/// The copy, removed on drop.
pub struct CorpusCopy {
    _root: tempfile::TempDir,
    /// The copied `fixtures/`.
    pub fixtures: PathBuf,
}

impl CorpusCopy {
    /// A fresh temp root holding `fixtures/` and `docs/interpretations.md` of the workspace.
    pub fn new() -> CorpusCopy {
        let root = tempfile::tempdir().expect("temp dir");
        let fixtures = root.path().join("fixtures");
        copy_dir(&crate::workspace_root().join("fixtures"), &fixtures);
        let docs = root.path().join("docs");
        fs::create_dir_all(&docs).expect("docs dir");
        let real = crate::workspace_root().join("docs/interpretations.md");
        fs::copy(&real, docs.join("interpretations.md")).expect("copy interpretations.md");
        CorpusCopy {
            _root: root,
            fixtures,
        }
    }

    /// Where case `id` lives: `fixtures/<area>/<id>.json`.
    pub fn case_path(&self, id: &str) -> PathBuf {
        let area = id.split('.').next().expect("an id has an area");
        self.fixtures.join(area).join(format!("{id}.json"))
    }

    /// Case `id`, parsed.
    pub fn read(&self, id: &str) -> Value {
        self.read_file(&self.case_path(id))
    }

    /// A JSON file of the copy, parsed.
    pub fn read_file(&self, path: &Path) -> Value {
        serde_json::from_str(&fs::read_to_string(path).expect("read")).expect("JSON")
    }

    /// Writes `value` over `path`.
    pub fn write(&self, path: &Path, value: &Value) {
        fs::write(path, serde_json::to_string_pretty(value).expect("JSON")).expect("write");
    }
}

impl Default for CorpusCopy {
    fn default() -> Self {
        CorpusCopy::new()
    }
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("create dir");
    for entry in fs::read_dir(from).expect("read dir") {
        let path = entry.expect("dir entry").path();
        let target = to.join(path.file_name().expect("a name"));
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            fs::copy(&path, &target).expect("copy file");
        }
    }
}
