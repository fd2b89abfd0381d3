//! The key in the client's processes while it runs: every [`INTERVAL`], the command line
//! (`/proc/<pid>/cmdline`, what `ps` shows every local user) and the name (`/proc/<pid>/comm`,
//! which a process may set to anything) of each process of the client's tree are searched: the
//! client itself, its descendants, and the orphans `run` adopted as a child subreaper (a helper
//! that outlives its parent). A process that starts and ends between two samples is not seen:
//! sampling is what `/proc` allows an unprivileged process (docs/sdk-clients.md, "What the canary
//! cannot see").

use super::Canary;
use std::time::{Duration, Instant};

/// How often the client's processes are sampled.
pub const INTERVAL: Duration = Duration::from_millis(50);

/// The most bytes of a command line read (`ARG_MAX` is about 2 MiB).
const CMDLINE_BYTES: u64 = 4 << 20;

/// Samples the client's processes and keeps where the key was seen.
pub struct ProcessSampler {
    canary: Canary,
    last: Option<Instant>,
    /// Each place the key was seen, once per process and place.
    found: Vec<(i32, String)>,
}

impl ProcessSampler {
    pub fn new(canary: Canary) -> ProcessSampler {
        ProcessSampler {
            canary,
            last: None,
            found: Vec::new(),
        }
    }

    /// Samples the tree under `client` (and the adopted orphans), unless the last sample is
    /// less than [`INTERVAL`] old.
    pub fn sample(&mut self, client: Option<i32>) {
        if self.last.is_some_and(|last| last.elapsed() < INTERVAL) {
            return;
        }
        self.last = Some(Instant::now());
        let mut tree: Vec<i32> = Vec::new();
        let roots = client.into_iter().chain(dsh_engine::process::adopted());
        for root in roots {
            for pid in std::iter::once(root).chain(dsh_engine::procfs::tree_below(root)) {
                if !tree.contains(&pid) {
                    tree.push(pid);
                }
            }
        }
        for pid in tree {
            self.look_at(pid);
        }
    }

    /// Samples now, however recent the last sample (what the client left running, once it
    /// has exited).
    pub fn sample_now(&mut self, client: Option<i32>) {
        self.last = None;
        self.sample(client);
    }

    /// Searches one process's command line and name.
    fn look_at(&mut self, pid: i32) {
        use std::io::Read;
        let mut cmdline = Vec::new();
        if let Ok(file) = std::fs::File::open(format!("/proc/{pid}/cmdline")) {
            let _ = file.take(CMDLINE_BYTES).read_to_end(&mut cmdline);
        }
        let comm = std::fs::read(format!("/proc/{pid}/comm")).unwrap_or_default();
        let name = String::from_utf8_lossy(&comm).trim().to_string();
        let places = [("argv", &cmdline), ("name", &comm)];
        for (place, bytes) in places {
            let Some(form) = self.canary.find(bytes) else {
                continue;
            };
            let what = match place {
                "argv" => {
                    format!("the argv of a process of the client's (pid {pid}, {name}; {form})")
                }
                _ => format!("the name of a process of the client's (pid {pid}; {form})"),
            };
            if !self
                .found
                .iter()
                .any(|(seen, said)| *seen == pid && *said == what)
            {
                self.found.push((pid, what));
            }
        }
    }

    /// Where the key was seen, in the order first seen.
    pub fn found(&self) -> Vec<String> {
        self.found.iter().map(|(_, what)| what.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-dsh-conformance-0123456789abcdef0123456789abcdef";

    /// A helper child holding a piece of the key in its argv (as `curl -H "x-api-key: ..."`
    /// would) is seen in the client's tree (issue 40 item 3).
    #[test]
    fn a_child_with_the_key_in_its_argv_is_seen() {
        let random = KEY.rsplit('-').next().unwrap();
        let mut client = std::process::Command::new("sh")
            .args(["-c", r#"sh -c 'read _' helper "x-api-key: $PIECE"; exit 0"#])
            .env("PIECE", &random[..20])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut sampler = ProcessSampler::new(Canary::new(KEY));
        // Until the helper has started (a liveness guard, not a timing claim).
        let deadline = Instant::now() + Duration::from_secs(20);
        while sampler.found().is_empty() && Instant::now() < deadline {
            sampler.sample(Some(client.id() as i32));
            std::thread::sleep(INTERVAL);
        }
        let found = sampler.found();
        drop(client.stdin.take());
        client.wait().unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            !found[0].contains(&format!("pid {},", client.id()))
                && found[0].contains("the argv of a process of the client's")
                && found[0].contains("a piece of it"),
            "{found:?}"
        );
    }
}
