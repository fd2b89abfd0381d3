//! Where `run`, `report` and `lint` take the fixture corpus from, in this order:
//!
//! 1. `--fixtures DIR`;
//! 2. `$DSH_CONFORMANCE_FIXTURES` (when set and not empty);
//! 3. the nearest `fixtures/` directory holding `rules.json`, from the current directory upwards
//!    (a project's unrelated `fixtures/` without a rule catalog is passed over);
//! 4. the corpus embedded in the binary, written to a temp dir that lives as long as the
//!    [`CorpusDir`].
//!
//! A directory named by 1 or 2 that does not exist is an error, never a silent fallback.

use super::embedded;
use super::RULES_FILE;
use std::path::{Path, PathBuf};

/// The environment variable that names the fixtures dir when no `--fixtures` is given.
pub const FIXTURES_ENV: &str = "DSH_CONFORMANCE_FIXTURES";

/// Where a corpus came from (for messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Flag,
    Env,
    Found,
    Embedded,
}

/// A fixtures directory to read; for the embedded corpus, the temp dir it was written to (removed
/// when this is dropped).
#[derive(Debug)]
pub struct CorpusDir {
    path: PathBuf,
    source: Source,
    _temp: Option<tempfile::TempDir>,
}

impl CorpusDir {
    /// The fixtures directory (holding `rules.json` and the case areas).
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn source(&self) -> &Source {
        &self.source
    }

    /// The note a command gives when it uses the embedded corpus (a found or named dir needs
    /// none).
    pub fn announcement(&self) -> Option<String> {
        (self.source == Source::Embedded).then(|| format!("using {}", self.describe()))
    }

    /// Where the corpus came from, as reports name it: `embedded`, or the directory and what
    /// named it.
    pub fn source_label(&self) -> String {
        let dir = self.path.display();
        match self.source {
            Source::Flag => format!("--fixtures {dir}"),
            Source::Env => format!("${FIXTURES_ENV}={dir}"),
            Source::Found => format!("{dir} (found from the working directory)"),
            Source::Embedded => "embedded".to_string(),
        }
    }

    /// One line saying where the corpus came from.
    pub fn describe(&self) -> String {
        match self.source {
            Source::Flag => format!("fixtures {} (--fixtures)", self.path.display()),
            Source::Env => format!("fixtures {} (${FIXTURES_ENV})", self.path.display()),
            Source::Found => format!("fixtures {}", self.path.display()),
            Source::Embedded => format!(
                "the embedded corpus ({} cases, corpus sha256 {}; `dsh-conformance corpus export DIR` writes it out)",
                embedded::case_count(),
                &embedded::case_hash()[..12]
            ),
        }
    }
}

/// Finds the corpus by the order in the module doc. `explicit` is the `--fixtures` flag.
pub fn locate(explicit: Option<&Path>) -> Result<CorpusDir, String> {
    locate_from(
        explicit,
        std::env::var_os(FIXTURES_ENV).map(PathBuf::from),
        None,
    )
}

/// `--embedded-corpus`: the corpus embedded in the binary, whatever `$DSH_CONFORMANCE_FIXTURES`
/// or a `fixtures/` directory nearby says (what a CI gate runs, so a stray file cannot swap the
/// corpus it judges); otherwise [`locate`].
pub fn choose(explicit: Option<&Path>, embedded_only: bool) -> Result<CorpusDir, String> {
    if embedded_only {
        embedded_dir()
    } else {
        locate(explicit)
    }
}

/// [`locate`] with the environment and the starting directory given (tests).
pub fn locate_from(
    explicit: Option<&Path>,
    env: Option<PathBuf>,
    cwd: Option<&Path>,
) -> Result<CorpusDir, String> {
    let named = |path: PathBuf, source: Source, what: &str| {
        if path.is_dir() {
            Ok(CorpusDir {
                path,
                source,
                _temp: None,
            })
        } else {
            Err(format!(
                "fixtures dir not found: {} (named by {what})",
                path.display()
            ))
        }
    };
    if let Some(dir) = explicit {
        return named(dir.to_path_buf(), Source::Flag, "--fixtures");
    }
    if let Some(dir) = env.filter(|dir| !dir.as_os_str().is_empty()) {
        return named(dir, Source::Env, &format!("${FIXTURES_ENV}"));
    }
    let cwd = match cwd {
        Some(dir) => dir.to_path_buf(),
        None => std::env::current_dir().map_err(|e| format!("cannot read the cwd: {e}"))?,
    };
    if let Some(found) = cwd
        .ancestors()
        .map(|dir| dir.join(embedded::FIXTURES_DIR))
        .find(|dir| dir.join(RULES_FILE).is_file())
    {
        return named(found, Source::Found, "fixtures");
    }
    embedded_dir()
}

/// The embedded corpus, written to a temp dir.
fn embedded_dir() -> Result<CorpusDir, String> {
    let temp = crate::scratch::tempdir("dsh-conformance-corpus-")
        .map_err(|e| format!("cannot create a temp dir for the embedded corpus: {e}"))?;
    let path = embedded::export(temp.path())?;
    Ok(CorpusDir {
        path,
        source: Source::Embedded,
        _temp: Some(temp),
    })
}
