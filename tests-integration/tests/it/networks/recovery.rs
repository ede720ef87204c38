//! Network runs after their process died (its task dropped mid-iteration, as `kill -9` leaves
//! them): the next instance's recovery ends them as failed with a reason the API reports
//! (`RunInterrupted`: a network's one step is its whole loop, and continuing it would run every
//! iteration again), and one left behind can be aborted by its run id from any instance. On
//! the durable stores (the in-memory one outlives nothing).

use std::time::Duration;

use kestrel_core::workflow::WorkflowStatus;

use super::*;

/// Starts a network on a fresh instance whose helper's tool never returns, waits until the run
/// is stored `running`, then "kills" the instance (drops the task driving it and the
/// instance). Returns the run id.
async fn left_behind(store: &Store) -> String {
    let hang = create_tool("hang")
        .description("Never returns")
        .input_schema(json!({"type": "object"}))
        .execute(|_: Value, _ctx| async {
            std::future::pending::<()>().await;
            Ok("never")
        });
    let router = scripted(vec![route("helper", "agent", "hang on", "it waits")]);
    let helper = scripted(vec![ScriptedResponse::tool_call("c1", "hang", json!({}))]);
    let dying = instance(store, router, helper, Some(hang), false, Arc::default());
    let request = dying
        .agent("router")
        .unwrap()
        .network("Wait for it")
        .memory(THREAD, RESOURCE);
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run_id = format!(
        "net-{}-{}",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::SeqCst)
    );
    let request = request.run_id(&run_id);
    let driving = tokio::spawn(request.result());
    let mut stored = None;
    for _ in 0..500 {
        stored = store
            .get_workflow_run("agent-network-router", &run_id)
            .await
            .unwrap();
        if stored
            .as_ref()
            .is_some_and(|r| r.status == WorkflowStatus::Running)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(stored.map(|r| r.status), Some(WorkflowStatus::Running));
    driving.abort();
    let _ = driving.await;
    drop(dying);
    run_id
}

fn quiet(store: &Store) -> Kestrel {
    instance(
        store,
        scripted(vec![]),
        scripted(vec![]),
        None,
        false,
        Arc::default(),
    )
}

pub(super) async fn a_network_run_left_behind_is_ended_with_its_reason(store: Store) {
    let run_id = left_behind(&store).await;
    let next = quiet(&store);
    let recovered = next.recover_workflow_runs().await;
    assert_eq!(
        recovered,
        vec![("agent-network-router".to_owned(), run_id.clone())]
    );
    let record = store
        .get_workflow_run("agent-network-router", &run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.status, WorkflowStatus::Failed);
    let snapshot: Value = serde_json::from_str(record.snapshot.get()).unwrap();
    assert_eq!(snapshot["error"]["name"], "RunInterrupted", "{snapshot}");
    assert!(
        snapshot["error"]["message"]
            .as_str()
            .unwrap()
            .contains("stopped before it ended"),
        "{snapshot}"
    );
    assert!(next.recover_workflow_runs().await.is_empty(), "ended once");
    // Nothing to decide on any more.
    let refused = next
        .agent("router")
        .unwrap()
        .run(&run_id)
        .network()
        .approve()
        .await;
    assert!(
        matches!(refused, Err(NetworkError::NotFound { .. })),
        "{refused:?}"
    );
}

pub(super) async fn a_network_run_left_behind_is_aborted_by_its_id(store: Store) {
    let run_id = left_behind(&store).await;
    let next = quiet(&store);
    let router = next.agent("router").unwrap();
    assert!(
        !router
            .run(&run_id)
            .resource("mallory")
            .network()
            .abort()
            .await
            .unwrap(),
        "another resource's run is not found"
    );
    assert!(!router.run("no-such-run").network().abort().await.unwrap());
    assert!(
        router
            .run(&run_id)
            .resource(RESOURCE)
            .network()
            .abort()
            .await
            .unwrap()
    );
    let record = store
        .get_workflow_run("agent-network-router", &run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.status, WorkflowStatus::Canceled);
    assert!(
        next.recover_workflow_runs().await.is_empty(),
        "an aborted run is not recovered"
    );
}
