//! The suites every implementation of the ports must pass: core's in-memory stores and every
//! `kestrel-storage` backend run the same checks.
//!
//! A store's tests call [`run_all`] with a function that makes fresh [`Stores`] (an empty
//! database, say) for each check:
//!
//! ```
//! # async fn demo() {
//! use kestrel_core::store::{Stores, testing};
//!
//! testing::run_all(|| async { Stores::in_memory() }).await;
//! # }
//! ```
//!
//! Or one check at a time, from [`CHECKS`], so each is a test of its own.
//!
//! The message queue and the version store are read and written through more than their
//! ports (a queue belongs to a thread; versions are written by the storage's own API), so
//! their suites, [`SEEDED_CHECKS`], also take a [`Seed`] that makes those writes.

// Test support: a failed check panics, as an assertion does.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::{
    QueueError, QueuedMessage, RunPhase, RunStoreError, SharedAgentVersions, SharedMessageQueue,
    SharedRunStore, SharedWorkflowStore, Stores, SuspendedRunsQuery, WorkflowRunsQuery,
    WorkflowSnapshot,
};
use crate::event::WorkflowStatus;
use crate::message::Message;
use crate::run::{RunSettings, RunState};
use crate::scope::MemoryScope;
use crate::version::{AgentConfig, VersionChoice, VersionError};

/// One check: its name, and the check run on fresh stores.
pub type Check = (&'static str, fn(Stores) -> BoxFuture<'static, ()>);

/// Every check of the suites.
pub const CHECKS: &[Check] = &[
    ("runs_round_trip_and_compare_and_set", |s| {
        Box::pin(runs_round_trip_and_compare_and_set(s.runs))
    }),
    ("runs_racing_saves_have_one_winner", |s| {
        Box::pin(runs_racing_saves_have_one_winner(s.runs))
    }),
    ("runs_are_listed_by_agent_thread_and_resource", |s| {
        Box::pin(runs_are_listed_by_agent_thread_and_resource(s.runs))
    }),
    ("runs_refuse_stale_lease_tokens", |s| {
        Box::pin(runs_refuse_stale_lease_tokens(s.runs))
    }),
    ("workflow_runs_round_trip_claim_and_delete", |s| {
        Box::pin(workflow_runs_round_trip_claim_and_delete(s.workflows))
    }),
    ("workflow_runs_are_listed_newest_first_by_filter", |s| {
        Box::pin(workflow_runs_are_listed_newest_first_by_filter(s.workflows))
    }),
    ("workflow_runs_refuse_stale_lease_tokens", |s| {
        Box::pin(workflow_runs_refuse_stale_lease_tokens(s.workflows))
    }),
];

/// The writes the queue and version suites need that their ports do not make.
#[async_trait::async_trait]
pub trait Seed: Send + Sync {
    /// Creates thread `scope.thread_id`, owned by `scope.resource_id`.
    async fn thread(&self, scope: &MemoryScope);

    /// Adds a version of agent `agent_id` (creating the agent) with these instructions,
    /// published when `publish`; returns its id.
    async fn version(&self, agent_id: &str, instructions: &str, publish: bool) -> String;
}

/// A check of a port that needs a [`Seed`]: its name, and the check.
pub type SeededCheck = (
    &'static str,
    fn(Stores, Arc<dyn Seed>) -> BoxFuture<'static, ()>,
);

/// The checks of the message queue and version store (stores that keep none are skipped).
pub const SEEDED_CHECKS: &[SeededCheck] = &[
    ("queue_keeps_each_threads_order", |s, seed| {
        Box::pin(async move {
            if let Some(queue) = s.queue {
                queue_keeps_each_threads_order(queue, seed).await;
            }
        })
    }),
    ("queue_refuses_another_resources_thread", |s, seed| {
        Box::pin(async move {
            if let Some(queue) = s.queue {
                queue_refuses_another_resources_thread(queue, seed).await;
            }
        })
    }),
    ("versions_resolve_by_status_and_id", |s, seed| {
        Box::pin(async move {
            if let Some(versions) = s.versions {
                versions_resolve_by_status_and_id(versions, seed).await;
            }
        })
    }),
];

/// Runs every check, each on fresh stores from `make`.
pub async fn run_all<F, Fut>(make: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Stores>,
{
    for (_, check) in CHECKS {
        check(make().await).await;
    }
}

/// A fresh run of `agent` with one user message, on `thread` (thread, resource) when given.
pub fn run_state(run_id: &str, agent: &str, thread: Option<(&str, &str)>) -> RunState {
    let settings = RunSettings {
        thread_id: thread.map(|(t, _)| t.to_owned()),
        resource_id: thread.map(|(_, r)| r.to_owned()),
        ..RunSettings::default()
    };
    RunState::new(
        run_id.into(),
        agent.into(),
        vec![Message::user("send the report")],
        5,
        settings,
    )
}

/// A snapshot comes back as saved; a save compares and sets the version; creating a run
/// twice, or saving a stale or missing version, is a conflict.
pub async fn runs_round_trip_and_compare_and_set(runs: SharedRunStore) {
    let first = run_state("run-1", "mailer", Some(("t1", "alice")));
    assert_eq!(runs.save(&first, RunPhase::Running, None).await.unwrap(), 1);
    let again = runs
        .save(&first, RunPhase::Running, None)
        .await
        .unwrap_err();
    assert!(
        matches!(
            again,
            RunStoreError::Conflict {
                actual: Some(1),
                ..
            }
        ),
        "{runs:?}: {again:?}"
    );
    let loaded = runs.load("run-1").await.unwrap().unwrap();
    assert_eq!(loaded.state, first, "{runs:?}");
    assert_eq!((loaded.phase, loaded.version), (RunPhase::Running, 1));

    let mut next = first.clone();
    next.messages.push(Message::assistant("on it"));
    let saved = runs.save(&next, RunPhase::Suspended, Some(1)).await;
    assert_eq!(saved.unwrap(), 2);
    let stale = runs
        .save(&first, RunPhase::Running, Some(1))
        .await
        .unwrap_err();
    assert!(
        matches!(
            stale,
            RunStoreError::Conflict {
                expected: Some(1),
                actual: Some(2),
                ..
            }
        ),
        "{runs:?}: {stale:?}"
    );
    let loaded = runs.load("run-1").await.unwrap().unwrap();
    assert_eq!((loaded.phase, loaded.version), (RunPhase::Suspended, 2));
    assert_eq!(loaded.state, next, "{runs:?}");
    let nope = run_state("nope", "mailer", None);
    let missing = runs.save(&nope, RunPhase::Running, Some(3)).await;
    assert!(matches!(
        missing.unwrap_err(),
        RunStoreError::Conflict { actual: None, .. }
    ));
    assert!(runs.load("nope").await.unwrap().is_none());
}

/// Of racing saves of one version, exactly one wins.
pub async fn runs_racing_saves_have_one_winner(runs: SharedRunStore) {
    let base = run_state("race", "mailer", Some(("t1", "alice")));
    runs.save(&base, RunPhase::Suspended, None).await.unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let runs = Arc::clone(&runs);
            let mut mine = base.clone();
            mine.messages.push(Message::user(format!("decision {i}")));
            tokio::spawn(async move { runs.save(&mine, RunPhase::Running, Some(1)).await })
        })
        .collect();
    let mut winners = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(version) => {
                assert_eq!(version, 2);
                winners += 1;
            }
            Err(RunStoreError::Conflict { .. }) => {}
            Err(other) => panic!("{other:?}"),
        }
    }
    assert_eq!(winners, 1, "{runs:?}");
}

/// Suspended runs are listed by agent, thread and resource, in pages, with their total.
pub async fn runs_are_listed_by_agent_thread_and_resource(runs: SharedRunStore) {
    let cases = [
        ("a", "mailer", Some(("t1", "alice")), RunPhase::Suspended),
        ("b", "mailer", Some(("t2", "alice")), RunPhase::Suspended),
        ("c", "mailer", Some(("t3", "bob")), RunPhase::Suspended),
        ("d", "writer", Some(("t1", "alice")), RunPhase::Suspended),
        ("e", "mailer", Some(("t1", "alice")), RunPhase::Completed),
        ("f", "mailer", None, RunPhase::Running),
    ];
    for (id, agent, thread, phase) in cases {
        let state = run_state(id, agent, thread);
        runs.save(&state, phase, None).await.unwrap();
    }
    let ids = |query: SuspendedRunsQuery| {
        let runs = Arc::clone(&runs);
        async move {
            let page = runs.list_suspended(&query).await.unwrap();
            let mut ids: Vec<String> = page.runs.iter().map(|r| r.state.run_id.clone()).collect();
            ids.sort();
            (ids, page.total)
        }
    };
    let all = ids(SuspendedRunsQuery::default()).await;
    let expected: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
    assert_eq!(all, (expected, 4), "{runs:?}");
    let alice = ids(SuspendedRunsQuery {
        resource_id: Some("alice".into()),
        agent_id: Some("mailer".into()),
        ..SuspendedRunsQuery::default()
    })
    .await;
    assert_eq!(alice, (vec!["a".into(), "b".into()], 2), "{runs:?}");
    let thread = ids(SuspendedRunsQuery {
        thread_id: Some("t1".into()),
        ..SuspendedRunsQuery::default()
    })
    .await;
    assert_eq!(thread, (vec!["a".into(), "d".into()], 2), "{runs:?}");
    let running = runs
        .list_in_phases(&[RunPhase::Running], &SuspendedRunsQuery::default())
        .await
        .unwrap();
    assert_eq!(running.total, 1, "{runs:?}");
    assert_eq!(running.runs[0].state.run_id, "f");
    let paged = runs
        .list_suspended(&SuspendedRunsQuery {
            per_page: 3,
            page: 1,
            ..SuspendedRunsQuery::default()
        })
        .await
        .unwrap();
    assert_eq!((paged.runs.len(), paged.total), (1, 4), "{runs:?}");
}

/// A save under a lease token below one the store has seen for the run is refused, even
/// with the right version, and an unfenced save does not lower the fence.
pub async fn runs_refuse_stale_lease_tokens(runs: SharedRunStore) {
    let mut owned = run_state("run-fenced", "mailer", Some(("t1", "alice")));
    owned.lease_token = Some(7);
    let v1 = runs.save(&owned, RunPhase::Running, None).await.unwrap();
    let mut successor = owned.clone();
    successor.lease_token = Some(9);
    let v2 = runs
        .save(&successor, RunPhase::Running, Some(v1))
        .await
        .unwrap();
    let late = runs.save(&owned, RunPhase::Completed, Some(v2)).await;
    assert!(
        matches!(late, Err(RunStoreError::Fenced { ref run_id, token: 7, current: 9 }) if run_id == "run-fenced"),
        "{runs:?}: {late:?}"
    );
    let stored = runs.load("run-fenced").await.unwrap().unwrap();
    assert_eq!(stored.version, v2, "{runs:?}");
    assert_eq!(stored.phase, RunPhase::Running, "{runs:?}");
    assert_eq!(stored.state.lease_token, Some(9), "{runs:?}");
    let mut plain = owned.clone();
    plain.lease_token = None;
    let v3 = runs
        .save(&plain, RunPhase::Running, Some(v2))
        .await
        .unwrap();
    let again = runs.save(&owned, RunPhase::Running, Some(v3)).await;
    assert!(
        matches!(again, Err(RunStoreError::Fenced { .. })),
        "{runs:?}: {again:?}"
    );
}

fn workflow_run(workflow: &str, run: &str, status: WorkflowStatus) -> WorkflowSnapshot {
    serde_json::from_value(serde_json::json!({
        "workflowId": workflow, "runId": run, "status": status, "input": {"n": 1},
        "steps": {}, "state": {}, "position": 0, "entryInput": {"n": 1},
        "stepExecutionPath": [],
    }))
    .expect("a snapshot")
}

/// A snapshot comes back as saved (its times set by the store), a save replaces it, a claim
/// moves it from one status to another once, and a deleted run is gone.
pub async fn workflow_runs_round_trip_claim_and_delete(workflows: SharedWorkflowStore) {
    let mut run = workflow_run("wf", "r1", WorkflowStatus::Running);
    run.resource_id = Some("alice".into());
    workflows.save(&run).await.unwrap();
    let loaded = workflows.load("wf", "r1").await.unwrap().unwrap();
    assert_eq!(
        (loaded.run_id.as_str(), loaded.status),
        ("r1", WorkflowStatus::Running)
    );
    assert_eq!(loaded.resource_id.as_deref(), Some("alice"));
    assert_eq!(loaded.input, run.input, "{workflows:?}");
    assert!(
        loaded.updated_at_ms > 0,
        "{workflows:?}: the store sets the times"
    );
    assert!(workflows.load("wf", "r2").await.unwrap().is_none());
    assert!(workflows.load("other", "r1").await.unwrap().is_none());

    run.status = WorkflowStatus::Suspended;
    workflows.save(&run).await.unwrap();
    let claimed = workflows
        .claim(
            "wf",
            "r1",
            WorkflowStatus::Suspended,
            WorkflowStatus::Running,
        )
        .await
        .unwrap();
    assert!(claimed, "{workflows:?}");
    let twice = workflows
        .claim(
            "wf",
            "r1",
            WorkflowStatus::Suspended,
            WorkflowStatus::Running,
        )
        .await
        .unwrap();
    assert!(!twice, "{workflows:?}: a second claim loses");
    let after = workflows.load("wf", "r1").await.unwrap().unwrap();
    assert_eq!(after.status, WorkflowStatus::Running, "{workflows:?}");
    let none = workflows
        .claim(
            "wf",
            "nope",
            WorkflowStatus::Suspended,
            WorkflowStatus::Running,
        )
        .await
        .unwrap();
    assert!(!none);

    assert!(workflows.delete("wf", "r1").await.unwrap());
    assert!(!workflows.delete("wf", "r1").await.unwrap());
    assert!(workflows.load("wf", "r1").await.unwrap().is_none());
}

/// Runs are listed newest first, by workflow, resource and status, in pages with a total.
pub async fn workflow_runs_are_listed_newest_first_by_filter(workflows: SharedWorkflowStore) {
    let cases = [
        ("wf", "a", Some("alice"), WorkflowStatus::Success),
        ("wf", "b", Some("bob"), WorkflowStatus::Suspended),
        ("wf", "c", Some("alice"), WorkflowStatus::Suspended),
        ("other", "d", Some("alice"), WorkflowStatus::Suspended),
    ];
    for (workflow, run, resource, status) in cases {
        let mut snapshot = workflow_run(workflow, run, status);
        snapshot.resource_id = resource.map(str::to_owned);
        workflows.save(&snapshot).await.unwrap();
        // Distinct save times, so "newest first" has one answer.
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    }
    let ids = |query: WorkflowRunsQuery| {
        let workflows = Arc::clone(&workflows);
        async move {
            let list = workflows.list(&query).await.unwrap();
            let ids: Vec<String> = list.runs.into_iter().map(|r| r.run_id).collect();
            (ids, list.total)
        }
    };
    let of_wf = ids(WorkflowRunsQuery {
        workflow_id: Some("wf".into()),
        ..WorkflowRunsQuery::default()
    })
    .await;
    let expected: Vec<String> = ["c", "b", "a"].map(String::from).to_vec();
    assert_eq!(of_wf, (expected, 3), "{workflows:?}");
    let suspended_alice = ids(WorkflowRunsQuery {
        resource_id: Some("alice".into()),
        status: Some(WorkflowStatus::Suspended),
        ..WorkflowRunsQuery::default()
    })
    .await;
    let expected: Vec<String> = ["d", "c"].map(String::from).to_vec();
    assert_eq!(suspended_alice, (expected, 2), "{workflows:?}");
    let second_page = ids(WorkflowRunsQuery {
        per_page: 2,
        page: 1,
        ..WorkflowRunsQuery::default()
    })
    .await;
    let expected: Vec<String> = ["b", "a"].map(String::from).to_vec();
    assert_eq!(second_page, (expected, 4), "{workflows:?}");
}

/// A save or a fence under a lease token below the run's fence is refused as fenced, and the
/// stored run stays as its newer owner saved it.
pub async fn workflow_runs_refuse_stale_lease_tokens(workflows: SharedWorkflowStore) {
    let mut run = workflow_run("wf", "fenced", WorkflowStatus::Running);
    run.lease_token = Some(5);
    workflows.save(&run).await.unwrap();
    workflows.fence("wf", "fenced", 8).await.unwrap();
    let late = workflows.save(&run).await.unwrap_err();
    assert!(late.is_fenced(), "{workflows:?}: {late}");
    let stale_fence = workflows.fence("wf", "fenced", 6).await.unwrap_err();
    assert!(stale_fence.is_fenced(), "{workflows:?}: {stale_fence}");
    let mut successor = run.clone();
    successor.lease_token = Some(8);
    successor.status = WorkflowStatus::Success;
    workflows.save(&successor).await.unwrap();
    let stored = workflows.load("wf", "fenced").await.unwrap().unwrap();
    assert_eq!(stored.status, WorkflowStatus::Success, "{workflows:?}");
    // A fence raised before the run is first saved holds too.
    workflows.fence("wf", "later", 3).await.unwrap();
    let mut early = workflow_run("wf", "later", WorkflowStatus::Running);
    early.lease_token = Some(2);
    assert!(workflows.save(&early).await.unwrap_err().is_fenced());
}

fn queued(id: &str, scope: &MemoryScope, text: &str) -> QueuedMessage {
    QueuedMessage {
        id: id.to_owned(),
        run_id: format!("run-{id}"),
        agent_id: "assistant".to_owned(),
        scope: scope.clone(),
        message: Message::user(text),
    }
}

fn scope(thread: &str, resource: &str) -> MemoryScope {
    MemoryScope {
        thread_id: thread.to_owned(),
        resource_id: resource.to_owned(),
    }
}

/// Each thread's queue keeps its messages in the order pushed; a removed or cancelled message
/// is gone; the threads with queues are listed oldest queue first; a thread with no queue
/// (or none at all) lists nothing.
pub async fn queue_keeps_each_threads_order(queue: SharedMessageQueue, seed: Arc<dyn Seed>) {
    let one = scope("t1", "alice");
    let two = scope("t2", "bob");
    seed.thread(&one).await;
    seed.thread(&two).await;
    assert!(queue.list(&one).await.unwrap().is_empty());
    assert!(
        queue
            .list(&scope("nope", "alice"))
            .await
            .unwrap()
            .is_empty()
    );
    queue.push(queued("m1", &one, "first")).await.unwrap();
    queue.push(queued("m2", &two, "other")).await.unwrap();
    queue.push(queued("m3", &one, "second")).await.unwrap();
    queue.push(queued("m4", &one, "third")).await.unwrap();
    let texts = |list: Vec<QueuedMessage>| -> Vec<String> {
        list.into_iter().map(|m| m.message.text()).collect()
    };
    assert_eq!(
        texts(queue.list(&one).await.unwrap()),
        ["first", "second", "third"]
    );
    let listed = queue.list(&one).await.unwrap();
    assert_eq!(listed[0].run_id, "run-m1");
    assert_eq!(listed[0].scope, one);
    let threads = queue.threads().await.unwrap();
    let scopes: Vec<&MemoryScope> = threads.iter().map(|t| &t.scope).collect();
    assert_eq!(scopes, [&one, &two]);
    assert_eq!(threads[0].agent_id, "assistant");

    assert!(queue.remove("m1").await.unwrap());
    assert!(!queue.remove("m1").await.unwrap());
    let cancelled = queue.cancel(&one, Some(vec!["m4".into()])).await.unwrap();
    assert_eq!(texts(cancelled), ["third"]);
    assert_eq!(texts(queue.list(&one).await.unwrap()), ["second"]);
    let all = queue.cancel(&two, None).await.unwrap();
    assert_eq!(texts(all), ["other"]);
    let threads = queue.threads().await.unwrap();
    assert_eq!(threads.len(), 1);
    assert_eq!(threads[0].scope, one);
}

/// A thread of another resource is refused, and nothing is queued.
pub async fn queue_refuses_another_resources_thread(
    queue: SharedMessageQueue,
    seed: Arc<dyn Seed>,
) {
    let alices = scope("t1", "alice");
    seed.thread(&alices).await;
    let mallory = scope("t1", "mallory");
    let pushed = queue.push(queued("m1", &mallory, "hi")).await;
    assert!(
        matches!(pushed, Err(QueueError::ThreadOfOtherResource { .. })),
        "{pushed:?}"
    );
    let listed = queue.list(&mallory).await;
    assert!(
        matches!(listed, Err(QueueError::ThreadOfOtherResource { .. })),
        "{listed:?}"
    );
    assert!(queue.list(&alices).await.unwrap().is_empty());
    assert!(queue.threads().await.unwrap().is_empty());
}

/// An agent with no versions resolves to none (its own definition), by status; a version id
/// it does not have is an error; published and draft name the published and the latest.
pub async fn versions_resolve_by_status_and_id(versions: SharedAgentVersions, seed: Arc<dyn Seed>) {
    let published = VersionChoice::published();
    let draft = VersionChoice::draft();
    assert!(
        versions
            .resolve("writer", &published)
            .await
            .unwrap()
            .is_none()
    );
    assert!(versions.resolve("writer", &draft).await.unwrap().is_none());
    let unknown = versions.resolve("writer", &VersionChoice::id("v-x")).await;
    assert!(
        matches!(unknown, Err(VersionError::UnknownVersion { .. })),
        "{unknown:?}"
    );
    assert!(versions.agent_ids().await.unwrap().is_empty());

    let first = seed.version("writer", "Write plainly.", true).await;
    let second = seed.version("writer", "Write boldly.", false).await;
    let instructions = |config: AgentConfig| config.instructions.unwrap_or_default();
    let live = versions
        .resolve("writer", &published)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((live.id.as_str(), live.number), (first.as_str(), 1));
    assert_eq!(instructions(live.config), "Write plainly.");
    let latest = versions.resolve("writer", &draft).await.unwrap().unwrap();
    assert_eq!((latest.id.as_str(), latest.number), (second.as_str(), 2));
    assert_eq!(instructions(latest.config), "Write boldly.");
    let by_id = versions
        .resolve("writer", &VersionChoice::id(first.clone()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(by_id.id, first);
    // Another agent's version is not this one's.
    seed.version("reader", "Read.", false).await;
    let theirs = versions.resolve("reader", &VersionChoice::id(first)).await;
    assert!(
        matches!(theirs, Err(VersionError::UnknownVersion { .. })),
        "{theirs:?}"
    );
    let mut ids = versions.agent_ids().await.unwrap();
    ids.sort();
    assert_eq!(ids, ["reader", "writer"]);
}

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_in_memory_stores_pass_the_suites() {
        super::run_all(|| async { super::Stores::in_memory() }).await;
    }
}
