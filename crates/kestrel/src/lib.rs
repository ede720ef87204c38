//! Kestrel: an agent framework for Rust.
//!
//! An [`Agent`](agent::Agent) is instructions, a model and tools, run in a loop of steps: the
//! model answers or calls tools, the tools run, the model reads their results. Every step is
//! streamed as [`Event`](event::Event)s whose JSON is the wire format (the server, the Studio
//! and the CLI read the same stream); every run is a serialisable
//! [`RunState`](run::RunState), so it can stop for a person, be stored, and continue in another
//! process. The vocabulary is Mastra's: agent, tool, thread, resource, run, delegation,
//! suspend, resume.
//!
//! The three programs most users start from follow; they run as they are, on the
//! [`ScriptedModel`](model::ScriptedModel) that tests use. Name a hosted model instead
//! (`.model("openai/gpt-5-mini")`), or none for the embedded local default (feature `local`).
//!
//! # An agent with a tool
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
//! let result = agent.generate("What is 2 + 3?").max_steps(3).await?;
//! assert_eq!(result.text, "2 + 3 = 5");
//! # Ok(()) }
//! ```
//!
//! `agent.stream("…").await?` gives the same run as events instead; tools that are structs
//! implement [`TypedTool`](tool::TypedTool).
//!
//! # An agent that remembers
//!
//! Memory (feature `memory`, with `sqlite` or `postgres` for a store that outlives the
//! process) keeps each conversation as a thread owned by a resource (the user):
//!
//! ```
//! # #[cfg(feature = "memory")]
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use kestrel::memory::Memory;
//! use kestrel::prelude::*;
//! use kestrel::storage::InMemoryStorage;
//!
//! let model = Arc::new(
//!     ScriptedModel::new()
//!         .respond(ScriptedResponse::text("Hello, Ada."))
//!         .respond(ScriptedResponse::text("You are Ada.")),
//! );
//! let agent = Agent::builder("assistant")
//!     .model(model.clone())
//!     .memory(Memory::new(Arc::new(InMemoryStorage::new())))
//!     .build()?;
//! agent.generate("I am Ada.").memory("thread-1", "user-ada").await?;
//! let answer = agent.generate("Who am I?").memory("thread-1", "user-ada").await?;
//! assert_eq!(answer.text, "You are Ada.");
//! // The second call's model saw the first exchange, loaded from the thread.
//! let seen: Vec<String> = model.requests()[1].messages.iter().map(|m| m.text()).collect();
//! assert_eq!(seen, ["I am Ada.", "Hello, Ada.", "Who am I?"]);
//! # Ok(()) }
//! # #[cfg(not(feature = "memory"))]
//! # fn main() {}
//! ```
//!
//! # A person in the loop
//!
//! A tool that needs approval stops the run; the run is saved, and a decision (from another
//! request, or after a restart with a durable run store) continues it:
//!
//! ```
//! use std::sync::Arc;
//! use kestrel::prelude::*;
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let model = ScriptedModel::new()
//!     .respond(ScriptedResponse::tool_call("c1", "refund", json!({"cents": 1200})))
//!     .respond(ScriptedResponse::text("Refunded."));
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Refund { cents: u64 }
//!
//! let refund = create_tool("refund")
//!     .description("Refunds the customer")
//!     .require_approval(true)
//!     .execute(|r: Refund, _ctx| async move { Ok(json!({ "refunded": r.cents })) });
//! let agent = Agent::builder("support").model(Arc::new(model)).tool(refund).build()?;
//!
//! let stopped = agent.generate("Refund my order").await?;
//! assert_eq!(stopped.finish_reason, FinishReason::Suspended);
//! let call = &stopped.waiting[0];
//! let done = agent
//!     .run(&stopped.run_id)
//!     .approve(&call.tool_call_id)
//!     .await?;
//! assert_eq!(done.text, "Refunded.");
//! # Ok(()) }
//! ```
//!
//! # Where things are
//!
//! - [`agent`]: agents, their builder, run options, run control (approve, decline, resume,
//!   pause, abort), delegation to sub-agents;
//! - [`run`]: the run machine: a run's state and every decision of its loop, without I/O;
//! - [`tool`]: tools, their schemas and context; [`model`]: the model trait, providers, the
//!   registry; [`event`]: the event enum;
//! - `memory` and `storage` (feature `memory`), `server` (feature `server`);
//! - [`kestrel`](mod@kestrel): the instance that registers agents and shares one runtime.

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

/// Several instances on one Redis: [`RedisCluster`](kestrel_redis::RedisCluster) gives the
/// pub/sub and the cluster membership (feature `redis`). See [`kestrel_redis`].
#[cfg(feature = "redis")]
pub mod redis {
    pub use kestrel_redis::*;
}

/// MCP: MCP servers' tools for agents ([`McpClient`](kestrel_mcp::McpClient)), and Kestrel's
/// tools, agents and workflows served to MCP clients ([`McpServer`](kestrel_mcp::McpServer)).
#[cfg(feature = "mcp")]
pub mod mcp {
    pub use kestrel_mcp::*;
}

/// Traces over OTLP: [`OtlpExporter`](kestrel_otlp::OtlpExporter) sends an instance's spans
/// to any OpenTelemetry backend with the GenAI conventions (feature `otlp`). See
/// [`kestrel_otlp`].
#[cfg(feature = "otlp")]
pub mod otlp {
    pub use kestrel_otlp::*;
}

/// Retrieval-augmented generation: documents, Mastra's chunking strategies, vector stores
/// (in memory, SQLite; pgvector with feature `pgvector`), embedding in batches, ingest and the
/// vector query tool (feature `rag`). See [`kestrel_rag`].
#[cfg(feature = "rag")]
pub mod rag {
    pub use kestrel_rag::*;
}

/// Mastra's prebuilt scorers: the deterministic code scorers (content similarity, textual
/// difference, keyword coverage, completeness, tone, tool-call and trajectory accuracy) and the
/// LLM judges (feature `evals`). The scorer pipeline, live scoring and the score store are in
/// [`eval`] and [`store`]. See [`kestrel_evals`].
#[cfg(feature = "evals")]
pub mod evals {
    pub use kestrel_evals::*;
}

/// The built-in processors and guardrails: unicode normalizer, regex filter (presets for
/// secrets, personal data and URLs), PII detector, prompt-injection and moderation checks
/// (a model, failing closed), token limiter, system prompt scrubber and tool-call filter
/// (feature `processors`). The [`Processor`](processor::Processor) trait and tripwires are in
/// [`processor`]. See [`kestrel_processors`].
#[cfg(feature = "processors")]
pub mod processors {
    pub use kestrel_processors::*;
}

/// The local embedder: all-MiniLM-L6-v2 in-process on the CPU, 384 dimensions (feature
/// `embed-local`). See [`kestrel_embed_local`].
#[cfg(feature = "embed-local")]
pub mod embed_local {
    pub use kestrel_embed_local::*;
}

/// The types most programs need.
pub mod prelude {
    pub use kestrel_core::abort::AbortSignal;
    pub use kestrel_core::agent::{
        Agent, AgentError, AgentStream, ErrorStrategy, GenerateResult, RunControlError, RunOptions,
        RunState, StructuredOutput,
    };
    pub use kestrel_core::context::RequestContext;
    pub use kestrel_core::event::{Event, EventKind};
    pub use kestrel_core::kestrel::Kestrel;
    pub use kestrel_core::message::{Message, Part, Role};
    pub use kestrel_core::model::{
        FinishReason, LanguageModel, ModelRegistry, ScriptedModel, ScriptedResponse, Usage,
    };
    pub use kestrel_core::skill::{Skill, create_skill};
    pub use kestrel_core::tool::{Tool, ToolContext, ToolError, TypedTool, create_tool};
}
