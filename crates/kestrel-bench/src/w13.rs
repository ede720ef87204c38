//! W13: MCP `tools/call` round trips between Kestrel's client and Kestrel's server, over stdio
//! (the server a child process of this binary, `w13-serve`) and Streamable HTTP (a child
//! process serving the Kestrel server with the MCP server mounted, `w13-serve-http`), in the
//! stateless 2026-07-28 era and the `initialize` era. The tool is `echo` (`{message}` in,
//! `Echo: <message>` out), as server-everything's, so the TypeScript pair of
//! compat-tests/bench/mcp-bench.mjs measures the same calls.
//!
//! Each configuration: a warm-up, then CALLS sequential calls (each timed: p50, p99, calls/s),
//! then CALLS calls from CONCURRENT tasks at once (p50, p99 of each call, calls/s overall), and
//! the server process's peak RSS.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kestrel::kestrel::Kestrel;
use kestrel::mcp::{McpClient, McpServer, McpServerConfig, Protocol};
use kestrel::prelude::*;
use kestrel::server::Server;
use kestrel::tool::SharedTool;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

type Error = Box<dyn std::error::Error>;

/// Input of `echo`.
#[derive(Deserialize, JsonSchema)]
struct Echo {
    /// What to echo.
    message: String,
}

fn server() -> Result<McpServer, Error> {
    let echo = create_tool("echo")
        .description("Echoes back the input")
        .execute(|input: Echo, _ctx| async move { Ok(format!("Echo: {}", input.message)) });
    Ok(McpServer::builder("bench").tool(echo).build()?)
}

/// `w13-serve`: the server on stdio.
pub async fn serve_stdio() -> Result<(), Error> {
    server()?.serve_stdio().await?;
    Ok(())
}

/// `w13-serve-http PORT`: the Kestrel server with the MCP server at `/api/mcp/bench/mcp`.
pub async fn serve_http(port: u16) -> Result<(), Error> {
    let http = Server::new(Kestrel::builder().build()?).mcp_server(server()?);
    let (listener, bound) = http.bind(([127, 0, 0, 1], port).into()).await?;
    http.serve_on(listener, bound).await?;
    Ok(())
}

/// The peak RSS of process `pid` in MB (VmHWM).
fn peak_rss_mb(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// The pid of the child of this process whose command line ends with `arg`.
fn child_with(arg: &str) -> Option<u32> {
    let me = std::process::id().to_string();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1).map(str::to_owned));
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        if parent.as_deref() == Some(me.as_str()) && cmdline.trim_end_matches('\0').ends_with(arg) {
            return Some(pid);
        }
    }
    None
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index].as_secs_f64() * 1000.0
}

async fn one_call(echo: &SharedTool) -> Result<Duration, Error> {
    let started = Instant::now();
    let answer = echo
        .execute(
            json!({"message": "hi"}),
            ToolContext::standalone("bench_echo"),
        )
        .await
        .map_err(|e| e.message().to_owned())?;
    if answer != json!("Echo: hi") {
        return Err(format!("unexpected answer {answer}").into());
    }
    Ok(started.elapsed())
}

async fn measure(
    label: &str,
    mcp: &McpClient,
    calls: usize,
    concurrent: usize,
    server_pid: Option<u32>,
) -> Result<(), Error> {
    let connecting = Instant::now();
    let tools = mcp.list_tools().await?;
    let connect_ms = connecting.elapsed().as_secs_f64() * 1000.0;
    let echo = tools
        .into_iter()
        .find(|t| t.id() == "bench_echo")
        .ok_or("no bench_echo tool")?;
    for _ in 0..200 {
        one_call(&echo).await?;
    }
    let started = Instant::now();
    let mut times = Vec::with_capacity(calls);
    for _ in 0..calls {
        times.push(one_call(&echo).await?);
    }
    let sequential = started.elapsed();
    times.sort();
    println!(
        "w13 {label} sequential: p50 {:.3} ms, p99 {:.3} ms, {:.0} calls/s over {calls} calls (connect + list {connect_ms:.1} ms)",
        percentile(&times, 0.5),
        percentile(&times, 0.99),
        calls as f64 / sequential.as_secs_f64(),
    );
    let per_task = calls / concurrent;
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrent)
        .map(|_| {
            let echo = Arc::clone(&echo);
            tokio::spawn(async move {
                let mut times = Vec::with_capacity(per_task);
                for _ in 0..per_task {
                    times.push(one_call(&echo).await.map_err(|e| e.to_string())?);
                }
                Ok::<_, String>(times)
            })
        })
        .collect();
    let mut times = Vec::with_capacity(calls);
    for task in tasks {
        times.extend(task.await??);
    }
    let overall = started.elapsed();
    times.sort();
    let rss = server_pid
        .and_then(peak_rss_mb)
        .map(|mb| format!(", server peak RSS {mb:.1} MB"))
        .unwrap_or_default();
    println!(
        "w13 {label} {concurrent} concurrent: p50 {:.3} ms, p99 {:.3} ms, {:.0} calls/s over {} calls{rss}",
        percentile(&times, 0.5),
        percentile(&times, 0.99),
        times.len() as f64 / overall.as_secs_f64(),
        times.len(),
    );
    Ok(())
}

/// `w13 [CALLS] [CONCURRENT]`.
pub async fn w13(calls: usize, concurrent: usize) -> Result<(), Error> {
    let exe = std::env::current_exe()?;
    for (label, protocol) in [
        ("stdio 2026-07-28", Protocol::Stateless),
        ("stdio 2025-11-25", Protocol::Legacy),
    ] {
        let mcp = McpClient::builder()
            .server(
                "bench",
                McpServerConfig::stdio(exe.to_string_lossy())
                    .arg("w13-serve")
                    .protocol(protocol),
            )
            .build()?;
        // The child starts with the first call.
        mcp.list_tools().await?;
        let pid = child_with("w13-serve");
        measure(label, &mcp, calls, concurrent, pid).await?;
        mcp.disconnect().await;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut child = tokio::process::Command::new(&exe)
        .args(["w13-serve-http", &port.to_string()])
        .kill_on_drop(true)
        .spawn()?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        if Instant::now() > deadline {
            return Err("the HTTP server did not listen".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let url = format!("http://127.0.0.1:{port}/api/mcp/bench/mcp");
    for (label, protocol) in [
        ("http 2026-07-28", Protocol::Stateless),
        ("http 2025-11-25", Protocol::Legacy),
    ] {
        let mcp = McpClient::builder()
            .server("bench", McpServerConfig::http(&url).protocol(protocol))
            .build()?;
        measure(label, &mcp, calls, concurrent, child.id()).await?;
        mcp.disconnect().await;
    }
    child.kill().await?;
    Ok(())
}
