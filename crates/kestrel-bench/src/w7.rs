//! W7: concurrent SSE streams of W2 over loopback, from a separate client process.
//!
//! `kestrel-bench w7 [STREAMS]` serves the W2 agent on a free loopback port, starts itself
//! again as the client (`w7-client ADDR STREAMS`), which opens every stream at once and reports
//! the time to the first event of each (p50, p99; from its request written, and from its task's
//! start with the connection's set-up), how many streams completed (ended with
//! `data: [DONE]` after a `finish` event; a stream the server refuses counts as failed) and
//! the wall time; then the server prints its own peak RSS (VmHWM), which the client's memory
//! does not inflate.

use std::time::{Duration, Instant};

use kestrel::prelude::*;
use kestrel::server::Server;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The server side.
pub async fn w7(streams: usize) -> Result<(), Box<dyn std::error::Error>> {
    let agent = super::w2_agent(None)?;
    let kestrel = Kestrel::builder().agent(agent).build()?;
    // One caller opens every stream, on a server without tokens (one count for all): its
    // bound on open streams per token (64 by default) is raised to the streams measured.
    let server = Server::new(kestrel).max_streams_per_token(streams);
    let (listener, addr) = server.bind("127.0.0.1:0".parse()?).await?;
    tokio::spawn(server.serve_on(listener, addr));
    let output = tokio::process::Command::new(std::env::current_exe()?)
        .args(["w7-client", &addr.to_string(), &streams.to_string()])
        .output()
        .await?;
    print!("{}", String::from_utf8_lossy(&output.stdout));
    if !output.status.success() {
        return Err(format!(
            "the client failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    println!(
        "w7 server: peak RSS {:.1} MB",
        super::peak_rss_mb().unwrap_or(f64::NAN)
    );
    Ok(())
}

/// What one stream measured.
struct Timing {
    /// From the request written to the first event (the server's answer time, as load tools'
    /// "time to first byte").
    first_event: Duration,
    /// From the task's start (connecting included) to the first event.
    with_connect: Duration,
    completed: bool,
}

/// One stream over a plain TCP connection (a hand-written HTTP/1.1 request, the response read
/// as bytes), so the client spends as little of the shared CPU as a client can.
async fn one(addr: std::net::SocketAddr, request: std::sync::Arc<[u8]>) -> Result<Timing, Error> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let started = Instant::now();
    let mut tcp = tokio::net::TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    tcp.write_all(&request).await?;
    let sent = Instant::now();
    let mut seen: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut buf = [0u8; 8192];
    let mut first = None;
    loop {
        let n = tcp.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        seen.extend_from_slice(&buf[..n]);
        // Refused (429, say): the connection stays open, so nothing more would end the read.
        if seen.len() >= 12 && !seen.starts_with(b"HTTP/1.1 200") {
            let head = String::from_utf8_lossy(&seen[..seen.len().min(64)]).into_owned();
            return Err(format!("the server refused the stream: {head:?}").into());
        }
        if first.is_none() && contains(&seen, b"data: ") {
            first = Some(Instant::now());
        }
        // The server keeps the connection open: the last event ends the stream.
        if contains(&seen[seen.len().saturating_sub(n + 32)..], b"data: [DONE]") {
            break;
        }
    }
    let completed = contains(&seen, br#""type":"finish""#) && contains(&seen, b"data: [DONE]");
    let first = first.unwrap_or_else(Instant::now);
    Ok(Timing {
        first_event: first - sent,
        with_connect: first - started,
        completed,
    })
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The client side: `streams` streams at once against `addr`.
pub async fn w7_client(addr: &str, streams: usize) -> Result<(), Box<dyn std::error::Error>> {
    let addr: std::net::SocketAddr = addr.parse()?;
    let body = r#"{"messages":"What is 2 + 3?"}"#;
    let request: std::sync::Arc<[u8]> = format!(
        "POST /api/agents/w2/stream HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
    .into();
    let started = Instant::now();
    let tasks: Vec<_> = (0..streams)
        .map(|_| tokio::spawn(one(addr, request.clone())))
        .collect();
    let mut firsts = Vec::with_capacity(streams);
    let mut with_connect = Vec::with_capacity(streams);
    let mut completed = 0;
    let mut failed = 0;
    for task in tasks {
        match task.await? {
            Ok(timing) => {
                firsts.push(timing.first_event);
                with_connect.push(timing.with_connect);
                completed += usize::from(timing.completed);
            }
            Err(error) => {
                failed += 1;
                eprintln!("stream failed: {error}");
            }
        }
    }
    let wall = started.elapsed();
    firsts.sort_unstable();
    with_connect.sort_unstable();
    println!(
        "w7: {streams} concurrent SSE streams of W2, {completed} completed, {failed} failed, \
         first event p50 {:.1} ms, p99 {:.1} ms (with connecting: p50 {:.1} ms, p99 {:.1} ms), \
         wall {:.0} ms",
        super::percentile(&firsts, 0.5) / 1e3,
        super::percentile(&firsts, 0.99) / 1e3,
        super::percentile(&with_connect, 0.5) / 1e3,
        super::percentile(&with_connect, 0.99) / 1e3,
        wall.as_secs_f64() * 1e3
    );
    Ok(())
}
