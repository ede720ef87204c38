//! What a span is: its type (Mastra's span types), its ids, and the record a finished span
//! leaves ([`SpanRecord`], Mastra's `mastra_ai_spans` columns).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What a span stands for: Mastra's span types, with their names on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SpanType {
    /// An agent's run.
    AgentRun,
    /// A model call, from the request to the last chunk.
    ModelGeneration,
    /// One step of a run's model loop.
    ModelStep,
    /// A tool call run by the agent.
    ToolCall,
    /// A tool call run by the caller (a client tool).
    ClientToolCall,
    /// A tool of an MCP server, called by Kestrel's client.
    McpToolCall,
    /// A request an MCP client made to Kestrel's server.
    McpServerRequest,
    /// A workflow's run.
    WorkflowRun,
    /// One step of a workflow.
    WorkflowStep,
    /// A branch: which conditions held.
    WorkflowConditional,
    /// One condition of a branch.
    WorkflowConditionalEval,
    /// Steps run side by side.
    WorkflowParallel,
    /// A loop (`dowhile`, `dountil`, `foreach`).
    WorkflowLoop,
    /// A sleep.
    WorkflowSleep,
    /// A wait for an event.
    WorkflowWaitEvent,
    /// Memory read or written (recall, persist, observations).
    MemoryOperation,
    /// A processor run on a run's input or output.
    ProcessorRun,
    /// A scorer run.
    ScorerRun,
    /// Anything else.
    Generic,
}

impl SpanType {
    /// The wire name (`agent_run`, `tool_call`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AgentRun => "agent_run",
            Self::ModelGeneration => "model_generation",
            Self::ModelStep => "model_step",
            Self::ToolCall => "tool_call",
            Self::ClientToolCall => "client_tool_call",
            Self::McpToolCall => "mcp_tool_call",
            Self::McpServerRequest => "mcp_server_request",
            Self::WorkflowRun => "workflow_run",
            Self::WorkflowStep => "workflow_step",
            Self::WorkflowConditional => "workflow_conditional",
            Self::WorkflowConditionalEval => "workflow_conditional_eval",
            Self::WorkflowParallel => "workflow_parallel",
            Self::WorkflowLoop => "workflow_loop",
            Self::WorkflowSleep => "workflow_sleep",
            Self::WorkflowWaitEvent => "workflow_wait_event",
            Self::MemoryOperation => "memory_operation",
            Self::ProcessorRun => "processor_run",
            Self::ScorerRun => "scorer_run",
            Self::Generic => "generic",
        }
    }
}

/// Where a span sits: the trace it belongs to and the span it hangs under. A run carries the
/// context of its own span, so the spans it starts (model calls, tools, sub-agents) are its
/// children, and a run continued later (a resume, a takeover) stays in its trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TraceContext {
    /// 32 lowercase hex digits.
    pub trace_id: String,
    /// The span new spans hang under (16 lowercase hex digits), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_span_id: Option<String>,
}

impl TraceContext {
    /// A new trace, with no parent span.
    pub fn new_trace() -> Self {
        Self {
            trace_id: new_trace_id(),
            parent_span_id: None,
        }
    }

    /// The context of a W3C `traceparent` header (`00-<trace id>-<span id>-<flags>`), or
    /// `None` when it is not one.
    pub fn from_traceparent(header: &str) -> Option<Self> {
        let mut parts = header.trim().split('-');
        let (version, trace_id, span_id, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some()
            || !is_hex(version, 2)
            || version == "ff"
            || !is_hex_id(trace_id, 32)
            || !is_hex_id(span_id, 16)
            || !is_hex(flags, 2)
        {
            return None;
        }
        Some(Self {
            trace_id: trace_id.to_owned(),
            parent_span_id: Some(span_id.to_owned()),
        })
    }

    /// Whether `id` is a trace id: 32 lowercase hex digits, not all zero.
    pub fn is_trace_id(id: &str) -> bool {
        is_hex_id(id, 32)
    }

    /// Whether `id` is a span id: 16 lowercase hex digits, not all zero.
    pub fn is_span_id(id: &str) -> bool {
        is_hex_id(id, 16)
    }
}

/// Whether `id` is `len` lowercase hex digits, not all zero.
fn is_hex_id(id: &str, len: usize) -> bool {
    is_hex(id, len) && !id.bytes().all(|b| b == b'0')
}

/// Whether `text` is `len` lowercase hex digits.
fn is_hex(text: &str, len: usize) -> bool {
    text.len() == len
        && text
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// A fresh trace id: 32 lowercase hex digits (a random UUID's).
pub fn new_trace_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// A fresh span id: 16 lowercase hex digits.
pub fn new_span_id() -> String {
    // Encoded on the stack, then the half kept copied: one small allocation.
    let mut buffer = [0u8; uuid::fmt::Simple::LENGTH];
    let hex = uuid::Uuid::new_v4().simple().encode_lower(&mut buffer);
    hex.get(..16).unwrap_or(hex).to_owned()
}

/// What a caller says about a run's trace, beside where it goes
/// ([`RunOptions::trace`](crate::agent::RunOptions::trace)): Mastra's `tracingOptions`. Kept
/// with the run, so a run continued later keeps them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TracingOptions {
    /// The run's span's name instead of `agent run: '<id>'`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_span_name: Option<String>,
    /// Tags of the run's span, to find it by.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Metadata of the run's span (redacted as inputs are).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
    /// The user the run acts for (the traces list filters by it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
}

impl TracingOptions {
    /// No options.
    pub fn new() -> Self {
        Self::default()
    }

    /// Names the run's span.
    pub fn root_span_name(mut self, name: impl Into<String>) -> Self {
        self.root_span_name = Some(name.into());
        self
    }

    /// Adds a tag.
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.tags.push(tag.into());
        self
    }

    /// Adds a metadata entry.
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// Names the user.
    pub fn user_id(mut self, user: impl Into<String>) -> Self {
        self.user_id = Some(user.into());
        self
    }
}

/// Why a span failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpanError {
    /// What went wrong, for a person.
    pub message: String,
    /// A stable kind (`tool`, `model`, `aborted`, ...), when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// A finished (or, for a run stopped for a person, stopped) span, as stored and exported:
/// Mastra's `mastra_ai_spans` columns, in camelCase on the wire. Times are Unix nanoseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SpanRecord {
    /// The trace (32 hex digits).
    pub trace_id: String,
    /// The span (16 hex digits).
    pub span_id: String,
    /// The span it hangs under; `None` for a trace's root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_span_id: Option<String>,
    /// `agent run: 'weather'`, `tool: 'get_weather'`, ...
    pub name: String,
    /// What it stands for.
    pub span_type: SpanType,
    /// When it started (Unix nanoseconds).
    pub started_at: u64,
    /// When it ended (Unix nanoseconds).
    pub ended_at: u64,
    /// Its attributes (per span type: usage and finish reason on a model call, the call id on
    /// a tool call...).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub attributes: Map<String, Value>,
    /// What went in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// What came out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<SpanError>,
    /// `agent`, `workflow`, `tool`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity_type: Option<String>,
    /// The agent's, workflow's or tool's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity_id: Option<String>,
    /// Its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity_name: Option<String>,
    /// The run it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The thread, when the run uses memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// The resource, when the run uses memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_id: Option<String>,
    /// The user, when the caller named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// The caller's metadata.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
    /// The caller's tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

impl SpanRecord {
    /// Whether it failed.
    pub fn is_error(&self) -> bool {
        self.error.is_some()
    }

    /// Whether it is its trace's root.
    pub fn is_root(&self) -> bool {
        self.parent_span_id.is_none()
    }

    /// How long it took, in nanoseconds.
    pub fn duration_ns(&self) -> u64 {
        self.ended_at.saturating_sub(self.started_at)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn ids_are_hex_of_the_right_length() {
        let trace = new_trace_id();
        assert!(TraceContext::is_trace_id(&trace), "{trace}");
        let span = new_span_id();
        assert!(TraceContext::is_span_id(&span), "{span}");
        assert_ne!(new_trace_id(), trace);
    }

    #[test]
    fn a_traceparent_header_gives_the_trace_and_the_parent() {
        let ctx = TraceContext::from_traceparent(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )
        .unwrap();
        assert_eq!(ctx.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(ctx.parent_span_id.as_deref(), Some("00f067aa0ba902b7"));
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert!(TraceContext::from_traceparent(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn span_types_have_mastras_names() {
        assert_eq!(
            serde_json::to_value(SpanType::ModelGeneration).unwrap(),
            "model_generation"
        );
        assert_eq!(SpanType::ToolCall.as_str(), "tool_call");
        let back: SpanType = serde_json::from_value("workflow_step".into()).unwrap();
        assert_eq!(back, SpanType::WorkflowStep);
    }
}
