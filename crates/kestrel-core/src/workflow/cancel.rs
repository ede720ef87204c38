//! Canceling a run ([`WorkflowRun::cancel`]): one going on here is stopped through its
//! signal, one driven by another instance through that instance (the cancel goes to the
//! lease holder), and one left behind by a process that died is marked `canceled`.

use super::error::WorkflowRunError;
use super::run::WorkflowRun;
use crate::event::WorkflowStatus;

impl WorkflowRun {
    /// Cancels the run: going on in this process (through any handle on it), its steps'
    /// abort signal fires and no further step starts (it ends `canceled`); a created,
    /// suspended or sleeping run, or one left `running` by a process that died, is marked
    /// `canceled` in the store. An ended run is refused with [`WorkflowRunError::Ended`].
    pub async fn cancel(&self) -> Result<(), WorkflowRunError> {
        self.abort.abort();
        let store = &self.workflow.inner.store;
        let workflow = self.workflow.id();
        let Some(stored) = store.load(workflow, &self.run_id).await? else {
            return Ok(());
        };
        match stored.status {
            WorkflowStatus::Success
            | WorkflowStatus::Failed
            | WorkflowStatus::Canceled
            | WorkflowStatus::Tripwire => Err(WorkflowRunError::Ended {
                run_id: self.run_id.to_string(),
                status: stored.status,
            }),
            status @ (WorkflowStatus::Suspended | WorkflowStatus::Pending) => {
                store
                    .claim(workflow, &self.run_id, status, WorkflowStatus::Canceled)
                    .await?;
                Ok(())
            }
            // Going on here: the signal stops it, and it stores itself `canceled` (a sleeping
            // one is marked so at once too).
            status @ (WorkflowStatus::Running | WorkflowStatus::Waiting)
                if self.workflow.inner.live.contains(&self.run_id) =>
            {
                if status == WorkflowStatus::Waiting {
                    store
                        .claim(workflow, &self.run_id, status, WorkflowStatus::Canceled)
                        .await?;
                }
                Ok(())
            }
            // Stored `running` or sleeping, driven by another instance: the cancel goes to it,
            // whose driver stops and stores the run `canceled` (marking it here would be
            // overwritten by that driver's next save).
            status @ (WorkflowStatus::Running | WorkflowStatus::Waiting) => {
                if self.cancel_elsewhere().await? {
                    return Ok(());
                }
                // Nobody drives it: left by a process that died.
                let claimed = store
                    .claim(workflow, &self.run_id, status, WorkflowStatus::Canceled)
                    .await?;
                if claimed {
                    return Ok(());
                }
                // It moved meanwhile (ended, or taken over and going on): say where it is.
                match store.load(workflow, &self.run_id).await? {
                    Some(now) if now.status == WorkflowStatus::Canceled => Ok(()),
                    Some(now)
                        if matches!(
                            now.status,
                            WorkflowStatus::Success
                                | WorkflowStatus::Failed
                                | WorkflowStatus::Tripwire
                        ) =>
                    {
                        Err(WorkflowRunError::Ended {
                            run_id: self.run_id.to_string(),
                            status: now.status,
                        })
                    }
                    _ => Err(WorkflowRunError::DrivenElsewhere {
                        run_id: self.run_id.to_string(),
                    }),
                }
            }
        }
    }

    /// In a cluster: sends the cancel to the instance holding the run's lease, if another
    /// live one does. `true` when that instance stopped the run; `false` when no other
    /// instance drives it (outside a cluster, the lease free, or its holder no longer has it).
    async fn cancel_elsewhere(&self) -> Result<bool, WorkflowRunError> {
        let Some(cluster) = &self.workflow.inner.cluster else {
            return Ok(false);
        };
        let failed = |source: crate::cluster::ClusterError| WorkflowRunError::Cluster {
            run_id: self.run_id.to_string(),
            source,
        };
        let key = super::lease::key(self.workflow.id(), &self.run_id);
        let Some(lease) = cluster.other_holder(&key).await.map_err(failed)? else {
            return Ok(false);
        };
        let instance = crate::cluster::member::holder_instance(&lease.holder).to_owned();
        let outcome = cluster
            .request(
                &instance,
                crate::cluster::Command::CancelWorkflowRun {
                    workflow_id: self.workflow.id().to_owned(),
                    run_id: self.run_id.to_string(),
                },
            )
            .await
            .map_err(failed)?;
        Ok(matches!(outcome, crate::cluster::Outcome::Done { .. }))
    }
}
