//! Shared world for the host's integration tests: a temp case root with a project dir, a Harness
//! home, a host data dir, a fake-dsh journal and a `bin/dsh` wrapper playing a scenario; helpers
//! to run the library host against it and to read what fake-dsh journaled.

#![allow(dead_code)]

use dsh_host::discovery::{DiscoveryBounds, DiscoveryEnv};
use dsh_host::events::Event;
use dsh_host::host::Log;
use dsh_host::redact::Redactor;
use dsh_host::run::RunBounds;
use dsh_host::session_store::SessionStore;
use dsh_host::setup::SetupBounds;
use dsh_host::{Host, HostConfig, Outcome, RunRequest};
use dsh_protocol::frames::ModelRoute;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// The canary credential every world exports to the runtime.
pub const CANARY: &str = "sk-canary-3f9a7c1e5d";

pub struct World {
    pub root: tempfile::TempDir,
    pub logs: Arc<Mutex<Vec<String>>>,
    /// Whether the wrapper itself exports DSH_HOME and the canary (library tests); the driver
    /// tests pass them through the driver's environment instead.
    wrapper_sets_env: bool,
}

impl World {
    /// A world whose `bin/dsh` plays `scenario`, with the profile installed.
    pub fn new(scenario: Value) -> World {
        Self::build(scenario, true, true)
    }

    /// A world whose profile is not installed (setup tests).
    pub fn without_profile(scenario: Value) -> World {
        Self::build(scenario, false, true)
    }

    /// A world for the driver binary: DSH_HOME and the canary come from the driver's environment.
    pub fn for_driver(scenario: Value) -> World {
        Self::build(scenario, true, false)
    }

    fn build(scenario: Value, profile: bool, wrapper_sets_env: bool) -> World {
        let root = tempfile::tempdir().unwrap_or_else(|error| panic!("tempdir: {error}"));
        let world = World {
            root,
            logs: Arc::new(Mutex::new(Vec::new())),
            wrapper_sets_env,
        };
        for dir in ["project", "dsh-home", "host-data", "bin"] {
            std::fs::create_dir_all(world.path(dir))
                .unwrap_or_else(|error| panic!("mkdir {dir}: {error}"));
        }
        if profile {
            let manifest = world.home().join("profiles/open-design/package.json");
            std::fs::create_dir_all(manifest.parent().unwrap_or(Path::new("/")))
                .unwrap_or_else(|error| panic!("mkdir profile: {error}"));
            std::fs::write(
                &manifest,
                b"{\"name\":\"@open-design/dsh-runtime\",\"version\":\"0.1.0\"}\n",
            )
            .unwrap_or_else(|error| panic!("write profile: {error}"));
        }
        world.set_scenario(&scenario);
        world.write_wrapper(None);
        world
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.root.path().join(relative)
    }

    pub fn project(&self) -> PathBuf {
        self.path("project")
    }

    pub fn home(&self) -> PathBuf {
        self.path("dsh-home")
    }

    pub fn data_dir(&self) -> PathBuf {
        self.path("host-data")
    }

    pub fn dsh(&self) -> PathBuf {
        self.path("bin/dsh")
    }

    pub fn journal_path(&self) -> PathBuf {
        self.path("journal.jsonl")
    }

    pub fn set_scenario(&self, scenario: &Value) {
        let text = serde_json::to_vec_pretty(scenario).unwrap_or_default();
        std::fs::write(self.path("scenario.json"), text)
            .unwrap_or_else(|error| panic!("scenario: {error}"));
    }

    /// (Re)write `bin/dsh`; `version` makes fake-dsh's `--version` answer it.
    pub fn write_wrapper(&self, version: Option<&str>) {
        let fake = dsh_test_support::binary("fake-dsh");
        let mut script = String::from("#!/bin/sh\n");
        script.push_str(&format!(
            "export FAKE_DSH_SCENARIO='{}'\n",
            self.path("scenario.json").display()
        ));
        script.push_str(&format!(
            "export FAKE_DSH_JOURNAL='{}'\n",
            self.journal_path().display()
        ));
        script.push_str("export FAKE_DSH_WATCHDOG_SECS=60\n");
        if self.wrapper_sets_env {
            script.push_str(&format!("export DSH_HOME='{}'\n", self.home().display()));
            script.push_str(&format!("export DEEPSEEK_API_KEY='{CANARY}'\n"));
        }
        if let Some(version) = version {
            script.push_str(&format!("export FAKE_DSH_VERSION='{version}'\n"));
        }
        script.push_str(&format!("exec '{}' \"$@\"\n", fake.display()));
        let path = self.dsh();
        let temp = self.path("bin/.dsh.tmp");
        std::fs::write(&temp, script).unwrap_or_else(|error| panic!("wrapper: {error}"));
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|error| panic!("chmod: {error}"));
        std::fs::rename(&temp, &path).unwrap_or_else(|error| panic!("rename wrapper: {error}"));
    }

    /// A host configured for this world (short bounds where a test would otherwise wait).
    pub fn config(&self) -> HostConfig {
        let logs = self.logs.clone();
        let log: Log = Arc::new(move |line: &str| {
            if let Ok(mut logs) = logs.lock() {
                logs.push(line.to_string());
            }
        });
        let mut credentials = Redactor::default();
        credentials.add_credentials([("DEEPSEEK_API_KEY".to_string(), CANARY.to_string())]);
        HostConfig {
            env: DiscoveryEnv {
                dsh_bin: Some(self.dsh().into_os_string()),
                path: Some(self.path("bin").into_os_string()),
            },
            store: Some(SessionStore::new(&self.data_dir())),
            discovery_bounds: DiscoveryBounds::default(),
            setup_bounds: SetupBounds::default(),
            run_bounds: RunBounds {
                run: std::time::Duration::from_secs(30),
                ..RunBounds::default()
            },
            credentials,
            log,
        }
    }

    pub fn host(&self) -> Host {
        Host::new(self.config())
    }

    pub fn logs(&self) -> Vec<String> {
        self.logs
            .lock()
            .map(|logs| logs.clone())
            .unwrap_or_default()
    }

    pub fn request(&self, conversation: &str, prompt: &str) -> RunRequest {
        RunRequest {
            conversation_id: conversation.to_string(),
            project_id: "proj-1".to_string(),
            cwd: self.project(),
            prompt: prompt.to_string(),
            bootstrap: "OD-BOOTSTRAP: you are designing inside OpenDesign".to_string(),
            model: Some(ModelRoute {
                provider: "deepseek-official".to_string(),
                id: "deepseek-chat".to_string(),
            }),
            reasoning_effort: None,
        }
    }

    /// Every journal entry so far.
    pub fn journal(&self) -> Vec<Value> {
        std::fs::read_to_string(self.journal_path())
            .map(|text| {
                text.lines()
                    .filter_map(|line| serde_json::from_str(line).ok())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Journal entries of the `--stdio` process with this invocation index.
    pub fn stdio_process(&self, invocation: u64) -> Vec<Value> {
        let journal = self.journal();
        let pid = journal
            .iter()
            .find(|entry| {
                entry["event"] == "start"
                    && entry["mode"] == "stdio"
                    && entry["invocation"] == invocation
            })
            .map(|entry| entry["pid"].clone());
        journal
            .into_iter()
            .filter(|entry| Some(&entry["pid"]) == pid.as_ref())
            .collect()
    }

    /// The commands (parsed JSON) the `--stdio` process with this invocation index received.
    pub fn commands(&self, invocation: u64) -> Vec<Value> {
        self.stdio_process(invocation)
            .into_iter()
            .filter(|entry| entry["event"] == "command")
            .map(|entry| entry["command"].clone())
            .collect()
    }

    /// Deletes fake-dsh's stored record of a session (`$DSH_HOME/sessions/<id>.json`), so a resume
    /// of it is rejected.
    pub fn delete_session_record(&self, session_id: &str) {
        let record = self
            .home()
            .join("sessions")
            .join(format!("{session_id}.json"));
        std::fs::remove_file(&record)
            .unwrap_or_else(|error| panic!("delete {}: {error}", record.display()));
    }

    /// How many processes of each mode were started.
    pub fn starts(&self, mode: &str) -> usize {
        self.journal()
            .iter()
            .filter(|entry| entry["event"] == "start" && entry["mode"] == mode)
            .count()
    }

    /// Pids of every fake-dsh process (grandchildren included) that is still alive (not a zombie).
    pub fn live_processes(&self) -> Vec<u64> {
        let mut pids: Vec<u64> = self
            .journal()
            .iter()
            .filter(|entry| entry["event"] == "start")
            .filter_map(|entry| entry["pid"].as_u64())
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids.into_iter()
            .filter(|pid| is_alive_fake_dsh(*pid))
            .collect()
    }
}

/// Whether `pid` is a running (non-zombie) fake-dsh.
pub fn is_alive_fake_dsh(pid: u64) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rfind(')')
        .and_then(|at| stat[at + 1..].split_whitespace().next().map(str::to_string));
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let is_fake = String::from_utf8_lossy(&cmdline).contains("fake-dsh");
    is_fake && !matches!(state.as_deref(), Some("Z") | Some("X") | None)
}

/// Run one turn to its outcome, collecting its events.
pub async fn run(host: &Host, request: &RunRequest) -> (Outcome, Vec<Event>) {
    let (_cancel, signal) = watch::channel(false);
    let mut events = Vec::new();
    let mut emit = |event: Event| events.push(event);
    let outcome = host.run(request, signal, &mut emit).await;
    (outcome, events)
}

/// Run one turn, cancelling it when the first event of `kind` arrives.
pub async fn run_cancelling_on(
    host: &Host,
    request: &RunRequest,
    kind: &str,
) -> (Outcome, Vec<Event>) {
    let (cancel, signal) = watch::channel(false);
    let mut events = Vec::new();
    let mut emit = |event: Event| {
        if event.kind() == kind {
            let _ = cancel.send(true);
        }
        events.push(event);
    };
    let outcome = host.run(request, signal, &mut emit).await;
    (outcome, events)
}

pub fn kinds(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(Event::kind).collect()
}

/// The default agent's HTML file in the project.
pub fn read_project_file(world: &World, name: &str) -> String {
    std::fs::read_to_string(world.project().join(name)).unwrap_or_default()
}
