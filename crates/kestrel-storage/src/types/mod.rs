//! The records the store keeps and the queries it answers.
//!
//! Timestamps are UTC with microsecond precision on every backend (the store truncates what it is
//! given), so a record reads back equal to what was written, whichever backend holds it.
//! One domain a module, all re-exported here.

mod agents;
mod messages;
mod observations;
mod page;
mod queue;
mod runs;
mod threads;
mod vectors;
mod workflows;

pub use agents::*;
pub use messages::*;
pub use observations::*;
pub use page::*;
pub use queue::*;
pub use runs::*;
pub use threads::*;
pub use vectors::*;
pub use workflows::*;

use chrono::{DateTime, SubsecRound, Utc};
use serde_json::Value;

/// Now, truncated to microseconds (the precision every backend keeps).
pub fn now() -> DateTime<Utc> {
    truncate(Utc::now())
}

/// A time truncated to microseconds.
pub fn truncate(at: DateTime<Utc>) -> DateTime<Utc> {
    at.trunc_subsecs(6)
}

/// A JSON object, the shape of every `metadata` field.
pub type Metadata = serde_json::Map<String, Value>;
