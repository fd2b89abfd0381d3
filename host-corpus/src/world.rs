//! The per-case world: a fresh temp root with the project, DSH_HOME, host data dir, journal,
//! scenario, the `bin/dsh` wrapper around fake-dsh, the canary credential and setup bundles.

use dsh_engine::programs::shell_quote;
use dsh_engine::random::{hex, random_hex};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::dialect::ProfileSpec;
use dsh_formats::case::{BundleKind, Case, CwdForm};

/// fake-dsh's mark on a Harness home made for it (`fake_dsh::home::MARKER`), relative to the root.
const FAKE_DSH_HOME_MARKER: &str = "dsh-home/.fake-dsh/home";

/// The package name the open-design bundle has.
pub const BUNDLE_PACKAGE: &str = "@open-design/dsh-runtime";
const BUNDLE_VERSION: &str = "0.1.0";

/// One case's temp world. Dropping it removes the directory.
pub struct World {
    _dir: tempfile::TempDir,
    /// The harness's own files about the case, outside the driver's cwd (the supervisors'
    /// report: a host must not be able to edit what blames it).
    private: tempfile::TempDir,
    /// The canonical path of the temp root (every path below is under it).
    pub root: PathBuf,
    pub canary: String,
    /// The per-case token every driver process carries in `DSH_CONFORMANCE_CASE` (see
    /// `dsh_engine::leftovers`).
    pub case_token: String,
    /// A marker inside the bootstrap text, to tell whether an execute carried the bootstrap.
    pub bootstrap_marker: String,
    fake_dsh: PathBuf,
    fake_dsh_env: BTreeMap<String, String>,
    watchdog_secs: u64,
    /// How many times a `restart` gave the driver a fresh `RUNTIME_DATA_DIR` (`host-data-N`).
    data_dir_generation: usize,
    /// The profile the dialect installs (`$DSH_HOME/profiles/<name>`).
    profile: String,
}

/// The variant's env as it applies to `case`: a case that pins its runtime's `version` keeps it
/// (fake-dsh lets `FAKE_DSH_VERSION` win, which a `runtime_version` step relies on).
fn variant_env_for(case: &Case, variant: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut env = variant.clone();
    if case.runtime.version.is_some() {
        env.remove("FAKE_DSH_VERSION");
    }
    env
}

impl Drop for World {
    fn drop(&mut self) {
        // A run stopped by a second signal removes the temp roots of the worlds alive then (their
        // journals hold prompts) before it exits without unwinding.
        dsh_engine::interrupt::forget_live_dir(self._dir.path());
        dsh_engine::interrupt::forget_live_dir(self.private.path());
    }
}

impl World {
    /// Builds the world for `case`; `fake_dsh_env` is the runtime variant's extra env. The
    /// dialect's `profile` is the one pre-installed (its stand-in manifest), when the case has one.
    pub fn create(
        case: &Case,
        profile: &ProfileSpec,
        fake_dsh: &Path,
        fake_dsh_env: &BTreeMap<String, String>,
        watchdog_secs: u64,
    ) -> io::Result<World> {
        let dir = dsh_engine::scratch::tempdir("dsh-conformance-")?;
        let root = dir.path().canonicalize()?;
        let private = dsh_engine::scratch::tempdir("dsh-conformance-kit-")?;
        dsh_engine::interrupt::add_live_dir(dir.path());
        dsh_engine::interrupt::add_live_dir(private.path());
        for sub in ["project", "dsh-home", "host-data", "bin"] {
            fs::create_dir_all(root.join(sub))?;
        }
        // The home is made for fake-dsh: its marker lets fake-dsh write there whatever a host
        // puts in it (fake-dsh refuses an unmarked home holding what it did not create).
        fs::create_dir_all(root.join("dsh-home/.fake-dsh"))?;
        write_private(
            &root.join(FAKE_DSH_HOME_MARKER),
            b"{\"created_by\":\"dsh-conformance\"}\n",
        )?;
        if case.profile_installed() {
            let dir = root.join("dsh-home/profiles").join(&profile.name);
            fs::create_dir_all(&dir)?;
            let package = &profile.stand_in_manifest;
            fs::write(dir.join("package.json"), format!("{package:#}\n"))?;
        }
        let scenario = serde_json::to_string_pretty(&case.runtime).map_err(io::Error::other)?;
        write_private(&root.join("scenario.json"), (scenario + "\n").as_bytes())?;
        write_private(&root.join("journal.jsonl"), b"")?;
        let world = World {
            _dir: dir,
            private,
            root,
            canary: format!("dsh-canary-{}", random_hex(16)?),
            case_token: random_hex(16)?,
            bootstrap_marker: format!("od-bootstrap-{}", random_hex(8)?),
            fake_dsh: fake_dsh.to_path_buf(),
            fake_dsh_env: variant_env_for(case, fake_dsh_env),
            watchdog_secs,
            data_dir_generation: 0,
            profile: profile.name.clone(),
        };
        world.write_wrapper()?;
        Ok(world)
    }

    /// Where the case's supervisors report the processes they killed (`dsh_engine::supervisor`).
    pub fn supervisor_report(&self) -> PathBuf {
        self.private.path().join("supervisor-killed.jsonl")
    }

    pub fn dsh_home(&self) -> PathBuf {
        self.root.join("dsh-home")
    }
    /// The driver's `RUNTIME_DATA_DIR`.
    pub fn host_data(&self) -> PathBuf {
        match self.data_dir_generation {
            0 => self.root.join("host-data"),
            n => self.root.join(format!("host-data-{n}")),
        }
    }

    /// Moves the daemon's data root: from now on `RUNTIME_DATA_DIR` is a new, empty dir.
    pub fn fresh_host_data(&mut self) -> io::Result<()> {
        self.data_dir_generation += 1;
        fs::create_dir_all(self.host_data())
    }

    /// Cuts every file under `RUNTIME_DATA_DIR` to half its length (a crash mid-save of a host
    /// that writes in place); returns the files cut.
    pub fn truncate_host_data(&self) -> io::Result<Vec<PathBuf>> {
        let mut cut = Vec::new();
        for (path, bytes) in self.host_data_files() {
            let file = fs::OpenOptions::new().write(true).open(&path)?;
            file.set_len(bytes.len() as u64 / 2)?;
            cut.push(path);
        }
        Ok(cut)
    }

    /// The files under `DSH_HOME` that neither the harness's installed profile nor the runtime's
    /// own session history explain (relative paths): what a host wrote into the user's home.
    pub fn foreign_dsh_home_files(&self) -> Vec<String> {
        let home = self.dsh_home();
        let mut files = Vec::new();
        collect_paths(&home, &mut files, 0);
        files
            .into_iter()
            .filter_map(|path| {
                let relative = path
                    .strip_prefix(&home)
                    .ok()?
                    .to_string_lossy()
                    .into_owned();
                let runtime_owned = relative.starts_with("profiles/")
                    || relative.starts_with(".fake-dsh/")
                    || (relative.starts_with("sessions/")
                        && !relative["sessions/".len()..].contains('/'));
                (!runtime_owned).then_some(relative)
            })
            .collect()
    }

    /// The project dir `canonical` spelled as the case's `cwd_form` asks (the host must
    /// canonicalize it): through a symlink, or with a `./` segment and a trailing slash.
    pub fn spelled_cwd(&self, canonical: &Path, form: Option<CwdForm>) -> io::Result<String> {
        let Some(relative) = canonical.strip_prefix(&self.root).ok() else {
            return Ok(path_string(canonical));
        };
        match form {
            None => Ok(path_string(canonical)),
            Some(CwdForm::DotSegment) => {
                Ok(format!("{}/./{}/", self.root.display(), relative.display()))
            }
            Some(CwdForm::Symlink) => {
                let link = self
                    .root
                    .join(format!("{}-link", relative.display()).replace('/', "-"));
                if !link.exists() {
                    std::os::unix::fs::symlink(canonical, &link)?;
                }
                Ok(path_string(&link))
            }
        }
    }
    pub fn journal(&self) -> PathBuf {
        self.root.join("journal.jsonl")
    }
    pub fn bin_dir(&self) -> PathBuf {
        self.root.join("bin")
    }
    pub fn dsh(&self) -> PathBuf {
        self.root.join("bin/dsh")
    }
    /// The profile this world's Harness home holds (the dialect's).
    pub fn profile(&self) -> &str {
        &self.profile
    }
    pub fn profile_file(&self) -> PathBuf {
        self.dsh_home()
            .join("profiles")
            .join(&self.profile)
            .join("package.json")
    }
    /// Where the runtime keeps session `session_id`'s record: `$DSH_HOME/sessions/<id>.json`, or,
    /// for a profile whose host moves session persistence elsewhere in the world (multica's
    /// `MULTICA_DSH_SESSION_ROOT`, which a host points into its data dir), the `<id>.json` found
    /// there (a bounded walk of the world that follows no link). None found: the Harness home's.
    pub fn session_record(&self, session_id: &str) -> PathBuf {
        let home = self.session_file(session_id);
        if home.exists() {
            return home;
        }
        let name = format!("{session_id}.json");
        let mut dirs = vec![(self.root.clone(), 0)];
        while let Some((dir, depth)) = dirs.pop() {
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if kind.is_dir() && depth < 8 {
                    dirs.push((entry.path(), depth + 1));
                } else if kind.is_file() && entry.file_name().to_str() == Some(name.as_str()) {
                    return entry.path();
                }
            }
        }
        home
    }
    pub fn session_file(&self, session_id: &str) -> PathBuf {
        self.dsh_home()
            .join("sessions")
            .join(format!("{session_id}.json"))
    }

    /// The bootstrap context the harness sends with every run of this case.
    pub fn bootstrap(&self, conversation: &str) -> String {
        format!(
            "[{}] You are the OpenDesign design agent for conversation {conversation}. Write project files with your tools.",
            self.bootstrap_marker
        )
    }

    /// A run's cwd (relative to the root), created when missing, canonicalized.
    pub fn run_cwd(&self, relative: &str) -> io::Result<PathBuf> {
        let path = self.root.join(relative);
        fs::create_dir_all(&path)?;
        path.canonicalize()
    }

    /// From now on fake-dsh's `--version` answers `version` (the `runtime_version` step).
    pub fn set_runtime_version(&mut self, version: &str) -> io::Result<()> {
        self.fake_dsh_env
            .insert("FAKE_DSH_VERSION".to_string(), version.to_string());
        self.write_wrapper()
    }

    /// Writes `bin/dsh` atomically (a running shell never sees a half-written script).
    fn write_wrapper(&self) -> io::Result<()> {
        let mut env: BTreeMap<String, String> = self.fake_dsh_env.clone();
        env.insert(
            "FAKE_DSH_SCENARIO".to_string(),
            path_string(&self.root.join("scenario.json")),
        );
        env.insert("FAKE_DSH_JOURNAL".to_string(), path_string(&self.journal()));
        // Every dsh of the case carries its token whatever environment the host gives it (a
        // driver serving many cases started without one), so an escaped runtime is found.
        env.insert(
            dsh_engine::leftovers::CASE_TOKEN_ENV.to_string(),
            self.case_token.clone(),
        );
        env.entry("FAKE_DSH_WATCHDOG_SECS".to_string())
            .or_insert_with(|| self.watchdog_secs.to_string());
        let mut script = String::from("#!/bin/sh\n# dsh-conformance: this case's dsh (fake-dsh playing the case's scenario)\n");
        for (name, value) in &env {
            dsh_engine::child_env::check_variant_env(name, value)
                .map_err(|why| io::Error::new(io::ErrorKind::InvalidInput, why))?;
            script.push_str(&format!("{name}={}\nexport {name}\n", shell_quote(value)));
        }
        // A `crash_mid_save` step lowers the driver's soft file-size limit; the runtime it starts
        // takes it back (no fork for it; where the hard limit is finite fake-dsh raises its own).
        script.push_str("ulimit -S -f unlimited 2>/dev/null || :\n");
        script.push_str(&format!(
            "exec {} \"$@\"\n",
            shell_quote(&path_string(&self.fake_dsh))
        ));
        // A fresh temp name (O_EXCL): a link the host planted in bin/ is never written through.
        let mut temp = tempfile::Builder::new()
            .prefix(".dsh.")
            .tempfile_in(self.bin_dir())?;
        io::Write::write_all(&mut temp, script.as_bytes())?;
        set_executable(temp.path())?;
        temp.persist(self.dsh())
            .map(drop)
            .map_err(|error| error.error)
    }

    /// Builds the bundle of a `setup` step; returns (tarball, manifest) paths.
    pub fn make_bundle(&self, kind: BundleKind, index: usize) -> io::Result<(PathBuf, PathBuf)> {
        let dir = self.root.join(format!("bundle-{index}"));
        fs::create_dir_all(&dir)?;
        let file_name = format!("open-design-dsh-runtime-{BUNDLE_VERSION}.tar");
        let tarball = dir.join(&file_name);
        let manifest = dir.join("manifest.json");
        let package_json =
            format!("{{\"name\":\"{BUNDLE_PACKAGE}\",\"version\":\"{BUNDLE_VERSION}\"}}\n");
        let bytes = ustar_one_file("package/package.json", package_json.as_bytes());
        let mut sha256 = hex(&Sha256::digest(&bytes));
        if kind == BundleKind::Tampered {
            sha256 = flip_first_hex_digit(&sha256);
        }
        if kind != BundleKind::MissingFile {
            fs::write(&tarball, &bytes)?;
        }
        let manifest_json = serde_json::json!({"package": BUNDLE_PACKAGE, "version": BUNDLE_VERSION, "sha256": sha256, "file": file_name});
        fs::write(&manifest, format!("{manifest_json:#}\n"))?;
        Ok((tarball, manifest))
    }

    /// Every regular file under the host data dir, for the credential scan (bounded per file).
    pub fn host_data_files(&self) -> Vec<(PathBuf, Vec<u8>)> {
        let mut files = Vec::new();
        collect_files(&self.host_data(), &mut files, 0);
        files
    }
}

const MAX_SCANNED_FILE_BYTES: u64 = 4 * 1024 * 1024;

fn collect_files(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>, depth: usize) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() && depth < 8 {
            collect_files(&path, out, depth + 1);
        } else if kind.is_file() {
            if let Ok(file) = fs::File::open(&path) {
                let mut bytes = Vec::new();
                if file
                    .take(MAX_SCANNED_FILE_BYTES)
                    .read_to_end(&mut bytes)
                    .is_ok()
                {
                    out.push((path, bytes));
                }
            }
        }
    }
}

/// Every path below `dir` that is not a directory (symlinks are not followed).
fn collect_paths(dir: &Path, out: &mut Vec<PathBuf>, depth: usize) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        match entry.file_type() {
            Ok(kind) if kind.is_dir() && depth < 8 => collect_paths(&entry.path(), out, depth + 1),
            Ok(kind) if kind.is_dir() => {}
            _ => out.push(entry.path()),
        }
    }
}

/// Creates a new file readable by this user only (journals and scenarios hold prompts).
fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?
        .write_all(bytes)
}

fn path_string(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn set_executable(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))
}

fn flip_first_hex_digit(hex: &str) -> String {
    let mut chars: Vec<char> = hex.chars().collect();
    if let Some(first) = chars.first_mut() {
        *first = if *first == '0' { '1' } else { '0' };
    }
    chars.into_iter().collect()
}

/// A POSIX ustar archive holding one regular file.
fn ustar_one_file(name: &str, contents: &[u8]) -> Vec<u8> {
    let mut header = [0u8; 512];
    header[..name.len()].copy_from_slice(name.as_bytes());
    let mut put = |offset: usize, text: &str| {
        header[offset..offset + text.len()].copy_from_slice(text.as_bytes())
    };
    put(100, "0000644\0");
    put(108, "0000000\0");
    put(116, "0000000\0");
    put(124, &format!("{:011o}\0", contents.len()));
    put(136, "00000000000\0");
    put(156, "0");
    put(257, "ustar\0");
    put(263, "00");
    header[148..156].copy_from_slice(b"        ");
    let checksum: u32 = header.iter().map(|b| u32::from(*b)).sum();
    header[148..156].copy_from_slice(format!("{checksum:06o}\0 ").as_bytes());
    let mut archive = header.to_vec();
    archive.extend_from_slice(contents);
    archive.resize(archive.len().div_ceil(512) * 512, 0);
    archive.resize(archive.len() + 1024, 0);
    archive
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gen1() -> ProfileSpec {
        crate::dialect::Dialect::gen1().profile.clone()
    }

    #[test]
    fn shell_quoting_survives_single_quotes() {
        assert_eq!(shell_quote("a'b"), "'a'\\''b'");
        let output = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {}", shell_quote("x' $HOME \"y")))
            .output()
            .expect("sh runs");
        assert_eq!(String::from_utf8_lossy(&output.stdout), "x' $HOME \"y");
    }

    fn case() -> Case {
        let text = r#"{"v":1,"id":"discovery.world","summary":"s","spec":["5"],"rules":["s5.r"],
            "steps":[{"discover":{},"expect":{"available":true}}]}"#;
        dsh_formats::case::parse_case(Path::new("discovery/discovery.world.json"), text)
            .expect("the case parses")
    }

    #[test]
    fn a_world_is_private_and_its_home_is_marked_for_fake_dsh() {
        use std::os::unix::fs::PermissionsExt;
        let world = World::create(
            &case(),
            &gen1(),
            Path::new("/bin/true"),
            &BTreeMap::new(),
            5,
        )
        .expect("the world is made");
        let mode = |path: &Path| fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&world.root), 0o700);
        assert_eq!(mode(&world.journal()), 0o600);
        assert_eq!(mode(&world.root.join("scenario.json")), 0o600);
        assert!(world.root.join(FAKE_DSH_HOME_MARKER).is_file());
        assert!(world.foreign_dsh_home_files().is_empty());
    }

    #[test]
    fn a_variant_env_name_that_is_shell_code_never_reaches_the_wrapper() {
        let witness = tempfile::tempdir().unwrap();
        let planted = witness.path().join("pwned");
        let name = format!("X=1; touch {}; Y", planted.display());
        let env = BTreeMap::from([(name, "1".to_string())]);
        let error = World::create(&case(), &gen1(), Path::new("/bin/true"), &env, 5)
            .err()
            .expect("refused");
        assert!(
            error
                .to_string()
                .contains("not an environment variable name"),
            "{error}"
        );
        assert!(!planted.exists());
    }

    #[test]
    fn ustar_archive_lists_with_tar() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("bundle.tar");
        fs::write(&path, ustar_one_file("package/package.json", b"{}\n")).expect("write");
        let output = std::process::Command::new("tar")
            .arg("-tf")
            .arg(&path)
            .output();
        if let Ok(output) = output {
            assert!(
                output.status.success(),
                "{}",
                String::from_utf8_lossy(&output.stderr)
            );
            assert_eq!(
                String::from_utf8_lossy(&output.stdout).trim(),
                "package/package.json"
            );
        }
    }
}
