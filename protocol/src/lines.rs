//! Splits a byte stream into protocol lines with bounded memory.
//!
//! Lines end at `\n`; a `\r` just before it is dropped (CRLF is accepted). A line that grows past
//! the limit is reported as [`LineEvent::TooLarge`] as soon as the buffer passes the limit, and the
//! rest of it is discarded up to the next newline without being buffered.

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

impl LineEvent {
    /// The 1-based line number the event belongs to.
    pub fn number(&self) -> usize {
        match self {
            LineEvent::Line { number, .. }
            | LineEvent::TooLarge { number }
            | LineEvent::Truncated { number, .. } => *number,
        }
    }
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
        let mut rest = chunk;
        while !rest.is_empty() {
            let newline = rest.iter().position(|&byte| byte == b'\n');
            let (segment, terminated) = match newline {
                Some(index) => (&rest[..index], true),
                None => (rest, false),
            };
            rest = match newline {
                Some(index) => &rest[index + 1..],
                None => &[],
            };
            if !self.discarding {
                // A CRLF's `\r` may sit at the limit: allow one byte of slack for it, and decide
                // once the line is complete.
                let room = (self.max_line + 1).saturating_sub(self.buffer.len());
                if segment.len() > room {
                    self.buffer.clear();
                    self.buffer.shrink_to(64 * 1024);
                    self.discarding = true;
                    events.push(LineEvent::TooLarge {
                        number: self.current,
                    });
                } else {
                    self.buffer.extend_from_slice(segment);
                }
            }
            if terminated {
                if !self.discarding {
                    let mut bytes = std::mem::take(&mut self.buffer);
                    if bytes.last() == Some(&b'\r') {
                        bytes.pop();
                    }
                    if bytes.len() > self.max_line {
                        events.push(LineEvent::TooLarge {
                            number: self.current,
                        });
                    } else {
                        events.push(LineEvent::Line {
                            number: self.current,
                            bytes,
                        });
                    }
                }
                self.discarding = false;
                self.current += 1;
            } else if !self.discarding && self.buffer.len() > self.max_line {
                // Past the limit even if the last byte turns out to be a CRLF's `\r`.
                let ends_with_cr = self.buffer.last() == Some(&b'\r');
                if !ends_with_cr || self.buffer.len() > self.max_line + 1 {
                    self.buffer.clear();
                    self.discarding = true;
                    events.push(LineEvent::TooLarge {
                        number: self.current,
                    });
                }
            }
        }
        events
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
