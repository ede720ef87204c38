//! Restarting a run a process that died left `running` or sleeping: it goes on from its
//! last step boundary ([`WorkflowRun::restart`]).

use serde_json::Value;

use super::WorkflowResult;
use super::engine::{Engine, Resume};
use super::error::WorkflowRunError;
use super::run::WorkflowRun;
use super::stream::WorkflowStream;
use crate::event::WorkflowStatus;

impl WorkflowRun {
    /// Continues a run left `running` (or sleeping) by a process that died, from its last
    /// step boundary (Mastra's `restart`): the entry it was in runs again, but for the steps
    /// of it that had succeeded, and a sleep waits only what is left of it. Steps run at
    /// least once: one in flight when its process died runs again. A run going on in this
    /// process is refused ([`WorkflowRunError::InProgress`]), and so is, in a cluster, one
    /// another live instance drives ([`WorkflowRunError::DrivenElsewhere`]).
    pub async fn restart(&self) -> Result<WorkflowResult, WorkflowRunError> {
        let engine = self.restarted(None).await?;
        Ok(engine.run().await)
    }

    /// [`WorkflowRun::restart`], streamed: a new `workflow-start`, then the rest of the run.
    pub async fn restart_stream(&self) -> Result<WorkflowStream, WorkflowRunError> {
        let (sender, receiver) = super::events::event_channel();
        let engine = self.restarted(Some(sender)).await?;
        Ok(WorkflowStream::spawn(engine, receiver))
    }

    /// The engine of a restarted run: a run stored `running` or `waiting` that no one
    /// drives, taken over at its position.
    async fn restarted(
        &self,
        events: Option<super::events::EventSender>,
    ) -> Result<Engine, WorkflowRunError> {
        let store = &self.workflow().inner.store;
        let workflow = self.workflow().id();
        let Some(stored) = store.load(workflow, self.run_id()).await? else {
            return Err(WorkflowRunError::UnknownRun {
                workflow: workflow.to_owned(),
                run_id: self.run_id().to_owned(),
            });
        };
        let not_active = |status| WorkflowRunError::NotActive {
            run_id: self.run_id().to_owned(),
            status,
        };
        if !matches!(
            stored.status,
            WorkflowStatus::Running | WorkflowStatus::Waiting
        ) {
            return Err(not_active(stored.status));
        }
        let live = self.go_live().ok_or_else(|| WorkflowRunError::InProgress {
            run_id: self.run_id().to_owned(),
        })?;
        let lease = self.lease().await.map_err(|e| {
            e.unwrap_or_else(|| WorkflowRunError::DrivenElsewhere {
                run_id: self.run_id().to_owned(),
            })
        })?;
        // Read again behind the lease's fence: a driver that lost the run may have stored
        // a boundary since the first read, and no stale driver can store one now.
        let stored = match (&lease, store.load(workflow, self.run_id()).await?) {
            (None, _) => stored,
            (Some(_), Some(fresh)) => fresh,
            (Some(_), None) => {
                return Err(WorkflowRunError::UnknownRun {
                    workflow: workflow.to_owned(),
                    run_id: self.run_id().to_owned(),
                });
            }
        };
        if !matches!(
            stored.status,
            WorkflowStatus::Running | WorkflowStatus::Waiting
        ) {
            return Err(not_active(stored.status));
        }
        // Its status may have moved since it was read (a cancel, another restarter).
        let claimed = store
            .claim(
                workflow,
                self.run_id(),
                stored.status,
                WorkflowStatus::Running,
            )
            .await?;
        if !claimed {
            let now = store
                .load(workflow, self.run_id())
                .await?
                .map_or(WorkflowStatus::Canceled, |s| s.status);
            return Err(not_active(now));
        }
        let resume = Resume {
            step: None,
            data: Value::Null,
            path: Vec::new(),
            item: None,
        };
        Ok(self.continued(stored, Some(resume), events, live, lease))
    }

    /// Ends a run left `running` (or sleeping) by a process that died, as failed with
    /// `reason`, when it cannot be continued from a boundary. Refused as a restart is: a run
    /// going on here, or driven by another live instance, or no longer active. In a cluster
    /// the run's lease is taken (and its fence raised) first, so a stale driver's late
    /// writes are refused and only one instance ends it.
    pub(crate) async fn end_left_behind(&self, reason: &str) -> Result<(), WorkflowRunError> {
        let store = &self.workflow().inner.store;
        let workflow = self.workflow().id();
        let _live = self.go_live().ok_or_else(|| WorkflowRunError::InProgress {
            run_id: self.run_id().to_owned(),
        })?;
        let lease = self.lease().await.map_err(|e| {
            e.unwrap_or_else(|| WorkflowRunError::DrivenElsewhere {
                run_id: self.run_id().to_owned(),
            })
        })?;
        // Read behind the lease's fence (as a restart does).
        let Some(mut stored) = store.load(workflow, self.run_id()).await? else {
            return Err(WorkflowRunError::UnknownRun {
                workflow: workflow.to_owned(),
                run_id: self.run_id().to_owned(),
            });
        };
        if !matches!(
            stored.status,
            WorkflowStatus::Running | WorkflowStatus::Waiting
        ) {
            return Err(WorkflowRunError::NotActive {
                run_id: self.run_id().to_owned(),
                status: stored.status,
            });
        }
        stored.status = WorkflowStatus::Failed;
        stored.error = Some(crate::event::StepErrorInfo {
            message: reason.to_owned(),
            name: "RunInterrupted".to_owned(),
            tripwire: None,
        });
        stored.lease_token = lease.as_ref().map(super::lease::RunLease::token);
        let saved = store.save(&stored).await;
        if let Some(lease) = lease {
            lease.release().await;
        }
        saved?;
        Ok(())
    }
}
