//! Parsing frames and commands: the entry points ([`RuntimeFrame::parse_line`],
//! [`FrameRef::parse_line`], [`HostCommand::parse_line`] and their `from_value` forms), then the
//! typed extraction of the members each `type` defines (the members themselves are read through
//! `members`).

use super::commands::{Cancel, Execute, HostCommand, ModelRoute};
use super::members::{
    json_kind, strip_position, Count, Members, RawMembers, Reader, TypeName, MAX_COUNT,
};
use super::types::*;
use crate::frame_ref::{DeltaRef, FrameRef, SessionRef, ToolCallRef, ToolResultRef, UsageRef};
use crate::scan::Scalar;
use serde::Deserialize;
use serde_json::Value;
use std::borrow::Cow;

/// The text of one line of `what` ("a frame", "a command"): UTF-8 without a byte-order mark.
fn line_text<'a>(line: &'a [u8], what: &str) -> Result<&'a str, FrameError> {
    if line.starts_with(b"\xEF\xBB\xBF") {
        return Err(FrameError::malformed(format!(
            "starts with a UTF-8 byte-order mark ({what} is a bare JSON object)"
        )));
    }
    std::str::from_utf8(line).map_err(|error| {
        FrameError::malformed(format!(
            "not UTF-8 (invalid byte at offset {})",
            error.valid_up_to()
        ))
    })
}

impl RuntimeFrame {
    /// Parse one stdout line (without its terminator) as a generation-1 frame: the owned form of
    /// [`FrameRef::parse_line`] (same acceptance, same errors).
    pub fn parse_line(line: &[u8]) -> Result<RuntimeFrame, FrameError> {
        FrameRef::parse_line(line).map(FrameRef::into_owned)
    }

    /// Parse one frame from text (see [`FrameRef::parse_str`]).
    pub fn parse_str(text: &str) -> Result<RuntimeFrame, FrameError> {
        FrameRef::parse_str(text).map(FrameRef::into_owned)
    }

    /// [`FrameRef::parse_str_fast`], owned.
    pub fn parse_str_fast(text: &str) -> Option<RuntimeFrame> {
        FrameRef::parse_str_fast(text).map(FrameRef::into_owned)
    }

    /// [`FrameRef::parse_str_general`], owned.
    pub fn parse_str_general(text: &str) -> Result<RuntimeFrame, FrameError> {
        FrameRef::parse_str_general(text).map(FrameRef::into_owned)
    }

    /// Interpret a parsed JSON document as a frame (same rules as [`RuntimeFrame::parse_line`],
    /// except that duplicate keys have already been merged by whoever parsed it).
    pub fn from_value(value: &Value) -> Result<RuntimeFrame, FrameError> {
        match value {
            Value::Object(map) => build_frame(&map).map(FrameRef::into_owned),
            other => Err(FrameError::invalid(format!(
                "a frame must be a JSON object, not {}",
                json_kind(other)
            ))),
        }
    }
}

impl HostCommand {
    /// Parse one stdin line as a command (same parsing rules as frames).
    pub fn parse_line(line: &[u8]) -> Result<HostCommand, FrameError> {
        let members = parse_members(line_text(line, "a command")?)?;
        build_command(&members)
    }

    pub fn from_value(value: &Value) -> Result<HostCommand, FrameError> {
        match value {
            Value::Object(map) => build_command(&map),
            other => Err(FrameError::invalid(format!(
                "a command must be a JSON object, not {}",
                json_kind(other)
            ))),
        }
    }
}

impl<'a> FrameRef<'a> {
    /// Parse one stdout line (without its terminator) as a generation-1 frame, borrowing its
    /// strings from `line` (see [`crate::frame_ref`]).
    pub fn parse_line(line: &'a [u8]) -> Result<FrameRef<'a>, FrameError> {
        Self::parse_str(line_text(line, "a frame")?)
    }

    /// Parse one frame from text (see [`FrameRef::parse_line`]).
    /// Most lines take the fast path ([`crate::scan`]: one flat object, no allocation but for
    /// strings with escapes); the rest, and every error, [`FrameRef::parse_str_general`].
    pub fn parse_str(text: &'a str) -> Result<FrameRef<'a>, FrameError> {
        match Self::parse_str_fast(text) {
            Some(frame) => Ok(frame),
            None => Self::parse_str_general(text),
        }
    }

    /// The fast path alone: the frame, or `None` when [`crate::scan`] declines the line or the
    /// frame it describes is not valid (the general parser then names the error). Public so the
    /// equivalence tests can show it is taken and agrees with the general parser.
    pub fn parse_str_fast(text: &'a str) -> Option<FrameRef<'a>> {
        crate::scan::object(text, |members| {
            build_scanned(members).or_else(|| build_frame(members).ok())
        })
    }

    /// The general parser alone, without the fast path of [`crate::scan`]: every line the fast
    /// path declines or cannot build a frame from is read here, and every error comes from here.
    /// Public so the equivalence tests can hold both paths side by side.
    pub fn parse_str_general(text: &'a str) -> Result<FrameRef<'a>, FrameError> {
        if text.starts_with('\u{FEFF}') {
            return Err(FrameError::malformed(
                "starts with a UTF-8 byte-order mark (a frame is a bare JSON object)",
            ));
        }
        let members = parse_members(text)?;
        reject_lone_surrogates(text)?;
        build_frame(&members)
    }
}

/// Parses the top-level members of `text`, telling malformed (not JSON) from invalid (JSON of
/// the wrong shape). A shape error can be raised before the parser reaches a syntax error
/// (`[info] ...` is rejected as "not an object" at `[`), so shape errors are re-checked for syntax.
fn parse_members(text: &str) -> Result<RawMembers<'_>, FrameError> {
    use serde_json::error::Category;
    serde_json::from_str(text).map_err(|error| {
        let shape_error = error.classify() == Category::Data;
        let error = if shape_error {
            match serde_json::from_str::<Value>(text) {
                Ok(value) if !value.is_object() => {
                    return FrameError::invalid(format!(
                        "a frame must be a JSON object, not {}",
                        json_kind(&value)
                    ))
                }
                Ok(_) => return FrameError::invalid(strip_position(&error.to_string())),
                Err(syntax) => syntax,
            }
        } else {
            error
        };
        FrameError::malformed(format!("not JSON: {}", strip_position(&error.to_string())))
    })
}

/// A lone surrogate escape anywhere in the line (known member, unknown member, key, nested) is
/// `Malformed`: one code whatever member holds it. Only lines with a `\uD800`-`\uDFFF`-looking
/// escape pay for the second, value-free pass.
fn reject_lone_surrogates(text: &str) -> Result<(), FrameError> {
    let suspicious = text.match_indices("\\u").any(|(at, _)| {
        let hex = text.as_bytes().get(at + 2..at + 4).unwrap_or_default();
        matches!(hex, [b'd' | b'D', b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F'])
    });
    if !suspicious {
        return Ok(());
    }
    crate::arguments::check(text).map_err(|error| {
        FrameError::malformed(format!(
            "not JSON: {error} (spec 6: every line is one JSON frame)"
        ))
    })
}

/// Reads `v` (must be 1) and `type` (a string), the header every frame and command carries.
fn header<'a, M: Members<'a>>(
    members: &M,
    what: &'static str,
) -> Result<Cow<'static, str>, FrameError> {
    let reader = Reader { members, what };
    let version = reader.optional::<Count>("v", "the integer 1")?;
    match version {
        None => return Err(FrameError::invalid(format!("{what}: missing required `v`"))),
        Some(Count(1)) => {}
        Some(Count(other)) => {
            return Err(FrameError::invalid(format!(
                "{what}: `v` is {other}, but this is generation 1 (`v` must be 1)"
            )))
        }
    }
    Ok(reader.required::<TypeName>("type", "a string")?.0)
}

/// The frames a run writes many of (`session`, `thinking`, `text`, `tool_call`, `tool_result`,
/// `usage`), built straight from scanned members without the typed extraction of
/// [`build_frame`]: the same rules, and no error to name, because `None` (any other type, or any
/// member missing or ill-typed) sends the line on to [`build_frame`] and the general parser, which
/// decide. `tests/it/fast_path.rs` holds it to the general parser, frame for frame.
fn build_scanned<'a>(members: &crate::scan::Members<'a>) -> Option<FrameRef<'a>> {
    let get = |name: &str| members.get(name);
    let (Scalar::UInt(1), Scalar::Str(type_name)) = (get("v")?, get("type")?) else {
        return None;
    };
    let string = |name: &str| -> Option<Cow<'a, str>> {
        match get(name)? {
            Scalar::Str(text) => Some(Cow::Borrowed(*text)),
            Scalar::Escaped(text) => text.take().map(Cow::Owned),
            _ => None,
        }
    };
    // Matched in place rather than `string(name).filter(..)`, whose move of the fresh `Cow`
    // stalled store forwarding.
    let id = |name: &str| -> Option<Cow<'a, str>> {
        match get(name)? {
            Scalar::Str(text) if !text.is_empty() => Some(Cow::Borrowed(*text)),
            Scalar::Escaped(text) => text.take().filter(|id| !id.is_empty()).map(Cow::Owned),
            _ => None,
        }
    };
    let boolean = |name: &str| match get(name)? {
        Scalar::True => Some(true),
        Scalar::False => Some(false),
        _ => None,
    };
    let count = |scalar: &Scalar<'_>| match scalar {
        Scalar::UInt(count) if *count <= MAX_COUNT => Some(*count),
        _ => None,
    };
    let optional_count = |name: &str| match get(name) {
        None => Some(None),
        Some(scalar) => count(scalar).map(Some),
    };
    Some(match *type_name {
        "session" => FrameRef::Session(SessionRef {
            request_id: id("request_id")?,
            session_id: id("session_id")?,
            resumed: boolean("resumed")?,
        }),
        "thinking" => FrameRef::Thinking(DeltaRef {
            request_id: id("request_id")?,
            content: string("content")?,
        }),
        "text" => FrameRef::Text(DeltaRef {
            request_id: id("request_id")?,
            content: string("content")?,
        }),
        "tool_call" => FrameRef::ToolCall(ToolCallRef {
            request_id: id("request_id")?,
            call_id: id("call_id")?,
            name: id("name")?,
            arguments: string("arguments")?,
        }),
        "tool_result" => FrameRef::ToolResult(ToolResultRef {
            request_id: id("request_id")?,
            call_id: id("call_id")?,
            name: id("name")?,
            output: string("output")?,
            is_error: boolean("is_error")?,
        }),
        "usage" => FrameRef::Usage(UsageRef {
            request_id: id("request_id")?,
            provider: string("provider")?,
            model: string("model")?,
            tokens: TokenCounts {
                input_tokens: count(get("input_tokens")?)?,
                output_tokens: count(get("output_tokens")?)?,
                cache_read_tokens: optional_count("cache_read_tokens")?,
                cache_write_tokens: optional_count("cache_write_tokens")?,
            },
        }),
        _ => return None,
    })
}

fn build_frame<'a, M: Members<'a>>(members: &M) -> Result<FrameRef<'a>, FrameError> {
    let type_name = header(members, "frame")?;
    let Some(what) = FRAME_WHAT.iter().find(|(name, _)| *name == type_name) else {
        return Err(FrameError::invalid(format!(
            "unknown frame type `{type_name}` (generation 1 has {})",
            FRAME_TYPES.join(", ")
        )));
    };
    let r = Reader {
        members,
        what: what.1,
    };
    let frame = match type_name.as_ref() {
        "probe" | "ready" => {
            let identity = build_identity(&r)?;
            if type_name == "probe" {
                FrameRef::Probe(identity)
            } else {
                FrameRef::Ready(identity)
            }
        }
        "models" => FrameRef::Models(build_models(&r)?),
        "session" => FrameRef::Session(SessionRef {
            request_id: r.text_id("request_id")?,
            session_id: r.text_id("session_id")?,
            resumed: r.required("resumed", "a boolean")?,
        }),
        "thinking" | "text" => {
            let delta = DeltaRef {
                request_id: r.text_id("request_id")?,
                content: r.text("content", "a string")?,
            };
            if type_name == "text" {
                FrameRef::Text(delta)
            } else {
                FrameRef::Thinking(delta)
            }
        }
        "tool_call" => FrameRef::ToolCall(ToolCallRef {
            request_id: r.text_id("request_id")?,
            call_id: r.text_id("call_id")?,
            name: r.text_id("name")?,
            arguments: r.text("arguments", "a string holding JSON")?,
        }),
        "tool_result" => FrameRef::ToolResult(ToolResultRef {
            request_id: r.text_id("request_id")?,
            call_id: r.text_id("call_id")?,
            name: r.text_id("name")?,
            output: r.text("output", "a string")?,
            is_error: r.required("is_error", "a boolean")?,
        }),
        "usage" => FrameRef::Usage(UsageRef {
            request_id: r.text_id("request_id")?,
            provider: r.text("provider", "a string")?,
            model: r.text("model", "a string")?,
            tokens: TokenCounts {
                input_tokens: r.count("input_tokens")?,
                output_tokens: r.count("output_tokens")?,
                cache_read_tokens: r.optional_count("cache_read_tokens")?,
                cache_write_tokens: r.optional_count("cache_write_tokens")?,
            },
        }),
        "result" => FrameRef::Result(Box::new(build_result(&r)?)),
        "protocol_error" => FrameRef::ProtocolError(ProtocolError {
            request_id: r.optional_non_empty("request_id")?,
            code: r.id("code")?,
            message: r.required("message", "a string")?,
        }),
        _ => unreachable!("FRAME_WHAT lists exactly FRAME_TYPES"),
    };
    Ok(frame)
}

/// The identity a `probe` or `ready` frame carries.
fn build_identity<'a, M: Members<'a>>(r: &Reader<'_, M>) -> Result<RuntimeIdentity, FrameError> {
    let compatibility_generation = r.optional::<String>("compatibility_generation", "a string")?;
    if let Some(generation) = &compatibility_generation {
        if !valid_compatibility_generation(generation) {
            return Err(FrameError::invalid(format!(
                "{}: `compatibility_generation` must match [A-Za-z0-9._:-]{{1,128}}",
                r.what
            )));
        }
    }
    Ok(RuntimeIdentity {
        runtime: r.required("runtime", "a string")?,
        protocol_version: r.count("protocol_version")?,
        plugin_version: r.id("plugin_version")?,
        compatibility_generation,
        capabilities: r
            .object("capabilities", "an object of booleans")?
            .ok_or_else(|| r.missing("capabilities"))?,
    })
}

/// Each frame type and how errors name it.
const FRAME_WHAT: [(&str, &str); 11] = [
    ("probe", "probe frame"),
    ("ready", "ready frame"),
    ("models", "models frame"),
    ("session", "session frame"),
    ("thinking", "thinking frame"),
    ("text", "text frame"),
    ("tool_call", "tool_call frame"),
    ("tool_result", "tool_result frame"),
    ("usage", "usage frame"),
    ("result", "result frame"),
    ("protocol_error", "protocol_error frame"),
];

fn build_result<'a, M: Members<'a>>(r: &Reader<'_, M>) -> Result<ResultFrame, FrameError> {
    let request_id = r.id("request_id")?;
    let status: Status = r.required("status", "one of completed, cancelled, failed")?;
    let session_id = r.id("session_id")?;
    let resume_rejected: bool = r.required("resume_rejected", "a boolean")?;
    if resume_rejected && status != Status::Failed {
        return Err(FrameError::invalid(format!(
            "{}: `resume_rejected: true` requires status `failed`, not `{status}`",
            r.what
        )));
    }
    let error = r.object::<RunError>("error", "an object {code, message} (omitted, never null)")?;
    let error = match error {
        Some(error) if error.code.is_empty() => {
            return Err(FrameError::invalid(format!(
                "{}: `error.code` must be a non-empty string",
                r.what
            )))
        }
        other => other,
    };
    if status == Status::Failed && error.is_none() {
        return Err(FrameError::invalid(format!(
            "{}: a failed result requires `error` {{code, message}}",
            r.what
        )));
    }
    Ok(ResultFrame {
        request_id,
        status,
        session_id,
        resume_rejected,
        output: r.present_non_empty("output")?,
        stop_reason: r.present_non_empty("stop_reason")?,
        error,
    })
}

fn build_models<'a, M: Members<'a>>(r: &Reader<'_, M>) -> Result<Models, FrameError> {
    const EXPECTED: &str =
        "an array of objects {provider, provider_name, id, name, reasoning_options?}";
    let runtime: String = r.required("runtime", "a string")?;
    let models = r
        .optional_unique("models", EXPECTED)?
        .ok_or_else(|| r.missing("models"))?;
    let entries_are_objects = |value: &Value| {
        value
            .as_array()
            .is_some_and(|entries| entries.iter().all(Value::is_object))
    };
    let well_shaped = entries_are_objects(&models)
        && models.as_array().into_iter().flatten().all(|model| {
            model
                .get("reasoning_options")
                .is_none_or(entries_are_objects)
        });
    if !well_shaped {
        return Err(FrameError::invalid(format!(
            "{}: `models` must be {EXPECTED}",
            r.what
        )));
    }
    let models = Vec::<ModelInfo>::deserialize(&models).map_err(|error| {
        FrameError::invalid(format!(
            "{}: `models` must be {EXPECTED} ({})",
            r.what,
            strip_position(&error.to_string())
        ))
    })?;
    Ok(Models { runtime, models })
}

fn build_command<'a, M: Members<'a>>(members: &M) -> Result<HostCommand, FrameError> {
    let type_name = header(members, "command")?;
    match type_name.as_ref() {
        "execute" => {
            let r = Reader {
                members,
                what: "execute command",
            };
            let cwd: String = r.id("cwd")?;
            if !is_absolute_path(&cwd) {
                return Err(FrameError::invalid(format!(
                    "execute command: `cwd` must be an absolute path, not `{cwd}`"
                )));
            }
            let model: Option<ModelRoute> =
                r.object("model", "an object {provider, id} (or omitted)")?;
            if model
                .as_ref()
                .is_some_and(|model| model.provider.is_empty() || model.id.is_empty())
            {
                return Err(FrameError::invalid(
                    "execute command: `model.provider` and `model.id` must be non-empty strings",
                ));
            }
            let mcp_servers: Vec<Value> = r.required("mcp_servers", "an array of objects")?;
            if mcp_servers.iter().any(|entry| !entry.is_object()) {
                return Err(FrameError::invalid(
                    "execute command: every `mcp_servers` entry must be an object",
                ));
            }
            Ok(HostCommand::Execute(Execute {
                request_id: r.id("request_id")?,
                cwd,
                prompt: r.required("prompt", "a string")?,
                resume_session_id: r.optional_non_empty("resume_session_id")?,
                model,
                reasoning_effort: r.optional_non_empty("reasoning_effort")?,
                mcp_servers,
            }))
        }
        "cancel" => {
            let r = Reader {
                members,
                what: "cancel command",
            };
            Ok(HostCommand::Cancel(Cancel {
                request_id: r.id("request_id")?,
            }))
        }
        other => Err(FrameError::invalid(format!(
            "unknown command type `{other}` (generation 1 has execute, cancel)"
        ))),
    }
}

/// `[A-Za-z0-9._:-]{1,128}`.
pub fn valid_compatibility_generation(value: &str) -> bool {
    (1..=128).contains(&value.len())
        && value
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"._:-".contains(&byte))
}

/// POSIX absolute (`/x`), a Windows drive path (`C:\x`, `C:/x`) or a UNC path (`\\server\x`).
pub fn is_absolute_path(path: &str) -> bool {
    let bytes = path.as_bytes();
    path.starts_with('/')
        || path.starts_with("\\\\")
        || (bytes.len() >= 3
            && bytes[0].is_ascii_alphabetic()
            && bytes[1] == b':'
            && (bytes[2] == b'\\' || bytes[2] == b'/'))
}
