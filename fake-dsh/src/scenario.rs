//! The scenario fake-dsh plays: the typed scenario language is `dsh_formats::scenario` (shared
//! with the harness and `record`); this module loads the one `FAKE_DSH_SCENARIO` names.

use std::path::Path;

pub use dsh_formats::scenario::*;

/// The environment variable naming the scenario file.
pub const SCENARIO_ENV: &str = "FAKE_DSH_SCENARIO";

/// Loads the scenario named by `FAKE_DSH_SCENARIO`; none set means the default `{}`.
pub fn load_from_env() -> Result<Scenario, String> {
    match std::env::var_os(SCENARIO_ENV).filter(|value| !value.is_empty()) {
        Some(path) => load(Path::new(&path)),
        None => Ok(Scenario::default()),
    }
}
