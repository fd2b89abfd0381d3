//! One client case, played: the client starts in an empty working directory of its own with the
//! driver contract's environment (docs/sdk-clients.md, "The driver contract"), fake-dsh behind it
//! playing the case's scenario and journaling what it did; the kit waits a bounded time, then
//! looks at what is left: the client's reports and exit, the runtimes it left running (found by
//! the case's token in their environment, then killed), and where the case's credential ended up.

use dsh_engine::leftovers::{self, Leftover, CASE_TOKEN_ENV};
use dsh_engine::process::{disown, spawn_owned};
use dsh_engine::random::random_uuid;
use dsh_formats::client_case::{ClientCase, ClientSurface};
use dsh_formats::journal::{Entry, Event};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The variable holding the runtime's argv (a JSON array) for an SDK client.
pub const SDK_COMMAND_ENV: &str = "DSH_SDK_COMMAND";
/// The variable holding the runtime's argv (a JSON array) for a headless client.
pub const HEADLESS_COMMAND_ENV: &str = "DSH_HEADLESS_COMMAND";
/// How many seconds a client may wait on a silent runtime before giving up (and, closing, before
/// killing it).
pub const TIMEOUT_ENV: &str = "DSH_SDK_TIMEOUT";
/// The credential every case hands the client.
pub const KEY_ENV: &str = "DEEPSEEK_API_KEY";

/// The most of a client's stdout or stderr kept (an 8 MiB report fits).
const OUTPUT_BOUND: usize = 64 << 20;

/// How every case of a run starts its client.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The client's command line (a file path in it already absolute).
    pub client: Vec<String>,
    pub fake_dsh: PathBuf,
    /// Multiplies the case limit and the client's timeout.
    pub time_scale: f64,
    /// The caller's environment the client gets (the allowlist and `--pass-env`).
    pub inherited: Vec<(String, String)>,
    /// fake-dsh's arguments after its path, per surface (the persona's command line).
    pub runtime_args: Vec<String>,
}

impl Setup {
    /// The longest one case may take before the client is killed as hung.
    pub fn limit(&self) -> Duration {
        Duration::from_secs_f64(40.0 * self.time_scale.max(0.1))
    }
    /// What the client is told it may wait on a silent runtime.
    fn client_timeout_secs(&self) -> u64 {
        (5.0 * self.time_scale.max(0.2)).ceil() as u64
    }
}

/// What one case left behind.
#[derive(Debug)]
pub struct Played {
    /// The client's exit code; `None` when it was killed at the limit or by a signal.
    pub exit: Option<i32>,
    pub hung: bool,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// fake-dsh's journal lines (every runtime the client started).
    pub journal: Vec<Entry>,
    /// Runtimes (and any other process of the client's) still alive after the client exited.
    pub leftovers: Vec<Leftover>,
    /// Where the case's credential was found (argv, output, files).
    pub leaked: Vec<String>,
    pub duration: Duration,
}

/// Plays `case`; `Err` when it could not be played at all (the client cannot start, no temp dir).
pub fn play(setup: &Setup, case: &ClientCase) -> Result<Played, String> {
    let temp = dsh_engine::scratch::tempdir("dsh-conformance-client-")
        .map_err(|e| format!("cannot create a temp dir: {e}"))?;
    let work = temp.path().join("work");
    std::fs::create_dir_all(&work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    let token = random_uuid();
    let secret = format!("sk-dsh-conformance-{}", random_uuid().replace('-', ""));
    let mut command = client_command(setup, case, temp.path(), &token, &secret)?;
    command.current_dir(&work);
    let started = Instant::now();
    let Ended {
        exit,
        hung,
        stdout,
        stderr,
    } = wait_bounded(command, setup.limit())?;
    // What still carries the token once a signalled runtime had its grace to finish is left
    // behind; the sweep kills it before the pipes it may hold are read to their end.
    let grace = Duration::from_secs_f64(setup.time_scale.max(0.5));
    let leftovers = leftovers::sweep(&token, grace, Duration::from_secs(2));
    let (stdout, stderr) = (
        stdout.join().unwrap_or_default(),
        stderr.join().unwrap_or_default(),
    );
    let duration = started.elapsed();
    let journal = read_journal(&temp.path().join("journal.jsonl"))?;
    // The journal re-read after the sweep: a runtime that journaled its exit was exiting on its
    // own when the grace ran out, not left running.
    let leftovers: Vec<Leftover> = leftovers
        .into_iter()
        .filter(|left| {
            !journal
                .iter()
                .any(|entry| entry.pid == left.pid && matches!(entry.event, Event::Exit { .. }))
        })
        .collect();
    let mut leaked = leaks_in_argv(&journal, &secret);
    for (name, bytes) in [
        ("the client's stdout", &stdout),
        ("the client's stderr", &stderr),
    ] {
        if contains(bytes, secret.as_bytes()) {
            leaked.push(name.to_string());
        }
    }
    leaked.extend(leaks_in_files(&work, &secret));
    Ok(Played {
        exit,
        hung,
        stdout,
        stderr,
        journal,
        leftovers,
        leaked,
        duration,
    })
}

/// The client's command with the driver contract's environment and nothing else of the caller's
/// but the allowlist.
fn client_command(
    setup: &Setup,
    case: &ClientCase,
    temp: &Path,
    token: &str,
    secret: &str,
) -> Result<Command, String> {
    let (program, args) = setup
        .client
        .split_first()
        .ok_or("the client command is empty")?;
    let variable = match case.surface {
        ClientSurface::Sdk => SDK_COMMAND_ENV,
        ClientSurface::Headless => HEADLESS_COMMAND_ENV,
    };
    let mut runtime = vec![setup.fake_dsh.display().to_string()];
    runtime.extend(setup.runtime_args.iter().cloned());
    let runtime = serde_json::json!(runtime);
    let mut command = Command::new(program);
    command
        .args(args)
        .args(&case.prompts)
        .env_clear()
        .envs(setup.inherited.iter().map(|(k, v)| (k, v)))
        .env(variable, runtime.to_string())
        .env(TIMEOUT_ENV, setup.client_timeout_secs().to_string())
        .env(KEY_ENV, secret)
        .env(CASE_TOKEN_ENV, token)
        .env("DSH_HOME", temp.join("dsh-home"))
        .env("FAKE_DSH_JOURNAL", temp.join("journal.jsonl"))
        .env(
            "FAKE_DSH_WATCHDOG_SECS",
            (setup.limit().as_secs() + 10).to_string(),
        );
    if let Some(runtime) = &case.runtime {
        let file = temp.join("scenario.json");
        let document = serde_json::json!({ "sdk": runtime });
        std::fs::write(&file, document.to_string())
            .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
        command.env("FAKE_DSH_SCENARIO", file);
    }
    Ok(command)
}

/// How the client process ended, and the readers of its pipes (joined once whatever the client
/// left running is gone).
struct Ended {
    exit: Option<i32>,
    hung: bool,
    stdout: std::thread::JoinHandle<Vec<u8>>,
    stderr: std::thread::JoinHandle<Vec<u8>>,
}

/// Runs the client in its own process group, both pipes drained (bounded); at `limit` the group
/// is killed and the run is `hung`.
fn wait_bounded(mut command: Command, limit: Duration) -> Result<Ended, String> {
    use std::os::unix::process::CommandExt;
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = spawn_owned(&mut command)
        .map_err(|e| format!("cannot start the client {:?}: {e}", command.get_program()))?;
    let group = nix::unistd::Pid::from_raw(child.id() as i32);
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let deadline = Instant::now() + limit;
    let mut hung = false;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if Instant::now() >= deadline {
            hung = true;
            nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL).ok();
            break child.wait().map_err(|e| e.to_string())?;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    disown(group.as_raw());
    Ok(Ended {
        exit: status.code().filter(|_| !hung),
        hung,
        stdout,
        stderr,
    })
}

/// Reads a pipe to its end on a thread, keeping at most [`OUTPUT_BOUND`] bytes. The reader ends
/// when every holder of the pipe's write end has exited (a runtime the client left running
/// holds its stderr only if the client gave it its own).
fn drain(pipe: Option<impl std::io::Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        if let Some(pipe) = pipe {
            use std::io::Read;
            let _ = pipe.take(OUTPUT_BOUND as u64).read_to_end(&mut kept);
        }
        kept
    })
}

/// fake-dsh's journal of the case, read by the harness's own reader (a last entry cut off by a
/// SIGKILL mid-write is left out); none when no runtime started with the kit's environment, and
/// a line that is no journal entry is a kit fault that stops the run.
fn read_journal(path: &Path) -> Result<Vec<Entry>, String> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let entries = dsh_engine::journal::Journal::new(path).read()?;
    Ok(entries.into_iter().map(|line| line.entry).collect())
}

fn leaks_in_argv(journal: &[Entry], secret: &str) -> Vec<String> {
    journal
        .iter()
        .filter_map(|entry| match &entry.event {
            Event::Start { argv, .. } if argv.iter().any(|arg| arg.contains(secret)) => {
                Some(format!("the runtime's argv (pid {})", entry.pid))
            }
            _ => None,
        })
        .collect()
}

/// The files under the client's working directory holding the secret (bounded: the first 2,000
/// files, 16 MiB each).
fn leaks_in_files(work: &Path, secret: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![work.to_path_buf()];
    let mut seen = 0;
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > 2000 {
                return found;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file() {
                let mut bytes = Vec::new();
                if let Ok(file) = std::fs::File::open(entry.path()) {
                    use std::io::Read;
                    let _ = file.take(16 << 20).read_to_end(&mut bytes);
                }
                if contains(&bytes, secret.as_bytes()) {
                    let path = entry.path();
                    let relative = path.strip_prefix(work).unwrap_or(&path);
                    found.push(format!(
                        "the file {} in its working directory",
                        relative.display()
                    ));
                }
            }
        }
    }
    found
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}
