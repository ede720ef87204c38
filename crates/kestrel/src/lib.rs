//! Kestrel: an agent framework for Rust.
//!
//! Agents call tools, stream every step as [`event::Event`]s whose JSON is the wire format, and
//! run as serialisable state machines so a run can stop and continue elsewhere. Start with
//! [`prelude`]:
//!
//! ```
//! use std::sync::Arc;
//! use kestrel::prelude::*;
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let model = ScriptedModel::new()
//!     .respond(ScriptedResponse::tool_call("c1", "add", json!({"a": 2, "b": 3})))
//!     .respond(ScriptedResponse::text("2 + 3 = 5"));
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Add { a: i64, b: i64 }
//!
//! let agent = Agent::builder("calculator")
//!     .instructions("Use the add tool.")
//!     .model(Arc::new(model))
//!     .tool(create_tool("add").description("Adds").execute(|i: Add, _ctx| async move {
//!         Ok(i.a + i.b)
//!     }))
//!     .build()?;
//! let result = agent.generate("What is 2 + 3?").await?;
//! assert_eq!(result.text, "2 + 3 = 5");
//! # Ok(()) }
//! ```

pub use kestrel_core::*;

/// Memory for agents: threads, recent history, titles, working memory, semantic recall and
/// observational memory (feature `memory`, implied by `sqlite` and `postgres`). See
/// [`kestrel_memory`].
#[cfg(feature = "memory")]
pub mod memory {
    pub use kestrel_memory::*;
}

/// Stores: in-memory, SQLite (feature `sqlite`) and PostgreSQL (feature `postgres`). See
/// [`kestrel_storage`](kestrel_memory::kestrel_storage).
#[cfg(feature = "memory")]
pub mod storage {
    pub use kestrel_memory::kestrel_storage::*;
}

/// The HTTP server: Mastra's agent routes under `/api` with SSE streams (feature `server`).
/// See [`kestrel_server`].
#[cfg(feature = "server")]
pub mod server {
    pub use kestrel_server::*;
}

/// The types most programs need.
pub mod prelude {
    pub use kestrel_core::abort::AbortSignal;
    pub use kestrel_core::agent::{
        Agent, AgentError, AgentStream, ErrorStrategy, GenerateResult, RunControlError, RunOptions,
        RunState, StructuredOutput, ToolCallRef,
    };
    pub use kestrel_core::context::RequestContext;
    pub use kestrel_core::event::{Event, EventKind};
    pub use kestrel_core::kestrel::Kestrel;
    pub use kestrel_core::message::{Message, Part, Role};
    pub use kestrel_core::model::{
        FinishReason, LanguageModel, ModelRegistry, ScriptedModel, ScriptedResponse, Usage,
    };
    pub use kestrel_core::tool::{Tool, ToolContext, ToolError, create_tool};
}
