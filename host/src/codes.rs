//! The host-side `DSH_PROFILE_*` code vocabulary of docs/host-driver.md (stream violations come
//! from `dsh_protocol::ViolationCode::as_str`).

pub const BINARY_NOT_FOUND: &str = "DSH_PROFILE_BINARY_NOT_FOUND";
pub const VERSION_FAILED: &str = "DSH_PROFILE_VERSION_FAILED";
pub const VERSION_UNPARSEABLE: &str = "DSH_PROFILE_VERSION_UNPARSEABLE";
pub const UNTESTED_VERSION: &str = "DSH_PROFILE_UNTESTED_VERSION";
pub const PROBE_FAILED: &str = "DSH_PROFILE_PROBE_FAILED";
pub const PROBE_INVALID: &str = "DSH_PROFILE_PROBE_INVALID";
pub const RUNTIME_MISMATCH: &str = "DSH_PROFILE_RUNTIME_MISMATCH";
pub const PROTOCOL_UNSUPPORTED: &str = "DSH_PROFILE_PROTOCOL_UNSUPPORTED";
pub const CAPABILITY_MISSING: &str = "DSH_PROFILE_CAPABILITY_MISSING";
pub const BUNDLE_HASH_MISMATCH: &str = "DSH_PROFILE_BUNDLE_HASH_MISMATCH";
pub const BUNDLE_MISSING: &str = "DSH_PROFILE_BUNDLE_MISSING";
pub const INSTALL_FAILED: &str = "DSH_PROFILE_INSTALL_FAILED";
pub const MODELS_FAILED: &str = "DSH_PROFILE_MODELS_FAILED";
pub const MODELS_INVALID: &str = "DSH_PROFILE_MODELS_INVALID";
pub const MODELS_EMPTY: &str = "DSH_PROFILE_MODELS_EMPTY";
pub const INVALID_ROUTE: &str = "DSH_PROFILE_INVALID_ROUTE";

pub const RESUME_REJECTED: &str = "DSH_PROFILE_RESUME_REJECTED";
pub const RUN_FAILED: &str = "DSH_PROFILE_RUN_FAILED";
pub const SPAWN_FAILED: &str = "DSH_PROFILE_SPAWN_FAILED";
pub const READY_TIMEOUT: &str = "DSH_PROFILE_READY_TIMEOUT";
pub const RUN_TIMEOUT: &str = "DSH_PROFILE_RUN_TIMEOUT";

/// A coded, actionable failure: `code` from the vocabulary above, `message` one sentence a user
/// can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub code: &'static str,
    pub message: String,
}

impl Diagnostic {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}
