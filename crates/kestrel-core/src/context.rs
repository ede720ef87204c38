//! The per-request key/value bag passed to dynamic configuration, tools and sub-agents.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The request context key of the resource a run acts for (set by a server that pins an
/// authenticated caller to a resource).
pub const RESOURCE_ID_KEY: &str = "kestrel.resourceId";

/// The request context key of the thread a run belongs to.
pub const THREAD_ID_KEY: &str = "kestrel.threadId";

/// The request context key of the run's id.
pub const RUN_ID_KEY: &str = "kestrel.runId";

/// The request context key under which every delegation hook failure of a run is recorded, as a
/// list of `{hook, primitiveId, toolCallId, runId, name, message}`.
pub const DELEGATION_HOOK_ERRORS_KEY: &str = "kestrel.delegationHookErrors";

/// Keys that describe the run they were set for, not the request: a delegation's copy of the
/// context leaves them out, so a sub-agent never runs under its parent's identity (it has its
/// own thread, resource and run) nor inherits its parent's hook error log.
pub const RUN_IDENTITY_KEYS: [&str; 4] = [
    RESOURCE_ID_KEY,
    THREAD_ID_KEY,
    RUN_ID_KEY,
    DELEGATION_HOOK_ERRORS_KEY,
];

/// The request context key of message ids memory leaves out of a run's history (a JSON array
/// of strings): a chat regenerate hides the answer it replaces this way, and deletes it only
/// once the new answer is stored, so a failed regenerate loses nothing.
pub const HIDDEN_MESSAGES_KEY: &str = "kestrel.hiddenMessageIds";

/// The prefix of the request context keys the framework sets itself (the run's thread,
/// resource and id, the delegation depth, hook errors). A server drops such keys from
/// request bodies: a caller cannot claim another identity or depth through them.
pub const RESERVED_KEY_PREFIX: &str = "kestrel.";

/// The key under which a nested workflow's run names the workflow that runs it: such a run is
/// continued by its outer run (a restart of the outer run restarts it), not on its own.
pub const PARENT_WORKFLOW_KEY: &str = "kestrel.parentWorkflow";

/// Whether `key` is one the framework reserves ([`RESERVED_KEY_PREFIX`]).
pub fn is_reserved_key(key: &str) -> bool {
    key.starts_with(RESERVED_KEY_PREFIX)
}

/// A map of JSON values that travels with a run: to instruction and model functions, to every
/// tool call, and (as a shallow copy) to delegated sub-agents.
///
/// Clones share the same map, so a tool's `set` is visible to the rest of the run. Use
/// [`RequestContext::snapshot`] for an independent copy.
#[derive(Debug, Clone, Default)]
pub struct RequestContext {
    inner: Arc<RwLock<BTreeMap<String, Value>>>,
}

impl RequestContext {
    /// An empty context.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads a value.
    pub fn get(&self, key: &str) -> Option<Value> {
        self.read().get(key).cloned()
    }

    /// Reads a value as a string, if it is one.
    pub fn get_str(&self, key: &str) -> Option<String> {
        self.read()
            .get(key)
            .and_then(|v| v.as_str().map(str::to_string))
    }

    /// Sets a value and returns the previous one.
    pub fn set(&self, key: impl Into<String>, value: impl Into<Value>) -> Option<Value> {
        self.write().insert(key.into(), value.into())
    }

    /// Removes a value.
    pub fn remove(&self, key: &str) -> Option<Value> {
        self.write().remove(key)
    }

    /// Whether the key is present.
    pub fn contains(&self, key: &str) -> bool {
        self.read().contains_key(key)
    }

    /// An independent copy of the current entries.
    pub fn snapshot(&self) -> RequestContext {
        RequestContext::from(self.to_map())
    }

    /// An independent copy without the run identity keys ([`RUN_IDENTITY_KEYS`]): what a
    /// delegated sub-agent gets.
    pub fn delegation_copy(&self) -> RequestContext {
        let mut map = self.to_map();
        for key in RUN_IDENTITY_KEYS {
            map.remove(key);
        }
        RequestContext::from(map)
    }

    /// The entries as a plain map.
    pub fn to_map(&self) -> BTreeMap<String, Value> {
        self.read().clone()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Value>> {
        // A poisoned lock only means another thread panicked mid-write of a plain map; the map
        // itself is still valid, so keep serving it.
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Value>> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }
}

impl From<BTreeMap<String, Value>> for RequestContext {
    fn from(map: BTreeMap<String, Value>) -> Self {
        Self {
            inner: Arc::new(RwLock::new(map)),
        }
    }
}

impl Serialize for RequestContext {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.read().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RequestContext {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        BTreeMap::<String, Value>::deserialize(deserializer).map(RequestContext::from)
    }
}
