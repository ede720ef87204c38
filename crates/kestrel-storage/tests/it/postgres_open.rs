//! Connecting to PostgreSQL: schemas, migrations, errors naming the (redacted) URL, and two
//! instances sharing one schema. Skipped, with a message, when `KESTREL_TEST_POSTGRES_URL` is
//! unset.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kestrel_core::message::Message;
use kestrel_storage::postgres::MIGRATOR;
use kestrel_storage::prelude::*;
use kestrel_storage::testing::{drop_schema, postgres_url, test_schema};
use kestrel_storage::{
    NewThread, PgOptions, PostgresStorage, RunPhase, RunRecord, Selection, Storage, StorageError,
};
use sqlx::migrate::Migrator;
use sqlx::{Connection, Executor, PgConnection};

async fn applied(store: &PostgresStorage) -> Vec<i64> {
    sqlx::query_scalar("SELECT version FROM _sqlx_migrations ORDER BY version")
        .fetch_all(store.pool())
        .await
        .unwrap()
}

#[tokio::test]
async fn schemas_isolate_stores_and_reconnecting_keeps_data() {
    let Some(url) = postgres_url() else { return };
    let (one, two) = (test_schema(), test_schema());
    let a = PostgresStorage::connect(&url, PgOptions::schema(&one))
        .await
        .unwrap();
    let b = PostgresStorage::connect(&url, PgOptions::schema(&two))
        .await
        .unwrap();
    assert_eq!(a.schema(), one);
    a.create_thread(NewThread::new("alice").id("t"))
        .await
        .unwrap();
    assert!(b.get_thread("t").await.unwrap().is_none());
    b.create_thread(NewThread::new("bob").id("t"))
        .await
        .unwrap();

    let all: Vec<i64> = MIGRATOR.iter().map(|m| m.version).collect();
    assert_eq!(applied(&a).await, all);
    let again = PostgresStorage::connect(&url, PgOptions::schema(&one))
        .await
        .unwrap();
    assert_eq!(applied(&again).await, all);
    assert_eq!(
        again.get_thread("t").await.unwrap().unwrap().resource_id,
        "alice"
    );

    let has: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')")
            .fetch_one(a.pool())
            .await
            .unwrap();
    assert_eq!(a.has_pgvector(), has);
    for store in [a, b, again] {
        store.close().await;
    }
    drop_schema(&url, &one).await;
    drop_schema(&url, &two).await;
}

#[tokio::test]
async fn a_newer_build_migrates_a_schema_of_an_older_one() {
    let Some(url) = postgres_url() else { return };
    let schema = test_schema();
    let mut conn = PgConnection::connect(&url).await.unwrap();
    conn.execute(format!("CREATE SCHEMA \"{schema}\"; SET search_path TO \"{schema}\"").as_str())
        .await
        .unwrap();
    let v1 = Migrator {
        migrations: MIGRATOR.migrations[..1].to_vec().into(),
        ..Migrator::DEFAULT
    };
    v1.run(&mut conn).await.unwrap();
    conn.execute(
        "INSERT INTO threads (id, resource_id, created_at, updated_at, next_seq) \
         VALUES ('old', 'alice', now(), now(), 1)",
    )
    .await
    .unwrap();
    conn.close().await.unwrap();

    let store = PostgresStorage::connect(&url, PgOptions::schema(&schema))
        .await
        .unwrap();
    assert_eq!(applied(&store).await.len(), MIGRATOR.iter().count());
    let stored = store
        .append_messages("old", "alice", vec![Message::user("hi").into()])
        .await
        .unwrap();
    assert_eq!(stored[0].seq, 1);
    let run = RunRecord::new(
        "r",
        "a",
        RunPhase::Suspended,
        serde_json::value::to_raw_value(&serde_json::json!({})).unwrap(),
    );
    store.save_run(run, None).await.unwrap();
    store.close().await;
    drop_schema(&url, &schema).await;
}

#[tokio::test]
async fn bad_schema_names_and_unreachable_servers_are_typed_errors() {
    let bad = PostgresStorage::connect("postgres://u@127.0.0.1/db", PgOptions::schema("x\"; DROP"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            bad,
            StorageError::InvalidArgument {
                argument: "schema",
                ..
            }
        ),
        "{bad:?}"
    );

    let url = "postgres://kestrel:hunter2@127.0.0.1:1/app";
    let options = PgOptions {
        acquire_timeout: std::time::Duration::from_secs(2),
        ..PgOptions::default()
    };
    let error = PostgresStorage::connect(url, options).await.unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, StorageError::Open { .. }), "{error:?}");
    assert!(
        message.contains("postgres://kestrel:***@127.0.0.1:1/app"),
        "{message}"
    );
    assert!(!message.contains("hunter2"), "{message}");

    let error = PostgresStorage::connect("not a url", PgOptions::default())
        .await
        .unwrap_err();
    assert!(error.to_string().contains("not a url"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_one_schema_append_without_losing_or_sharing_seqs() {
    let Some(url) = postgres_url() else { return };
    let schema = test_schema();
    let options = PgOptions {
        max_connections: 4,
        ..PgOptions::schema(&schema)
    };
    let a = PostgresStorage::connect(&url, options.clone())
        .await
        .unwrap();
    let b = PostgresStorage::connect(&url, options).await.unwrap();
    a.create_thread(NewThread::new("alice").id("t"))
        .await
        .unwrap();
    let stores: [Arc<dyn Storage>; 2] = [Arc::new(a.clone()), Arc::new(b.clone())];
    let mut tasks = Vec::new();
    for (n, store) in stores.iter().enumerate() {
        for i in 0..50 {
            let store = Arc::clone(store);
            tasks.push(tokio::spawn(async move {
                let batch = vec![
                    Message::user(format!("{n}-{i}")).into(),
                    Message::assistant("ok").into(),
                ];
                store.append_messages("t", "alice", batch).await.unwrap()
            }));
        }
    }
    for task in tasks {
        let stored = task.await.unwrap();
        assert_eq!(stored[1].seq, stored[0].seq + 1);
    }
    let all = b
        .list_messages("t", None, Selection::all())
        .await
        .unwrap()
        .messages;
    let seqs: Vec<i64> = all.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, (1..=200).collect::<Vec<_>>());
    a.close().await;
    b.close().await;
    drop_schema(&url, &schema).await;
}
