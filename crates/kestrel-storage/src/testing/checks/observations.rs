//! The checks of observations and the observed-seq marker.

use std::sync::Arc;

use super::helpers::{at, thread};
use crate::error::StorageError;
use crate::storage::Storage;
use crate::types::{NewObservation, Scope};

/// Add (in order), list by scope, replace a scope at once, and the observed-seq marker.
pub async fn observations_scopes_and_replace(store: Arc<dyn Storage>) {
    thread(&store, "t1", "alice").await;
    let t1 = Scope::thread("t1", "alice");
    let resource = Scope::resource("alice");
    let first = NewObservation {
        id: Some("o1".into()),
        text: "2025-01-01: Alice plans a trip to Lisbon".into(),
        created_at: Some(at(100)),
        observed_up_to_seq: Some(4),
        source_thread_id: Some("t1".into()),
    };
    let added = store
        .add_observations(&t1, vec![first, NewObservation::new("prefers trains")])
        .await
        .unwrap();
    assert_eq!(added[0].id, "o1");
    assert_eq!(
        (added[0].created_at, added[0].observed_up_to_seq),
        (at(100), Some(4))
    );
    assert_eq!(added[0].scope, t1);
    store
        .add_observations(&t1, vec![NewObservation::new("third")])
        .await
        .unwrap();
    store
        .add_observations(&resource, vec![NewObservation::new("lives in Porto")])
        .await
        .unwrap();
    let listed = store.list_observations(&t1).await.unwrap();
    let texts: Vec<&str> = listed.iter().map(|o| o.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "2025-01-01: Alice plans a trip to Lisbon",
            "prefers trains",
            "third"
        ]
    );
    assert_eq!(listed[..2], added[..]);
    let on_resource = store.list_observations(&resource).await.unwrap();
    assert_eq!(on_resource.len(), 1);
    assert_eq!(on_resource[0].scope, resource);

    let condensed = store
        .replace_observations(&t1, vec![NewObservation::new("condensed")])
        .await
        .unwrap();
    assert_eq!(store.list_observations(&t1).await.unwrap(), condensed);
    assert_eq!(
        store.list_observations(&resource).await.unwrap(),
        on_resource
    );
    store
        .replace_observations(&resource, Vec::new())
        .await
        .unwrap();
    assert!(store.list_observations(&resource).await.unwrap().is_empty());
    assert_eq!(store.list_observations(&t1).await.unwrap().len(), 1);

    assert_eq!(store.get_observed_seq("t1", "alice").await.unwrap(), None);
    store.set_observed_seq("t1", "alice", 7).await.unwrap();
    store.set_observed_seq("t1", "alice", 9).await.unwrap();
    assert_eq!(
        store.get_observed_seq("t1", "alice").await.unwrap(),
        Some(9)
    );
    let missing = store.get_observed_seq("nope", "alice").await;
    assert!(matches!(missing, Err(StorageError::ThreadNotFound { .. })));
    let missing = store
        .add_observations(&Scope::thread("nope", "alice"), Vec::new())
        .await;
    assert!(matches!(missing, Err(StorageError::ThreadNotFound { .. })));
}
