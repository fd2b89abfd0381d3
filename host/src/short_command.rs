//! Runs one short-lived `dsh` subcommand (`--version`, `--probe`, `plugin ... add`) with a time
//! bound, collecting bounded stdout and stderr, and reaps its whole tree before returning.

use crate::process::{spawn_owned, Stop};
use std::ffi::OsStr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};

/// The most of each stream a short command may leave in memory.
pub const MAX_CAPTURE_BYTES: usize = 256 * 1024;

/// What a short command did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finished {
    /// It exited with this code (`None`: killed by a signal).
    Exited {
        code: Option<i32>,
        stdout: Vec<u8>,
        stderr: Vec<u8>,
    },
    /// It did not finish within the bound and was killed.
    TimedOut { stderr: Vec<u8> },
    /// It could not be started.
    SpawnFailed(String),
}

/// Run `program args...` with stdin closed, wait at most `bound`, reap everything it started.
pub async fn run<I, S>(program: &Path, args: I, bound: Duration) -> Finished
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let (mut child, tree) = match spawn_owned(&mut command) {
        Ok((child, tree)) => (child, Some(tree)),
        Err(error) => return Finished::SpawnFailed(format!("{}: {error}", program.display())),
    };
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let stdout_task = tokio::spawn(read_bounded(stdout));
    let stderr_task = tokio::spawn(read_bounded(stderr));

    let waited = tokio::time::timeout(bound, child.wait()).await;
    let code = match waited {
        Ok(Ok(status)) => Some(status.code()),
        Ok(Err(_)) | Err(_) => None,
    };
    if code.is_none() {
        if let Some(tree) = tree {
            let _ = tree.stop(Stop::Kill);
        }
        let _ = child.wait().await;
    }
    if let Some(tree) = tree {
        // Descendants that outlive the command are part of it: stop them too.
        if !tree.wait_empty(Duration::from_millis(200)).await {
            let _ = tree.stop(Stop::Kill);
            tree.wait_empty(Duration::from_secs(2)).await;
        }
        tree.release();
    }
    let collect = |task: tokio::task::JoinHandle<Vec<u8>>| async move {
        tokio::time::timeout(Duration::from_secs(1), task)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default()
    };
    let stdout = collect(stdout_task).await;
    let stderr = collect(stderr_task).await;
    match code {
        Some(code) => Finished::Exited {
            code,
            stdout,
            stderr,
        },
        None => Finished::TimedOut { stderr },
    }
}

async fn read_bounded<R: AsyncRead + Unpin>(stream: Option<R>) -> Vec<u8> {
    let Some(mut stream) = stream else {
        return Vec::new();
    };
    let mut kept = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = MAX_CAPTURE_BYTES.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..n.min(room)]);
            }
        }
    }
}
