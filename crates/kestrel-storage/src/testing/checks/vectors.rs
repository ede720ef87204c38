//! The checks of vector indexes: their lifecycle, dimensions, exact queries, filters and deletes.

use std::sync::Arc;

use serde_json::json;

use super::helpers::{meta, pseudo_vector};
use crate::codec;
use crate::error::StorageError;
use crate::storage::Storage;
use crate::types::{Metadata, VectorFilter, VectorMatch, VectorQuery, VectorRecord};

/// Index creation is idempotent for one dimension and refuses another.
pub async fn vectors_index_lifecycle(store: Arc<dyn Storage>) {
    assert_eq!(store.index_dimension("messages").await.unwrap(), None);
    store.create_index("messages", 384).await.unwrap();
    store.create_index("messages", 384).await.unwrap();
    assert_eq!(store.index_dimension("messages").await.unwrap(), Some(384));
    let other = store.create_index("messages", 768).await;
    assert!(matches!(
        other,
        Err(StorageError::IndexExists { ref index, existing: 384, requested: 768 }) if index == "messages"
    ));
    let zero = store.create_index("empty", 0).await;
    assert!(matches!(
        zero,
        Err(StorageError::InvalidArgument {
            argument: "dimension",
            ..
        })
    ));
    let record = VectorRecord {
        id: "v".into(),
        vector: vec![1.0],
        metadata: Metadata::new(),
    };
    let missing = store.upsert_vectors("nope", vec![record]).await;
    assert!(matches!(missing, Err(StorageError::IndexNotFound { index }) if index == "nope"));
    let query = VectorQuery {
        vector: vec![1.0],
        top_k: 1,
        filter: VectorFilter::default(),
    };
    let missing = store.query_vectors("nope", query).await;
    assert!(matches!(missing, Err(StorageError::IndexNotFound { .. })));
}

/// Vectors of the wrong length are refused with expected and got, and nothing is written.
pub async fn vectors_dimension_mismatch(store: Arc<dyn Storage>) {
    store.create_index("idx", 3).await.unwrap();
    let good = VectorRecord {
        id: "good".into(),
        vector: vec![1.0, 0.0, 0.0],
        metadata: Metadata::new(),
    };
    let bad = VectorRecord {
        id: "bad".into(),
        vector: vec![1.0, 0.0],
        metadata: Metadata::new(),
    };
    let result = store.upsert_vectors("idx", vec![good.clone(), bad]).await;
    assert!(matches!(
        result,
        Err(StorageError::DimensionMismatch { ref index, expected: 3, got: 2 }) if index == "idx"
    ));
    let nan = VectorRecord {
        id: "nan".into(),
        vector: vec![f32::NAN, 0.0, 0.0],
        metadata: Metadata::new(),
    };
    let result = store.upsert_vectors("idx", vec![nan]).await;
    assert!(matches!(result, Err(StorageError::InvalidArgument { .. })));
    let query = |vector: Vec<f32>| VectorQuery {
        vector,
        top_k: 5,
        filter: VectorFilter::default(),
    };
    assert!(
        store
            .query_vectors("idx", query(vec![1.0, 0.0, 0.0]))
            .await
            .unwrap()
            .is_empty()
    );
    let wrong = store.query_vectors("idx", query(vec![1.0; 4])).await;
    assert!(matches!(
        wrong,
        Err(StorageError::DimensionMismatch {
            expected: 3,
            got: 4,
            ..
        })
    ));
    store.upsert_vectors("idx", vec![good]).await.unwrap();
    assert_eq!(
        store
            .query_vectors("idx", query(vec![1.0, 0.0, 0.0]))
            .await
            .unwrap()
            .len(),
        1
    );
}

/// The fixed vector data set of [`vectors_query_exact`]: 40 pseudo-random vectors, plus exact
/// duplicates (ties) and a zero vector.
pub fn vector_dataset() -> Vec<VectorRecord> {
    let mut records: Vec<VectorRecord> = (0..40u64)
        .map(|i| VectorRecord {
            id: format!("v{i:02}"),
            vector: pseudo_vector(i, 8),
            metadata: meta(json!({
                "thread_id": format!("t{}", i % 3),
                "resource_id": if i % 2 == 0 { "alice" } else { "bob" },
                "message_id": format!("m{i}"),
            })),
        })
        .collect();
    for (id, twin) in [("dup-b", 7usize), ("dup-a", 7), ("dup-c", 12)] {
        let mut copy = records[twin].clone();
        copy.id = id.into();
        records.push(copy);
    }
    records.push(VectorRecord {
        id: "zero".into(),
        vector: vec![0.0; 8],
        metadata: meta(json!({"thread_id": "t0"})),
    });
    records
}

/// What an exact cosine scan must return for `vector` over `records`.
pub fn expected_matches(records: &[VectorRecord], vector: &[f32], top_k: u32) -> Vec<VectorMatch> {
    let mut top = codec::TopK::new(top_k);
    for r in records {
        top.push(VectorMatch {
            id: r.id.clone(),
            score: codec::cosine(vector, &r.vector),
            metadata: r.metadata.clone(),
        });
    }
    top.into_vec()
}

/// Exact cosine top-k over a fixed data set, ties ordered by id; equal on every backend.
pub async fn vectors_query_exact(store: Arc<dyn Storage>) {
    store.create_index("idx", 8).await.unwrap();
    let records = vector_dataset();
    store.upsert_vectors("idx", records.clone()).await.unwrap();
    for seed in [7u64, 12, 100, 101] {
        let vector = pseudo_vector(seed, 8);
        let query = VectorQuery {
            vector: vector.clone(),
            top_k: 6,
            filter: VectorFilter::default(),
        };
        let got = store.query_vectors("idx", query).await.unwrap();
        assert_eq!(got, expected_matches(&records, &vector, 6), "seed {seed}");
    }
    // Seed 7 is v07 itself: its twins tie at the top, ordered by id.
    let query = VectorQuery {
        vector: pseudo_vector(7, 8),
        top_k: 3,
        filter: VectorFilter::default(),
    };
    let got = store.query_vectors("idx", query).await.unwrap();
    let got_ids: Vec<&str> = got.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(got_ids, ["dup-a", "dup-b", "v07"]);
    assert!(got.iter().all(|m| (m.score - 1.0).abs() < 1e-6));
    let none = VectorQuery {
        vector: pseudo_vector(1, 8),
        top_k: 0,
        filter: VectorFilter::default(),
    };
    assert!(store.query_vectors("idx", none).await.unwrap().is_empty());
}

/// Thread and resource filters, upsert replacing by id, deletes.
pub async fn vectors_filters_and_delete(store: Arc<dyn Storage>) {
    store.create_index("idx", 8).await.unwrap();
    let records = vector_dataset();
    store.upsert_vectors("idx", records.clone()).await.unwrap();
    let vector = pseudo_vector(55, 8);
    let filters = [
        (Some("t1"), None),
        (None, Some("alice")),
        (Some("t0"), Some("bob")),
        (Some("t9"), None),
    ];
    for (thread_id, resource_id) in filters {
        let subset: Vec<VectorRecord> = records
            .iter()
            .filter(|r| {
                thread_id
                    .is_none_or(|t| codec::meta_str(&r.metadata, "thread_id").as_deref() == Some(t))
            })
            .filter(|r| {
                resource_id.is_none_or(|x| {
                    codec::meta_str(&r.metadata, "resource_id").as_deref() == Some(x)
                })
            })
            .cloned()
            .collect();
        let query = VectorQuery {
            vector: vector.clone(),
            top_k: 5,
            filter: VectorFilter {
                thread_id: thread_id.map(str::to_owned),
                resource_id: resource_id.map(str::to_owned),
            },
        };
        let got = store.query_vectors("idx", query).await.unwrap();
        assert_eq!(
            got,
            expected_matches(&subset, &vector, 5),
            "{thread_id:?} {resource_id:?}"
        );
    }
    // Upsert replaces: v03 now points exactly at the query.
    let replaced = VectorRecord {
        id: "v03".into(),
        vector: vector.clone(),
        metadata: meta(json!({"thread_id": "t5"})),
    };
    store.upsert_vectors("idx", vec![replaced]).await.unwrap();
    let query = VectorQuery {
        vector: vector.clone(),
        top_k: 1,
        filter: VectorFilter::default(),
    };
    let top = store.query_vectors("idx", query.clone()).await.unwrap();
    assert_eq!(
        (top[0].id.as_str(), &top[0].metadata),
        ("v03", &meta(json!({"thread_id": "t5"})))
    );
    let doomed = ["v03", "dup-a", "missing"].map(String::from);
    assert_eq!(store.delete_vectors("idx", &doomed).await.unwrap(), 2);
    let top = store.query_vectors("idx", query).await.unwrap();
    assert_ne!(top[0].id, "v03");
    let missing = store.delete_vectors("nope", &doomed).await;
    assert!(matches!(missing, Err(StorageError::IndexNotFound { .. })));
}
