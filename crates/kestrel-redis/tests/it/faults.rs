//! A Redis that goes silent (a black hole: no RST, no FIN) and comes back: every kind of
//! connection an instance has (its shared command connection, a thread subscription's
//! blocking reader, its inbox's reader) notices, is replaced, and serves again once Redis is
//! reachable, with the instance's runs and subscriptions working as before. A Redis that
//! refuses is heard of at once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kestrel_chaos::{Fault, FaultProxy};
use kestrel_core::agent::Agent;
use kestrel_core::cluster::{Command, ControlBus, ControlMessage};
use kestrel_core::kestrel::Kestrel;
use kestrel_core::lease::LeaseProvider;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_core::pubsub::PubSub;
use kestrel_core::store::{InMemoryRunStore, SharedRunStore};
use kestrel_redis::{RedisCluster, RedisPubSub, RedisPubSubOptions};

use super::{delta, fresh_prefix, redis_url};

/// Short timeouts, so that the test sees the silence in a second or two.
fn options(prefix: &str) -> RedisPubSubOptions {
    RedisPubSubOptions {
        block: Duration::from_millis(300),
        command_timeout: Duration::from_millis(700),
        connect_timeout: Duration::from_millis(700),
        max_retry_delay: Duration::from_millis(300),
        ..RedisPubSubOptions::default().key_prefix(prefix)
    }
}

/// A proxy in front of the test Redis.
async fn proxy(url: &str) -> (FaultProxy, String) {
    let authority = url
        .split("://")
        .nth(1)
        .and_then(|rest| rest.split(['/', '?']).next())
        .map(|a| a.rsplit('@').next().unwrap_or(a))
        .unwrap();
    let upstream = kestrel_chaos::resolve(authority).await.unwrap();
    let proxy = FaultProxy::start(upstream).await.unwrap();
    let proxied = proxy.url_for(url).unwrap();
    (proxy, proxied)
}

/// Tries `attempt` until it gives `Some`, for at most `limit` (a bound against hanging, not a
/// speed target).
async fn eventually<T, F, Fut>(limit: Duration, what: &str, mut attempt: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = attempt().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "{what} did not happen in {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn pause(id: &str) -> ControlMessage {
    ControlMessage {
        id: id.into(),
        from: "test".into(),
        body: Command::PauseRun {
            run_id: "run-1".into(),
        },
    }
}

fn instance(redis: &RedisCluster) -> Kestrel {
    let model = ScriptedModel::from_fn(|_| ScriptedResponse::text("served"));
    let agent = Agent::builder("echo")
        .model(Arc::new(model))
        .build()
        .unwrap();
    let store: SharedRunStore = Arc::new(InMemoryRunStore::new());
    Kestrel::builder()
        .agent(agent)
        .run_store(store)
        .pubsub(redis.pubsub())
        .cluster(
            redis
                .cluster()
                .instance_id("proxied")
                .lease_ttl(Duration::from_secs(2)),
        )
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_connection_serves_again_after_a_black_hole() {
    let Some(url) = redis_url("every_connection_serves_again_after_a_black_hole") else {
        return;
    };
    let prefix = fresh_prefix();
    let (proxy, proxied) = proxy(&url).await;
    let redis = RedisCluster::connect_with(&proxied, options(&prefix))
        .await
        .unwrap();
    let leases = RedisLeasesOf(&redis);
    let through_proxy = RedisPubSub::connect(&proxied, options(&prefix))
        .await
        .unwrap();
    // What the others (on a healthy network) publish and send.
    let direct = RedisPubSub::connect(&url, options(&prefix)).await.unwrap();
    let kestrel = instance(&redis);

    let mut subscription = through_proxy.subscribe("thread:t").await.unwrap();
    let mut inbox = through_proxy.inbox("proxied").await.unwrap();
    direct.publish("thread:t", delta(0)).await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(5), subscription.next()).await;
    assert_eq!(first.unwrap().unwrap(), delta(0));
    assert!(leases.holder().await.is_ok());
    let served = kestrel.agent("echo").unwrap().generate("hi").await.unwrap();
    assert_eq!(served.text, "served");

    // Silence, long enough for every connection to be mid-command or mid-read in it.
    proxy.set(Fault::BlackHole);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        leases.holder().await.is_err(),
        "a command in the black hole fails (after its timeout), it does not hang"
    );
    proxy.set(Fault::None);

    // Back: the shared connection, the runs on it, the subscription and the inbox serve again.
    eventually(Duration::from_secs(20), "a lease command", || async {
        leases.holder().await.ok()
    })
    .await;
    let served = eventually(Duration::from_secs(20), "a run", || async {
        kestrel.agent("echo").unwrap().generate("hi").await.ok()
    })
    .await;
    assert_eq!(served.text, "served");
    direct.publish("thread:t", delta(1)).await.unwrap();
    let heard = tokio::time::timeout(Duration::from_secs(20), subscription.next()).await;
    assert_eq!(
        heard.expect("the subscription hears again").unwrap(),
        delta(1)
    );
    direct.send("proxied", &pause("m1")).await.unwrap();
    let received = tokio::time::timeout(Duration::from_secs(20), inbox.next()).await;
    assert_eq!(
        received.expect("the inbox receives again").unwrap(),
        pause("m1")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusing_redis_is_heard_of_at_once_and_served_again() {
    let Some(url) = redis_url("a_refusing_redis_is_heard_of_at_once_and_served_again") else {
        return;
    };
    let prefix = fresh_prefix();
    let (proxy, proxied) = proxy(&url).await;
    let redis = RedisCluster::connect_with(&proxied, options(&prefix))
        .await
        .unwrap();
    let leases = RedisLeasesOf(&redis);
    let direct = RedisPubSub::connect(&url, options(&prefix)).await.unwrap();
    let through_proxy = RedisPubSub::connect(&proxied, options(&prefix))
        .await
        .unwrap();
    let mut subscription = through_proxy.subscribe("thread:r").await.unwrap();
    assert!(leases.holder().await.is_ok());

    proxy.set(Fault::Refuse);
    assert!(leases.holder().await.is_err());
    proxy.set(Fault::None);
    eventually(Duration::from_secs(20), "a lease command", || async {
        leases.holder().await.ok()
    })
    .await;
    direct.publish("thread:r", delta(2)).await.unwrap();
    let heard = tokio::time::timeout(Duration::from_secs(20), subscription.next()).await;
    assert_eq!(heard.unwrap().unwrap(), delta(2));
}

/// The leases of a cluster, asked about one key.
struct RedisLeasesOf<'a>(&'a RedisCluster);

impl RedisLeasesOf<'_> {
    async fn holder(&self) -> Result<(), kestrel_core::lease::LeaseError> {
        self.0.leases().holder("probe").await.map(drop)
    }
}
