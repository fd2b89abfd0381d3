//! A command's stdout and stderr followed line by line as they come, both echoed where they were
//! going, each line handed to the caller: `cargo xtask ci` counts the doc tests' results from them.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;

/// One line of the command's output.
pub struct Line {
    pub text: String,
}

/// Runs `command`, echoing its stdout to stdout and its stderr to stderr, and hands every line of
/// both to `each` in the order they arrived; the command's exit status once both pipes closed.
pub fn follow(mut command: Command, mut each: impl FnMut(Line)) -> std::io::Result<ExitStatus> {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let (lines, received) = mpsc::channel::<Line>();
    let readers = [
        child
            .stdout
            .take()
            .map(|out| read(out, false, lines.clone())),
        child
            .stderr
            .take()
            .map(|err| read(err, true, lines.clone())),
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
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for text in BufReader::new(pipe).lines().map_while(Result::ok) {
            if stderr {
                eprintln!("{text}");
            } else {
                println!("{text}");
            }
            let _ = lines.send(Line { text });
        }
    })
}
