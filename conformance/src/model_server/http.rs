//! Just enough HTTP/1.1 for one request per connection: the request head and a body sized by
//! `Content-Length` or sent chunked, bounded in size; replies with a length, or a chunked
//! event stream that can be cut in the middle of a chunk. Every reply closes the connection.

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Bounds that keep a misbehaving client from growing memory.
const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 32 * 1024 * 1024;

/// One parsed request.
#[derive(Debug)]
pub struct Request {
    pub method: String,
    pub path: String,
    headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// A header's value (names compare case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// Reads one request; `Ok(None)` when the client closed before sending anything.
pub async fn read_request(stream: &mut BufReader<TcpStream>) -> Result<Option<Request>, String> {
    let mut head = Vec::new();
    loop {
        let before = head.len();
        let read = stream
            .read_until(b'\n', &mut head)
            .await
            .map_err(|e| format!("reading the request head: {e}"))?;
        if read == 0 {
            return if head.is_empty() {
                Ok(None)
            } else {
                Err("connection closed inside the request head".into())
            };
        }
        if head.len() > MAX_HEAD {
            return Err(format!("request head over {MAX_HEAD} bytes"));
        }
        if head[before..] == *b"\r\n" || head[before..] == *b"\n" {
            break;
        }
    }
    let head = String::from_utf8(head).map_err(|_| "request head is not UTF-8".to_string())?;
    let mut lines = head.lines();
    let mut start = lines.next().unwrap_or_default().split_whitespace();
    let (Some(method), Some(path)) = (start.next(), start.next()) else {
        return Err("malformed request line".into());
    };
    let headers = lines
        .filter(|line| !line.is_empty())
        .map(|line| {
            line.split_once(':')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| format!("malformed header line {line:?}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut request = Request {
        method: method.to_string(),
        path: path.to_string(),
        headers,
        body: Vec::new(),
    };
    request.body = read_body(stream, &request).await?;
    Ok(Some(request))
}

async fn read_body(
    stream: &mut BufReader<TcpStream>,
    request: &Request,
) -> Result<Vec<u8>, String> {
    let chunked = request
        .header("transfer-encoding")
        .is_some_and(|value| value.to_ascii_lowercase().contains("chunked"));
    if chunked {
        return read_chunked(stream).await;
    }
    let length: usize = match request.header("content-length") {
        None => return Ok(Vec::new()),
        Some(text) => text
            .parse()
            .map_err(|_| format!("bad Content-Length {text:?}"))?,
    };
    if length > MAX_BODY {
        return Err(format!("body of {length} bytes is over {MAX_BODY}"));
    }
    let mut body = vec![0; length];
    stream
        .read_exact(&mut body)
        .await
        .map_err(|e| format!("reading a {length}-byte body: {e}"))?;
    Ok(body)
}

async fn read_chunked(stream: &mut BufReader<TcpStream>) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let mut size_line = String::new();
        stream
            .read_line(&mut size_line)
            .await
            .map_err(|e| format!("reading a chunk size: {e}"))?;
        let hex = size_line.trim().split(';').next().unwrap_or_default();
        let size = usize::from_str_radix(hex, 16)
            .map_err(|_| format!("bad chunk size line {size_line:?}"))?;
        if body.len() + size > MAX_BODY {
            return Err(format!("chunked body over {MAX_BODY} bytes"));
        }
        let mut chunk = vec![0; size + 2];
        stream
            .read_exact(&mut chunk)
            .await
            .map_err(|e| format!("reading a {size}-byte chunk: {e}"))?;
        if size == 0 {
            return Ok(body);
        }
        body.extend_from_slice(&chunk[..size]);
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

/// Writes a whole reply with a `Content-Length` and closes the connection.
pub async fn write_whole(stream: &mut TcpStream, status: u16, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        reason(status),
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

/// An event stream in progress: chunked transfer encoding, one chunk per event.
pub struct EventStream<'a> {
    stream: &'a mut TcpStream,
}

impl<'a> EventStream<'a> {
    /// Writes the `200` head of a `text/event-stream` reply.
    pub async fn start(stream: &'a mut TcpStream) -> std::io::Result<EventStream<'a>> {
        stream
            .write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
                  Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
            )
            .await?;
        Ok(EventStream { stream })
    }

    /// Sends one event as one chunk.
    pub async fn event(&mut self, event: &str) -> std::io::Result<()> {
        let chunk = format!("{:x}\r\n{event}\r\n", event.len());
        self.stream.write_all(chunk.as_bytes()).await?;
        self.stream.flush().await
    }

    /// Announces `event` whole but sends only its first half, then closes: a stream cut mid-event.
    pub async fn cut(self, event: &str) -> std::io::Result<()> {
        let half = &event.as_bytes()[..event.len() / 2];
        let head = format!("{:x}\r\n", event.len());
        self.stream.write_all(head.as_bytes()).await?;
        self.stream.write_all(half).await?;
        self.stream.flush().await?;
        self.stream.shutdown().await
    }

    /// Ends the stream properly.
    pub async fn finish(self) -> std::io::Result<()> {
        self.stream.write_all(b"0\r\n\r\n").await?;
        self.stream.shutdown().await
    }
}
