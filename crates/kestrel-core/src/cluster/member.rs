//! This instance as a member of a [`Cluster`]: its inbox (requests from other instances,
//! answered from the runs in progress, [`super::live::LiveRuns`]), its requests to other
//! instances, and the leases its runs hold.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::oneshot;

use super::live::{LiveAbort, LiveRuns, ThreadKey};
use super::{Cluster, ClusterError, Command, ControlMessage, Outcome, thread_lease_key};
use crate::lease::Lease;

/// Lazy recovery of a thread: continues the runs an instance that died left on the thread
/// (still `running` in the store, their lease free), so that they go before `new_run`, which
/// is about to take the thread. Implemented where every agent is known (the run control
/// layer); the periodic sweep finds the same runs when no new run comes.
pub(crate) trait ThreadRecovery: Send + Sync {
    /// Returns once the recovered runs hold the thread (or a bounded wait passed).
    fn recover<'a>(
        &'a self,
        thread: &'a ThreadKey,
        new_run: &'a str,
    ) -> futures::future::BoxFuture<'a, ()>;
}

/// The runs of one workflow going on in this process, by run id: what another instance's
/// cancel reaches (implemented by the workflows, a layer above).
pub(crate) trait LiveSignals: Send + Sync {
    /// The abort signal of run `run_id`, if it goes on here.
    fn signal(&self, run_id: &str) -> Option<crate::abort::AbortSignal>;
}

pub(crate) struct ClusterRuntime {
    pub(crate) config: Cluster,
    /// Requests sent, waiting for their answer.
    pending: Mutex<HashMap<String, oneshot::Sender<Outcome>>>,
    /// The runs going on here of each workflow given this cluster, by workflow id (an
    /// agent's networks are built per call: several sets may share an id).
    workflows: Mutex<HashMap<String, Vec<Weak<dyn LiveSignals>>>>,
    /// The inbox reader, stopped when the runtime goes.
    listener: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for ClusterRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterRuntime")
            .field("instance", &self.config.id())
            .finish_non_exhaustive()
    }
}

impl Drop for ClusterRuntime {
    fn drop(&mut self) {
        if let Some(listener) = lock(&self.listener).take() {
            listener.abort();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl ClusterRuntime {
    /// Starts reading this instance's inbox (on the current tokio runtime), answering from
    /// `registry`.
    pub(crate) fn start(
        config: Cluster,
        registry: Weak<dyn LiveRuns>,
        handle: &tokio::runtime::Handle,
    ) -> Arc<Self> {
        let runtime = Arc::new(Self {
            config,
            pending: Mutex::new(HashMap::new()),
            workflows: Mutex::new(HashMap::new()),
            listener: Mutex::new(None),
        });
        let task = handle.spawn(listen(Arc::downgrade(&runtime), registry));
        *lock(&runtime.listener) = Some(task);
        runtime
    }

    pub(crate) fn instance(&self) -> &str {
        self.config.id()
    }

    /// Makes the runs of workflow `id` going on here (`live`) reachable by other instances'
    /// cancels.
    pub(crate) fn register_workflow(&self, id: &str, live: Arc<dyn LiveSignals>) {
        let mut workflows = lock(&self.workflows);
        let sets = workflows.entry(id.to_owned()).or_default();
        sets.retain(|set| set.strong_count() > 0);
        let same =
            |set: &Weak<dyn LiveSignals>| std::ptr::addr_eq(set.as_ptr(), Arc::as_ptr(&live));
        if !sets.iter().any(same) {
            sets.push(Arc::downgrade(&live));
        }
    }

    /// The abort signal of run `run_id` of workflow `workflow_id`, if it goes on here.
    fn live_workflow_run(
        &self,
        workflow_id: &str,
        run_id: &str,
    ) -> Option<crate::abort::AbortSignal> {
        let workflows = lock(&self.workflows);
        workflows
            .get(workflow_id)?
            .iter()
            .filter_map(Weak::upgrade)
            .find_map(|live| live.signal(run_id))
    }

    /// Sends `body` to `instance` and waits for its answer.
    pub(crate) async fn request(
        &self,
        instance: &str,
        body: Command,
    ) -> Result<Outcome, ClusterError> {
        let id = crate::id::new_id();
        let (sender, receiver) = oneshot::channel();
        lock(&self.pending).insert(id.clone(), sender);
        let message = ControlMessage {
            id: id.clone(),
            from: self.instance().to_owned(),
            body,
        };
        if let Err(e) = self.config.bus.send(instance, &message).await {
            lock(&self.pending).remove(&id);
            return Err(e.into());
        }
        let timeout = self.config.request_timeout;
        match tokio::time::timeout(timeout, receiver).await {
            Ok(Ok(outcome)) => Ok(outcome),
            _ => {
                lock(&self.pending).remove(&id);
                Err(ClusterError::NoAnswer {
                    instance: instance.to_owned(),
                    timeout,
                })
            }
        }
    }

    /// The instance holding `key`'s lease, when it is another than this one.
    pub(crate) async fn other_holder(&self, key: &str) -> Result<Option<Lease>, ClusterError> {
        let lease = self.config.leases.holder(key).await?;
        Ok(lease.filter(|l| holder_instance(&l.holder) != self.instance()))
    }

    /// Takes `key` for `holder` (this instance, or `<instance>/<run>`), renewed until the
    /// returned hold is released or dropped; `None` when someone else holds it.
    pub(crate) async fn acquire(
        self: &Arc<Self>,
        key: String,
        holder: &str,
    ) -> Result<Option<Hold>, ClusterError> {
        let ttl = self.config.lease_ttl;
        let Some(lease) = self.config.leases.acquire(&key, holder, ttl).await? else {
            return Ok(None);
        };
        Ok(Some(Hold::renewed(Arc::clone(self), lease)))
    }
}

impl ClusterRuntime {
    /// Waits until this instance's run `run_id` holds `thread`'s lease (other instances'
    /// runs on the thread go first).
    pub(crate) async fn wait_for_thread(
        self: &Arc<Self>,
        thread: &ThreadKey,
        run_id: &str,
    ) -> Result<Hold, ClusterError> {
        let key = thread_lease_key(&thread.resource_id, &thread.thread_id);
        let holder = run_holder(self.instance(), run_id);
        let mut delay = Duration::from_millis(5);
        loop {
            if let Some(hold) = self.acquire(key.clone(), &holder).await? {
                return Ok(hold);
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_millis(200));
        }
    }
}

/// The holder of a lease a run of this instance takes: `<instance>/<run>`, or for a run id
/// over [`crate::lease::MAX_PLAIN_KEY_LEN`] bytes `<instance>/~sha256:<hex>` (an instance
/// id has at most 200 bytes: the holder stays within every provider's limit).
pub(crate) fn run_holder(instance: &str, run_id: &str) -> String {
    if run_id.len() <= crate::lease::MAX_PLAIN_KEY_LEN {
        format!("{instance}/{run_id}")
    } else {
        format!(
            "{instance}/{HASHED_RUN}{}",
            crate::lease::sha256_hex(run_id.as_bytes())
        )
    }
}

/// Marks a holder's run part as a long run id's hash.
const HASHED_RUN: &str = "~sha256:";

/// The instance id of a lease holder (`<instance>` or `<instance>/<run>`).
pub(crate) fn holder_instance(holder: &str) -> &str {
    holder
        .split_once('/')
        .map_or(holder, |(instance, _)| instance)
}

/// The run named by a thread lease's holder (`<instance>/<run>`).
pub(crate) fn holder_run(holder: &str) -> Option<&str> {
    holder
        .split_once('/')
        .map(|(_, run)| run)
        // A long run id's hash does not name the run.
        .filter(|run| !run.starts_with(HASHED_RUN))
}

/// Reads the inbox until the runtime goes, reconnecting when the bus fails.
async fn listen(runtime: Weak<ClusterRuntime>, registry: Weak<dyn LiveRuns>) {
    let mut delay = Duration::from_millis(50);
    loop {
        let inbox = {
            let Some(runtime) = runtime.upgrade() else {
                return;
            };
            runtime.config.bus.inbox(runtime.instance()).await
        };
        let mut inbox = match inbox {
            Ok(inbox) => inbox,
            Err(error) => {
                tracing::warn!(%error, ?delay, "cannot read this instance's inbox; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        delay = Duration::from_millis(50);
        while let Some(message) = inbox.next().await {
            let (Some(runtime), Some(registry)) = (runtime.upgrade(), registry.upgrade()) else {
                return;
            };
            if let Err(reason) = message.check() {
                tracing::warn!(%reason, "dropping an invalid message from this instance's inbox");
                continue;
            }
            runtime.handle(registry.as_ref(), message).await;
        }
        tracing::debug!("this instance's inbox ended; reading it again");
    }
}

impl ClusterRuntime {
    async fn handle(&self, registry: &dyn LiveRuns, message: ControlMessage) {
        let outcome = match message.body {
            Command::Reply { to, outcome } => {
                if let Some(waiting) = lock(&self.pending).remove(&to) {
                    let _ = waiting.send(outcome);
                }
                return;
            }
            Command::CancelWorkflowRun {
                workflow_id,
                run_id,
            } => match self.live_workflow_run(&workflow_id, &run_id) {
                Some(signal) => {
                    signal.abort();
                    Outcome::Done { count: 1 }
                }
                None => Outcome::NotLive,
            },
            Command::AbortRun {
                run_id,
                resource_id,
            } => match registry.abort_run_of(&run_id, resource_id.as_deref()) {
                LiveAbort::Aborted => Outcome::Done { count: 1 },
                LiveAbort::OtherResource => Outcome::OtherResource,
                LiveAbort::NotLive => Outcome::NotLive,
            },
            Command::AbortThread {
                resource_id,
                thread_id,
            } => Outcome::Done {
                count: registry.abort_thread(&ThreadKey {
                    resource_id,
                    thread_id,
                }),
            },
            Command::Deliver {
                resource_id,
                thread_id,
                message: delivered,
            } => {
                let thread = ThreadKey {
                    resource_id,
                    thread_id,
                };
                match registry.deliver(&thread, delivered) {
                    Ok(run_id) => Outcome::Delivered { run_id },
                    Err(_) => Outcome::NotLive,
                }
            }
            Command::PauseRun { run_id } => {
                if registry.pause_run(&run_id) {
                    Outcome::Done { count: 1 }
                } else {
                    Outcome::NotLive
                }
            }
        };
        let reply = ControlMessage {
            id: crate::id::new_id(),
            from: self.instance().to_owned(),
            body: Command::Reply {
                to: message.id,
                outcome,
            },
        };
        if let Err(error) = self.config.bus.send(&message.from, &reply).await {
            tracing::warn!(to = %message.from, %error, "could not answer a request");
        }
    }
}

/// A lease this instance holds, renewed every third of its time-to-live until released (or
/// dropped, which releases it in the background).
pub(crate) struct Hold {
    runtime: Arc<ClusterRuntime>,
    lease: Lease,
    renewer: tokio::task::JoinHandle<()>,
    released: bool,
}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hold").field("lease", &self.lease).finish()
    }
}

impl Hold {
    fn renewed(runtime: Arc<ClusterRuntime>, lease: Lease) -> Self {
        let renewer = tokio::spawn(renew(Arc::clone(&runtime), lease.clone()));
        Self {
            runtime,
            lease,
            renewer,
            released: false,
        }
    }

    /// The lease's fencing token.
    pub(crate) fn token(&self) -> u64 {
        self.lease.token
    }

    /// Gives the lease up now.
    pub(crate) async fn release(mut self) {
        self.renewer.abort();
        self.released = true;
        if let Err(error) = self.runtime.config.leases.release(&self.lease).await {
            tracing::warn!(key = %self.lease.key, %error, "releasing a lease failed; it runs out by itself");
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.renewer.abort();
        if self.released {
            return;
        }
        let (runtime, lease) = (Arc::clone(&self.runtime), self.lease.clone());
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = runtime.config.leases.release(&lease).await;
            });
        }
    }
}

/// Renews `lease` every third of the time-to-live until it is lost or the task is stopped.
async fn renew(runtime: Arc<ClusterRuntime>, lease: Lease) {
    let ttl = runtime.config.lease_ttl;
    let every = ttl / 3;
    loop {
        tokio::time::sleep(every).await;
        match runtime.config.leases.renew(&lease, ttl).await {
            Ok(true) => {}
            Ok(false) => {
                // Another instance owns it now; the stores refuse this one's writes.
                tracing::warn!(key = %lease.key, token = lease.token, "a lease was lost: its run's further writes will be refused");
                return;
            }
            Err(error) => {
                tracing::warn!(key = %lease.key, %error, "renewing a lease failed; trying again");
            }
        }
    }
}
