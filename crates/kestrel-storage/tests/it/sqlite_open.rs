//! Opening SQLite files: creation, WAL, migrations (old files opened by a newer build, newer
//! files refused by an older one), errors naming the path, and two stores on one file.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kestrel_core::message::Message;
use kestrel_storage::prelude::*;
use kestrel_storage::sqlite::{MIGRATIONS, SCHEMA_VERSION};
use kestrel_storage::{
    MessageSearch, NewThread, Scope, Selection, SqliteStorage, Storage, StorageError,
};
use rusqlite::Connection;

fn raw(path: &std::path::Path) -> Connection {
    Connection::open(path).unwrap()
}

/// The schema version recorded in the file.
fn schema_version(path: &std::path::Path) -> usize {
    raw(path)
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
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

    let mode: String = raw(&path)
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    assert_eq!(schema_version(&path), SCHEMA_VERSION);

    let reopened = SqliteStorage::open(&path).await.unwrap();
    assert_eq!(schema_version(&path), SCHEMA_VERSION);
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
    let mut conn = raw(&path);
    MIGRATIONS.to_version(&mut conn, 1).unwrap();
    conn.execute(
        "INSERT INTO threads (id, resource_id, metadata, created_at, updated_at, next_seq) \
         VALUES ('old', 'alice', '{\"v\":1}', 0, 0, 2)",
        [],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO messages (id, thread_id, resource_id, seq, role, parts, search_text, created_at) \
         VALUES ('m1', 'old', 'alice', 1, 'user', '[{\"type\":\"text\",\"text\":\"from v1\"}]', 'from v1', 0)",
        [],
    )
    .unwrap();
    drop(conn);
    assert_eq!(schema_version(&path), 1);

    let store = SqliteStorage::open(&path).await.unwrap();
    assert_eq!(schema_version(&path), SCHEMA_VERSION);
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
    // Migration 3 put the old text in the search index.
    let indexed: i64 = raw(&path)
        .query_row(
            "SELECT count(*) FROM messages_fts WHERE search_text GLOB '*from v1*'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(indexed, 1);
}

/// How many messages the trigram index holds for `needle`, and whether its mark is at the last
/// message.
fn search_index(path: &std::path::Path, needle: &str) -> (i64, bool) {
    let conn = raw(path);
    let indexed: i64 = conn
        .query_row(
            "SELECT count(*) FROM messages_fts WHERE search_text GLOB ?1",
            [format!("*{needle}*")],
            |r| r.get(0),
        )
        .unwrap();
    let current: bool = conn
        .query_row(
            "SELECT indexed_up_to = (SELECT max(rowid) FROM messages) FROM search_index_state",
            [],
            |r| r.get(0),
        )
        .unwrap();
    (indexed, current)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_search_index_catches_up_in_batches_and_searches_see_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("search.db");
    let store = SqliteStorage::open(&path).await.unwrap();
    store
        .create_thread(NewThread::new("alice").id("t"))
        .await
        .unwrap();
    for i in 0..5 {
        store
            .append_messages(
                "t",
                "alice",
                vec![Message::user(format!("findme {i}")).into()],
            )
            .await
            .unwrap();
    }
    // Not indexed yet, and found all the same.
    assert_eq!(search_index(&path, "findme"), (0, false));
    let search = MessageSearch {
        scope: Scope::thread("t", "alice"),
        query: "FINDME".into(),
        limit: 10,
    };
    assert_eq!(
        store.search_messages(search.clone()).await.unwrap().len(),
        5
    );

    store.catch_up_search_index().await.unwrap();
    assert_eq!(search_index(&path, "findme"), (5, true));
    assert_eq!(
        store.search_messages(search.clone()).await.unwrap().len(),
        5
    );

    // A few hundred more messages bring the index up to date in the background.
    let batch = (0..600)
        .map(|i| Message::user(format!("later {i}")).into())
        .collect();
    store.append_messages("t", "alice", batch).await.unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while search_index(&path, "later") != (600, true) {
        assert!(
            std::time::Instant::now() < deadline,
            "the index never caught up"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn an_older_build_refuses_a_file_migrated_by_a_newer_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("future.db");
    SqliteStorage::open(&path).await.unwrap().close().await;
    raw(&path)
        .pragma_update(None, "user_version", 9999)
        .unwrap();
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

#[tokio::test]
async fn searches_beyond_the_newest_messages_go_through_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deep.db");
    let store = SqliteStorage::open(&path).await.unwrap();
    store
        .create_thread(NewThread::new("alice").id("t"))
        .await
        .unwrap();
    let needle = Message::user("the osprey dives");
    let needle_id = needle.id.clone();
    store
        .append_messages("t", "alice", vec![needle.into()])
        .await
        .unwrap();
    let fillers = (0..1500)
        .map(|i| Message::user(format!("filler about kestrels {i}")).into())
        .collect();
    store.append_messages("t", "alice", fillers).await.unwrap();
    store.catch_up_search_index().await.unwrap();
    let search = |query: &str| MessageSearch {
        scope: Scope::thread("t", "alice"),
        query: query.into(),
        limit: 3,
    };
    let found = store.search_messages(search("OSPREY")).await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].id, needle_id);
    let frequent = store.search_messages(search("kestrels")).await.unwrap();
    let texts: Vec<String> = frequent.iter().map(|m| m.to_message().text()).collect();
    assert_eq!(
        texts,
        [
            "filler about kestrels 1499",
            "filler about kestrels 1498",
            "filler about kestrels 1497"
        ]
    );

    // Take the old message out of the index behind the store's back: the search no longer
    // finds it, which shows that messages past the newest ones are found through the index.
    raw(&path)
        .execute(
            "INSERT INTO messages_fts (messages_fts, rowid, search_text) \
             SELECT 'delete', rowid, search_text FROM messages WHERE id = ?1",
            [&needle_id],
        )
        .unwrap();
    assert!(
        store
            .search_messages(search("osprey"))
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_file_migrated_by_the_sqlx_based_builds_opens_without_rerunning_migrations() {
    // Earlier builds recorded applied migrations in `_sqlx_migrations`, not `user_version`.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sqlx-era.db");
    let mut conn = raw(&path);
    MIGRATIONS.to_version(&mut conn, 2).unwrap();
    conn.execute_batch(
        "PRAGMA user_version = 0;
         CREATE TABLE _sqlx_migrations (version BIGINT PRIMARY KEY, description TEXT NOT NULL,
             installed_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, success BOOLEAN NOT NULL,
             checksum BLOB NOT NULL, execution_time BIGINT NOT NULL);
         INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
         VALUES (1, 'threads messages', TRUE, X'00', 0), (2, 'runs', TRUE, X'00', 0);
         INSERT INTO threads (id, resource_id, created_at, updated_at) VALUES ('t', 'alice', 0, 0);",
    )
    .unwrap();
    drop(conn);
    let store = SqliteStorage::open(&path).await.unwrap();
    assert_eq!(schema_version(&path), SCHEMA_VERSION);
    assert!(store.get_thread("t").await.unwrap().is_some());
}
