//! The reference host as one value: its configuration (environment, bounds, session store) and
//! its four operations, each in the module of its spec section: discover and setup here (spec 5
//! and 4), `run` in [`crate::run`] (spec 6-10) and `models` in [`crate::models`] (spec 12).

use crate::codes::Diagnostic;
use crate::discovery::{self, Discovery, DiscoveryBounds, DiscoveryEnv, ProbeInfo, Version};
use crate::redact::Redactor;
use crate::run::RunBounds;
use crate::session_store::SessionStore;
use crate::setup::{self, SetupBounds};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// Where the host's own diagnostics go (the driver: its stderr). Never handed prompts or secrets.
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

/// Everything a host run needs to know, fixed at startup.
#[derive(Clone)]
pub struct HostConfig {
    pub env: DiscoveryEnv,
    pub store: Option<SessionStore>,
    pub discovery_bounds: DiscoveryBounds,
    pub setup_bounds: SetupBounds,
    pub run_bounds: RunBounds,
    /// Credential values of the environment, redacted wherever the host keeps text.
    pub credentials: Redactor,
    pub log: Log,
}

impl HostConfig {
    /// From the process environment: `DSH_BIN`, `PATH`, `RUNTIME_DATA_DIR`, credential-looking
    /// variables, and the optional `DSH_HOST_*_MS` bounds (docs/reference-host.md).
    pub fn from_env() -> Result<Self, String> {
        let mut run_bounds = RunBounds::default();
        for (name, slot) in [
            ("DSH_HOST_READY_TIMEOUT_MS", &mut run_bounds.ready),
            ("DSH_HOST_RUN_TIMEOUT_MS", &mut run_bounds.run),
            ("DSH_HOST_CANCEL_GRACE_MS", &mut run_bounds.cancel_grace),
            (
                "DSH_HOST_STDIN_CLOSE_GRACE_MS",
                &mut run_bounds.stdin_close_grace,
            ),
            ("DSH_HOST_TERM_GRACE_MS", &mut run_bounds.term_grace),
            ("DSH_HOST_EXIT_GRACE_MS", &mut run_bounds.exit_grace),
        ] {
            if let Some(value) = std::env::var_os(name) {
                let millis = value
                    .to_str()
                    .and_then(|text| text.trim().parse::<u64>().ok())
                    .ok_or_else(|| format!("{name} must be a number of milliseconds"))?;
                *slot = Duration::from_millis(millis);
            }
        }
        Ok(Self {
            env: DiscoveryEnv::from_process(),
            store: SessionStore::from_env(),
            discovery_bounds: DiscoveryBounds::default(),
            setup_bounds: SetupBounds::default(),
            run_bounds,
            credentials: Redactor::from_process_env(),
            log: Arc::new(|line| eprintln!("dsh-host: {line}")),
        })
    }
}

/// What identifies the file a cached version belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStamp {
    path: PathBuf,
    len: u64,
    modified: Option<SystemTime>,
}

impl FileStamp {
    fn of(path: &Path) -> Option<Self> {
        let metadata = std::fs::metadata(path).ok()?;
        Some(Self {
            path: path.to_path_buf(),
            len: metadata.len(),
            modified: metadata.modified().ok(),
        })
    }
}

/// The reference host.
pub struct Host {
    pub(crate) config: HostConfig,
    version_cache: Mutex<Option<(FileStamp, Version)>>,
    /// The deliberate bugs switched on (test builds of the kit only, see [`crate::mutants`]).
    #[cfg(feature = "mutants")]
    pub(crate) mutants: crate::mutants::Mutants,
}

impl Host {
    pub fn new(config: HostConfig) -> Self {
        Self {
            config,
            version_cache: Mutex::new(None),
            #[cfg(feature = "mutants")]
            mutants: crate::mutants::Mutants::default(),
        }
    }

    pub fn config(&self) -> &HostConfig {
        &self.config
    }

    pub(crate) fn log(&self, line: &str) {
        (self.config.log)(line);
    }

    /// Spec 5: resolve, `--version`, probe gate.
    pub async fn discover(&self) -> Discovery {
        #[cfg(feature = "mutants")]
        if let Some(discovery) = self.discovery_without_probe().await {
            return self.noted(discovery);
        }
        let discovery = discovery::discover(
            &self.config.env,
            self.config.discovery_bounds,
            &self.config.credentials,
        )
        .await;
        self.noted(discovery)
    }

    /// Log a discovery's notes and remember the version it read.
    fn noted(&self, discovery: Discovery) -> Discovery {
        for note in &discovery.notes {
            self.log(note);
        }
        if let (Some(path), Some(version)) = (&discovery.executable, &discovery.version) {
            self.remember_version(path, version.clone());
        }
        discovery
    }

    /// Spec 4: verify the pinned bundle, install it, probe again.
    pub async fn setup(&self, tarball: &Path, manifest: &Path) -> Result<ProbeInfo, Diagnostic> {
        let resolved = discovery::resolve_executable(
            self.config.env.dsh_bin.as_deref(),
            self.config.env.path.as_deref(),
        )?;
        for note in &resolved.notes {
            self.log(note);
        }
        #[cfg(feature = "mutants")]
        if let Some(installed) = self
            .install_without_hash_check(&resolved.path, tarball, manifest)
            .await
        {
            return installed;
        }
        setup::install_bundle(
            &resolved.path,
            tarball,
            manifest,
            self.config.setup_bounds,
            &self.config.credentials,
        )
        .await
    }

    /// The version of `executable`, read once per change of the file (so an upgrade in place is
    /// noticed without a `--version` process on every run).
    pub(crate) async fn version_of(&self, executable: &Path) -> Option<Version> {
        let stamp = FileStamp::of(executable)?;
        if let Ok(cache) = self.version_cache.lock() {
            if let Some((cached_stamp, version)) = cache.as_ref() {
                if *cached_stamp == stamp {
                    return Some(version.clone());
                }
            }
        }
        match discovery::read_version(executable, self.config.discovery_bounds.version).await {
            Ok(version) => {
                self.remember_version(executable, version.clone());
                Some(version)
            }
            Err(diagnostic) => {
                self.log(&format!(
                    "{diagnostic}; the compatibility key uses version family `unknown`"
                ));
                None
            }
        }
    }

    fn remember_version(&self, executable: &Path, version: Version) {
        if let (Some(stamp), Ok(mut cache)) = (FileStamp::of(executable), self.version_cache.lock())
        {
            *cache = Some((stamp, version));
        }
    }
}
