//! `RedisPubSub` on a real Redis: the pub/sub conformance suite, two instances on one Redis,
//! and a Redis restart under a subscription.
//!
//! The Redis comes from `KESTREL_TEST_REDIS_URL` (CI sets it; without it these tests say so
//! and pass). Every test uses its own key prefix. The restart test starts its own
//! `redis-server` on a free port.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cluster;
mod faults;
mod restart;

use std::sync::Arc;

use futures::StreamExt;
use kestrel_core::event::{Event, EventKind, TextDeltaPayload};
use kestrel_core::pubsub::{PubSub, SharedPubSub, testing};
use kestrel_redis::{RedisPubSub, RedisPubSubOptions};

/// The test Redis's URL, or `None` (and a note) when none is configured.
pub(crate) fn redis_url(test: &str) -> Option<String> {
    match std::env::var("KESTREL_TEST_REDIS_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            eprintln!("skipping {test}: KESTREL_TEST_REDIS_URL is not set");
            None
        }
    }
}

/// A key prefix no other test (or test run) uses.
pub(crate) fn fresh_prefix() -> String {
    format!("kestrel-test:{}:", uuid::Uuid::new_v4())
}

pub(crate) fn delta(n: usize) -> Event {
    Event::agent(
        format!("run-{n}").into(),
        EventKind::TextDelta(TextDeltaPayload {
            id: "m".into(),
            text: format!("delta {n}"),
        }),
    )
}

async fn connect(url: &str, prefix: &str) -> RedisPubSub {
    RedisPubSub::connect(url, RedisPubSubOptions::default().key_prefix(prefix))
        .await
        .unwrap()
}

#[tokio::test]
async fn redis_pubsub_passes_the_conformance_suite() {
    let Some(url) = redis_url("redis_pubsub_passes_the_conformance_suite") else {
        return;
    };
    testing::run_all(|| {
        let url = url.clone();
        async move {
            // Short blocking reads: a given-back delivery is taken again at the next read.
            let options = RedisPubSubOptions {
                block: std::time::Duration::from_millis(100),
                ..RedisPubSubOptions::default().key_prefix(fresh_prefix())
            };
            Arc::new(RedisPubSub::connect(&url, options).await.unwrap()) as SharedPubSub
        }
    })
    .await;
}

#[tokio::test]
async fn a_subscriber_on_one_instance_sees_what_another_publishes() {
    let Some(url) = redis_url("a_subscriber_on_one_instance_sees_what_another_publishes") else {
        return;
    };
    let prefix = fresh_prefix();
    let a = connect(&url, &prefix).await;
    let b = connect(&url, &prefix).await;
    let mut on_a = a.subscribe("thread:shared").await.unwrap();
    let mut on_b = b.subscribe("thread:shared").await.unwrap();
    for n in 0..10 {
        let publisher = if n % 2 == 0 { &a } else { &b };
        publisher.publish("thread:shared", delta(n)).await.unwrap();
    }
    let expected: Vec<Event> = (0..10).map(delta).collect();
    for subscription in [&mut on_a, &mut on_b] {
        let got: Vec<Event> = subscription.take(10).collect().await;
        assert_eq!(got, expected);
    }
    // Another prefix is another application: it sees none of it.
    let other = connect(&url, &fresh_prefix()).await;
    let mut elsewhere = other.subscribe("thread:shared").await.unwrap();
    a.publish("thread:shared", delta(99)).await.unwrap();
    let silent = tokio::time::timeout(testing::SILENCE, elsewhere.next()).await;
    assert!(
        silent.is_err(),
        "a different key prefix must not see the event"
    );
}

#[tokio::test]
async fn a_stream_keeps_about_max_len_entries() {
    let Some(url) = redis_url("a_stream_keeps_about_max_len_entries") else {
        return;
    };
    let options = RedisPubSubOptions {
        max_len: 100,
        ..RedisPubSubOptions::default().key_prefix(fresh_prefix())
    };
    let pubsub = RedisPubSub::connect(&url, options).await.unwrap();
    for n in 0..2_000 {
        pubsub.publish("thread:bounded", delta(n)).await.unwrap();
    }
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let len: usize = redis::cmd("XLEN")
        .arg(pubsub.stream_key("thread:bounded"))
        .query_async(&mut connection)
        .await
        .unwrap();
    // `MAXLEN ~` trims whole radix-tree nodes (100 entries each by default).
    assert!((100..=300).contains(&len), "the stream holds {len} entries");
}

#[tokio::test]
async fn an_unreachable_redis_is_a_clear_error() {
    // Nothing listens on port 1.
    let error = RedisPubSub::connect("redis://127.0.0.1:1", RedisPubSubOptions::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("could not connect to Redis"), "{error}");
    let error = RedisPubSub::connect("postgres://nope", RedisPubSubOptions::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("is not a Redis URL"), "{error}");
}

#[tokio::test]
async fn two_instances_share_a_groups_work_and_take_over_a_dead_ones() {
    let Some(url) = redis_url("two_instances_share_a_groups_work_and_take_over_a_dead_ones") else {
        return;
    };
    let prefix = fresh_prefix();
    let options = RedisPubSubOptions {
        block: std::time::Duration::from_millis(100),
        ..RedisPubSubOptions::default().key_prefix(&prefix)
    };
    let a = RedisPubSub::connect(&url, options.clone()).await.unwrap();
    let b = RedisPubSub::connect(&url, options).await.unwrap();
    let group = testing::check_group_options();
    let mut on_a = a
        .subscribe_group("work:jobs", "workers", "a", group)
        .await
        .unwrap();
    let mut on_b = b
        .subscribe_group("work:jobs", "workers", "b", group)
        .await
        .unwrap();
    for n in 0..10 {
        a.publish("work:jobs", delta(n)).await.unwrap();
    }
    // Instance A takes some and dies without acknowledging; B finishes everything.
    let held = on_a.next().await.unwrap();
    drop(held);
    drop(on_a);
    drop(a);
    let mut done = std::collections::BTreeSet::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while done.len() < 10 && std::time::Instant::now() < deadline {
        let Ok(Some(delivery)) =
            tokio::time::timeout(std::time::Duration::from_secs(2), on_b.next()).await
        else {
            continue;
        };
        done.insert(delivery.event.run_id.to_string());
        delivery.ack().await.unwrap();
    }
    let expected: std::collections::BTreeSet<String> =
        (0..10).map(|n| format!("run-{n}")).collect();
    assert_eq!(done, expected, "B did every job, A's included");
}

#[tokio::test]
async fn redis_leases_pass_the_conformance_suite() {
    let Some(url) = redis_url("redis_leases_pass_the_conformance_suite") else {
        return;
    };
    kestrel_core::lease::testing::run_all(|| {
        let url = url.clone();
        async move {
            Arc::new(
                kestrel_redis::RedisLeases::connect(&url, fresh_prefix())
                    .await
                    .unwrap(),
            ) as Arc<dyn kestrel_core::lease::LeaseProvider>
        }
    })
    .await;
}

#[tokio::test]
async fn two_instances_see_one_lease_and_tokens_grow_across_them() {
    use kestrel_core::lease::LeaseProvider;
    let Some(url) = redis_url("two_instances_see_one_lease_and_tokens_grow_across_them") else {
        return;
    };
    let prefix = fresh_prefix();
    let a = kestrel_redis::RedisLeases::connect(&url, prefix.clone())
        .await
        .unwrap();
    let b = kestrel_redis::RedisLeases::connect(&url, prefix)
        .await
        .unwrap();
    let ttl = std::time::Duration::from_millis(300);
    let on_a = a.acquire("run:x", "a", ttl).await.unwrap().unwrap();
    assert_eq!(b.acquire("run:x", "b", ttl).await.unwrap(), None);
    assert_eq!(b.holder("run:x").await.unwrap(), Some(on_a.clone()));
    tokio::time::sleep(ttl * 2).await;
    let on_b = b.acquire("run:x", "b", ttl).await.unwrap().unwrap();
    assert!(on_b.token > on_a.token);
    assert!(
        !a.renew(&on_a, ttl).await.unwrap(),
        "A's lease ran out and is B's now"
    );
}

#[tokio::test]
async fn tokens_keep_growing_after_redis_loses_the_counter() {
    use kestrel_core::lease::LeaseProvider;
    let Some(url) = redis_url("tokens_keep_growing_after_redis_loses_the_counter") else {
        return;
    };
    let prefix = fresh_prefix();
    let leases = kestrel_redis::RedisLeases::connect(&url, prefix.clone())
        .await
        .unwrap();
    let ttl = std::time::Duration::from_secs(5);
    let before = leases.acquire("run:y", "a", ttl).await.unwrap().unwrap();
    // What a Redis restarted without persistence looks like: the counter and the lease gone.
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("DEL")
        .arg(format!("{prefix}lease-token"))
        .arg(format!("{prefix}lease:run:y"))
        .query_async(&mut conn)
        .await
        .unwrap();
    let after = leases.acquire("run:y", "b", ttl).await.unwrap().unwrap();
    assert!(
        after.token > before.token,
        "{} after {}",
        after.token,
        before.token
    );
    // Exact digits survive the round trip through the script and the key's value.
    assert_eq!(leases.holder("run:y").await.unwrap(), Some(after));
}

#[tokio::test]
async fn an_exhausted_token_counter_is_a_clear_error() {
    use kestrel_core::lease::{LeaseError, LeaseProvider};
    let Some(url) = redis_url("an_exhausted_token_counter_is_a_clear_error") else {
        return;
    };
    let prefix = fresh_prefix();
    let leases = kestrel_redis::RedisLeases::connect(&url, prefix.clone())
        .await
        .unwrap();
    let ttl = std::time::Duration::from_secs(5);
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    // At the largest token, and with something else than a number in it (someone wrote it).
    for value in ["9007199254740991", "not a number"] {
        let _: () = redis::cmd("SET")
            .arg(format!("{prefix}lease-token"))
            .arg(value)
            .query_async(&mut conn)
            .await
            .unwrap();
        let refused = leases.acquire("run:z", "a", ttl).await;
        match refused {
            Err(LeaseError::TokensExhausted {
                counter,
                value: held,
                limit,
            }) => {
                assert_eq!(counter, format!("{prefix}lease-token"));
                assert_eq!(held, value);
                assert_eq!(limit, (1 << 53) - 1);
            }
            other => panic!("{value}: {other:?}"),
        }
        assert!(
            leases.holder("run:z").await.unwrap().is_none(),
            "nothing granted"
        );
    }
}

#[tokio::test]
async fn a_replaying_subscription_starts_at_the_runs_first_event() {
    use kestrel_core::event::StartPayload;
    let Some(url) = redis_url("a_replaying_subscription_starts_at_the_runs_first_event") else {
        return;
    };
    let pubsub = connect(&url, &fresh_prefix()).await;
    let start = |run: &str| {
        Event::agent(
            run.into(),
            EventKind::Start(StartPayload {
                id: "agent".into(),
                message_id: "m".into(),
                metadata: None,
            }),
        )
    };
    // An earlier run, then the active one: its start and a few deltas, with another run's
    // event in between (a sub-agent's).
    pubsub.publish("t", start("run-old")).await.unwrap();
    pubsub.publish("t", delta(1)).await.unwrap();
    pubsub.publish("t", start("run-now")).await.unwrap();
    let mut now_delta = delta(2);
    now_delta.run_id = "run-now".into();
    pubsub.publish("t", now_delta.clone()).await.unwrap();
    pubsub.publish("t", delta(3)).await.unwrap();
    // Many more entries than one page of the backwards scan.
    for _ in 0..300 {
        pubsub.publish("t", now_delta.clone()).await.unwrap();
    }
    let mut replaying = pubsub.subscribe_replaying("t", "run-now").await.unwrap();
    assert_eq!(
        next(&mut replaying).await,
        start("run-now"),
        "from the run's start"
    );
    assert_eq!(next(&mut replaying).await, now_delta);
    assert_eq!(
        next(&mut replaying).await,
        delta(3),
        "and what came after it"
    );
    for _ in 0..300 {
        assert_eq!(next(&mut replaying).await, now_delta);
    }
    // Then live.
    pubsub.publish("t", delta(4)).await.unwrap();
    assert_eq!(next(&mut replaying).await, delta(4));
    // A run the stream does not hold: from now on.
    let mut unknown = pubsub.subscribe_replaying("t", "run-none").await.unwrap();
    pubsub.publish("t", delta(5)).await.unwrap();
    assert_eq!(next(&mut unknown).await, delta(5));
}

async fn next(subscription: &mut kestrel_core::pubsub::Subscription) -> Event {
    tokio::time::timeout(std::time::Duration::from_secs(5), subscription.next())
        .await
        .unwrap()
        .unwrap()
}
