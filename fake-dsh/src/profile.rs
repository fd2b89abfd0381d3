//! The installable profiles fake-dsh plays, as one table: `open-design` (the gen-1 contract,
//! `specs/current/deepseek-harness-profile-adapter.md` in the open-design repository) and
//! `multica` (the profile Multica's Go daemon drives, `server/pkg/agent/dsh.go` in
//! multica-ai/multica). Both share one code path; a [`Profile`] is threaded through the CLI, the
//! one-shot surfaces and the `--stdio` context, and everything that differs between them is a
//! member of its [`Identity`] (docs/dialects.md says what the multica row does and where each
//! fact comes from).

use std::path::PathBuf;

/// An installable profile fake-dsh knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Profile {
    OpenDesign,
    Multica,
}

/// What a profile looks like from a host: names, identity frames, surfaces and extras.
#[derive(Debug, PartialEq, Eq)]
pub struct Identity {
    /// The profile name on the command line (`--profile NAME`) and under `profiles/` in the home.
    pub name: &'static str,
    /// `runtime` of its probe, ready and models frames.
    pub runtime_id: &'static str,
    /// The package name `plugin add` records for its bundle.
    pub bundle_package: &'static str,
    /// The flag that prints its model catalog.
    pub models_flag: &'static str,
    /// `compatibility_generation` of its probe and ready frames, when it reports one.
    pub compatibility_generation: Option<&'static str>,
    /// The variable that moves only session persistence out of the Harness home, when it has one.
    pub session_root_env: Option<&'static str>,
    /// Whether the default agent writes `progress` frames and a completed result's `acceptance`.
    pub progress_and_acceptance: bool,
}

const OPEN_DESIGN: Identity = Identity {
    name: "open-design",
    runtime_id: "open-design",
    bundle_package: "@open-design/dsh-runtime",
    models_flag: "--models",
    compatibility_generation: Some("od-profile-1"),
    session_root_env: None,
    progress_and_acceptance: false,
};

/// Multica's facts: `dshProfile` and the probe's `runtime == "dsh"` (dsh.go, agents_probe.go),
/// `--list-models` (dsh.go discoverDshModels), `MULTICA_DSH_SESSION_ROOT` (daemon.go
/// prepareDshTaskSessionRoot), `progress` and `acceptance` (dsh.go at PR #7169). The bundle is
/// Multica's external `dsh-multica-runtime` (named in the gen-1 spec, section 15).
const MULTICA: Identity = Identity {
    name: "multica",
    runtime_id: "dsh",
    bundle_package: "dsh-multica-runtime",
    models_flag: "--list-models",
    compatibility_generation: None,
    session_root_env: Some("MULTICA_DSH_SESSION_ROOT"),
    progress_and_acceptance: true,
};

impl Profile {
    /// Every profile, in the order help texts list them.
    pub const ALL: [Profile; 2] = [Profile::OpenDesign, Profile::Multica];

    /// The profile of this name, if fake-dsh knows it.
    pub fn from_name(name: &str) -> Option<Profile> {
        Profile::ALL
            .into_iter()
            .find(|profile| profile.identity().name == name)
    }

    /// Its row of the table.
    pub fn identity(self) -> &'static Identity {
        match self {
            Profile::OpenDesign => &OPEN_DESIGN,
            Profile::Multica => &MULTICA,
        }
    }

    /// Its name (`--profile NAME`).
    pub fn name(self) -> &'static str {
        self.identity().name
    }

    /// Replaces the profile's placeholders in a scripted string: `{{runtime_id}}` and
    /// `{{profile}}`, so one raw fixture plays on every profile.
    pub fn fill(self, text: &str) -> String {
        if !text.contains("{{") {
            return text.to_string();
        }
        let identity = self.identity();
        text.replace("{{runtime_id}}", identity.runtime_id)
            .replace("{{profile}}", identity.name)
    }

    /// Where session records live when the profile's session-root variable moves them: the
    /// variable's value (an absolute path); `Ok(None)` when the profile has no such variable or
    /// it is unset or empty; an error naming it when it is relative.
    pub fn session_root(self) -> Result<Option<PathBuf>, String> {
        let Some(variable) = self.identity().session_root_env else {
            return Ok(None);
        };
        let Some(value) = std::env::var_os(variable).filter(|value| !value.is_empty()) else {
            return Ok(None);
        };
        let root = PathBuf::from(value);
        if !root.is_absolute() {
            return Err(format!(
                "error: {variable} must be an absolute path, not {}",
                root.display()
            ));
        }
        Ok(Some(root))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_is_found_by_its_name_and_no_other() {
        for profile in Profile::ALL {
            assert_eq!(Profile::from_name(profile.name()), Some(profile));
        }
        assert_eq!(Profile::from_name("dsh"), None);
        assert_eq!(Profile::from_name("web"), None);
        assert_eq!(Profile::from_name(""), None);
    }

    #[test]
    fn placeholders_take_each_profiles_identity() {
        let line = r#"{"runtime":"{{runtime_id}}","p":"{{profile}}","r":"{{request_id}}"}"#;
        assert_eq!(
            Profile::Multica.fill(line),
            r#"{"runtime":"dsh","p":"multica","r":"{{request_id}}"}"#
        );
        assert_eq!(
            Profile::OpenDesign.fill(line),
            r#"{"runtime":"open-design","p":"open-design","r":"{{request_id}}"}"#
        );
        assert_eq!(Profile::Multica.fill("no placeholder"), "no placeholder");
    }
}
