//! Connecting to Redis: the client and its sockets' settings, a shared connection that is
//! replaced when it breaks or goes silent, and the errors of connecting.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::io::tcp::{TcpSettings, socket2};
use redis::{AsyncConnectionConfig, Client, IntoConnectionInfo};

/// Why connecting to Redis failed.
#[derive(Debug, thiserror::Error)]
pub enum RedisError {
    /// The URL is not a Redis URL.
    #[error("{url:?} is not a Redis URL: {source}")]
    Url {
        /// The URL as given.
        url: String,
        /// What the client said.
        #[source]
        source: redis::RedisError,
    },
    /// Redis could not be reached.
    #[error("could not connect to Redis at {url:?}: {source}")]
    Connect {
        /// The URL.
        url: String,
        /// What the client said.
        #[source]
        source: redis::RedisError,
    },
    /// An option is out of its range.
    #[error("invalid Redis pub/sub option {option}: {reason}")]
    Option {
        /// The option's name.
        option: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// The URL without its password, for logs and errors.
pub(crate) fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://***@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

/// How long Redis may take: to accept a connection, and to answer a command.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timeouts {
    /// Connecting, the handshake included.
    pub connect: Duration,
    /// A command's answer (a blocking read waits its `BLOCK` more).
    pub command: Duration,
    /// The longest wait between two attempts to reconnect.
    pub max_retry_delay: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(5),
            command: Duration::from_secs(5),
            max_retry_delay: Duration::from_secs(5),
        }
    }
}

/// The TCP settings of every Redis socket: keepalive probes, so that a connection across a
/// network that went silent (no RST) is found dead by the kernel, and on Linux a user timeout,
/// so that one with unacknowledged data is given up after a bounded time instead of the
/// kernel's quarter of an hour of retransmissions.
fn tcp_settings() -> TcpSettings {
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(10))
        .with_interval(Duration::from_secs(5))
        .with_retries(3);
    let settings = TcpSettings::default()
        .set_nodelay(true)
        .set_keepalive(keepalive);
    #[cfg(target_os = "linux")]
    let settings = settings.set_user_timeout(Duration::from_secs(20));
    settings
}

/// A client for `url`, its sockets with [`tcp_settings`].
pub(crate) fn client(url: &str) -> Result<Client, RedisError> {
    let invalid = |source| RedisError::Url {
        url: redacted(url),
        source,
    };
    let info = url
        .into_connection_info()
        .map_err(invalid)?
        .set_tcp_settings(tcp_settings());
    Client::open(info).map_err(invalid)
}

/// A client for `url` and a shared connection to it, connected now, or why Redis cannot be
/// reached now.
pub(crate) async fn connect(url: &str, timeouts: Timeouts) -> Result<(Client, Shared), RedisError> {
    let client = client(url)?;
    let shared = Shared::new(client.clone(), timeouts);
    shared
        .connection()
        .await
        .map_err(|source| RedisError::Connect {
            url: redacted(url),
            source,
        })?;
    Ok((client, shared))
}

/// The connection commands share: one multiplexed connection, replaced when a command on it
/// fails with a broken connection or gets no answer in time (a connection across a network
/// that went silent never breaks by itself, and a late answer would be taken for the next
/// command's). Reconnects wait a growing delay after a failed attempt; a command sent during
/// that delay fails at once with the last reason.
#[derive(Clone)]
pub(crate) struct Shared {
    client: Client,
    config: AsyncConnectionConfig,
    timeouts: Timeouts,
    slot: Arc<tokio::sync::Mutex<Slot>>,
}

/// The shared connection, or when the next attempt to make one may be.
#[derive(Default)]
struct Slot {
    connection: Option<(u64, MultiplexedConnection)>,
    /// Counts the connections made, so that a failure replaces only the one it happened on.
    generation: u64,
    /// After a failed attempt: not before this, and the delay that led to it.
    backoff: Option<(Instant, Duration, String)>,
}

impl Shared {
    fn new(client: Client, timeouts: Timeouts) -> Self {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeouts.connect))
            .set_response_timeout(Some(timeouts.command));
        Self {
            client,
            config,
            timeouts,
            slot: Arc::new(tokio::sync::Mutex::new(Slot::default())),
        }
    }

    /// The current connection and its generation, connecting if there is none (one caller
    /// connects; the others wait for it).
    async fn connection(&self) -> redis::RedisResult<(u64, MultiplexedConnection)> {
        let mut slot = self.slot.lock().await;
        if let Some((generation, connection)) = &slot.connection {
            return Ok((*generation, connection.clone()));
        }
        if let Some((not_before, _, reason)) = &slot.backoff
            && Instant::now() < *not_before
        {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Io,
                "Redis is unreachable; reconnecting",
                reason.clone(),
            )));
        }
        match self
            .client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await
        {
            Ok(connection) => {
                slot.generation += 1;
                slot.backoff = None;
                let generation = slot.generation;
                slot.connection = Some((generation, connection.clone()));
                Ok((generation, connection))
            }
            Err(error) => {
                let delay = slot
                    .backoff
                    .as_ref()
                    .map_or(Duration::from_millis(100), |b| {
                        (b.1 * 2).min(self.timeouts.max_retry_delay)
                    });
                tracing::debug!(%error, ?delay, "connecting to Redis failed");
                slot.backoff = Some((Instant::now() + delay, delay, error.to_string()));
                Err(error)
            }
        }
    }

    /// Drops connection `generation` (the next command makes a new one), unless it was
    /// replaced already.
    async fn replace(&self, generation: u64) {
        let mut slot = self.slot.lock().await;
        if slot
            .connection
            .as_ref()
            .is_some_and(|(g, _)| *g == generation)
        {
            slot.connection = None;
        }
    }

    /// Runs `op` (a command) on the shared connection. A connection that broke under it or
    /// did not answer in time is replaced; on a broken one the command is sent again on a new
    /// one, up to twice (the first command after Redis restarted finds the old socket dead). A
    /// command that Redis ran but whose answer was lost may so run twice; the commands sent
    /// here are idempotent or tolerate it (lease scripts, an event appended twice in that rare
    /// case). One that timed out is not sent again: its caller hears of it at once.
    pub(crate) async fn run<T, F, Fut>(&self, mut op: F) -> redis::RedisResult<T>
    where
        F: FnMut(MultiplexedConnection) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let mut delay = Duration::from_millis(50);
        let mut attempt = 1;
        loop {
            let (generation, connection) = self.connection().await?;
            match op(connection).await {
                Err(e) if e.is_timeout() => {
                    tracing::warn!(error = %e, "a Redis command got no answer in time; replacing its connection");
                    self.replace(generation).await;
                    return Err(e);
                }
                Err(e) if broken(&e) => {
                    self.replace(generation).await;
                    if attempt >= 3 {
                        return Err(e);
                    }
                    tracing::debug!(error = %e, attempt, "a Redis command failed on a broken connection; retrying");
                    tokio::time::sleep(delay).await;
                    delay *= 5;
                    attempt += 1;
                }
                outcome => return outcome,
            }
        }
    }
}

/// Whether `error` says the connection is broken (as opposed to Redis refusing a command).
pub(crate) fn broken(error: &redis::RedisError) -> bool {
    error.is_io_error() || error.is_connection_dropped() || error.is_connection_refusal()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn passwords_stay_out_of_logs() {
        assert_eq!(
            redacted("redis://user:secret@host:6379/0"),
            "redis://***@host:6379/0"
        );
        assert_eq!(redacted("redis://host:6379"), "redis://host:6379");
    }
}
