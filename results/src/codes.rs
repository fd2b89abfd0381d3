//! Error codes: the kit's vocabulary grouped in classes, and the vocabulary a host declares.
//!
//! The spec names no error codes. A case expects one of the kit's codes (docs/host-driver.md,
//! "Error code vocabulary"); each belongs to a [`CodeClass`]. A host that declares nothing is judged
//! on the status alone and the report says codes were not compared. A host that declares its
//! vocabulary in the handshake (`"codes": "kit"`, or a map from kit codes or class names to its own
//! codes, or `"passthrough"` for the runtime's own codes) has every code of a declared class
//! compared exactly: a mismatch is a failure, which is how a gate catches a host that fails for
//! the wrong reason.

use serde_json::Value;
use std::collections::BTreeMap;

/// A class of error codes: what went wrong, whatever a host calls it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CodeClass {
    /// The runtime broke the stream contract (spec 6 strictness rules).
    StreamViolation,
    /// The session frame or result names another session than the one asked for or announced,
    /// or claims a resume nobody asked for (spec 6). One code per situation, so a host's map can
    /// name each exactly.
    SessionMismatch,
    /// The runtime rejected a resume target (`resume_rejected: true`).
    ResumeRejected,
    /// A well-formed `result: failed`.
    RuntimeFailed,
    /// A `protocol_error` frame for the run.
    RuntimeProtocolError,
    /// No `ready`, or no result, within the host's bound.
    Timeout,
    /// The runtime could not be started.
    Spawn,
    /// Discovery found the adapter unavailable (spec 5).
    Discovery,
    /// Setup did not install the bundle (spec 4).
    Setup,
    /// A discovery warning (the untested version).
    Warning,
    /// The model catalog is unavailable, or a chosen route is not `provider/id` (spec 12).
    Models,
}

/// Every kit code, with its class.
const KIT_CODES: &[(&str, CodeClass)] = &[
    ("DSH_PROFILE_FRAME_TOO_LARGE", CodeClass::StreamViolation),
    ("DSH_PROFILE_MALFORMED_FRAME", CodeClass::StreamViolation),
    ("DSH_PROFILE_INVALID_FRAME", CodeClass::StreamViolation),
    ("DSH_PROFILE_TRUNCATED_FRAME", CodeClass::StreamViolation),
    ("DSH_PROFILE_MISSING_RESULT", CodeClass::StreamViolation),
    ("DSH_PROFILE_READY_NOT_FIRST", CodeClass::StreamViolation),
    ("DSH_PROFILE_DUPLICATE_READY", CodeClass::StreamViolation),
    ("DSH_PROFILE_DUPLICATE_SESSION", CodeClass::StreamViolation),
    ("DSH_PROFILE_DUPLICATE_RESULT", CodeClass::StreamViolation),
    (
        "DSH_PROFILE_CONTENT_BEFORE_SESSION",
        CodeClass::StreamViolation,
    ),
    (
        "DSH_PROFILE_UNSOLICITED_CANCELLED",
        CodeClass::StreamViolation,
    ),
    (
        "DSH_PROFILE_UNMATCHED_TOOL_RESULT",
        CodeClass::StreamViolation,
    ),
    ("DSH_PROFILE_INCOMPATIBLE_READY", CodeClass::StreamViolation),
    ("DSH_PROFILE_RESUME_MISMATCH", CodeClass::SessionMismatch),
    ("DSH_PROFILE_SESSION_MISMATCH", CodeClass::SessionMismatch),
    ("DSH_PROFILE_UNREQUESTED_RESUME", CodeClass::SessionMismatch),
    (
        "DSH_PROFILE_UNANNOUNCED_SESSION",
        CodeClass::SessionMismatch,
    ),
    ("DSH_PROFILE_RESUME_REJECTED", CodeClass::ResumeRejected),
    ("DSH_PROFILE_RUN_FAILED", CodeClass::RuntimeFailed),
    (
        "DSH_PROFILE_PROTOCOL_ERROR",
        CodeClass::RuntimeProtocolError,
    ),
    ("DSH_PROFILE_READY_TIMEOUT", CodeClass::Timeout),
    ("DSH_PROFILE_RUN_TIMEOUT", CodeClass::Timeout),
    ("DSH_PROFILE_SPAWN_FAILED", CodeClass::Spawn),
    ("DSH_PROFILE_BINARY_NOT_FOUND", CodeClass::Discovery),
    ("DSH_PROFILE_VERSION_FAILED", CodeClass::Discovery),
    ("DSH_PROFILE_VERSION_UNPARSEABLE", CodeClass::Discovery),
    ("DSH_PROFILE_PROBE_FAILED", CodeClass::Discovery),
    ("DSH_PROFILE_PROBE_INVALID", CodeClass::Discovery),
    ("DSH_PROFILE_RUNTIME_MISMATCH", CodeClass::Discovery),
    ("DSH_PROFILE_PROTOCOL_UNSUPPORTED", CodeClass::Discovery),
    ("DSH_PROFILE_CAPABILITY_MISSING", CodeClass::Discovery),
    ("DSH_PROFILE_BUNDLE_HASH_MISMATCH", CodeClass::Setup),
    ("DSH_PROFILE_BUNDLE_MISSING", CodeClass::Setup),
    ("DSH_PROFILE_INSTALL_FAILED", CodeClass::Setup),
    ("DSH_PROFILE_UNTESTED_VERSION", CodeClass::Warning),
    ("DSH_PROFILE_MODELS_FAILED", CodeClass::Models),
    ("DSH_PROFILE_MODELS_INVALID", CodeClass::Models),
    ("DSH_PROFILE_MODELS_EMPTY", CodeClass::Models),
    ("DSH_PROFILE_INVALID_ROUTE", CodeClass::Models),
];

impl CodeClass {
    pub const ALL: [CodeClass; 11] = [
        CodeClass::StreamViolation,
        CodeClass::SessionMismatch,
        CodeClass::ResumeRejected,
        CodeClass::RuntimeFailed,
        CodeClass::RuntimeProtocolError,
        CodeClass::Timeout,
        CodeClass::Spawn,
        CodeClass::Discovery,
        CodeClass::Setup,
        CodeClass::Warning,
        CodeClass::Models,
    ];

    /// The class's name in a declaration (`stream-violation`).
    pub fn name(self) -> &'static str {
        match self {
            CodeClass::StreamViolation => "stream-violation",
            CodeClass::SessionMismatch => "session-mismatch",
            CodeClass::ResumeRejected => "resume-rejected",
            CodeClass::RuntimeFailed => "runtime-failed",
            CodeClass::RuntimeProtocolError => "runtime-protocol-error",
            CodeClass::Timeout => "timeout",
            CodeClass::Spawn => "spawn",
            CodeClass::Discovery => "discovery",
            CodeClass::Setup => "setup",
            CodeClass::Warning => "warning",
            CodeClass::Models => "models",
        }
    }

    /// The class of a kit code (None: not a kit code).
    pub fn of(kit_code: &str) -> Option<CodeClass> {
        KIT_CODES
            .iter()
            .find(|(code, _)| *code == kit_code)
            .map(|(_, class)| *class)
    }

    fn named(name: &str) -> Option<CodeClass> {
        CodeClass::ALL
            .into_iter()
            .find(|class| class.name() == name)
    }

    /// Whether a host may declare `passthrough` for it: the code is the runtime's own.
    fn carries_runtime_code(self) -> bool {
        matches!(
            self,
            CodeClass::RuntimeFailed | CodeClass::RuntimeProtocolError | CodeClass::ResumeRejected
        )
    }
}

/// What a host declared one kit code to become.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Declared {
    /// This code, exactly.
    Code(String),
    /// The runtime's own error code (from its `result.error` or `protocol_error` frame).
    Passthrough,
}

/// The vocabulary a host declared in its handshake's `codes` member.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vocabulary {
    /// Every kit code maps to itself (`"codes": "kit"`).
    kit: bool,
    /// Per kit code or class name.
    map: BTreeMap<String, Declared>,
}

/// The declaration is not one the kit can read: the driver broke the driver contract.
pub type DeclarationError = String;

impl Vocabulary {
    /// Reads the handshake's `codes` member; `Ok(None)` when the host declared nothing.
    pub fn from_handshake(handshake: &Value) -> Result<Option<Vocabulary>, DeclarationError> {
        match handshake.get("codes") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(word)) if word == "kit" => Ok(Some(Vocabulary {
                kit: true,
                map: BTreeMap::new(),
            })),
            Some(Value::Object(members)) => {
                let mut map = BTreeMap::new();
                for (key, value) in members {
                    let class = CodeClass::of(key).or_else(|| CodeClass::named(key));
                    let Some(class) = class else {
                        return Err(format!(
                            "handshake codes: {key:?} is neither a kit code nor a code class"
                        ));
                    };
                    let declared = match value.as_str() {
                        Some("passthrough") if class.carries_runtime_code() => Declared::Passthrough,
                        Some("passthrough") => {
                            return Err(format!(
                                "handshake codes: {key:?} cannot be passthrough (only runtime-failed, runtime-protocol-error and resume-rejected carry the runtime's code)"
                            ))
                        }
                        Some(code) if !code.is_empty() => Declared::Code(code.to_string()),
                        _ => {
                            return Err(format!(
                                "handshake codes: {key:?} must map to a non-empty code or \"passthrough\""
                            ))
                        }
                    };
                    map.insert(key.clone(), declared);
                }
                Ok(Some(Vocabulary { kit: false, map }))
            }
            Some(other) => Err(format!(
                "handshake codes must be \"kit\" or an object, got {other}"
            )),
        }
    }

    /// What the host said `kit_code` becomes; None when its class was not declared (the code is
    /// not compared).
    pub fn expected(&self, kit_code: &str) -> Option<Declared> {
        if self.kit {
            return Some(Declared::Code(kit_code.to_string()));
        }
        if let Some(declared) = self.map.get(kit_code) {
            return Some(declared.clone());
        }
        let class = CodeClass::of(kit_code)?;
        self.map.get(class.name()).cloned()
    }

    /// The classes whose codes are compared (wholly or for some codes).
    pub fn compared_classes(&self) -> Vec<CodeClass> {
        CodeClass::ALL
            .into_iter()
            .filter(|class| {
                self.kit
                    || self.map.contains_key(class.name())
                    || KIT_CODES
                        .iter()
                        .any(|(code, of)| of == class && self.map.contains_key(*code))
            })
            .collect()
    }
}

/// One line for reports: which codes a run compared.
pub fn describe(vocabulary: Option<&Vocabulary>) -> String {
    match vocabulary {
        None => "error codes not compared: the driver declared no code vocabulary".to_string(),
        Some(vocabulary) if vocabulary.kit => {
            "error codes compared: the kit's vocabulary".to_string()
        }
        Some(vocabulary) => {
            let compared: Vec<&str> = vocabulary
                .compared_classes()
                .into_iter()
                .map(CodeClass::name)
                .collect();
            let skipped: Vec<&str> = CodeClass::ALL
                .into_iter()
                .filter(|class| !vocabulary.compared_classes().contains(class))
                .map(CodeClass::name)
                .collect();
            format!(
                "error codes compared for {}; not compared for {}",
                join_or_none(&compared),
                join_or_none(&skipped)
            )
        }
    }
}

fn join_or_none(names: &[&str]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn declared(codes: Value) -> Vocabulary {
        Vocabulary::from_handshake(&json!({ "codes": codes }))
            .expect("a readable declaration")
            .expect("a declaration")
    }

    #[test]
    fn every_kit_code_has_one_class() {
        for (code, class) in KIT_CODES {
            assert_eq!(CodeClass::of(code), Some(*class));
            assert!(code.starts_with("DSH_PROFILE_"));
        }
        assert_eq!(CodeClass::of("UNSUPPORTED_FIELD"), None);
    }

    #[test]
    fn no_declaration_compares_nothing() {
        assert_eq!(Vocabulary::from_handshake(&json!({})), Ok(None));
        assert!(describe(None).contains("not compared"));
    }

    #[test]
    fn kit_vocabulary_maps_every_code_to_itself() {
        let vocabulary = declared(json!("kit"));
        assert_eq!(
            vocabulary.expected("DSH_PROFILE_MALFORMED_FRAME"),
            Some(Declared::Code("DSH_PROFILE_MALFORMED_FRAME".into()))
        );
        assert_eq!(vocabulary.compared_classes().len(), CodeClass::ALL.len());
    }

    #[test]
    fn a_class_maps_many_codes_to_one_and_a_code_entry_wins() {
        let vocabulary = declared(json!({
            "stream-violation": "DSH_PROFILE_PROTOCOL_ERROR",
            "DSH_PROFILE_FRAME_TOO_LARGE": "LINE_TOO_LONG",
            "runtime-protocol-error": "passthrough",
        }));
        let code = |c: &str| Some(Declared::Code(c.to_string()));
        assert_eq!(
            vocabulary.expected("DSH_PROFILE_MALFORMED_FRAME"),
            code("DSH_PROFILE_PROTOCOL_ERROR")
        );
        assert_eq!(
            vocabulary.expected("DSH_PROFILE_FRAME_TOO_LARGE"),
            code("LINE_TOO_LONG")
        );
        assert_eq!(
            vocabulary.expected("DSH_PROFILE_PROTOCOL_ERROR"),
            Some(Declared::Passthrough)
        );
        assert_eq!(vocabulary.expected("DSH_PROFILE_SPAWN_FAILED"), None);
        let line = describe(Some(&vocabulary));
        assert!(
            line.contains("compared for stream-violation, runtime-protocol-error"),
            "{line}"
        );
        assert!(line.contains("not compared for session-mismatch"), "{line}");
    }

    #[test]
    fn each_session_mismatch_situation_can_be_mapped_exactly() {
        // OpenDesign's daemon: a protocol error for a result naming another session and for a new
        // session claiming resumed, its own code for a completion no session frame announced.
        let vocabulary = declared(json!({
            "session-mismatch": "DSH_PROFILE_PROTOCOL_ERROR",
            "DSH_PROFILE_UNANNOUNCED_SESSION": "DSH_PROFILE_SESSION_MISMATCH",
        }));
        let code = |c: &str| Some(Declared::Code(c.to_string()));
        for kit_code in [
            "DSH_PROFILE_SESSION_MISMATCH",
            "DSH_PROFILE_UNREQUESTED_RESUME",
            "DSH_PROFILE_RESUME_MISMATCH",
        ] {
            assert_eq!(CodeClass::of(kit_code), Some(CodeClass::SessionMismatch));
            assert_eq!(
                vocabulary.expected(kit_code),
                code("DSH_PROFILE_PROTOCOL_ERROR")
            );
        }
        assert_eq!(
            vocabulary.expected("DSH_PROFILE_UNANNOUNCED_SESSION"),
            code("DSH_PROFILE_SESSION_MISMATCH")
        );
    }

    #[test]
    fn unreadable_declarations_are_driver_errors() {
        for bad in [
            json!("mine"),
            json!(["kit"]),
            json!({"no-such-class": "X"}),
            json!({"stream-violation": ""}),
            json!({"stream-violation": 3}),
            json!({"spawn": "passthrough"}),
        ] {
            assert!(
                Vocabulary::from_handshake(&json!({ "codes": bad })).is_err(),
                "{bad} should be rejected"
            );
        }
    }
}
