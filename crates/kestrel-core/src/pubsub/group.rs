//! Work shared by a group: each event of a topic goes to one consumer of each group, which
//! acknowledges it when done; what is not acknowledged is delivered again.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use futures::stream::BoxStream;
use tokio::sync::mpsc;

use super::PubSubError;
use crate::event::Event;

/// How a consumer group treats what its consumers do not acknowledge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupOptions {
    /// Deliveries of one event before it is given up (logged and set aside, never delivered
    /// again); 5 by default, at least 1.
    pub max_attempts: u32,
    /// How long a delivery may stay unacknowledged before a backend that cannot see its
    /// consumer die (Redis) hands it to another consumer; 30 s by default. A consumer that
    /// works longer than this on one event may see it done twice.
    pub claim_idle: Duration,
}

impl Default for GroupOptions {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            claim_idle: Duration::from_secs(30),
        }
    }
}

/// One event handed to one consumer of a group.
///
/// [`Delivery::ack`] when it is done; [`Delivery::nack`] to have it delivered again (to any
/// consumer of the group). Dropped without either, it stays pending: it is delivered again
/// when its consumer goes away (in-process) or once it has been idle for the group's
/// [`GroupOptions::claim_idle`] (Redis).
pub struct Delivery {
    /// The event.
    pub event: Event,
    /// 1 for the first delivery, more for each delivery again.
    pub attempt: u32,
    id: String,
    acker: Arc<dyn Acknowledge>,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("id", &self.id)
            .field("attempt", &self.attempt)
            .field("event", &self.event)
            .finish_non_exhaustive()
    }
}

impl Delivery {
    /// A delivery of `event`, known to its backend by `id`, settled through `acker`.
    pub fn new(event: Event, attempt: u32, id: String, acker: Arc<dyn Acknowledge>) -> Self {
        Self {
            event,
            attempt,
            id,
            acker,
        }
    }

    /// The backend's id of this delivery's entry.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Done with it: it is not delivered again.
    pub async fn ack(self) -> Result<(), PubSubError> {
        self.acker.ack(&self.id).await
    }

    /// Not done: deliver it again (until the group's `max_attempts`).
    pub async fn nack(self) -> Result<(), PubSubError> {
        self.acker.nack(&self.id, self.attempt).await
    }
}

/// How a backend settles its deliveries.
#[async_trait::async_trait]
pub trait Acknowledge: Send + Sync {
    /// The delivery `id` is done.
    async fn ack(&self, id: &str) -> Result<(), PubSubError>;
    /// The delivery `id` (its `attempt`th) is to be delivered again.
    async fn nack(&self, id: &str, attempt: u32) -> Result<(), PubSubError>;
}

/// A consumer's deliveries. Dropping it leaves the group; what it had not acknowledged goes
/// to the group's other consumers.
pub struct GroupSubscription {
    deliveries: BoxStream<'static, Delivery>,
}

impl GroupSubscription {
    /// A subscription reading `deliveries`.
    pub fn new(deliveries: BoxStream<'static, Delivery>) -> Self {
        Self { deliveries }
    }
}

impl std::fmt::Debug for GroupSubscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupSubscription").finish_non_exhaustive()
    }
}

impl Stream for GroupSubscription {
    type Item = Delivery;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Delivery>> {
        self.deliveries.as_mut().poll_next(cx)
    }
}

/// An event a group holds until a consumer acknowledges it.
struct Pending {
    id: u64,
    event: Event,
    /// Deliveries so far.
    attempt: u32,
}

struct Consumer {
    key: u64,
    sender: mpsc::Sender<Delivery>,
}

/// One in-process group: what waits for a consumer, what a consumer holds, and the consumers.
pub(super) struct Group {
    topic: String,
    name: String,
    options: GroupOptions,
    next_id: u64,
    next_consumer_key: u64,
    waiting: VecDeque<Pending>,
    in_flight: HashMap<u64, (Pending, u64)>,
    consumers: Vec<Consumer>,
    /// Where the next event goes first (round robin).
    turn: usize,
    backlog: usize,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group")
            .field("topic", &self.topic)
            .field("name", &self.name)
            .field("waiting", &self.waiting.len())
            .field("in_flight", &self.in_flight.len())
            .field("consumers", &self.consumers.len())
            .finish()
    }
}

/// Only plain data lives behind the lock; a panic elsewhere leaves it consistent.
fn lock(group: &Mutex<Group>) -> std::sync::MutexGuard<'_, Group> {
    group.lock().unwrap_or_else(|e| e.into_inner())
}

impl Group {
    pub(super) fn new(topic: &str, name: &str, options: GroupOptions, backlog: usize) -> Self {
        Self {
            topic: topic.to_owned(),
            name: name.to_owned(),
            options,
            next_id: 0,
            next_consumer_key: 0,
            waiting: VecDeque::new(),
            in_flight: HashMap::new(),
            consumers: Vec::new(),
            turn: 0,
            backlog,
        }
    }

    pub(super) fn push(this: &Arc<Mutex<Group>>, event: Event) {
        let mut group = lock(this);
        if group.waiting.len() >= group.backlog {
            // A group nobody consumes must not grow without end: like a Redis stream's
            // MAXLEN, the oldest waiting event goes.
            group.waiting.pop_front();
            tracing::warn!(
                topic = %group.topic,
                group = %group.name,
                "a consumer group left too many events waiting: dropping the oldest"
            );
        }
        let id = group.next_id;
        group.next_id += 1;
        group.waiting.push_back(Pending {
            id,
            event,
            attempt: 0,
        });
        group.pump(this);
    }

    /// A new consumer's subscription.
    pub(super) fn join(this: &Arc<Mutex<Group>>) -> GroupSubscription {
        let mut group = lock(this);
        let (sender, mut receiver) = mpsc::channel(group.backlog);
        let key = group.next_consumer_key;
        group.next_consumer_key += 1;
        group.consumers.push(Consumer { key, sender });
        group.pump(this);
        let leave = Leave {
            group: Arc::downgrade(this),
            key,
        };
        let deliveries = futures::stream::poll_fn(move |cx| {
            // Owned by the stream: dropping the subscription leaves the group.
            let _ = &leave;
            receiver.poll_recv(cx)
        });
        GroupSubscription::new(Box::pin(deliveries))
    }

    /// Hands waiting events to consumers with room, in turn.
    fn pump(&mut self, this: &Arc<Mutex<Group>>) {
        while let Some(front) = self.waiting.front() {
            let mut sent_to = None;
            for _ in 0..self.consumers.len() {
                let index = self.turn % self.consumers.len();
                self.turn = self.turn.wrapping_add(1);
                let delivery = Delivery::new(
                    front.event.clone(),
                    front.attempt + 1,
                    front.id.to_string(),
                    Arc::new(InProcessAck {
                        group: Arc::downgrade(this),
                    }),
                );
                // Full: the next consumer's turn; closed: it leaves when its guard drops.
                if self.consumers[index].sender.try_send(delivery).is_ok() {
                    sent_to = Some(self.consumers[index].key);
                    break;
                }
            }
            let Some(key) = sent_to else {
                return;
            };
            if let Some(mut pending) = self.waiting.pop_front() {
                pending.attempt += 1;
                self.in_flight.insert(pending.id, (pending, key));
            }
        }
    }

    /// Puts a delivery back in line, or gives it up after its last attempt.
    fn requeue(&mut self, pending: Pending) {
        if pending.attempt >= self.options.max_attempts {
            tracing::warn!(
                topic = %self.topic,
                group = %self.name,
                attempts = pending.attempt,
                "an event was not acknowledged after its last attempt: giving it up"
            );
            return;
        }
        self.waiting.push_front(pending);
    }
}

/// Leaves the group when a consumer's subscription is dropped; what it held goes back in line.
struct Leave {
    group: Weak<Mutex<Group>>,
    key: u64,
}

impl Drop for Leave {
    fn drop(&mut self) {
        let Some(this) = self.group.upgrade() else {
            return;
        };
        let mut group = lock(&this);
        group.consumers.retain(|c| c.key != self.key);
        let mut held: Vec<u64> = group
            .in_flight
            .iter()
            .filter(|(_, (_, key))| *key == self.key)
            .map(|(id, _)| *id)
            .collect();
        // Back in publication order, ahead of what never went out.
        held.sort_unstable_by(|a, b| b.cmp(a));
        for id in held {
            if let Some((pending, _)) = group.in_flight.remove(&id) {
                group.requeue(pending);
            }
        }
        group.pump(&this);
    }
}

struct InProcessAck {
    group: Weak<Mutex<Group>>,
}

#[async_trait::async_trait]
impl Acknowledge for InProcessAck {
    async fn ack(&self, id: &str) -> Result<(), PubSubError> {
        if let (Some(this), Ok(id)) = (self.group.upgrade(), id.parse::<u64>()) {
            lock(&this).in_flight.remove(&id);
        }
        Ok(())
    }

    async fn nack(&self, id: &str, _attempt: u32) -> Result<(), PubSubError> {
        if let (Some(this), Ok(id)) = (self.group.upgrade(), id.parse::<u64>()) {
            let mut group = lock(&this);
            if let Some((pending, _)) = group.in_flight.remove(&id) {
                group.requeue(pending);
                group.pump(&this);
            }
        }
        Ok(())
    }
}

/// The in-process groups of every topic.
pub(super) type Groups = HashMap<String, HashMap<String, Arc<Mutex<Group>>>>;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use futures::StreamExt;

    use super::*;
    use crate::event::{AbortPayload, EventKind};

    fn event(n: usize) -> Event {
        Event::agent(
            format!("run-{n}").into(),
            EventKind::Abort(AbortPayload::default()),
        )
    }

    #[tokio::test]
    async fn a_group_without_consumers_keeps_at_most_its_backlog() {
        let group = Arc::new(Mutex::new(Group::new("t", "g", GroupOptions::default(), 3)));
        drop(Group::join(&group));
        for n in 0..10 {
            Group::push(&group, event(n));
        }
        assert_eq!(lock(&group).waiting.len(), 3);
        let mut consumer = Group::join(&group);
        let first = consumer.next().await.unwrap();
        assert_eq!(&*first.event.run_id, "run-7", "the newest three waited");
    }
}
