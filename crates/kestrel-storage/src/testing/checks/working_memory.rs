//! The checks of working memory, per thread and per resource.

use std::sync::Arc;

use super::helpers::thread;
use crate::error::StorageError;
use crate::storage::Storage;
use crate::types::Scope;

/// Thread and resource working memory are separate and overwritten on set.
pub async fn working_memory_scopes(store: Arc<dyn Storage>) {
    thread(&store, "t1", "alice").await;
    thread(&store, "t2", "alice").await;
    let t1 = Scope::thread("t1", "alice");
    let resource = Scope::resource("alice");
    assert_eq!(store.get_working_memory(&t1).await.unwrap(), None);
    assert_eq!(store.get_working_memory(&resource).await.unwrap(), None);
    store
        .set_working_memory(&t1, "# Trip\n- city: Lisbon")
        .await
        .unwrap();
    store
        .set_working_memory(&resource, "{\"name\":\"Alice\"}")
        .await
        .unwrap();
    store
        .set_working_memory(&t1, "# Trip\n- city: Porto")
        .await
        .unwrap();
    assert_eq!(
        store.get_working_memory(&t1).await.unwrap().as_deref(),
        Some("# Trip\n- city: Porto")
    );
    assert_eq!(
        store
            .get_working_memory(&resource)
            .await
            .unwrap()
            .as_deref(),
        Some("{\"name\":\"Alice\"}")
    );
    let t2 = Scope::thread("t2", "alice");
    assert_eq!(store.get_working_memory(&t2).await.unwrap(), None);
    let other = Scope::resource("bob");
    assert_eq!(store.get_working_memory(&other).await.unwrap(), None);
    let missing = store
        .set_working_memory(&Scope::thread("nope", "alice"), "x")
        .await;
    assert!(matches!(missing, Err(StorageError::ThreadNotFound { .. })));
}
