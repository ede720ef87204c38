//! The checks of runs: compare-and-set saves, saves together, racing instances, listing filters.

use std::sync::Arc;
use std::time::Duration;

use kestrel_core::message::Message;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::error::StorageError;
use crate::storage::Storage;
use crate::types::{PageRequest, RunFilter, RunPhase, RunRecord};

/// A snapshot's JSON text.
fn raw(value: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).unwrap()
}

/// A stored snapshot, read as JSON (stores may give back equivalent text).
fn value(raw: &RawValue) -> Value {
    serde_json::from_str(raw.get()).unwrap()
}

fn run_state_snapshot(run_id: &str) -> Value {
    use kestrel_core::agent::{RunSettings, RunState};
    let settings = RunSettings {
        thread_id: Some("t1".into()),
        resource_id: Some("alice".into()),
        ..RunSettings::default()
    };
    let state = RunState::new(
        run_id.into(),
        "weather".into(),
        vec![Message::user("Weather in Lisbon? 21.5 °C")],
        5,
        settings,
    );
    serde_json::to_value(&state).unwrap()
}

/// Create-only, compare-and-set updates, conflicts that change nothing, snapshots round-trip.
pub async fn runs_save_compare_and_set(store: Arc<dyn Storage>) {
    let snapshot = run_state_snapshot("r1");
    let mut record = RunRecord::new("r1", "weather", RunPhase::Running, raw(&snapshot));
    record.thread_id = Some("t1".into());
    record.resource_id = Some("alice".into());
    let created = store.save_run(record.clone(), None).await.unwrap();
    assert_eq!(created.version, 1);
    assert_eq!(created.created_at, created.updated_at);
    assert_eq!(store.get_run("r1").await.unwrap(), Some(created.clone()));
    let state: kestrel_core::agent::RunState =
        serde_json::from_str(created.snapshot.get()).unwrap();
    assert_eq!(serde_json::to_value(&state).unwrap(), snapshot);

    let duplicate = store.save_run(record.clone(), None).await;
    assert!(matches!(
        duplicate,
        Err(StorageError::Conflict { ref run_id, expected: None, actual: Some(1) }) if run_id == "r1"
    ));

    tokio::time::sleep(Duration::from_millis(2)).await;
    let suspended = RunRecord {
        status: RunPhase::Suspended,
        snapshot: raw(&json!({"pending": [{"toolCallId": "c1", "approved": null}], "ratio": 0.1})),
        ..record.clone()
    };
    let updated = store.save_run(suspended.clone(), Some(1)).await.unwrap();
    assert_eq!(updated.version, 2);
    assert_eq!(updated.created_at, created.created_at);
    assert!(updated.updated_at > created.updated_at);
    assert_eq!(store.get_run("r1").await.unwrap(), Some(updated.clone()));

    let stale = RunRecord {
        status: RunPhase::Completed,
        ..record.clone()
    };
    let conflict = store.save_run(stale, Some(1)).await;
    assert!(matches!(
        conflict,
        Err(StorageError::Conflict {
            expected: Some(1),
            actual: Some(2),
            ..
        })
    ));
    assert_eq!(store.get_run("r1").await.unwrap(), Some(updated));

    let ghost = RunRecord::new("ghost", "weather", RunPhase::Running, raw(&json!({})));
    let missing = store.save_run(ghost, Some(3)).await;
    assert!(matches!(missing, Err(StorageError::RunNotFound { run_id }) if run_id == "ghost"));
    assert_eq!(store.get_run("ghost").await.unwrap(), None);
    assert!(store.delete_run("r1").await.unwrap());
    assert!(!store.delete_run("r1").await.unwrap());
    assert_eq!(store.get_run("r1").await.unwrap(), None);
}

/// `save_runs` writes every run or none: a conflict on the last leaves the first unchanged.
pub async fn runs_save_together(store: Arc<dyn Storage>) {
    let parent = RunRecord::new(
        "parent",
        "boss",
        RunPhase::Suspended,
        raw(&json!({"at": 0})),
    );
    let child = RunRecord::new(
        "child",
        "helper",
        RunPhase::Suspended,
        raw(&json!({"at": 0})),
    );
    let parent = store.save_run(parent, None).await.unwrap();
    let child = store.save_run(child, None).await.unwrap();
    let decided = |record: &RunRecord| RunRecord {
        status: RunPhase::Running,
        snapshot: raw(&json!({"at": 1})),
        ..record.clone()
    };
    // The child changed meanwhile (an abort marked it): the decision must not land anywhere.
    let conflict = store
        .save_runs(vec![
            (decided(&parent), Some(parent.version)),
            (decided(&child), Some(child.version + 1)),
        ])
        .await;
    assert!(
        matches!(conflict, Err(StorageError::Conflict { ref run_id, .. }) if run_id == "child"),
        "{conflict:?}"
    );
    assert_eq!(store.get_run("parent").await.unwrap(), Some(parent.clone()));
    assert_eq!(store.get_run("child").await.unwrap(), Some(child.clone()));
    let missing = store
        .save_runs(vec![
            (decided(&parent), Some(parent.version)),
            (
                RunRecord::new("ghost", "x", RunPhase::Running, raw(&json!({}))),
                Some(1),
            ),
        ])
        .await;
    assert!(
        matches!(missing, Err(StorageError::RunNotFound { .. })),
        "{missing:?}"
    );
    assert_eq!(store.get_run("parent").await.unwrap(), Some(parent.clone()));
    // Without a conflict both are written, in order.
    let saved = store
        .save_runs(vec![
            (decided(&parent), Some(parent.version)),
            (decided(&child), Some(child.version)),
        ])
        .await
        .unwrap();
    assert_eq!(saved.len(), 2);
    assert_eq!((saved[0].run_id.as_str(), saved[0].version), ("parent", 2));
    assert_eq!((saved[1].run_id.as_str(), saved[1].version), ("child", 2));
    assert_eq!(
        value(&store.get_run("child").await.unwrap().unwrap().snapshot),
        json!({"at": 1})
    );
}

/// Ten instances racing to advance one run from version 1: exactly one wins.
pub async fn runs_concurrent_compare_and_set(store: Arc<dyn Storage>) {
    let record = RunRecord::new("r1", "agent", RunPhase::Suspended, raw(&json!({"step": 0})));
    store.save_run(record.clone(), None).await.unwrap();
    let tasks: Vec<_> = (0..10)
        .map(|i| {
            let store = Arc::clone(&store);
            let record = RunRecord {
                status: RunPhase::Running,
                snapshot: raw(&json!({"step": 1, "by": i})),
                ..record.clone()
            };
            tokio::spawn(async move { store.save_run(record, Some(1)).await })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            Ok(saved) => winners.push(saved),
            Err(StorageError::Conflict {
                actual: Some(2), ..
            }) => {}
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(winners.len(), 1);
    let stored = store.get_run("r1").await.unwrap().unwrap();
    assert_eq!(
        (stored.version, value(&stored.snapshot)),
        (2, value(&winners[0].snapshot))
    );
}

async fn list_run_ids(store: &Arc<dyn Storage>, filter: RunFilter) -> Vec<String> {
    let page = store.list_runs(filter).await.unwrap();
    page.items.into_iter().map(|r| r.run_id).collect()
}

/// Filters (agent, thread, resource, statuses, parent, creation range), newest first, pages.
pub async fn runs_list_filters(store: Arc<dyn Storage>) {
    let specs = [
        ("r1", "planner", Some("t1"), RunPhase::Completed, None),
        ("r2", "planner", Some("t1"), RunPhase::Suspended, None),
        (
            "r3",
            "helper",
            Some("t2"),
            RunPhase::WaitingForSubtask,
            None,
        ),
        ("r4", "helper", None, RunPhase::Suspended, Some("r3")),
        ("r5", "planner", Some("t2"), RunPhase::Failed, None),
    ];
    let mut created = Vec::new();
    for (id, agent, thread, status, parent) in specs {
        let mut record = RunRecord::new(id, agent, status, raw(&json!({"id": id})));
        record.thread_id = thread.map(str::to_owned);
        record.resource_id = thread.map(|_| "alice".to_owned());
        record.parent_run_id = parent.map(str::to_owned);
        created.push(store.save_run(record, None).await.unwrap());
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let f = RunFilter::default;
    assert_eq!(
        list_run_ids(&store, f()).await,
        ["r5", "r4", "r3", "r2", "r1"]
    );
    let suspended = RunFilter {
        statuses: vec![RunPhase::Suspended, RunPhase::WaitingForSubtask],
        ..f()
    };
    assert_eq!(
        list_run_ids(&store, suspended.clone()).await,
        ["r4", "r3", "r2"]
    );
    let in_t1 = RunFilter {
        thread_id: Some("t1".into()),
        resource_id: Some("alice".into()),
        ..suspended.clone()
    };
    assert_eq!(list_run_ids(&store, in_t1).await, ["r2"]);
    let children = RunFilter {
        parent_run_id: Some("r3".into()),
        ..f()
    };
    assert_eq!(list_run_ids(&store, children).await, ["r4"]);
    let planner = RunFilter {
        agent_id: Some("planner".into()),
        ..f()
    };
    assert_eq!(list_run_ids(&store, planner).await, ["r5", "r2", "r1"]);
    let window = RunFilter {
        created_from: Some(created[1].created_at),
        created_to: Some(created[3].created_at),
        ..f()
    };
    assert_eq!(list_run_ids(&store, window).await, ["r3", "r2"]);
    let paged = RunFilter {
        page: PageRequest::new(1, 2),
        ..f()
    };
    let page = store.list_runs(paged).await.unwrap();
    assert_eq!((page.total, page.has_more, page.items.len()), (5, true, 2));
    assert_eq!(page.items[0].run_id, "r3");
    assert_eq!(page.items[0], created[2]);
    let none = RunFilter {
        agent_id: Some("nobody".into()),
        ..f()
    };
    let empty = store.list_runs(none).await.unwrap();
    assert_eq!(
        (empty.total, empty.has_more, empty.items.len()),
        (0, false, 0)
    );

    // Saves over stored runs keep every filter true: one that changes only the snapshot, one
    // that changes the status, one that moves the run to another agent, thread and parent.
    let same = RunRecord {
        snapshot: raw(&json!({"id": "r5", "step": 2})),
        ..created[4].clone()
    };
    store.save_run(same, Some(1)).await.unwrap();
    let finished = RunRecord {
        status: RunPhase::Completed,
        ..created[1].clone()
    };
    store.save_run(finished, Some(1)).await.unwrap();
    let moved = RunRecord {
        agent_id: "helper".into(),
        thread_id: Some("t2".into()),
        parent_run_id: Some("r3".into()),
        ..created[0].clone()
    };
    store.save_run(moved, Some(1)).await.unwrap();
    assert_eq!(list_run_ids(&store, suspended).await, ["r4", "r3"]);
    let failed = RunFilter {
        statuses: vec![RunPhase::Failed],
        ..f()
    };
    assert_eq!(list_run_ids(&store, failed).await, ["r5"]);
    let completed = RunFilter {
        statuses: vec![RunPhase::Completed],
        ..f()
    };
    assert_eq!(list_run_ids(&store, completed).await, ["r2", "r1"]);
    let planner = RunFilter {
        agent_id: Some("planner".into()),
        ..f()
    };
    assert_eq!(list_run_ids(&store, planner).await, ["r5", "r2"]);
    let in_t2 = RunFilter {
        thread_id: Some("t2".into()),
        ..f()
    };
    assert_eq!(list_run_ids(&store, in_t2).await, ["r5", "r3", "r1"]);
    let children = RunFilter {
        parent_run_id: Some("r3".into()),
        ..f()
    };
    assert_eq!(list_run_ids(&store, children).await, ["r4", "r1"]);
    let r5 = store.get_run("r5").await.unwrap().unwrap();
    assert_eq!(
        (r5.version, r5.status, value(&r5.snapshot)),
        (2, RunPhase::Failed, json!({"id": "r5", "step": 2}))
    );
}

/// Fencing: the greatest lease token written for a run, by a snapshot or by messages, refuses
/// every smaller one (nothing written); a save without a token is not checked and keeps it.
pub async fn runs_refuse_stale_lease_tokens(store: Arc<dyn Storage>) {
    use kestrel_core::lease::Fence;

    use crate::types::{NewMessage, NewThread, Selection};

    store
        .create_thread(NewThread::new("alice").id("t-fence"))
        .await
        .unwrap();
    let owned = |token: i64| {
        let mut record = RunRecord::new(
            "r-fence",
            "weather",
            RunPhase::Running,
            raw(&run_state_snapshot("r-fence")),
        );
        record.lease_token = Some(token);
        record
    };
    let first = store.save_run(owned(10), None).await.unwrap();
    assert_eq!(first.lease_token, Some(10));
    assert_eq!(
        store.get_run("r-fence").await.unwrap().unwrap().lease_token,
        Some(10)
    );

    // The first owner writes messages under its token.
    let fence = |token| Fence {
        run_id: "r-fence",
        token,
    };
    store
        .append_messages_fenced(
            "t-fence",
            "alice",
            vec![NewMessage::from(Message::user("one"))],
            fence(10),
        )
        .await
        .unwrap();

    // A new owner (token 20) saves the snapshot: the old owner's writes are refused now.
    let taken = store
        .save_run(owned(20), Some(first.version))
        .await
        .unwrap();
    let late = store.save_run(owned(10), Some(taken.version)).await;
    assert!(
        matches!(late, Err(StorageError::Fenced { ref run_id, token: 10, current: 20 }) if run_id == "r-fence"),
        "{late:?}"
    );
    let late_messages = store
        .append_messages_fenced(
            "t-fence",
            "alice",
            vec![NewMessage::from(Message::user("late"))],
            fence(10),
        )
        .await;
    assert!(
        matches!(
            late_messages,
            Err(StorageError::Fenced {
                token: 10,
                current: 20,
                ..
            })
        ),
        "{late_messages:?}"
    );
    let stored = store.get_run("r-fence").await.unwrap().unwrap();
    assert_eq!(
        (stored.version, stored.lease_token),
        (taken.version, Some(20))
    );
    let list = store
        .list_messages("t-fence", Some("alice"), Selection::all())
        .await
        .unwrap();
    assert_eq!(list.messages.len(), 1, "the late message was not stored");

    // Messages raise the fence as snapshots do.
    store
        .append_messages_fenced(
            "t-fence",
            "alice",
            vec![NewMessage::from(Message::user("two"))],
            fence(30),
        )
        .await
        .unwrap();
    let stale_snapshot = store.save_run(owned(20), Some(taken.version)).await;
    assert!(
        matches!(
            stale_snapshot,
            Err(StorageError::Fenced {
                token: 20,
                current: 30,
                ..
            })
        ),
        "{stale_snapshot:?}"
    );

    // Unfenced saves are not checked and keep the stored token.
    let mut plain = owned(0);
    plain.lease_token = None;
    let saved = store.save_run(plain, Some(taken.version)).await.unwrap();
    assert_eq!(saved.version, taken.version + 1);
    assert_eq!(
        store.get_run("r-fence").await.unwrap().unwrap().lease_token,
        Some(20)
    );

    // A refused save in a batch leaves the whole batch unwritten.
    let other = RunRecord::new(
        "r-other",
        "weather",
        RunPhase::Running,
        raw(&run_state_snapshot("r-other")),
    );
    let batch = store
        .save_runs(vec![(other, None), (owned(5), Some(saved.version))])
        .await;
    assert!(
        matches!(batch, Err(StorageError::Fenced { .. })),
        "{batch:?}"
    );
    assert_eq!(store.get_run("r-other").await.unwrap(), None);

    // Tokens above the largest storable are refused by name.
    let huge = store
        .append_messages_fenced(
            "t-fence",
            "alice",
            vec![NewMessage::from(Message::user("x"))],
            fence(u64::MAX),
        )
        .await;
    assert!(
        matches!(
            huge,
            Err(StorageError::InvalidArgument {
                argument: "lease_token",
                ..
            })
        ),
        "{huge:?}"
    );
}
