//! Kestrel's core: models, tools, agents, runs and the event stream.
//!
//! - [`model`]: the streaming [`model::LanguageModel`] trait, the provider registry and the
//!   [`model::ScriptedModel`] for tests;
//! - [`providers`]: OpenAI-compatible and Anthropic providers (features `openai`, `anthropic`);
//! - [`tool`]: tools, their schemas, validation and context;
//! - [`run`]: the run machine: a run's serialisable state and every decision of its loop,
//!   as plain functions without I/O;
//! - [`definition`]: what an agent is before it runs: options, hooks, sub-agents, errors;
//! - [`runtime`]: where agents run (the environment their runs share) and the driver that
//!   performs what the run machine asks;
//! - [`control`]: run control: decisions for stopped runs, pause, resume and abort by id;
//! - [`agent`]: the surface users write against: [`agent::Agent`], its builder, `generate` and
//!   `stream`, and every type of the layers above, re-exported;
//! - [`workflow`]: typed steps composed with then / parallel / branch into workflows whose
//!   runs stream the same events;
//! - [`event`]: the one event enum whose JSON is the wire format;
//! - [`skill`]: skills (`SKILL.md` folders and inline skills), their catalog and tools;
//! - [`version`]: versions of agents (drafts, one published) and the choice of one per run;
//! - [`memory`]: the hook through which agents load and store conversations;
//! - [`embedding`]: the [`embedding::Embedder`] trait and its registry, for semantic recall;
//! - [`processor`]: processors with Mastra's hooks (input, step, stream, result, tool result,
//!   provider error) and the tripwires that stop a run;
//! - [`eval`]: scorers ([`eval::create_scorer`]'s pipeline, judges), trajectories and the
//!   sampling of live runs;
//! - [`store`]: the durable ports (stopped runs, workflow runs, the message queue, agent
//!   versions) and [`store::Stores`], the bundle an instance is given once;
//! - [`pubsub`]: how a thread's watchers get the events of its runs;
//! - [`trace`]: AI tracing: spans with Mastra's types, sampled, redacted, recorded off the
//!   runs, and the span store they are read back from;
//! - [`kestrel`]: the instance that registers agents;
//! - [`schema`] (JSON schemas), [`error`] (the boxed error of user code), [`context`],
//!   [`abort`], [`message`], [`id`]: the small pieces every layer uses.
//!
//! Users normally depend on the `kestrel` facade crate, which re-exports this one.

pub mod abort;
pub mod agent;
pub mod cluster;
pub mod context;
pub mod control;
pub mod definition;
mod delegation;
pub mod embedding;
pub mod error;
pub mod eval;
pub mod event;
pub mod id;
pub mod kestrel;
pub mod lease;
pub mod memory;
pub mod message;
pub mod model;
pub mod network;
pub mod processor;
#[cfg(feature = "http")]
pub mod providers;
pub mod pubsub;
pub mod run;
pub mod runtime;
pub mod schema;
mod scope;
mod sink;
pub mod skill;
pub mod store;
pub mod tool;
pub mod trace;
pub mod version;
pub mod workflow;
