//! The bounded scans of a directory tree for the key: every entry's name, every link's target
//! (read, never followed: a dangling link's too), every entry's extended attributes (names and
//! values), and every regular file's bytes (opened without following a link, so a file swapped
//! for a FIFO is never waited on), with the gzip streams in them inflated. Bounded in entries,
//! bytes per file, bytes in all and time: what it could not read is said, never passed over.
//! [`Canary::scan_recent`] reads only what was created or changed since a case began in a
//! directory everyone shares (`/tmp`), by change time (`ctime`, which no unprivileged process can
//! set back), and [`Canary::scan_shared_temp`] skips only the case's own directory.

use super::{Bounds, Canary, Cut, Found, Place, TreeScan, GZIP_BYTES};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// The most bytes of an extended attribute's names, or of one value (Linux's own limits).
const XATTR_BYTES: usize = 64 * 1024;

impl Canary {
    /// Every place under `root` holding the key (see the module doc), reading no link and no
    /// file but a regular one, within `bounds` and before `deadline`.
    pub fn scan_tree(&self, root: &Path, bounds: Bounds, deadline: Instant) -> TreeScan {
        self.walk(root, bounds, deadline, &|_: &std::fs::DirEntry| true)
    }

    /// Like [`Canary::scan_tree`] over a directory the client shares with everything else on the
    /// machine (`/tmp`): only what was created or changed since `since` is looked at (an entry
    /// whose status or content changed since, a directory entered only then), and never a path
    /// `skip` names (the case's own directory, scanned whole elsewhere). The status change time
    /// counts, not the modification time a client may set back.
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
                && entry.metadata().is_ok_and(|meta| {
                    changed_at(&meta) >= since || meta.modified().is_ok_and(|m| m >= since)
                })
        };
        self.walk(root, bounds, deadline, &recent)
    }

    /// The places holding the key among what changed since `since` in the temp directories
    /// every process shares (`/tmp`, `/var/tmp`, `/dev/shm` and the kit's own temp dir): where a
    /// client that ignores its `TMPDIR` puts a temp file. Only `own`, the case's own directory
    /// (scanned whole elsewhere), is skipped, by its path: a name that looks like the kit's hides
    /// nothing. Best effort, bounded like a case's scan: what is found is a leak; what could not
    /// be read is not said (the directories belong to everyone). Paths are absolute.
    pub fn scan_shared_temp(&self, since: SystemTime, deadline: Instant, own: &Path) -> Vec<Found> {
        let mut roots = vec![
            PathBuf::from("/tmp"),
            PathBuf::from("/var/tmp"),
            PathBuf::from("/dev/shm"),
        ];
        let kit_temp = std::env::temp_dir();
        if !roots.contains(&kit_temp) {
            roots.push(kit_temp);
        }
        let own = std::fs::canonicalize(own).unwrap_or_else(|_| own.to_path_buf());
        let skip = |path: &Path| path == own;
        // Smaller than a case's own: a key file is small, and these directories are everyone's.
        let bounds = Bounds {
            entries: 5_000,
            file_bytes: 1 << 20,
            total_bytes: 32 << 20,
        };
        let mut found = Vec::new();
        for root in roots {
            let root = std::fs::canonicalize(&root).unwrap_or(root);
            let scan = self.scan_recent(&root, since, &skip, bounds, deadline);
            found.extend(scan.found.into_iter().map(|found| Found {
                path: root.join(&found.path),
                ..found
            }));
        }
        // A root inside another (`$TMPDIR` under `/tmp`) finds the same entry twice.
        let mut seen = Vec::new();
        found.retain(|found| {
            let key = (found.path.clone(), found.place.clone());
            let new = !seen.contains(&key);
            seen.push(key);
            new
        });
        found
    }

    /// The walk of both scans: the entries `keep` takes, their names, link targets and extended
    /// attributes looked at, directories entered, regular files read.
    fn walk(
        &self,
        root: &Path,
        bounds: Bounds,
        deadline: Instant,
        keep: &dyn Fn(&std::fs::DirEntry) -> bool,
    ) -> TreeScan {
        let mut walk = Walk {
            canary: self,
            root,
            bounds,
            deadline,
            scan: TreeScan::default(),
            entries_seen: 0,
            total: 0,
        };
        let mut pending = vec![root.to_path_buf()];
        while let Some(dir) = pending.pop() {
            let listing = match std::fs::read_dir(&dir) {
                Ok(listing) => listing,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    walk.unreadable(&dir, e);
                    continue;
                }
            };
            for entry in listing.flatten() {
                if let Some(why) = walk.count_entry() {
                    walk.scan.incomplete = Some(why);
                    return walk.scan;
                }
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if !keep(&entry) {
                    continue;
                }
                let path = entry.path();
                walk.name_and_attributes(&entry, &path);
                if kind.is_dir() {
                    pending.push(path);
                } else if kind.is_symlink() {
                    walk.link_target(&path);
                } else if kind.is_file() && walk.content(&path).is_break() {
                    return walk.scan;
                }
            }
        }
        walk.scan
    }
}

/// When `meta`'s entry last changed status (or content): its `ctime`.
fn changed_at(meta: &std::fs::Metadata) -> SystemTime {
    let seconds = u64::try_from(meta.ctime()).unwrap_or(0);
    let nanos = u32::try_from(meta.ctime_nsec()).unwrap_or(0);
    SystemTime::UNIX_EPOCH + Duration::new(seconds, nanos)
}

/// One walk in progress: what it found and what it has spent.
struct Walk<'a> {
    canary: &'a Canary,
    root: &'a Path,
    bounds: Bounds,
    deadline: Instant,
    scan: TreeScan,
    entries_seen: usize,
    total: u64,
}

impl Walk<'_> {
    fn relative(&self, path: &Path) -> PathBuf {
        path.strip_prefix(self.root).unwrap_or(path).to_path_buf()
    }

    fn found(&mut self, path: &Path, place: Place, form: &'static str) {
        let path = self.relative(path);
        self.scan.found.push(Found { path, place, form });
    }

    /// Notes the first thing the walk could not read.
    fn unreadable(&mut self, path: &Path, error: std::io::Error) {
        let relative = self.relative(path);
        self.scan
            .incomplete
            .get_or_insert_with(|| format!("{} cannot be read: {error}", relative.display()));
    }

    /// Counts one more entry; why the walk must stop (a bound or the deadline), if it must.
    fn count_entry(&mut self) -> Option<String> {
        self.entries_seen += 1;
        if self.entries_seen > self.bounds.entries {
            return Some(format!(
                "more than {} entries under {}",
                self.bounds.entries,
                self.root.display()
            ));
        }
        (Instant::now() >= self.deadline).then(|| {
            format!(
                "the case's limit passed after {} entries",
                self.entries_seen
            )
        })
    }

    /// The entry's name, and its extended attributes' names and values (read without following
    /// a link; a file system without them has none).
    fn name_and_attributes(&mut self, entry: &std::fs::DirEntry, path: &Path) {
        use std::os::unix::ffi::OsStrExt;
        if let Some(form) = self.canary.find_plain(entry.file_name().as_bytes()) {
            self.found(path, Place::Name, form);
        }
        let mut names = vec![0u8; XATTR_BYTES];
        let Ok(length) = rustix::fs::llistxattr(path, &mut names[..]) else {
            return;
        };
        let mut value = vec![0u8; XATTR_BYTES];
        for name in names[..length.min(XATTR_BYTES)]
            .split(|byte| *byte == 0)
            .filter(|name| !name.is_empty())
        {
            let shown = String::from_utf8_lossy(name).into_owned();
            let held = rustix::fs::lgetxattr(path, name, &mut value[..])
                .ok()
                .and_then(|length| self.canary.find(&value[..length.min(XATTR_BYTES)]));
            if let Some(form) = self.canary.find_plain(name).or(held) {
                self.found(path, Place::Attribute(shown), form);
            }
        }
    }

    /// A symbolic link's target, read (never followed).
    fn link_target(&mut self, path: &Path) {
        use std::os::unix::ffi::OsStrExt;
        if let Ok(target) = std::fs::read_link(path) {
            if let Some(form) = self.canary.find_plain(target.as_os_str().as_bytes()) {
                self.found(path, Place::LinkTarget, form);
            }
        }
    }

    /// A regular file's bytes, then the gzip streams in them; `Break` when the walk must stop
    /// (the deadline, or the bytes in all).
    fn content(&mut self, path: &Path) -> std::ops::ControlFlow<()> {
        use std::ops::ControlFlow::{Break, Continue};
        let mut file = match open_regular(path) {
            Ok(Some(file)) => file,
            Ok(None) => return Continue(()),
            Err(e) => {
                self.unreadable(path, e);
                return Continue(());
            }
        };
        let limit = self
            .bounds
            .file_bytes
            .min(self.bounds.total_bytes.saturating_sub(self.total));
        let before = file_position(&mut file);
        let mut gzip_at = Vec::new();
        let (form, cut) =
            self.canary
                .find_in_reader(&mut file, limit, self.deadline, Some(&mut gzip_at));
        self.total += file_position(&mut file).saturating_sub(before);
        let form = form.or_else(|| self.inflated(path, &gzip_at));
        if let Some(form) = form {
            self.found(path, Place::Content, form);
        }
        let relative = self.relative(path);
        match cut {
            Some(Cut::Deadline) => {
                self.scan.incomplete = Some(format!(
                    "the case's limit passed while reading {}",
                    relative.display()
                ));
                Break(())
            }
            Some(Cut::Bound) if self.total >= self.bounds.total_bytes => {
                self.scan.incomplete = Some(format!(
                    "more than {} of files under {} (read up to {})",
                    size(self.bounds.total_bytes),
                    self.root.display(),
                    relative.display()
                ));
                Break(())
            }
            Some(Cut::Bound) => {
                let why = format!(
                    "{} is larger than {}",
                    relative.display(),
                    size(self.bounds.file_bytes)
                );
                self.scan.incomplete.get_or_insert(why);
                Continue(())
            }
            None => Continue(()),
        }
    }

    /// The key in the gzip streams starting at `offsets` of the file at `path`, each inflated
    /// up to [`GZIP_BYTES`]; a stream that inflates past that is said (a scan cut short).
    fn inflated(&mut self, path: &Path, offsets: &[u64]) -> Option<&'static str> {
        use std::io::Seek;
        for at in offsets {
            let Ok(Some(mut file)) = open_regular(path) else {
                return None;
            };
            if file.seek(std::io::SeekFrom::Start(*at)).is_err() {
                continue;
            }
            let stream = flate2::read::GzDecoder::new(file);
            let (form, cut) = self.canary.find_inflated(stream, self.deadline);
            if form.is_some() {
                return form;
            }
            if cut.is_some() {
                let why = format!(
                    "a gzip stream in {} inflates past {} (or the case's limit passed)",
                    self.relative(path).display(),
                    size(GZIP_BYTES)
                );
                self.scan.incomplete.get_or_insert(why);
            }
        }
        None
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

    const KEY: &str = "sk-dsh-conformance-0123456789abcdef0123456789abcdef";

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    fn places(scan: &TreeScan) -> Vec<(String, Place)> {
        let mut places: Vec<(String, Place)> = scan
            .found
            .iter()
            .map(|found| (found.path.display().to_string(), found.place.clone()))
            .collect();
        places.sort_by(|a, b| a.0.cmp(&b.0));
        places
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
        assert_eq!(places(&scan), [("zz/deep".to_string(), Place::Content)]);
    }

    /// The key as a directory's name (a cache keyed by the credential), as a dangling link's
    /// target, in an extended attribute, and gzip-compressed in a file (issue 40 item 3).
    #[test]
    fn names_link_targets_attributes_and_gzip_streams_are_searched() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let random = KEY.rsplit('-').next().unwrap();
        std::fs::create_dir_all(root.join(format!("cache/{random}"))).unwrap();
        std::os::unix::fs::symlink(format!("/nonexistent/{KEY}"), root.join("dangling")).unwrap();
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gzip.write_all(format!("{{\"key\":\"{KEY}\"}}").as_bytes())
            .unwrap();
        let mut packed = b"header\n".to_vec();
        packed.extend(gzip.finish().unwrap());
        std::fs::write(root.join("state.bin"), packed).unwrap();
        std::fs::write(root.join("tagged"), b"nothing").unwrap();
        let tagged = rustix::fs::setxattr(
            root.join("tagged"),
            "user.credential",
            KEY.as_bytes(),
            rustix::fs::XattrFlags::empty(),
        )
        .is_ok();
        let scan = Canary::new(KEY).scan_tree(root, Bounds::default(), far());
        assert_eq!(scan.incomplete, None);
        let mut expected = vec![
            (format!("cache/{random}"), Place::Name),
            ("dangling".to_string(), Place::LinkTarget),
            ("state.bin".to_string(), Place::Content),
        ];
        if tagged {
            expected.push((
                "tagged".to_string(),
                Place::Attribute("user.credential".into()),
            ));
        }
        assert_eq!(places(&scan), expected);
        let gzip = scan.found.iter().find(|f| f.place == Place::Content);
        assert_eq!(gzip.map(|found| found.form), Some("gzip-compressed"));
    }

    /// A file whose modification time was set back an hour is still recent (its status change
    /// time is not), a directory named like the kit's own is read, and only the path `skip`
    /// names is skipped; nothing older than `since` is read.
    #[test]
    fn a_recent_scan_goes_by_change_time_and_skips_only_what_it_is_told() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let hour_ago = SystemTime::now() - Duration::from_secs(3600);
        std::fs::write(root.join("stale"), KEY).unwrap();
        std::fs::File::options()
            .write(true)
            .open(root.join("stale"))
            .unwrap()
            .set_modified(hour_ago)
            .unwrap();
        let kit_like = root.join("dsh-conformance-client-lookalike");
        std::fs::create_dir(&kit_like).unwrap();
        std::fs::write(kit_like.join("key.log"), format!("key={KEY}")).unwrap();
        std::fs::create_dir(root.join("own-case")).unwrap();
        std::fs::write(root.join("own-case/key"), KEY).unwrap();
        let skip = |path: &Path| path == root.join("own-case");
        let canary = Canary::new(KEY);
        let since = hour_ago + Duration::from_secs(60);
        let scan = canary.scan_recent(root, since, &skip, Bounds::default(), far());
        let found: Vec<String> = places(&scan).into_iter().map(|(path, _)| path).collect();
        assert_eq!(found, ["dsh-conformance-client-lookalike/key.log", "stale"]);
        let later = SystemTime::now() + Duration::from_secs(3600);
        let none = canary.scan_recent(root, later, &skip, Bounds::default(), far());
        assert!(none.found.is_empty(), "{none:?}");
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
