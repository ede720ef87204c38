//! [`RedisPubSub`]: run events on Redis Streams, one stream per topic.
//!
//! Publishing is one `XADD … MAXLEN ~ N` on a shared connection that reconnects by itself.
//! A subscription first reads the stream's last entry id (so it sees exactly what is published
//! once `subscribe` has returned), then reads on from there with `XREAD BLOCK` on a connection
//! of its own (a blocking read would hold up everyone's commands on a shared one). When Redis
//! goes away the subscription reconnects, with a growing delay, and goes on from the last
//! entry it delivered: nothing that is still in the stream is skipped. A stream keeps its last
//! [`RedisPubSubOptions::max_len`] entries (about: `~` lets Redis trim whole nodes).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use kestrel_core::event::Event;
use kestrel_core::pubsub::{DEFAULT_SUBSCRIBER_BACKLOG, PubSub, PubSubError, Subscription};
use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::streams::StreamReadReply;
use redis::{AsyncConnectionConfig, Client};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The stream field that holds an event's JSON.
const EVENT_FIELD: &str = "event";

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

/// How a [`RedisPubSub`] names its streams and bounds them.
#[derive(Debug, Clone)]
pub struct RedisPubSubOptions {
    /// Put before every topic to make its stream's key (`kestrel:` by default), so that several
    /// applications (or test runs) can share one Redis.
    pub key_prefix: String,
    /// The entries a topic's stream keeps (about; 10,000 by default). A subscriber that falls
    /// further behind than this while Redis is unreachable misses what was trimmed.
    pub max_len: usize,
    /// How many events a subscriber may leave unread before it is dropped (its stream ends),
    /// as with the in-process pub/sub.
    pub backlog: usize,
    /// How long one blocking read waits before it asks again (5 s by default).
    pub block: Duration,
    /// The longest wait between two attempts to reconnect a subscription (5 s by default).
    pub max_retry_delay: Duration,
}

impl Default for RedisPubSubOptions {
    fn default() -> Self {
        Self {
            key_prefix: "kestrel:".into(),
            max_len: 10_000,
            backlog: DEFAULT_SUBSCRIBER_BACKLOG,
            block: Duration::from_secs(5),
            max_retry_delay: Duration::from_secs(5),
        }
    }
}

impl RedisPubSubOptions {
    /// These options with `prefix` before every stream key.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    fn check(&self) -> Result<(), RedisError> {
        let invalid = |option, reason| Err(RedisError::Option { option, reason });
        if self.max_len == 0 {
            return invalid("max_len", "a stream must keep at least one entry");
        }
        if self.backlog == 0 {
            return invalid("backlog", "a subscriber must be able to hold one event");
        }
        if self.block.is_zero() || self.block > Duration::from_secs(60) {
            return invalid("block", "must be between 1 ms and 60 s");
        }
        if self.max_retry_delay.is_zero() {
            return invalid("max_retry_delay", "must be more than zero");
        }
        Ok(())
    }
}

/// A [`PubSub`] on Redis Streams, shared by every process connected to the same Redis.
#[derive(Clone)]
pub struct RedisPubSub {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    url: String,
    publisher: ConnectionManager,
    options: RedisPubSubOptions,
}

impl std::fmt::Debug for RedisPubSub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisPubSub")
            .field("url", &redacted(&self.inner.url))
            .field("key_prefix", &self.inner.options.key_prefix)
            .finish_non_exhaustive()
    }
}

/// The URL without its password, for logs and errors.
fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://***@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

impl RedisPubSub {
    /// Connects to the Redis at `url` (`redis://[user:password@]host[:port][/db]`). Fails if
    /// it cannot be reached now; once connected, publishing reconnects by itself.
    pub async fn connect(url: &str, options: RedisPubSubOptions) -> Result<Self, RedisError> {
        options.check()?;
        let shown = redacted(url);
        let client = Client::open(url).map_err(|source| RedisError::Url {
            url: shown.clone(),
            source,
        })?;
        // Few, short retries: while Redis is away a publish fails soon, with the error,
        // instead of holding up the run that publishes; the next one reconnects.
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_response_timeout(Some(Duration::from_secs(5)))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(500));
        let publisher = ConnectionManager::new_with_config(client.clone(), config)
            .await
            .map_err(|source| RedisError::Connect {
                url: shown.clone(),
                source,
            })?;
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                url: url.to_owned(),
                publisher,
                options,
            }),
        })
    }

    /// The Redis key of `topic`'s stream.
    pub fn stream_key(&self, topic: &str) -> String {
        format!("{}{topic}", self.inner.options.key_prefix)
    }

    fn error(topic: &str, source: impl Into<kestrel_core::error::BoxError>) -> PubSubError {
        PubSubError {
            topic: topic.to_owned(),
            source: source.into(),
        }
    }
}

impl Inner {
    /// A connection of its own for blocking reads (no response timeout: the read's own
    /// `BLOCK` bounds it).
    async fn reader(&self) -> redis::RedisResult<MultiplexedConnection> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_response_timeout(None);
        self.client
            .get_multiplexed_async_connection_with_config(&config)
            .await
    }
}

#[async_trait::async_trait]
impl PubSub for RedisPubSub {
    async fn publish(&self, topic: &str, event: Event) -> Result<(), PubSubError> {
        let json = event.to_json();
        let mut connection = self.inner.publisher.clone();
        redis::cmd("XADD")
            .arg(self.stream_key(topic))
            .arg("MAXLEN")
            .arg("~")
            .arg(self.inner.options.max_len)
            .arg("*")
            .arg(EVENT_FIELD)
            .arg(json)
            .query_async::<String>(&mut connection)
            .await
            .map(drop)
            .map_err(|e| Self::error(topic, e))
    }

    async fn subscribe(&self, topic: &str) -> Result<Subscription, PubSubError> {
        let key = self.stream_key(topic);
        let mut connection = self
            .inner
            .reader()
            .await
            .map_err(|e| Self::error(topic, e))?;
        // Where the stream ends now: what comes after is this subscription's.
        let last = last_entry_id(&mut connection, &key)
            .await
            .map_err(|e| Self::error(topic, e))?;
        let (sender, receiver) = mpsc::channel(self.inner.options.backlog);
        let reader = Reader {
            inner: Arc::clone(&self.inner),
            topic: topic.to_owned(),
            key,
            last,
            sender,
        };
        let task = tokio::spawn(reader.run(connection));
        Ok(Subscription::new(Box::pin(Events {
            receiver,
            task: AbortOnDrop(task),
        })))
    }
}

/// The id of the stream's last entry (`0-0` for an empty or missing stream).
async fn last_entry_id(
    connection: &mut MultiplexedConnection,
    key: &str,
) -> redis::RedisResult<String> {
    let newest: redis::streams::StreamRangeReply = redis::cmd("XREVRANGE")
        .arg(key)
        .arg("+")
        .arg("-")
        .arg("COUNT")
        .arg(1)
        .query_async(connection)
        .await?;
    Ok(newest
        .ids
        .into_iter()
        .next()
        .map_or_else(|| "0-0".to_owned(), |entry| entry.id))
}

/// Reads one subscription's stream into its queue until the subscription is dropped.
struct Reader {
    inner: Arc<Inner>,
    topic: String,
    key: String,
    /// The id of the last entry read (delivered or skipped).
    last: String,
    sender: mpsc::Sender<Event>,
}

/// What one read gave.
enum Read {
    /// Go on reading.
    More,
    /// The subscription is over (dropped, or dropped for falling behind).
    Done,
}

impl Reader {
    async fn run(mut self, mut connection: MultiplexedConnection) {
        let mut delay = Duration::from_millis(50);
        loop {
            match self.read(&mut connection).await {
                Ok(Read::More) => delay = Duration::from_millis(50),
                Ok(Read::Done) => return,
                Err(error) => {
                    tracing::warn!(topic = %self.topic, %error, ?delay, "reading a Redis stream failed; reconnecting");
                    loop {
                        if self.sender.is_closed() {
                            return;
                        }
                        tokio::time::sleep(delay).await;
                        delay = (delay * 2).min(self.inner.options.max_retry_delay);
                        match self.inner.reader().await {
                            Ok(fresh) => {
                                connection = fresh;
                                break;
                            }
                            Err(error) => {
                                tracing::debug!(topic = %self.topic, %error, "Redis still unreachable");
                            }
                        }
                    }
                }
            }
        }
    }

    async fn read(&mut self, connection: &mut MultiplexedConnection) -> redis::RedisResult<Read> {
        if self.sender.is_closed() {
            return Ok(Read::Done);
        }
        let block = u64::try_from(self.inner.options.block.as_millis()).unwrap_or(60_000);
        let reply: Option<StreamReadReply> = redis::cmd("XREAD")
            .arg("COUNT")
            .arg(256)
            .arg("BLOCK")
            .arg(block)
            .arg("STREAMS")
            .arg(&self.key)
            .arg(&self.last)
            .query_async(connection)
            .await?;
        let Some(reply) = reply else {
            return Ok(Read::More);
        };
        for entry in reply.keys.into_iter().flat_map(|key| key.ids) {
            self.last.clone_from(&entry.id);
            let event = entry
                .map
                .get(EVENT_FIELD)
                .cloned()
                .map(redis::from_redis_value::<String>);
            let event = match event {
                Some(Ok(json)) => serde_json::from_str::<Event>(&json).map_err(|e| e.to_string()),
                Some(Err(e)) => Err(e.to_string()),
                None => Err(format!("the entry has no {EVENT_FIELD:?} field")),
            };
            let event = match event {
                Ok(event) => event,
                Err(reason) => {
                    // Someone else's entry, or another version's: skipped, not fatal.
                    tracing::warn!(topic = %self.topic, id = %entry.id, %reason, "skipping a stream entry that is not a Kestrel event");
                    continue;
                }
            };
            match self.sender.try_send(event) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(_)) => {
                    tracing::warn!(topic = %self.topic, "a thread subscriber left too many events unread: dropping it");
                    return Ok(Read::Done);
                }
                Err(mpsc::error::TrySendError::Closed(_)) => return Ok(Read::Done),
            }
        }
        Ok(Read::More)
    }
}

/// Stops the subscription's reader when the subscription is dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A subscription's events, read by its [`Reader`].
struct Events {
    receiver: mpsc::Receiver<Event>,
    task: AbortOnDrop,
}

impl Stream for Events {
    type Item = Event;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        let _ = &self.task;
        self.receiver.poll_recv(cx)
    }
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

    #[test]
    fn options_out_of_range_are_refused_by_name() {
        let bad = RedisPubSubOptions {
            max_len: 0,
            ..RedisPubSubOptions::default()
        };
        let error = bad.check().unwrap_err().to_string();
        assert!(error.contains("max_len"), "{error}");
        let bad = RedisPubSubOptions {
            block: Duration::ZERO,
            ..RedisPubSubOptions::default()
        };
        assert!(bad.check().unwrap_err().to_string().contains("block"));
        assert!(RedisPubSubOptions::default().check().is_ok());
    }
}
