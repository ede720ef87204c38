//! Opening SQLite files: creation, WAL, migrations (old files opened by a newer build, newer
//! files refused by an older one), errors naming the path, and two stores on one file.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kestrel_core::message::Message;
use kestrel_storage::sqlite::MIGRATOR;
use kestrel_storage::{NewThread, Selection, SqliteStorage, Storage, StorageError};
use sqlx::migrate::Migrator;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection};

async fn raw(path: &std::path::Path) -> sqlx::SqliteConnection {
    SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .connect()
        .await
        .unwrap()
}

async fn applied_versions(path: &std::path::Path) -> Vec<i64> {
    let mut conn = raw(path).await;
    let versions = sqlx::query_scalar("SELECT version FROM _sqlx_migrations ORDER BY version")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    versions
}

#[tokio::test]
async fn open_creates_a_migrated_wal_file_and_reopens_idempotently() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.db");
    let store = SqliteStorage::open(&path).await.unwrap();
    assert!(path.exists());
    assert_eq!(store.path(), path);
    let thread = store.create_thread(NewThread::new("alice")).await.unwrap();
    store
        .append_messages(&thread.id, "alice", vec![Message::user("hi").into()])
        .await
        .unwrap();
    store.close().await;

    let mut conn = raw(&path).await;
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(mode, "wal");
    conn.close().await.unwrap();
    let all: Vec<i64> = MIGRATOR.iter().map(|m| m.version).collect();
    assert_eq!(applied_versions(&path).await, all);

    let reopened = SqliteStorage::open(&path).await.unwrap();
    assert_eq!(applied_versions(&path).await, all);
    let history = reopened
        .list_messages(&thread.id, Some("alice"), Selection::last(10))
        .await
        .unwrap();
    assert_eq!(history.messages.len(), 1);
}

#[tokio::test]
async fn a_newer_build_migrates_a_file_of_an_older_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    // What the first release wrote: migration 1 only, and a thread with a message.
    let v1 = Migrator {
        migrations: MIGRATOR.migrations[..1].to_vec().into(),
        ..Migrator::DEFAULT
    };
    let mut conn = raw(&path).await;
    v1.run(&mut conn).await.unwrap();
    sqlx::query(
        "INSERT INTO threads (id, resource_id, metadata, created_at, updated_at, next_seq) \
         VALUES ('old', 'alice', '{\"v\":1}', 0, 0, 2)",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO messages (id, thread_id, resource_id, seq, role, parts, search_text, created_at) \
         VALUES ('m1', 'old', 'alice', 1, 'user', '[{\"type\":\"text\",\"text\":\"from v1\"}]', 'from v1', 0)",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    assert_eq!(applied_versions(&path).await, [1]);

    let store = SqliteStorage::open(&path).await.unwrap();
    assert_eq!(applied_versions(&path).await.len(), MIGRATOR.iter().count());
    let thread = store.get_thread("old").await.unwrap().unwrap();
    assert_eq!(thread.metadata["v"], 1);
    let stored = store
        .append_messages("old", "alice", vec![Message::user("from v2").into()])
        .await
        .unwrap();
    assert_eq!(stored[0].seq, 2);
    let all = store
        .list_messages("old", None, Selection::all())
        .await
        .unwrap();
    assert_eq!(all.messages[0].to_message().text(), "from v1");
    // Tables of migration 2 work on the migrated file.
    store.set_observed_seq("old", "alice", 2).await.unwrap();
    store.create_index("idx", 2).await.unwrap();
}

#[tokio::test]
async fn an_older_build_refuses_a_file_migrated_by_a_newer_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("future.db");
    SqliteStorage::open(&path).await.unwrap().close().await;
    let mut conn = raw(&path).await;
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (9999, 'from the future', TRUE, X'00', 0)",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    let error = SqliteStorage::open(&path).await.unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, StorageError::Open { .. }), "{error:?}");
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("migrat"), "{message}");
}

#[tokio::test]
async fn an_unopenable_path_is_named_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing-dir").join("kestrel.db");
    let error = SqliteStorage::open(&path).await.unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, StorageError::Open { .. }), "{error:?}");
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("unable to open"), "{message}");

    let garbage = dir.path().join("garbage.db");
    std::fs::write(&garbage, vec![7u8; 8192]).unwrap();
    let error = SqliteStorage::open(&garbage).await.unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains(&garbage.display().to_string()),
        "{message}"
    );
    assert!(message.contains("not a database"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_on_one_file_append_without_losing_or_sharing_seqs() {
    // Two stores stand for two processes: each has its own writer, so they meet on SQLite's
    // write lock (BEGIN IMMEDIATE + busy timeout), not on a shared pool.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let a: Arc<dyn Storage> = Arc::new(SqliteStorage::open(&path).await.unwrap());
    let b: Arc<dyn Storage> = Arc::new(SqliteStorage::open(&path).await.unwrap());
    a.create_thread(NewThread::new("alice").id("t"))
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for (n, store) in [a.clone(), b.clone()].into_iter().enumerate() {
        for i in 0..25 {
            let store = Arc::clone(&store);
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
    assert_eq!(seqs, (1..=100).collect::<Vec<_>>());
}
