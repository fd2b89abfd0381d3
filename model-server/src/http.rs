//! Just enough HTTP/1.1 for one request per connection, every input bounded: the request head
//! (its size, checked line by line, so a line with no newline cannot grow memory), the `Host` and
//! `Origin` (loopback only, checked before any body is read), and a body sized by
//! `Content-Length` or sent chunked (its size, each chunk-size line, and the bytes of every body in
//! flight together). A request that breaks a bound gets an [`HttpError`] with the status to answer
//! (400, 403, 413, 431, 503), never a panic. Replies carry a length, or are a chunked event stream
//! that can be cut in the middle of a chunk; every write is bounded in time; every reply closes
//! the connection.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The most bytes of a chunk-size line (hex digits and extensions); a real one is a few bytes.
const MAX_CHUNK_LINE: usize = 1024;
/// After an error reply, the most bytes read and thrown away before closing, so the client sees
/// the reply rather than a reset.
const MAX_DRAIN: u64 = 1024 * 1024;
/// After an error reply, how long the drain may take.
const DRAIN_TIME: Duration = Duration::from_millis(500);

/// A request the server will not serve, and the status that says why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError {
    pub status: u16,
    pub message: String,
    /// The request's path, when its head was read (so the refusal can speak its route's dialect).
    pub path: Option<String>,
}

impl HttpError {
    fn new(status: u16, message: impl Into<String>) -> HttpError {
        HttpError {
            status,
            message: message.into(),
            path: None,
        }
    }

    /// This error, about a request for `path`.
    fn on(mut self, path: &str) -> HttpError {
        self.path = Some(path.to_string());
        self
    }
}

/// The bounds of one request.
#[derive(Debug, Clone)]
pub struct RequestBounds {
    /// The request line and headers together (431 beyond).
    pub max_head_bytes: usize,
    /// One body (413 beyond).
    pub max_body_bytes: usize,
    /// The bodies of every connection together: what a body takes from it is returned when its
    /// request is done (503 when it would run out).
    pub in_flight: Arc<Semaphore>,
}

/// One parsed request; it holds its body's share of the in-flight budget until dropped.
#[derive(Debug)]
pub struct Request {
    pub method: String,
    pub path: String,
    headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    _budget: Option<OwnedSemaphorePermit>,
}

impl Request {
    /// A header's value (names compare case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// Every value of a header.
    fn headers_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers
            .iter()
            .filter(move |(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// Reads one request; `Ok(None)` when the client closed before sending anything.
pub async fn read_request<R: AsyncBufRead + Unpin>(
    stream: &mut R,
    bounds: &RequestBounds,
) -> Result<Option<Request>, HttpError> {
    let Some(head) = read_head(stream, bounds.max_head_bytes).await? else {
        return Ok(None);
    };
    let mut request = parse_head(&head)?;
    check_loopback(&request).map_err(|error| error.on(&request.path))?;
    let (body, budget) = read_body(stream, &request, bounds)
        .await
        .map_err(|error| error.on(&request.path))?;
    request.body = body;
    request._budget = budget;
    Ok(Some(request))
}

/// The head up to and including its empty line, at most `max` bytes.
async fn read_head<R: AsyncBufRead + Unpin>(
    stream: &mut R,
    max: usize,
) -> Result<Option<Vec<u8>>, HttpError> {
    let mut head = Vec::new();
    loop {
        let before = head.len();
        let line = read_line_bounded(stream, &mut head, max).await;
        match line {
            Err(LineError::TooLong) => {
                return Err(HttpError::new(
                    431,
                    format!("request head over {max} bytes"),
                ))
            }
            Err(LineError::Io(error)) => {
                return Err(HttpError::new(
                    400,
                    format!("reading the request head: {error}"),
                ))
            }
            Err(LineError::Closed) if head.is_empty() => return Ok(None),
            Err(LineError::Closed) => {
                return Err(HttpError::new(
                    400,
                    "connection closed inside the request head",
                ))
            }
            Ok(()) => {}
        }
        if head[before..] == *b"\r\n" || head[before..] == *b"\n" {
            return Ok(Some(head));
        }
    }
}

enum LineError {
    TooLong,
    Closed,
    Io(std::io::Error),
}

/// Appends one line (through its `\n`) to `buffer`, which may hold at most `max` bytes in all:
/// reading stops at the bound whether or not a newline came.
async fn read_line_bounded<R: AsyncBufRead + Unpin>(
    stream: &mut R,
    buffer: &mut Vec<u8>,
    max: usize,
) -> Result<(), LineError> {
    let room = (max + 1).saturating_sub(buffer.len()) as u64;
    let read = (&mut *stream)
        .take(room)
        .read_until(b'\n', buffer)
        .await
        .map_err(LineError::Io)?;
    if buffer.len() > max {
        Err(LineError::TooLong)
    } else if read == 0 || buffer.last() != Some(&b'\n') {
        Err(LineError::Closed)
    } else {
        Ok(())
    }
}

fn parse_head(head: &[u8]) -> Result<Request, HttpError> {
    let head =
        std::str::from_utf8(head).map_err(|_| HttpError::new(400, "request head is not UTF-8"))?;
    let mut lines = head.lines();
    let mut start = lines.next().unwrap_or_default().split_whitespace();
    let (Some(method), Some(path)) = (start.next(), start.next()) else {
        return Err(HttpError::new(400, "malformed request line"));
    };
    let headers = lines
        .filter(|line| !line.is_empty())
        .map(|line| {
            line.split_once(':')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| HttpError::new(400, format!("malformed header line {line:?}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Request {
        method: method.to_string(),
        path: path.to_string(),
        headers,
        body: Vec::new(),
        _budget: None,
    })
}

/// Refuses a request not addressed to loopback (`Host`: DNS rebinding) or sent by a web page of
/// another origin (`Origin`: a browser's cross-origin POST), before its body is read.
fn check_loopback(request: &Request) -> Result<(), HttpError> {
    let hosts: Vec<&str> = request.headers_named("host").collect();
    match hosts.as_slice() {
        [host] if is_loopback_authority(host) => {}
        [host] => {
            return Err(HttpError::new(
                400,
                format!("Host {host:?} is not loopback (127.0.0.1, localhost or [::1])"),
            ))
        }
        [] => return Err(HttpError::new(400, "no Host header")),
        _ => return Err(HttpError::new(400, "more than one Host header")),
    }
    for origin in request.headers_named("origin") {
        let loopback = origin
            .strip_prefix("http://")
            .is_some_and(is_loopback_authority);
        if !loopback {
            return Err(HttpError::new(
                403,
                format!("Origin {origin:?} is not a loopback http origin"),
            ));
        }
    }
    Ok(())
}

/// Whether `authority` (`host[:port]`) names the loopback host.
fn is_loopback_authority(authority: &str) -> bool {
    let (host, port) = match authority.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((host, tail)) => (
                host,
                tail.strip_prefix(':').or(tail.is_empty().then_some("")),
            ),
            None => return false,
        },
        None => match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, Some("")),
        },
    };
    let port_ok = port.is_some_and(|port| port.bytes().all(|byte| byte.is_ascii_digit()));
    let host = host.to_ascii_lowercase();
    port_ok && matches!(host.as_str(), "127.0.0.1" | "localhost" | "::1")
}

type Body = (Vec<u8>, Option<OwnedSemaphorePermit>);

async fn read_body<R: AsyncBufRead + Unpin>(
    stream: &mut R,
    request: &Request,
    bounds: &RequestBounds,
) -> Result<Body, HttpError> {
    let encodings: Vec<&str> = request.headers_named("transfer-encoding").collect();
    let lengths: Vec<&str> = request.headers_named("content-length").collect();
    match (encodings.as_slice(), lengths.as_slice()) {
        ([], []) => Ok((Vec::new(), None)),
        ([], [length]) => read_sized(stream, length, bounds).await,
        ([encoding], []) if encoding.eq_ignore_ascii_case("chunked") => {
            read_chunked(stream, bounds).await
        }
        ([encoding], []) => Err(HttpError::new(
            400,
            format!("unsupported Transfer-Encoding {encoding:?} (only \"chunked\")"),
        )),
        ([], _) => Err(HttpError::new(400, "more than one Content-Length header")),
        _ => Err(HttpError::new(
            400,
            "Transfer-Encoding with Content-Length, or more than one Transfer-Encoding",
        )),
    }
}

async fn read_sized<R: AsyncBufRead + Unpin>(
    stream: &mut R,
    length: &str,
    bounds: &RequestBounds,
) -> Result<Body, HttpError> {
    let length: u64 = length
        .parse()
        .map_err(|_| HttpError::new(400, format!("bad Content-Length {length:?}")))?;
    let length = within_body_bound(length, 0, bounds)?;
    let budget = take_budget(bounds, length)?;
    let mut body = Vec::new();
    (&mut *stream)
        .take(length as u64)
        .read_to_end(&mut body)
        .await
        .map_err(|e| HttpError::new(400, format!("reading a {length}-byte body: {e}")))?;
    if body.len() < length {
        return Err(HttpError::new(
            400,
            format!(
                "connection closed after {} of {length} body bytes",
                body.len()
            ),
        ));
    }
    Ok((body, Some(budget)))
}

/// `size` more body bytes after `so_far`, as a `usize`, or 413.
fn within_body_bound(size: u64, so_far: usize, bounds: &RequestBounds) -> Result<usize, HttpError> {
    let max = bounds.max_body_bytes;
    match usize::try_from(size) {
        Ok(size) if size <= max.saturating_sub(so_far) => Ok(size),
        _ => Err(HttpError::new(
            413,
            format!("a body over {max} bytes ({so_far} read, {size} more announced)"),
        )),
    }
}

/// `bytes` of the in-flight budget, or 503.
fn take_budget(bounds: &RequestBounds, bytes: usize) -> Result<OwnedSemaphorePermit, HttpError> {
    let busy = || {
        HttpError::new(
            503,
            "too many request-body bytes in flight on this server; retry when others finish",
        )
    };
    let bytes = u32::try_from(bytes).map_err(|_| busy())?;
    Arc::clone(&bounds.in_flight)
        .try_acquire_many_owned(bytes)
        .map_err(|_| busy())
}

async fn read_chunked<R: AsyncBufRead + Unpin>(
    stream: &mut R,
    bounds: &RequestBounds,
) -> Result<Body, HttpError> {
    let mut body = Vec::new();
    let mut budget = take_budget(bounds, 0)?;
    loop {
        let size = read_chunk_size(stream).await?;
        if size == 0 {
            skip_trailers(stream, bounds.max_head_bytes).await?;
            return Ok((body, Some(budget)));
        }
        let size = within_body_bound(size, body.len(), bounds)?;
        budget.merge(take_budget(bounds, size)?);
        let read = (&mut *stream)
            .take(size as u64)
            .read_to_end(&mut body)
            .await
            .map_err(|e| HttpError::new(400, format!("reading a {size}-byte chunk: {e}")))?;
        let mut end = [0u8; 2];
        let ended = stream.read_exact(&mut end).await.is_ok() && end == *b"\r\n";
        if read < size || !ended {
            return Err(HttpError::new(
                400,
                format!("a {size}-byte chunk cut short or not followed by CRLF"),
            ));
        }
    }
}

/// One chunk-size line (`HEX[;extensions]`), at most [`MAX_CHUNK_LINE`] bytes.
async fn read_chunk_size<R: AsyncBufRead + Unpin>(stream: &mut R) -> Result<u64, HttpError> {
    let mut line = Vec::new();
    match read_line_bounded(stream, &mut line, MAX_CHUNK_LINE).await {
        Ok(()) => {}
        Err(LineError::TooLong) => {
            return Err(HttpError::new(
                400,
                format!("chunk-size line over {MAX_CHUNK_LINE} bytes"),
            ))
        }
        Err(LineError::Closed) => {
            return Err(HttpError::new(
                400,
                "connection closed inside a chunk-size line",
            ))
        }
        Err(LineError::Io(error)) => {
            return Err(HttpError::new(
                400,
                format!("reading a chunk size: {error}"),
            ))
        }
    }
    let text = String::from_utf8_lossy(&line);
    let hex = text.split(';').next().unwrap_or_default().trim();
    if hex.is_empty() || !hex.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return Err(HttpError::new(400, format!("bad chunk-size line {text:?}")));
    }
    // More than 16 hex digits overflows u64: no bound would admit it anyway.
    Ok(u64::from_str_radix(hex, 16).unwrap_or(u64::MAX))
}

/// The trailer section after the last chunk, through its empty line.
async fn skip_trailers<R: AsyncBufRead + Unpin>(
    stream: &mut R,
    max: usize,
) -> Result<(), HttpError> {
    let mut trailers = Vec::new();
    loop {
        let before = trailers.len();
        match read_line_bounded(stream, &mut trailers, max).await {
            Ok(()) if trailers[before..] == *b"\r\n" || trailers[before..] == *b"\n" => {
                return Ok(())
            }
            Ok(()) => {}
            Err(LineError::TooLong) => {
                return Err(HttpError::new(431, format!("trailers over {max} bytes")))
            }
            Err(_) => return Err(HttpError::new(400, "connection closed inside the trailers")),
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

/// Runs one write, failing with `TimedOut` after `limit` (a client that stops reading).
async fn timed<T>(
    limit: Duration,
    write: impl Future<Output = std::io::Result<T>>,
) -> std::io::Result<T> {
    tokio::time::timeout(limit, write)
        .await
        .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
}

/// A whole reply with a `Content-Length` (it closes the connection).
pub fn whole_reply(status: u16, body: &str) -> String {
    format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        reason(status),
        body.len()
    )
}

/// Writes a whole reply within `limit` and closes the connection.
pub async fn write_whole<W: AsyncWrite + Unpin>(
    stream: &mut W,
    status: u16,
    body: &str,
    limit: Duration,
) -> std::io::Result<()> {
    timed(
        limit,
        stream.write_all(whole_reply(status, body).as_bytes()),
    )
    .await?;
    timed(limit, stream.shutdown()).await
}

/// Answers a refused request, then reads and discards what the client is still sending (bounded
/// in bytes and time) so that it sees the reply rather than a reset.
pub async fn write_refusal<S: AsyncBufRead + AsyncWrite + Unpin>(
    stream: &mut S,
    status: u16,
    body: &str,
    limit: Duration,
) {
    if write_whole(stream, status, body, limit).await.is_ok() {
        let mut rest = (&mut *stream).take(MAX_DRAIN);
        let mut sink = tokio::io::sink();
        tokio::time::timeout(DRAIN_TIME, tokio::io::copy(&mut rest, &mut sink))
            .await
            .ok();
    }
}

/// An event stream in progress: chunked transfer encoding, one chunk per event.
pub struct EventStream<'a, W> {
    stream: &'a mut W,
    limit: Duration,
}

impl<'a, W: AsyncWrite + Unpin> EventStream<'a, W> {
    /// Writes the `200` head of a `text/event-stream` reply; each write gets `limit`.
    pub async fn start(stream: &'a mut W, limit: Duration) -> std::io::Result<EventStream<'a, W>> {
        let head =
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
                  Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
        timed(limit, stream.write_all(head)).await?;
        Ok(EventStream { stream, limit })
    }

    /// Sends one event as one chunk.
    pub async fn event(&mut self, event: &str) -> std::io::Result<()> {
        let chunk = format!("{:x}\r\n{event}\r\n", event.len());
        timed(self.limit, self.stream.write_all(chunk.as_bytes())).await?;
        timed(self.limit, self.stream.flush()).await
    }

    /// Announces `event` whole but sends only its first half, then closes: a stream cut mid-event.
    pub async fn cut(self, event: &str) -> std::io::Result<()> {
        let half = &event.as_bytes()[..event.len() / 2];
        let mut bytes = format!("{:x}\r\n", event.len()).into_bytes();
        bytes.extend_from_slice(half);
        timed(self.limit, self.stream.write_all(&bytes)).await?;
        timed(self.limit, self.stream.flush()).await?;
        timed(self.limit, self.stream.shutdown()).await
    }

    /// Ends the stream properly.
    pub async fn finish(self) -> std::io::Result<()> {
        timed(self.limit, self.stream.write_all(b"0\r\n\r\n")).await?;
        timed(self.limit, self.stream.shutdown()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(max_body_bytes: usize, in_flight: usize) -> RequestBounds {
        RequestBounds {
            max_head_bytes: 1024,
            max_body_bytes,
            in_flight: Arc::new(Semaphore::new(in_flight)),
        }
    }

    fn read(bytes: &[u8], bounds: &RequestBounds) -> Result<Option<Request>, HttpError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut reader = bytes;
        runtime.block_on(read_request(&mut reader, bounds))
    }

    fn status(bytes: &[u8], bounds: &RequestBounds) -> u16 {
        read(bytes, bounds)
            .map(|_| 200)
            .unwrap_or_else(|error| error.status)
    }

    const POST: &str = "POST /chat/completions HTTP/1.1\r\nHost: 127.0.0.1:9\r\n";

    #[test]
    fn a_sized_and_a_chunked_body_are_read_whole() {
        let request = read(
            format!("{POST}Content-Length: 5\r\n\r\nhello").as_bytes(),
            &bounds(100, 100),
        );
        assert_eq!(request.unwrap().unwrap().body, b"hello");
        let chunked = format!(
            "{POST}Transfer-Encoding: chunked\r\n\r\n3;x=y\r\nhel\r\n2\r\nlo\r\n0\r\nT: 1\r\n\r\n"
        );
        let request = read(chunked.as_bytes(), &bounds(100, 100))
            .unwrap()
            .unwrap();
        assert_eq!(request.body, b"hello");
        assert!(read(b"", &bounds(100, 100)).unwrap().is_none());
    }

    #[test]
    fn an_endless_head_line_is_431_not_a_growing_buffer() {
        let mut endless = b"POST /".to_vec();
        endless.extend(std::iter::repeat_n(b'a', 64 * 1024));
        assert_eq!(status(&endless, &bounds(100, 100)), 431);
        let many_headers = format!("{POST}{}\r\n", "X-A: b\r\n".repeat(200));
        assert_eq!(status(many_headers.as_bytes(), &bounds(100, 100)), 431);
    }

    #[test]
    fn a_huge_or_endless_chunk_size_is_refused_without_overflow() {
        let chunked = format!("{POST}Transfer-Encoding: chunked\r\n\r\n");
        let huge = format!("{chunked}ffffffffffffffff\r\nabc");
        assert_eq!(status(huge.as_bytes(), &bounds(100, 100)), 413);
        let overflowing = format!("{chunked}fffffffffffffffffffff\r\nabc");
        assert_eq!(status(overflowing.as_bytes(), &bounds(100, 100)), 413);
        let endless = format!("{chunked}{}", "f".repeat(64 * 1024));
        assert_eq!(status(endless.as_bytes(), &bounds(100, 100)), 400);
        let over = format!(
            "{chunked}40\r\n{}\r\n40\r\n{}\r\n0\r\n\r\n",
            "a".repeat(64),
            "b".repeat(64)
        );
        assert_eq!(status(over.as_bytes(), &bounds(100, 100)), 413);
        let bad = format!("{chunked}+5\r\nhello\r\n0\r\n\r\n");
        assert_eq!(status(bad.as_bytes(), &bounds(100, 100)), 400);
    }

    #[test]
    fn a_body_over_its_bound_is_413_and_over_the_shared_budget_503() {
        let big = format!("{POST}Content-Length: 18446744073709551615\r\n\r\n");
        assert_eq!(status(big.as_bytes(), &bounds(100, 1000)), 413);
        let fits = format!("{POST}Content-Length: 50\r\n\r\n{}", "a".repeat(50));
        let shared = bounds(100, 60);
        let held = read(fits.as_bytes(), &shared).unwrap().unwrap();
        assert_eq!(status(fits.as_bytes(), &shared), 503);
        drop(held);
        assert_eq!(status(fits.as_bytes(), &shared), 200);
        let short = format!("{POST}Content-Length: 50\r\n\r\nabc");
        assert_eq!(status(short.as_bytes(), &shared), 400);
        let refused = read(big.as_bytes(), &shared).unwrap_err();
        assert_eq!(refused.path.as_deref(), Some("/chat/completions"));
    }

    #[test]
    fn only_loopback_hosts_and_origins_are_served() {
        let with = |headers: &str| {
            let text = format!("POST / HTTP/1.1\r\n{headers}\r\n");
            status(text.as_bytes(), &bounds(100, 100))
        };
        assert_eq!(with("Host: 127.0.0.1:4000\r\n"), 200);
        assert_eq!(with("Host: localhost\r\n"), 200);
        assert_eq!(with("Host: [::1]:80\r\n"), 200);
        assert_eq!(
            with("Host: LOCALHOST:1\r\nOrigin: http://127.0.0.1:3000\r\n"),
            200
        );
        assert_eq!(with(""), 400);
        assert_eq!(with("Host: evil.example\r\n"), 400);
        assert_eq!(with("Host: 127.0.0.1.evil.example:80\r\n"), 400);
        assert_eq!(with("Host: 127.0.0.1\r\nHost: evil.example\r\n"), 400);
        assert_eq!(
            with("Host: 127.0.0.1\r\nOrigin: https://evil.example\r\n"),
            403
        );
        assert_eq!(with("Host: 127.0.0.1\r\nOrigin: null\r\n"), 403);
    }

    #[test]
    fn smuggling_shapes_are_400() {
        let both = format!("{POST}Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert_eq!(status(both.as_bytes(), &bounds(100, 100)), 400);
        let two = format!("{POST}Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd");
        assert_eq!(status(two.as_bytes(), &bounds(100, 100)), 400);
        let gzip = format!("{POST}Transfer-Encoding: gzip\r\n\r\n");
        assert_eq!(status(gzip.as_bytes(), &bounds(100, 100)), 400);
    }
}
