//! Where a case's credential went: the key canary the client gets in `DEEPSEEK_API_KEY`, looked
//! for in its raw form, in every encoded form the host corpus's redaction knows
//! (`dsh_protocol::needles`: base64 in both alphabets and all alignments, hex, percent- and
//! JSON-escaped) and split apart (any [`FRAGMENT`] characters of its random part: a key cut in two
//! leaves one piece at least that long).
//!
//! [`Canary::scan_tree`] reads every regular file under a directory without following a link
//! (a file swapped for a FIFO is never waited on), bounded in entries, bytes per file, bytes in
//! all and time: what it could not read is said, never passed over. [`Canary::scan_recent`] reads
//! only what changed since a case began in a directory everyone shares (`/tmp`).

use aho_corasick::AhoCorasick;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

/// The length of a piece of the key's random part that counts as the key (48 bits of it).
pub const FRAGMENT: usize = 12;

/// How much a tree scan reads at most.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Directory entries looked at.
    pub entries: usize,
    /// Bytes read from one file.
    pub file_bytes: u64,
    /// Bytes read in all.
    pub total_bytes: u64,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            entries: 20_000,
            file_bytes: 64 << 20,
            total_bytes: 256 << 20,
        }
    }
}

/// The key's forms, ready to be looked for.
pub struct Canary {
    matcher: AhoCorasick,
    /// What each pattern is (`base64`, `a piece of it`, ...), by pattern index.
    labels: Vec<&'static str>,
    longest: usize,
}

/// What a tree scan found.
#[derive(Debug, Default)]
pub struct TreeScan {
    /// Each file holding the key (its path under the root), with the form found.
    pub found: Vec<(PathBuf, &'static str)>,
    /// Why the scan did not read everything (a bound or the deadline), if it did not.
    pub incomplete: Option<String>,
}

impl Canary {
    /// The forms of `secret`; its random part is what follows its last `-`.
    pub fn new(secret: &str) -> Canary {
        let mut patterns: Vec<Vec<u8>> = Vec::new();
        let mut labels = Vec::new();
        for form in dsh_protocol::needles::encoded_forms(secret) {
            patterns.push(form.bytes);
            labels.push(form.encoding);
        }
        let random = secret.rsplit('-').next().unwrap_or(secret).as_bytes();
        if random.len() > FRAGMENT {
            for piece in random.windows(FRAGMENT) {
                if !patterns.iter().any(|known| known == piece) {
                    patterns.push(piece.to_vec());
                    labels.push("a piece of it");
                }
            }
        }
        let longest = patterns.iter().map(Vec::len).max().unwrap_or(0);
        // The leftmost match, the first listed form winning at one position: the whole key is
        // named as such, not as a piece of it.
        let matcher = AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::LeftmostFirst)
            .build(&patterns)
            .expect("literal patterns always build");
        Canary {
            matcher,
            labels,
            longest,
        }
    }

    /// The form of the key `haystack` holds, if any (the first one found).
    pub fn find(&self, haystack: &[u8]) -> Option<&'static str> {
        self.matcher
            .find(haystack)
            .map(|found| self.labels[found.pattern().as_usize()])
    }

    /// Reads at most `limit` bytes of `reader` in chunks (a form cut across two chunks is still
    /// found); the form found, and whether the reader had more than `limit` bytes or the
    /// deadline passed.
    fn find_in_reader(
        &self,
        reader: &mut impl Read,
        limit: u64,
        deadline: Instant,
    ) -> (Option<&'static str>, Option<&'static str>) {
        let mut buffer = vec![0u8; 1 << 20];
        let mut window: Vec<u8> = Vec::new();
        let mut read_so_far: u64 = 0;
        loop {
            if Instant::now() >= deadline {
                return (None, Some("deadline"));
            }
            let room =
                usize::try_from(limit.saturating_sub(read_so_far).min(1 << 20)).unwrap_or(1 << 20);
            if room == 0 {
                // One byte more says whether the file goes on past the bound.
                let mut probe = [0u8; 1];
                return match reader.read(&mut probe) {
                    Ok(0) | Err(_) => (None, None),
                    Ok(_) => (None, Some("file")),
                };
            }
            let read = match reader.read(&mut buffer[..room]) {
                Ok(0) => return (None, None),
                Ok(read) => read,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return (None, None),
            };
            read_so_far += read as u64;
            window.extend_from_slice(&buffer[..read]);
            if let Some(form) = self.find(&window) {
                return (Some(form), None);
            }
            let keep = self.longest.saturating_sub(1).min(window.len());
            window.drain(..window.len() - keep);
        }
    }

    /// Every regular file under `root` holding the key, reading no link and nothing but regular
    /// files, within `bounds` and before `deadline`.
    pub fn scan_tree(&self, root: &Path, bounds: Bounds, deadline: Instant) -> TreeScan {
        self.walk(root, bounds, deadline, &|_: &std::fs::DirEntry| true)
    }

    /// Like [`Canary::scan_tree`] over a directory the client shares with everything else on the
    /// machine (`/tmp`): only what was created or changed since `since` is looked at (a file
    /// modified since, a directory modified since, entered), and never a path `skip` names (the
    /// kit's own case directories, scanned whole elsewhere).
    pub fn scan_recent(
        &self,
        root: &Path,
        since: SystemTime,
        skip: &dyn Fn(&Path) -> bool,
        bounds: Bounds,
        deadline: Instant,
    ) -> TreeScan {
        let recent = |entry: &std::fs::DirEntry| {
            !skip(&entry.path())
                && entry
                    .metadata()
                    .and_then(|meta| meta.modified())
                    .is_ok_and(|modified| modified >= since)
        };
        self.walk(root, bounds, deadline, &recent)
    }

    /// The files holding the key among what changed since `since` in the temp directories every
    /// process shares (`/tmp`, `/var/tmp`, `/dev/shm` and the kit's own temp dir): where a client
    /// that ignores its `TMPDIR` puts a temp file. The kit's own temp directories
    /// (`dsh_engine::scratch::PREFIXES`) are skipped: each case scans its own whole. Best effort, bounded
    /// like a case's scan: what is found is a leak; what could not be read is not said (the
    /// directories belong to everyone).
    pub fn scan_shared_temp(&self, since: SystemTime, deadline: Instant) -> Vec<PathBuf> {
        let mut roots = vec![
            PathBuf::from("/tmp"),
            PathBuf::from("/var/tmp"),
            PathBuf::from("/dev/shm"),
        ];
        let own = std::env::temp_dir();
        if !roots.contains(&own) {
            roots.push(own);
        }
        let skip = |path: &Path| {
            path.file_name().is_some_and(|name| {
                let name = name.to_string_lossy();
                dsh_engine::scratch::PREFIXES
                    .iter()
                    .any(|kit| name.starts_with(kit))
            })
        };
        // Smaller than a case's own: a key file is small, and these directories are everyone's.
        let bounds = Bounds {
            entries: 5_000,
            file_bytes: 1 << 20,
            total_bytes: 32 << 20,
        };
        let mut found = Vec::new();
        for root in roots {
            let scan = self.scan_recent(&root, since, &skip, bounds, deadline);
            found.extend(scan.found.into_iter().map(|(path, _)| root.join(path)));
        }
        found
    }

    /// The walk of both scans: the entries `keep` takes, directories entered, regular files read.
    fn walk(
        &self,
        root: &Path,
        bounds: Bounds,
        deadline: Instant,
        keep: &dyn Fn(&std::fs::DirEntry) -> bool,
    ) -> TreeScan {
        let mut scan = TreeScan::default();
        let mut pending = vec![root.to_path_buf()];
        let mut entries_seen = 0usize;
        let mut total: u64 = 0;
        let unreadable = |scan: &mut TreeScan, path: &Path, error: std::io::Error| {
            let relative = path.strip_prefix(root).unwrap_or(path);
            scan.incomplete
                .get_or_insert_with(|| format!("{} cannot be read: {error}", relative.display()));
        };
        while let Some(dir) = pending.pop() {
            let listing = match std::fs::read_dir(&dir) {
                Ok(listing) => listing,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    unreadable(&mut scan, &dir, e);
                    continue;
                }
            };
            for entry in listing.flatten() {
                entries_seen += 1;
                if entries_seen > bounds.entries {
                    scan.incomplete = Some(format!(
                        "more than {} entries under {}",
                        bounds.entries,
                        root.display()
                    ));
                    return scan;
                }
                if Instant::now() >= deadline {
                    scan.incomplete = Some(format!(
                        "the case's limit passed after {entries_seen} entries"
                    ));
                    return scan;
                }
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if !keep(&entry) {
                    continue;
                }
                let path = entry.path();
                if kind.is_dir() {
                    pending.push(path);
                    continue;
                }
                if !kind.is_file() {
                    continue;
                }
                let mut file = match open_regular(&path) {
                    Ok(Some(file)) => file,
                    Ok(None) => continue,
                    Err(e) => {
                        unreadable(&mut scan, &path, e);
                        continue;
                    }
                };
                let limit = bounds
                    .file_bytes
                    .min(bounds.total_bytes.saturating_sub(total));
                let before = file_position(&mut file);
                let (form, cut) = self.find_in_reader(&mut file, limit, deadline);
                total += file_position(&mut file).saturating_sub(before);
                let relative = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
                if let Some(form) = form {
                    scan.found.push((relative.clone(), form));
                }
                match cut {
                    Some("deadline") => {
                        scan.incomplete = Some(format!(
                            "the case's limit passed while reading {}",
                            relative.display()
                        ));
                        return scan;
                    }
                    Some(_) if total >= bounds.total_bytes => {
                        scan.incomplete = Some(format!(
                            "more than {} of files under {} (read up to {})",
                            size(bounds.total_bytes),
                            root.display(),
                            relative.display()
                        ));
                        return scan;
                    }
                    Some(_) => {
                        scan.incomplete.get_or_insert_with(|| {
                            format!(
                                "{} is larger than {}",
                                relative.display(),
                                size(bounds.file_bytes)
                            )
                        });
                    }
                    None => {}
                }
            }
        }
        scan
    }
}

/// `path` opened for reading if it is a regular file: never through a link, never blocking on a
/// FIFO put in its place. `None` when it is gone or no longer a regular file (a link, a FIFO);
/// an error when it is one that cannot be read.
fn open_regular(path: &Path) -> std::io::Result<Option<std::fs::File>> {
    use std::os::unix::fs::OpenOptionsExt;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path);
    let file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        // ELOOP: swapped for a link since it was listed; ENXIO: a socket.
        Err(e) if matches!(e.raw_os_error(), Some(nix::libc::ELOOP | nix::libc::ENXIO)) => {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    Ok(file.metadata()?.is_file().then_some(file))
}

/// `16 MiB`, `1024 bytes`.
fn size(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

fn file_position(file: &mut std::fs::File) -> u64 {
    use std::io::Seek;
    file.stream_position().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const KEY: &str = "sk-dsh-conformance-0123456789abcdef0123456789abcdef";

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    #[test]
    fn encoded_and_split_keys_are_found_and_noise_is_not() {
        let canary = Canary::new(KEY);
        assert_eq!(canary.find(KEY.as_bytes()), Some("raw"));
        let encoded = dsh_protocol::needles::base64(KEY.as_bytes());
        assert_eq!(
            canary.find(format!("x {encoded} y").as_bytes()),
            Some("base64")
        );
        for cut in 1..KEY.len() {
            let (head, tail) = KEY.split_at(cut);
            assert!(
                canary.find(format!("{head}\n...\n").as_bytes()).is_some()
                    || canary.find(format!("...{tail}").as_bytes()).is_some(),
                "the key cut at {cut}"
            );
        }
        assert_eq!(canary.find(b"sk-dsh-conformance- and 0123456789a"), None);
    }

    #[test]
    fn a_tree_is_read_past_its_first_entries_without_following_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for n in 0..2_100 {
            std::fs::write(root.join(format!("f{n:05}")), b"nothing").unwrap();
        }
        std::fs::create_dir(root.join("zz")).unwrap();
        std::fs::write(root.join("zz/deep"), format!("key={KEY}")).unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("elsewhere"), KEY).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("link")).unwrap();
        nix::unistd::mkfifo(&root.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let canary = Canary::new(KEY);
        let scan = canary.scan_tree(root, Bounds::default(), far());
        assert_eq!(scan.incomplete, None);
        assert_eq!(scan.found, [(PathBuf::from("zz/deep"), "raw")]);
    }

    #[test]
    fn a_recent_scan_reads_only_what_changed_since_and_skips_what_it_is_told() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let old = std::time::SystemTime::now() - Duration::from_secs(3600);
        let set_old = |path: &Path| {
            std::fs::File::options()
                .write(true)
                .open(path)
                .or_else(|_| std::fs::File::open(path))
                .unwrap()
                .set_modified(old)
                .unwrap();
        };
        std::fs::write(root.join("stale"), KEY).unwrap();
        set_old(&root.join("stale"));
        std::fs::create_dir(root.join("newdir")).unwrap();
        std::fs::write(root.join("newdir/key.log"), format!("key={KEY}")).unwrap();
        std::fs::write(root.join("fresh"), KEY).unwrap();
        std::fs::create_dir(root.join("kit-case")).unwrap();
        std::fs::write(root.join("kit-case/key"), KEY).unwrap();
        let since = old + Duration::from_secs(60);
        let skip = |path: &Path| path.ends_with("kit-case");
        let canary = Canary::new(KEY);
        let mut scan = canary.scan_recent(root, since, &skip, Bounds::default(), far());
        scan.found.sort();
        let found: Vec<&Path> = scan.found.iter().map(|(path, _)| path.as_path()).collect();
        assert_eq!(found, [Path::new("fresh"), Path::new("newdir/key.log")]);
    }

    #[test]
    fn a_directory_the_scan_cannot_read_is_said() {
        use std::os::unix::fs::PermissionsExt;
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { nix::libc::geteuid() } == 0 {
            return; // root reads a 0000 directory all the same
        }
        let dir = tempfile::tempdir().unwrap();
        let hidden = dir.path().join("hidden");
        std::fs::create_dir(&hidden).unwrap();
        std::fs::write(hidden.join("key"), KEY).unwrap();
        std::fs::set_permissions(&hidden, std::fs::Permissions::from_mode(0o000)).unwrap();
        let scan = Canary::new(KEY).scan_tree(dir.path(), Bounds::default(), far());
        std::fs::set_permissions(&hidden, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(
            scan.incomplete
                .as_deref()
                .is_some_and(|why| why.contains("hidden cannot be read")),
            "{scan:?}"
        );
    }

    #[test]
    fn a_key_cut_across_reads_is_found_and_bounds_are_said() {
        let dir = tempfile::tempdir().unwrap();
        let mut big = vec![b'.'; (1 << 20) - 10];
        big.extend_from_slice(KEY.as_bytes());
        std::fs::write(dir.path().join("big"), &big).unwrap();
        let canary = Canary::new(KEY);
        let scan = canary.scan_tree(dir.path(), Bounds::default(), far());
        assert_eq!(scan.found.len(), 1, "{scan:?}");
        let small = Bounds {
            entries: 100,
            file_bytes: 1024,
            total_bytes: 4096,
        };
        let scan = canary.scan_tree(dir.path(), small, far());
        assert!(scan.found.is_empty());
        assert!(
            scan.incomplete
                .as_deref()
                .is_some_and(|why| why.contains("big")),
            "{scan:?}"
        );
        let late = canary.scan_tree(dir.path(), Bounds::default(), Instant::now());
        assert!(
            late.incomplete
                .as_deref()
                .is_some_and(|why| why.contains("limit")),
            "{late:?}"
        );
    }
}
