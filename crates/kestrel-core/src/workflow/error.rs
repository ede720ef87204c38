//! Why a workflow run could not be started, resumed or canceled ([`WorkflowRunError`]): a
//! leaf, so the runs, their streams and nested workflows all name it without naming each other.

use crate::event::WorkflowStatus;
use crate::store::WorkflowStoreError;

/// Why a run could not be started, resumed or canceled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkflowRunError {
    /// The input does not match the workflow's input schema.
    #[error("invalid input for workflow {workflow:?}: {}", errors.join("; "))]
    InvalidInput {
        /// The workflow.
        workflow: String,
        /// One message per violation, naming its path.
        errors: Vec<String>,
    },
    /// No run of that id is stored.
    #[error("workflow {workflow:?} has no run {run_id:?}")]
    UnknownRun {
        /// The workflow.
        workflow: String,
        /// The run.
        run_id: String,
    },
    /// A run of that id exists already (it cannot be started again).
    #[error("run {run_id:?} of workflow {workflow:?} was started already (it is {status:?})")]
    AlreadyStarted {
        /// The workflow.
        workflow: String,
        /// The run.
        run_id: String,
        /// Where it stands.
        status: WorkflowStatus,
    },
    /// The run is not suspended, so it cannot be resumed.
    #[error("run {run_id:?} is not suspended (it is {status:?})")]
    NotSuspended {
        /// The run.
        run_id: String,
        /// Where it stands.
        status: WorkflowStatus,
    },
    /// The step named is not one the run waits at (or none was named and several wait).
    #[error("run {run_id:?} has no suspended step {step:?}; it waits at {suspended:?}")]
    NotSuspendedStep {
        /// The run.
        run_id: String,
        /// The step asked for (`None`: none was named).
        step: Option<String>,
        /// The steps it waits at.
        suspended: Vec<String>,
    },
    /// The item named is not one of the foreach step's that wait (or none was named and
    /// several wait).
    #[error(
        "item {index:?} of foreach step {step:?} in run {run_id:?} does not wait; the items that wait: {suspended:?}"
    )]
    NotSuspendedItem {
        /// The run.
        run_id: String,
        /// The foreach step.
        step: String,
        /// The item asked for (`None`: none was named).
        index: Option<usize>,
        /// The items that wait.
        suspended: Vec<usize>,
    },
    /// The resume data does not match the step's resume schema.
    #[error("invalid resume data for step {step:?}: {}", errors.join("; "))]
    InvalidResumeData {
        /// The step.
        step: String,
        /// One message per violation, naming its path.
        errors: Vec<String>,
    },
    /// Another resumer claimed the run first.
    #[error("run {run_id:?} was resumed by someone else first")]
    AlreadyClaimed {
        /// The run.
        run_id: String,
    },
    /// The run has ended, so it cannot be canceled.
    #[error("run {run_id:?} has ended ({status:?}); there is nothing to cancel")]
    Ended {
        /// The run.
        run_id: String,
        /// How it ended.
        status: WorkflowStatus,
    },
    /// The workflow store failed.
    #[error(transparent)]
    Store(#[from] WorkflowStoreError),
    /// The cluster could not be reached (its leases or the instance driving the run: Redis
    /// refuses or does not answer, or the instance did not answer in time): the run was not
    /// started, continued or canceled, and nothing of it was written.
    #[error("run {run_id:?}: the cluster could not be reached: {source}")]
    Cluster {
        /// The run.
        run_id: String,
        /// What failed.
        #[source]
        source: crate::cluster::ClusterError,
    },
    /// The run is neither running nor sleeping, so there is nothing to restart.
    #[error(
        "run {run_id:?} is not running or sleeping (it is {status:?}): only such a run is restarted"
    )]
    NotActive {
        /// The run.
        run_id: String,
        /// Where it stands.
        status: WorkflowStatus,
    },
    /// The run is going on in this process.
    #[error("run {run_id:?} is in progress in this process")]
    InProgress {
        /// The run.
        run_id: String,
    },
    /// Another live instance of the cluster drives the run (it holds the run's lease).
    #[error("run {run_id:?} is driven by another instance")]
    DrivenElsewhere {
        /// The run.
        run_id: String,
    },
    /// The run cannot travel in time: it is in progress (or only created).
    #[error("run {run_id:?} is {status:?}: time travel takes a run that has ended or is suspended")]
    TravelRefused {
        /// The run.
        run_id: String,
        /// Where it stands.
        status: WorkflowStatus,
    },
    /// The workflow has no such step.
    #[error("workflow {workflow:?} has no step {step:?}")]
    UnknownStep {
        /// The workflow.
        workflow: String,
        /// The step asked for.
        step: String,
    },
    /// The task driving a streamed run ended before the run did (its runtime shut down).
    #[error("the workflow run was interrupted: {reason}")]
    Interrupted {
        /// Why.
        reason: String,
    },
}
