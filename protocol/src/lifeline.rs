//! The lifeline: the one contract between the npm package's JavaScript shim and the native
//! binaries it starts (`dsh-conformance`, `fake-dsh`, `dsh-host-driver`).
//!
//! The shim starts the binary in a process group of its own, so a terminal's Ctrl-C reaches the
//! binary once (through the shim) instead of twice, and hands it one end of a pipe as an inherited
//! descriptor named by [`ENV`]. Whatever ends the shim, SIGKILL included, closes the other end; the
//! binary then stops as it would on the shim's forwarded SIGTERM, instead of running on unseen.

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};

/// The variable naming the inherited descriptor of the shim's lifeline pipe.
pub const ENV: &str = "DSH_CONFORMANCE_LIFELINE";

/// When [`ENV`] names a descriptor, takes it (close-on-exec, so no child inherits it; the variable
/// is removed for the same reason) and calls `on_gone` from a thread once the shim's end is
/// closed. Does nothing otherwise. Call it first thing in `main`, before any thread starts.
pub fn watch(on_gone: fn()) {
    let Some(fd) = std::env::var(ENV)
        .ok()
        .and_then(|value| value.parse::<i32>().ok())
        .filter(|fd| *fd > 2)
    else {
        return;
    };
    std::env::remove_var(ENV);
    // SAFETY: the shim opened this descriptor for this process and nothing else here uses it;
    // a number that is not an open descriptor makes `try_clone` fail, and that ends the watch.
    let inherited = unsafe { OwnedFd::from_raw_fd(fd) };
    let Ok(owned) = inherited.try_clone() else {
        std::mem::forget(inherited);
        return;
    };
    drop(inherited);
    std::thread::spawn(move || {
        let mut pipe = std::fs::File::from(owned);
        let mut buffer = [0u8; 64];
        while matches!(pipe.read(&mut buffer), Ok(n) if n > 0) {}
        on_gone();
    });
}
