//! A command's stdout and stderr followed line by line as they come, both echoed where they were
//! going, each line handed to the caller with when it came: `cargo test` prints its results on
//! stdout and which test binary runs on stderr, and `cargo xtask ci` times the binaries from both.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// One line of the command's output.
pub struct Line {
    pub text: String,
    /// When it came, from the command's start.
    pub at: Duration,
}

/// Runs `command`, echoing its stdout to stdout and its stderr to stderr, and hands every line of
/// both to `each` in the order they arrived; the command's exit status once both pipes closed.
pub fn follow(mut command: Command, mut each: impl FnMut(Line)) -> std::io::Result<ExitStatus> {
    let started = Instant::now();
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let (lines, received) = mpsc::channel::<Line>();
    let readers = [
        child
            .stdout
            .take()
            .map(|out| read(out, false, lines.clone(), started)),
        child
            .stderr
            .take()
            .map(|err| read(err, true, lines.clone(), started)),
    ];
    drop(lines);
    for line in received {
        each(line);
    }
    for reader in readers.into_iter().flatten() {
        let _ = reader.join();
    }
    child.wait()
}

/// A thread echoing one pipe line by line and sending each line on.
fn read(
    pipe: impl Read + Send + 'static,
    stderr: bool,
    lines: mpsc::Sender<Line>,
    started: Instant,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for text in BufReader::new(pipe).lines().map_while(Result::ok) {
            if stderr {
                eprintln!("{text}");
            } else {
                println!("{text}");
            }
            let _ = lines.send(Line {
                text,
                at: started.elapsed(),
            });
        }
    })
}
