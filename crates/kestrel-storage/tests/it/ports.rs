//! Core's ports on every backend: the suites of `kestrel_core::store::testing` (runs and
//! workflow runs), and how the runs table records what the run store saves. PostgreSQL joins
//! when `KESTREL_TEST_POSTGRES_URL` is set.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kestrel_core::memory::MemoryScope;
use kestrel_core::store::IntoStores;
use kestrel_core::store::RunPhase;
use kestrel_core::store::testing::{CHECKS, SEEDED_CHECKS, Seed, run_state};
use kestrel_storage::testing::{self, Fixture};
use kestrel_storage::{NewAgentVersion, NewStoredAgent, NewThread, Storage};

/// A fresh store of each storage backend (PostgreSQL when configured).
async fn fixtures() -> Vec<Fixture> {
    let mut fixtures = vec![
        testing::memory().await.unwrap(),
        testing::sqlite().await.unwrap(),
    ];
    fixtures.extend(testing::postgres().await);
    fixtures
}

/// Threads and versions written through the storage's own API.
struct StorageSeed(Arc<dyn Storage>);

#[async_trait::async_trait]
impl Seed for StorageSeed {
    async fn thread(&self, scope: &MemoryScope) {
        let thread = NewThread::new(&scope.resource_id).id(&scope.thread_id);
        self.0.create_thread(thread).await.unwrap();
    }

    async fn version(&self, agent_id: &str, instructions: &str, publish: bool) -> String {
        let version = NewAgentVersion {
            config: serde_json::json!({"instructions": instructions}),
            ..NewAgentVersion::default()
        };
        if self.0.get_stored_agent(agent_id).await.unwrap().is_none() {
            let new = NewStoredAgent {
                id: agent_id.to_owned(),
                version,
                publish,
                ..NewStoredAgent::default()
            };
            return self.0.create_stored_agent(new).await.unwrap().1.id;
        }
        let added = self.0.add_agent_version(agent_id, version).await.unwrap();
        if publish {
            let id = Some(added.id.as_str());
            self.0.activate_agent_version(agent_id, id).await.unwrap();
        }
        added.id
    }
}

async fn fixture(backend: &str) -> Option<Fixture> {
    match backend {
        "memory" => testing::memory().await,
        "sqlite" => testing::sqlite().await,
        _ => testing::postgres().await,
    }
}

/// The suites of `kestrel_core::store::testing`, each check on a fresh store of each backend.
async fn port_suites_on(backend: &str) {
    for (name, check) in CHECKS {
        let Some(fixture) = fixture(backend).await else {
            return;
        };
        eprintln!("{backend}: {name}");
        check(fixture.store().into_stores()).await;
        fixture.teardown().await;
    }
    for (name, check) in SEEDED_CHECKS {
        let Some(fixture) = fixture(backend).await else {
            return;
        };
        eprintln!("{backend}: {name}");
        let seed = Arc::new(StorageSeed(fixture.store()));
        check(fixture.store().into_stores(), seed).await;
        fixture.teardown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_memory_backend_passes_the_port_suites() {
    port_suites_on("memory").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_passes_the_port_suites() {
    port_suites_on("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_passes_the_port_suites() {
    port_suites_on("postgres").await;
}

/// Issue 15, bug 3: a finished run is stored as completed, failed or aborted, as it ended, and
/// a delegated run names its parent, so the runs table's filters find them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_runs_are_stored_as_they_ended_and_delegations_name_their_parent() {
    use kestrel_core::agent::{DelegatedBy, RunStatus as Progress};
    use kestrel_core::model::FinishReason;
    use kestrel_storage::RunFilter;

    for fixture in fixtures().await {
        let storage = fixture.store();
        let backend = storage.backend().to_owned();
        let runs = storage.clone().into_stores().runs;
        for (run_id, reason) in [
            ("run-stop", FinishReason::Stop),
            ("run-error", FinishReason::Error),
            ("run-abort", FinishReason::Abort),
        ] {
            let mut run = run_state(run_id, "mailer", None);
            run.status = Progress::Finished {
                reason,
                object: None,
            };
            let ended = RunPhase::ended(&run).unwrap();
            runs.save(&run, ended, None).await.unwrap();
        }
        let mut child = run_state("run-child", "writer", None);
        child.delegated_by = Some(DelegatedBy {
            agent_id: "mailer".into(),
            run_id: "run-stop".into(),
            tool_call_id: "call-1".into(),
        });
        runs.save(&child, RunPhase::Running, None).await.unwrap();

        let ids = |statuses: Vec<RunPhase>, parent: Option<&str>| {
            let storage = storage.clone();
            let filter = RunFilter {
                statuses,
                parent_run_id: parent.map(str::to_owned),
                ..RunFilter::default()
            };
            async move {
                let mut ids: Vec<String> = storage
                    .list_runs(filter)
                    .await
                    .unwrap()
                    .items
                    .into_iter()
                    .map(|r| r.run_id)
                    .collect();
                ids.sort();
                ids
            }
        };
        assert_eq!(
            ids(vec![RunPhase::Completed], None).await,
            ["run-stop"],
            "{backend}"
        );
        assert_eq!(
            ids(vec![RunPhase::Failed], None).await,
            ["run-error"],
            "{backend}"
        );
        assert_eq!(
            ids(vec![RunPhase::Aborted], None).await,
            ["run-abort"],
            "{backend}"
        );
        assert_eq!(
            ids(vec![], Some("run-stop")).await,
            ["run-child"],
            "{backend}"
        );
        // Read back, each is the run as it ended.
        let failed = runs.load("run-error").await.unwrap().unwrap();
        assert_eq!(failed.phase, RunPhase::Failed, "{backend}");
        let aborted = runs.load("run-abort").await.unwrap().unwrap();
        assert_eq!(aborted.phase, RunPhase::Aborted, "{backend}");
        fixture.teardown().await;
    }
}

/// An instance given a storage keeps its traces there: the stores' span store is the storage,
/// so a tracer's spans are read back through it (and, durable backends, after a restart).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stores_keep_traces_in_the_storage() {
    use kestrel_core::trace::{SpanType, StoreSink, Tracer, TracingConfig};

    for fixture in fixtures().await {
        let storage = fixture.store();
        let backend = storage.backend();
        let spans = storage.clone().into_stores().spans.expect("a span store");
        let tracer = Tracer::new(TracingConfig::new(), vec![Arc::new(StoreSink::new(spans))]);
        let mut run = tracer
            .start(None, SpanType::AgentRun, "agent run: 'weather'")
            .unwrap();
        run.entity("agent", "weather", None);
        let trace_id = run.context().trace_id;
        let tool = tracer
            .start(Some(&run.context()), SpanType::ToolCall, "tool: 'x'")
            .unwrap();
        tool.fail("no", None);
        run.end();
        tracer.flush().await;
        let read = storage.trace(&trace_id).await.unwrap();
        assert_eq!(read.len(), 2, "{backend}");
        let page = storage
            .list_traces(&kestrel_core::trace::TraceQuery::default())
            .await
            .unwrap();
        assert_eq!(page.total, 1, "{backend}");
        assert_eq!(page.traces[0].root.entity_id.as_deref(), Some("weather"));
        assert!(page.traces[0].has_child_error, "{backend}");
        fixture.teardown().await;
    }
}
