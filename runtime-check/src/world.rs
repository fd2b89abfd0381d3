//! The throwaway world one check runs its runtime in: a temp project cwd, a Harness home, canary
//! prompt and credential, fresh ids, and the launch description for each runtime surface.

use dsh_engine::process::{Launch, RuntimeProcess, SpawnError};
use std::collections::hash_map::RandomState;
use std::ffi::OsString;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The profile the checks drive.
pub const PROFILE: &str = "open-design";

/// The endpoint a runtime gets when no model server runs: a closed loopback port, never the
/// network.
pub const UNREACHABLE_MODEL: &str = "http://127.0.0.1:9";

/// What every check shares: the runtime under test, where its home is, and the time scale.
#[derive(Debug, Clone)]
pub struct Target {
    pub dsh: PathBuf,
    /// A user-supplied Harness home (a real installation), shared by every check; `None` makes a
    /// temp one per check.
    pub dsh_home: Option<PathBuf>,
    /// A Harness home (the one `--bundle` installed into) copied into every check's world, so
    /// each check's runtime has a private home and checks can run in parallel.
    pub home_template: Option<PathBuf>,
    pub time_scale: dsh_engine::timing::TimeScale,
    /// The loopback model endpoint every runtime process gets as `DEEPSEEK_BASE_URL`, so no turn
    /// ever reaches a real model (set by `run_checks`, which starts the server).
    pub model_url: Option<String>,
    /// The turns and surfaces several checks judge, observed once per run (`run_checks` gives
    /// each run fresh ones).
    pub observed: std::sync::Arc<super::observed::Observations>,
}

impl Target {
    /// A base bound in milliseconds, scaled by `--time-scale`.
    pub fn bound(&self, base_ms: u64) -> Duration {
        self.time_scale.scale_ms(base_ms)
    }

    pub fn deadline(&self, base_ms: u64) -> Instant {
        Instant::now() + self.bound(base_ms)
    }
}

/// A random 64-bit value from the OS (`getrandom`; std's randomly keyed hasher if that fails).
pub fn random_u64() -> u64 {
    getrandom::u64().unwrap_or_else(|_| RandomState::new().build_hasher().finish())
}

pub struct World {
    /// Removed on drop.
    _root: tempfile::TempDir,
    pub home: PathBuf,
    pub project: PathBuf,
    /// The runtime's `HOME` and `TMPDIR`, inside the world (the real dsh creates
    /// `$TMPDIR/dsh-spill-*` and pnpm its store under `$HOME`: nothing leaks out of the world).
    pub user_home: PathBuf,
    pub tmp: PathBuf,
    pub request_id: String,
    /// Held by the prompt of every execute; must never reach stderr.
    pub prompt_canary: String,
    /// The `DEEPSEEK_API_KEY` the runtime gets; must never reach stderr or stdout.
    pub key_canary: String,
}

impl World {
    pub fn new(target: &Target, check_id: &str) -> Result<Self, SpawnError> {
        let root = dsh_engine::scratch::tempdir("dsh-check-runtime-")
            .map_err(|error| SpawnError(format!("cannot create a temp dir: {error}")))?;
        let make = |path: &Path| {
            std::fs::create_dir_all(path)
                .map_err(|error| SpawnError(format!("cannot create {}: {error}", path.display())))
        };
        let project = root.path().join("project");
        make(&project)?;
        let (user_home, tmp) = (root.path().join("user-home"), root.path().join("tmp"));
        make(&user_home)?;
        make(&tmp)?;
        let project = project.canonicalize().map_err(|error| {
            SpawnError(format!(
                "cannot canonicalize {}: {error}",
                project.display()
            ))
        })?;
        let home = match (&target.dsh_home, &target.home_template) {
            (Some(home), _) => home.clone(),
            (None, Some(template)) => {
                let home = root.path().join("dsh-home");
                copy_tree(template, &home, &|_| false).map_err(|error| {
                    SpawnError(format!("cannot copy {}: {error}", template.display()))
                })?;
                home
            }
            (None, None) => {
                let home = root.path().join("dsh-home");
                let profile_dir = home.join("profiles").join(PROFILE);
                make(&profile_dir)?;
                let manifest = profile_dir.join("package.json");
                std::fs::write(
                    &manifest,
                    "{\"name\":\"@open-design/dsh-runtime\",\"version\":\"0.1.0\"}\n",
                )
                .map_err(|error| {
                    SpawnError(format!("cannot write {}: {error}", manifest.display()))
                })?;
                home
            }
        };
        let tag = format!("{:016x}", random_u64());
        Ok(Self {
            _root: root,
            home,
            project,
            user_home,
            tmp,
            request_id: format!("{}-{}", check_id.replace('.', "-"), &tag[..12]),
            prompt_canary: format!("rt-prompt-canary-{tag}"),
            key_canary: format!("sk-rtcanary{:016x}{tag}", random_u64()),
        })
    }

    /// The prompt every execute of this world carries.
    pub fn prompt(&self) -> String {
        format!(
            "Create a one-page landing site titled Conformance. {}",
            self.prompt_canary
        )
    }

    /// Start the runtime with these arguments, inside this world.
    pub fn spawn(&self, target: &Target, args: &[&str]) -> Result<RuntimeProcess, SpawnError> {
        RuntimeProcess::spawn(Launch {
            program: &target.dsh,
            args,
            cwd: &self.project,
            env: vec![
                ("DSH_HOME".to_string(), OsString::from(&self.home)),
                ("HOME".to_string(), OsString::from(&self.user_home)),
                ("TMPDIR".to_string(), OsString::from(&self.tmp)),
                (
                    "DEEPSEEK_API_KEY".to_string(),
                    OsString::from(&self.key_canary),
                ),
                (
                    "DEEPSEEK_BASE_URL".to_string(),
                    OsString::from(target.model_url.as_deref().unwrap_or(UNREACHABLE_MODEL)),
                ),
            ],
            stderr_needles: vec![
                self.prompt_canary.as_bytes().to_vec(),
                self.key_canary.as_bytes().to_vec(),
            ],
        })
    }

    /// `dsh --profile open-design --stdio`.
    pub fn spawn_stdio(&self, target: &Target) -> Result<RuntimeProcess, SpawnError> {
        self.spawn(target, &["--profile", PROFILE, "--stdio"])
    }

    /// The execute command of this world's run, as one line.
    pub fn execute_line(&self, request_id: &str, resume_session_id: Option<&str>) -> Vec<u8> {
        self.execute_line_with(request_id, resume_session_id, None)
    }

    /// The same with another prompt (`None`: this world's).
    pub fn execute_line_with(
        &self,
        request_id: &str,
        resume_session_id: Option<&str>,
        prompt: Option<&str>,
    ) -> Vec<u8> {
        json_line(&self.execute(request_id, resume_session_id, prompt))
    }

    fn execute(
        &self,
        request_id: &str,
        resume_session_id: Option<&str>,
        prompt: Option<&str>,
    ) -> serde_json::Value {
        let mut execute = serde_json::json!({
            "v": 1,
            "type": "execute",
            "request_id": request_id,
            "cwd": self.project.to_string_lossy(),
            "prompt": prompt.map(String::from).unwrap_or_else(|| self.prompt()),
            "model": {"provider": "deepseek-official", "id": "deepseek-chat"},
            "mcp_servers": [],
        });
        if let Some(session_id) = resume_session_id {
            execute["resume_session_id"] = serde_json::Value::from(session_id);
        }
        execute
    }

    /// A new session's `execute` with a model and effort picked from `--models` (spec 12).
    pub fn execute_line_picking(&self, request_id: &str, picked: &super::turn::Picked) -> Vec<u8> {
        let mut execute = self.execute(request_id, None, None);
        execute["model"] = serde_json::json!({"provider": picked.provider, "id": picked.id});
        if let Some(effort) = &picked.effort {
            execute["reasoning_effort"] = serde_json::Value::from(effort.as_str());
        }
        json_line(&execute)
    }

    pub fn cancel_line(&self, request_id: &str) -> Vec<u8> {
        json_line(&serde_json::json!({"v": 1, "type": "cancel", "request_id": request_id}))
    }
}

/// Copies the tree under `from` to `to`, symlinks as symlinks (a pnpm install holds some),
/// leaving out the entries whose name `skip` says.
pub fn copy_tree(
    from: &Path,
    to: &Path,
    skip: &dyn Fn(&std::ffi::OsStr) -> bool,
) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (name, kind) = (entry.file_name(), entry.file_type()?);
        let target = to.join(&name);
        if skip(&name) {
            continue;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &target)?;
        } else if kind.is_dir() {
            copy_tree(&entry.path(), &target, skip)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

pub fn json_line(value: &serde_json::Value) -> Vec<u8> {
    let mut line = value.to_string().into_bytes();
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_has_the_v4_shape() {
        let uuid = dsh_engine::random::random_uuid();
        let groups: Vec<&str> = uuid.split('-').collect();
        assert_eq!(
            groups.iter().map(|g| g.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(groups[2].starts_with('4'));
        assert!(matches!(groups[3].as_bytes()[0], b'8' | b'9' | b'a' | b'b'));
    }

    #[test]
    fn bounds_scale() {
        let target = Target {
            dsh: PathBuf::new(),
            dsh_home: None,
            home_template: None,
            time_scale: dsh_engine::timing::TimeScale::new(0.5).unwrap(),
            model_url: None,
            observed: Default::default(),
        };
        assert_eq!(target.bound(2000), Duration::from_millis(1000));
    }
}
