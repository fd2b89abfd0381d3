//! The Python wheel `cargo xtask dist` writes beside the npm packages: `dsh-conformance` for one
//! platform, the three binaries as the wheel's scripts (`<name>.data/scripts/`, which pip installs
//! into the environment's `bin/`, on PATH in an activated venv), the `dsh_conformance` module and
//! pytest plugin from `python/dsh_conformance/`, and the `.dist-info` (METADATA, WHEEL with the
//! platform tag, `entry_points.txt` naming the plugin under `pytest11`, RECORD with each file's
//! sha256). No setup.py and no build backend: nothing runs at install time, and pip needs no
//! network for it.
//!
//! A wheel is a zip archive: [`zip`] writes one (deflated entries, fixed timestamps, sorted
//! names, so two builds of the same binaries are byte for byte the same).

use crate::dist::{sha256_hex, BINARIES, VERSION};
use std::fs;
use std::path::{Path, PathBuf};

/// The distribution's name on PyPI, and as a wheel file name and import name spell it.
pub const DISTRIBUTION: &str = "dsh-conformance";
const WHEEL_NAME: &str = "dsh_conformance";

/// The Python version of the workspace's version (PEP 440): `0.1.0`, `0.2.0-rc.1` -> `0.2.0rc1`.
pub fn python_version(version: &str) -> Result<String, String> {
    let (release, pre) = match version.split_once('-') {
        None => (version, None),
        Some((release, pre)) => (release, Some(pre)),
    };
    let numeric = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    if !release.split('.').all(numeric) {
        return Err(format!(
            "version {version}: not a release number a wheel can carry"
        ));
    }
    let Some(pre) = pre else {
        return Ok(release.to_string());
    };
    let (kind, number) = pre.split_once('.').unwrap_or((pre, "0"));
    let tag = match kind {
        "alpha" | "a" => "a",
        "beta" | "b" => "b",
        "rc" => "rc",
        _ => {
            return Err(format!(
                "version {version}: pre-release {pre:?} is not alpha, beta or rc"
            ))
        }
    };
    if !numeric(number) {
        return Err(format!("version {version}: pre-release number {number:?}"));
    }
    Ok(format!("{release}{tag}{number}"))
}

/// The wheel's platform tag for the kit's platform name, given the binaries (a Linux tag names
/// the newest glibc symbol version they need, so pip installs it only where they run).
pub fn platform_tag(platform: &str, binaries: &[Vec<u8>]) -> Result<String, String> {
    let linux = |arch: &str| -> Result<String, String> {
        let glibc = binaries
            .iter()
            .filter_map(|bytes| newest_glibc(bytes))
            .max()
            // A static binary needs no glibc: the oldest manylinux.
            .unwrap_or((2, 17))
            .max((2, 17));
        Ok(format!("manylinux_{}_{}_{arch}", glibc.0, glibc.1))
    };
    match platform {
        "linux-x64" => linux("x86_64"),
        "linux-arm64" => linux("aarch64"),
        // Rust's default deployment targets: macOS 10.12 on x86_64, 11.0 on arm64.
        "darwin-x64" => Ok("macosx_10_12_x86_64".into()),
        "darwin-arm64" => Ok("macosx_11_0_arm64".into()),
        other => Err(format!("no wheel platform tag for {other}")),
    }
}

/// The newest `GLIBC_2.N` symbol version named in an ELF binary's bytes.
fn newest_glibc(bytes: &[u8]) -> Option<(u32, u32)> {
    const NEEDLE: &[u8] = b"GLIBC_2.";
    let mut newest = None;
    let mut at = 0;
    while let Some(found) = memchr_find(&bytes[at..], NEEDLE) {
        let start = at + found + NEEDLE.len();
        let digits = bytes[start..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let minor = std::str::from_utf8(&bytes[start..start + digits])
            .ok()
            .and_then(|text| text.parse().ok());
        if let Some(minor) = minor {
            newest = newest.max(Some((2, minor)));
        }
        at = start;
    }
    newest
}

fn memchr_find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// One file of the wheel: its path inside the archive, its bytes, whether it is executable.
struct Entry {
    path: String,
    bytes: Vec<u8>,
    executable: bool,
}

/// Writes `dsh_conformance-<version>-py3-none-<tag>.whl` into `dest` from the stripped binaries
/// in `bins`; returns its path.
pub fn write(bins: &Path, dest: &Path, platform: &str) -> Result<PathBuf, String> {
    let version = python_version(VERSION)?;
    let mut binaries = Vec::new();
    for name in BINARIES {
        let path = bins.join(name);
        let bytes = fs::read(&path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        binaries.push((name, bytes));
    }
    let tag = platform_tag(
        platform,
        &binaries.iter().map(|(_, b)| b.clone()).collect::<Vec<_>>(),
    )?;
    let mut entries = module_entries()?;
    let data = format!("{WHEEL_NAME}-{version}.data/scripts");
    for (name, bytes) in binaries {
        entries.push(Entry {
            path: format!("{data}/{name}"),
            bytes,
            executable: true,
        });
    }
    entries.extend(dist_info(&version, &tag, &entries)?);
    fs::create_dir_all(dest).map_err(|e| format!("{}: cannot create: {e}", dest.display()))?;
    let wheel = dest.join(format!("{WHEEL_NAME}-{version}-py3-none-{tag}.whl"));
    let files: Vec<zip::File> = entries
        .iter()
        .map(|entry| zip::File {
            path: &entry.path,
            bytes: &entry.bytes,
            executable: entry.executable,
        })
        .collect();
    let archive = zip::archive(&files).map_err(|e| format!("cannot deflate the wheel: {e}"))?;
    fs::write(&wheel, archive).map_err(|e| format!("{}: cannot write: {e}", wheel.display()))?;
    Ok(wheel)
}

/// The module's files from `python/dsh_conformance/` (`*.py`, sorted).
fn module_entries() -> Result<Vec<Entry>, String> {
    let source = crate::workspace_root().join("python").join(WHEEL_NAME);
    let listed =
        fs::read_dir(&source).map_err(|e| format!("{}: cannot list: {e}", source.display()))?;
    let mut names: Vec<String> = listed
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".py"))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let path = source.join(&name);
            let bytes =
                fs::read(&path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
            Ok(Entry {
                path: format!("{WHEEL_NAME}/{name}"),
                bytes,
                executable: false,
            })
        })
        .collect()
}

/// The `.dist-info` files, RECORD last (it lists every other file with its hash and size).
fn dist_info(version: &str, tag: &str, files: &[Entry]) -> Result<Vec<Entry>, String> {
    let info = format!("{WHEEL_NAME}-{version}.dist-info");
    let readme_path = crate::workspace_root().join("python/README.md");
    let readme = fs::read_to_string(&readme_path)
        .map_err(|e| format!("{}: cannot read: {e}", readme_path.display()))?;
    let metadata = format!(
        "Metadata-Version: 2.1\nName: {DISTRIBUTION}\nVersion: {version}\n\
         Summary: Keyless fake DeepSeek Harness runtime (fake-dsh), its conformance kit, and a pytest plugin\n\
         License: MIT OR Apache-2.0\nRequires-Python: >=3.9\n\
         Classifier: Framework :: Pytest\nClassifier: Topic :: Software Development :: Testing\n\
         Description-Content-Type: text/markdown\n\n{readme}"
    );
    let wheel = format!(
        "Wheel-Version: 1.0\nGenerator: dsh-conformance xtask dist\nRoot-Is-Purelib: false\nTag: py3-none-{tag}\n"
    );
    let entry_points = format!("[pytest11]\n{WHEEL_NAME} = {WHEEL_NAME}.pytest_plugin\n");
    let mut entries: Vec<Entry> = [
        ("METADATA", metadata),
        ("WHEEL", wheel),
        ("entry_points.txt", entry_points),
    ]
    .into_iter()
    .map(|(name, text)| Entry {
        path: format!("{info}/{name}"),
        bytes: text.into_bytes(),
        executable: false,
    })
    .collect();
    let record_path = format!("{info}/RECORD");
    let mut record = String::new();
    for entry in files.iter().chain(entries.iter()) {
        record.push_str(&format!(
            "{},sha256={},{}\n",
            entry.path,
            record_hash(&entry.bytes),
            entry.bytes.len()
        ));
    }
    record.push_str(&format!("{record_path},,\n"));
    entries.push(Entry {
        path: record_path,
        bytes: record.into_bytes(),
        executable: false,
    });
    Ok(entries)
}

/// RECORD's hash: the sha256 digest in URL-safe base64 without padding (PEP 376, 427).
fn record_hash(bytes: &[u8]) -> String {
    let hex = sha256_hex(bytes);
    let digest: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect();
    base64_url_nopad(&digest)
}

fn base64_url_nopad(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// A zip archive as wheels use it: deflated entries, Unix modes, no zip64 (every file and the
/// whole archive under 4 GiB), a fixed 1980-01-01 timestamp.
pub mod zip {
    use flate2::write::DeflateEncoder;
    use flate2::{Compression, Crc};
    use std::io::Write;

    /// One file to store.
    pub struct File<'a> {
        pub path: &'a str,
        pub bytes: &'a [u8],
        pub executable: bool,
    }

    /// DOS date 1980-01-01 (time 00:00:00 is 0).
    const DOS_DATE: u16 = (1 << 5) | 1;

    /// The archive's bytes.
    pub fn archive(files: &[File]) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut central = Vec::new();
        for file in files {
            let offset = u32_of(out.len())?;
            let mut crc = Crc::new();
            crc.update(file.bytes);
            let mut encoder = DeflateEncoder::new(Vec::new(), Compression::default());
            encoder.write_all(file.bytes)?;
            let deflated = encoder.finish()?;
            let name = file.path.as_bytes();
            let fields = Fields {
                crc: crc.sum(),
                compressed: u32_of(deflated.len())?,
                size: u32_of(file.bytes.len())?,
                name_len: u16::try_from(name.len()).map_err(too_big)?,
            };
            out.extend(0x0403_4b50u32.to_le_bytes());
            out.extend(20u16.to_le_bytes()); // version needed: 2.0 (deflate)
            fields.write(&mut out);
            out.extend(0u16.to_le_bytes()); // extra field length
            out.extend(name);
            out.extend(&deflated);

            let mode: u32 = if file.executable { 0o100755 } else { 0o100644 };
            central.extend(0x0201_4b50u32.to_le_bytes());
            central.extend(((3u16 << 8) | 20).to_le_bytes()); // made by: Unix, 2.0
            central.extend(20u16.to_le_bytes());
            fields.write(&mut central);
            central.extend([0u8; 8]); // extra, comment, disk number, internal attributes
            central.extend((mode << 16).to_le_bytes());
            central.extend(offset.to_le_bytes());
            central.extend(name);
        }
        let count = u16::try_from(files.len()).map_err(too_big)?;
        let central_offset = u32_of(out.len())?;
        let central_size = u32_of(central.len())?;
        out.extend(central);
        out.extend(0x0605_4b50u32.to_le_bytes());
        out.extend([0u8; 4]); // this disk, the central directory's disk
        out.extend(count.to_le_bytes());
        out.extend(count.to_le_bytes());
        out.extend(central_size.to_le_bytes());
        out.extend(central_offset.to_le_bytes());
        out.extend(0u16.to_le_bytes()); // comment length
        Ok(out)
    }

    /// The fields a local header and a central directory entry share, from `flags` to the
    /// name's length.
    struct Fields {
        crc: u32,
        compressed: u32,
        size: u32,
        name_len: u16,
    }

    impl Fields {
        fn write(&self, out: &mut Vec<u8>) {
            out.extend(0u16.to_le_bytes()); // flags
            out.extend(8u16.to_le_bytes()); // method: deflate
            out.extend(0u16.to_le_bytes()); // time
            out.extend(DOS_DATE.to_le_bytes());
            out.extend(self.crc.to_le_bytes());
            out.extend(self.compressed.to_le_bytes());
            out.extend(self.size.to_le_bytes());
            out.extend(self.name_len.to_le_bytes());
        }
    }

    fn too_big<E>(_: E) -> std::io::Error {
        std::io::Error::other("too large for a zip without zip64")
    }

    fn u32_of(n: usize) -> std::io::Result<u32> {
        u32::try_from(n).map_err(too_big)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_become_pep_440() {
        assert_eq!(python_version("0.1.0").unwrap(), "0.1.0");
        assert_eq!(python_version("0.2.0-rc.1").unwrap(), "0.2.0rc1");
        assert_eq!(python_version("1.0.0-beta.2").unwrap(), "1.0.0b2");
        assert_eq!(python_version("1.0.0-alpha").unwrap(), "1.0.0a0");
        let error = python_version("1.0.0-nightly.3").unwrap_err();
        assert!(error.contains("nightly"), "{error}");
        assert!(python_version("1.x.0").is_err());
    }

    #[test]
    fn every_platform_has_a_tag_and_linux_names_the_newest_glibc_needed() {
        let old = b"\0GLIBC_2.2.5\0GLIBC_2.14\0".to_vec();
        let new = b"\0GLIBC_2.34\0GLIBC_2.3.4\0".to_vec();
        assert_eq!(
            platform_tag("linux-x64", &[old.clone(), new.clone()]).unwrap(),
            "manylinux_2_34_x86_64"
        );
        assert_eq!(
            platform_tag("linux-arm64", &[old]).unwrap(),
            "manylinux_2_17_aarch64"
        );
        assert_eq!(
            platform_tag("linux-x64", &[b"static".to_vec()]).unwrap(),
            "manylinux_2_17_x86_64"
        );
        assert_eq!(
            platform_tag("darwin-x64", std::slice::from_ref(&new)).unwrap(),
            "macosx_10_12_x86_64"
        );
        assert_eq!(
            platform_tag("darwin-arm64", &[new]).unwrap(),
            "macosx_11_0_arm64"
        );
        for platform in crate::dist::PLATFORMS {
            assert!(platform_tag(platform, &[]).is_ok(), "{platform}");
        }
        assert!(platform_tag("win32-x64", &[]).is_err());
    }

    #[test]
    fn record_hashes_are_url_safe_base64_without_padding() {
        // sha256("") = e3b0c442..., as pip writes it in a RECORD.
        assert_eq!(
            record_hash(b""),
            "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"
        );
        assert_eq!(base64_url_nopad(b"\xfb\xff"), "-_8");
    }
}
