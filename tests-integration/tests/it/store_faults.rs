//! An agent run whose store fails mid-run (PostgreSQL behind a proxy that drops the answer to
//! the write of the run's answer)
//! stops with the storage error and keeps its last stored boundary: it is not recorded as
//! ended once the database is back, so a resume (or, in a cluster, the sweep) continues it,
//! and its thread ends with each message once. PostgreSQL only: the fault is a network one.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kestrel_core::agent::Agent;
use kestrel_core::cluster::Cluster;
use kestrel_core::definition::AgentError;
use kestrel_core::kestrel::Kestrel;
use kestrel_core::message::Role;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_core::store::{IntoStores, RunPhase};
use kestrel_storage::Selection;
use kestrel_storage::testing::Store;

use super::cluster::{PausableLeases, cluster};
use super::fixture::Instance;
use super::proxied_postgres::ProxiedPostgres;

const THREAD: &str = "thread-cut";
const RESOURCE: &str = "alice";
const TTL: Duration = Duration::from_millis(300);

/// An instance of the cluster `shared` (runs are snapshotted at every step only in a
/// cluster, where another instance may continue them).
fn instance(store: &Store, model: Arc<ScriptedModel>, shared: &Cluster, id: &str) -> Kestrel {
    Instance::on(store)
        .agent(Agent::builder("assistant").model(model))
        .cluster(shared.clone().instance_id(id).lease_ttl(TTL))
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_messages_could_not_be_stored_is_kept_for_a_resume() {
    let Some(pg) = ProxiedPostgres::start(Duration::from_millis(500)).await else {
        return;
    };
    let (proxy, direct_store) = (Arc::clone(&pg.proxy), Arc::clone(&pg.direct));
    let through = Arc::clone(&pg.through);

    // On A, the database stores the model's answer and its answer to that write is lost.
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let model_a = Arc::new(ScriptedModel::from_fn(move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        ScriptedResponse::text("It is sunny in Oslo.")
    }));
    proxy.drop_answers_after("It is sunny in Oslo.");
    let shared = cluster(Arc::new(PausableLeases::default()));
    let a = instance(&through, model_a, &shared, "a");
    let run_id = "run-cut";
    let failed = a
        .agent("assistant")
        .unwrap()
        .generate("Weather in Oslo?")
        .run_id(run_id)
        .memory(THREAD, RESOURCE)
        .await;
    let error = failed.expect_err("the caller is told the save failed");
    assert!(
        matches!(&error, AgentError::Memory { source, .. } if source.is_unavailable()),
        "{error:?}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert!(proxy.marker_met());

    // The database is back: what it holds is the run's last boundary, still running, not
    // an end recorded after the fact.
    let runs = Arc::clone(&direct_store).into_stores().runs;
    let stored = runs.load(run_id).await.unwrap().unwrap();
    assert_eq!(stored.phase, RunPhase::Running, "{stored:?}");

    // Another instance resumes it: the model step runs again, and the thread ends with the
    // question and its answer, once each.
    let model_b = Arc::new(ScriptedModel::new().respond(ScriptedResponse::text("Sunny.")));
    let b = instance(&direct_store, Arc::clone(&model_b), &shared, "b");
    // Once A's hold has run out, if A kept it.
    tokio::time::sleep(TTL + TTL / 2).await;
    let done = b
        .agent("assistant")
        .unwrap()
        .run(run_id)
        .resource(RESOURCE)
        .proceed()
        .await
        .unwrap();
    assert_eq!(done.run_id, run_id);
    assert_eq!(model_b.calls(), 1);
    assert_eq!(
        runs.load(run_id).await.unwrap().unwrap().phase,
        RunPhase::Completed
    );
    let thread: Vec<(Role, String)> = direct_store
        .list_messages(THREAD, Some(RESOURCE), Selection::all())
        .await
        .unwrap()
        .messages
        .iter()
        .map(|m| (m.role, m.to_message().text()))
        .collect();
    let roles: Vec<Role> = thread.iter().map(|(role, _)| *role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant], "{thread:#?}");
    assert_eq!(thread[0].1, "Weather in Oslo?");

    drop((a, b));
    pg.teardown().await;
}
