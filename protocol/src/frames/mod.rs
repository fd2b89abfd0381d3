//! Serde types for generation-1 runtime frames and host commands, agreeing with `schemas/`.
//!
//! [`FrameRef::parse_line`](crate::FrameRef::parse_line) is the hot-path parser the checker uses (borrowing the line's strings;
//! [`RuntimeFrame::parse_line`] is its owned form): the fast path of [`crate::scan`] for the common
//! flat line, else one pass of `serde_json` over the line that captures each top-level member as
//! a raw slice (rejecting duplicate keys), then typed extraction of the members the frame's `type`
//! defines. Members a frame does not define are tolerated and dropped (forward compatibility).
//! Its acceptance is exactly that of `schemas/frame.schema.json`; rules that need more than one
//! frame, or that the schema cannot say (`arguments` holding JSON), belong to the checker.
//!
//! - `types`: the runtime frames ([`RuntimeFrame`] and its payloads), [`FrameError`], and
//!   their serialization.
//! - `commands`: the host commands ([`HostCommand`]: `execute`, `cancel`).
//! - `parse`: the parsers of both: entry points, then typed extraction per `type`.
//! - `members`: the members of one object as the parsers read them (duplicate keys refused),
//!   and typed access to them that names the frame and member in every error.

mod commands;
mod members;
mod parse;
mod types;

pub use commands::{Cancel, Execute, HostCommand, ModelRoute};
pub(crate) use members::strip_position;
pub use members::MAX_COUNT;
pub use parse::{is_absolute_path, valid_compatibility_generation};
pub(crate) use types::frame_accessors;
pub use types::*;

#[cfg(test)]
mod tests;
