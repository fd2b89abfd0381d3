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
    /// What is wrong with the journal, said exactly, when it holds no entry to judge by: it is
    /// missing, a link, not a regular file, over the bound, emptied, or was never written (no
    /// runtime started with the kit's environment).
    pub journal_problem: Option<String>,
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
    let journal_path = temp.path().join("journal.jsonl");
    create_journal(&journal_path)?;
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
    let (journal, journal_problem) = read_journal(&journal_path)?;
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
        journal_problem,
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

/// The modification time the kit gives the journal it creates: any write or truncation since
/// (which stamps the time of day) moves it.
const UNWRITTEN: std::time::SystemTime = std::time::UNIX_EPOCH;

/// Creates the case's empty journal (mode 0600: it will hold prompts) before the client starts,
/// so that its absence later means it was removed, stamped [`UNWRITTEN`] so that an empty
/// journal tells being emptied from never being written.
fn create_journal(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|file| file.set_modified(UNWRITTEN))
        .map_err(|e| format!("cannot create {}: {e}", path.display()))
}

/// fake-dsh's journal of the case, read by the harness's own reader (never through a link, a
/// regular file only, bounded: `dsh_engine::journal`; a last entry cut off by a SIGKILL
/// mid-write is left out). The client is told the journal's path, so what it did to it is the
/// case's problem, said exactly (the second value): the journal removed, replaced by a link or
/// by something that is no regular file, grown past the bound, emptied; or never written, no
/// runtime having started with the kit's environment. A line that is no journal entry is a kit
/// fault that stops the run (`Err`).
fn read_journal(path: &Path) -> Result<(Vec<Entry>, Option<String>), String> {
    use dsh_engine::journal::{Journal, JournalError};
    let entries = match Journal::new(path).read() {
        Ok(entries) => entries,
        Err(error @ JournalError::NotAnEntry { .. }) => return Err(error.to_string()),
        Err(JournalError::Missing(path)) => {
            let why = format!(
                "fake-dsh's journal is missing: {}, created by the kit before the client \
                 started, was removed",
                path.display()
            );
            return Ok((Vec::new(), Some(why)));
        }
        Err(other) => return Ok((Vec::new(), Some(other.to_string()))),
    };
    if !entries.is_empty() {
        return Ok((entries.into_iter().map(|line| line.entry).collect(), None));
    }
    let meta = std::fs::symlink_metadata(path).ok();
    let length = meta.as_ref().map_or(0, std::fs::Metadata::len);
    let written = meta.and_then(|meta| meta.modified().ok()) != Some(UNWRITTEN);
    let why = if length > 0 {
        format!(
            "fake-dsh's journal holds no entry: {} has {length} bytes and no whole journal line",
            path.display()
        )
    } else if written {
        format!(
            "fake-dsh's journal was emptied: {} was written to and holds nothing",
            path.display()
        )
    } else {
        "fake-dsh's journal was never written: no runtime started with the kit's environment \
         (the client must start the runtime it is given and pass its environment down, \
         FAKE_DSH_JOURNAL included)"
            .to_string()
    };
    Ok((Vec::new(), Some(why)))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journal_the_client_broke_or_never_had_written_is_named_as_such() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let problem = |path: &Path| {
            read_journal(path)
                .expect("no kit fault")
                .1
                .unwrap_or_default()
        };
        create_journal(&path).unwrap();
        assert!(
            problem(&path).starts_with("fake-dsh's journal was never written: no runtime started"),
            "{}",
            problem(&path)
        );
        std::fs::File::create(&path).unwrap();
        assert!(
            problem(&path).starts_with("fake-dsh's journal was emptied: "),
            "{}",
            problem(&path)
        );
        std::fs::write(&path, "\n\n").unwrap();
        assert!(
            problem(&path).contains("holds no entry"),
            "{}",
            problem(&path)
        );
        std::fs::remove_file(&path).unwrap();
        assert!(
            problem(&path).starts_with("fake-dsh's journal is missing: ")
                && problem(&path).ends_with("was removed"),
            "{}",
            problem(&path)
        );
        symlink("/dev/zero", &path).unwrap();
        assert!(
            problem(&path).starts_with("fake-dsh's journal is a link: "),
            "{}",
            problem(&path)
        );
        std::fs::remove_file(&path).unwrap();
        let start = r#"{"v":1,"event":"start","pid":10,"t_ms":1,"mode":"sdk","ppid":1,"pgid":10,"sid":1,"argv":["dsh"],"cwd":"/","env_names":[]}"#;
        std::fs::write(&path, format!("{start}\n")).unwrap();
        let (entries, problem) = read_journal(&path).unwrap();
        assert_eq!((entries.len(), problem), (1, None));
        std::fs::write(&path, "not an entry\n").unwrap();
        assert!(read_journal(&path)
            .unwrap_err()
            .contains("line 1: not a journal entry"));
    }
}
