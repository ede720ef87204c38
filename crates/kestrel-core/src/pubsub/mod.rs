//! Carries events from runs to whoever watches a thread: the [`PubSub`] trait, in-process by
//! default.
//!
//! A run that belongs to a thread publishes its events on the thread's topic
//! ([`thread_topic`]) while someone subscribes to it
//! ([`crate::agent::ThreadHandle::subscribe`]).
//! [`InProcessPubSub`] delivers within one process; a backend shared by several processes
//! (`kestrel_redis::RedisPubSub`, on Redis Streams) implements the same trait so that a
//! subscription on one instance sees the runs of another. Every backend passes the same
//! conformance suite, `pubsub::testing` (feature `testing`).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::Stream;
use futures::stream::BoxStream;
use tokio::sync::mpsc;

use crate::error::BoxError;
use crate::event::Event;

mod group;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use group::{Acknowledge, Delivery, GroupOptions, GroupSubscription};

/// Why a pub/sub operation failed.
#[derive(Debug, thiserror::Error)]
#[error("pub/sub failed on topic {topic:?}: {source}")]
pub struct PubSubError {
    /// The topic.
    pub topic: String,
    /// Why.
    #[source]
    pub source: BoxError,
}

/// Publishes events on topics and streams them to subscribers.
#[async_trait::async_trait]
pub trait PubSub: Send + Sync + std::fmt::Debug {
    /// Sends `event` to every current subscriber of `topic`, and to one consumer of each of
    /// the topic's groups (with no subscriber and no group, it goes nowhere).
    async fn publish(&self, topic: &str, event: Event) -> Result<(), PubSubError>;

    /// Every event published on `topic` from now on, in publication order, until the
    /// [`Subscription`] is dropped.
    async fn subscribe(&self, topic: &str) -> Result<Subscription, PubSubError>;

    /// Like [`PubSub::subscribe`], but starting with the events of run `run_id` already
    /// published on `topic`, from its first one the backend still holds (and whatever came
    /// after it): what a subscriber joining a thread while a run is active needs. A backend
    /// that keeps no events (the in-process default) delivers only what comes next.
    async fn subscribe_replaying(
        &self,
        topic: &str,
        run_id: &str,
    ) -> Result<Subscription, PubSubError> {
        let _ = run_id;
        self.subscribe(topic).await
    }

    /// Joins `consumer` to `group` on `topic`: work shared by the group's consumers. Each
    /// event published once the group exists (from its first subscription on) goes to one
    /// consumer, which acknowledges it ([`Delivery::ack`]); one it gives back
    /// ([`Delivery::nack`]), or whose consumer goes away, is delivered again, up to
    /// [`GroupOptions::max_attempts`] deliveries. Events published while the group has no
    /// consumer wait for one.
    async fn subscribe_group(
        &self,
        topic: &str,
        group: &str,
        consumer: &str,
        options: GroupOptions,
    ) -> Result<GroupSubscription, PubSubError>;

    /// Whether `topic` may have subscribers; publishers skip building events when it has none.
    /// Backends that cannot tell answer `true`.
    fn has_subscribers(&self, _topic: &str) -> bool {
        true
    }
}

/// Checks a group subscription's names and options (for every backend).
pub fn check_group(
    topic: &str,
    group: &str,
    consumer: &str,
    options: &GroupOptions,
) -> Result<(), PubSubError> {
    let refuse = |why: &str| PubSubError {
        topic: topic.to_owned(),
        source: why.to_owned().into(),
    };
    if group.is_empty() || group.len() > 200 {
        return Err(refuse("a group's name must have 1 to 200 bytes"));
    }
    if consumer.is_empty() || consumer.len() > 200 {
        return Err(refuse("a consumer's name must have 1 to 200 bytes"));
    }
    if options.max_attempts == 0 {
        return Err(refuse("max_attempts must be at least 1"));
    }
    if options.claim_idle.is_zero() {
        return Err(refuse("claim_idle must be more than zero"));
    }
    Ok(())
}

/// A shared pub/sub handle.
pub type SharedPubSub = Arc<dyn PubSub>;

/// The topic of a thread's events.
pub fn thread_topic(resource_id: &str, thread_id: &str) -> String {
    // The length prefix keeps ids containing the separator apart.
    format!("thread:{}:{resource_id}:{thread_id}", resource_id.len())
}

/// The events of one subscription. Dropping it unsubscribes.
pub struct Subscription {
    events: BoxStream<'static, Event>,
}

impl Subscription {
    /// A subscription reading `events`.
    pub fn new(events: BoxStream<'static, Event>) -> Self {
        Self { events }
    }
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription").finish_non_exhaustive()
    }
}

impl Stream for Subscription {
    type Item = Event;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        self.events.as_mut().poll_next(cx)
    }
}

/// How many events a subscriber of [`InProcessPubSub`] may leave unread before it is dropped.
pub const DEFAULT_SUBSCRIBER_BACKLOG: usize = 10_000;

/// One subscriber's queue, and its id among the topic's subscribers.
type Subscribers = HashMap<String, Vec<(u64, mpsc::Sender<Event>)>>;

/// Pub/sub within this process (the default). Each subscriber has its own queue, so a slow
/// subscriber delays nobody; one that leaves more than its backlog
/// ([`InProcessPubSub::with_backlog`], [`DEFAULT_SUBSCRIBER_BACKLOG`] by default) unread is
/// dropped (its stream ends) rather than buffered without end. A subscription removes itself
/// when it is dropped, so topics nobody watches any more hold nothing. A consumer group keeps
/// at most the backlog's number of events waiting for a consumer (the oldest go first).
#[derive(Debug)]
pub struct InProcessPubSub {
    topics: Arc<Mutex<Subscribers>>,
    groups: Mutex<group::Groups>,
    next_id: std::sync::atomic::AtomicU64,
    backlog: usize,
}

impl Default for InProcessPubSub {
    fn default() -> Self {
        Self::with_backlog(DEFAULT_SUBSCRIBER_BACKLOG)
    }
}

/// Only senders live behind the lock; a panic elsewhere leaves the map consistent.
fn lock(topics: &Mutex<Subscribers>) -> std::sync::MutexGuard<'_, Subscribers> {
    topics.lock().unwrap_or_else(|e| e.into_inner())
}

impl InProcessPubSub {
    /// A pub/sub with no subscribers.
    pub fn new() -> Self {
        Self::default()
    }

    /// A pub/sub whose subscribers may each leave `backlog` events unread (at least 1)
    /// before they are dropped.
    pub fn with_backlog(backlog: usize) -> Self {
        Self {
            topics: Arc::default(),
            groups: Mutex::default(),
            next_id: std::sync::atomic::AtomicU64::new(0),
            backlog: backlog.max(1),
        }
    }

    /// How many topics have subscribers now.
    pub fn topic_count(&self) -> usize {
        lock(&self.topics).len()
    }
}

/// Removes its subscriber from the topic when the subscription is dropped.
struct Unsubscribe {
    topics: std::sync::Weak<Mutex<Subscribers>>,
    topic: String,
    id: u64,
}

impl Drop for Unsubscribe {
    fn drop(&mut self) {
        let Some(topics) = self.topics.upgrade() else {
            return;
        };
        let mut topics = lock(&topics);
        if let Some(subscribers) = topics.get_mut(&self.topic) {
            subscribers.retain(|(id, _)| *id != self.id);
            if subscribers.is_empty() {
                topics.remove(&self.topic);
            }
        }
    }
}

#[async_trait::async_trait]
impl PubSub for InProcessPubSub {
    async fn publish(&self, topic: &str, event: Event) -> Result<(), PubSubError> {
        let mut topics = lock(&self.topics);
        if let Some(subscribers) = topics.get_mut(topic) {
            subscribers.retain(
                |(id, subscriber)| match subscriber.try_send(event.clone()) {
                    Ok(()) => true,
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        tracing::warn!(
                            topic,
                            subscriber = id,
                            "a thread subscriber left too many events unread: dropping it"
                        );
                        false
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => false,
                },
            );
            if subscribers.is_empty() {
                topics.remove(topic);
            }
        }
        drop(topics);
        let groups: Vec<_> = self
            .groups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(topic)
            .map(|groups| groups.values().cloned().collect())
            .unwrap_or_default();
        for group in groups {
            group::Group::push(&group, event.clone());
        }
        Ok(())
    }

    async fn subscribe_group(
        &self,
        topic: &str,
        group: &str,
        consumer: &str,
        options: GroupOptions,
    ) -> Result<GroupSubscription, PubSubError> {
        check_group(topic, group, consumer, &options)?;
        // The group's first subscription sets its options.
        let group = Arc::clone(
            self.groups
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(topic.to_owned())
                .or_default()
                .entry(group.to_owned())
                .or_insert_with(|| {
                    Arc::new(Mutex::new(group::Group::new(
                        topic,
                        group,
                        options,
                        self.backlog,
                    )))
                }),
        );
        Ok(group::Group::join(&group))
    }

    async fn subscribe(&self, topic: &str) -> Result<Subscription, PubSubError> {
        let (sender, mut receiver) = mpsc::channel(self.backlog);
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        lock(&self.topics)
            .entry(topic.to_owned())
            .or_default()
            .push((id, sender));
        let guard = Unsubscribe {
            topics: Arc::downgrade(&self.topics),
            topic: topic.to_owned(),
            id,
        };
        let events = futures::stream::poll_fn(move |cx| {
            // Owned by the stream: dropping the subscription drops it.
            let _ = &guard;
            receiver.poll_recv(cx)
        });
        Ok(Subscription::new(Box::pin(events)))
    }

    fn has_subscribers(&self, topic: &str) -> bool {
        lock(&self.topics)
            .get(topic)
            .is_some_and(|subscribers| subscribers.iter().any(|(_, s)| !s.is_closed()))
            || self
                .groups
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains_key(topic)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use futures::StreamExt;

    fn event(n: usize) -> Event {
        Event::agent(
            format!("run-{n}").into(),
            crate::event::EventKind::Abort(crate::event::AbortPayload::default()),
        )
    }

    #[tokio::test]
    async fn dropped_subscriptions_leave_no_topic_behind() {
        let pubsub = InProcessPubSub::new();
        for n in 0..1_000 {
            let subscription = pubsub.subscribe(&format!("topic-{n}")).await;
            assert!(subscription.is_ok());
            drop(subscription);
        }
        assert_eq!(pubsub.topic_count(), 0);
        // One of two subscribers of a topic goes away: the other still gets events.
        let keep = pubsub.subscribe("shared").await;
        let gone = pubsub.subscribe("shared").await;
        drop(gone);
        assert_eq!(pubsub.topic_count(), 1);
        let Ok(mut keep) = keep else {
            panic!("subscribing failed")
        };
        assert!(pubsub.publish("shared", event(1)).await.is_ok());
        assert_eq!(keep.next().await.map(|e| e.run_id), Some("run-1".into()));
        drop(keep);
        assert_eq!(pubsub.topic_count(), 0);
    }

    #[tokio::test]
    async fn a_subscriber_that_never_reads_is_dropped_past_its_backlog() {
        let pubsub = InProcessPubSub::with_backlog(3);
        let Ok(mut idle) = pubsub.subscribe("t").await else {
            panic!("subscribing failed")
        };
        for n in 0..5 {
            assert!(pubsub.publish("t", event(n)).await.is_ok());
        }
        assert_eq!(pubsub.topic_count(), 0, "the idle subscriber was dropped");
        // What it had queued is still readable, then its stream ends.
        let read: Vec<Event> = (&mut idle).collect().await;
        assert_eq!(read.len(), 3);
    }
}
