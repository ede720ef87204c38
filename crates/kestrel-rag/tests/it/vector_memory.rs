//! The vector store conformance suite on the memory backend.

kestrel_rag::vector_store_tests!(kestrel_rag::testing::memory);

/// A store served over HTTP must not grow without bound at its callers' request.
#[tokio::test]
async fn the_in_memory_store_is_bounded() {
    use kestrel_rag::vector::Metadata;
    use kestrel_rag::vector::memory::Limits;
    use kestrel_rag::{CreateIndex, InMemoryVectorStore, Upsert, VectorError, VectorStore};

    let store = InMemoryVectorStore::with_limits(Limits {
        max_indexes: 2,
        max_components: 8,
    });
    store.create_index(CreateIndex::new("a", 2)).await.unwrap();
    store.create_index(CreateIndex::new("b", 2)).await.unwrap();
    let err = store
        .create_index(CreateIndex::new("c", 2))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            VectorError::InvalidRequest {
                field: "indexName",
                ..
            }
        ),
        "{err}"
    );
    // Re-creating an existing index is still a no-op.
    store.create_index(CreateIndex::new("a", 2)).await.unwrap();
    let four = |prefix: &str| {
        (0..4).fold(Upsert::new(prefix), |u, i| {
            u.vector(format!("{prefix}{i}"), vec![1.0, i as f32], Metadata::new())
        })
    };
    store.upsert(four("a")).await.unwrap();
    let err = store
        .upsert(Upsert::new("b").vector("x", vec![1.0, 0.0], Metadata::new()))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            VectorError::InvalidRequest {
                field: "vectors",
                ..
            }
        ),
        "{err}"
    );
    // Replacing vectors adds nothing; deleting makes room.
    store.upsert(four("a")).await.unwrap();
    store.delete_index("a").await.unwrap();
    store
        .upsert(Upsert::new("b").vector("x", vec![1.0, 0.0], Metadata::new()))
        .await
        .unwrap();
}
