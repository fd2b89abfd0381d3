//! Splits a byte stream into protocol lines with bounded memory.
//!
//! Lines end at `\n`; a `\r` just before it is dropped (CRLF is accepted). A line that grows past
//! the limit is reported as [`LineEvent::TooLarge`] as soon as the buffer passes the limit, and the
//! rest of it is discarded up to the next newline without being buffered.

/// The largest accepted line, excluding its line terminator.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;

/// What the framer found in the bytes pushed so far. `B` holds a line's bytes: owned (`Vec<u8>`,
/// from [`LineFramer::push`]) or borrowed (`&[u8]`, from [`LineFramer::push_each`], which copies
/// nothing for a line that lies whole in one chunk).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineEvent<B = Vec<u8>> {
    /// A complete line (1-based `number`), without its `\n` or `\r\n`. Empty lines are reported too;
    /// the checker skips them.
    Line { number: usize, bytes: B },
    /// Line `number` grew past [`MAX_LINE_BYTES`] before its newline; its bytes are discarded up to
    /// the next newline, and the framer does not buffer them.
    TooLarge { number: usize },
    /// The stream ended inside line `number` (bytes without a final newline).
    Truncated { number: usize, bytes: B },
}

impl<B> LineEvent<B> {
    /// The 1-based line number the event belongs to.
    pub fn number(&self) -> usize {
        match self {
            LineEvent::Line { number, .. }
            | LineEvent::TooLarge { number }
            | LineEvent::Truncated { number, .. } => *number,
        }
    }
}

impl LineEvent<&[u8]> {
    /// The event with its bytes copied out.
    pub fn to_owned_event(&self) -> LineEvent {
        match *self {
            LineEvent::Line { number, bytes } => LineEvent::Line {
                number,
                bytes: bytes.to_vec(),
            },
            LineEvent::TooLarge { number } => LineEvent::TooLarge { number },
            LineEvent::Truncated { number, bytes } => LineEvent::Truncated {
                number,
                bytes: bytes.to_vec(),
            },
        }
    }
}

/// `bytes` without one trailing `\r`.
fn strip_cr(bytes: &[u8]) -> &[u8] {
    bytes.strip_suffix(b"\r").unwrap_or(bytes)
}

/// Incremental splitter: feed chunks with [`LineFramer::push`], end with [`LineFramer::finish`].
#[derive(Debug, Clone)]
pub struct LineFramer {
    max_line: usize,
    buffer: Vec<u8>,
    /// The current line passed the limit; its bytes are dropped until the next newline.
    discarding: bool,
    /// 1-based number of the line being assembled.
    current: usize,
    finished: bool,
}

impl LineFramer {
    pub fn new() -> Self {
        Self::with_limit(MAX_LINE_BYTES)
    }

    /// A framer whose lines may hold at most `max_line` bytes (excluding the terminator; a trailing
    /// `\r` counts until it is known to be part of a CRLF).
    pub fn with_limit(max_line: usize) -> Self {
        LineFramer {
            max_line,
            buffer: Vec::new(),
            discarding: false,
            current: 1,
            finished: false,
        }
    }

    /// The limit this framer enforces.
    pub fn limit(&self) -> usize {
        self.max_line
    }

    /// Feed the next chunk; returns the events it completed, in order.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<LineEvent> {
        let mut events = Vec::new();
        self.push_each(chunk, |event| events.push(event.to_owned_event()));
        events
    }

    /// Feed the next chunk, handing each completed event to `emit` in order. A line that lies
    /// whole in `chunk` is a slice of it; one that spans chunks is a slice of the framer's buffer,
    /// which keeps its capacity (up to 64 KiB) for the next one. Nothing is copied per line.
    pub fn push_each(&mut self, chunk: &[u8], mut emit: impl FnMut(LineEvent<&[u8]>)) {
        let mut rest = chunk;
        while !rest.is_empty() {
            let Some(index) = memchr::memchr(b'\n', rest) else {
                self.extend(rest, &mut emit);
                self.report_early(&mut emit);
                return;
            };
            let segment = &rest[..index];
            rest = &rest[index + 1..];
            if !self.discarding && self.buffer.is_empty() {
                self.emit_line(segment, &mut emit);
            } else {
                self.extend(segment, &mut emit);
                if !self.discarding {
                    self.emit_line(&self.buffer, &mut emit);
                    self.buffer.clear();
                    self.buffer.shrink_to(64 * 1024);
                }
            }
            self.discarding = false;
            self.current += 1;
        }
    }

    /// A pending line already past the limit even if its last byte turns out to be a CRLF's
    /// `\r` is reported now, before its newline arrives.
    fn report_early(&mut self, emit: &mut impl FnMut(LineEvent<&[u8]>)) {
        if self.discarding || self.buffer.len() <= self.max_line {
            return;
        }
        if self.buffer.last() != Some(&b'\r') || self.buffer.len() > self.max_line + 1 {
            self.buffer.clear();
            self.discarding = true;
            emit(LineEvent::TooLarge {
                number: self.current,
            });
        }
    }

    /// The complete line `bytes` (its `\n` removed): a `Line`, or `TooLarge` past the limit.
    fn emit_line(&self, bytes: &[u8], emit: &mut impl FnMut(LineEvent<&[u8]>)) {
        let line = strip_cr(bytes);
        let number = self.current;
        if line.len() > self.max_line {
            emit(LineEvent::TooLarge { number });
        } else {
            emit(LineEvent::Line {
                number,
                bytes: line,
            });
        }
    }

    /// Appends an unterminated segment of the current line, switching to discarding (and
    /// reporting `TooLarge` once) when it passes the limit.
    fn extend(&mut self, segment: &[u8], emit: &mut impl FnMut(LineEvent<&[u8]>)) {
        if self.discarding {
            return;
        }
        // A CRLF's `\r` may sit at the limit: allow one byte of slack for it until the line's
        // end is known.
        let room = (self.max_line + 1).saturating_sub(self.buffer.len());
        if segment.len() > room {
            self.buffer.clear();
            self.buffer.shrink_to(64 * 1024);
            self.discarding = true;
            emit(LineEvent::TooLarge {
                number: self.current,
            });
        } else {
            self.buffer.extend_from_slice(segment);
        }
    }

    /// The stream ended: a pending partial line is reported as `Truncated`. Calling it again
    /// returns `None`.
    pub fn finish(&mut self) -> Option<LineEvent> {
        if self.finished {
            return None;
        }
        self.finished = true;
        if self.discarding {
            self.discarding = false;
            return None;
        }
        if self.buffer.is_empty() {
            return None;
        }
        let mut bytes = std::mem::take(&mut self.buffer);
        if bytes.len() > self.max_line {
            return Some(LineEvent::TooLarge {
                number: self.current,
            });
        }
        if bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
        Some(LineEvent::Truncated {
            number: self.current,
            bytes,
        })
    }
}

impl Default for LineFramer {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(events: &[LineEvent]) -> Vec<(usize, String)> {
        events
            .iter()
            .map(|event| match event {
                LineEvent::Line { number, bytes } => {
                    (*number, String::from_utf8_lossy(bytes).into_owned())
                }
                LineEvent::TooLarge { number } => (*number, "<too large>".to_string()),
                LineEvent::Truncated { number, bytes } => (
                    *number,
                    format!("<truncated {}>", String::from_utf8_lossy(bytes)),
                ),
            })
            .collect()
    }

    #[test]
    fn splits_lines_and_strips_crlf() {
        let mut framer = LineFramer::new();
        let events = framer.push(b"a\r\nb\n\n  \nc");
        assert_eq!(
            lines(&events),
            vec![
                (1, "a".to_string()),
                (2, "b".to_string()),
                (3, String::new()),
                (4, "  ".to_string())
            ]
        );
        assert_eq!(
            framer.finish(),
            Some(LineEvent::Truncated {
                number: 5,
                bytes: b"c".to_vec()
            })
        );
        assert_eq!(framer.finish(), None);
    }

    #[test]
    fn lines_split_across_chunks_are_joined() {
        let mut framer = LineFramer::new();
        let mut events = Vec::new();
        for byte in b"{\"x\":1}\r\n{\"y\":2}\n" {
            events.extend(framer.push(std::slice::from_ref(byte)));
        }
        assert_eq!(
            lines(&events),
            vec![(1, "{\"x\":1}".to_string()), (2, "{\"y\":2}".to_string())]
        );
        assert_eq!(framer.finish(), None);
    }

    #[test]
    fn too_large_fires_before_the_newline_and_skips_the_rest() {
        let mut framer = LineFramer::with_limit(4);
        assert_eq!(framer.push(b"abcd"), vec![]);
        assert_eq!(framer.push(b"e"), vec![LineEvent::TooLarge { number: 1 }]);
        assert_eq!(framer.push(b"fghij"), vec![]);
        assert_eq!(lines(&framer.push(b"k\nok\n")), vec![(2, "ok".to_string())]);
        assert_eq!(framer.finish(), None);
    }

    #[test]
    fn a_line_at_the_limit_with_crlf_is_accepted() {
        let mut framer = LineFramer::with_limit(4);
        let mut events = framer.push(b"abcd\r");
        events.extend(framer.push(b"\n"));
        assert_eq!(lines(&events), vec![(1, "abcd".to_string())]);
        let events = framer.push(b"abcd\rx\n");
        assert_eq!(events, vec![LineEvent::TooLarge { number: 2 }]);
    }

    #[test]
    fn too_large_tail_at_eof_is_reported_once() {
        let mut framer = LineFramer::with_limit(2);
        assert_eq!(framer.push(b"abc"), vec![LineEvent::TooLarge { number: 1 }]);
        assert_eq!(framer.finish(), None);
    }

    #[test]
    fn memory_stays_bounded_for_a_huge_line() {
        let mut framer = LineFramer::with_limit(1024);
        let chunk = vec![b'x'; 64 * 1024];
        let mut too_large = 0;
        for _ in 0..64 {
            too_large += framer.push(&chunk).len();
            assert!(framer.buffer.capacity() <= 64 * 1024 + 1025);
        }
        assert_eq!(too_large, 1);
    }
}
