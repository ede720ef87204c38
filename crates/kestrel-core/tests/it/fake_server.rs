//! A scripted HTTP server on 127.0.0.1 for provider tests: it replays queued replies (streamed in
//! chunks, optionally with pauses or hanging forever) and records the requests it received.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use futures::StreamExt;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One piece of a scripted response body.
#[derive(Clone, Debug)]
pub enum Step {
    /// Send these bytes as one body chunk.
    Chunk(String),
    /// Wait before the next step.
    Pause(Duration),
    /// Never send anything more (the connection stays open).
    Hang,
}

/// A scripted response.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub steps: Vec<Step>,
}

impl Reply {
    /// A 200 event stream sending each item as its own chunk, verbatim.
    pub fn sse<S: Into<String>>(chunks: impl IntoIterator<Item = S>) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            steps: chunks.into_iter().map(|c| Step::Chunk(c.into())).collect(),
        }
    }

    /// A JSON response.
    pub fn json(status: u16, body: Value) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            steps: vec![Step::Chunk(body.to_string())],
        }
    }

    /// A plain-text response.
    pub fn text(status: u16, body: &str) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "text/plain".into())],
            steps: vec![Step::Chunk(body.into())],
        }
    }

    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// After the scripted chunks, keep the connection open without sending anything.
    pub fn then_hang(mut self) -> Self {
        self.steps.push(Step::Hang);
        self
    }
}

/// A request the server received.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub path: String,
    /// Header names lowercased.
    pub headers: HashMap<String, String>,
    pub body: Value,
}

#[derive(Default)]
struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Recorded>>,
}

/// The running server; it stops when the test's runtime ends.
pub struct FakeServer {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    shared: Arc<Shared>,
}

impl FakeServer {
    /// Starts a server that answers successive requests with `replies`, then with 500s.
    pub async fn start(replies: Vec<Reply>) -> Self {
        let shared = Arc::new(Shared {
            replies: Mutex::new(replies.into()),
            requests: Mutex::default(),
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self { url, shared }
    }

    /// `url` followed by `suffix`, e.g. `/v1`.
    pub fn base(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.url)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }

    pub fn request_count(&self) -> usize {
        self.shared.requests.lock().unwrap().len()
    }

    /// The only request received.
    pub fn single_request(&self) -> Recorded {
        let requests = self.requests();
        assert_eq!(requests.len(), 1, "expected exactly one request");
        requests.into_iter().next().unwrap()
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let headers = headers
        .iter()
        .map(|(n, v)| (n.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    shared.requests.lock().unwrap().push(Recorded {
        path: uri.path().to_string(),
        headers,
        body,
    });
    let reply = shared
        .replies
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or_else(|| Reply::text(500, "no scripted reply left"));
    let mut response = Response::builder().status(StatusCode::from_u16(reply.status).unwrap());
    for (name, value) in &reply.headers {
        response = response.header(name, value);
    }
    let body = futures::stream::iter(reply.steps)
        .then(|step| async move {
            match step {
                Step::Chunk(text) => Some(Ok::<_, Infallible>(Bytes::from(text))),
                Step::Pause(duration) => {
                    tokio::time::sleep(duration).await;
                    None
                }
                Step::Hang => futures::future::pending().await,
            }
        })
        .filter_map(|item| async move { item });
    response.body(Body::from_stream(body)).unwrap()
}

/// A raw server that answers one request with a chunked event stream holding `partial_body`,
/// then drops the connection without the terminating chunk. Returns its `http://` URL.
pub async fn cut_connection_server(partial_body: &str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let partial_body = partial_body.to_string();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        read_request(&mut socket).await;
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        let chunk = format!("{:x}\r\n{partial_body}\r\n", partial_body.len());
        socket.write_all(head.as_bytes()).await.unwrap();
        socket.write_all(chunk.as_bytes()).await.unwrap();
        socket.flush().await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(socket);
    });
    url
}

/// Reads one HTTP/1.1 request (head and `content-length` body) so that closing the socket
/// afterwards is a clean close rather than a reset.
async fn read_request(socket: &mut tokio::net::TcpStream) {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = socket.read(&mut buf).await.unwrap();
        if n == 0 {
            return;
        }
        data.extend_from_slice(&buf[..n]);
        let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&data[..end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map(|v| v.trim().parse().unwrap())
            .unwrap_or(0);
        if data.len() >= end + 4 + length {
            return;
        }
    }
}

/// A `http://127.0.0.1:<port>` URL where nothing listens.
pub async fn refused_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    url
}
