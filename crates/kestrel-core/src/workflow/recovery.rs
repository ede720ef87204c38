//! Continuing the runs a process left behind: [`Workflow::restart_active_runs`] restarts every
//! stored run that is `running` or `waiting` (sleeping) and that no one drives, each in a
//! task of its own. A `Kestrel` instance does it for all its workflows in
//! `recover_workflow_runs`, and, in a cluster, every sweep interval (a run whose instance died
//! is found by its lease having run out).

use super::definition::Workflow;
use super::error::WorkflowRunError;
use crate::event::WorkflowStatus;
use crate::store::WorkflowRunsQuery;

/// How many runs one listing asks the store for.
const PAGE: u32 = 1_000;

impl Workflow {
    /// Restarts ([`crate::workflow::WorkflowRun::restart`]) each stored run of this workflow
    /// that is `running` or `waiting` and that neither this process nor (in a cluster) a
    /// live instance drives; each goes on in a task of its own. Returns their ids. A sleeping
    /// run sleeps what is left of its sleep. With a store that does not outlive the process
    /// there is nothing to find.
    pub async fn restart_active_runs(&self) -> Result<Vec<String>, WorkflowRunError> {
        // Dropping the stream leaves the run going on in its task.
        self.each_left_behind("restarted", |run| async move {
            run.restart_stream().await.map(drop)
        })
        .await
    }

    /// Ends each stored run left `running` or `waiting` that neither this process nor a live
    /// instance drives, as failed with `reason` (a run that cannot be continued from a
    /// boundary: an agent's network, one step that is its whole loop). Returns their ids.
    pub(crate) async fn end_active_runs(
        &self,
        reason: &str,
    ) -> Result<Vec<String>, WorkflowRunError> {
        self.each_left_behind(
            "ended",
            |run| async move { run.end_left_behind(reason).await },
        )
        .await
    }

    /// Does `act` to each stored run left `running` or `waiting` that this process does not
    /// drive; returns the ids of those it was done to (one another instance drives, or that
    /// moved on since it was listed, is skipped).
    async fn each_left_behind<F, Fut>(
        &self,
        done: &str,
        mut act: F,
    ) -> Result<Vec<String>, WorkflowRunError>
    where
        F: FnMut(super::WorkflowRun) -> Fut,
        Fut: Future<Output = Result<(), WorkflowRunError>>,
    {
        let mut acted = Vec::new();
        for run_id in self.active_stored_runs().await? {
            if self.is_run_in_progress(&run_id) {
                continue;
            }
            match act(self.create_run_with_id(&run_id)).await {
                Ok(()) => {
                    tracing::info!(workflow = %self.id(), %run_id, "{done} a workflow run left behind");
                    acted.push(run_id);
                }
                Err(
                    WorkflowRunError::InProgress { .. }
                    | WorkflowRunError::DrivenElsewhere { .. }
                    | WorkflowRunError::NotActive { .. }
                    | WorkflowRunError::UnknownRun { .. },
                ) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(acted)
    }

    /// The ids of the stored top-level runs that are `running` or `waiting` (none with a
    /// store that does not outlive the process).
    async fn active_stored_runs(&self) -> Result<Vec<String>, WorkflowRunError> {
        let store = self.store();
        if !store.is_durable() {
            return Ok(Vec::new());
        }
        let mut candidates = Vec::new();
        for status in [WorkflowStatus::Running, WorkflowStatus::Waiting] {
            let mut page = 0;
            loop {
                let listed = store
                    .list(&WorkflowRunsQuery {
                        workflow_id: Some(self.id().to_owned()),
                        resource_id: None,
                        status: Some(status),
                        page,
                        per_page: PAGE,
                    })
                    .await?;
                let count = listed.runs.len();
                // A nested workflow's run is continued by its outer run's restart.
                candidates.extend(
                    listed
                        .runs
                        .into_iter()
                        .filter(|run| {
                            !run.request_context
                                .contains_key(crate::context::PARENT_WORKFLOW_KEY)
                        })
                        .map(|run| run.run_id),
                );
                if count < PAGE as usize {
                    break;
                }
                page += 1;
            }
        }
        Ok(candidates)
    }
}
