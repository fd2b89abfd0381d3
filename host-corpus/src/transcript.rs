//! A bounded record of what happened in a case: driver messages in and out, step markers,
//! the journal. It feeds `--verbose` and the reports.

/// At most this many lines are kept; later ones are counted.
pub const MAX_LINES: usize = 600;
/// Each line is clipped to this many bytes.
pub const MAX_LINE_BYTES: usize = 2000;

#[derive(Debug, Default, Clone)]
pub struct Transcript {
    lines: Vec<String>,
    dropped: usize,
}

impl Transcript {
    pub fn push(&mut self, line: impl Into<String>) {
        if self.lines.len() >= MAX_LINES {
            self.dropped += 1;
            return;
        }
        self.lines
            .push(super::driver::clip(&line.into(), MAX_LINE_BYTES));
    }

    pub fn into_lines(mut self) -> Vec<String> {
        if self.dropped > 0 {
            self.lines.push(format!(
                "... {} more transcript lines dropped",
                self.dropped
            ));
        }
        self.lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_in_lines_and_bytes() {
        let mut transcript = Transcript::default();
        for _ in 0..MAX_LINES + 5 {
            transcript.push("x".repeat(MAX_LINE_BYTES * 2));
        }
        let lines = transcript.into_lines();
        assert_eq!(lines.len(), MAX_LINES + 1);
        assert!(lines[0].len() < MAX_LINE_BYTES + 40, "{}", lines[0].len());
        assert_eq!(lines[MAX_LINES], "... 5 more transcript lines dropped");
    }
}
