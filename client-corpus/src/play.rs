//! One client case, played: the client starts in an empty working directory of its own with the
//! driver contract's environment (docs/sdk-clients.md, "The driver contract"), fake-dsh behind it
//! playing the case's scenario and journaling what it did; the kit waits a bounded time, then
//! looks at what is left: the client's reports and exit, the runtimes it left running (found by
//! the case's token in their environment, or adopted by `run` as a child subreaper whatever their
//! environment and session; then killed), the pipes still held open at the case's limit (their
//! holders named and killed), and where the case's credential ended up.

use dsh_engine::leftovers::{self, Leftover, CASE_TOKEN_ENV};
use dsh_engine::process::{adopted, disown, kill_adopted, spawn_owned};
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
    /// Runtimes (and any other process of the client's) still alive after the client exited:
    /// found by the case's token, or adopted by `run` as a subreaper whatever their environment.
    pub leftovers: Vec<Leftover>,
    /// The client's pipes still open at the case's limit: which (`stdout`, `stderr`) and the
    /// processes holding it (killed).
    pub held_open: Vec<(String, Vec<Leftover>)>,
    /// Where the case's credential was found (argv, output, files).
    pub leaked: Vec<String>,
    pub duration: Duration,
}

/// Plays `case`; `Err` when it could not be played at all (the client cannot start, no temp dir).
pub fn play(setup: &Setup, case: &ClientCase) -> Result<Played, String> {
    let temp = dsh_engine::scratch::tempdir("dsh-conformance-client-")
        .map_err(|e| format!("cannot create a temp dir: {e}"))?;
    // A second stop signal removes it before `run` exits (its journal holds prompts).
    dsh_engine::interrupt::add_live_dir(temp.path());
    let played = play_in(setup, case, temp.path());
    dsh_engine::interrupt::forget_live_dir(temp.path());
    played
}

/// [`play`] in the case's temp dir `temp`.
fn play_in(setup: &Setup, case: &ClientCase, temp: &Path) -> Result<Played, String> {
    let work = temp.join("work");
    std::fs::create_dir_all(&work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    let token = random_uuid();
    let secret = format!("sk-dsh-conformance-{}", random_uuid().replace('-', ""));
    let mut command = client_command(setup, case, temp, &token, &secret)?;
    command.current_dir(&work);
    let started = Instant::now();
    let deadline = started + setup.limit();
    let Ended {
        exit,
        hung,
        stdout,
        stderr,
    } = wait_bounded(command, deadline)?;
    // What still runs once a signalled runtime had its grace to finish is left behind: what
    // carries the case's token, and every orphan `run` adopted as a subreaper (a daemon that
    // called `setsid` and emptied its environment). Both are killed before the pipes they may
    // hold are read to their end.
    let grace = Duration::from_secs_f64(setup.time_scale.max(0.5));
    let leftovers = teardown(&token, grace);
    // The pipes are read until the case's limit (and the teardown's grace) at most: a process
    // that still holds one then is named, and killed.
    let drained = deadline.max(Instant::now()) + grace;
    let mut held_open = Vec::new();
    let stdout = stdout.finish(drained, "stdout", &mut held_open);
    let stderr = stderr.finish(drained, "stderr", &mut held_open);
    let duration = started.elapsed();
    let journal = read_journal(&temp.join("journal.jsonl"))?;
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
        held_open,
        leaked,
        duration,
    })
}

/// Ends what the client left running (see [`play`]): waits up to `grace` for the processes
/// carrying `token` and the orphans adopted here to exit by themselves, then kills both kinds
/// (an adopted orphan carrying another case's token is that case's to sweep). Returns what it
/// killed, each process once.
fn teardown(token: &str, grace: Duration) -> Vec<Leftover> {
    let deadline = Instant::now() + grace;
    let ours = |pid: i32| !carries_other_token(pid, token);
    while Instant::now() < deadline
        && (!leftovers::find(token).is_empty() || adopted().into_iter().any(ours))
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut killed = leftovers::sweep(token, Duration::ZERO, Duration::from_secs(2));
    // Twice: the token sweep's victims may leave orphans of their own.
    for _ in 0..2 {
        for leftover in kill_adopted(Duration::from_secs(2), |pid| {
            carries_other_token(pid, token)
        }) {
            if !killed.iter().any(|known| known.pid == leftover.pid) {
                killed.push(leftover);
            }
        }
    }
    killed.sort_by_key(|leftover| leftover.pid);
    killed
}

/// Whether `pid`'s environment holds another case's token (a case run beside this one).
fn carries_other_token(pid: i32, token: &str) -> bool {
    let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let prefix = format!("{CASE_TOKEN_ENV}=");
    environ
        .split(|byte| *byte == 0)
        .filter_map(|var| var.strip_prefix(prefix.as_bytes()))
        .any(|value| value != token.as_bytes())
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
    stdout: Drain,
    stderr: Drain,
}

/// Runs the client in its own process group, both pipes drained (bounded); at `deadline` the
/// group is killed and the run is `hung`.
fn wait_bounded(mut command: Command, deadline: Instant) -> Result<Ended, String> {
    use std::os::unix::process::CommandExt;
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // Under the live groups' lock: a stop signal either sees the client's group or stops it.
    let mut groups = dsh_engine::interrupt::live_groups();
    if groups.interrupted() {
        return Err("the run was interrupted".into());
    }
    let mut child = spawn_owned(&mut command)
        .map_err(|e| format!("cannot start the client {:?}: {e}", command.get_program()))?;
    let group = nix::unistd::Pid::from_raw(child.id() as i32);
    groups.add(group.as_raw());
    drop(groups);
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
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
    dsh_engine::interrupt::forget_group(group.as_raw());
    disown(group.as_raw());
    Ok(Ended {
        exit: status.code().filter(|_| !hung),
        hung,
        stdout,
        stderr,
    })
}

/// One of the client's pipes, read on a thread: its bytes (at most [`OUTPUT_BOUND`] kept, the
/// rest read and dropped) until every holder of its write end has closed it, or until the
/// deadline [`Drain::finish`] sets, whichever comes first.
struct Drain {
    reader: std::thread::JoinHandle<(Vec<u8>, bool)>,
    /// The pipe's inode, to find who holds it open.
    inode: Option<u64>,
    deadline: std::sync::Arc<std::sync::Mutex<Option<Instant>>>,
}

fn drain<P>(pipe: Option<P>) -> Drain
where
    P: std::io::Read + std::os::fd::AsFd + Send + 'static,
{
    let inode = pipe
        .as_ref()
        .and_then(|pipe| nix::sys::stat::fstat(pipe.as_fd()).ok())
        .map(|stat| stat.st_ino);
    let deadline = std::sync::Arc::new(std::sync::Mutex::new(None::<Instant>));
    let until = std::sync::Arc::clone(&deadline);
    let reader = std::thread::spawn(move || {
        let mut kept = Vec::new();
        let Some(mut pipe) = pipe else {
            return (kept, true);
        };
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            let limit = *until.lock().unwrap_or_else(|p| p.into_inner());
            let wait_ms: u16 = match limit {
                Some(limit) if Instant::now() >= limit => return (kept, false),
                Some(limit) => {
                    u16::try_from(limit.saturating_duration_since(Instant::now()).as_millis())
                        .unwrap_or(100)
                        .clamp(1, 100)
                }
                None => 100,
            };
            let mut fds = [nix::poll::PollFd::new(
                pipe.as_fd(),
                nix::poll::PollFlags::POLLIN,
            )];
            match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(wait_ms)) {
                Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => return (kept, true),
                Ok(_) => {}
            }
            match pipe.read(&mut buffer) {
                Ok(0) => return (kept, true),
                Ok(read) => {
                    let room = OUTPUT_BOUND.saturating_sub(kept.len());
                    kept.extend_from_slice(&buffer[..read.min(room)]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return (kept, true),
            }
        }
    });
    Drain {
        reader,
        inode,
        deadline,
    }
}

impl Drain {
    /// The pipe's bytes, read until its end or `deadline`; a pipe still open then is closed here,
    /// and the processes holding it are killed and listed in `held_open` under `name`.
    fn finish(
        self,
        deadline: Instant,
        name: &str,
        held_open: &mut Vec<(String, Vec<Leftover>)>,
    ) -> Vec<u8> {
        *self.deadline.lock().unwrap_or_else(|p| p.into_inner()) = Some(deadline);
        let (kept, ended) = self.reader.join().unwrap_or_default();
        if !ended {
            let holders: Vec<Leftover> = self
                .inode
                .map(dsh_engine::procfs::pipe_holders)
                .unwrap_or_default()
                .into_iter()
                .map(|pid| Leftover {
                    pid,
                    command: dsh_engine::procfs::command_of(pid),
                })
                .collect();
            for holder in &holders {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(holder.pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            held_open.push((name.to_string(), holders));
        }
        kept
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A pipe whose write end a `sleep` holds is read only until the deadline: the drain returns
    /// what came, names the sleep as the holder and kills it.
    #[test]
    fn a_drain_stops_at_its_deadline_and_names_the_holder() {
        let (reader, writer) = std::io::pipe().unwrap();
        let mut holder = Command::new("sh")
            .args(["-c", "echo early; exec sleep 30"])
            .stdout(writer)
            .spawn()
            .unwrap();
        let pid = holder.id() as i32;
        let drained = drain(Some(reader));
        let mut held_open = Vec::new();
        let bytes = drained.finish(
            Instant::now() + Duration::from_millis(500),
            "stdout",
            &mut held_open,
        );
        let status = holder.wait().unwrap();
        assert_eq!(bytes, b"early\n");
        assert_eq!(held_open.len(), 1, "{held_open:?}");
        assert_eq!(held_open[0].0, "stdout");
        assert_eq!(
            held_open[0].1.iter().map(|l| l.pid).collect::<Vec<_>>(),
            [pid]
        );
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(9), "the holder was killed");
    }

    #[test]
    fn a_pipe_closed_by_its_writers_drains_to_its_end() {
        let (reader, writer) = std::io::pipe().unwrap();
        let mut writer_process = Command::new("echo")
            .arg("all of it")
            .stdout(writer)
            .spawn()
            .unwrap();
        let drained = drain(Some(reader));
        writer_process.wait().unwrap();
        let mut held_open = Vec::new();
        let bytes = drained.finish(
            Instant::now() + Duration::from_secs(30),
            "stderr",
            &mut held_open,
        );
        assert_eq!(bytes, b"all of it\n");
        assert!(held_open.is_empty());
    }
}
