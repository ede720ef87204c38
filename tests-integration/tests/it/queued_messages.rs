//! Queued messages on every backend: a message queued while a run is active runs after it, the
//! queued ones in order, each in its own run, and the thread's watchers see them queued and
//! taken; an idle thread runs one at once; cancelled ones never run; a queue a dead process
//! left is drained by the next; another resource's thread and a full queue are refused.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kestrel_core::agent::{Agent, MAX_QUEUED_PER_THREAD, RunOptions, ThreadError};
use kestrel_core::event::{Event, EventKind};
use kestrel_core::message::{Message, Role};
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_core::store::QueueError;
use kestrel_memory::Memory;
use kestrel_storage::on_every_backend;
use kestrel_storage::testing::Store;
use kestrel_storage::{NewQueuedMessage, NewThread, Selection};

use crate::fixture::Instance;

on_every_backend!(
    queued_messages_run_after_the_active_run_in_order,
    an_idle_thread_runs_a_queued_message_at_once,
    cancelled_messages_never_run,
    a_queue_left_by_a_dead_process_is_drained_by_the_next,
    bad_queues_are_refused,
    a_threads_handle_sends_queues_watches_and_aborts,
);

const THREAD: &str = "t1";
const RESOURCE: &str = "alice";

fn memory(store: &Store) -> Memory {
    Memory::builder()
        .storage(Arc::clone(store))
        .last_messages(20)
        .build()
        .unwrap()
}

/// Answers "Re: <last user text>", slowly for "slow".
fn model() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn(|req| {
        let last = req
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(|m| m.text())
            .unwrap_or_default();
        let answer = ScriptedResponse::text(format!("Re: {last}"));
        if last == "slow" {
            answer.with_delay(Duration::from_millis(300))
        } else {
            answer
        }
    }))
}

fn agent_on(store: &Store) -> Agent {
    Agent::builder("assistant")
        .model(model())
        .memory(memory(store))
        .storage(Arc::clone(store))
        .build()
        .unwrap()
}

async fn texts(store: &Store) -> Vec<String> {
    store
        .list_messages(THREAD, Some(RESOURCE), Selection::all())
        .await
        .unwrap()
        .messages
        .iter()
        .map(|m| m.to_message().text())
        .collect()
}

/// Waits until the thread holds `n` messages.
async fn wait_for(store: &Store, n: usize) -> Vec<String> {
    for _ in 0..400 {
        let now = texts(store).await;
        if now.len() >= n {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    texts(store).await
}

/// A slow run on the thread, holding it (its first event is in).
async fn start_slow(agent: &Agent) -> kestrel_core::agent::AgentStream {
    let mut slow = agent
        .stream("slow")
        .options(RunOptions::new().memory(THREAD, RESOURCE))
        .into_stream();
    slow.next().await.unwrap();
    slow
}

/// The next event of a watcher that is not a streaming fragment.
async fn next_event(watch: &mut kestrel_core::agent::ThreadSubscription) -> Event {
    tokio::time::timeout(Duration::from_secs(10), watch.next())
        .await
        .expect("an event in time")
        .expect("the subscription is open")
}

async fn queued_messages_run_after_the_active_run_in_order(store: Store) {
    let agent = agent_on(&store);
    let mut watch = agent.thread(RESOURCE, THREAD).subscribe().await.unwrap();
    let slow = start_slow(&agent).await;
    let first = agent
        .thread(RESOURCE, THREAD)
        .queue("second")
        .await
        .unwrap();
    let second = agent.thread(RESOURCE, THREAD).queue("third").await.unwrap();
    assert_eq!((first.position, second.position), (0, 1));
    assert_eq!(first.thread_id, THREAD);
    let waiting = agent.thread(RESOURCE, THREAD).queued().await.unwrap();
    let ids: Vec<&str> = waiting.iter().map(|q| q.id.as_str()).collect();
    assert_eq!(ids, [first.id.as_str(), second.id.as_str()]);
    assert_eq!(waiting[0].message.text(), "second");

    assert_eq!(slow.result().await.unwrap().text, "Re: slow");
    let all = wait_for(&store, 6).await;
    assert_eq!(
        all,
        [
            "slow",
            "Re: slow",
            "second",
            "Re: second",
            "third",
            "Re: third"
        ]
    );
    // The queued messages keep their ids in the thread.
    let stored = store
        .list_messages(THREAD, Some(RESOURCE), Selection::all())
        .await
        .unwrap()
        .messages;
    assert_eq!(stored[2].id, first.id);
    assert_eq!(stored[4].id, second.id);
    assert!(
        agent
            .thread(RESOURCE, THREAD)
            .queued()
            .await
            .unwrap()
            .is_empty()
    );

    // The watcher saw both queued, then each taken by the run named when it was queued.
    let mut seen = Vec::new();
    while seen.iter().filter(|(k, _)| k == "finish").count() < 3 {
        let event = next_event(&mut watch).await;
        let kind = event.type_name();
        if ["message-queued", "queued-message-started", "finish"].contains(&kind) {
            seen.push((kind.to_owned(), event.run_id.to_string()));
        }
    }
    let queued = |run: &str, kind: &str| seen.iter().position(|(k, r)| k == kind && r == run);
    let (a, b) = (first.run_id.as_str(), second.run_id.as_str());
    assert!(queued(a, "message-queued") < queued(b, "message-queued"));
    assert!(queued(a, "queued-message-started") < queued(a, "finish"));
    assert!(queued(a, "finish") < queued(b, "queued-message-started"));
    assert!(queued(b, "finish").is_some(), "{seen:?}");
}

async fn an_idle_thread_runs_a_queued_message_at_once(store: Store) {
    let agent = agent_on(&store);
    let queued = agent.thread(RESOURCE, THREAD).queue("hello").await.unwrap();
    assert_eq!(queued.position, 0);
    assert_eq!(wait_for(&store, 2).await, ["hello", "Re: hello"]);
    let thread = store.get_thread(THREAD).await.unwrap().unwrap();
    assert_eq!(thread.resource_id, RESOURCE);
}

async fn cancelled_messages_never_run(store: Store) {
    let agent = agent_on(&store);
    let mut watch = agent.thread(RESOURCE, THREAD).subscribe().await.unwrap();
    let slow = start_slow(&agent).await;
    agent.thread(RESOURCE, THREAD).queue("keep").await.unwrap();
    let drop = agent.thread(RESOURCE, THREAD).queue("drop").await.unwrap();
    let cancelled = agent
        .thread(RESOURCE, THREAD)
        .cancel_queued(Some(vec![drop.id.clone()]))
        .await
        .unwrap();
    assert_eq!(cancelled.len(), 1);
    assert_eq!(cancelled[0].id, drop.id);
    slow.result().await.unwrap();
    assert_eq!(
        wait_for(&store, 4).await,
        ["slow", "Re: slow", "keep", "Re: keep"]
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        texts(&store).await.len(),
        4,
        "the cancelled message never ran"
    );
    loop {
        let event = next_event(&mut watch).await;
        if let EventKind::QueuedMessageCancelled(payload) = &event.kind {
            assert_eq!(payload.id, drop.id);
            assert_eq!(&*event.run_id, drop.run_id);
            break;
        }
    }
}

async fn a_queue_left_by_a_dead_process_is_drained_by_the_next(store: Store) {
    // What a process left: a thread, and two queued messages no run took.
    store
        .create_thread(NewThread::new(RESOURCE).id(THREAD))
        .await
        .unwrap();
    for (id, text) in [("q-1", "first"), ("q-2", "second")] {
        let mut message = Message::user(text);
        message.id = id.to_owned();
        store
            .enqueue_message(NewQueuedMessage {
                id: id.to_owned(),
                run_id: format!("run-{id}"),
                agent_id: "assistant".to_owned(),
                thread_id: THREAD.to_owned(),
                resource_id: RESOURCE.to_owned(),
                message,
            })
            .await
            .unwrap();
    }
    let kestrel = Instance::on(&store)
        .last_messages(20)
        .agent(Agent::builder("assistant").model(model()))
        .build();
    assert_eq!(kestrel.drain_message_queues().await, 1);
    assert_eq!(
        wait_for(&store, 4).await,
        ["first", "Re: first", "second", "Re: second"]
    );
    assert!(store.queued_threads().await.unwrap().is_empty());
}

async fn bad_queues_are_refused(store: Store) {
    let agent = agent_on(&store);
    agent
        .generate("hi")
        .options(RunOptions::new().memory(THREAD, RESOURCE))
        .await
        .unwrap();
    let err = agent
        .thread("mallory", THREAD)
        .queue("x")
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            ThreadError::Queue(QueueError::ThreadOfOtherResource { .. })
        ),
        "{err:?}"
    );
    let err = agent
        .thread("mallory", THREAD)
        .cancel_queued(None)
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            ThreadError::Queue(QueueError::ThreadOfOtherResource { .. })
        ),
        "{err:?}"
    );

    // A full queue: the thread is busy, so nothing drains meanwhile.
    let slow = start_slow(&agent).await;
    for n in 0..MAX_QUEUED_PER_THREAD {
        agent
            .thread(RESOURCE, THREAD)
            .queue(format!("m{n}"))
            .await
            .unwrap();
    }
    let err = agent
        .thread(RESOURCE, THREAD)
        .queue("one too many")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ThreadError::Queue(QueueError::Full { limit, .. }) if *limit == MAX_QUEUED_PER_THREAD),
        "{err:?}"
    );
    agent
        .thread(RESOURCE, THREAD)
        .cancel_queued(None)
        .await
        .unwrap();
    slow.result().await.unwrap();

    let plain = Agent::builder("plain")
        .model(Arc::new(ScriptedModel::new()))
        .build()
        .unwrap();
    let err = plain.thread(RESOURCE, THREAD).queue("x").await.unwrap_err();
    assert!(matches!(err, ThreadError::NoMemory { .. }), "{err:?}");
}

/// The same through the thread's handle (`agent.thread(resource, thread)`): send into the
/// active run or start one, queue for the next run, list and cancel the queue, watch, abort.
async fn a_threads_handle_sends_queues_watches_and_aborts(store: Store) {
    let agent = agent_on(&store);
    let thread = agent.thread(RESOURCE, THREAD);
    assert_eq!((thread.id(), thread.resource_id()), (THREAD, RESOURCE));
    let mut watch = thread.subscribe().await.unwrap();
    // An idle thread: the message starts a run.
    let sent = thread.send("hello").await.unwrap();
    assert_eq!(sent.thread_id, THREAD);
    let started = sent.stream.expect("a run was started");
    assert_eq!(started.result().await.unwrap().text, "Re: hello");
    assert_eq!(wait_for(&store, 2).await, ["hello", "Re: hello"]);

    // A slow run is active: queued messages wait for it; a cancelled one never runs.
    let slow = start_slow(&agent).await;
    assert!(thread.active_run().is_some());
    let kept = thread.queue("kept").await.unwrap();
    let dropped = thread.queue("dropped").await.unwrap();
    let waiting: Vec<String> = thread
        .queued()
        .await
        .unwrap()
        .into_iter()
        .map(|q| q.id)
        .collect();
    assert_eq!(waiting, [kept.id.clone(), dropped.id.clone()]);
    let cancelled = thread
        .cancel_queued(Some(vec![dropped.id.clone()]))
        .await
        .unwrap();
    assert_eq!(cancelled.len(), 1);
    assert_eq!(slow.result().await.unwrap().text, "Re: slow");
    assert_eq!(
        wait_for(&store, 6).await,
        ["hello", "Re: hello", "slow", "Re: slow", "kept", "Re: kept"]
    );
    let mut kinds = Vec::new();
    while !kinds.contains(&"queued-message-cancelled") {
        kinds.push(next_event(&mut watch).await.type_name());
    }

    // Aborting the thread stops its active run.
    let slow = start_slow(&agent).await;
    assert_eq!(thread.abort().await.unwrap(), 1);
    let aborted = slow.result().await;
    assert!(
        matches!(
            aborted,
            Err(kestrel_core::agent::AgentError::Aborted { .. })
        ),
        "{aborted:?}"
    );
    assert!(thread.active_run().is_none());
}
