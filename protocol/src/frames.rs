//! Serde types for generation-1 runtime frames and host commands.
//! The types are filled in by the protocol work (issue 2); names here are the public contract:
//! `RuntimeFrame` (tagged by `type`: Probe, Ready, Models, Session, Thinking, Text, ToolCall,
//! ToolResult, Usage, Result, ProtocolError) and `HostCommand` (Execute, Cancel).

#[derive(Debug, Clone, PartialEq)]
pub enum RuntimeFrame {}

#[derive(Debug, Clone, PartialEq)]
pub enum HostCommand {}

#[derive(Debug, Clone, PartialEq)]
pub struct Result {}
