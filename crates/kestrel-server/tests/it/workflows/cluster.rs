//! Workflow routes in a cluster: ids as long as the API accepts make lease keys within every
//! provider's limit (the runs succeed), and a start refused because the cluster's leases
//! cannot be reached answers 503 `cluster_unavailable`, as agent routes do, and stores
//! nothing, as does a start refused for its input.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kestrel_core::cluster::{Cluster, InProcessBus};
use kestrel_core::lease::{InProcessLeases, Lease, LeaseError, LeaseProvider};
use serde_json::json;

use super::error_of;

/// In-process leases that can be made to fail, as a Redis that refuses.
#[derive(Debug, Default)]
struct Switchable {
    leases: InProcessLeases,
    down: AtomicBool,
}

impl Switchable {
    fn check(&self, key: &str) -> Result<(), LeaseError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(LeaseError::Backend {
                key: key.to_owned(),
                source: "connection refused".into(),
            });
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl LeaseProvider for Switchable {
    async fn acquire(
        &self,
        key: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, LeaseError> {
        self.check(key)?;
        self.leases.acquire(key, holder, ttl).await
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<bool, LeaseError> {
        self.check(&lease.key)?;
        self.leases.renew(lease, ttl).await
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LeaseError> {
        self.check(&lease.key)?;
        self.leases.release(lease).await
    }

    async fn transfer(
        &self,
        lease: &Lease,
        to: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, LeaseError> {
        self.check(&lease.key)?;
        self.leases.transfer(lease, to, ttl).await
    }

    async fn holder(&self, key: &str) -> Result<Option<Lease>, LeaseError> {
        self.check(key)?;
        self.leases.holder(key).await
    }
}

#[tokio::test]
async fn long_ids_run_and_a_refused_start_stores_nothing() {
    let leases = Arc::new(Switchable::default());
    let cluster = Cluster::new(leases.clone(), Arc::new(InProcessBus::default()));
    let f = super::serve_with(|builder| builder.cluster(cluster.clone()), |s| s).await;
    drop(cluster);

    // 256 characters of four bytes each: the longest id the API takes, a kilobyte of UTF-8.
    let long = "🦀".repeat(256);
    let started = f
        .post(
            &format!("/workflows/numbers/start-async?runId={}", urlencode(&long)),
            json!({"inputData": {"v": 1}}),
        )
        .await;
    let body: serde_json::Value = started.json().await.unwrap();
    assert_eq!(body["status"], "success", "{body}");

    // The cluster's leases refuse: 503, and no run is left behind.
    leases.down.store(true, Ordering::SeqCst);
    let refused = f
        .post(
            "/workflows/numbers/start-async?runId=refused-1",
            json!({"inputData": {"v": 1}}),
        )
        .await;
    error_of(refused, 503, "cluster_unavailable").await;
    leases.down.store(false, Ordering::SeqCst);
    let missing = f.get("/workflows/numbers/runs/refused-1").await;
    assert_eq!(missing.status(), 404, "a refused start stores nothing");

    // A start refused for its input stores nothing either.
    let invalid = f
        .post(
            "/workflows/numbers/start-async?runId=invalid-1",
            json!({"inputData": {"v": "one"}}),
        )
        .await;
    error_of(invalid, 422, "invalid_input").await;
    let missing = f.get("/workflows/numbers/runs/invalid-1").await;
    assert_eq!(missing.status(), 404, "a refused start stores nothing");
}

/// `text` percent-encoded for a query.
fn urlencode(text: &str) -> String {
    text.bytes().map(|b| format!("%{b:02X}")).collect()
}

/// A network started while the cluster's leases cannot be reached is refused with 503
/// `cluster_unavailable` too (its run is a workflow run).
#[tokio::test]
async fn a_network_start_refused_by_the_cluster_is_503() {
    use kestrel_core::agent::Agent;
    use kestrel_core::kestrel::Kestrel;
    use kestrel_core::model::{ScriptedModel, ScriptedResponse};
    use kestrel_core::tool::create_tool;
    use kestrel_server::Server;

    let leases = Arc::new(Switchable::default());
    leases.down.store(true, Ordering::SeqCst);
    let cluster = Cluster::new(leases.clone(), Arc::new(InProcessBus::default()));
    let memory = kestrel_memory::Memory::new(Arc::new(kestrel_storage::InMemoryStorage::new()));
    let router = Agent::builder("router")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text("{}")
        })))
        .memory(memory.clone())
        .tool(
            create_tool("noop")
                .description("Does nothing")
                .input_schema(json!({"type": "object"}))
                .execute(|_: serde_json::Value, _ctx| async { Ok("done") }),
        )
        .build()
        .unwrap();
    let kestrel = Kestrel::builder()
        .storage(Arc::clone(memory.storage().unwrap()))
        .memory(memory.clone())
        .agent(router)
        .cluster(cluster)
        .build()
        .unwrap();
    let server = Server::new(kestrel).memory(memory);
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    let refused = reqwest::Client::new()
        .post(format!("http://{addr}/api/agents/router/network"))
        .json(&json!({"messages": "go", "memory": {"thread": "t1", "resource": "alice"}}))
        .send()
        .await
        .unwrap();
    error_of(refused, 503, "cluster_unavailable").await;
}
