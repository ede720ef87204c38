//! Fault injection for Kestrel's tests.
//!
//! [`FaultProxy`] sits between an instance and a service it depends on (Redis, PostgreSQL)
//! and, on command, makes the network fail the ways real networks do:
//!
//! - [`Fault::Refuse`]: every connection is reset, and new ones are reset as they arrive (the
//!   service is down, or a firewall rejects).
//! - [`Fault::BlackHole`]: nothing passes either way and nothing is closed: no FIN, no RST. A
//!   connection caught in it stays dead for good, as a TCP connection across a partition does
//!   until its kernel gives up on it; connections made after the fault is lifted work.
//! - [`Fault::DropAnswers`]: requests reach the service, its answers are lost (the service
//!   commits a write the client never hears about). Connections caught in it stay so.
//!
//! A client that only recovers when its connection breaks loudly hangs behind the last two:
//! that is what they are for.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How a [`FaultProxy`] treats traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fault {
    /// Bytes pass both ways.
    #[default]
    None,
    /// Connections are reset, open ones at once and new ones as they arrive.
    Refuse,
    /// Nothing passes and nothing closes; the connections it catches stay dead.
    BlackHole,
    /// The client's bytes reach the service; the service's are dropped. The connections it
    /// catches stay so.
    DropAnswers,
}

/// A TCP proxy on a loopback port in front of `upstream`, whose [`Fault`] a test sets.
///
/// Dropping it stops it and closes every connection through it.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    upstream: SocketAddr,
    fault: Arc<watch::Sender<Fault>>,
    marker: Marker,
    acceptor: JoinHandle<()>,
}

/// The bytes whose request loses its answer ([`FaultProxy::drop_answers_after`]), once.
type Marker = Arc<std::sync::Mutex<Option<Vec<u8>>>>;

impl FaultProxy {
    /// Starts a proxy to `upstream` on a free loopback port, passing traffic.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let (fault, _) = watch::channel(Fault::None);
        let fault = Arc::new(fault);
        let marker = Marker::default();
        let acceptor = tokio::spawn(accept(
            listener,
            upstream,
            Arc::clone(&fault),
            Arc::clone(&marker),
        ));
        Ok(Self {
            addr,
            upstream,
            fault,
            marker,
            acceptor,
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where the proxy forwards to.
    pub fn upstream(&self) -> SocketAddr {
        self.upstream
    }

    /// `url` with its `host:port` replaced by the proxy's (`redis://127.0.0.1:6379/0` →
    /// `redis://127.0.0.1:<proxy>/0`); `None` when `url` has no authority to replace.
    pub fn url_for(&self, url: &str) -> Option<String> {
        let scheme_end = url.find("://")? + 3;
        let rest = &url[scheme_end..];
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let authority = &rest[..authority_end];
        let host_start = authority.rfind('@').map_or(0, |at| at + 1);
        Some(format!(
            "{}{}{}{}",
            &url[..scheme_end],
            &authority[..host_start],
            self.addr,
            &rest[authority_end..]
        ))
    }

    /// Sets how traffic is treated from now on.
    pub fn set(&self, fault: Fault) {
        tracing::info!(proxy = %self.addr, upstream = %self.upstream, ?fault, "fault proxy");
        self.fault.send_replace(fault);
    }

    /// How traffic is treated now.
    pub fn fault(&self) -> Fault {
        *self.fault.borrow()
    }

    /// Arms a one-shot fault: the first request (a chunk the client sends) that contains
    /// `marker` goes through, and from then on its connection's answers are dropped, as with
    /// [`Fault::DropAnswers`] on that connection alone. For "the write committed, its answer
    /// was lost" at a precise write, after the checks a pool makes before it.
    pub fn drop_answers_after(&self, marker: impl Into<Vec<u8>>) {
        *self.marker.lock().unwrap_or_else(|e| e.into_inner()) = Some(marker.into());
    }

    /// Whether the marker of [`FaultProxy::drop_answers_after`] was met.
    pub fn marker_met(&self) -> bool {
        self.marker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.acceptor.abort();
        // The connections' tasks end with the watch channel's sender.
    }
}

/// The address a `host:port` names, resolved (for [`FaultProxy::start`] from a URL's
/// authority).
pub async fn resolve(authority: &str) -> std::io::Result<SocketAddr> {
    tokio::net::lookup_host(authority)
        .await?
        .next()
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{authority} resolves to no address"),
            )
        })
}

async fn accept(
    listener: TcpListener,
    upstream: SocketAddr,
    fault: Arc<watch::Sender<Fault>>,
    marker: Marker,
) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        let watch = fault.subscribe();
        tokio::spawn(connection(client, upstream, watch, Arc::clone(&marker)));
    }
}

/// Whether `chunk` meets the armed marker (disarming it).
fn meets(marker: &Marker, chunk: &[u8]) -> bool {
    let mut armed = marker.lock().unwrap_or_else(|e| e.into_inner());
    let met = armed
        .as_deref()
        .is_some_and(|m| !m.is_empty() && chunk.windows(m.len()).any(|w| w == m));
    if met {
        *armed = None;
    }
    met
}

/// Resets `stream` (an RST, not a FIN).
fn reset(stream: TcpStream) {
    let _ = stream.set_zero_linger();
    drop(stream);
}

/// One client connection, from its arrival to its end.
async fn connection(
    client: TcpStream,
    upstream: SocketAddr,
    mut fault: watch::Receiver<Fault>,
    marker: Marker,
) {
    let arrived = *fault.borrow_and_update();
    match arrived {
        Fault::Refuse => return reset(client),
        Fault::BlackHole | Fault::DropAnswers => return dead(client, None, fault).await,
        Fault::None => {}
    }
    let Ok(server) = TcpStream::connect(upstream).await else {
        return reset(client);
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    // The answers' direction: dropped from DropAnswers (or the marker's request) on, for good.
    let mut answers_fault = fault.clone();
    let marked = std::sync::atomic::AtomicBool::new(false);
    let marked = &marked;
    let requests = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            tokio::select! {
                read = client_read.read(&mut buf) => {
                    let n = match read { Ok(0) | Err(_) => return Ending::Closed, Ok(n) => n };
                    let now = *fault.borrow();
                    match now {
                        Fault::None | Fault::DropAnswers => {
                            if meets(&marker, &buf[..n]) {
                                marked.store(true, std::sync::atomic::Ordering::SeqCst);
                            }
                            if server_write.write_all(&buf[..n]).await.is_err() {
                                return Ending::Closed;
                            }
                        }
                        Fault::Refuse => return Ending::Reset,
                        Fault::BlackHole => return Ending::Dead,
                    }
                }
                changed = fault.changed() => {
                    if changed.is_err() { return Ending::Closed; }
                    let now = *fault.borrow();
                    match now {
                        Fault::Refuse => return Ending::Reset,
                        Fault::BlackHole => return Ending::Dead,
                        Fault::None | Fault::DropAnswers => {}
                    }
                }
            }
        }
    };
    let answers = async {
        let mut buf = vec![0u8; 16 * 1024];
        let mut dropping = false;
        loop {
            tokio::select! {
                read = server_read.read(&mut buf) => {
                    let n = match read { Ok(0) | Err(_) => return Ending::Closed, Ok(n) => n };
                    let now = *answers_fault.borrow();
                    if dropping
                        || now == Fault::DropAnswers
                        || marked.load(std::sync::atomic::Ordering::SeqCst)
                    {
                        dropping = true;
                        continue;
                    }
                    if client_write.write_all(&buf[..n]).await.is_err() {
                        return Ending::Closed;
                    }
                }
                changed = answers_fault.changed() => {
                    if changed.is_err() { return Ending::Closed; }
                    let now = *answers_fault.borrow();
                    if now == Fault::DropAnswers {
                        dropping = true;
                    }
                }
            }
        }
    };
    let ending = tokio::select! {
        ending = requests => ending,
        ending = answers => ending,
    };
    let (Ok(client), Ok(server)) = (
        client_read.reunite(client_write),
        server_read.reunite(server_write),
    ) else {
        return;
    };
    match ending {
        Ending::Closed => {}
        Ending::Reset => {
            reset(client);
            reset(server);
        }
        Ending::Dead => dead(client, Some(server), fault).await,
    }
}

/// How a forwarded connection ended.
enum Ending {
    /// One side closed: the other is closed too.
    Closed,
    /// Refused: both sides reset.
    Reset,
    /// Black-holed: held open and silent.
    Dead,
}

/// Holds a connection open and silent for good: what it receives is read and dropped, and it
/// is closed only when the client closes it, the proxy is dropped, or the proxy refuses
/// (then reset, as a service that restarted would).
async fn dead(client: TcpStream, server: Option<TcpStream>, mut fault: watch::Receiver<Fault>) {
    drop(server);
    let mut client = client;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        tokio::select! {
            read = client.read(&mut buf) => {
                if matches!(read, Ok(0) | Err(_)) { return; }
            }
            changed = fault.changed() => {
                if changed.is_err() { return; }
                let now = *fault.borrow();
                if now == Fault::Refuse {
                    return reset(client);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use std::time::Duration;

    use super::*;

    /// An echo server on a free loopback port.
    async fn echo() -> SocketAddr {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = socket.read(&mut buf).await {
                        if n == 0 || socket.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    async fn round_trip(stream: &mut TcpStream, wait: Duration) -> Option<Vec<u8>> {
        stream.write_all(b"ping").await.ok()?;
        let mut buf = [0u8; 4];
        match tokio::time::timeout(wait, stream.read_exact(&mut buf)).await {
            Ok(Ok(_)) => Some(buf.to_vec()),
            _ => None,
        }
    }

    #[tokio::test]
    async fn each_fault_fails_connections_its_own_way() {
        let proxy = FaultProxy::start(echo().await).await.unwrap();
        let mut first = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(
            round_trip(&mut first, Duration::from_secs(5))
                .await
                .unwrap(),
            b"ping"
        );

        // A black hole: no answer, no close; the connection stays dead once lifted.
        proxy.set(Fault::BlackHole);
        assert!(
            round_trip(&mut first, Duration::from_millis(300))
                .await
                .is_none()
        );
        proxy.set(Fault::None);
        assert!(
            round_trip(&mut first, Duration::from_millis(300))
                .await
                .is_none()
        );
        let mut second = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(
            round_trip(&mut second, Duration::from_secs(5))
                .await
                .unwrap(),
            b"ping"
        );

        // Dropped answers: the request goes through (the echo answers), the answer is lost.
        proxy.set(Fault::DropAnswers);
        assert!(
            round_trip(&mut second, Duration::from_millis(300))
                .await
                .is_none()
        );
        proxy.set(Fault::None);
        assert!(
            round_trip(&mut second, Duration::from_millis(300))
                .await
                .is_none()
        );

        // A marked request goes through and loses its answer; the connection stays so.
        let mut marked = TcpStream::connect(proxy.addr()).await.unwrap();
        assert!(
            round_trip(&mut marked, Duration::from_secs(5))
                .await
                .is_some()
        );
        proxy.drop_answers_after(*b"pi");
        assert!(!proxy.marker_met());
        assert!(
            round_trip(&mut marked, Duration::from_millis(300))
                .await
                .is_none()
        );
        assert!(proxy.marker_met());
        assert!(
            round_trip(&mut marked, Duration::from_millis(300))
                .await
                .is_none()
        );

        // Refused: open connections are reset, new ones too.
        let mut third = TcpStream::connect(proxy.addr()).await.unwrap();
        assert!(
            round_trip(&mut third, Duration::from_secs(5))
                .await
                .is_some()
        );
        proxy.set(Fault::Refuse);
        let mut buf = [0u8; 4];
        let read = tokio::time::timeout(Duration::from_secs(5), third.read(&mut buf)).await;
        assert!(matches!(read, Ok(Err(_)) | Ok(Ok(0))), "{read:?}");
        let mut fourth = TcpStream::connect(proxy.addr()).await.unwrap();
        assert!(
            round_trip(&mut fourth, Duration::from_millis(500))
                .await
                .is_none()
        );
        proxy.set(Fault::None);
        let mut fifth = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(
            round_trip(&mut fifth, Duration::from_secs(5))
                .await
                .unwrap(),
            b"ping"
        );
    }

    #[test]
    fn urls_point_at_the_proxy() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let proxy = FaultProxy::start("127.0.0.1:9".parse().unwrap())
                .await
                .unwrap();
            let port = proxy.addr().port();
            assert_eq!(
                proxy.url_for("redis://127.0.0.1:6379/2").unwrap(),
                format!("redis://127.0.0.1:{port}/2")
            );
            assert_eq!(
                proxy
                    .url_for("postgres://postgres@127.0.0.1:5432/test?x=1")
                    .unwrap(),
                format!("postgres://postgres@127.0.0.1:{port}/test?x=1")
            );
            assert_eq!(
                proxy.url_for("redis://localhost").unwrap(),
                format!("redis://127.0.0.1:{port}")
            );
            assert!(proxy.url_for("not a url").is_none());
        });
    }
}
