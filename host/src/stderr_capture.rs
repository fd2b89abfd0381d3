//! Drains a runtime's stderr concurrently into a bounded buffer, so a chatty runtime can never
//! block on a full pipe, and hands back what was kept, redacted and within the bound.

use crate::redact::Redactor;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::task::JoinHandle;

/// The most of a runtime's stderr the host keeps (docs/host-driver.md: 64 KiB).
pub const KEPT_STDERR_BYTES: usize = 64 * 1024;

/// Raw bytes kept while draining: the head of the stream, plus enough slack that a secret
/// straddling the cut is still redacted whole.
#[derive(Debug, Default)]
struct Head {
    bytes: Vec<u8>,
    total: u64,
}

/// A running drain of one stream.
pub struct StderrCapture {
    task: JoinHandle<Head>,
}

impl StderrCapture {
    /// Start draining `stream` now; at most `KEPT_STDERR_BYTES + slack` bytes stay in memory.
    pub fn start<R>(stream: R, slack: usize) -> Self
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        let limit = KEPT_STDERR_BYTES.saturating_add(slack);
        let task = tokio::spawn(drain(stream, limit));
        Self { task }
    }

    /// Wait (at most `bound`) for the stream to end, then redact and bound what was kept.
    /// A stream still open after `bound` (a descendant holds it) is cut there.
    pub async fn finish(self, redactor: &Redactor, bound: std::time::Duration) -> String {
        let mut task = self.task;
        let head = match tokio::time::timeout(bound, &mut task).await {
            Ok(Ok(head)) => head,
            Ok(Err(_)) => Head::default(),
            Err(_) => {
                task.abort();
                Head::default()
            }
        };
        bounded_redacted(&head, redactor)
    }
}

async fn drain<R: AsyncRead + Unpin>(mut stream: R, limit: usize) -> Head {
    let mut head = Head::default();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return head,
            Ok(n) => {
                head.total += n as u64;
                let room = limit.saturating_sub(head.bytes.len());
                head.bytes.extend_from_slice(&chunk[..n.min(room)]);
            }
        }
    }
}

fn bounded_redacted(head: &Head, redactor: &Redactor) -> String {
    let text = redactor.redact(&String::from_utf8_lossy(&head.bytes));
    if text.len() <= KEPT_STDERR_BYTES && head.total == head.bytes.len() as u64 {
        return text;
    }
    let note = format!("\n[stderr truncated: {} bytes in total]\n", head.total);
    let mut cut = KEPT_STDERR_BYTES.saturating_sub(note.len()).min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{note}", &text[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn floods_are_bounded_and_secrets_at_the_cut_redacted() {
        let secret = "sk-canary-secret-value";
        let mut input = vec![b'x'; KEPT_STDERR_BYTES - 60 - 5];
        input.extend_from_slice(secret.as_bytes());
        input.extend(std::iter::repeat_n(b'y', 4 * 1024 * 1024));
        let mut redactor = Redactor::default();
        redactor.add_secret(secret);
        let capture = StderrCapture::start(std::io::Cursor::new(input), redactor.longest_secret());
        let kept = capture.finish(&redactor, Duration::from_secs(5)).await;
        assert!(kept.len() <= KEPT_STDERR_BYTES, "kept {} bytes", kept.len());
        assert!(
            !kept.contains("sk-canary"),
            "a secret straddling the cut leaked"
        );
        assert!(kept.contains("stderr truncated"));
    }

    #[tokio::test]
    async fn short_stderr_is_kept_whole() {
        let capture =
            StderrCapture::start(std::io::Cursor::new(b"warning: slow disk\n".to_vec()), 0);
        let kept = capture
            .finish(&Redactor::default(), Duration::from_secs(5))
            .await;
        assert_eq!(kept, "warning: slow disk\n");
    }
}
