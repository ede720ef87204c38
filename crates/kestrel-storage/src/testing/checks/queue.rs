//! The checks of message queues: order, ownership, removal, cancelling and the threads to
//! drain, and that a thread's queue goes with the thread.

use std::sync::Arc;

use kestrel_core::message::Message;

use super::helpers::thread;
use crate::error::StorageError;
use crate::storage::Storage;
use crate::types::{NewQueuedMessage, QueuedThread};

fn queued(id: &str, thread: &str, resource: &str, text: &str) -> NewQueuedMessage {
    NewQueuedMessage {
        id: id.to_owned(),
        run_id: format!("run-{id}"),
        agent_id: "assistant".to_owned(),
        thread_id: thread.to_owned(),
        resource_id: resource.to_owned(),
        message: Message::user(text),
    }
}

/// Messages queue in order per thread, come back whole, and are removed one by one.
pub async fn queue_order_and_removal(store: Arc<dyn Storage>) {
    thread(&store, "t1", "alice").await;
    thread(&store, "t2", "alice").await;
    let first = store
        .enqueue_message(queued("q1", "t1", "alice", "first"))
        .await
        .unwrap();
    store
        .enqueue_message(queued("q2", "t2", "alice", "elsewhere"))
        .await
        .unwrap();
    let second = store
        .enqueue_message(queued("q3", "t1", "alice", "second"))
        .await
        .unwrap();
    assert!(second.seq > first.seq);
    let queue = store.queued_messages("t1", "alice").await.unwrap();
    let ids: Vec<&str> = queue.iter().map(|q| q.id.as_str()).collect();
    assert_eq!(ids, ["q1", "q3"]);
    assert_eq!(queue[0], first);
    assert_eq!(queue[0].message.text(), "first");
    assert_eq!(queue[0].run_id, "run-q1");
    assert_eq!(queue[1], second);

    assert_eq!(
        store.queued_threads().await.unwrap(),
        [
            QueuedThread {
                agent_id: "assistant".into(),
                thread_id: "t1".into(),
                resource_id: "alice".into()
            },
            QueuedThread {
                agent_id: "assistant".into(),
                thread_id: "t2".into(),
                resource_id: "alice".into()
            },
        ]
    );
    assert!(store.remove_queued_message("q1").await.unwrap());
    assert!(!store.remove_queued_message("q1").await.unwrap());
    let ids: Vec<String> = store
        .queued_messages("t1", "alice")
        .await
        .unwrap()
        .into_iter()
        .map(|q| q.id)
        .collect();
    assert_eq!(ids, ["q3"]);

    // A taken id is refused, and changes nothing.
    let err = store
        .enqueue_message(queued("q3", "t1", "alice", "again"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, StorageError::InvalidArgument { .. }),
        "{err:?}"
    );
    assert_eq!(store.queued_messages("t1", "alice").await.unwrap().len(), 1);
}

/// Another resource can neither queue on, read nor cancel a thread's queue; a missing thread
/// has none; cancelling takes the named messages or all of them; deleting the thread drops its
/// queue.
pub async fn queue_ownership_cancel_and_delete(store: Arc<dyn Storage>) {
    thread(&store, "t1", "alice").await;
    for (id, text) in [("a", "one"), ("b", "two"), ("c", "three")] {
        store
            .enqueue_message(queued(id, "t1", "alice", text))
            .await
            .unwrap();
    }
    let foreign = store
        .enqueue_message(queued("x", "t1", "mallory", "mine now"))
        .await
        .unwrap_err();
    assert!(
        matches!(foreign, StorageError::ThreadOwnedByOtherResource { .. }),
        "{foreign:?}"
    );
    for err in [
        store.queued_messages("t1", "mallory").await.unwrap_err(),
        store
            .cancel_queued_messages("t1", "mallory", None)
            .await
            .unwrap_err(),
    ] {
        assert!(
            matches!(err, StorageError::ThreadOwnedByOtherResource { .. }),
            "{err:?}"
        );
    }
    let missing = store
        .enqueue_message(queued("y", "nope", "alice", "x"))
        .await
        .unwrap_err();
    assert!(
        matches!(missing, StorageError::ThreadNotFound { .. }),
        "{missing:?}"
    );
    assert_eq!(store.queued_messages("t1", "alice").await.unwrap().len(), 3);

    let cancelled = store
        .cancel_queued_messages("t1", "alice", Some(vec!["b".into(), "zzz".into()]))
        .await
        .unwrap();
    let ids: Vec<&str> = cancelled.iter().map(|q| q.id.as_str()).collect();
    assert_eq!(ids, ["b"]);
    let left: Vec<String> = store
        .queued_messages("t1", "alice")
        .await
        .unwrap()
        .into_iter()
        .map(|q| q.id)
        .collect();
    assert_eq!(left, ["a", "c"]);

    assert!(store.delete_thread("t1").await.unwrap());
    assert!(store.queued_threads().await.unwrap().is_empty());
    thread(&store, "t1", "alice").await;
    assert!(
        store
            .queued_messages("t1", "alice")
            .await
            .unwrap()
            .is_empty()
    );
    let all = store
        .cancel_queued_messages("t1", "alice", None)
        .await
        .unwrap();
    assert!(all.is_empty());
}
