//! Request bodies, in Mastra's camelCase JSON, and what a run answers ([`RunResult`]).
//!
//! Bodies accept the fields Mastra's clients send; fields this server does not use are
//! ignored (a client written for Mastra may send more), but a known field of the wrong type
//! is a 400 that names it.
//!
//! - [`crate::ids`] (re-exported here): what a caller may name and how long it may be;
//! - `run_body`: the body of `generate` and `stream`, and what a token lets it ask;
//! - `messages`: `messages` as Mastra's clients write them;
//! - `decisions` and `send`: decisions, resumes, aborts, and messages into a thread;
//! - `extract`: the JSON extractors that answer a bad body with a named 400 or 422;
//! - `result`: what a run answers without streaming ([`RunResult`]).

mod decisions;
mod extract;
mod messages;
mod result;
mod run_body;
mod send;

pub(crate) use crate::ids::*;
pub(crate) use decisions::*;
pub(crate) use extract::{Body, MaybeBody};
pub(crate) use messages::input_messages;
use messages::messages_schema;
pub(crate) use result::RunResult;
pub(crate) use run_body::*;
pub(crate) use send::*;
