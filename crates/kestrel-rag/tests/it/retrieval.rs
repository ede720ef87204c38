//! Embedding in batches, ingesting chunks, the vector query tool (alone and in an agent) and
//! reranking.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use kestrel_core::agent::Agent;
use kestrel_core::context::RequestContext;
use kestrel_core::embedding::{EmbedError, Embedder, HashEmbedder, ScriptedEmbedder};
use kestrel_core::event::EventKind;
use kestrel_core::model::{ModelError, ResponseFormat, ScriptedModel, ScriptedResponse};
use kestrel_core::tool::{Tool, ToolContext};
use kestrel_rag::ingest::{self, RagError};
use kestrel_rag::vector::SharedVectorStore;
use kestrel_rag::{
    ChunkOptions, CreateIndex, Document, EmbedOptions, InMemoryVectorStore, QueryResult,
    RelevanceScorer, RerankWeights, Reranker, VectorQueryTool, embed_many,
};
use serde_json::json;

/// Counts calls and the most in flight at once; fails the first `failures` calls.
struct Probe {
    inner: HashEmbedder,
    calls: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    failures: AtomicUsize,
    retryable: bool,
}

impl Probe {
    fn new(failures: usize, retryable: bool) -> Probe {
        Probe {
            inner: HashEmbedder::new(8),
            calls: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            failures: AtomicUsize::new(failures),
            retryable,
        }
    }
}

#[async_trait]
impl Embedder for Probe {
    fn provider(&self) -> &str {
        "probe"
    }
    fn model_id(&self) -> &str {
        "probe"
    }
    fn dimension(&self) -> usize {
        8
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(20)).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        if self
            .failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            let error = if self.retryable {
                ModelError::RateLimited {
                    provider: "probe".into(),
                    attempts: 1,
                    retry_after: None,
                    message: "slow down".into(),
                }
            } else {
                ModelError::Auth {
                    provider: "probe".into(),
                    status: 401,
                    message: "bad key".into(),
                }
            };
            return Err(EmbedError::Model(error));
        }
        self.inner.embed(texts).await
    }
}

fn texts(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("text number {i}")).collect()
}

#[tokio::test]
async fn embed_many_batches_in_order_within_the_concurrency_bound() {
    let probe = Probe::new(0, true);
    let options = EmbedOptions::default().batch_size(3).max_concurrency(2);
    let vectors = embed_many(&probe, &texts(10), &options).await.unwrap();
    assert_eq!(probe.calls.load(Ordering::SeqCst), 4);
    assert!(probe.max_in_flight.load(Ordering::SeqCst) <= 2);
    assert_eq!(probe.max_in_flight.load(Ordering::SeqCst), 2);
    let hash = HashEmbedder::new(8);
    for (i, vector) in vectors.iter().enumerate() {
        assert_eq!(
            vector,
            &hash.vector(&format!("text number {i}")),
            "vector {i} out of order"
        );
    }
    assert!(embed_many(&probe, &[], &options).await.unwrap().is_empty());
    assert_eq!(
        probe.calls.load(Ordering::SeqCst),
        4,
        "an empty list makes no call"
    );
}

#[tokio::test]
async fn embed_many_retries_what_may_succeed_and_only_that() {
    let options = EmbedOptions::default()
        .batch_size(100)
        .max_retries(2)
        .retry_delay(Duration::from_millis(1));
    let flaky = Probe::new(2, true);
    assert_eq!(
        embed_many(&flaky, &texts(3), &options).await.unwrap().len(),
        3
    );
    assert_eq!(flaky.calls.load(Ordering::SeqCst), 3);
    let down = Probe::new(5, true);
    assert!(embed_many(&down, &texts(3), &options).await.is_err());
    assert_eq!(
        down.calls.load(Ordering::SeqCst),
        3,
        "one call and two retries"
    );
    let refused = Probe::new(1, false);
    assert!(embed_many(&refused, &texts(3), &options).await.is_err());
    assert_eq!(
        refused.calls.load(Ordering::SeqCst),
        1,
        "no retry of an auth error"
    );
}

const GUIDE: &str = "# Memory\n\nKestrel remembers conversations in threads, per resource.\n\n\
# Tools\n\nAgents call tools with JSON arguments checked against a schema.\n\n\
# Workflows\n\nWorkflows run steps in order, in parallel or in loops, and can suspend.";

async fn filled_store() -> (SharedVectorStore, Arc<HashEmbedder>) {
    let store: SharedVectorStore = Arc::new(InMemoryVectorStore::new());
    let embedder = Arc::new(HashEmbedder::new(256));
    let chunks = Document::from_markdown(GUIDE)
        .with("source", "guide.md")
        .chunk(&ChunkOptions::markdown().max_size(90).overlap(0))
        .unwrap();
    let ids = ingest::upsert_chunks(
        store.as_ref(),
        "docs",
        embedder.as_ref(),
        &chunks,
        &EmbedOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(ids.len(), chunks.len());
    (store, embedder)
}

#[tokio::test]
async fn ingest_creates_the_index_and_checks_its_dimension() {
    let (store, _) = filled_store().await;
    let stats = store.describe_index("docs").await.unwrap();
    assert_eq!(stats.dimension, 256);
    assert!(stats.count >= 3);
    // Another embedder's vectors do not fit: a typed error naming both sizes.
    let other = ScriptedEmbedder::new(8);
    let err = ingest::ensure_index(store.as_ref(), "docs", &other)
        .await
        .unwrap_err();
    match err {
        RagError::DimensionMismatch {
            index_dimension: 256,
            embedder_dimension: 8,
            ..
        } => {}
        other => panic!("expected a dimension mismatch, got {other}"),
    }
    assert!(err_text(ingest::check_index(store.as_ref(), "docs", &other).await).contains("256"));
}

fn err_text<T>(result: Result<T, RagError>) -> String {
    match result {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

fn ctx() -> ToolContext {
    ToolContext::standalone("vector-query")
}

#[tokio::test]
async fn the_query_tool_answers_with_mastras_shape() {
    let (store, embedder) = filled_store().await;
    let tool = VectorQueryTool::builder("docs-store", store, "docs", embedder).build();
    assert_eq!(tool.id(), "VectorQuery docs-store docs Tool");
    assert_eq!(tool.input_schema()["required"], json!(["queryText"]));
    assert!(tool.input_schema()["properties"].get("filter").is_none());
    let out = tool
        .execute(
            json!({"queryText": "agents call tools with JSON arguments", "topK": 2}),
            ctx(),
        )
        .await
        .unwrap();
    let context = out["relevantContext"].as_array().unwrap();
    let sources = out["sources"].as_array().unwrap();
    assert_eq!(context.len(), 2);
    assert_eq!(sources.len(), 2);
    assert!(
        context[0]["text"].as_str().unwrap().contains("call tools"),
        "{out}"
    );
    assert_eq!(context[0]["source"], "guide.md");
    let first = &sources[0];
    for key in ["id", "metadata", "vector", "score", "document"] {
        assert!(first.get(key).is_some(), "source without {key}: {first}");
    }
    assert_eq!(first["document"], context[0]["text"]);
    assert_eq!(first["vector"], json!([]));
    // topK as text (Mastra coerces it), and the tool's bound on it.
    let out = tool
        .execute(json!({"queryText": "workflows", "topK": "1"}), ctx())
        .await
        .unwrap();
    assert_eq!(out["sources"].as_array().unwrap().len(), 1);
    assert!(
        tool.execute(json!({"queryText": "  "}), ctx())
            .await
            .is_err()
    );
}

#[tokio::test]
async fn the_query_tool_filters_and_takes_overrides_from_the_request_context() {
    let (store, embedder) = filled_store().await;
    store
        .create_index(CreateIndex::new("other", 256))
        .await
        .unwrap();
    let tool = VectorQueryTool::builder("docs-store", store, "docs", embedder)
        .enable_filter(true)
        .max_top_k(3)
        .build();
    assert_eq!(
        tool.input_schema()["properties"]["filter"]["type"],
        "string"
    );
    let out = tool
        .execute(
            json!({"queryText": "memory", "topK": 50, "filter": "{\"source\": \"guide.md\"}"}),
            ctx(),
        )
        .await
        .unwrap();
    assert_eq!(
        out["sources"].as_array().unwrap().len(),
        3,
        "capped by max_top_k"
    );
    let out = tool
        .execute(
            json!({"queryText": "memory", "filter": "{\"source\": \"elsewhere\"}"}),
            ctx(),
        )
        .await
        .unwrap();
    assert!(out["sources"].as_array().unwrap().is_empty());
    let err = tool
        .execute(
            json!({"queryText": "memory", "filter": "{\"$gt\": 1"}),
            ctx(),
        )
        .await
        .unwrap_err();
    assert!(
        err.message().contains("invalid filter"),
        "{}",
        err.message()
    );
    // Per-call overrides.
    let request = RequestContext::new();
    request.set("topK", 1);
    request.set("includeVectors", true);
    let out = tool
        .execute(
            json!({"queryText": "memory"}),
            ctx().with_request_context(request),
        )
        .await
        .unwrap();
    let sources = out["sources"].as_array().unwrap();
    assert_eq!(sources.len(), 1);
    assert_eq!(sources[0]["vector"].as_array().unwrap().len(), 256);
    let request = RequestContext::new();
    request.set("indexName", "other");
    let out = tool
        .execute(
            json!({"queryText": "memory"}),
            ctx().with_request_context(request),
        )
        .await
        .unwrap();
    assert!(
        out["sources"].as_array().unwrap().is_empty(),
        "the other index is empty"
    );
    let request = RequestContext::new();
    request.set("indexName", "missing");
    let err = tool
        .execute(
            json!({"queryText": "memory"}),
            ctx().with_request_context(request),
        )
        .await
        .unwrap_err();
    assert!(
        err.message().contains("does not exist"),
        "{}",
        err.message()
    );
    let request = RequestContext::new();
    request.set("filter", json!({"source": "elsewhere"}));
    request.set("includeSources", false);
    let out = tool
        .execute(
            json!({"queryText": "memory"}),
            ctx().with_request_context(request),
        )
        .await
        .unwrap();
    assert!(out["relevantContext"].as_array().unwrap().is_empty());
    let request = RequestContext::new();
    request.set("vectorStoreName", "nope");
    let err = tool
        .execute(
            json!({"queryText": "memory"}),
            ctx().with_request_context(request),
        )
        .await
        .unwrap_err();
    assert!(
        err.message().contains("no vector store named"),
        "{}",
        err.message()
    );
}

#[tokio::test]
async fn an_agent_answers_from_the_index_with_sources() {
    let (store, embedder) = filled_store().await;
    let tool = VectorQueryTool::builder("docs-store", store, "docs", embedder)
        .id("search_docs")
        .build();
    let model = ScriptedModel::new()
        .respond(ScriptedResponse::tool_call(
            "call-1",
            "search_docs",
            json!({"queryText": "how do workflows run steps?", "topK": 1}),
        ))
        .respond(ScriptedResponse::text(
            "Workflows run steps in order, in parallel or in loops.",
        ));
    let agent = Agent::builder("docs")
        .instructions("Answer from the documentation.")
        .model(Arc::new(model))
        .tool(tool)
        .build()
        .unwrap();
    let mut stream = agent.stream("How do workflows run steps?").into_stream();
    let mut sources = None;
    while let Some(event) = stream.next().await {
        if let EventKind::ToolResult(result) = &event.kind {
            sources = Some(result.result["sources"].clone());
        }
    }
    let result = stream.result().await.unwrap();
    assert!(result.text.contains("Workflows run steps"));
    let sources = sources.expect("a tool result");
    assert_eq!(sources.as_array().unwrap().len(), 1);
    assert!(
        sources[0]["document"]
            .as_str()
            .unwrap()
            .contains("Workflows run steps"),
        "{sources}"
    );
}

/// Scores by whether the text mentions a word.
struct Mentions(&'static str);

#[async_trait]
impl RelevanceScorer for Mentions {
    async fn relevance(
        &self,
        _query: &str,
        text: &str,
    ) -> Result<f32, kestrel_rag::rerank::RerankError> {
        Ok(if text.contains(self.0) { 1.0 } else { 0.0 })
    }
}

fn result(id: &str, score: f32, text: &str) -> QueryResult {
    QueryResult {
        id: id.into(),
        score,
        metadata: json!({"text": text}).as_object().unwrap().clone(),
        vector: None,
        document: None,
    }
}

#[tokio::test]
async fn reranking_weighs_relevance_score_and_position() {
    let results = vec![
        result("a", 0.9, "about cats"),
        result("b", 0.8, "about kestrels"),
        result("c", 0.7, "about dogs"),
    ];
    let reranked = Reranker::new(Arc::new(Mentions("kestrels")))
        .rerank("kestrels?", results.clone(), 2)
        .await
        .unwrap();
    let ids: Vec<&str> = reranked.iter().map(|r| r.result.id.as_str()).collect();
    assert_eq!(ids, ["b", "a"]);
    // 0.4 · 1 + 0.4 · 0.8 + 0.2 · (1 - 1/3)
    assert!((reranked[0].score - (0.4 + 0.32 + 0.2 * (2.0 / 3.0))).abs() < 1e-6);
    let err = Reranker::new(Arc::new(Mentions("x")))
        .weights(RerankWeights {
            semantic: 0.5,
            vector: 0.5,
            position: 0.5,
        })
        .rerank("q", results, 3)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("add up to 1"));
}

#[tokio::test]
async fn the_model_scorer_asks_for_structured_output() {
    let model = Arc::new(
        ScriptedModel::new()
            .respond(ScriptedResponse::text(r#"{"score": 0.25}"#))
            .respond(ScriptedResponse::text(r#"{"score": 0.75}"#))
            .respond(ScriptedResponse::text("very relevant")),
    );
    let reranker = Reranker::with_model(model.clone()).max_concurrency(1);
    let reranked = reranker
        .rerank(
            "q",
            vec![result("a", 0.5, "one"), result("b", 0.5, "two")],
            2,
        )
        .await
        .unwrap();
    assert_eq!(reranked[0].result.id, "b");
    assert_eq!(reranked[0].semantic, 0.75);
    let requests = model.requests();
    assert!(matches!(
        requests[0].response_format,
        Some(ResponseFormat::Json { .. })
    ));
    let prompt = format!("{:?}", requests[0].messages);
    assert!(prompt.contains("one"), "{prompt}");
    let err = reranker
        .rerank("q", vec![result("a", 0.5, "one")], 1)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not JSON"), "{err}");
}

#[tokio::test]
async fn the_query_tool_is_a_workflow_step() {
    use kestrel_core::workflow::{ToolStep, Workflow, WorkflowStatus};
    let (store, embedder) = filled_store().await;
    let tool = VectorQueryTool::builder("docs-store", store, "docs", embedder)
        .id("search")
        .build();
    let workflow = Workflow::builder("lookup")
        .map(|input, _ctx| async move { Ok(json!({"queryText": input["question"], "topK": 1})) })
        .then(ToolStep::new(tool))
        .commit()
        .unwrap();
    let result = workflow
        .create_run()
        .start(json!({"question": "threads per resource"}))
        .await
        .unwrap();
    assert_eq!(result.status, WorkflowStatus::Success, "{result:?}");
    let output = result.result.unwrap();
    assert!(
        output["sources"][0]["document"]
            .as_str()
            .unwrap()
            .contains("threads"),
        "{output}"
    );
}

#[tokio::test]
async fn ingesting_a_folder_is_resumable_and_replaces_changed_files() {
    use kestrel_rag::ingest::{FileOutcome, IngestOptions, ingest_paths};
    use kestrel_rag::vector::sqlite::SqliteVectorStore;
    use kestrel_rag::{Filter, VectorQuery, VectorStore};

    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(docs.join("sub")).unwrap();
    std::fs::create_dir_all(docs.join(".hidden")).unwrap();
    std::fs::create_dir_all(docs.join("node_modules")).unwrap();
    std::fs::write(docs.join("a.md"), GUIDE).unwrap();
    std::fs::write(docs.join("b.txt"), "Kestrels hover over fields.").unwrap();
    std::fs::write(docs.join("sub/c.md"), "# Deep\n\nA page in a folder.").unwrap();
    std::fs::write(docs.join(".hidden/x.md"), "hidden").unwrap();
    std::fs::write(docs.join("node_modules/y.md"), "vendored").unwrap();
    std::fs::write(docs.join("logo.png"), [0u8, 159, 146, 150]).unwrap();
    let binary = dir.path().join("notes.txt");
    std::fs::write(&binary, [0xffu8, 0xfe, 0x00]).unwrap();
    let db = dir.path().join("vectors.db");
    let embedder = HashEmbedder::new(64);
    let options = IngestOptions::default();

    let store = SqliteVectorStore::open(&db).await.unwrap();
    let mut seen = Vec::new();
    let report = ingest_paths(
        &store,
        "docs",
        &embedder,
        &[docs.clone(), binary.clone()],
        &options,
        |p| seen.push((p.done, p.total, p.source.to_owned())),
    )
    .await
    .unwrap();
    let sources: Vec<&str> = report.files.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(
        sources,
        ["docs/a.md", "docs/b.txt", "docs/sub/c.md", "notes.txt"]
    );
    assert_eq!((report.ingested(), report.failed()), (3, 1));
    assert!(matches!(&report.files[3].1, FileOutcome::Failed(why) if why.contains("UTF-8")));
    assert_eq!(seen.last().unwrap(), &(4, 4, "notes.txt".to_owned()));
    let count = store.describe_index("docs").await.unwrap().count;
    assert_eq!(count as usize, report.chunks());
    let b = store
        .query(VectorQuery::by_filter(
            "docs",
            Filter::parse(json!({"source": "docs/b.txt"})).unwrap(),
        ))
        .await
        .unwrap();
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].id, "docs/b.txt#0");
    assert_eq!(b[0].metadata["text"], "Kestrels hover over fields.");
    assert_eq!(b[0].metadata["chunk"], 0);
    assert_eq!(b[0].metadata["sourceHash"].as_str().unwrap().len(), 64);
    drop(store);

    // Again, after a restart: nothing changed, nothing embedded.
    let store = SqliteVectorStore::open(&db).await.unwrap();
    let probe = Probe::new(0, true);
    let report = ingest_paths(
        &store,
        "docs",
        &probe,
        std::slice::from_ref(&docs),
        &options,
        |_| {},
    )
    .await
    .err();
    // The probe makes 8-dimension vectors: refused before anything is read.
    assert!(matches!(report, Some(RagError::DimensionMismatch { .. })));
    let report = ingest_paths(
        &store,
        "docs",
        &embedder,
        std::slice::from_ref(&docs),
        &options,
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!((report.ingested(), report.unchanged()), (0, 3));

    // b.txt grows to two chunks, a.md is emptied: their old chunks are replaced.
    let long = "Kestrels hover over fields. ".repeat(60);
    std::fs::write(docs.join("b.txt"), &long).unwrap();
    std::fs::write(docs.join("a.md"), "").unwrap();
    let report = ingest_paths(
        &store,
        "docs",
        &embedder,
        std::slice::from_ref(&docs),
        &options,
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!((report.ingested(), report.unchanged()), (2, 1));
    let by_source = |source: &'static str| {
        let store = &store;
        async move {
            store
                .query(
                    VectorQuery::by_filter(
                        "docs",
                        Filter::parse(json!({"source": source})).unwrap(),
                    )
                    .top_k(100),
                )
                .await
                .unwrap()
        }
    };
    let b = by_source("docs/b.txt").await;
    assert!(b.len() >= 2, "{b:?}");
    assert!(
        b.iter()
            .all(|r| r.metadata["text"].as_str().unwrap().contains("Kestrels"))
    );
    assert!(by_source("docs/a.md").await.is_empty());
    assert_eq!(by_source("docs/sub/c.md").await.len(), 1);
}
