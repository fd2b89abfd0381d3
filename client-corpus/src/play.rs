//! One client case, played (its client run once, or `runs` times one after the other on the same
//! home): the client starts in an empty working directory of its own with the
//! driver contract's environment (docs/sdk-clients.md, "The driver contract"), handed the case's
//! launcher (`crate::launcher`) as its runtime: fake-dsh configured to play the case's scenario and
//! journal what it did (the file, and the kit's own copy: `crate::journal_copy`), whatever
//! environment the client passes down; while it waits a bounded time, the kit watches the journal
//! and samples the client's processes for the key (`crate::canary::processes`); then it looks at
//! what is left: the client's reports and exit, whether the case's configuration reached the
//! runtime, the runtimes it left running (found by the case's token in their environment, or
//! adopted by `run` as a child subreaper whatever their environment and session, spared only when
//! they carry the token of another case in flight; then killed), the pipes still held open at the
//! case's limit (their holders named and killed), and where the case's credential ended up.

use crate::canary::processes::ProcessSampler;
use crate::canary::{Bounds, Canary};
use crate::journal_copy::{JournalCopy, JOURNAL_COPY_ENV};
use crate::launcher::Launcher;
use dsh_engine::leftovers::{self, Leftover, CASE_TOKEN_ENV};
use dsh_engine::process::{adopted, disown, kill_adopted, spawn_owned};
use dsh_engine::random::random_uuid;
use dsh_formats::client_case::{ClientCase, ClientSurface};
use dsh_formats::journal::{Entry, Event};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The variable holding the runtime's argv (a JSON array) for an SDK client.
pub const SDK_COMMAND_ENV: &str = "DSH_SDK_COMMAND";
/// The variable holding the runtime's argv (a JSON array) for a headless client.
pub const HEADLESS_COMMAND_ENV: &str = "DSH_HEADLESS_COMMAND";
/// The variable holding the runtime's argv (a JSON array) for an ACP client.
pub const ACP_COMMAND_ENV: &str = "DSH_ACP_COMMAND";
/// How many seconds a client may wait on a silent runtime before giving up (and, closing, before
/// killing it).
pub const TIMEOUT_ENV: &str = "DSH_SDK_TIMEOUT";
/// The session id an SDK client is told to use (a case's `session`).
pub const SESSION_ENV: &str = "DSH_SDK_SESSION";
/// Set to `1` when the session `DSH_SDK_SESSION` names is stored and must be resumed.
pub const RESUME_ENV: &str = "DSH_SDK_RESUME";
/// The directory (relative to its working directory) an SDK client moves its session to.
pub const CWD_ENV: &str = "DSH_SDK_CWD";
/// The credential every case hands the client.
pub const KEY_ENV: &str = "DEEPSEEK_API_KEY";
/// fake-dsh's journal of the case (set by the launcher, and in the client's environment).
const JOURNAL_ENV: &str = "FAKE_DSH_JOURNAL";
/// The scenario fake-dsh plays, when the case has one.
const SCENARIO_ENV: &str = "FAKE_DSH_SCENARIO";
/// fake-dsh's own limit, past the case's.
const WATCHDOG_ENV: &str = "FAKE_DSH_WATCHDOG_SECS";

/// The most of a client's stdout or stderr kept (an 8 MiB report fits).
const OUTPUT_BOUND: usize = 64 << 20;

/// How every case of a run starts its client.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The client's command line (a file path in it already absolute).
    pub client: Vec<String>,
    pub fake_dsh: PathBuf,
    /// Multiplies the case limit and the client's timeout.
    pub time_scale: dsh_engine::timing::TimeScale,
    /// The caller's environment the client gets (the allowlist and `--pass-env`).
    pub inherited: Vec<(String, String)>,
    /// fake-dsh's arguments after its path, always (the persona's).
    pub runtime_args: Vec<String>,
    /// fake-dsh's arguments for the surface (`--profile sdk`), after [`Setup::runtime_args`]
    /// when the client names no `--profile` of its own.
    pub profile_args: Vec<String>,
}

impl Setup {
    /// The longest one case may take before the client is killed as hung.
    pub fn limit(&self) -> Duration {
        self.time_scale.scale(Duration::from_secs(40))
    }
    /// What the client is told it may wait on a silent runtime: 10 s (times `--time-scale`),
    /// room for an 8 MiB frame from a debug fake-dsh on a loaded 2-core machine (5 s was not:
    /// docs/performance.md, "Stress"), well inside the case's limit.
    fn client_timeout_secs(&self) -> u64 {
        self.time_scale
            .scale(Duration::from_secs(10))
            .as_secs_f64()
            .ceil() as u64
    }
}

/// How one of a case's earlier runs ended (a case with `runs` above 1; the last run is
/// [`Played`] itself).
#[derive(Debug)]
pub struct EarlierRun {
    pub exit: Option<i32>,
    pub hung: bool,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// How many entries fake-dsh's journal held when this run ended: a runtime whose `start`
    /// entry comes later was started by a later run.
    pub journal_entries: usize,
}

/// What one case left behind.
#[derive(Debug)]
pub struct Played {
    /// The runs before the last one, in order (none unless the case has `runs` above 1).
    pub earlier: Vec<EarlierRun>,
    /// The client's exit code; `None` when it was killed at the limit or by a signal.
    pub exit: Option<i32>,
    pub hung: bool,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// fake-dsh's journal lines (every runtime the client started).
    pub journal: Vec<Entry>,
    /// What is wrong with the journal, said exactly, when it holds no entry to judge by: it is
    /// missing, a link, not a regular file, over the bound, or emptied (one never written is a
    /// [`Played::configuration_problem`]).
    pub journal_problem: Option<String>,
    /// How the case's configuration did not reach the runtime, said exactly: fake-dsh's journal
    /// never written (no runtime started through the case's launcher), or a runtime started
    /// without the variables the launcher sets.
    pub configuration_problem: Option<String>,
    /// Runtimes (and any other process of the client's) still alive after the client exited:
    /// found by the case's token, or adopted by `run` as a subreaper whatever their environment.
    pub leftovers: Vec<Leftover>,
    /// The client's pipes still open at the case's limit: which (`stdout`, `stderr`) and the
    /// processes holding it (killed).
    pub held_open: Vec<(String, Vec<Leftover>)>,
    /// Where the case's credential was found: the runtime's argv and stdin, the client's output,
    /// files under the case's directory (each with the form found: raw, base64, a piece of it).
    pub leaked: Vec<String>,
    /// What keeps the kit from vouching that the credential went nowhere else (the journal
    /// disturbed, the working directory swapped, a file scan cut short).
    pub unverified: Vec<String>,
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
    let moved = case
        .working_directory
        .as_ref()
        .filter(|_| case.working_directory_exists)
        .map(|dir| work.join(dir));
    for dir in [&work, &temp.join("tmp"), &temp.join("home")]
        .into_iter()
        .chain(moved.as_ref())
    {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let journal_path = temp.join("journal.jsonl");
    create_journal(&journal_path)?;
    let token = random_uuid();
    // Live from before the client starts until its teardown ends: a parallel case spares only
    // what carries a token of this list.
    let live = LiveToken::register(&token);
    let secret = format!("sk-dsh-conformance-{}", random_uuid().replace('-', ""));
    // The kit's own copy of the journal, which the client cannot edit (none where there are no
    // abstract sockets: the file alone is judged there).
    let copy = JournalCopy::listen(&format!("dsh-conformance-journal-{}", random_uuid())).ok();
    let copy_name = copy.as_ref().map(|copy| copy.name().to_string());
    let launcher = case_launcher(setup, case, temp, &token, copy_name.as_deref())?;
    let launcher_path = launcher.write(temp)?;
    let started = Instant::now();
    // File times come from a coarse clock: a second's margin.
    let started_at = std::time::SystemTime::now() - Duration::from_secs(1);
    let mut watch = Watch {
        journal: JournalWatch::new(journal_path.clone()),
        processes: ProcessSampler::new(Canary::new(&secret)),
    };
    let command_of = |run: u32| -> Result<Command, String> {
        let mut command = client_command(setup, case, temp, &launcher_path, &token, &secret)?;
        if let Some(name) = &copy_name {
            command.env(JOURNAL_COPY_ENV, name);
        }
        session_env(&mut command, case, run);
        crate::acp::contract::run_env(&mut command, case, run, &journal_path);
        command.current_dir(&work);
        Ok(command)
    };
    let mut earlier = Vec::new();
    for run in 1..case.runs {
        earlier.push(earlier_run(
            setup,
            command_of(run)?,
            &mut watch,
            &journal_path,
        )?);
    }
    let command = command_of(case.runs)?;
    let deadline = Instant::now() + setup.limit();
    let Ended {
        exit,
        hung,
        stdout,
        stderr,
    } = wait_bounded(command, deadline, &mut watch)?;
    // What the client left running, looked at once more before it is killed.
    watch.processes.sample_now(None);
    // What still runs once a signalled runtime had its grace to finish is left behind: what
    // carries the case's token, and every orphan `run` adopted as a subreaper (a daemon that
    // called `setsid` and emptied its environment). Both are killed before the pipes they may
    // hold are read to their end.
    let grace = setup.time_scale.scale(Duration::from_secs(1));
    let leftovers = teardown(&token, grace);
    drop(live);
    // The pipes are read until the case's limit (and the teardown's grace) at most: a process
    // that still holds one then is named, and killed.
    let drained = deadline.max(Instant::now()) + grace;
    let mut held_open = Vec::new();
    let stdout = stdout.finish(drained, "stdout", &mut held_open);
    let stderr = stderr.finish(drained, "stderr", &mut held_open);
    let duration = started.elapsed();
    watch.journal.look();
    let (journal, journal_problem) = read_journal(&journal_path)?;
    // Every runtime is gone: what fake-dsh sent is all there is.
    let received = copy.map(JournalCopy::finish).unwrap_or_default();
    let (journal_problem, configuration_problem) =
        configuration_check(journal_problem, &journal, &launcher, &launcher_path);
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
    let earlier_output: Vec<u8> = earlier
        .iter()
        .flat_map(|run: &EarlierRun| [&run.stdout[..], b"\n", &run.stderr[..], b"\n"].concat())
        .collect();
    let edited = edited_in_place(&journal, &received);
    let judged: Vec<Entry> = journal.iter().cloned().chain(received).collect();
    let (leaked, mut unverified) = leaks(
        &Canary::new(&secret),
        &judged,
        [
            ("stdout", &stdout[..]),
            ("stderr", &stderr[..]),
            ("output in an earlier run", &earlier_output[..]),
        ],
        watch.journal.disturbed,
        watch.processes.found(),
        temp,
        (started_at, deadline),
    );
    if let Some(how) = edited {
        unverified.push(how);
    }
    Ok(Played {
        earlier,
        exit,
        hung,
        stdout,
        stderr,
        journal,
        journal_problem,
        configuration_problem,
        leftovers,
        held_open,
        leaked,
        unverified,
        duration,
    })
}

/// The optional contract variables (docs/sdk-clients.md): the session the case names
/// (`DSH_SDK_SESSION`), from its `resume_from` run on that it is stored and to be resumed
/// (`DSH_SDK_RESUME=1`), and, in the runs before that, the directory to move it to
/// (`DSH_SDK_CWD`: a resumed session is where it was last moved); `run` counts from 1.
fn session_env(command: &mut Command, case: &ClientCase, run: u32) {
    if let Some(session) = &case.session {
        command.env(SESSION_ENV, session);
    }
    let resumed = case.resume_from.is_some_and(|from| run >= from);
    if let Some(dir) = case.working_directory.as_ref().filter(|_| !resumed) {
        command.env(CWD_ENV, dir);
    }
    if resumed {
        command.env(RESUME_ENV, "1");
    }
}

/// One run of the client before the case's last (a persisted home between runs): bounded by
/// the case's limit, its pipes read to their end (or that limit), and the journal's length then.
/// What it left running is the last run's teardown's to find (the same case token).
fn earlier_run(
    setup: &Setup,
    command: Command,
    watch: &mut Watch,
    journal: &Path,
) -> Result<EarlierRun, String> {
    let deadline = Instant::now() + setup.limit();
    let ended = wait_bounded(command, deadline, watch)?;
    let mut held_open = Vec::new();
    let drained = deadline.max(Instant::now());
    Ok(EarlierRun {
        exit: ended.exit,
        hung: ended.hung,
        stdout: ended.stdout.finish(drained, "stdout", &mut held_open),
        stderr: ended.stderr.finish(drained, "stderr", &mut held_open),
        journal_entries: read_journal(journal)?.0.len(),
    })
}

/// Ends what the client left running (see [`play`]): waits up to `grace` for the processes
/// carrying `token` and the orphans adopted here to exit by themselves, then kills both kinds.
/// An adopted orphan is spared only when it carries the token of another case of this run still
/// in flight (that case's token sweep ends it): a token no live case has (a forged one, a
/// finished case's) protects nothing. With `--jobs` above 1, an orphan with no token at all is
/// blamed on the case that tears down first: the subreaper cannot tell which case's client it
/// escaped from, and both are the same client's. Returns what it killed, each process once.
fn teardown(token: &str, grace: Duration) -> Vec<Leftover> {
    let deadline = Instant::now() + grace;
    let ours = |pid: i32| !carries_live_token_of_another_case(pid, token);
    while Instant::now() < deadline
        && (!leftovers::find(token).is_empty() || adopted().into_iter().any(ours))
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut killed = leftovers::sweep(token, Duration::ZERO, Duration::from_secs(2));
    // Twice: the token sweep's victims may leave orphans of their own.
    for _ in 0..2 {
        for leftover in kill_adopted(Duration::from_secs(2), |pid| {
            carries_live_token_of_another_case(pid, token)
        }) {
            if !killed.iter().any(|known| known.pid == leftover.pid) {
                killed.push(leftover);
            }
        }
    }
    killed.sort_by_key(|leftover| leftover.pid);
    killed
}

/// The case tokens of this run's cases in flight (each registered before its client starts,
/// removed once its teardown is over).
static LIVE_TOKENS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// One case's token in [`LIVE_TOKENS`] while this lives.
struct LiveToken(String);

impl LiveToken {
    fn register(token: &str) -> LiveToken {
        live_tokens().push(token.to_string());
        LiveToken(token.to_string())
    }
}

impl Drop for LiveToken {
    fn drop(&mut self) {
        live_tokens().retain(|live| *live != self.0);
    }
}

fn live_tokens() -> std::sync::MutexGuard<'static, Vec<String>> {
    LIVE_TOKENS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether `pid`'s environment holds the token of another case of this run still in flight
/// (whose own sweep ends it). A value no live case has is no case's.
fn carries_live_token_of_another_case(pid: i32, token: &str) -> bool {
    let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let prefix = format!("{CASE_TOKEN_ENV}=");
    let live = live_tokens();
    environ
        .split(|byte| *byte == 0)
        .filter_map(|var| var.strip_prefix(prefix.as_bytes()))
        .any(|value| {
            value != token.as_bytes() && live.iter().any(|other| other.as_bytes() == value)
        })
}

/// The case's launcher (see [`crate::launcher`]): fake-dsh with the persona's and the surface's
/// arguments, its journal, scenario (written beside it), watchdog and the case's token, and the
/// case's `DSH_HOME` unless the client sets its own.
fn case_launcher(
    setup: &Setup,
    case: &ClientCase,
    temp: &Path,
    token: &str,
    journal_copy: Option<&str>,
) -> Result<Launcher, String> {
    let mut env: Vec<(&'static str, OsString)> = vec![
        (JOURNAL_ENV, temp.join("journal.jsonl").into()),
        (
            WATCHDOG_ENV,
            (setup.limit().as_secs() + 10).to_string().into(),
        ),
        (CASE_TOKEN_ENV, token.into()),
    ];
    if let Some(name) = journal_copy {
        env.push((JOURNAL_COPY_ENV, name.into()));
    }
    if let Some(document) = scenario_document(case) {
        let file = temp.join("scenario.json");
        std::fs::write(&file, document.to_string())
            .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
        env.push((SCENARIO_ENV, file.into()));
    }
    Ok(Launcher {
        fake_dsh: setup.fake_dsh.clone(),
        fixed_args: setup.runtime_args.clone(),
        profile_args: setup.profile_args.clone(),
        env,
        dsh_home: temp.join("dsh-home"),
    })
}

/// The scenario file fake-dsh plays for the case, when it has one: the SDK scenario as its `sdk`
/// member, the ACP one as its `acp` member.
fn scenario_document(case: &ClientCase) -> Option<serde_json::Value> {
    match (
        &case.runtime,
        case.acp.as_ref().and_then(|acp| acp.scenario.as_ref()),
    ) {
        (Some(runtime), _) => Some(serde_json::json!({ "sdk": runtime })),
        (None, Some(scenario)) => Some(serde_json::json!({ "acp": scenario })),
        (None, None) => None,
    }
}

/// The client's command with the driver contract's environment and nothing else of the caller's
/// but the allowlist: the runtime it is given is the case's launcher alone; the configuration the
/// launcher carries is in the environment too, for clients that start fake-dsh another way.
fn client_command(
    setup: &Setup,
    case: &ClientCase,
    temp: &Path,
    launcher: &Path,
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
        ClientSurface::Acp => ACP_COMMAND_ENV,
    };
    let runtime = serde_json::json!([launcher.to_string_lossy()]);
    let mut command = Command::new(program);
    command
        .args(args)
        .args(&case.prompts)
        .env_clear()
        .envs(setup.inherited.iter().map(|(k, v)| (k, v)))
        .env(variable, runtime.to_string())
        .env(TIMEOUT_ENV, setup.client_timeout_secs().to_string())
        .env(KEY_ENV, secret)
        // Its own temp dir and home, under the case's root: the key scan reads what is written
        // there.
        .env("TMPDIR", temp.join("tmp"))
        .env("HOME", temp.join("home"))
        .env(CASE_TOKEN_ENV, token)
        .env("DSH_HOME", temp.join("dsh-home"))
        .env(JOURNAL_ENV, temp.join("journal.jsonl"))
        .env(WATCHDOG_ENV, (setup.limit().as_secs() + 10).to_string());
    if scenario_document(case).is_some() {
        command.env(SCENARIO_ENV, temp.join("scenario.json"));
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
fn wait_bounded(
    mut command: Command,
    deadline: Instant,
    watch: &mut Watch,
) -> Result<Ended, String> {
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
    // The group leaves the live groups in the same step as its leader is reaped (under their
    // lock), so a stop signal never signals a group id that is free again.
    let status = loop {
        watch.journal.look();
        watch.processes.sample(Some(group.as_raw()));
        {
            let mut groups = dsh_engine::interrupt::live_groups();
            let reaped = child.try_wait();
            if let Ok(Some(status)) = reaped {
                groups.remove(group.as_raw());
                break status;
            }
            reaped.map_err(|e| e.to_string())?;
        }
        if Instant::now() >= deadline {
            hung = true;
            nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL).ok();
            dsh_engine::interrupt::forget_group(group.as_raw());
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
fn read_journal(path: &Path) -> Result<(Vec<Entry>, Option<JournalProblem>), String> {
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
            return Ok((Vec::new(), Some(JournalProblem::Broken(why))));
        }
        Err(other) => return Ok((Vec::new(), Some(JournalProblem::Broken(other.to_string())))),
    };
    if !entries.is_empty() {
        return Ok((entries.into_iter().map(|line| line.entry).collect(), None));
    }
    let meta = std::fs::symlink_metadata(path).ok();
    let length = meta.as_ref().map_or(0, std::fs::Metadata::len);
    let written = meta.and_then(|meta| meta.modified().ok()) != Some(UNWRITTEN);
    let problem = if length > 0 {
        JournalProblem::Broken(format!(
            "fake-dsh's journal holds no entry: {} has {length} bytes and no whole journal line",
            path.display()
        ))
    } else if written {
        JournalProblem::Broken(format!(
            "fake-dsh's journal was emptied: {} was written to and holds nothing",
            path.display()
        ))
    } else {
        JournalProblem::NeverWritten
    };
    Ok((Vec::new(), Some(problem)))
}

/// The journal's problem (a journal the client broke) and whether the case's configuration
/// reached the runtime, told apart: a journal never written, or a runtime that started without
/// the launcher's variables, is a configuration that did not reach it.
fn configuration_check(
    problem: Option<JournalProblem>,
    journal: &[Entry],
    launcher: &Launcher,
    launcher_path: &Path,
) -> (Option<String>, Option<String>) {
    match problem {
        Some(JournalProblem::NeverWritten) => (
            None,
            Some(format!(
                "the configuration did not reach the runtime: fake-dsh's journal of the case was \
                 never written (no runtime started through the case's launcher {}, nor with the \
                 case's environment)",
                launcher_path.display()
            )),
        ),
        Some(JournalProblem::Broken(why)) => (Some(why), None),
        None => (
            None,
            unconfigured_start(journal, &launcher.configured_names(), launcher_path),
        ),
    }
}

/// What keeps the journal from showing what the runtime did.
#[derive(Debug, PartialEq, Eq)]
enum JournalProblem {
    /// No runtime wrote it: the case's configuration reached none (judged on its own rule).
    NeverWritten,
    /// The client broke it (removed, emptied, replaced, grown past the bound), said exactly.
    Broken(String),
}

/// The first runtime (a `start` entry but a fake-dsh helper child's) that started without one
/// of the variables the launcher sets: it wrote the case's journal (the client passed that
/// variable down) but was not started through the launcher, so the rest of the case's
/// configuration (its scenario above all) may never have reached it.
fn unconfigured_start(journal: &[Entry], names: &[&str], launcher: &Path) -> Option<String> {
    journal.iter().find_map(|entry| {
        let Event::Start {
            env_names,
            argv,
            mode,
            ..
        } = &entry.event
        else {
            return None;
        };
        let missing: Vec<&str> = names
            .iter()
            .copied()
            .filter(|name| !env_names.iter().any(|have| have == name))
            .collect();
        (*mode != dsh_formats::journal::Mode::Child && !missing.is_empty()).then(|| {
            format!(
                "the configuration did not reach the runtime: the runtime (pid {}, {}) started \
                 without {} in its environment (not through the case's launcher {})",
                entry.pid,
                argv.first().map_or("no argv", String::as_str),
                missing.join(", "),
                launcher.display()
            )
        })
    })
}

/// Where the key went, each place once: the runtime's argv and what it received on stdin (the
/// journal's `start` and `command` entries), the client's output, the command lines and names of
/// its processes (`processes`, sampled while it ran), the journal itself disturbed (emptied,
/// removed or replaced: what the runtime received can no longer be checked), the working
/// directory swapped for a link, every entry under the case's root (`temp`: the working dir, the
/// files beside it, the client's `TMPDIR` and `HOME`; contents, names, link targets, extended
/// attributes), read within the case's limit, and what changed in the shared temp dirs since the
/// case started (`/tmp`, ...). The places it was found, then what keeps the kit from vouching for
/// the rest.
fn leaks(
    canary: &Canary,
    journal: &[Entry],
    outputs: [(&str, &[u8]); 3],
    journal_disturbed: Option<String>,
    processes: Vec<String>,
    temp: &Path,
    (started_at, deadline): (std::time::SystemTime, Instant),
) -> (Vec<String>, Vec<String>) {
    let (mut leaked, mut unverified) = (Vec::new(), Vec::new());
    for entry in journal {
        match &entry.event {
            Event::Start { argv, .. } => {
                if let Some(form) = argv.iter().find_map(|arg| canary.find(arg.as_bytes())) {
                    leaked.push(format!("the runtime's argv (pid {}; {form})", entry.pid));
                }
            }
            Event::Command { command, raw } => {
                let text = command.as_ref().map(ToString::to_string);
                let sent = text.iter().chain(raw.iter());
                if let Some(form) = sent
                    .into_iter()
                    .find_map(|sent| canary.find(sent.as_bytes()))
                {
                    let what = command
                        .as_ref()
                        .and_then(|command| command["method"].as_str())
                        .map_or_else(|| "a line".to_string(), |method| format!("`{method}`"));
                    leaked.push(format!(
                        "what the runtime received on stdin ({what}, pid {}; {form})",
                        entry.pid
                    ));
                }
            }
            _ => {}
        }
    }
    for (name, bytes) in outputs {
        if let Some(form) = canary.find(bytes) {
            leaked.push(format!("the client's {name} ({form})"));
        }
    }
    leaked.extend(processes);
    if let Some(how) = journal_disturbed {
        unverified.push(format!(
            "the runtime's journal was {how} while the case ran"
        ));
    }
    let work = temp.join("work");
    if !std::fs::symlink_metadata(&work).is_ok_and(|meta| meta.is_dir()) {
        unverified
            .push("the client's working directory was replaced (a link, or gone)".to_string());
    }
    let scan = canary.scan_tree(temp, Bounds::default(), deadline);
    leaked.extend(scan.found.iter().map(|found| found.describe(None)));
    if let Some(why) = scan.incomplete {
        unverified.push(format!(
            "the files the client wrote were not all read ({why})"
        ));
    }
    for found in canary.scan_shared_temp(started_at, deadline, temp) {
        leaked.push(found.describe(Some("a shared temp dir")));
    }
    let mut seen = std::collections::HashSet::new();
    leaked.retain(|place| seen.insert(place.clone()));
    (leaked, unverified)
}

/// How the journal file differs from what fake-dsh sent the kit while the case ran (see
/// [`crate::journal_copy`]): an entry it sent that the file no longer holds was edited in place
/// (or removed). Lines a process added to either are not held against it here.
fn edited_in_place(file: &[Entry], received: &[Entry]) -> Option<String> {
    let written: std::collections::HashSet<String> = file
        .iter()
        .filter_map(|entry| serde_json::to_string(entry).ok())
        .collect();
    let missing = received
        .iter()
        .filter(|entry| serde_json::to_string(entry).is_ok_and(|line| !written.contains(&line)))
        .count();
    (missing > 0).then(|| {
        format!(
            "the runtime's journal was edited while the case ran ({missing} of the {} entries \
             fake-dsh sent the kit are not in the file as sent)",
            received.len()
        )
    })
}

/// What is watched while the client runs: fake-dsh's journal, and the client's processes (for
/// the key in their command lines and names).
struct Watch {
    journal: JournalWatch,
    processes: ProcessSampler,
}

/// fake-dsh's journal, watched while the client runs: fake-dsh only appends to it, so a journal
/// that shrinks, disappears once written, or becomes anything but a regular file (a link) was
/// disturbed by someone else.
struct JournalWatch {
    path: PathBuf,
    longest: u64,
    inode: Option<u64>,
    disturbed: Option<String>,
}

impl JournalWatch {
    fn new(path: PathBuf) -> JournalWatch {
        JournalWatch {
            path,
            longest: 0,
            inode: None,
            disturbed: None,
        }
    }

    /// Looks at the journal now; the first disturbance seen is kept. (A journal empty or gone at
    /// the end is [`read_journal`]'s to say, and is judged before the key: this watch only sees
    /// what happened to it while the case ran.)
    fn look(&mut self) {
        use std::os::unix::fs::MetadataExt;
        if self.disturbed.is_some() {
            return;
        }
        let how = match std::fs::symlink_metadata(&self.path) {
            Err(_) if self.inode.is_some() => Some("removed"),
            Err(_) => None,
            Ok(meta) if !meta.is_file() => Some("replaced by a link or something not a file"),
            Ok(meta) if self.inode.is_some_and(|inode| inode != meta.ino()) => Some("replaced"),
            Ok(meta) if meta.len() < self.longest => Some("emptied or cut short"),
            Ok(meta) => {
                self.inode = Some(meta.ino());
                self.longest = meta.len();
                None
            }
        };
        self.disturbed = how.map(str::to_string);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journal_the_client_broke_or_never_had_written_is_named_as_such() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let problem = |path: &Path| match read_journal(path).expect("no kit fault").1 {
            Some(JournalProblem::Broken(why)) => why,
            Some(JournalProblem::NeverWritten) => "never written".to_string(),
            None => String::new(),
        };
        create_journal(&path).unwrap();
        assert_eq!(problem(&path), "never written");
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

    /// A runtime that wrote the case's journal without the launcher's other variables (its
    /// client passed `FAKE_DSH_JOURNAL` down and started fake-dsh itself) is named, with what it
    /// lacked; fake-dsh's helper children (whose environment may be emptied) are not.
    #[test]
    fn a_runtime_started_without_the_launchers_variables_is_named() {
        let start = |pid: i32, mode: &str, names: &[&str]| -> Entry {
            serde_json::from_value(serde_json::json!({
                "v": 1, "event": "start", "pid": pid, "t_ms": 1, "mode": mode, "ppid": 1,
                "pgid": pid, "sid": 1, "argv": ["/x/fake-dsh", "--profile", "sdk"], "cwd": "/",
                "env_names": names
            }))
            .unwrap()
        };
        let names = [
            "FAKE_DSH_JOURNAL",
            "DSH_CONFORMANCE_CASE",
            "FAKE_DSH_SCENARIO",
        ];
        let launcher = Path::new("/case/bin/dsh");
        let configured = start(10, "sdk", &names);
        let child = start(11, "child", &[]);
        assert_eq!(
            unconfigured_start(&[configured.clone(), child], &names, launcher),
            None
        );
        let bare = start(12, "sdk", &["FAKE_DSH_JOURNAL", "PATH"]);
        let why = unconfigured_start(&[configured, bare], &names, launcher).unwrap();
        assert_eq!(
            why,
            "the configuration did not reach the runtime: the runtime (pid 12, /x/fake-dsh) \
             started without DSH_CONFORMANCE_CASE, FAKE_DSH_SCENARIO in its environment (not \
             through the case's launcher /case/bin/dsh)"
        );
    }

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
