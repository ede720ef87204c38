//! Carries events from runs to whoever watches a thread: the [`PubSub`] trait, in-process by
//! default.
//!
//! A run that belongs to a thread publishes its events on the thread's topic
//! ([`thread_topic`]) while someone subscribes to it ([`crate::agent::Agent::subscribe_to_thread`]).
//! [`InProcessPubSub`] delivers within one process; a backend shared by several processes
//! (Redis Streams) implements the same trait so that a subscription on one instance sees the
//! runs of another.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::Stream;
use futures::stream::BoxStream;
use tokio::sync::mpsc;

use crate::agent::BoxError;
use crate::event::Event;

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
    /// Sends `event` to every current subscriber of `topic` (none: it is dropped).
    async fn publish(&self, topic: &str, event: Event) -> Result<(), PubSubError>;

    /// Every event published on `topic` from now on, in publication order, until the
    /// [`Subscription`] is dropped.
    async fn subscribe(&self, topic: &str) -> Result<Subscription, PubSubError>;

    /// Whether `topic` may have subscribers; publishers skip building events when it has none.
    /// Backends that cannot tell answer `true`.
    fn has_subscribers(&self, _topic: &str) -> bool {
        true
    }
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

/// Pub/sub within this process (the default). Each subscriber has its own unbounded queue, so
/// a slow subscriber delays nobody and loses nothing; it holds what it has not read yet.
#[derive(Debug, Default)]
pub struct InProcessPubSub {
    topics: Mutex<HashMap<String, Vec<mpsc::UnboundedSender<Event>>>>,
}

impl InProcessPubSub {
    /// A pub/sub with no subscribers.
    pub fn new() -> Self {
        Self::default()
    }

    fn topics(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, Vec<mpsc::UnboundedSender<Event>>>> {
        // Only senders live behind the lock; a panic elsewhere leaves the map consistent.
        self.topics.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait::async_trait]
impl PubSub for InProcessPubSub {
    async fn publish(&self, topic: &str, event: Event) -> Result<(), PubSubError> {
        let mut topics = self.topics();
        if let Some(subscribers) = topics.get_mut(topic) {
            subscribers.retain(|s| s.send(event.clone()).is_ok());
            if subscribers.is_empty() {
                topics.remove(topic);
            }
        }
        Ok(())
    }

    async fn subscribe(&self, topic: &str) -> Result<Subscription, PubSubError> {
        let (sender, mut receiver) = mpsc::unbounded_channel();
        self.topics()
            .entry(topic.to_owned())
            .or_default()
            .push(sender);
        let events = futures::stream::poll_fn(move |cx| receiver.poll_recv(cx));
        Ok(Subscription::new(Box::pin(events)))
    }

    fn has_subscribers(&self, topic: &str) -> bool {
        self.topics()
            .get(topic)
            .is_some_and(|subscribers| subscribers.iter().any(|s| !s.is_closed()))
    }
}
