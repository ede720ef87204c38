//! The conformance suite every [`PubSub`] backend must pass: what a subscriber of a thread may
//! rely on, whichever backend carries its events.
//!
//! A backend's tests call [`run_all`] with a function that makes a fresh, empty pub/sub (its
//! own key prefix, say), so the checks never see each other's events:
//!
//! ```
//! # async fn demo() {
//! use std::sync::Arc;
//! use kestrel_core::pubsub::{InProcessPubSub, SharedPubSub, testing};
//!
//! testing::run_all(|| async { Arc::new(InProcessPubSub::new()) as SharedPubSub }).await;
//! # }
//! ```
//!
//! A check that fails panics with its name and what it saw. Receiving waits at most
//! [`RECEIVE_TIMEOUT`], so a backend that loses an event fails instead of hanging.

// Test support: a failed check panics, as an assertion does.
#![allow(clippy::panic)]

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;

use super::{Delivery, GroupOptions, GroupSubscription, PubSub, SharedPubSub, Subscription};
use crate::event::{
    AbortPayload, Event, EventKind, EventSource, TextDeltaPayload, ToolCallPayload,
};

/// How long a check waits for an event it expects.
pub const RECEIVE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a check waits before it concludes that an event it does not expect is not coming.
pub const SILENCE: Duration = Duration::from_millis(300);

/// One check: its name, and the check run on a fresh pub/sub.
pub type Check = (&'static str, fn(SharedPubSub) -> BoxFuture<'static, ()>);

/// Every check of the suite.
pub const CHECKS: &[Check] = &[
    ("events_arrive_in_publication_order", |p| {
        Box::pin(events_arrive_in_publication_order(p))
    }),
    ("every_subscriber_gets_every_event", |p| {
        Box::pin(every_subscriber_gets_every_event(p))
    }),
    ("a_subscription_starts_when_subscribe_returns", |p| {
        Box::pin(a_subscription_starts_when_subscribe_returns(p))
    }),
    ("topics_are_separate", |p| Box::pin(topics_are_separate(p))),
    ("events_arrive_whole", |p| Box::pin(events_arrive_whole(p))),
    ("concurrent_publishers_lose_nothing", |p| {
        Box::pin(concurrent_publishers_lose_nothing(p))
    }),
    ("a_dropped_subscription_leaves_the_others_working", |p| {
        Box::pin(a_dropped_subscription_leaves_the_others_working(p))
    }),
    ("publishing_to_nobody_succeeds", |p| {
        Box::pin(publishing_to_nobody_succeeds(p))
    }),
    ("a_group_shares_the_work", |p| {
        Box::pin(a_group_shares_the_work(p))
    }),
    ("every_group_gets_every_event", |p| {
        Box::pin(every_group_gets_every_event(p))
    }),
    ("a_nacked_event_comes_again_up_to_max_attempts", |p| {
        Box::pin(a_nacked_event_comes_again_up_to_max_attempts(p))
    }),
    ("a_departed_consumers_work_goes_to_another", |p| {
        Box::pin(a_departed_consumers_work_goes_to_another(p))
    }),
    ("work_waits_for_a_consumer", |p| {
        Box::pin(work_waits_for_a_consumer(p))
    }),
    ("bad_group_names_are_refused", |p| {
        Box::pin(bad_group_names_are_refused(p))
    }),
];

/// The group options of the checks: short enough that redelivery happens within a check.
pub fn check_group_options() -> GroupOptions {
    GroupOptions {
        max_attempts: 3,
        claim_idle: Duration::from_millis(400),
    }
}

/// Runs every check of [`CHECKS`], each on a pub/sub `fresh` makes.
pub async fn run_all<F, Fut>(fresh: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = SharedPubSub>,
{
    for (name, check) in CHECKS {
        let pubsub = fresh().await;
        tracing::info!(check = name, "pub/sub conformance");
        check(pubsub).await;
    }
}

fn numbered(n: usize) -> Event {
    Event::agent(
        format!("run-{n}").into(),
        EventKind::TextDelta(TextDeltaPayload {
            id: "msg-1".into(),
            text: format!("delta {n}"),
        }),
    )
}

async fn subscribe(pubsub: &dyn PubSub, topic: &str, check: &str) -> Subscription {
    match pubsub.subscribe(topic).await {
        Ok(subscription) => subscription,
        Err(error) => panic!("{check}: subscribing to {topic:?} failed: {error}"),
    }
}

async fn publish(pubsub: &dyn PubSub, topic: &str, event: Event, check: &str) {
    if let Err(error) = pubsub.publish(topic, event).await {
        panic!("{check}: publishing on {topic:?} failed: {error}");
    }
}

async fn receive(subscription: &mut Subscription, check: &str) -> Event {
    match tokio::time::timeout(RECEIVE_TIMEOUT, subscription.next()).await {
        Ok(Some(event)) => event,
        Ok(None) => panic!("{check}: the subscription ended while an event was expected"),
        Err(_) => panic!("{check}: no event within {RECEIVE_TIMEOUT:?}"),
    }
}

async fn receive_n(subscription: &mut Subscription, n: usize, check: &str) -> Vec<Event> {
    let mut events = Vec::with_capacity(n);
    for _ in 0..n {
        events.push(receive(subscription, check).await);
    }
    events
}

async fn assert_silent(subscription: &mut Subscription, check: &str) {
    if let Ok(Some(event)) = tokio::time::timeout(SILENCE, subscription.next()).await {
        panic!("{check}: an event arrived that should not have: {event:?}");
    }
}

/// A subscriber gets every event of its topic, in the order they were published.
pub async fn events_arrive_in_publication_order(pubsub: SharedPubSub) {
    const CHECK: &str = "events_arrive_in_publication_order";
    let mut subscription = subscribe(&*pubsub, "thread:order", CHECK).await;
    for n in 0..200 {
        publish(&*pubsub, "thread:order", numbered(n), CHECK).await;
    }
    let events = receive_n(&mut subscription, 200, CHECK).await;
    let expected: Vec<Event> = (0..200).map(numbered).collect();
    assert_eq!(events, expected, "{CHECK}");
}

/// Each of several subscribers of one topic gets every event (fan-out, not work sharing).
pub async fn every_subscriber_gets_every_event(pubsub: SharedPubSub) {
    const CHECK: &str = "every_subscriber_gets_every_event";
    let mut subscriptions = Vec::new();
    for _ in 0..3 {
        subscriptions.push(subscribe(&*pubsub, "thread:fan-out", CHECK).await);
    }
    for n in 0..20 {
        publish(&*pubsub, "thread:fan-out", numbered(n), CHECK).await;
    }
    let expected: Vec<Event> = (0..20).map(numbered).collect();
    for subscription in &mut subscriptions {
        assert_eq!(
            receive_n(subscription, 20, CHECK).await,
            expected,
            "{CHECK}"
        );
    }
}

/// A subscription sees what is published once `subscribe` has returned, and nothing from
/// before it was made.
pub async fn a_subscription_starts_when_subscribe_returns(pubsub: SharedPubSub) {
    const CHECK: &str = "a_subscription_starts_when_subscribe_returns";
    let mut early = subscribe(&*pubsub, "thread:start", CHECK).await;
    publish(&*pubsub, "thread:start", numbered(1), CHECK).await;
    assert_eq!(receive(&mut early, CHECK).await, numbered(1), "{CHECK}");
    let mut late = subscribe(&*pubsub, "thread:start", CHECK).await;
    // Published right after `subscribe` returned: no event may fall in between.
    publish(&*pubsub, "thread:start", numbered(2), CHECK).await;
    assert_eq!(
        receive(&mut late, CHECK).await,
        numbered(2),
        "{CHECK}: the late subscriber must start at event 2, not see event 1"
    );
    assert_eq!(receive(&mut early, CHECK).await, numbered(2), "{CHECK}");
}

/// A subscriber of one topic gets nothing published on another, even one whose name
/// extends its own.
pub async fn topics_are_separate(pubsub: SharedPubSub) {
    const CHECK: &str = "topics_are_separate";
    let mut a = subscribe(&*pubsub, "thread:a", CHECK).await;
    let mut b = subscribe(&*pubsub, "thread:a:b", CHECK).await;
    publish(&*pubsub, "thread:a:b", numbered(1), CHECK).await;
    publish(&*pubsub, "thread:a", numbered(2), CHECK).await;
    assert_eq!(receive(&mut a, CHECK).await, numbered(2), "{CHECK}");
    assert_eq!(receive(&mut b, CHECK).await, numbered(1), "{CHECK}");
    assert_silent(&mut a, CHECK).await;
    assert_silent(&mut b, CHECK).await;
}

/// An event arrives as it was published: run id, source and payload, including text that
/// is not ASCII and JSON arguments.
pub async fn events_arrive_whole(pubsub: SharedPubSub) {
    const CHECK: &str = "events_arrive_whole";
    let mut subscription = subscribe(&*pubsub, "thread:whole", CHECK).await;
    let events = vec![
        Event {
            run_id: "run-é".into(),
            from: EventSource::Agent,
            kind: EventKind::ToolCall(ToolCallPayload {
                tool_call_id: "call-1".into(),
                tool_name: "add".into(),
                args: serde_json::json!({"a": 2, "b": [1, 2.5, null], "note": "ünïcode \"quoted\"\n"}),
            }),
        },
        Event::agent("run-2".into(), EventKind::Abort(AbortPayload::default())),
        Event::agent(
            "run-3".into(),
            EventKind::TextDelta(TextDeltaPayload {
                id: "m".into(),
                text: "x".repeat(64 * 1024),
            }),
        ),
    ];
    for event in &events {
        publish(&*pubsub, "thread:whole", event.clone(), CHECK).await;
    }
    assert_eq!(
        receive_n(&mut subscription, 3, CHECK).await,
        events,
        "{CHECK}"
    );
}

/// Publishers on several tasks at once: every event arrives once, and each publisher's
/// events keep their order.
pub async fn concurrent_publishers_lose_nothing(pubsub: SharedPubSub) {
    const CHECK: &str = "concurrent_publishers_lose_nothing";
    const PUBLISHERS: usize = 4;
    const EACH: usize = 50;
    let mut subscription = subscribe(&*pubsub, "thread:concurrent", CHECK).await;
    let tasks: Vec<_> = (0..PUBLISHERS)
        .map(|p| {
            let pubsub = Arc::clone(&pubsub);
            tokio::spawn(async move {
                for n in 0..EACH {
                    publish(&*pubsub, "thread:concurrent", numbered(p * 1000 + n), CHECK).await;
                }
            })
        })
        .collect();
    for task in tasks {
        if let Err(error) = task.await {
            panic!("{CHECK}: a publisher failed: {error}");
        }
    }
    let events = receive_n(&mut subscription, PUBLISHERS * EACH, CHECK).await;
    for p in 0..PUBLISHERS {
        let mine: Vec<usize> = events
            .iter()
            .filter_map(|e| e.run_id.strip_prefix("run-")?.parse::<usize>().ok())
            .filter(|n| n / 1000 == p)
            .map(|n| n % 1000)
            .collect();
        assert_eq!(
            mine,
            (0..EACH).collect::<Vec<_>>(),
            "{CHECK}: publisher {p}'s events"
        );
    }
    assert_silent(&mut subscription, CHECK).await;
}

/// Dropping one subscription of a topic leaves the topic's other subscribers getting its
/// events, and publishing goes on succeeding.
pub async fn a_dropped_subscription_leaves_the_others_working(pubsub: SharedPubSub) {
    const CHECK: &str = "a_dropped_subscription_leaves_the_others_working";
    let mut kept = subscribe(&*pubsub, "thread:drop", CHECK).await;
    let dropped = subscribe(&*pubsub, "thread:drop", CHECK).await;
    drop(dropped);
    for n in 0..5 {
        publish(&*pubsub, "thread:drop", numbered(n), CHECK).await;
    }
    let expected: Vec<Event> = (0..5).map(numbered).collect();
    assert_eq!(receive_n(&mut kept, 5, CHECK).await, expected, "{CHECK}");
    assert!(
        pubsub.has_subscribers("thread:drop"),
        "{CHECK}: a topic with a live subscriber must report that it may have subscribers"
    );
}

/// Publishing on a topic nobody subscribes to succeeds (the event goes nowhere).
pub async fn publishing_to_nobody_succeeds(pubsub: SharedPubSub) {
    const CHECK: &str = "publishing_to_nobody_succeeds";
    for n in 0..3 {
        publish(&*pubsub, "thread:nobody", numbered(n), CHECK).await;
    }
    let mut later = subscribe(&*pubsub, "thread:nobody", CHECK).await;
    assert_silent(&mut later, CHECK).await;
}

async fn join(
    pubsub: &dyn PubSub,
    topic: &str,
    group: &str,
    consumer: &str,
    check: &str,
) -> GroupSubscription {
    match pubsub
        .subscribe_group(topic, group, consumer, check_group_options())
        .await
    {
        Ok(subscription) => subscription,
        Err(error) => panic!("{check}: joining {group:?} on {topic:?} failed: {error}"),
    }
}

async fn deliver(subscription: &mut GroupSubscription, check: &str) -> Delivery {
    match tokio::time::timeout(RECEIVE_TIMEOUT, subscription.next()).await {
        Ok(Some(delivery)) => delivery,
        Ok(None) => panic!("{check}: the group subscription ended while a delivery was expected"),
        Err(_) => panic!("{check}: no delivery within {RECEIVE_TIMEOUT:?}"),
    }
}

async fn assert_no_delivery(subscription: &mut GroupSubscription, wait: Duration, check: &str) {
    if let Ok(Some(delivery)) = tokio::time::timeout(wait, subscription.next()).await {
        panic!("{check}: a delivery arrived that should not have: {delivery:?}");
    }
}

async fn settle(delivery: Delivery, ack: bool, check: &str) {
    let done = if ack {
        delivery.ack().await
    } else {
        delivery.nack().await
    };
    if let Err(error) = done {
        panic!("{check}: settling a delivery failed: {error}");
    }
}

fn run_number(event: &Event) -> usize {
    event
        .run_id
        .strip_prefix("run-")
        .and_then(|n| n.parse().ok())
        .unwrap_or(usize::MAX)
}

/// Two consumers of one group: every event goes to exactly one of them, first time.
pub async fn a_group_shares_the_work(pubsub: SharedPubSub) {
    const CHECK: &str = "a_group_shares_the_work";
    let topic = "work:share";
    let mut one = join(&*pubsub, topic, "workers", "one", CHECK).await;
    let mut two = join(&*pubsub, topic, "workers", "two", CHECK).await;
    for n in 0..20 {
        publish(&*pubsub, topic, numbered(n), CHECK).await;
    }
    let mut seen = Vec::new();
    // Read both until all twenty arrived; each is acknowledged.
    while seen.len() < 20 {
        let delivery = tokio::select! {
            d = deliver(&mut one, CHECK) => d,
            d = deliver(&mut two, CHECK) => d,
        };
        assert_eq!(delivery.attempt, 1, "{CHECK}: a first delivery");
        seen.push(run_number(&delivery.event));
        settle(delivery, true, CHECK).await;
    }
    seen.sort_unstable();
    assert_eq!(
        seen,
        (0..20).collect::<Vec<_>>(),
        "{CHECK}: each event once"
    );
    let wait = check_group_options().claim_idle * 3;
    let (a, b) = tokio::join!(
        assert_no_delivery(&mut one, wait, CHECK),
        assert_no_delivery(&mut two, wait, CHECK)
    );
    let ((), ()) = (a, b);
}

/// Two groups and a plain subscriber of one topic each get every event.
pub async fn every_group_gets_every_event(pubsub: SharedPubSub) {
    const CHECK: &str = "every_group_gets_every_event";
    let topic = "work:groups";
    let mut first = join(&*pubsub, topic, "first", "c", CHECK).await;
    let mut second = join(&*pubsub, topic, "second", "c", CHECK).await;
    let mut watcher = subscribe(&*pubsub, topic, CHECK).await;
    for n in 0..5 {
        publish(&*pubsub, topic, numbered(n), CHECK).await;
    }
    for group in [&mut first, &mut second] {
        for n in 0..5 {
            let delivery = deliver(group, CHECK).await;
            assert_eq!(
                delivery.event,
                numbered(n),
                "{CHECK}: in order within a consumer"
            );
            settle(delivery, true, CHECK).await;
        }
    }
    let expected: Vec<Event> = (0..5).map(numbered).collect();
    assert_eq!(receive_n(&mut watcher, 5, CHECK).await, expected, "{CHECK}");
}

/// A nacked event is delivered again with the next attempt number, until the group's
/// `max_attempts`; then it is given up.
pub async fn a_nacked_event_comes_again_up_to_max_attempts(pubsub: SharedPubSub) {
    const CHECK: &str = "a_nacked_event_comes_again_up_to_max_attempts";
    let topic = "work:nack";
    let mut consumer = join(&*pubsub, topic, "g", "c", CHECK).await;
    publish(&*pubsub, topic, numbered(7), CHECK).await;
    let max = check_group_options().max_attempts;
    for attempt in 1..=max {
        let delivery = deliver(&mut consumer, CHECK).await;
        assert_eq!(delivery.event, numbered(7), "{CHECK}");
        assert_eq!(delivery.attempt, attempt, "{CHECK}: attempts count up");
        settle(delivery, false, CHECK).await;
    }
    let wait = check_group_options().claim_idle * 3;
    assert_no_delivery(&mut consumer, wait, CHECK).await;
    // The group goes on with new work.
    publish(&*pubsub, topic, numbered(8), CHECK).await;
    let delivery = deliver(&mut consumer, CHECK).await;
    assert_eq!(
        (delivery.event.clone(), delivery.attempt),
        (numbered(8), 1),
        "{CHECK}"
    );
    settle(delivery, true, CHECK).await;
}

/// A consumer that goes away with a delivery it never acknowledged: another consumer of the
/// group gets it, as a further attempt.
pub async fn a_departed_consumers_work_goes_to_another(pubsub: SharedPubSub) {
    const CHECK: &str = "a_departed_consumers_work_goes_to_another";
    let topic = "work:departed";
    let mut leaving = join(&*pubsub, topic, "g", "leaving", CHECK).await;
    publish(&*pubsub, topic, numbered(1), CHECK).await;
    let held = deliver(&mut leaving, CHECK).await;
    assert_eq!(held.attempt, 1, "{CHECK}");
    // It dies holding it: neither acknowledged nor given back.
    drop(held);
    drop(leaving);
    let mut staying = join(&*pubsub, topic, "g", "staying", CHECK).await;
    let again = deliver(&mut staying, CHECK).await;
    assert_eq!(again.event, numbered(1), "{CHECK}");
    assert_eq!(again.attempt, 2, "{CHECK}: the second delivery");
    settle(again, true, CHECK).await;
    let wait = check_group_options().claim_idle * 3;
    assert_no_delivery(&mut staying, wait, CHECK).await;
}

/// Events published while a group has no consumer wait for the next one.
pub async fn work_waits_for_a_consumer(pubsub: SharedPubSub) {
    const CHECK: &str = "work_waits_for_a_consumer";
    let topic = "work:waits";
    drop(join(&*pubsub, topic, "g", "first", CHECK).await);
    for n in 0..3 {
        publish(&*pubsub, topic, numbered(n), CHECK).await;
    }
    let mut later = join(&*pubsub, topic, "g", "later", CHECK).await;
    for n in 0..3 {
        let delivery = deliver(&mut later, CHECK).await;
        assert_eq!(
            (delivery.event.clone(), delivery.attempt),
            (numbered(n), 1),
            "{CHECK}"
        );
        settle(delivery, true, CHECK).await;
    }
}

/// Empty names and options out of range are refused with an error, not a panic.
pub async fn bad_group_names_are_refused(pubsub: SharedPubSub) {
    const CHECK: &str = "bad_group_names_are_refused";
    let options = check_group_options();
    for (group, consumer) in [("", "c"), ("g", ""), (&*"g".repeat(201), "c")] {
        let refused = pubsub
            .subscribe_group("work:bad", group, consumer, options)
            .await;
        assert!(
            refused.is_err(),
            "{CHECK}: group {group:?}, consumer {consumer:?}"
        );
    }
    let zero = GroupOptions {
        max_attempts: 0,
        ..options
    };
    assert!(
        pubsub
            .subscribe_group("work:bad", "g", "c", zero)
            .await
            .is_err(),
        "{CHECK}: max_attempts 0"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pubsub::InProcessPubSub;

    #[tokio::test]
    async fn the_in_process_pubsub_passes_the_suite() {
        run_all(|| async { Arc::new(InProcessPubSub::new()) as SharedPubSub }).await;
    }
}
