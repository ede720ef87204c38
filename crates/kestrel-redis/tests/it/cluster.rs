//! Two `Kestrel` instances clustered over one Redis (its leases and its inboxes) and one run
//! store: a run driven by one is refused to the other and aborted from it; control messages
//! reach an instance's inbox and nobody else's.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kestrel_core::agent::{Agent, RunControlError};
use kestrel_core::cluster::{Cluster, Command, ControlBus, ControlMessage};
use kestrel_core::event::EventKind;
use kestrel_core::kestrel::Kestrel;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_core::store::{InMemoryRunStore, RunPhase, SharedRunStore};
use kestrel_core::tool::create_tool;
use kestrel_redis::{RedisLeases, RedisPubSub, RedisPubSubOptions};
use serde_json::{Value, json};

use super::{fresh_prefix, redis_url};

#[tokio::test]
async fn an_inbox_gets_its_own_messages_only() {
    let Some(url) = redis_url("an_inbox_gets_its_own_messages_only") else {
        return;
    };
    let bus = RedisPubSub::connect(
        &url,
        RedisPubSubOptions::default().key_prefix(fresh_prefix()),
    )
    .await
    .unwrap();
    let mut a = bus.inbox("a").await.unwrap();
    let mut b = bus.inbox("b").await.unwrap();
    let message = |id: &str| ControlMessage {
        id: id.into(),
        from: "c".into(),
        body: Command::PauseRun {
            run_id: "run-1".into(),
        },
    };
    bus.send("a", &message("m1")).await.unwrap();
    bus.send("b", &message("m2")).await.unwrap();
    bus.send("a", &message("m3")).await.unwrap();
    assert_eq!(next(&mut a).await, message("m1"));
    assert_eq!(next(&mut a).await, message("m3"));
    assert_eq!(next(&mut b).await, message("m2"));
}

async fn next(inbox: &mut futures::stream::BoxStream<'static, ControlMessage>) -> ControlMessage {
    tokio::time::timeout(Duration::from_secs(5), inbox.next())
        .await
        .unwrap()
        .unwrap()
}

fn instance(
    url_leases: RedisLeases,
    bus: RedisPubSub,
    store: &SharedRunStore,
    id: &str,
    started: Arc<AtomicUsize>,
) -> Kestrel {
    let model = ScriptedModel::from_fn(|req| {
        if req.messages.len() > 1 {
            ScriptedResponse::text("done")
        } else {
            ScriptedResponse::tool_call("call-1", "slow", json!({}))
        }
    });
    let slow = create_tool("slow")
        .description("Takes its time, and stops when the run is aborted")
        .input_schema(json!({"type": "object"}))
        .execute(move |_input: Value, ctx| {
            let started = started.clone();
            async move {
                started.fetch_add(1, Ordering::SeqCst);
                ctx.abort_signal().aborted().await;
                Ok("stopped".to_owned())
            }
        });
    let agent = Agent::builder("worker")
        .model(Arc::new(model))
        .tool(slow)
        .build()
        .unwrap();
    let cluster = Cluster::new(Arc::new(url_leases), Arc::new(bus.clone()))
        .instance_id(id)
        .lease_ttl(Duration::from_secs(2));
    Kestrel::builder()
        .agent(agent)
        .run_store(Arc::clone(store))
        .pubsub(Arc::new(bus))
        .cluster(cluster)
        .build()
        .unwrap()
}

/// Instances `a` and `b` on one Redis (a fresh prefix) and one run store (in a deployment:
/// PostgreSQL), and the count of the `slow` tool's starts.
struct Pair {
    a: Kestrel,
    b: Kestrel,
    store: SharedRunStore,
    started: Arc<AtomicUsize>,
}

impl Pair {
    async fn connect(url: &str) -> Self {
        let prefix = fresh_prefix();
        let store: SharedRunStore = Arc::new(InMemoryRunStore::new());
        let started = Arc::new(AtomicUsize::new(0));
        let mut instances = Vec::new();
        for id in ["a", "b"] {
            let leases = RedisLeases::connect(url, prefix.clone()).await.unwrap();
            let bus = RedisPubSub::connect(url, RedisPubSubOptions::default().key_prefix(&prefix))
                .await
                .unwrap();
            instances.push(instance(leases, bus, &store, id, started.clone()));
        }
        let b = instances.pop().unwrap();
        let a = instances.pop().unwrap();
        Self {
            a,
            b,
            store,
            started,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_one_instance_is_aborted_from_another_through_redis() {
    let Some(url) = redis_url("a_run_on_one_instance_is_aborted_from_another_through_redis") else {
        return;
    };
    let Pair {
        a,
        b,
        store,
        started,
    } = Pair::connect(&url).await;

    let stream = a.agent("worker").unwrap().stream("go").into_stream();
    let run_id = stream.run_id().to_owned();
    let driving = tokio::spawn(stream.collect());
    while started.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let on_b = b.agent("worker").unwrap();
    let refused = on_b.run(&run_id).proceed().stream().await;
    assert!(
        matches!(refused, Err(RunControlError::NotResumable { .. })),
        "{refused:?}"
    );
    assert_eq!(on_b.run(&run_id).abort().await.unwrap(), 0);
    let (events, _) = tokio::time::timeout(Duration::from_secs(10), driving)
        .await
        .expect("the run on A stopped")
        .unwrap();
    assert!(
        events.iter().any(|e| matches!(e.kind, EventKind::Abort(_))),
        "{events:?}"
    );
    // A store that does not outlive the process keeps no snapshot of a run that never
    // stopped; the abort is the run's own end.
    assert!(
        store
            .load(&run_id)
            .await
            .unwrap()
            .is_none_or(|r| r.phase == RunPhase::Aborted)
    );
    // The run is over: B may not resume it, and nobody holds it any more.
    assert!(on_b.run(&run_id).proceed().stream().await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_joining_mid_run_gets_the_run_from_its_start() {
    let Some(url) = redis_url("a_subscriber_joining_mid_run_gets_the_run_from_its_start") else {
        return;
    };
    let Pair { a, b, started, .. } = Pair::connect(&url).await;

    let stream = a
        .agent("worker")
        .unwrap()
        .stream("go")
        .memory("thread-mid", "alice")
        .into_stream();
    let run_id = stream.run_id().to_owned();
    let driving = tokio::spawn(stream.collect());
    while started.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // B joins while the run waits in its tool: it gets the run from its start.
    let mut watch = b
        .agent("worker")
        .unwrap()
        .thread("alice", "thread-mid")
        .subscribe()
        .await
        .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(5), watch.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&*first.run_id, run_id.as_str());
    assert!(matches!(first.kind, EventKind::Start(_)), "{first:?}");
    let on_b = b.agent("worker").unwrap();
    on_b.run(&run_id).abort().await.unwrap();
    let (events, _) = driving.await.unwrap();
    let mut seen = vec![first];
    while seen.len() < events.len() {
        let next = tokio::time::timeout(Duration::from_secs(5), watch.next())
            .await
            .unwrap()
            .unwrap();
        seen.push(next);
    }
    assert_eq!(seen, events, "every event of the run, in order");
}
