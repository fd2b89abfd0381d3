//! Setup (spec 4): install the pinned profile bundle only after its SHA-256 matches the
//! manifest, through `dsh plugin --profile open-design add <tarball>`, then probe again.

use crate::codes::{self, Diagnostic};
use crate::discovery::{self, DiscoveryBounds, ProbeInfo, PROFILE};
use crate::redact::Redactor;
use crate::short_command::{self, Finished};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;
use std::time::Duration;

/// The package the bundle must be.
pub const BUNDLE_PACKAGE: &str = "@open-design/dsh-runtime";
/// A manifest larger than this is not a manifest.
const MAX_MANIFEST_BYTES: u64 = 64 * 1024;

/// The pin that ships next to the tarball.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Manifest {
    pub package: String,
    pub version: String,
    pub sha256: String,
    pub file: String,
}

/// Read and check a manifest file.
pub fn read_manifest(path: &Path) -> Result<Manifest, Diagnostic> {
    let unusable = |why: String| {
        Diagnostic::new(
            codes::BUNDLE_MISSING,
            format!(
                "the bundle manifest {} is unusable ({why}); reinstall OpenDesign",
                path.display()
            ),
        )
    };
    let file = std::fs::File::open(path).map_err(|error| unusable(error.to_string()))?;
    let mut bytes = Vec::new();
    file.take(MAX_MANIFEST_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| unusable(error.to_string()))?;
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(unusable(format!("larger than {MAX_MANIFEST_BYTES} bytes")));
    }
    let manifest: Manifest =
        serde_json::from_slice(&bytes).map_err(|error| unusable(error.to_string()))?;
    if manifest.package != BUNDLE_PACKAGE {
        return Err(unusable(format!(
            "package {:?} is not {BUNDLE_PACKAGE}",
            manifest.package
        )));
    }
    if manifest.sha256.len() != 64 || !manifest.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(unusable("sha256 is not 64 hex digits".to_string()));
    }
    Ok(manifest)
}

/// The lowercase hex SHA-256 of a file, streamed.
pub fn sha256_of(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        hasher.update(&chunk[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect())
}

/// Check the tarball against the manifest without touching dsh.
pub fn verify_bundle(tarball: &Path, manifest: &Manifest) -> Result<(), Diagnostic> {
    let name = tarball
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name != manifest.file {
        return Err(Diagnostic::new(
            codes::BUNDLE_MISSING,
            format!(
                "the manifest pins {:?}, but the bundle offered is {name:?}; reinstall OpenDesign",
                manifest.file
            ),
        ));
    }
    let actual = sha256_of(tarball).map_err(|error| {
        Diagnostic::new(
            codes::BUNDLE_MISSING,
            format!(
                "the bundle {} cannot be read ({error}); reinstall OpenDesign",
                tarball.display()
            ),
        )
    })?;
    if !actual.eq_ignore_ascii_case(&manifest.sha256) {
        return Err(Diagnostic::new(
            codes::BUNDLE_HASH_MISMATCH,
            format!(
                "the bundle {} has SHA-256 {actual}, but its manifest pins {}: it was not installed; \
                 reinstall OpenDesign to get an intact bundle",
                tarball.display(),
                manifest.sha256.to_ascii_lowercase()
            ),
        ));
    }
    Ok(())
}

/// Time bounds of setup's commands.
#[derive(Debug, Clone, Copy)]
pub struct SetupBounds {
    pub install: Duration,
    pub discovery: DiscoveryBounds,
}

impl Default for SetupBounds {
    fn default() -> Self {
        Self {
            install: Duration::from_secs(120),
            discovery: DiscoveryBounds::default(),
        }
    }
}

/// Verify, install, probe.
pub async fn install_bundle(
    executable: &Path,
    tarball: &Path,
    manifest_path: &Path,
    bounds: SetupBounds,
    redactor: &Redactor,
) -> Result<ProbeInfo, Diagnostic> {
    let manifest = read_manifest(manifest_path)?;
    verify_bundle(tarball, &manifest)?;
    install_verified(executable, tarball, bounds, redactor).await
}

/// Install a bundle whose hash was verified (`dsh plugin --profile open-design add`), then probe.
pub async fn install_verified(
    executable: &Path,
    tarball: &Path,
    bounds: SetupBounds,
    redactor: &Redactor,
) -> Result<ProbeInfo, Diagnostic> {
    let args = [
        "plugin".as_ref(),
        "--profile".as_ref(),
        PROFILE.as_ref(),
        "add".as_ref(),
        tarball.as_os_str(),
    ];
    let failed = |why: String| {
        Diagnostic::new(
            codes::INSTALL_FAILED,
            format!("`dsh plugin --profile {PROFILE} add` {why}; check the DeepSeek Harness installation and retry setup"),
        )
    };
    match short_command::run(executable, args, bounds.install).await {
        Finished::SpawnFailed(error) => {
            return Err(failed(format!("could not be started ({error})")))
        }
        Finished::TimedOut { .. } => {
            return Err(failed(format!(
                "did not finish within {:?}",
                bounds.install
            )))
        }
        Finished::Exited { code, stderr, .. } if code != Some(0) => {
            let stderr = redactor.redact(&String::from_utf8_lossy(&stderr));
            let excerpt: String = stderr.trim().chars().take(300).collect();
            return Err(failed(format!(
                "failed (exit {}){}",
                code.map_or_else(|| "by signal".to_string(), |c| c.to_string()),
                if excerpt.is_empty() {
                    String::new()
                } else {
                    format!(": {excerpt}")
                }
            )));
        }
        Finished::Exited { .. } => {}
    }
    discovery::probe(executable, bounds.discovery.probe, redactor).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_mismatch_and_name_mismatch() {
        let temp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let tarball = temp.path().join("bundle.tgz");
        std::fs::write(&tarball, b"bundle bytes").unwrap_or_else(|e| panic!("write: {e}"));
        let good = sha256_of(&tarball).unwrap_or_default();
        let manifest = |sha256: &str, file: &str| Manifest {
            package: BUNDLE_PACKAGE.into(),
            version: "0.1.0".into(),
            sha256: sha256.into(),
            file: file.into(),
        };
        assert_eq!(
            verify_bundle(&tarball, &manifest(&good, "bundle.tgz")),
            Ok(())
        );
        assert_eq!(
            verify_bundle(&tarball, &manifest(&good.to_uppercase(), "bundle.tgz")),
            Ok(())
        );
        let wrong = "0".repeat(64);
        assert_eq!(
            verify_bundle(&tarball, &manifest(&wrong, "bundle.tgz")).map_err(|d| d.code),
            Err(codes::BUNDLE_HASH_MISMATCH)
        );
        assert_eq!(
            verify_bundle(&tarball, &manifest(&good, "other.tgz")).map_err(|d| d.code),
            Err(codes::BUNDLE_MISSING)
        );
        let missing = temp.path().join("gone.tgz");
        assert_eq!(
            verify_bundle(&missing, &manifest(&good, "gone.tgz")).map_err(|d| d.code),
            Err(codes::BUNDLE_MISSING)
        );
    }

    #[test]
    fn manifest_validation() {
        let temp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let path = temp.path().join("manifest.json");
        std::fs::write(&path, b"{\"package\":\"@open-design/dsh-runtime\",\"version\":\"0.1.0\",\"sha256\":\"xyz\",\"file\":\"b.tgz\"}")
            .unwrap_or_else(|e| panic!("write: {e}"));
        assert_eq!(
            read_manifest(&path).map_err(|d| d.code),
            Err(codes::BUNDLE_MISSING)
        );
        assert_eq!(
            read_manifest(&temp.path().join("none.json")).map_err(|d| d.code),
            Err(codes::BUNDLE_MISSING)
        );
    }
}
