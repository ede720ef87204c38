//! A workflow run's lease in a cluster: the instance that drives a run holds
//! `workflow-run:<workflow>:<run>` and renews it while the run goes on, so another instance
//! neither drives it too nor restarts it; once the driver dies its lease runs out, and the
//! next instance's sweep continues the run. A driver that loses its lease (it was paused past
//! it) stops the run and writes nothing more.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::abort::AbortSignal;
use crate::cluster::Cluster;
use crate::lease::{Lease, LeaseError, LeaseProvider};

/// The key of a workflow run's lease; the workflow id is length-prefixed so that no pair of
/// ids names another pair's key (bounded: long ids' key names their hash).
pub(crate) fn key(workflow_id: &str, run_id: &str) -> String {
    crate::lease::bounded_key(format!(
        "workflow-run:{}:{workflow_id}:{run_id}",
        workflow_id.len()
    ))
}

/// A run's lease, renewed every third of its time-to-live until released or dropped.
#[derive(Debug)]
pub(crate) struct RunLease {
    leases: Arc<dyn LeaseProvider>,
    lease: Lease,
    renewer: tokio::task::JoinHandle<()>,
    lost: Arc<AtomicBool>,
    released: bool,
}

impl RunLease {
    /// Takes the run's lease for this instance: `None` when another holds it. Losing it later
    /// fires `abort`.
    pub(crate) async fn take(
        cluster: &Cluster,
        workflow_id: &str,
        run_id: &str,
        abort: &AbortSignal,
    ) -> Result<Option<Self>, LeaseError> {
        let ttl = cluster.lease_ttl;
        let Some(lease) = cluster
            .leases
            .acquire(&key(workflow_id, run_id), &cluster.instance_id, ttl)
            .await?
        else {
            return Ok(None);
        };
        let lost = Arc::new(AtomicBool::new(false));
        let renewer = tokio::spawn(renew(
            Arc::clone(&cluster.leases),
            lease.clone(),
            ttl,
            Arc::clone(&lost),
            abort.clone(),
        ));
        Ok(Some(Self {
            leases: Arc::clone(&cluster.leases),
            lease,
            renewer,
            lost,
            released: false,
        }))
    }

    /// Whether another instance took the run over: this one must not write it again.
    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Marks the lease lost (the store fenced a write off: another instance holds the run).
    pub(crate) fn mark_lost(&self) {
        self.lost.store(true, Ordering::SeqCst);
    }

    /// The lease's fencing token, which every write of the run carries.
    pub(crate) fn token(&self) -> u64 {
        self.lease.token
    }

    /// Gives the lease up now (the run ended or stopped).
    pub(crate) async fn release(mut self) {
        self.renewer.abort();
        self.released = true;
        if let Err(error) = self.leases.release(&self.lease).await {
            tracing::warn!(key = %self.lease.key, %error, "releasing a workflow run's lease failed; it runs out by itself");
        }
    }
}

impl Drop for RunLease {
    fn drop(&mut self) {
        self.renewer.abort();
        if self.released {
            return;
        }
        let (leases, lease) = (Arc::clone(&self.leases), self.lease.clone());
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = leases.release(&lease).await;
            });
        }
    }
}

async fn renew(
    leases: Arc<dyn LeaseProvider>,
    lease: Lease,
    ttl: std::time::Duration,
    lost: Arc<AtomicBool>,
    abort: AbortSignal,
) {
    loop {
        tokio::time::sleep(ttl / 3).await;
        match leases.renew(&lease, ttl).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(key = %lease.key, "a workflow run's lease was lost: another instance continues the run, this one stops it");
                lost.store(true, Ordering::SeqCst);
                abort.abort();
                return;
            }
            Err(error) => {
                tracing::warn!(key = %lease.key, %error, "renewing a workflow run's lease failed; trying again");
            }
        }
    }
}
