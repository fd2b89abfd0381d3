//! How a run stops on SIGINT or SIGTERM, one piece of code for every corpus (`run` on the
//! open-design surface and on `sdk`/`headless`).
//!
//! The first signal sets the [`stop_flag`] (no new case starts) and ends the cases in flight at
//! once: every process group registered with [`live_groups`] (a host's driver, a client) is
//! SIGKILLed and no group starts after it, so each case ends by its usual path (its teardown
//! kills what the killed process left behind and removes its temp dirs) and the run reports those
//! cases `interrupted` ([`interrupted`]), writes every output and exits 128 + the signal
//! ([`exit_code`]: 130 for SIGINT, 143 for SIGTERM). A second signal removes every temp dir still
//! registered with [`add_live_dir`] (journals hold prompts) and exits at once.

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Set once no new case may start: a stop signal, or a caller's own reason (`--fail-fast`).
static STOP: AtomicBool = AtomicBool::new(false);
/// How many SIGINT/SIGTERM arrived, and the last one's number.
static SIGNALS: AtomicUsize = AtomicUsize::new(0);
static LAST_SIGNAL: AtomicI32 = AtomicI32::new(0);
/// Set by [`interrupt_all`]: the groups in flight were killed and none starts after.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// The process groups started for cases and not reaped yet (an unreaped leader keeps its group
/// id reserved, so signalling one from here never reaches a stranger).
static LIVE_GROUPS: Mutex<Vec<i32>> = Mutex::new(Vec::new());
/// The temp dirs of the cases alive now.
static LIVE_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Exit code after Ctrl-C (128 + SIGINT, as shells report it); SIGTERM gives 143.
pub const EXIT_INTERRUPTED: u8 = 130;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The flag a run's workers check before starting a case; a stop signal sets it, and a caller
/// may set it for its own reason (`--fail-fast`).
pub fn stop_flag() -> &'static AtomicBool {
    &STOP
}

/// Whether a stop signal arrived.
pub fn signalled() -> bool {
    SIGNALS.load(Ordering::SeqCst) > 0
}

/// Whether the cases in flight were ended by a stop signal ([`interrupt_all`]): a case that
/// finishes after it is `interrupted`, whatever it saw.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// 128 + the signal that stopped the run.
pub fn exit_code() -> u8 {
    u8::try_from(128 + LAST_SIGNAL.load(Ordering::SeqCst)).unwrap_or(EXIT_INTERRUPTED)
}

/// The registry of live case process groups, locked: check [`LiveGroups::interrupted`], start
/// the process, then [`LiveGroups::add`] its group, all under this one lock, so no group starts
/// unseen after [`interrupt_all`].
pub struct LiveGroups(MutexGuard<'static, Vec<i32>>);

impl LiveGroups {
    /// Whether the run was interrupted: start nothing.
    pub fn interrupted(&self) -> bool {
        interrupted()
    }
    /// Registers a started process's group (its leader's pid).
    pub fn add(&mut self, group: i32) {
        self.0.push(group);
    }
    /// Forgets a group whose leader is being reaped under this lock.
    pub fn remove(&mut self, group: i32) {
        self.0.retain(|live| *live != group);
    }
}

/// Locks the registry of live case process groups (see [`LiveGroups`]).
pub fn live_groups() -> LiveGroups {
    LiveGroups(lock(&LIVE_GROUPS))
}

/// Forgets a group once its leader is killed and about to be reaped (call before reaping it).
pub fn forget_group(group: i32) {
    lock(&LIVE_GROUPS).retain(|live| *live != group);
}

/// Registers a case's temp dir: a second signal removes it before the run exits.
pub fn add_live_dir(dir: &Path) {
    lock(&LIVE_DIRS).push(dir.to_path_buf());
}

/// Forgets a case's temp dir (it is being removed by its owner).
pub fn forget_live_dir(dir: &Path) {
    lock(&LIVE_DIRS).retain(|live| live != dir);
}

/// Removes every registered temp dir; returns how many it removed.
pub fn remove_live_dirs() -> usize {
    let dirs = std::mem::take(&mut *lock(&LIVE_DIRS));
    dirs.iter()
        .filter(|dir| std::fs::remove_dir_all(dir).is_ok())
        .count()
}

/// Ends every case in flight at once: SIGKILLs each live group and refuses to start another.
/// Returns how many groups it ended.
pub fn interrupt_all() -> usize {
    let groups = lock(&LIVE_GROUPS);
    INTERRUPTED.store(true, Ordering::SeqCst);
    for group in groups.iter() {
        let _ = killpg(Pid::from_raw(*group), Signal::SIGKILL);
    }
    groups.len()
}

extern "C" fn on_stop_signal(signal: nix::libc::c_int) {
    LAST_SIGNAL.store(signal, Ordering::SeqCst);
    SIGNALS.fetch_add(1, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
}

/// Installs the SIGINT and SIGTERM handlers and the thread that acts on them (see the module
/// documentation); `who` starts its messages on stderr (`dsh-conformance run`), and `exit` ends
/// the process on a second signal, with [`exit_code`] (the caller's: a library ends no process).
/// Once per process: the command line installs it first thing, before the corpus loads, so a
/// signal at start-up still ends the run with its outputs written.
pub fn catch_stop_signals(who: &'static str, exit: fn(u8) -> !) {
    static CAUGHT: std::sync::Once = std::sync::Once::new();
    CAUGHT.call_once(|| {
        use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet};
        let action = SigAction::new(
            SigHandler::Handler(on_stop_signal),
            SaFlags::SA_RESTART,
            SigSet::empty(),
        );
        let mut stop_signals = SigSet::empty();
        for signal in [Signal::SIGINT, Signal::SIGTERM] {
            // SAFETY: the handler only stores to atomics, which is async-signal-safe.
            let _ = unsafe { sigaction(signal, &action) };
            stop_signals.add(signal);
        }
        // A parent may start the run with them blocked (inherited across exec): a signal
        // pending since then is handled now, and none is held back after.
        let _ = stop_signals.thread_unblock();
        std::thread::spawn(move || loop {
            std::thread::sleep(std::time::Duration::from_millis(20));
            if signalled() && !interrupted() {
                let ended = interrupt_all();
                eprintln!("{who}: interrupted; ended {ended} case(s) in flight");
            }
            if SIGNALS.load(Ordering::SeqCst) >= 2 {
                let removed = remove_live_dirs();
                eprintln!("{who}: stopped by a second signal; removed {removed} case temp dir(s)");
                exit(exit_code());
            }
        });
    });
}
