//! The kit's own copy of fake-dsh's journal (docs/journal.md, "The kit's copy"): the case's
//! fake-dsh processes send every journal line, as they write it, to an abstract Unix socket this
//! module listens on (`FAKE_DSH_JOURNAL_COPY`, set by the case's launcher; Linux). The client is
//! told the journal file's path and may edit it in place (same inode, same length); what fake-dsh
//! sent here while the case ran it cannot take back. A process may connect and add lines (any
//! process of the same user can), but not change or remove what another sent: the copy is what
//! the key canary reads the runtime's argv and stdin from, beside the file.
//!
//! Bounded: [`MAX_BYTES`] in all (the journal file's own bound), the rest read and dropped.

use dsh_formats::journal::Entry;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The environment variable naming the socket (fake-dsh's `FAKE_DSH_JOURNAL_COPY`).
pub const JOURNAL_COPY_ENV: &str = "FAKE_DSH_JOURNAL_COPY";
/// The most bytes kept from all connections together.
pub const MAX_BYTES: usize = 64 << 20;
/// How long the listener sleeps when nothing arrived.
#[cfg(target_os = "linux")]
const IDLE: std::time::Duration = std::time::Duration::from_millis(5);

/// A listening copy; [`JournalCopy::finish`] stops it and returns what it received.
pub struct JournalCopy {
    name: String,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<Vec<u8>>>,
}

impl JournalCopy {
    /// Listens on the abstract socket `name` (unique per case).
    #[cfg(target_os = "linux")]
    pub fn listen(name: &str) -> Result<JournalCopy, String> {
        use std::os::linux::net::SocketAddrExt;
        let address = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
            .map_err(|e| format!("the journal copy's socket {name}: {e}"))?;
        let listener = std::os::unix::net::UnixListener::bind_addr(&address)
            .and_then(|listener| listener.set_nonblocking(true).map(|()| listener))
            .map_err(|e| format!("cannot listen for the journal copy ({name}): {e}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || receive(&listener, &stopped));
        Ok(JournalCopy {
            name: name.to_string(),
            stop,
            thread,
        })
    }

    /// No abstract sockets: no copy.
    #[cfg(not(target_os = "linux"))]
    pub fn listen(_name: &str) -> Result<JournalCopy, String> {
        Err("the journal copy needs Linux's abstract sockets".to_string())
    }

    /// The socket's name, for fake-dsh's environment.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Stops listening (after reading what is already there) and returns the whole lines each
    /// connection sent that are journal entries.
    pub fn finish(self) -> Vec<Entry> {
        self.stop.store(true, Ordering::SeqCst);
        let received = self.thread.join().unwrap_or_default();
        received
            .iter()
            .flat_map(|bytes| bytes.split(|byte| *byte == b'\n'))
            .filter_map(|line| serde_json::from_slice(line).ok())
            .collect()
    }
}

/// Accepts connections and reads each to its end until `stop` is set (then one last round), at
/// most [`MAX_BYTES`] kept in all; the bytes of each connection.
#[cfg(target_os = "linux")]
fn receive(listener: &std::os::unix::net::UnixListener, stop: &AtomicBool) -> Vec<Vec<u8>> {
    use std::io::Read;
    let mut connections: Vec<(std::os::unix::net::UnixStream, Vec<u8>, bool)> = Vec::new();
    let mut kept = 0usize;
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let last_round = stop.load(Ordering::SeqCst);
        let mut busy = false;
        while let Ok((stream, _)) = listener.accept() {
            if stream.set_nonblocking(true).is_ok() {
                connections.push((stream, Vec::new(), false));
                busy = true;
            }
        }
        for (stream, bytes, ended) in connections.iter_mut().filter(|(_, _, ended)| !*ended) {
            loop {
                match stream.read(&mut buffer) {
                    Ok(0) => {
                        *ended = true;
                        break;
                    }
                    Ok(read) => {
                        busy = true;
                        let room = MAX_BYTES.saturating_sub(kept).min(read);
                        bytes.extend_from_slice(&buffer[..room]);
                        kept += room;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        }
        if last_round {
            return connections.into_iter().map(|(_, bytes, _)| bytes).collect();
        }
        if !busy {
            std::thread::sleep(IDLE);
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// Lines sent by two connections are received whole, each its own; a line that is no
    /// journal entry is left out.
    #[test]
    fn lines_from_every_connection_are_received() {
        use std::io::Write;
        use std::os::linux::net::SocketAddrExt;
        let name = format!("dsh-conformance-test-{}", dsh_engine::random::random_uuid());
        let copy = JournalCopy::listen(&name).unwrap();
        let address = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let start = r#"{"v":1,"event":"start","pid":10,"t_ms":1,"mode":"sdk","ppid":1,"pgid":10,"sid":1,"argv":["dsh","--api-key","k"],"cwd":"/","env_names":[]}"#;
        for _ in 0..2 {
            let mut sender = std::os::unix::net::UnixStream::connect_addr(&address).unwrap();
            sender
                .write_all(format!("{start}\nnot an entry\n").as_bytes())
                .unwrap();
        }
        let entries = copy.finish();
        assert_eq!(entries.len(), 2, "{entries:?}");
        assert!(entries.iter().all(|entry| entry.pid == 10));
    }
}
