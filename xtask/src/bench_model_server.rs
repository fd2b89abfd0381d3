//! The `cargo xtask bench` row of the model server's memory (issue 40 item 2): the peak RSS
//! (`VmHWM`) of `dsh-conformance model-server` through one 8 MB POST of a million small JSON
//! objects (`{"a":0}`) on each route, beside its resident memory at rest (after one
//! well-behaved request). Before the parsed-cost bound this input took the server from 7 MB to
//! 2.1 GB (docs/performance.md, "The model server's memory"). Printed, never asserted.

use crate::bench::Figure;
use crate::kit::Kit;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

/// The server process, killed and reaped on drop.
struct Server {
    child: Child,
    address: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(kit: &Kit) -> Result<Server, String> {
    let mut child = Command::new(&kit.conformance)
        .arg("model-server")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{}: {e}", kit.conformance.display()))?;
    let mut line = String::new();
    let stdout = child.stdout.take().ok_or("no stdout")?;
    // Killed and reaped however this ends.
    let mut server = Server {
        child,
        address: String::new(),
    };
    BufReader::new(stdout)
        .read_line(&mut line)
        .map_err(|e| format!("model-server: {e}"))?;
    server.address = line
        .trim()
        .strip_prefix("http://")
        .ok_or_else(|| format!("model-server printed {line:?}, not its URL"))?
        .to_string();
    Ok(server)
}

/// POSTs `body` to `path` and returns the answer's status.
fn post(server: &Server, path: &str, body: &str) -> Result<u16, String> {
    let mut stream = TcpStream::connect(&server.address).map_err(|e| e.to_string())?;
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        server.address,
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).map_err(|e| e.to_string())?;
    let head = String::from_utf8_lossy(&answer);
    head.split_whitespace()
        .nth(1)
        .and_then(|status| status.parse().ok())
        .ok_or_else(|| format!("no HTTP status in the answer to POST {path}"))
}

/// `VmRSS` or `VmHWM` of the server, in KiB.
fn status_kib(server: &Server, field: &str) -> Result<u64, String> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id()))
        .map_err(|e| e.to_string())?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| format!("no {field} in /proc status"))
}

pub fn rows(kit: &Kit) -> Result<Vec<Figure>, String> {
    let server = start(kit)?;
    let hello =
        r#"{"model":"deepseek-chat","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    post(&server, "/chat/completions", hello)?;
    let rest = status_kib(&server, "VmRSS:")?;
    let mut objects = String::from(r#"{"model":"deepseek-chat","max_tokens":1,"messages":["#);
    objects.push_str(&[r#"{"a":0}"#; 1_000_000].join(","));
    objects.push_str("]}");
    let mut statuses = Vec::new();
    for path in ["/chat/completions", "/v1/messages"] {
        statuses.push(format!("{}", post(&server, path, &objects)?));
    }
    let peak = status_kib(&server, "VmHWM:")?;
    eprintln!(
        "xtask: bench model-server: answered {} to the 8 MB of small objects",
        statuses.join(" and ")
    );
    let mib = |kib: u64| kib as f64 / 1024.0;
    Ok(vec![Figure {
        name: "model-server peak RSS through an 8 MB POST of a million small JSON objects, \
               on each route"
            .into(),
        value: format!("{:.1} MiB (answered {})", mib(peak), statuses.join(", ")),
        baseline: format!("{:.1} MiB at rest", mib(rest)),
        ratio: format!("{:.2}x", peak as f64 / rest.max(1) as f64),
        goal: "< 64 MiB".into(),
    }])
}
