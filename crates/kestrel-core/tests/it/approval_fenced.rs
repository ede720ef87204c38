//! A decision whose save is fenced off (another instance took the run's lease between the
//! load and the save) lost the race: it is a conflict, as a second decision is, not a store
//! failure (over HTTP, a 409 rather than a 500).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use kestrel_core::agent::{Agent, RunControlError};
use kestrel_core::model::{FinishReason, ScriptedModel, ScriptedResponse};
use kestrel_core::run::{RunPhase, RunState};
use kestrel_core::store::{
    InMemoryRunStore, RunStore, RunStoreError, StoredRun, SuspendedRunsPage, SuspendedRunsQuery,
};
use kestrel_core::tool::create_tool;
use serde_json::json;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Empty {}

/// The in-memory store, whose saves are fenced off once `fence` is set.
#[derive(Debug, Default)]
struct FencingStore {
    inner: InMemoryRunStore,
    fence: AtomicBool,
}

impl FencingStore {
    fn fenced(&self, state: &RunState) -> Result<(), RunStoreError> {
        if self.fence.load(Ordering::SeqCst) {
            return Err(RunStoreError::Fenced {
                run_id: state.run_id.clone(),
                token: 1,
                current: 2,
            });
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl RunStore for FencingStore {
    async fn save(
        &self,
        state: &RunState,
        phase: RunPhase,
        expected: Option<i64>,
    ) -> Result<i64, RunStoreError> {
        self.fenced(state)?;
        self.inner.save(state, phase, expected).await
    }

    async fn save_all(
        &self,
        saves: &[(&RunState, RunPhase, Option<i64>)],
    ) -> Result<Vec<i64>, RunStoreError> {
        for (state, _, _) in saves {
            self.fenced(state)?;
        }
        self.inner.save_all(saves).await
    }

    async fn load(&self, run_id: &str) -> Result<Option<StoredRun>, RunStoreError> {
        self.inner.load(run_id).await
    }

    async fn list_in_phases(
        &self,
        phases: &[RunPhase],
        query: &SuspendedRunsQuery,
    ) -> Result<SuspendedRunsPage, RunStoreError> {
        self.inner.list_in_phases(phases, query).await
    }
}

#[tokio::test]
async fn a_fenced_decision_is_a_conflict() {
    let store = Arc::new(FencingStore::default());
    let send = create_tool("send")
        .require_approval(true)
        .execute(|_: Empty, _ctx| async { Ok("sent") });
    let agent = Agent::builder("mailer")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::tool_call("call-1", "send", json!({}))
        })))
        .tool(send)
        .run_store(store.clone())
        .build()
        .unwrap();
    let stopped = agent.generate("send it").await.unwrap();
    assert_eq!(stopped.finish_reason, FinishReason::Suspended);
    store.fence.store(true, Ordering::SeqCst);
    let decided = agent.run(&stopped.run_id).approve("call-1").await;
    assert!(
        matches!(decided, Err(RunControlError::Conflict { .. })),
        "{decided:?}"
    );
    let aborted = agent.run(&stopped.run_id).abort().await;
    assert!(
        matches!(aborted, Err(RunControlError::Conflict { .. })),
        "{aborted:?}"
    );
}

/// A tool that asks twice: how many nights, then (carrying the first answer in its suspend
/// payload) whether with breakfast.
fn asking_twice() -> kestrel_core::tool::FnTool {
    create_tool("book")
        .description("Books a room, asking twice")
        .execute(|_: Empty, ctx| async move {
            let (Some(payload), Some(answer)) = (ctx.suspend_payload(), ctx.resume_data()) else {
                return Err(ctx.suspend(json!({"asked": "nights"})));
            };
            if payload["asked"] == "nights" {
                return Err(ctx.suspend(json!({"asked": "breakfast", "nights": answer["n"]})));
            }
            Ok(format!(
                "{} nights, breakfast: {}",
                payload["nights"], answer["breakfast"]
            ))
        })
}

#[tokio::test]
async fn a_tool_that_asks_twice_in_a_cluster_runs_again_on_each_resume() {
    // In a cluster a decided call runs at most once (a call started before its instance
    // stopped is not run again): a call that suspended again is a new question, not that.
    let store = Arc::new(FencingStore::default());
    let model = Arc::new(ScriptedModel::from_fn(|req| {
        let done = req.messages.last().and_then(|m| {
            m.parts.iter().find_map(|p| match p {
                kestrel_core::message::Part::ToolResult { result, .. } => Some(result.clone()),
                _ => None,
            })
        });
        match done {
            Some(result) => ScriptedResponse::text(format!("booked: {result}")),
            None => ScriptedResponse::tool_call("b1", "book", json!({})),
        }
    }));
    let agent = Agent::builder("booker")
        .model(model)
        .tool(asking_twice())
        .build()
        .unwrap();
    let kestrel = kestrel_core::kestrel::Kestrel::builder()
        .storage(kestrel_core::store::Stores::in_memory().with_runs(store.clone()))
        .cluster(kestrel_core::cluster::Cluster::in_process())
        .agent(agent)
        .build()
        .unwrap();
    let agent = kestrel.agent("booker").unwrap();
    let first = agent.generate("book").await.unwrap();
    assert_eq!(first.finish_reason, FinishReason::Suspended);
    let second = agent
        .run(&first.run_id)
        .resume("b1", json!({"n": 3}))
        .await
        .unwrap();
    assert_eq!(second.finish_reason, FinishReason::Suspended, "{second:?}");
    let done = agent
        .run(&first.run_id)
        .resume("b1", json!({"breakfast": true}))
        .await
        .unwrap();
    assert_eq!(done.text, "booked: \"3 nights, breakfast: true\"");
}
