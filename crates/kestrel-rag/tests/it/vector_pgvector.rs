//! The vector store conformance suite on the pgvector backend.

kestrel_rag::vector_store_tests!(kestrel_rag::testing::pgvector);

/// What only pgvector has: ANN indexes, their parameters, Mastra's layout.
mod pgvector_only {
    use kestrel_rag::testing::{drop_schema, pgvector_url, pseudo_random_vector};
    use kestrel_rag::vector::pgvector::{PgVectorOptions, PgVectorStore};
    use kestrel_rag::vector::{IndexConfig, Metadata};
    use kestrel_rag::{CreateIndex, Filter, Metric, Upsert, VectorError, VectorQuery, VectorStore};
    use serde_json::json;

    struct Db {
        store: PgVectorStore,
        url: String,
        schema: String,
    }

    impl Db {
        async fn teardown(self) {
            drop_schema(&self.url, &self.schema).await;
        }
    }

    async fn db() -> Option<Db> {
        let Some(url) = pgvector_url() else {
            eprintln!("skipped: set KESTREL_TEST_PGVECTOR_URL to a PostgreSQL with pgvector");
            return None;
        };
        let schema = format!("kestrel_vec_{}", uuid::Uuid::new_v4().simple());
        let store = PgVectorStore::connect(&url, PgVectorOptions::default().schema(schema.clone()))
            .await
            .unwrap();
        Some(Db { store, url, schema })
    }

    fn bucket(i: usize) -> Metadata {
        json!({"bucket": i % 20}).as_object().unwrap().clone()
    }

    async fn fill(db: &Db, index: &str, n: usize, dimension: usize) -> Vec<Vec<f32>> {
        let store = &db.store;
        let vectors: Vec<Vec<f32>> = (0..n)
            .map(|i| pseudo_random_vector(i as u64 + 7, dimension))
            .collect();
        store
            .upsert(Upsert {
                ids: (0..n).map(|i| format!("v{i:05}")).collect(),
                metadata: (0..n).map(bucket).collect(),
                vectors: vectors.clone(),
                ..Upsert::new(index)
            })
            .await
            .unwrap();
        sqlx::query(&format!("ANALYZE \"{}\".\"{index}\"", db.schema))
            .execute(store.pool())
            .await
            .unwrap();
        vectors
    }

    /// The exact top k among vectors whose bucket is `bucket` (all when `None`).
    fn exact(vectors: &[Vec<f32>], query: &[f32], k: usize, only: Option<usize>) -> Vec<String> {
        let norm = kestrel_rag::vector::norm(query);
        let mut scored: Vec<(f32, String)> = vectors
            .iter()
            .enumerate()
            .filter(|(i, _)| only.is_none_or(|b| i % 20 == b))
            .map(|(i, v)| (Metric::Cosine.score(query, norm, v), format!("v{i:05}")))
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        scored.into_iter().take(k).map(|(_, id)| id).collect()
    }

    fn recall(got: &[String], want: &[String]) -> f64 {
        let hits = got.iter().filter(|id| want.contains(id)).count();
        hits as f64 / want.len() as f64
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_hnsw_index_is_used_and_filtered_queries_return_k_rows() {
        let Some(db) = db().await else { return };
        let store = &db.store;
        store
            .create_index(CreateIndex::new("docs", 384))
            .await
            .unwrap();
        let vectors = fill(&db, "docs", 3000, 384).await;
        let query = pseudo_random_vector(99, 384);
        let filter = Filter::parse(json!({"bucket": 7})).unwrap();
        // Mastra's #14421: the index must be used, with and without a filter. (The planner
        // weighs ef_search, m · top_k here, against a scan: at 3000 rows a small top_k keeps
        // the index the cheaper plan, as it is at any size for the usual top_k.)
        for q in [
            VectorQuery::new("docs", query.clone()).top_k(2),
            VectorQuery::new("docs", query.clone())
                .top_k(2)
                .filter(filter.clone()),
        ] {
            let plan = store.explain(&q).await.unwrap();
            assert!(plan.contains("docs_vector_idx"), "{plan}");
        }
        // A filter matching 5% of the rows still gives k rows (iterative scans), all matching,
        // and nearly the exact ones.
        let results = store
            .query(
                VectorQuery::new("docs", query.clone())
                    .top_k(20)
                    .filter(filter),
            )
            .await
            .unwrap();
        assert_eq!(results.len(), 20);
        assert!(results.iter().all(|r| r.metadata["bucket"] == 7));
        let got: Vec<String> = results.iter().map(|r| r.id.clone()).collect();
        let r = recall(&got, &exact(&vectors, &query, 20, Some(7)));
        assert!(r >= 0.9, "filtered HNSW recall {r}");
        let got: Vec<String> = store
            .query(VectorQuery::new("docs", query.clone()).top_k(10))
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect();
        let r = recall(&got, &exact(&vectors, &query, 10, None));
        assert!(r >= 0.9, "HNSW recall {r}");
        db.teardown().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn index_parameters_reach_postgres() {
        let Some(db) = db().await else { return };
        let store = &db.store;
        store
            .create_index(CreateIndex::new("ivf", 16).index_config(IndexConfig::ivfflat(Some(20))))
            .await
            .unwrap();
        store
            .create_index(
                CreateIndex::new("hnsw", 16)
                    .metric(Metric::DotProduct)
                    .index_config(IndexConfig::hnsw(8, 32)),
            )
            .await
            .unwrap();
        store
            .create_index(
                CreateIndex::new("flat", 16)
                    .metric(Metric::Euclidean)
                    .index_config(IndexConfig::flat()),
            )
            .await
            .unwrap();
        let defs: Vec<(String, String)> = sqlx::query_as(
            "SELECT indexname::text, indexdef FROM pg_indexes WHERE schemaname = $1 ORDER BY 1",
        )
        .bind(&db.schema)
        .fetch_all(store.pool())
        .await
        .unwrap();
        let def = |name: &str| {
            defs.iter()
                .find(|(n, _)| n == name)
                .map(|(_, d)| d.clone())
                .unwrap_or_default()
        };
        assert!(
            def("ivf_vector_idx")
                .contains("ivfflat (embedding vector_cosine_ops) WITH (lists='20')"),
            "{defs:?}"
        );
        assert!(
            def("hnsw_vector_idx")
                .contains("hnsw (embedding vector_ip_ops) WITH (m='8', ef_construction='32')"),
            "{defs:?}"
        );
        assert!(def("flat_vector_idx").is_empty(), "{defs:?}");
        // Mastra's unique key, which its upserts rely on.
        assert!(
            def("ivf_namespace_vector_id_idx").contains("UNIQUE INDEX"),
            "{defs:?}"
        );
        // Metrics survive without the index to read them from (the table comment).
        for (name, metric) in [
            ("ivf", Metric::Cosine),
            ("hnsw", Metric::DotProduct),
            ("flat", Metric::Euclidean),
        ] {
            assert_eq!(
                store.describe_index(name).await.unwrap().metric,
                metric,
                "{name}"
            );
        }
        // IVFFlat answers (√20 → 5 probes by default).
        let vectors = fill(&db, "ivf", 500, 16).await;
        let results = store
            .query(VectorQuery::new("ivf", vectors[42].clone()).top_k(3))
            .await
            .unwrap();
        assert_eq!(results[0].id, "v00042");
        // HNSW and IVFFlat take at most 2000 dimensions; flat takes more.
        let err = store
            .create_index(CreateIndex::new("wide", 2001))
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                VectorError::InvalidRequest {
                    field: "indexConfig",
                    ..
                }
            ),
            "{err}"
        );
        store
            .create_index(CreateIndex::new("wide", 2001).index_config(IndexConfig::flat()))
            .await
            .unwrap();
        db.teardown().await;
    }

    /// A table made by Mastra's `PgVector` (its DDL as @mastra/pg 1.27.1 issues it, IVFFlat on
    /// L2 by Mastra's default rule) is an index Kestrel lists, describes and queries.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_index_made_by_mastra_is_usable() {
        let Some(db) = db().await else { return };
        let store = &db.store;
        let table = format!("\"{}\".\"mastra_made\"", db.schema);
        for statement in [
            format!(
                "CREATE TABLE IF NOT EXISTS {table} (id SERIAL PRIMARY KEY, vector_id TEXT NOT NULL, \
                 embedding vector(3), metadata JSONB DEFAULT '{{}}'::jsonb, \
                 namespace VARCHAR(255) NOT NULL DEFAULT 'default')"
            ),
            format!(
                "CREATE UNIQUE INDEX IF NOT EXISTS \"mastra_made_namespace_vector_id_idx\" ON {table} (namespace, vector_id)"
            ),
            format!(
                "CREATE INDEX IF NOT EXISTS \"mastra_made_vector_idx\" ON {table} USING ivfflat (embedding vector_l2_ops) WITH (lists = 100)"
            ),
            format!(
                "INSERT INTO {table} (vector_id, embedding, metadata, namespace) VALUES \
                 ('m1', '[1,0,0]'::vector, '{{\"text\":\"one\"}}'::jsonb, 'default'), \
                 ('m2', '[0,1,0]'::vector, '{{\"text\":\"two\"}}'::jsonb, 'default')"
            ),
        ] {
            sqlx::query(&statement).execute(store.pool()).await.unwrap();
        }
        assert_eq!(store.list_indexes().await.unwrap(), ["mastra_made"]);
        let stats = store.describe_index("mastra_made").await.unwrap();
        assert_eq!(
            (stats.dimension, stats.count, stats.metric),
            (3, 2, Metric::Euclidean)
        );
        let results = store
            .query(
                VectorQuery::new("mastra_made", vec![0.9, 0.1, 0.0])
                    .top_k(1)
                    .probes_for_test(),
            )
            .await
            .unwrap();
        assert_eq!(results[0].id, "m1");
        assert_eq!(results[0].metadata["text"], "one");
        // Kestrel's upsert lands in Mastra's rows (the same unique key).
        store
            .upsert(Upsert::new("mastra_made").vector("m2", vec![0.0, 0.0, 1.0], Metadata::new()))
            .await
            .unwrap();
        assert_eq!(store.describe_index("mastra_made").await.unwrap().count, 2);
        db.teardown().await;
    }

    trait ProbesForTest {
        fn probes_for_test(self) -> Self;
    }

    impl ProbesForTest for VectorQuery {
        /// All 100 lists: exact on two rows.
        fn probes_for_test(mut self) -> Self {
            self.probes = Some(100);
            self
        }
    }
}
