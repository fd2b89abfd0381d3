//! What several checks judge together, observed once per `check-runtime` run: the default turn
//! (a new session, stdin kept open after the result), the turn that resumes an unknown session,
//! and the `--models` catalog. Each is made in a world of its own the first time a check asks for
//! it (concurrent askers wait for the first), and every check that judges it reads the same
//! record, so a real dsh boots once for all of them instead of once per check.

use super::models::{self, Catalog};
use super::turn::{self, Plan, TurnRecord};
use super::world::{Target, World};
use dsh_engine::process::SpawnError;
use dsh_engine::random::random_uuid;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// One turn and the world it ran in.
pub struct Observed {
    pub world: World,
    pub record: TurnRecord,
    /// The `*.html` files the turn left in the project, with their contents, read right after it
    /// (a later turn in the same world may change them).
    pub html: Vec<(PathBuf, Vec<u8>)>,
}

/// The observations of one run; empty until a check asks.
#[derive(Default)]
pub struct Observations {
    default_turn: OnceLock<Result<Observed, String>>,
    unknown_resume: OnceLock<Result<(Observed, String), String>>,
    catalog: OnceLock<Result<Catalog, String>>,
}

impl std::fmt::Debug for Observations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observations").finish_non_exhaustive()
    }
}

/// A cached outcome, with the spawn error (if any) handed to every asker.
fn cached<T>(
    cell: &OnceLock<Result<T, String>>,
    make: impl FnOnce() -> Result<T, SpawnError>,
) -> Result<&T, SpawnError> {
    cell.get_or_init(|| make().map_err(|error| error.0))
        .as_ref()
        .map_err(|why| SpawnError(why.clone()))
}

impl Observations {
    /// The default turn: a new session on the world's prompt, stdin left open after the result
    /// (so the same record shows whether the runtime exits by itself).
    pub fn default_turn(&self, target: &Target) -> Result<&Observed, SpawnError> {
        cached(&self.default_turn, || {
            let plan = Plan {
                keep_stdin_open: true,
                ..Plan::default()
            };
            observe(target, "rt.default-turn", &plan)
        })
    }

    /// A turn that asks to resume a session that does not exist (stdin left open after the
    /// result), and the session id it asked for.
    pub fn unknown_resume(&self, target: &Target) -> Result<&(Observed, String), SpawnError> {
        cached(&self.unknown_resume, || {
            let unknown = format!("od-{}", random_uuid());
            let plan = Plan {
                resume: Some(unknown.clone()),
                keep_stdin_open: true,
                ..Plan::default()
            };
            Ok((observe(target, "rt.unknown-resume", &plan)?, unknown))
        })
    }

    /// What `--models` lists, or why its answer breaks spec 12.
    pub fn catalog(&self, target: &Target) -> Result<&Catalog, SpawnError> {
        cached(&self.catalog, || {
            let world = World::new(target, "rt.models")?;
            models::catalog(target, &world)
        })
    }
}

/// Runs `plan` in a fresh world named after `name`.
fn observe(target: &Target, name: &str, plan: &Plan) -> Result<Observed, SpawnError> {
    let world = World::new(target, name)?;
    let record = turn::run(target, &world, plan)?;
    let html = html_files(&world.project)
        .into_iter()
        .map(|path| {
            let contents = std::fs::read(&path).unwrap_or_default();
            (path, contents)
        })
        .collect();
    Ok(Observed {
        world,
        record,
        html,
    })
}

/// The `*.html` files anywhere under `dir`, in path order.
pub fn html_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "html") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}
