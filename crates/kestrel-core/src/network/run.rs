//! Starting a network run, deciding for a stopped one, and the stream of its events.

use std::future::IntoFuture;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
use futures::future::BoxFuture;
use serde_json::Value;

use super::call::{Network, NetworkInit};
use super::step::NetworkStep;
use super::{DEFAULT_NETWORK_MAX_STEPS, NetworkError, NetworkOptions};
use crate::abort::AbortSignal;
use crate::agent::Agent;
use crate::event::{Event, EventSource, NetworkFinishPayload, WorkflowUsage};
use crate::message::Input;
use crate::store::SharedWorkflowStore;
use crate::workflow::{Workflow, WorkflowResult, WorkflowStatus, WorkflowStream};

/// How a network run ended, or where it stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkStatus {
    /// A completion check passed.
    Complete,
    /// The last iteration allowed ran without a check passing.
    MaxIterations,
    /// A primitive waits for a person: decide with the run's id.
    Suspended,
    /// The network was aborted.
    Aborted,
    /// It failed (the routing agent or the store failed); see [`NetworkResult::error`].
    Failed,
    /// A processor stopped it (the routing agent's, or a primitive agent's); see
    /// [`NetworkResult::tripwire`].
    Tripwire,
}

/// What a network run gave.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkResult {
    /// The network's run id (decide on a stopped run with it).
    pub run_id: String,
    /// How it ended.
    pub status: NetworkStatus,
    /// The final answer (empty unless it ended).
    pub result: String,
    /// Why it ended.
    pub completion_reason: Option<String>,
    /// The last iteration (0 for the first).
    pub iteration: u32,
    /// The model usage of every call the network made.
    pub usage: WorkflowUsage,
    /// The finish event's payload, when it ended.
    pub finish: Option<NetworkFinishPayload>,
    /// Why it failed.
    pub error: Option<String>,
    /// What stopped it, when a processor did.
    pub tripwire: Option<crate::run::Tripwire>,
}

impl NetworkResult {
    fn from_workflow(result: WorkflowResult) -> Self {
        let finish: Option<NetworkFinishPayload> = result
            .result
            .as_ref()
            .and_then(|v| serde_json::from_value(v.clone()).ok());
        let suspended_state = result
            .suspend_payload
            .values()
            .next()
            .and_then(|p| p.get("state"))
            .cloned();
        let (status, error) = match result.status {
            WorkflowStatus::Success => match &finish {
                Some(f) if f.result == super::call::ABORTED => (NetworkStatus::Aborted, None),
                Some(f) if f.is_complete => (NetworkStatus::Complete, None),
                Some(_) => (NetworkStatus::MaxIterations, None),
                None => (
                    NetworkStatus::Failed,
                    Some("the network's run ended without a finish".to_owned()),
                ),
            },
            WorkflowStatus::Suspended => (NetworkStatus::Suspended, None),
            WorkflowStatus::Canceled => (NetworkStatus::Aborted, None),
            WorkflowStatus::Tripwire => (
                NetworkStatus::Tripwire,
                result.error.as_ref().map(|e| e.message.clone()),
            ),
            _ => (
                NetworkStatus::Failed,
                Some(
                    result
                        .error
                        .as_ref()
                        .map(|e| e.message.clone())
                        .unwrap_or_else(|| format!("the network's run {}", result.status.as_str())),
                ),
            ),
        };
        let (iteration, usage) = match (&finish, suspended_state) {
            (Some(f), _) => (f.iteration, f.usage),
            (None, Some(state)) => (
                state.get("iteration").and_then(Value::as_u64).unwrap_or(0) as u32,
                state
                    .get("usage")
                    .and_then(|u| serde_json::from_value(u.clone()).ok())
                    .unwrap_or_default(),
            ),
            (None, None) => (0, WorkflowUsage::default()),
        };
        Self {
            run_id: result.run_id,
            status,
            result: finish
                .as_ref()
                .map(|f| f.result.clone())
                .unwrap_or_default(),
            completion_reason: finish.as_ref().map(|f| f.completion_reason.clone()),
            iteration,
            usage,
            finish,
            error,
            tripwire: result.error.and_then(|e| e.tripwire).map(|t| *t),
        }
    }
}

/// The events of a network run (`from: "NETWORK"`) as they happen, and its result. It drives
/// the run while polled; dropped early, the run goes on in the background.
pub struct NetworkStream {
    run_id: String,
    abort: AbortSignal,
    inner: WorkflowStream,
}

impl std::fmt::Debug for NetworkStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetworkStream")
            .field("run_id", &self.run_id)
            .finish_non_exhaustive()
    }
}

impl NetworkStream {
    /// The network's run id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Aborts the network and the primitive that runs.
    pub fn abort(&self) {
        self.abort.abort();
    }

    /// Waits for the end and returns the result (events not yet read are dropped).
    pub async fn result(self) -> Result<NetworkResult, NetworkError> {
        Ok(NetworkResult::from_workflow(self.inner.result().await?))
    }

    /// Reads every event, then the result.
    pub async fn collect(mut self) -> (Vec<Event>, Result<NetworkResult, NetworkError>) {
        use futures::StreamExt;
        let mut events = Vec::new();
        while let Some(event) = self.next().await {
            events.push(event);
        }
        let result = self.result().await;
        (events, result)
    }
}

impl Stream for NetworkStream {
    type Item = Event;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        let this = self.get_mut();
        loop {
            match Pin::new(&mut this.inner).poll_next(cx) {
                // The workflow machinery's own events stay inside.
                Poll::Ready(Some(event)) if event.from != EventSource::Network => continue,
                other => return other,
            }
        }
    }
}

/// A network call being set up: set options, then `.await` it for the [`NetworkStream`].
#[must_use = "a network request does nothing until awaited"]
pub struct NetworkRequest {
    agent: Agent,
    kind: RequestKind,
    options: NetworkOptions,
    pinned: Option<String>,
}

enum RequestKind {
    Start(Input),
    Resume { run_id: String, data: Value },
}

impl std::fmt::Debug for NetworkRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetworkRequest")
            .field("agent", &self.agent.id())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl NetworkRequest {
    /// Uses options built once (they replace those set before).
    pub fn options(mut self, options: NetworkOptions) -> Self {
        self.options = options;
        self
    }

    /// The network's thread and its resource (required to start).
    pub fn memory(mut self, thread: impl Into<String>, resource: impl Into<String>) -> Self {
        self.options = self.options.memory(thread, resource);
        self
    }

    /// The most iterations (1 unless set).
    pub fn max_steps(mut self, max_steps: u32) -> Self {
        self.options = self.options.max_steps(max_steps);
        self
    }

    /// Uses this run id instead of a fresh one.
    pub fn run_id(mut self, run_id: impl Into<String>) -> Self {
        self.options = self.options.run_id(run_id);
        self
    }

    /// Aborts the network when it fires.
    pub fn abort_signal(mut self, signal: AbortSignal) -> Self {
        self.options = self.options.abort_signal(signal);
        self
    }

    /// How completion is judged.
    pub fn completion(mut self, completion: super::NetworkCompletion) -> Self {
        self.options = self.options.completion(completion);
        self
    }

    /// Reaches only runs of this resource: a decision on another resource's run finds none
    /// ([`NetworkError::NotFound`]), and a start must name it as the thread's resource.
    pub fn resource(mut self, resource_id: impl Into<String>) -> Self {
        self.pinned = Some(resource_id.into());
        self
    }

    /// Starts (or continues) the run and waits for its result.
    pub async fn result(self) -> Result<NetworkResult, NetworkError> {
        self.await?.result().await
    }

    async fn open(self) -> Result<NetworkStream, NetworkError> {
        let agent = self.agent;
        let refusal = if agent.memory().is_none() {
            Some(NetworkError::MemoryRequired {
                agent: agent.id().to_owned(),
            })
        } else if agent.sub_agent_ids().is_empty()
            && agent.workflows().is_empty()
            && agent.own_tool_ids().is_empty()
        {
            Some(NetworkError::NoPrimitives {
                agent: agent.id().to_owned(),
            })
        } else if self.options.max_steps == Some(0) {
            Some(NetworkError::ZeroMaxSteps)
        } else {
            None
        };
        match (refusal, &self.kind) {
            (Some(refusal), RequestKind::Start(_)) => return Err(refusal),
            // An agent that cannot run a network has no stopped one to decide on.
            (Some(_), RequestKind::Resume { run_id, .. }) => {
                return Err(NetworkError::NotFound {
                    agent: agent.id().to_owned(),
                    run_id: run_id.clone(),
                });
            }
            (None, _) => {}
        }
        let abort = self.options.abort_signal.clone().unwrap_or_default();
        let network = Arc::new(Network::new(agent.clone(), self.options.clone()));
        let workflow = network_workflow(&agent, Arc::clone(&network))?;
        match self.kind {
            RequestKind::Start(input) => {
                let Some((thread_id, resource_id)) = self.options.thread.clone() else {
                    return Err(NetworkError::ThreadRequired {
                        agent: agent.id().to_owned(),
                    });
                };
                if let Some(pinned) = &self.pinned
                    && pinned != &resource_id
                {
                    return Err(NetworkError::ForeignResource {
                        resource: resource_id,
                    });
                }
                let run_id = self
                    .options
                    .run_id
                    .clone()
                    .unwrap_or_else(crate::id::new_id);
                let init = NetworkInit {
                    task: super::records::task_of(&input.0),
                    thread_id,
                    resource_id,
                    max_steps: self.options.max_steps.unwrap_or(DEFAULT_NETWORK_MAX_STEPS),
                    verbose_introspection: self.options.routing.verbose_introspection,
                };
                network.save_task(&init, &input.0).await;
                let run = workflow
                    .create_run_with_id(&run_id)
                    .resource(init.resource_id.clone())
                    .with_abort(abort.clone());
                let run = match &self.options.request_context {
                    Some(ctx) => run.request_context(ctx.clone()),
                    None => run,
                };
                let input = serde_json::to_value(&init).unwrap_or(Value::Null);
                let inner = run.stream(input).await?;
                Ok(NetworkStream {
                    run_id,
                    abort,
                    inner,
                })
            }
            RequestKind::Resume { run_id, data } => {
                let run = workflow
                    .create_run_with_id(&run_id)
                    .with_abort(abort.clone());
                let run = match &self.options.request_context {
                    Some(ctx) => run.request_context(ctx.clone()),
                    None => run,
                };
                match run.snapshot().await? {
                    Some(snapshot)
                        if snapshot.status == WorkflowStatus::Suspended
                            && self
                                .pinned
                                .as_ref()
                                .is_none_or(|p| snapshot.resource_id.as_ref() == Some(p)) => {}
                    _ => {
                        return Err(NetworkError::NotFound {
                            agent: agent.id().to_owned(),
                            run_id,
                        });
                    }
                }
                let inner = run.resume_stream(None, data).await?;
                Ok(NetworkStream {
                    run_id,
                    abort,
                    inner,
                })
            }
        }
    }
}

impl IntoFuture for NetworkRequest {
    type Output = Result<NetworkStream, NetworkError>;
    type IntoFuture = BoxFuture<'static, Self::Output>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.open())
    }
}

/// The id of the workflow that runs an agent's networks (its runs are the network runs).
pub(crate) fn network_workflow_id(agent: &Agent) -> String {
    format!("agent-network-{}", agent.id())
}

/// Where an agent's network runs are kept: its runtime's workflow store.
pub(crate) fn network_store(agent: &Agent) -> SharedWorkflowStore {
    std::sync::Arc::clone(&agent.runtime.stores.workflows)
}

pub(crate) fn network_workflow(
    agent: &Agent,
    network: Arc<Network>,
) -> Result<Workflow, NetworkError> {
    let id = network_workflow_id(agent);
    let workflow = Workflow::builder(id.clone())
        .description(format!("the networks of agent {:?}", agent.id()))
        .store(network_store(agent))
        .then(NetworkStep::new(network))
        .commit()
        .map_err(|e| crate::workflow::WorkflowRunError::Interrupted {
            reason: e.to_string(),
        })?;
    // Every build of the agent's network workflow shares one set of live runs.
    let live = {
        let mut sets = agent
            .runtime
            .network_live
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        Arc::clone(sets.entry(id).or_default())
    };
    let cluster = agent.runtime.runs.cluster.clone();
    // A traced instance traces its agents' network runs: the run, its step, each iteration.
    Ok(workflow
        .with_live(live)
        .with_cluster(cluster)
        .with_tracer(agent.runtime.tracer.clone()))
}

impl Agent {
    /// Runs this agent as a network on `task` (Mastra's `agent.network()`): set the thread
    /// with [`NetworkRequest::memory`] (required) and `.await` for the [`NetworkStream`].
    /// See [`crate::network`].
    pub fn network(&self, task: impl Into<Input>) -> NetworkRequest {
        NetworkRequest {
            agent: self.clone(),
            kind: RequestKind::Start(task.into()),
            options: NetworkOptions::default(),
            pinned: None,
        }
    }
}

/// A network run by id, from its run's handle ([`crate::agent::RunHandle::network`]): decide
/// for what it waits on, or abort it.
#[derive(Debug, Clone)]
pub struct NetworkRunHandle {
    agent: Agent,
    run_id: String,
    resource_id: Option<String>,
}

impl crate::agent::RunHandle {
    /// This run as a network run: what its decisions and abort go through.
    pub fn network(&self) -> NetworkRunHandle {
        NetworkRunHandle {
            agent: self.agent().clone(),
            run_id: self.id().to_owned(),
            resource_id: self.resource_id().map(str::to_owned),
        }
    }
}

impl NetworkRunHandle {
    /// Continues the stopped run with `data`; a handle acting for a resource reaches only
    /// that resource's runs.
    fn continue_with(&self, data: Value) -> NetworkRequest {
        NetworkRequest {
            agent: self.agent.clone(),
            kind: RequestKind::Resume {
                run_id: self.run_id.clone(),
                data,
            },
            options: NetworkOptions::default(),
            pinned: self.resource_id.clone(),
        }
    }

    /// Approves what the stopped network run waits for (a delegated agent's tool call, or
    /// the network's tool); the run goes on from there. Completion options are not kept
    /// with the run: give them again with [`NetworkRequest::completion`].
    pub fn approve(&self) -> NetworkRequest {
        self.continue_with(super::approval(true, None))
    }

    /// Declines what it waits for, with an optional reason; the run goes on from there.
    pub fn decline(&self, reason: Option<String>) -> NetworkRequest {
        self.continue_with(super::approval(false, reason))
    }

    /// Resumes it with `data` (a suspended tool's or workflow's resume data, or
    /// `{approved, reason?}` for an approval), also in another process after a restart.
    pub fn resume(&self, data: Value) -> NetworkRequest {
        self.continue_with(data)
    }

    /// Stops the network run: one going on (here or, in a cluster, on the instance driving
    /// it) is aborted and stores itself `canceled`; a stopped one (waiting for a decision) or
    /// one left behind by a process that died is marked `canceled`. `Ok(false)` when the
    /// agent has no such run (or, for a handle acting for a resource, the run is another
    /// resource's).
    pub async fn abort(&self) -> Result<bool, NetworkError> {
        let agent = &self.agent;
        if agent.memory().is_none() {
            return Ok(false);
        }
        let network = Arc::new(Network::new(agent.clone(), NetworkOptions::default()));
        let workflow = network_workflow(agent, network)?;
        let run = workflow.create_run_with_id(&self.run_id);
        let Some(stored) = run.snapshot().await? else {
            // Going on here before its first snapshot: its signal stops it.
            return Ok(run.abort_if_live());
        };
        if let Some(own) = &self.resource_id
            && stored.resource_id.as_ref() != Some(own)
        {
            return Ok(false);
        }
        match run.cancel().await {
            Ok(()) => Ok(true),
            Err(crate::workflow::WorkflowRunError::Ended { .. }) => Ok(true),
            Err(error) => Err(error.into()),
        }
    }
}

/// Why a network run left behind by a process that died is ended rather than continued: its
/// one step is the whole loop, so continuing it would run every iteration (and its
/// primitives' side effects) again.
const LEFT_BEHIND: &str = "the process driving this network run stopped before it ended; the \
     iterations that ended are in its thread, and a new network run on the thread goes on from \
     them";

impl Agent {
    /// Ends this agent's network runs left `running` by a process that died (outside a
    /// cluster: any such run; in one: those whose instance's lease ran out), as failed with
    /// a reason the API reports (`RunInterrupted`): a network run's step is its whole loop,
    /// and continuing it would run every iteration again. `Kestrel::recover_workflow_runs`
    /// does it for every agent, and a cluster's sweep too. Returns the runs' ids.
    pub async fn recover_network_runs(&self) -> Vec<String> {
        if self.memory().is_none()
            || (self.sub_agent_ids().is_empty()
                && self.workflows().is_empty()
                && self.own_tool_ids().is_empty())
        {
            return Vec::new();
        }
        let network = Arc::new(Network::new(self.clone(), NetworkOptions::default()));
        let workflow = match network_workflow(self, network) {
            Ok(workflow) => workflow,
            Err(error) => {
                tracing::warn!(agent = %self.id(), %error, "could not look for network runs left behind");
                return Vec::new();
            }
        };
        match workflow.end_active_runs(LEFT_BEHIND).await {
            Ok(ended) => ended,
            Err(error) => {
                tracing::warn!(agent = %self.id(), %error, "looking for network runs left behind failed");
                Vec::new()
            }
        }
    }
}
