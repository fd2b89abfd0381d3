//! The Harness home (`DSH_HOME`): where a profile (`crate::profile`) counts as installed, where
//! `plugin add` records it, fake-dsh's own per-home state (the `stdio` invocation counter), and
//! the one rule for writing into it ([`claim`]: never into a home holding what fake-dsh did not
//! create).

use crate::profile::Profile;
use serde_json::json;
use sha2::{Digest, Sha256};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The open-design profile's name (every profile's is in [`Profile`]).
pub const PROFILE_NAME: &str = "open-design";
/// The package name of the open-design profile bundle (every profile's is in [`Profile`]).
pub const BUNDLE_PACKAGE: &str = "@open-design/dsh-runtime";

/// `DSH_HOME`, else `$HOME/.dsh`.
pub fn dsh_home() -> Result<PathBuf, String> {
    if let Some(home) = std::env::var_os("DSH_HOME").filter(|value| !value.is_empty()) {
        return Ok(PathBuf::from(home));
    }
    match std::env::var_os("HOME").filter(|value| !value.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".dsh")),
        None => Err("error: cannot locate the Harness home: set DSH_HOME or HOME".to_string()),
    }
}

/// The file that marks a Harness home as fake-dsh's own (relative to the home). fake-dsh writes
/// into a home only when it carries this marker, or when everything in it is something fake-dsh
/// itself writes (then it marks it first): never into a real dsh installation. Every surface that
/// writes into the home (`plugin add`, `--stdio`, the SDK surfaces' session logs) claims it with
/// [`claim`] first.
pub const MARKER: &str = ".fake-dsh/home";

/// Makes sure fake-dsh may write into `dsh_home` (see [`MARKER`]), marking it as fake-dsh's own;
/// the error names the home, what in it fake-dsh did not create, and `DSH_HOME`.
pub fn claim(dsh_home: &Path) -> Result<(), String> {
    let marker = dsh_home.join(MARKER);
    if marker.is_file() {
        return Ok(());
    }
    let foreign = foreign_entries(dsh_home);
    if !foreign.is_empty() {
        let shown: Vec<&str> = foreign.iter().take(3).map(String::as_str).collect();
        return Err(format!(
            "error: fake-dsh will not write into the Harness home {}: it holds files fake-dsh did not create ({}{}), a real dsh installation?\n\
             Set DSH_HOME to an empty directory (or one fake-dsh made, marked by {MARKER}) for fake-dsh.",
            dsh_home.display(),
            shown.join(", "),
            if foreign.len() > shown.len() { ", ..." } else { "" },
        ));
    }
    let mut contents = serde_json::to_vec_pretty(&json!({
        "created_by": "fake-dsh",
        "note": "a Harness home made for fake-dsh (the keyless test runtime); not a real dsh installation"
    }))
    .expect("the marker always serializes");
    contents.push(b'\n');
    write_atomically(&marker, &contents)
        .map_err(|error| format!("error: cannot mark {}: {error}", dsh_home.display()))
}

/// The paths under `dsh_home` (relative) that fake-dsh never writes: anything but its own
/// `.fake-dsh/`, `sessions/<file>.json` and a stand-in `profiles/<profile>/package.json` (see
/// [`is_stand_in_manifest`]), and the temp files of [`write_atomically`] beside them. A link is
/// never fake-dsh's, whatever its name. A missing home has none.
fn foreign_entries(dsh_home: &Path) -> Vec<String> {
    let mut foreign = Vec::new();
    let mut check = |dir: &Path, relative: &str, allowed: &dyn Fn(&str, FileKind) -> bool| {
        for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            // `DirEntry::file_type` does not follow links: a link is neither a file nor a dir.
            let kind = match entry.file_type() {
                Ok(kind) if kind.is_dir() => FileKind::Dir,
                Ok(kind) if kind.is_file() => FileKind::File,
                _ => FileKind::Other,
            };
            if !allowed(&name, kind) {
                foreign.push(format!("{relative}{name}"));
            }
        }
    };
    let temp_file = |name: &str| name.starts_with('.') && name.ends_with(".tmp");
    check(dsh_home, "", &|name, kind| {
        matches!(name, ".fake-dsh" | "sessions" | "profiles") && kind == FileKind::Dir
    });
    check(&dsh_home.join("sessions"), "sessions/", &|name, kind| {
        kind == FileKind::File && (name.ends_with(".json") || temp_file(name))
    });
    check(&dsh_home.join("profiles"), "profiles/", &|name, kind| {
        Profile::from_name(name).is_some() && kind == FileKind::Dir
    });
    for profile in Profile::ALL {
        let dir = dsh_home.join("profiles").join(profile.name());
        check(
            &dir,
            &format!("profiles/{}/", profile.name()),
            &|name, kind| {
                kind == FileKind::File
                    && (temp_file(name)
                        || (name == "package.json"
                            && is_stand_in_manifest(&dir.join(name), profile)))
            },
        );
    }
    foreign
}

/// What a directory entry is, links not followed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum FileKind {
    File,
    Dir,
    Other,
}

/// The largest profile manifest [`is_stand_in_manifest`] reads.
const MAX_STAND_IN_BYTES: u64 = 64 * 1024;

/// Whether `path` holds a stand-in profile record, the only `package.json` fake-dsh replaces: a
/// regular file (not a link) of at most 64 KiB holding a JSON object whose `name` is the
/// profile's bundle package ([`BUNDLE_PACKAGE`] for open-design) and that has neither `dsh` nor
/// `dependencies`. That is what fake-dsh's `plugin add` writes and what test kits write in its
/// place; the real dsh's `profiles/<profile>/package.json` is pnpm's project file
/// (`dsh.profile.bundles`, `dependencies`), never one.
pub fn is_stand_in_manifest(path: &Path, profile: Profile) -> bool {
    let regular = fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_file());
    let mut text = Vec::new();
    let read =
        File::open(path).and_then(|file| file.take(MAX_STAND_IN_BYTES + 1).read_to_end(&mut text));
    if !regular || read.is_err() || text.len() as u64 > MAX_STAND_IN_BYTES {
        return false;
    }
    let Ok(serde_json::Value::Object(manifest)) = serde_json::from_slice(&text) else {
        return false;
    };
    manifest.get("name").and_then(|name| name.as_str()) == Some(profile.identity().bundle_package)
        && !manifest.contains_key("dsh")
        && !manifest.contains_key("dependencies")
}

/// Makes sure `plugin add` may replace the home's profile manifest: there is none yet, or it is a
/// stand-in record ([`is_stand_in_manifest`]). Anything else (the real dsh's package.json, a
/// link) is refused even in a marked home; the error names the file and `DSH_HOME`.
pub fn check_manifest_replaceable(dsh_home: &Path, profile: Profile) -> Result<(), String> {
    let path = manifest_path_of(dsh_home, profile);
    if fs::symlink_metadata(&path).is_err() || is_stand_in_manifest(&path, profile) {
        return Ok(());
    }
    Err(format!(
        "error: fake-dsh will not replace {}: it is not a profile record fake-dsh writes \
         (a JSON object named {} without `dsh` or `dependencies`), a real dsh profile?\n\
         Set DSH_HOME to an empty directory (or one fake-dsh made, marked by {MARKER}) for fake-dsh.",
        path.display(),
        profile.identity().bundle_package
    ))
}

/// `$DSH_HOME/profiles/open-design/package.json`: its existence means the profile is installed.
pub fn profile_manifest_path(dsh_home: &Path) -> PathBuf {
    manifest_path_of(dsh_home, Profile::OpenDesign)
}

/// `$DSH_HOME/profiles/<profile>/package.json`: its existence means that profile is installed.
pub fn manifest_path_of(dsh_home: &Path, profile: Profile) -> PathBuf {
    dsh_home
        .join("profiles")
        .join(profile.name())
        .join("package.json")
}

/// Whether the profile is installed in this home.
pub fn profile_installed(dsh_home: &Path, profile: Profile) -> bool {
    manifest_path_of(dsh_home, profile).is_file()
}

/// The sha256 of a file as lowercase hex, read in chunks.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let read = file.read(&mut chunk)?;
        if read == 0 {
            break;
        }
        hasher.update(&chunk[..read]);
    }
    Ok(hex(&hasher.finalize()))
}

/// Lowercase hex of some bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Writes `contents` to `path` atomically: a temp file in the same directory, then a rename.
pub fn write_atomically(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let file_name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(".{file_name}.{}.tmp", std::process::id()));
    let mut file = File::create(&temp)?;
    file.write_all(contents)?;
    file.sync_all()?;
    drop(file);
    fs::rename(&temp, path).inspect_err(|_| {
        let _ = fs::remove_file(&temp);
    })
}

/// Installs a profile from a bundle tarball (`dsh plugin --profile <name> add <tarball>`):
/// records the package name, version, the tarball's sha256 and absolute path, over nothing but a
/// stand-in record ([`check_manifest_replaceable`]). Returns the manifest path.
pub fn install_profile(
    dsh_home: &Path,
    profile: Profile,
    tarball: &Path,
    version: &str,
) -> Result<PathBuf, String> {
    if !tarball.is_file() {
        return Err(format!(
            "error: bundle {} does not exist or is not a file",
            tarball.display()
        ));
    }
    let absolute = fs::canonicalize(tarball)
        .map_err(|error| format!("error: cannot resolve {}: {error}", tarball.display()))?;
    let sha256 = sha256_file(&absolute)
        .map_err(|error| format!("error: cannot read {}: {error}", tarball.display()))?;
    let manifest = json!({
        "name": profile.identity().bundle_package,
        "version": version,
        "sha256": sha256,
        "tarball": absolute.to_string_lossy(),
        "profile": profile.name()
    });
    let path = manifest_path_of(dsh_home, profile);
    check_manifest_replaceable(dsh_home, profile)?;
    let mut contents = serde_json::to_vec_pretty(&manifest).expect("a manifest always serializes");
    contents.push(b'\n');
    write_atomically(&path, &contents)
        .map_err(|error| format!("error: cannot write {}: {error}", path.display()))?;
    Ok(path)
}

/// Takes the next `stdio` invocation index from `$DSH_HOME/.fake-dsh/stdio-invocations` (used
/// when there is no journal to count from), under an exclusive lock.
pub fn next_stdio_invocation(dsh_home: &Path) -> std::io::Result<u64> {
    let dir = dsh_home.join(".fake-dsh");
    fs::create_dir_all(&dir)?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.join("stdio-invocations"))?;
    crate::journal::with_exclusive_lock(&file, |mut locked| -> std::io::Result<u64> {
        let mut text = String::new();
        locked.read_to_string(&mut text)?;
        let index = text.trim().parse::<u64>().unwrap_or(0);
        locked.set_len(0)?;
        locked.seek(SeekFrom::Start(0))?;
        locked.write_all(format!("{}\n", index + 1).as_bytes())?;
        Ok(index)
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_refuses_a_missing_tarball_and_records_a_real_one() {
        let home = tempfile::tempdir().unwrap();
        let missing = home.path().join("nope.tgz");
        let refused =
            install_profile(home.path(), Profile::OpenDesign, &missing, "0.1.0").unwrap_err();
        assert!(refused.contains("does not exist"), "{refused}");
        assert!(!profile_installed(home.path(), Profile::OpenDesign));

        let tarball = home.path().join("bundle.tgz");
        fs::write(&tarball, b"abc").unwrap();
        install_profile(home.path(), Profile::OpenDesign, &tarball, "0.1.0").unwrap();
        assert!(profile_installed(home.path(), Profile::OpenDesign));
        let manifest: serde_json::Value =
            serde_json::from_slice(&fs::read(profile_manifest_path(home.path())).unwrap()).unwrap();
        assert_eq!(manifest["name"], BUNDLE_PACKAGE);
        assert_eq!(
            manifest["sha256"],
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn a_home_of_fake_dsh_shape_is_marked_and_a_real_installation_refused() {
        let home = tempfile::tempdir().unwrap();
        let fresh = home.path().join("fresh");
        claim(&fresh).unwrap();
        assert!(
            fresh.join(MARKER).is_file(),
            "a missing home is made and marked"
        );

        let kit_made = home.path().join("kit-made");
        fs::create_dir_all(kit_made.join("profiles/open-design")).unwrap();
        fs::write(
            profile_manifest_path(&kit_made),
            b"{\"name\": \"@open-design/dsh-runtime\", \"installed_by\": \"a kit\"}",
        )
        .unwrap();
        fs::create_dir_all(kit_made.join("sessions")).unwrap();
        fs::write(kit_made.join("sessions/od-1.json"), b"{}").unwrap();
        claim(&kit_made).unwrap();
        assert!(kit_made.join(MARKER).is_file());

        let real = home.path().join("real");
        fs::create_dir_all(real.join("profiles/node_modules")).unwrap();
        fs::create_dir_all(real.join("profiles/open-design/node_modules")).unwrap();
        fs::write(profile_manifest_path(&real), b"{\"name\":\"real\"}").unwrap();
        let refused = claim(&real).unwrap_err();
        assert!(refused.contains("DSH_HOME"), "{refused}");
        assert!(refused.contains("profiles/node_modules"), "{refused}");
        assert!(!real.join(".fake-dsh").exists(), "nothing written");

        fs::create_dir_all(real.join(".fake-dsh")).unwrap();
        fs::write(real.join(MARKER), b"{}").unwrap();
        claim(&real).expect("a marked home is fake-dsh's whatever it holds");
    }

    #[test]
    fn a_home_holding_only_a_real_profile_manifest_or_a_link_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let real = root.path().join("real");
        fs::create_dir_all(real.join("profiles/open-design")).unwrap();
        let pnpm = br#"{"name": "@open-design/dsh-runtime", "dsh": {"profile": {"bundles": []}}}"#;
        fs::write(profile_manifest_path(&real), pnpm).unwrap();
        let refused = claim(&real).unwrap_err();
        assert!(
            refused.contains("profiles/open-design/package.json") && refused.contains("DSH_HOME"),
            "{refused}"
        );
        assert!(!real.join(".fake-dsh").exists(), "nothing written");

        fs::create_dir_all(real.join(".fake-dsh")).unwrap();
        fs::write(real.join(MARKER), b"{}").unwrap();
        let refused = check_manifest_replaceable(&real, Profile::OpenDesign).unwrap_err();
        assert!(
            refused.contains("package.json") && refused.contains("DSH_HOME"),
            "{refused}"
        );
        let tarball = root.path().join("bundle.tgz");
        fs::write(&tarball, b"abc").unwrap();
        install_profile(&real, Profile::OpenDesign, &tarball, "0.1.0").unwrap_err();
        assert_eq!(fs::read(profile_manifest_path(&real)).unwrap(), pnpm);

        let linked = root.path().join("linked");
        fs::create_dir_all(linked.join("profiles/open-design")).unwrap();
        let elsewhere = root.path().join("stand-in.json");
        fs::write(&elsewhere, br#"{"name": "@open-design/dsh-runtime"}"#).unwrap();
        std::os::unix::fs::symlink(&elsewhere, profile_manifest_path(&linked)).unwrap();
        assert!(claim(&linked).unwrap_err().contains("package.json"));
        assert!(check_manifest_replaceable(&linked, Profile::OpenDesign).is_err());
    }

    #[test]
    fn the_invocation_counter_counts_up_from_zero() {
        let home = tempfile::tempdir().unwrap();
        assert_eq!(next_stdio_invocation(home.path()).unwrap(), 0);
        assert_eq!(next_stdio_invocation(home.path()).unwrap(), 1);
        assert_eq!(next_stdio_invocation(home.path()).unwrap(), 2);
    }
}
