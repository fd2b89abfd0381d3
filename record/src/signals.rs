//! Forwarding SIGTERM, SIGINT and SIGHUP from the proxy to the runtime's process group: the
//! handlers only write the signal number to a self-pipe; a thread does the forwarding.

use nix::sys::signal::{killpg, sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::unistd::Pid;
use std::io::Read;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

/// The signals a host uses to stop a runtime, forwarded as they arrive.
pub const FORWARDED: [Signal; 3] = [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP];

/// The self-pipe's write end, for the handler (-1 before installation).
static PIPE_WRITE_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(signal: nix::libc::c_int) {
    let fd = PIPE_WRITE_FD.load(Ordering::Relaxed);
    if fd >= 0 {
        // SAFETY: the fd stays open for the life of the process (the OwnedFd is leaked below).
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let _ = nix::unistd::write(fd, &[signal as u8]);
    }
}

/// Install the handlers; from now on each forwarded signal goes to the group `pgid`, and its
/// name is appended to the returned list.
pub fn forward_to_group(pgid: Pid) -> std::io::Result<Arc<Mutex<Vec<String>>>> {
    let (read_end, write_end): (OwnedFd, OwnedFd) = nix::unistd::pipe()?;
    PIPE_WRITE_FD.store(write_end.as_raw_fd(), Ordering::Relaxed);
    std::mem::forget(write_end);
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for signal in FORWARDED {
        // SAFETY: the handler only performs an async-signal-safe write(2).
        unsafe { sigaction(signal, &action) }?;
    }
    let forwarded = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&forwarded);
    std::thread::spawn(move || {
        let mut pipe = std::fs::File::from(read_end);
        let mut byte = [0u8; 1];
        while let Ok(1) = pipe.read(&mut byte) {
            if let Ok(signal) = Signal::try_from(i32::from(byte[0])) {
                let _ = killpg(pgid, signal);
                log.lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .push(signal.as_str().to_string());
            }
        }
    });
    Ok(forwarded)
}
