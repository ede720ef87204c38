//! [`RedisPubSub`]: run events on Redis Streams, one stream per topic.
//!
//! Publishing is one `XADD … MAXLEN ~ N` on a shared connection that reconnects by itself.
//! A subscription first reads the stream's last entry id (so it sees exactly what is published
//! once `subscribe` has returned), then reads on from there with `XREAD BLOCK` on a connection
//! of its own (a blocking read would hold up everyone's commands on a shared one). When Redis
//! goes away the subscription reconnects, with a growing delay, and goes on from the last
//! entry it delivered: nothing that is still in the stream is skipped. A stream keeps its last
//! [`RedisPubSubOptions::max_len`] entries (about: `~` lets Redis trim whole nodes).
//!
//! A consumer group ([`PubSub::subscribe_group`]) is a Redis consumer group created at the
//! stream's end by its first subscription. Each consumer reads new entries with
//! `XREADGROUP` and, before each read, takes over entries other consumers left idle for
//! [`GroupOptions::claim_idle`] (`XAUTOCLAIM`: their consumer died, or gave them back with
//! `nack`, which marks them idle at once). The attempt of a delivery is Redis's delivery
//! count; past `max_attempts` an entry is acknowledged away with a warning. A consumer reads up
//! to 64 entries at a time, so one busy consumer may hold work another could take: they go to
//! the others once idle. Needs Redis 6.2 or later (`XAUTOCLAIM`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use kestrel_core::event::Event;
use kestrel_core::pubsub::{
    Acknowledge, DEFAULT_SUBSCRIBER_BACKLOG, Delivery, GroupOptions, GroupSubscription, PubSub,
    PubSubError, Subscription, check_group,
};
use redis::aio::MultiplexedConnection;

use crate::conn::{RedisError, Shared, Timeouts, redacted};
use crate::position::{before, first_entry_of_run, last_entry_id};
use redis::streams::{StreamAutoClaimReply, StreamId, StreamPendingCountReply, StreamReadReply};
use redis::{AsyncConnectionConfig, Client};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The stream field that holds an event's JSON.
const EVENT_FIELD: &str = "event";

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
    /// The longest wait between two attempts to reconnect (5 s by default).
    pub max_retry_delay: Duration,
    /// How long connecting may take, the handshake included (5 s by default).
    pub connect_timeout: Duration,
    /// How long Redis may take to answer a command (5 s by default; a blocking read may take
    /// [`RedisPubSubOptions::block`] more). A connection that leaves a command unanswered
    /// this long is replaced: across a network that went silent it would never answer again.
    pub command_timeout: Duration,
}

impl Default for RedisPubSubOptions {
    fn default() -> Self {
        Self {
            key_prefix: "kestrel:".into(),
            max_len: 10_000,
            backlog: DEFAULT_SUBSCRIBER_BACKLOG,
            block: Duration::from_secs(5),
            max_retry_delay: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
            command_timeout: Duration::from_secs(5),
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
        for (option, value) in [
            ("connect_timeout", self.connect_timeout),
            ("command_timeout", self.command_timeout),
        ] {
            if value.is_zero() || value > Duration::from_secs(300) {
                return invalid(option, "must be between 1 ms and 300 s");
            }
        }
        Ok(())
    }

    /// The timeouts of the connections these options make.
    pub(crate) fn timeouts(&self) -> Timeouts {
        Timeouts {
            connect: self.connect_timeout,
            command: self.command_timeout,
            max_retry_delay: self.max_retry_delay,
        }
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
    publisher: Shared,
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

impl RedisPubSub {
    /// Connects to the Redis at `url` (`redis://[user:password@]host[:port][/db]`). Fails if
    /// it cannot be reached now; once connected, publishing reconnects by itself.
    pub async fn connect(url: &str, options: RedisPubSubOptions) -> Result<Self, RedisError> {
        options.check()?;
        let (client, publisher) = crate::conn::connect(url, options.timeouts()).await?;
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

    pub(crate) fn error(
        topic: &str,
        source: impl Into<kestrel_core::error::BoxError>,
    ) -> PubSubError {
        PubSubError {
            topic: topic.to_owned(),
            source: source.into(),
        }
    }
}

impl Inner {
    /// Creates the group at the stream's end (and the stream), unless it exists.
    async fn create_group(&self, key: &str, group: &str) -> redis::RedisResult<()> {
        let mut create = redis::cmd("XGROUP");
        create
            .arg("CREATE")
            .arg(key)
            .arg(group)
            .arg("$")
            .arg("MKSTREAM");
        let created = self
            .publisher
            .run(|mut connection| {
                let create = &create;
                async move { create.query_async::<()>(&mut connection).await }
            })
            .await;
        match created {
            Err(error) if error.code() == Some("BUSYGROUP") => Ok(()),
            other => other,
        }
    }

    /// A connection of its own for blocking reads. Its answers may take the read's `BLOCK`
    /// and a command's time more, no longer: a read that hears nothing by then is on a
    /// connection across a network that went silent, which is replaced.
    async fn reader(&self) -> redis::RedisResult<MultiplexedConnection> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.options.connect_timeout))
            .set_response_timeout(Some(self.options.block + self.options.command_timeout));
        self.client
            .get_multiplexed_async_connection_with_config(&config)
            .await
    }
}

#[async_trait::async_trait]
impl PubSub for RedisPubSub {
    async fn publish(&self, topic: &str, event: Event) -> Result<(), PubSubError> {
        let json = event.to_json();
        let mut add = redis::cmd("XADD");
        add.arg(self.stream_key(topic))
            .arg("MAXLEN")
            .arg("~")
            .arg(self.inner.options.max_len)
            .arg("*")
            .arg(EVENT_FIELD)
            .arg(json);
        self.inner
            .publisher
            .run(|mut connection| {
                let add = &add;
                async move { add.query_async::<String>(&mut connection).await }
            })
            .await
            .map(drop)
            .map_err(|e| Self::error(topic, e))
    }

    async fn subscribe(&self, topic: &str) -> Result<Subscription, PubSubError> {
        let key = self.stream_key(topic);
        let queue = self.read_from_end::<Event>(topic, key, EVENT_FIELD).await?;
        Ok(Subscription::new(Box::pin(queue)))
    }

    async fn subscribe_replaying(
        &self,
        topic: &str,
        run_id: &str,
    ) -> Result<Subscription, PubSubError> {
        let key = self.stream_key(topic);
        let mut connection = self
            .inner
            .reader()
            .await
            .map_err(|e| Self::error(topic, e))?;
        let start = first_entry_of_run(&mut connection, &key, run_id, self.inner.options.max_len)
            .await
            .map_err(|e| Self::error(topic, e))?;
        let last = match start {
            Some(id) => before(&id),
            None => last_entry_id(&mut connection, &key)
                .await
                .map_err(|e| Self::error(topic, e))?,
        };
        let queue = self.read_from(topic, key, EVENT_FIELD, last, connection);
        Ok(Subscription::new(Box::pin(queue)))
    }

    async fn subscribe_group(
        &self,
        topic: &str,
        group: &str,
        consumer: &str,
        options: GroupOptions,
    ) -> Result<GroupSubscription, PubSubError> {
        check_group(topic, group, consumer, &options)?;
        let key = self.stream_key(topic);
        self.inner
            .create_group(&key, group)
            .await
            .map_err(|e| Self::error(topic, e))?;
        let connection = self
            .inner
            .reader()
            .await
            .map_err(|e| Self::error(topic, e))?;
        let (sender, receiver) = mpsc::channel(self.inner.options.backlog);
        let ack = Arc::new(RedisAck {
            inner: Arc::clone(&self.inner),
            topic: topic.to_owned(),
            key,
            group: group.to_owned(),
            consumer: consumer.to_owned(),
            options,
        });
        let reader = GroupReader {
            ack,
            sender,
            cursor: "0-0".to_owned(),
        };
        let task = tokio::spawn(reader.run(connection));
        Ok(GroupSubscription::new(Box::pin(Queue {
            receiver,
            task: AbortOnDrop(task),
        })))
    }
}

impl RedisPubSub {
    /// A queue of what is added to the stream `key` from now on (the JSON of each entry's
    /// `field`), read on a connection of its own.
    pub(crate) async fn read_from_end<T: serde::de::DeserializeOwned + Send + 'static>(
        &self,
        topic: &str,
        key: String,
        field: &'static str,
    ) -> Result<Queue<T>, PubSubError> {
        let mut connection = self
            .inner
            .reader()
            .await
            .map_err(|e| Self::error(topic, e))?;
        // Where the stream ends now: what comes after is this subscription's.
        let last = last_entry_id(&mut connection, &key)
            .await
            .map_err(|e| Self::error(topic, e))?;
        Ok(self.read_from(topic, key, field, last, connection))
    }

    /// The key prefix of every stream.
    pub(crate) fn key_prefix(&self) -> &str {
        &self.inner.options.key_prefix
    }

    /// The shared connection commands go on.
    pub(crate) fn publisher(&self) -> &Shared {
        &self.inner.publisher
    }

    /// A queue of the entries of `key` after `last`, read on `connection`.
    fn read_from<T: serde::de::DeserializeOwned + Send + 'static>(
        &self,
        topic: &str,
        key: String,
        field: &'static str,
        last: String,
        connection: MultiplexedConnection,
    ) -> Queue<T> {
        let (sender, receiver) = mpsc::channel(self.inner.options.backlog);
        let reader = Reader {
            inner: Arc::clone(&self.inner),
            topic: topic.to_owned(),
            key,
            field,
            last,
            sender,
        };
        let task = tokio::spawn(reader.run(connection));
        Queue {
            receiver,
            task: AbortOnDrop(task),
        }
    }
}

/// Reads one subscription's stream into its queue until the subscription is dropped: the
/// JSON of each entry's `field`, as a `T` (events, or an inbox's control messages).
struct Reader<T> {
    inner: Arc<Inner>,
    topic: String,
    key: String,
    field: &'static str,
    /// The id of the last entry read (delivered or skipped).
    last: String,
    sender: mpsc::Sender<T>,
}

/// What one read gave.
enum Read {
    /// Go on reading.
    More,
    /// The subscription is over (dropped, or dropped for falling behind).
    Done,
}

impl<T: serde::de::DeserializeOwned + Send + 'static> Reader<T> {
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
            let event = match entry_json::<T>(&entry, self.field) {
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

/// The longest entry read from a stream: Redis is a trust boundary, and an entry someone
/// else wrote there is not parsed past this (an event is a few kilobytes at most; a run's
/// whole result may be larger, but not this).
const MAX_ENTRY_BYTES: usize = 8 * 1024 * 1024;

/// The value of a stream entry's JSON `field`, or why there is none.
fn entry_json<T: serde::de::DeserializeOwned>(entry: &StreamId, field: &str) -> Result<T, String> {
    match entry
        .map
        .get(field)
        .cloned()
        .map(redis::from_redis_value::<String>)
    {
        Some(Ok(json)) if json.len() > MAX_ENTRY_BYTES => Err(format!(
            "the entry's {field:?} has {} bytes, over the {MAX_ENTRY_BYTES} read",
            json.len()
        )),
        Some(Ok(json)) => serde_json::from_str::<T>(&json).map_err(|e| e.to_string()),
        Some(Err(e)) => Err(e.to_string()),
        None => Err(format!("the entry has no {field:?} field")),
    }
}

/// The event in a stream entry, or why there is none.
pub(crate) fn entry_event(entry: &StreamId) -> Result<Event, String> {
    entry_json(entry, EVENT_FIELD)
}

/// One group consumer's settling of its deliveries.
struct RedisAck {
    inner: Arc<Inner>,
    topic: String,
    key: String,
    group: String,
    consumer: String,
    options: GroupOptions,
}

impl RedisAck {
    fn claim_idle_ms(&self) -> u64 {
        u64::try_from(self.options.claim_idle.as_millis()).unwrap_or(u64::MAX)
    }
}

#[async_trait::async_trait]
impl Acknowledge for RedisAck {
    async fn ack(&self, id: &str) -> Result<(), PubSubError> {
        let mut ack = redis::cmd("XACK");
        ack.arg(&self.key).arg(&self.group).arg(id);
        self.inner
            .publisher
            .run(|mut connection| {
                let ack = &ack;
                async move { ack.query_async::<i64>(&mut connection).await }
            })
            .await
            .map(drop)
            .map_err(|e| RedisPubSub::error(&self.topic, e))
    }

    async fn nack(&self, id: &str, _attempt: u32) -> Result<(), PubSubError> {
        // Redis has no "give back": the entry is made as idle as a dead consumer's, so the
        // next reclaim of any consumer takes it (JUSTID: without counting a delivery).
        let mut claim = redis::cmd("XCLAIM");
        claim
            .arg(&self.key)
            .arg(&self.group)
            .arg(&self.consumer)
            .arg(0)
            .arg(id)
            .arg("IDLE")
            .arg(self.claim_idle_ms())
            .arg("JUSTID");
        self.inner
            .publisher
            .run(|mut connection| {
                let claim = &claim;
                async move { claim.query_async::<redis::Value>(&mut connection).await }
            })
            .await
            .map(drop)
            .map_err(|e| RedisPubSub::error(&self.topic, e))
    }
}

/// Reads one group consumer's deliveries: what other consumers left idle (dead, or given
/// back), then new entries.
struct GroupReader {
    ack: Arc<RedisAck>,
    sender: mpsc::Sender<Delivery>,
    /// Where the next reclaim scan starts.
    cursor: String,
}

impl GroupReader {
    async fn run(mut self, mut connection: MultiplexedConnection) {
        let mut delay = Duration::from_millis(50);
        loop {
            match self.read(&mut connection).await {
                Ok(Read::More) => delay = Duration::from_millis(50),
                Ok(Read::Done) => return,
                Err(error) => {
                    tracing::warn!(topic = %self.ack.topic, group = %self.ack.group, %error, ?delay, "reading a Redis consumer group failed; reconnecting");
                    loop {
                        if self.sender.is_closed() {
                            return;
                        }
                        tokio::time::sleep(delay).await;
                        delay = (delay * 2).min(self.ack.inner.options.max_retry_delay);
                        let fresh = match self.ack.inner.reader().await {
                            Ok(fresh) => fresh,
                            Err(error) => {
                                tracing::debug!(%error, "Redis still unreachable");
                                continue;
                            }
                        };
                        // A Redis that lost its data lost the group too.
                        if let Err(error) = self
                            .ack
                            .inner
                            .create_group(&self.ack.key, &self.ack.group)
                            .await
                        {
                            tracing::debug!(%error, "recreating the consumer group failed");
                            continue;
                        }
                        connection = fresh;
                        break;
                    }
                }
            }
        }
    }

    async fn read(&mut self, connection: &mut MultiplexedConnection) -> redis::RedisResult<Read> {
        if self.sender.is_closed() {
            return Ok(Read::Done);
        }
        let ack = Arc::clone(&self.ack);
        let claimed: StreamAutoClaimReply = redis::cmd("XAUTOCLAIM")
            .arg(&ack.key)
            .arg(&ack.group)
            .arg(&ack.consumer)
            .arg(ack.claim_idle_ms())
            .arg(&self.cursor)
            .arg("COUNT")
            .arg(64)
            .query_async(connection)
            .await?;
        self.cursor = claimed.next_stream_id;
        for entry in claimed.claimed {
            let pending: StreamPendingCountReply = redis::cmd("XPENDING")
                .arg(&ack.key)
                .arg(&ack.group)
                .arg(&entry.id)
                .arg(&entry.id)
                .arg(1)
                .query_async(connection)
                .await?;
            let attempt = pending
                .ids
                .first()
                .map_or(1, |p| u32::try_from(p.times_delivered).unwrap_or(u32::MAX));
            if attempt > ack.options.max_attempts {
                tracing::warn!(topic = %ack.topic, group = %ack.group, id = %entry.id, attempts = attempt - 1, "an event was not acknowledged after its last attempt: giving it up");
                let _: i64 = redis::cmd("XACK")
                    .arg(&ack.key)
                    .arg(&ack.group)
                    .arg(&entry.id)
                    .query_async(connection)
                    .await?;
                continue;
            }
            if let Read::Done = self.hand_over(&entry, attempt, connection).await? {
                return Ok(Read::Done);
            }
        }
        let block = u64::try_from(ack.inner.options.block.as_millis()).unwrap_or(60_000);
        let reply: Option<StreamReadReply> = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(&ack.group)
            .arg(&ack.consumer)
            .arg("COUNT")
            .arg(64)
            .arg("BLOCK")
            .arg(block)
            .arg("STREAMS")
            .arg(&ack.key)
            .arg(">")
            .query_async(connection)
            .await?;
        for entry in reply.into_iter().flat_map(|r| r.keys).flat_map(|k| k.ids) {
            if let Read::Done = self.hand_over(&entry, 1, connection).await? {
                return Ok(Read::Done);
            }
        }
        Ok(Read::More)
    }

    /// Gives an entry to the consumer (waiting while its queue is full: the entry stays
    /// pending in Redis meanwhile). An entry that is not an event is acknowledged away.
    async fn hand_over(
        &mut self,
        entry: &StreamId,
        attempt: u32,
        connection: &mut MultiplexedConnection,
    ) -> redis::RedisResult<Read> {
        let event = match entry_event(entry) {
            Ok(event) => event,
            Err(reason) => {
                tracing::warn!(topic = %self.ack.topic, id = %entry.id, %reason, "skipping a stream entry that is not a Kestrel event");
                let _: i64 = redis::cmd("XACK")
                    .arg(&self.ack.key)
                    .arg(&self.ack.group)
                    .arg(&entry.id)
                    .query_async(connection)
                    .await?;
                return Ok(Read::More);
            }
        };
        let acker: Arc<dyn Acknowledge> = self.ack.clone();
        let delivery = Delivery::new(event, attempt, entry.id.clone(), acker);
        match self.sender.send(delivery).await {
            Ok(()) => Ok(Read::More),
            Err(_) => Ok(Read::Done),
        }
    }
}

/// Stops the subscription's reader when the subscription is dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What a reader task queued for its subscription (events, or a group's deliveries); the
/// task stops when the subscription is dropped.
pub(crate) struct Queue<T> {
    receiver: mpsc::Receiver<T>,
    task: AbortOnDrop,
}

impl<T> Stream for Queue<T> {
    type Item = T;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let _ = &self.task;
        self.receiver.poll_recv(cx)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

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
