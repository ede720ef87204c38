//! Several instances, one set of runs: who drives a run or a thread, and how a request that
//! reaches another instance finds it.
//!
//! A [`Kestrel`](crate::kestrel::Kestrel) instance given a [`Cluster`] shares its runs with the
//! other instances on the same store, leases and [`ControlBus`]:
//!
//! - the instance that drives a run holds the run's lease (`run:<id>`), and the one whose run
//!   is active on a thread holds the thread's (`thread:<resource>:<thread>`); both are renewed
//!   every third of their time-to-live while the run goes on;
//! - every snapshot and message the run writes carries the run lease's token, and the store
//!   refuses a token smaller than one it has seen (see [`crate::lease::Fence`]): an instance
//!   that lost a run (paused, cut off) cannot overwrite its successor's work;
//! - an abort, a message for a thread's active run or a pause that reaches an instance which
//!   does not drive the run is sent to the lease holder's inbox on the [`ControlBus`], and the
//!   holder answers what it did;
//! - approving, declining or resuming a stopped run takes its lease before the store's
//!   compare-and-set, so one decision wins across every instance and a run that another live
//!   instance drives is refused.
//!
//! Without a cluster (the default) none of this runs: one process, in-process leases and
//! queues, nothing fenced.

pub(crate) mod live;
pub(crate) mod member;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::lease::{InProcessLeases, LeaseProvider};
use crate::message::Message;
use crate::pubsub::PubSubError;

/// The lease time-to-live when none is set: an instance that dies is replaced this long after
/// its last renewal (Mastra's thread lease is 15 s too).
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(15);

/// How often an instance looks for runs whose instance died, to continue them.
pub const DEFAULT_SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// How long a request to another instance waits for its answer.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The key of a run's lease (bounded: a long id's key names its hash,
/// [`crate::lease::bounded_key`]).
pub fn run_lease_key(run_id: &str) -> String {
    crate::lease::bounded_key(format!("run:{run_id}"))
}

/// The key of a thread's lease. The resource id is length-prefixed so that no pair of ids
/// names another pair's key (bounded as [`run_lease_key`] is).
pub fn thread_lease_key(resource_id: &str, thread_id: &str) -> String {
    crate::lease::bounded_key(format!(
        "thread:{}:{resource_id}:{thread_id}",
        resource_id.len()
    ))
}

/// How this instance shares runs with others: its id, the leases, the control bus, and the
/// lease timings. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Cluster {
    pub(crate) instance_id: Arc<str>,
    pub(crate) leases: Arc<dyn LeaseProvider>,
    pub(crate) bus: Arc<dyn ControlBus>,
    pub(crate) lease_ttl: Duration,
    pub(crate) request_timeout: Duration,
    pub(crate) sweep_interval: Duration,
}

impl Cluster {
    /// Shares runs through `leases` and `bus` (on Redis: `kestrel_redis::RedisLeases` and
    /// `kestrel_redis::RedisPubSub`), as an instance with a fresh random id.
    pub fn new(leases: Arc<dyn LeaseProvider>, bus: Arc<dyn ControlBus>) -> Self {
        Self {
            instance_id: format!("instance-{}", crate::id::new_id()).into(),
            leases,
            bus,
            lease_ttl: DEFAULT_LEASE_TTL,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            sweep_interval: DEFAULT_SWEEP_INTERVAL,
        }
    }

    /// Instances in this process only, on in-process leases and bus: what tests of several
    /// instances in one process use. Give each instance a clone of one `Cluster` with its own
    /// [`Cluster::instance_id`].
    pub fn in_process() -> Self {
        Self::new(
            Arc::new(InProcessLeases::new()),
            Arc::new(InProcessBus::default()),
        )
    }

    /// Names this instance (default: `instance-<random>`). Ids must be unique among the
    /// instances sharing the leases; a restarted instance may take a new one.
    pub fn instance_id(mut self, id: impl Into<String>) -> Self {
        self.instance_id = id.into().into();
        self
    }

    /// How long a lease lasts without renewal (default [`DEFAULT_LEASE_TTL`], at least
    /// 100 ms): how long the runs of an instance that died wait before another takes them.
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = ttl.max(Duration::from_millis(100));
        self
    }

    /// How long a request to another instance waits for its answer (default
    /// [`DEFAULT_REQUEST_TIMEOUT`]).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout.max(Duration::from_millis(10));
        self
    }

    /// How often the instance looks for runs left `running` (or waiting for a sub-agent)
    /// by an instance that died, and continues them from their last snapshot (default
    /// [`DEFAULT_SWEEP_INTERVAL`]; [`Duration::ZERO`] turns the sweep off, leaving
    /// [`Kestrel::recover_runs`](crate::kestrel::Kestrel::recover_runs) to the caller). A run
    /// is taken over at most the lease's time-to-live plus this long after its instance died.
    pub fn sweep_interval(mut self, interval: Duration) -> Self {
        self.sweep_interval = interval;
        self
    }

    /// This instance's id.
    pub fn id(&self) -> &str {
        &self.instance_id
    }

    /// The lease time-to-live.
    pub fn ttl(&self) -> Duration {
        self.lease_ttl
    }
}

/// A message from one instance to another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ControlMessage {
    /// Unique; a reply names the request it answers by it.
    pub id: String,
    /// The sender's instance id (where the reply goes).
    pub from: String,
    /// What is asked or answered.
    pub body: Command,
}

/// The longest id a control message may carry (a run, thread, resource or workflow id: ids
/// the API takes are at most 256 characters, a kilobyte of UTF-8).
pub const MAX_MESSAGE_ID_LEN: usize = 1024;

/// The longest text a delivered message may carry (a server's body limit is a mebibyte).
pub const MAX_DELIVERED_TEXT: usize = 1024 * 1024;

impl ControlMessage {
    /// Checks a message read from the bus before it is acted on: the bus (Redis) is a trust
    /// boundary, and a message someone else wrote there must not make an instance do more
    /// than one from a peer could. `Err` names what is wrong.
    pub fn check(&self) -> Result<(), String> {
        let id = |what: &str, value: &str| {
            if value.is_empty() || value.len() > MAX_MESSAGE_ID_LEN {
                Err(format!("{what} must have 1 to {MAX_MESSAGE_ID_LEN} bytes"))
            } else if value.chars().any(char::is_control) {
                Err(format!("{what} holds a control character"))
            } else {
                Ok(())
            }
        };
        id("id", &self.id)?;
        id("from", &self.from)?;
        if self.from.len() > 200 || self.from.contains('/') {
            return Err("from is not an instance id".to_owned());
        }
        match &self.body {
            Command::AbortRun {
                run_id,
                resource_id,
            } => {
                id("runId", run_id)?;
                resource_id
                    .as_deref()
                    .map_or(Ok(()), |r| id("resourceId", r))
            }
            Command::AbortThread {
                resource_id,
                thread_id,
            } => {
                id("resourceId", resource_id)?;
                id("threadId", thread_id)
            }
            Command::Deliver {
                resource_id,
                thread_id,
                message,
            } => {
                id("resourceId", resource_id)?;
                id("threadId", thread_id)?;
                // A message or a signal: never words put in the model's or a tool's mouth.
                if !matches!(
                    message.role,
                    crate::message::Role::User | crate::message::Role::System
                ) {
                    return Err("a delivered message must be a user message or a signal".to_owned());
                }
                if message.text().len() > MAX_DELIVERED_TEXT {
                    return Err(format!(
                        "a delivered message may have at most {MAX_DELIVERED_TEXT} bytes of text"
                    ));
                }
                Ok(())
            }
            Command::PauseRun { run_id } => id("runId", run_id),
            Command::CancelWorkflowRun {
                workflow_id,
                run_id,
            } => {
                id("workflowId", workflow_id)?;
                id("runId", run_id)
            }
            Command::Reply { to, .. } => id("to", to),
        }
    }
}

/// What one instance asks another (or answers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Command {
    /// Abort the run, if it acts for `resource_id` (any, when `None`).
    AbortRun {
        /// The run.
        #[serde(rename = "runId")]
        run_id: String,
        /// The resource the caller is pinned to.
        #[serde(rename = "resourceId")]
        resource_id: Option<String>,
    },
    /// Abort every run of the thread.
    AbortThread {
        /// The thread's resource.
        #[serde(rename = "resourceId")]
        resource_id: String,
        /// The thread.
        #[serde(rename = "threadId")]
        thread_id: String,
    },
    /// Put a message into the thread's active run.
    Deliver {
        /// The thread's resource.
        #[serde(rename = "resourceId")]
        resource_id: String,
        /// The thread.
        #[serde(rename = "threadId")]
        thread_id: String,
        /// The message.
        message: Message,
    },
    /// Pause the run at its next step boundary.
    PauseRun {
        /// The run.
        #[serde(rename = "runId")]
        run_id: String,
    },
    /// Cancel the workflow run (the receiver drives it: its driver stops and stores it
    /// `canceled`).
    CancelWorkflowRun {
        /// The workflow.
        #[serde(rename = "workflowId")]
        workflow_id: String,
        /// The run.
        #[serde(rename = "runId")]
        run_id: String,
    },
    /// The answer to request `to`.
    Reply {
        /// The request's id.
        to: String,
        /// What the receiver did.
        outcome: Outcome,
    },
}

/// What an instance did with a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Outcome {
    /// The run (or this many runs of the thread) got its abort or pause signal.
    Done {
        /// How many runs.
        count: usize,
    },
    /// The message went into this run's next step.
    Delivered {
        /// The run.
        #[serde(rename = "runId")]
        run_id: String,
    },
    /// The run is in progress there, for another resource: left alone.
    OtherResource,
    /// Nothing of the kind is in progress there (it ended meanwhile).
    NotLive,
}

/// Why a request to another instance failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// The bus failed.
    #[error(transparent)]
    Bus(#[from] PubSubError),
    /// The leases failed.
    #[error(transparent)]
    Lease(#[from] crate::lease::LeaseError),
    /// The instance holding the lease did not answer in time (it may have died: its lease
    /// runs out and another instance takes its runs over).
    #[error("instance {instance:?} did not answer within {timeout:?}")]
    NoAnswer {
        /// The instance.
        instance: String,
        /// How long it was given.
        timeout: Duration,
    },
}

/// Carries [`ControlMessage`]s to an instance's inbox.
#[async_trait::async_trait]
pub trait ControlBus: Send + Sync + std::fmt::Debug {
    /// Sends `message` to the inbox of `instance` (it is lost if nobody reads it: a request
    /// then goes unanswered).
    async fn send(&self, instance: &str, message: &ControlMessage) -> Result<(), PubSubError>;

    /// The messages sent to `instance` from now on, until the stream is dropped.
    async fn inbox(
        &self,
        instance: &str,
    ) -> Result<BoxStream<'static, ControlMessage>, PubSubError>;
}

/// A [`ControlBus`] between the instances of one process (tests, and [`Cluster::in_process`]).
#[derive(Debug, Default)]
pub struct InProcessBus {
    inboxes: Mutex<HashMap<String, mpsc::UnboundedSender<ControlMessage>>>,
}

#[async_trait::async_trait]
impl ControlBus for InProcessBus {
    async fn send(&self, instance: &str, message: &ControlMessage) -> Result<(), PubSubError> {
        let mut inboxes = self.inboxes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(inbox) = inboxes.get(instance)
            && inbox.send(message.clone()).is_err()
        {
            inboxes.remove(instance);
        }
        Ok(())
    }

    async fn inbox(
        &self,
        instance: &str,
    ) -> Result<BoxStream<'static, ControlMessage>, PubSubError> {
        let (sender, receiver) = mpsc::unbounded_channel();
        self.inboxes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(instance.to_owned(), sender);
        Ok(Box::pin(futures::stream::unfold(
            receiver,
            |mut receiver| async move { receiver.recv().await.map(|m| (m, receiver)) },
        )))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::message::Message;

    fn message(body: Command) -> ControlMessage {
        ControlMessage {
            id: "m1".into(),
            from: "web-1".into(),
            body,
        }
    }

    #[test]
    fn messages_read_from_the_bus_are_checked() {
        let pause = |run_id: &str| {
            message(Command::PauseRun {
                run_id: run_id.into(),
            })
        };
        assert!(pause("run-1").check().is_ok());
        assert!(pause("").check().unwrap_err().contains("runId"));
        assert!(
            pause(&"x".repeat(1025))
                .check()
                .unwrap_err()
                .contains("runId")
        );
        assert!(pause("a\u{0}b").check().unwrap_err().contains("control"));
        let mut forged = pause("run-1");
        forged.from = "web-1/run-9".into();
        assert!(forged.check().unwrap_err().contains("from"));
        let deliver = |message: Message| {
            super::tests::message(Command::Deliver {
                resource_id: "alice".into(),
                thread_id: "t1".into(),
                message,
            })
        };
        assert!(deliver(Message::user("hi")).check().is_ok());
        assert!(deliver(Message::system("a signal")).check().is_ok());
        let put_in_its_mouth = deliver(Message::assistant("I approve")).check();
        assert!(put_in_its_mouth.unwrap_err().contains("user message"));
        let huge = deliver(Message::user("x".repeat(MAX_DELIVERED_TEXT + 1))).check();
        assert!(huge.unwrap_err().contains("at most"));
        let cancel = message(Command::CancelWorkflowRun {
            workflow_id: String::new(),
            run_id: "r".into(),
        });
        assert!(cancel.check().unwrap_err().contains("workflowId"));
    }
}
