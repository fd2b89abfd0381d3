//! Splits a byte stream into protocol lines with bounded memory.

/// The largest accepted line, excluding its line terminator.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;

/// What the framer found in the bytes pushed so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineEvent {
    /// A complete line (1-based `number`), without its `\n` or `\r\n`. Empty lines are reported too;
    /// the checker skips them.
    Line { number: usize, bytes: Vec<u8> },
    /// Line `number` grew past [`MAX_LINE_BYTES`] before its newline; its bytes are discarded up to
    /// the next newline, and the framer does not buffer them.
    TooLarge { number: usize },
    /// The stream ended inside line `number` (bytes without a final newline).
    Truncated { number: usize, bytes: Vec<u8> },
}

pub struct LineFramer {
    max_line: usize,
}

impl LineFramer {
    pub fn new() -> Self {
        Self::with_limit(MAX_LINE_BYTES)
    }
    pub fn with_limit(max_line: usize) -> Self {
        let _ = max_line;
        todo!()
    }
    /// Feed the next chunk; returns the events it completed, in order.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<LineEvent> {
        let _ = (chunk, self.max_line);
        todo!()
    }
    /// The stream ended: a pending partial line is reported as `Truncated`.
    pub fn finish(&mut self) -> Option<LineEvent> {
        todo!()
    }
}

impl Default for LineFramer {
    fn default() -> Self {
        Self::new()
    }
}
