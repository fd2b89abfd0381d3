//! Discovery (spec 5): find the user's `dsh`, read its version identity, and pass the profile
//! probe gate. Every child is spawned with a time bound and reaped.

use crate::codes::{self, Diagnostic};
use crate::redact::Redactor;
use crate::short_command::{self, Finished};
use serde_json::Value;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The versions the reference host was tested with.
pub const TESTED_VERSIONS: &[&str] = &["0.1.7-rc.1", "0.1.7"];

/// The profile the host composes with the user's Harness.
pub const PROFILE: &str = "open-design";

/// A semantic version as `dsh --version` prints it (optionally with a leading `v`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    /// Dot-separated pre-release identifiers, empty when none.
    pub pre: String,
    /// Build metadata, empty when none (ignored by comparisons, as semver says).
    pub build: String,
}

impl Version {
    /// Parse `MAJOR.MINOR.PATCH[-pre][+build]`, with an optional leading `v`.
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.strip_prefix('v').unwrap_or(text);
        let (rest, build) = match text.split_once('+') {
            Some((rest, build)) => (rest, Some(build)),
            None => (text, None),
        };
        let (core, pre) = match rest.split_once('-') {
            Some((core, pre)) => (core, Some(pre)),
            None => (rest, None),
        };
        let mut numbers = core.split('.').map(numeric_identifier);
        let (Some(Some(major)), Some(Some(minor)), Some(Some(patch)), None) = (
            numbers.next(),
            numbers.next(),
            numbers.next(),
            numbers.next(),
        ) else {
            return None;
        };
        let pre_ok = pre.is_none_or(|pre| {
            pre.split('.').all(|part| {
                is_alphanumeric_identifier(part)
                    && (!part.bytes().all(|b| b.is_ascii_digit())
                        || numeric_identifier(part).is_some())
            })
        });
        let build_ok = build.is_none_or(|build| build.split('.').all(is_alphanumeric_identifier));
        (pre_ok && build_ok).then(|| Self {
            major,
            minor,
            patch,
            pre: pre.unwrap_or_default().to_string(),
            build: build.unwrap_or_default().to_string(),
        })
    }

    /// The compatibility family: `major.minor`.
    pub fn family(&self) -> String {
        format!("{}.{}", self.major, self.minor)
    }

    /// Whether this is one of [`TESTED_VERSIONS`] (build metadata ignored).
    pub fn is_tested(&self) -> bool {
        TESTED_VERSIONS
            .iter()
            .filter_map(|tested| Version::parse(tested))
            .any(|tested| tested.same_precedence(self))
    }

    fn same_precedence(&self, other: &Self) -> bool {
        (self.major, self.minor, self.patch, &self.pre)
            == (other.major, other.minor, other.patch, &other.pre)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        if !self.pre.is_empty() {
            write!(f, "-{}", self.pre)?;
        }
        if !self.build.is_empty() {
            write!(f, "+{}", self.build)?;
        }
        Ok(())
    }
}

fn numeric_identifier(part: &str) -> Option<u64> {
    let digits_only = !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    let no_leading_zero = part == "0" || !part.starts_with('0');
    (digits_only && no_leading_zero)
        .then(|| part.parse().ok())
        .flatten()
}

fn is_alphanumeric_identifier(part: &str) -> bool {
    !part.is_empty() && part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// Where the executable came from, and what was ignored on the way (for the host's own log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub path: PathBuf,
    pub notes: Vec<String>,
}

/// Resolve the `dsh` to launch: `DSH_BIN` when it is an absolute path to an executable file,
/// otherwise the first executable `dsh` on `PATH`.
pub fn resolve_executable(
    dsh_bin: Option<&OsStr>,
    path_var: Option<&OsStr>,
) -> Result<Resolved, Diagnostic> {
    let mut notes = Vec::new();
    if let Some(dsh_bin) = dsh_bin.filter(|value| !value.is_empty()) {
        let candidate = Path::new(dsh_bin);
        if !candidate.is_absolute() {
            notes.push(format!(
                "DSH_BIN={} ignored: it must be an absolute path",
                candidate.display()
            ));
        } else if !is_executable_file(candidate) {
            notes.push(format!(
                "DSH_BIN={} ignored: it is not an executable file",
                candidate.display()
            ));
        } else {
            return Ok(Resolved {
                path: candidate.to_path_buf(),
                notes,
            });
        }
    }
    let found = path_var
        .map(std::env::split_paths)
        .into_iter()
        .flatten()
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(format!("dsh{}", std::env::consts::EXE_SUFFIX)))
        .find(|candidate| is_executable_file(candidate));
    match found {
        Some(path) => Ok(Resolved { path, notes }),
        None => Err(Diagnostic::new(
            codes::BINARY_NOT_FOUND,
            "DeepSeek Harness (dsh) was not found: install the official @deepseek-ai/dsh package, \
             or set DSH_BIN to the absolute path of its executable",
        )),
    }
}

fn is_executable_file(path: &Path) -> bool {
    let Ok(metadata) = std::fs::metadata(path) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        metadata.is_file() && metadata.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        metadata.is_file()
    }
}

/// Time bounds of the discovery commands.
#[derive(Debug, Clone, Copy)]
pub struct DiscoveryBounds {
    pub version: Duration,
    pub probe: Duration,
    /// `dsh --profile open-design --models` (spec 12).
    pub models: Duration,
}

impl Default for DiscoveryBounds {
    fn default() -> Self {
        Self {
            version: Duration::from_secs(5),
            probe: Duration::from_secs(10),
            models: Duration::from_secs(5),
        }
    }
}

/// Run `dsh --version` and parse the first stdout line.
pub async fn read_version(executable: &Path, bound: Duration) -> Result<Version, Diagnostic> {
    let shown = executable.display();
    match short_command::run(executable, ["--version"], bound).await {
        Finished::SpawnFailed(error) => Err(Diagnostic::new(
            codes::VERSION_FAILED,
            format!(
                "`{shown} --version` could not be started ({error}); reinstall DeepSeek Harness"
            ),
        )),
        Finished::TimedOut { .. } => Err(Diagnostic::new(
            codes::VERSION_FAILED,
            format!(
                "`{shown} --version` did not finish within {bound:?}; check the dsh installation"
            ),
        )),
        Finished::Exited { code, .. } if code != Some(0) => Err(Diagnostic::new(
            codes::VERSION_FAILED,
            format!(
                "`{shown} --version` failed (exit {}); reinstall or repair DeepSeek Harness",
                describe_exit(code)
            ),
        )),
        Finished::Exited { stdout, .. } => {
            let text = String::from_utf8_lossy(&stdout);
            let first_line = text.lines().next().unwrap_or("").trim();
            if first_line.is_empty() {
                return Err(Diagnostic::new(
                    codes::VERSION_FAILED,
                    format!("`{shown} --version` printed no version; reinstall or repair DeepSeek Harness"),
                ));
            }
            Version::parse(first_line).ok_or_else(|| {
                Diagnostic::new(
                    codes::VERSION_UNPARSEABLE,
                    format!(
                        "`{shown} --version` printed {:?}, which is not a semantic version; \
                         this is not a usable DeepSeek Harness executable",
                        truncate(first_line, 80)
                    ),
                )
            })
        }
    }
}

pub(crate) fn describe_exit(code: Option<i32>) -> String {
    code.map_or_else(|| "by signal".to_string(), |code| code.to_string())
}

pub(crate) fn truncate(text: &str, max_chars: usize) -> String {
    text.chars().take(max_chars).collect()
}

/// What the probe frame told about the installed profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeInfo {
    pub plugin_version: String,
    pub compatibility_generation: Option<String>,
}

/// The phase-one capabilities a profile must report `true`.
pub const REQUIRED_CAPABILITIES: &[&str] =
    &["session_resume", "session_cancel", "structured_events"];

/// Run `dsh --profile open-design --probe` and apply the hard compatibility gate.
pub async fn probe(
    executable: &Path,
    bound: Duration,
    redactor: &Redactor,
) -> Result<ProbeInfo, Diagnostic> {
    let shown = executable.display();
    let setup_hint = "install or repair the open-design profile (setup)";
    match short_command::run(executable, ["--profile", PROFILE, "--probe"], bound).await {
        Finished::SpawnFailed(error) => Err(Diagnostic::new(
            codes::PROBE_FAILED,
            format!("the profile probe could not be started ({error})"),
        )),
        Finished::TimedOut { .. } => Err(Diagnostic::new(
            codes::PROBE_FAILED,
            format!("`{shown} --profile {PROFILE} --probe` did not finish within {bound:?}; {setup_hint}"),
        )),
        Finished::Exited { code, stderr, .. } if code != Some(0) => {
            let stderr = redactor.redact(&String::from_utf8_lossy(&stderr));
            let detail = stderr.trim();
            let detail = if detail.is_empty() {
                String::new()
            } else {
                format!(" ({})", truncate(detail, 300))
            };
            Err(Diagnostic::new(
                codes::PROBE_FAILED,
                format!(
                    "the open-design profile probe failed (exit {}){detail}: the profile is missing \
                     or broken; {setup_hint}",
                    describe_exit(code)
                ),
            ))
        }
        Finished::Exited { stdout, .. } => check_probe_output(&stdout),
    }
}

/// The lines of a one-frame answer (`--probe`, `--models`) that hold anything but whitespace,
/// each without its line end.
pub(crate) fn non_empty_lines(stdout: &[u8]) -> Vec<&[u8]> {
    stdout
        .split(|&b| b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
        .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
        .collect()
}

/// The probe gate's identity checks: OpenDesign's runtime, this host's protocol version, and
/// every required capability.
fn check_probe_identity(object: &serde_json::Map<String, Value>) -> Result<(), Diagnostic> {
    match object.get("runtime") {
        Some(Value::String(runtime)) if runtime == dsh_protocol::RUNTIME_ID => {}
        other => {
            return Err(Diagnostic::new(
                codes::RUNTIME_MISMATCH,
                format!(
                    "the probe reports runtime {}, not \"{}\": the installed profile is not OpenDesign's; \
                     reinstall the open-design profile (setup)",
                    other.map_or_else(|| "nothing".to_string(), Value::to_string),
                    dsh_protocol::RUNTIME_ID
                ),
            ))
        }
    }
    if object.get("protocol_version").and_then(Value::as_u64)
        != Some(dsh_protocol::PROTOCOL_VERSION)
    {
        return Err(Diagnostic::new(
            codes::PROTOCOL_UNSUPPORTED,
            format!(
                "the profile speaks protocol_version {}, this host speaks {}: install the profile \
                 bundle that ships with this OpenDesign build (setup)",
                object
                    .get("protocol_version")
                    .map_or_else(|| "nothing".to_string(), Value::to_string),
                dsh_protocol::PROTOCOL_VERSION
            ),
        ));
    }
    let capabilities = object.get("capabilities").and_then(Value::as_object);
    let missing: Vec<&str> = REQUIRED_CAPABILITIES
        .iter()
        .copied()
        .filter(|name| capabilities.and_then(|caps| caps.get(*name)) != Some(&Value::Bool(true)))
        .collect();
    if !missing.is_empty() {
        return Err(Diagnostic::new(
            codes::CAPABILITY_MISSING,
            format!(
                "the open-design profile lacks required capabilities ({}): DeepSeek Harness cannot be \
                 used until the profile is upgraded; reinstall it (setup)",
                missing.join(", ")
            ),
        ));
    }
    Ok(())
}

/// Apply the probe gate to the probe's stdout.
pub fn check_probe_output(stdout: &[u8]) -> Result<ProbeInfo, Diagnostic> {
    let invalid = |why: String| {
        Diagnostic::new(
            codes::PROBE_INVALID,
            format!("the open-design profile probe {why}; reinstall the profile (setup)"),
        )
    };
    let lines = non_empty_lines(stdout);
    let [line] = lines.as_slice() else {
        return Err(invalid(format!(
            "printed {} non-empty lines instead of exactly one probe frame",
            lines.len()
        )));
    };
    let frame: Value = serde_json::from_slice(line)
        .map_err(|error| invalid(format!("printed a line that is not JSON ({error})")))?;
    let Some(object) = frame.as_object() else {
        return Err(invalid("printed JSON that is not an object".to_string()));
    };
    if object.get("type") != Some(&Value::from("probe")) || object.get("v") != Some(&Value::from(1))
    {
        return Err(invalid(
            "did not print a generation-1 probe frame (`\"v\":1,\"type\":\"probe\"`)".to_string(),
        ));
    }
    check_probe_identity(object)?;
    if let Err(errors) = dsh_protocol::schema::validate("frames/probe.schema.json", &frame) {
        let first = errors.first().map(ToString::to_string).unwrap_or_default();
        return Err(invalid(format!(
            "frame does not match the probe schema ({first})"
        )));
    }
    let Some(plugin_version) = object.get("plugin_version").and_then(Value::as_str) else {
        return Err(invalid("frame has no plugin_version".to_string()));
    };
    Ok(ProbeInfo {
        plugin_version: plugin_version.to_string(),
        compatibility_generation: object
            .get("compatibility_generation")
            .and_then(Value::as_str)
            .map(str::to_string),
    })
}

/// The environment discovery reads.
#[derive(Debug, Clone, Default)]
pub struct DiscoveryEnv {
    pub dsh_bin: Option<OsString>,
    pub path: Option<OsString>,
}

impl DiscoveryEnv {
    pub fn from_process() -> Self {
        Self {
            dsh_bin: std::env::var_os("DSH_BIN"),
            path: std::env::var_os("PATH"),
        }
    }
}

/// The verdict of a full discovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovery {
    pub executable: Option<PathBuf>,
    pub version: Option<Version>,
    pub probe: Option<ProbeInfo>,
    pub warnings: Vec<String>,
    /// `None` when available.
    pub unavailable: Option<Diagnostic>,
    /// Things the host ignored on the way (for its own diagnostics log, not the verdict).
    pub notes: Vec<String>,
}

impl Discovery {
    pub fn available(&self) -> bool {
        self.unavailable.is_none()
    }
}

/// The untested-version warning for `version`, if it is outside [`TESTED_VERSIONS`].
pub fn untested_warning(version: &Version) -> Option<String> {
    (!version.is_tested()).then(|| {
        format!(
            "{}: dsh {version} is outside the versions this host was tested with ({}); it may work, \
             but is unsupported",
            codes::UNTESTED_VERSION,
            TESTED_VERSIONS.join(", ")
        )
    })
}

/// Resolve, version, probe: the whole spec-5 gate.
pub async fn discover(
    env: &DiscoveryEnv,
    bounds: DiscoveryBounds,
    redactor: &Redactor,
) -> Discovery {
    let mut discovery = locate(env, bounds).await;
    if let (None, Some(executable)) = (&discovery.unavailable, &discovery.executable) {
        match probe(executable, bounds.probe, redactor).await {
            Ok(info) => discovery.probe = Some(info),
            Err(diagnostic) => discovery.unavailable = Some(diagnostic),
        }
    }
    discovery
}

/// The first two steps of spec 5: resolve the executable and read its version (no probe yet).
pub async fn locate(env: &DiscoveryEnv, bounds: DiscoveryBounds) -> Discovery {
    let mut discovery = Discovery {
        executable: None,
        version: None,
        probe: None,
        warnings: Vec::new(),
        unavailable: None,
        notes: Vec::new(),
    };
    let resolved = match resolve_executable(env.dsh_bin.as_deref(), env.path.as_deref()) {
        Ok(resolved) => resolved,
        Err(diagnostic) => {
            discovery.unavailable = Some(diagnostic);
            return discovery;
        }
    };
    discovery.notes = resolved.notes;
    discovery.executable = Some(resolved.path.clone());
    match read_version(&resolved.path, bounds.version).await {
        Ok(version) => {
            discovery.warnings.extend(untested_warning(&version));
            discovery.version = Some(version);
        }
        Err(diagnostic) => discovery.unavailable = Some(diagnostic),
    }
    discovery
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_strictly() {
        assert_eq!(
            Version::parse("0.1.7").map(|v| v.to_string()),
            Some("0.1.7".into())
        );
        assert_eq!(
            Version::parse("v0.1.7-rc.1").map(|v| v.to_string()),
            Some("0.1.7-rc.1".into())
        );
        assert_eq!(
            Version::parse("1.2.3+build.5").map(|v| v.family()),
            Some("1.2".into())
        );
        for bad in [
            "",
            "v",
            "0.1",
            "0.1.7.1",
            "01.1.7",
            "0.1.7-",
            "0.1.7-rc..1",
            "0.1.7-01",
            "dsh 0.1.7",
            "0.1.7 ",
        ] {
            assert_eq!(Version::parse(bad), None, "{bad:?} must not parse");
        }
    }

    #[test]
    fn tested_set_ignores_build_metadata() {
        assert!(Version::parse("0.1.7+abc").is_some_and(|v| v.is_tested()));
        assert!(Version::parse("v0.1.7-rc.1").is_some_and(|v| v.is_tested()));
        assert!(Version::parse("0.1.8").is_some_and(|v| !v.is_tested()));
        assert!(Version::parse("0.1.7-rc.2").is_some_and(|v| !v.is_tested()));
    }

    fn probe_line(patch: serde_json::Value) -> Vec<u8> {
        let mut frame = serde_json::json!({
            "v": 1, "type": "probe", "runtime": "open-design", "protocol_version": 1,
            "plugin_version": "0.1.0",
            "capabilities": {"session_resume": true, "session_cancel": true, "structured_events": true}
        });
        if let (Some(frame), Some(patch)) = (frame.as_object_mut(), patch.as_object()) {
            for (key, value) in patch {
                frame.insert(key.clone(), value.clone());
            }
        }
        let mut line = serde_json::to_vec(&frame).unwrap_or_default();
        line.push(b'\n');
        line
    }

    fn code_of(stdout: &[u8]) -> Option<&'static str> {
        check_probe_output(stdout)
            .err()
            .map(|diagnostic| diagnostic.code)
    }

    #[test]
    fn probe_gate_codes() {
        assert_eq!(code_of(&probe_line(serde_json::json!({}))), None);
        assert_eq!(code_of(b""), Some(codes::PROBE_INVALID));
        assert_eq!(code_of(b"not json\n"), Some(codes::PROBE_INVALID));
        let mut two = probe_line(serde_json::json!({}));
        two.extend(probe_line(serde_json::json!({})));
        assert_eq!(code_of(&two), Some(codes::PROBE_INVALID));
        assert_eq!(
            code_of(&probe_line(serde_json::json!({"runtime": "multica"}))),
            Some(codes::RUNTIME_MISMATCH)
        );
        assert_eq!(
            code_of(&probe_line(serde_json::json!({"protocol_version": 2}))),
            Some(codes::PROTOCOL_UNSUPPORTED)
        );
        let no_resume = serde_json::json!({"capabilities": {"session_cancel": true, "structured_events": true}});
        let diagnostic = check_probe_output(&probe_line(no_resume)).err();
        assert_eq!(
            diagnostic.as_ref().map(|d| d.code),
            Some(codes::CAPABILITY_MISSING)
        );
        assert!(diagnostic.is_some_and(|d| d.message.contains("session_resume")));
        let false_cancel = serde_json::json!({"capabilities": {"session_resume": true, "session_cancel": false, "structured_events": true}});
        assert_eq!(
            code_of(&probe_line(false_cancel)),
            Some(codes::CAPABILITY_MISSING)
        );
    }

    #[test]
    fn probe_reads_generation_and_accepts_crlf() {
        let mut line = probe_line(serde_json::json!({"compatibility_generation": "g7"}));
        line.pop();
        line.extend_from_slice(b"\r\n\n");
        let info = check_probe_output(&line);
        assert_eq!(
            info,
            Ok(ProbeInfo {
                plugin_version: "0.1.0".into(),
                compatibility_generation: Some("g7".into())
            })
        );
    }

    #[test]
    fn dsh_bin_must_be_absolute_and_executable() {
        let relative = resolve_executable(Some(OsStr::new("bin/dsh")), Some(OsStr::new("")));
        assert_eq!(relative.map_err(|d| d.code), Err(codes::BINARY_NOT_FOUND));
        let missing = resolve_executable(Some(OsStr::new("/nonexistent/dsh")), None);
        assert_eq!(missing.map_err(|d| d.code), Err(codes::BINARY_NOT_FOUND));
    }
}
