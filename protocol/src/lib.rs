//! Typed frames of the `dsh-profile-jsonl` stream (generation 1), the JSON Schemas that are the
//! language-neutral contract, and the strict stream checker every host runs stdout through.
//!
//! - [`arguments`]: the one definition of `tool_call.arguments` JSON (checker and host agree).
//! - [`frames`]: serde types for runtime frames and host commands, agreeing with `schemas/`.
//! - [`frame_ref`]: borrowed frames ([`FrameRef`]), what the checker hands out per line.
//! - [`scan`]: the fast path of frame parsing (flat objects), which declines everything else.
//! - [`schema`]: the schemas embedded at build time, and validation against them.
//! - [`lines`]: a bounded-memory line framer (CRLF, empty lines, the 1 MiB limit).
//! - [`needles`]: the encoded forms of a secret that redaction and leak scans look for.
//! - [`checker`]: the strict per-run state machine of spec sections 6 and 7.
//! - [`lifeline`]: the npm shim's contract with the native binaries (they stop when it is gone);
//!   here because this is the one crate all three link.

pub mod arguments;
pub mod checker;
pub mod frame_ref;
pub mod frames;
pub mod lifeline;
pub mod lines;
pub mod needles;
pub mod scan;
pub mod schema;

pub use checker::{RunContext, Step, StreamChecker, Terminal, Violation, ViolationCode};
pub use frame_ref::FrameRef;
pub use frames::{FrameError, FrameErrorKind, HostCommand, RuntimeFrame, Status};
pub use lines::{LineEvent, LineFramer, MAX_LINE_BYTES};
pub use schema::SchemaError;

/// The protocol generation this crate implements.
pub const PROTOCOL_VERSION: u64 = 1;
/// The runtime identity the open-design profile reports.
pub const RUNTIME_ID: &str = "open-design";
/// The stream format name.
pub const STREAM_FORMAT: &str = "dsh-profile-jsonl";
