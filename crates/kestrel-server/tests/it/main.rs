//! The integration tests of kestrel-server: routes over real sockets, the AI SDK chat route,
//! the OpenAPI document and the real JavaScript clients.
//!
//! One test binary per crate (each file a module): the workspace links far fewer binaries.

mod api;
mod bounds;
mod chat;
mod datasets;
mod hardening;
mod js_clients;
mod mcp;
mod memory;
mod networks;
mod observability;
mod openapi;
mod processors;
mod scores;
mod secrets;
mod skills;
mod stored_agents;
mod vectors;
mod workflows;
