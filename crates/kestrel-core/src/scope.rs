//! The conversation a run belongs to ([`MemoryScope`], public as
//! [`crate::memory::MemoryScope`]): a leaf, so the stores that key by thread (the message
//! queue) and the memory hook that is handed the stores do not name each other.

use serde::{Deserialize, Serialize};

/// The conversation a run belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryScope {
    /// The thread (one conversation).
    pub thread_id: String,
    /// Its owner (a user, an organisation...).
    pub resource_id: String,
}
