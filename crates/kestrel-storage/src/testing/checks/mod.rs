//! The checks of the conformance suite, one public `async fn` each.
//!
//! One module per area checked; every check (and the public helpers) is re-exported here.

mod agents;
mod datasets;
mod helpers;
mod messages;
mod observations;
mod queue;
mod runs;
mod scores;
mod span_retention;
mod spans;
mod threads;
mod vectors;
mod workflows;
mod working_memory;

pub use agents::*;
pub use datasets::*;
pub use helpers::*;
pub use messages::*;
pub use observations::*;
pub use queue::*;
pub use runs::*;
pub use scores::*;
pub use span_retention::*;
pub use spans::*;
pub use threads::*;
pub use vectors::*;
pub use workflows::*;
pub use working_memory::*;
