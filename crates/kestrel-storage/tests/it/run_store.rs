//! The agent runtime's run store on every backend: snapshots round-trip, saves are a
//! compare-and-set on the version (two racing saves: exactly one wins), and suspended runs are
//! found by agent, thread and resource. PostgreSQL joins when `KESTREL_TEST_POSTGRES_URL` is set.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kestrel_core::agent::{RunSettings, RunState};
use kestrel_core::message::Message;
use kestrel_core::run_store::{
    InMemoryRunStore, RunPhase, RunStore, RunStoreError, SuspendedRunsQuery,
};
use kestrel_storage::StorageRunStore;
use kestrel_storage::testing::{self, Fixture};

/// A fresh store of each storage backend (PostgreSQL when configured).
async fn fixtures() -> Vec<Fixture> {
    let mut fixtures = vec![
        testing::memory().await.unwrap(),
        testing::sqlite().await.unwrap(),
    ];
    fixtures.extend(testing::postgres().await);
    fixtures
}

/// Every run store: the storage backends through [`StorageRunStore`], and core's own
/// in-memory store (the default of agents without storage).
async fn stores() -> Vec<(String, Arc<dyn RunStore>, Option<Fixture>)> {
    let mut all: Vec<(String, Arc<dyn RunStore>, Option<Fixture>)> = fixtures()
        .await
        .into_iter()
        .map(|f| {
            let store: Arc<dyn RunStore> = Arc::new(StorageRunStore::new(f.store()));
            (f.store().backend().to_owned(), store, Some(f))
        })
        .collect();
    all.push((
        "core in-memory".into(),
        Arc::new(InMemoryRunStore::new()),
        None,
    ));
    all
}

async fn teardown(fixture: Option<Fixture>) {
    if let Some(fixture) = fixture {
        fixture.teardown().await;
    }
}

fn state(run_id: &str, agent: &str, thread: Option<(&str, &str)>) -> RunState {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_round_trip_and_saves_compare_and_set() {
    for (backend, runs, fixture) in stores().await {
        let first = state("run-1", "mailer", Some(("t1", "alice")));
        assert_eq!(runs.save(&first, RunPhase::Running, None).await.unwrap(), 1);
        // Creating it again is a conflict, not an overwrite.
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
            "{backend}: {again:?}"
        );
        let loaded = runs.load("run-1").await.unwrap().unwrap();
        assert_eq!(loaded.state, first, "{backend}");
        assert_eq!((loaded.phase, loaded.version), (RunPhase::Running, 1));

        let mut next = first.clone();
        next.messages.push(Message::assistant("on it"));
        assert_eq!(
            runs.save(&next, RunPhase::Suspended, Some(1))
                .await
                .unwrap(),
            2
        );
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
            "{backend}: {stale:?}"
        );
        let loaded = runs.load("run-1").await.unwrap().unwrap();
        assert_eq!((loaded.phase, loaded.version), (RunPhase::Suspended, 2));
        assert_eq!(loaded.state, next, "{backend}");
        let nope = state("nope", "mailer", None);
        let missing = runs.save(&nope, RunPhase::Running, Some(3)).await;
        assert!(matches!(
            missing.unwrap_err(),
            RunStoreError::Conflict { actual: None, .. }
        ));
        assert!(runs.load("nope").await.unwrap().is_none());
        teardown(fixture).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_saves_of_one_version_have_exactly_one_winner() {
    for (backend, runs, fixture) in stores().await {
        let base = state("race", "mailer", Some(("t1", "alice")));
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
        assert_eq!(winners, 1, "{backend}");
        teardown(fixture).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspended_runs_are_listed_by_agent_thread_and_resource() {
    for (backend, runs, fixture) in stores().await {
        let cases = [
            ("a", "mailer", Some(("t1", "alice")), RunPhase::Suspended),
            ("b", "mailer", Some(("t2", "alice")), RunPhase::Suspended),
            ("c", "mailer", Some(("t3", "bob")), RunPhase::Suspended),
            ("d", "writer", Some(("t1", "alice")), RunPhase::Suspended),
            ("e", "mailer", Some(("t1", "alice")), RunPhase::Completed),
            ("f", "mailer", None, RunPhase::Running),
        ];
        for (id, agent, thread, phase) in cases {
            runs.save(&state(id, agent, thread), phase, None)
                .await
                .unwrap();
        }
        let ids = |query: SuspendedRunsQuery| {
            let runs = Arc::clone(&runs);
            async move {
                let page = runs.list_suspended(&query).await.unwrap();
                let mut ids: Vec<String> =
                    page.runs.iter().map(|r| r.state.run_id.clone()).collect();
                ids.sort();
                (ids, page.total)
            }
        };
        let all = ids(SuspendedRunsQuery::default()).await;
        assert_eq!(
            all,
            (vec!["a".into(), "b".into(), "c".into(), "d".into()], 4),
            "{backend}"
        );
        let alice = ids(SuspendedRunsQuery {
            resource_id: Some("alice".into()),
            agent_id: Some("mailer".into()),
            ..SuspendedRunsQuery::default()
        })
        .await;
        assert_eq!(alice, (vec!["a".into(), "b".into()], 2), "{backend}");
        let thread = ids(SuspendedRunsQuery {
            thread_id: Some("t1".into()),
            ..SuspendedRunsQuery::default()
        })
        .await;
        assert_eq!(thread, (vec!["a".into(), "d".into()], 2), "{backend}");
        let paged = runs
            .list_suspended(&SuspendedRunsQuery {
                per_page: 3,
                page: 1,
                ..SuspendedRunsQuery::default()
            })
            .await
            .unwrap();
        assert_eq!((paged.runs.len(), paged.total), (1, 4), "{backend}");
        teardown(fixture).await;
    }
}

/// Issue 15, bug 3: a finished run is stored as completed, failed or aborted, as it ended, and
/// a delegated run names its parent, so the runs table's filters find them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_runs_are_stored_as_they_ended_and_delegations_name_their_parent() {
    use kestrel_core::agent::{DelegatedBy, RunStatus as Progress};
    use kestrel_core::model::FinishReason;
    use kestrel_storage::RunFilter;

    for fixture in fixtures().await {
        let storage = fixture.store();
        let backend = storage.backend().to_owned();
        let runs = StorageRunStore::new(storage.clone());
        for (run_id, reason) in [
            ("run-stop", FinishReason::Stop),
            ("run-error", FinishReason::Error),
            ("run-abort", FinishReason::Abort),
        ] {
            let mut run = state(run_id, "mailer", None);
            run.status = Progress::Finished {
                reason,
                object: None,
            };
            let ended = RunPhase::ended(&run).unwrap();
            runs.save(&run, ended, None).await.unwrap();
        }
        let mut child = state("run-child", "writer", None);
        child.delegated_by = Some(DelegatedBy {
            agent_id: "mailer".into(),
            run_id: "run-stop".into(),
            tool_call_id: "call-1".into(),
        });
        runs.save(&child, RunPhase::Running, None).await.unwrap();

        let ids = |statuses: Vec<RunPhase>, parent: Option<&str>| {
            let storage = storage.clone();
            let filter = RunFilter {
                statuses,
                parent_run_id: parent.map(str::to_owned),
                ..RunFilter::default()
            };
            async move {
                let mut ids: Vec<String> = storage
                    .list_runs(filter)
                    .await
                    .unwrap()
                    .items
                    .into_iter()
                    .map(|r| r.run_id)
                    .collect();
                ids.sort();
                ids
            }
        };
        assert_eq!(
            ids(vec![RunPhase::Completed], None).await,
            ["run-stop"],
            "{backend}"
        );
        assert_eq!(
            ids(vec![RunPhase::Failed], None).await,
            ["run-error"],
            "{backend}"
        );
        assert_eq!(
            ids(vec![RunPhase::Aborted], None).await,
            ["run-abort"],
            "{backend}"
        );
        assert_eq!(
            ids(vec![], Some("run-stop")).await,
            ["run-child"],
            "{backend}"
        );
        // Read back, each is the run as it ended.
        let failed = runs.load("run-error").await.unwrap().unwrap();
        assert_eq!(failed.phase, RunPhase::Failed, "{backend}");
        let aborted = runs.load("run-abort").await.unwrap().unwrap();
        assert_eq!(aborted.phase, RunPhase::Aborted, "{backend}");
        fixture.teardown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saves_under_a_stale_lease_token_are_refused() {
    for (backend, runs, fixture) in stores().await {
        let mut owned = state("run-fenced", "mailer", Some(("t1", "alice")));
        owned.lease_token = Some(7);
        let v1 = runs.save(&owned, RunPhase::Running, None).await.unwrap();
        // A newer owner claims the run.
        let mut successor = owned.clone();
        successor.lease_token = Some(9);
        let v2 = runs
            .save(&successor, RunPhase::Running, Some(v1))
            .await
            .unwrap();
        // The old owner's late save is refused even with the right version.
        let late = runs.save(&owned, RunPhase::Completed, Some(v2)).await;
        assert!(
            matches!(late, Err(RunStoreError::Fenced { ref run_id, token: 7, current: 9 }) if run_id == "run-fenced"),
            "{backend}: {late:?}"
        );
        let stored = runs.load("run-fenced").await.unwrap().unwrap();
        assert_eq!(stored.version, v2, "{backend}");
        assert_eq!(stored.phase, RunPhase::Running, "{backend}");
        assert_eq!(stored.state.lease_token, Some(9), "{backend}");
        // An unfenced save goes through and the store still refuses the stale token after it.
        let mut plain = owned.clone();
        plain.lease_token = None;
        let v3 = runs
            .save(&plain, RunPhase::Running, Some(v2))
            .await
            .unwrap();
        let again = runs.save(&owned, RunPhase::Running, Some(v3)).await;
        assert!(
            matches!(again, Err(RunStoreError::Fenced { .. })),
            "{backend}: {again:?}"
        );
        teardown(fixture).await;
    }
}
