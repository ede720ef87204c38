//! PostgreSQL behind a proxy that fails the way networks do: a database whose answers are
//! lost (the write commits, the client never hears) or that refuses. Every operation ends in
//! bounded time with an error naming it, the connections caught are never reused, and the
//! store serves again once the database is reachable.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use kestrel_chaos::{Fault, FaultProxy};
use kestrel_storage::prelude::*;
use kestrel_storage::testing::{drop_schema, postgres_url, test_schema};
use kestrel_storage::{
    PgOptions, PostgresStorage, StorageError, WorkflowRunRecord, WorkflowStatus,
};
use serde_json::json;

/// A store through a proxy in front of the test database (short timeouts), the proxy, and a
/// store on the same schema reaching the database directly.
async fn proxied(url: &str, schema: &str) -> (PostgresStorage, FaultProxy, PostgresStorage) {
    let authority = url
        .split("://")
        .nth(1)
        .and_then(|rest| rest.split(['/', '?']).next())
        .map(|a| a.rsplit('@').next().unwrap_or(a))
        .unwrap();
    let upstream = kestrel_chaos::resolve(authority).await.unwrap();
    let proxy = FaultProxy::start(upstream).await.unwrap();
    let options = PgOptions {
        operation_timeout: Duration::from_secs(2),
        max_connections: 3,
        ..PgOptions::schema(schema)
    };
    let through = PostgresStorage::connect(&proxy.url_for(url).unwrap(), options)
        .await
        .unwrap();
    let direct = PostgresStorage::connect(url, PgOptions::schema(schema))
        .await
        .unwrap();
    (through, proxy, direct)
}

fn run(n: u32) -> WorkflowRunRecord {
    let snapshot = serde_json::value::to_raw_value(&json!({"n": n})).unwrap();
    WorkflowRunRecord::new("w", format!("r{n}"), WorkflowStatus::Running, snapshot)
}

/// The operation's outcome, and that it ended within `limit` (a bound against hanging for
/// good, not a speed target).
async fn ends<T>(limit: Duration, work: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, work)
        .await
        .unwrap_or_else(|_| panic!("the operation did not end in {limit:?}"))
}

/// A timeout of `operation`: no answer to its statement, or none to the check of the pooled
/// connection it was to run on.
fn timed_out(error: &StorageError, operation: &str) -> bool {
    matches!(error, StorageError::Backend { operation: op, source, .. }
        if *op == operation
            && (source.to_string().contains("no answer") || source.to_string().contains("timed out")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_fails_the_operation_and_the_store_serves_again() {
    let Some(url) = postgres_url() else {
        eprintln!("skipping: KESTREL_TEST_POSTGRES_URL is not set");
        return;
    };
    let schema = test_schema();
    let (store, proxy, direct) = proxied(&url, &schema).await;
    store.save_workflow_run(run(1)).await.unwrap();

    // The write of r2 reaches the database and commits; its answer is lost on the way back.
    // The save ends with a timeout naming it, and the store tells no success.
    proxy.drop_answers_after(*b"r2");
    let lost = ends(Duration::from_secs(20), store.save_workflow_run(run(2))).await;
    let error = lost.unwrap_err();
    assert!(timed_out(&error, "save_workflow_run"), "{error}");
    assert!(proxy.marker_met());
    assert!(
        direct.get_workflow_run("w", "r2").await.unwrap().is_some(),
        "the request went through: the write committed"
    );
    // The connection it was on is not reused: the next operations work.
    for n in 3..=6 {
        let saved = ends(Duration::from_secs(20), store.save_workflow_run(run(n))).await;
        saved.unwrap();
    }

    // Every answer is lost: each write ends with a timeout naming it; more of them than the
    // pool has connections do not exhaust it.
    proxy.set(Fault::DropAnswers);
    for n in 7..=10 {
        let lost = ends(Duration::from_secs(20), store.save_workflow_run(run(n))).await;
        let error = lost.unwrap_err();
        assert!(timed_out(&error, "save_workflow_run"), "{error}");
    }
    proxy.set(Fault::None);
    let saved = ends(Duration::from_secs(20), store.save_workflow_run(run(11))).await;
    saved.unwrap();
    let read = ends(Duration::from_secs(20), store.get_workflow_run("w", "r11")).await;
    assert!(read.unwrap().is_some());

    store.close().await;
    direct.close().await;
    drop_schema(&url, &schema).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_database_fails_the_operation_and_a_refusing_one_at_once() {
    let Some(url) = postgres_url() else {
        eprintln!("skipping: KESTREL_TEST_POSTGRES_URL is not set");
        return;
    };
    let schema = test_schema();
    let (store, proxy, direct) = proxied(&url, &schema).await;
    store.save_workflow_run(run(1)).await.unwrap();

    proxy.set(Fault::BlackHole);
    let silent = ends(Duration::from_secs(20), store.get_workflow_run("w", "r1")).await;
    assert!(silent.is_err(), "{silent:?}");

    proxy.set(Fault::Refuse);
    let started = Instant::now();
    let refused = ends(Duration::from_secs(20), store.get_workflow_run("w", "r1")).await;
    assert!(refused.is_err(), "{refused:?}");
    eprintln!("a refused read failed after {:?}", started.elapsed());

    proxy.set(Fault::None);
    let read = ends(Duration::from_secs(20), async {
        loop {
            if let Ok(Some(run)) = store.get_workflow_run("w", "r1").await {
                return run;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert_eq!(read.run_id, "r1");

    store.close().await;
    direct.close().await;
    drop_schema(&url, &schema).await;
}

#[tokio::test]
async fn timeouts_out_of_range_are_refused_by_name() {
    let options = PgOptions {
        operation_timeout: Duration::ZERO,
        ..PgOptions::default()
    };
    let refused = PostgresStorage::connect("postgres://127.0.0.1:9/none", options).await;
    let error = refused.unwrap_err().to_string();
    assert!(error.contains("operation_timeout"), "{error}");
}
