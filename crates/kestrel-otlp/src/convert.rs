//! From Kestrel's span records to OpenTelemetry's `SpanData`: the same trace and span ids,
//! names `"{operation} {identifier}"` and the `gen_ai.*` attributes of OpenTelemetry's GenAI
//! semantic conventions, with everything else Kestrel knows under `kestrel.*`.

use std::borrow::Cow;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kestrel_core::trace::{SpanRecord, SpanType};
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{Array, InstrumentationScope, KeyValue, StringValue, Value};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use serde_json::Value as Json;

/// The GenAI semantic conventions' attribute names. (The `opentelemetry-semantic-conventions`
/// crate marks its `GEN_AI_*` constants deprecated since they moved to their own repository;
/// the names themselves are the current ones.)
pub mod gen_ai {
    /// `invoke_agent`, `chat`, `execute_tool`, `invoke_workflow`.
    pub const OPERATION_NAME: &str = "gen_ai.operation.name";
    /// The agent's id.
    pub const AGENT_ID: &str = "gen_ai.agent.id";
    /// The agent's name.
    pub const AGENT_NAME: &str = "gen_ai.agent.name";
    /// The conversation: Kestrel's thread.
    pub const CONVERSATION_ID: &str = "gen_ai.conversation.id";
    /// The model's provider (`openai`, `anthropic`, `llama.cpp`...).
    pub const PROVIDER_NAME: &str = "gen_ai.provider.name";
    /// The model asked for.
    pub const REQUEST_MODEL: &str = "gen_ai.request.model";
    /// Why the model stopped, one per choice.
    pub const RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
    /// Tokens read.
    pub const USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
    /// Tokens generated.
    pub const USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
    /// What the model was given.
    pub const INPUT_MESSAGES: &str = "gen_ai.input.messages";
    /// What the model answered.
    pub const OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
    /// The tools an agent may call.
    pub const TOOL_DEFINITIONS: &str = "gen_ai.tool.definitions";
    /// The tool called.
    pub const TOOL_NAME: &str = "gen_ai.tool.name";
    /// `function` (an agent's tool) or `extension` (an MCP server's).
    pub const TOOL_TYPE: &str = "gen_ai.tool.type";
    /// The model's id for the call.
    pub const TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
    /// The call's arguments, as JSON.
    pub const TOOL_CALL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
    /// The call's result, as JSON.
    pub const TOOL_CALL_RESULT: &str = "gen_ai.tool.call.result";
    /// What kind of error ended the span.
    pub const ERROR_TYPE: &str = "error.type";
}

/// The GenAI operation a span type is, when it is one.
pub fn operation(span_type: SpanType) -> Option<&'static str> {
    match span_type {
        SpanType::AgentRun => Some("invoke_agent"),
        SpanType::ModelGeneration => Some("chat"),
        SpanType::ToolCall | SpanType::ClientToolCall | SpanType::McpToolCall => {
            Some("execute_tool")
        }
        SpanType::WorkflowRun => Some("invoke_workflow"),
        _ => None,
    }
}

/// The name a backend shows: `"{operation} {identifier}"` (`invoke_agent Weather Agent`,
/// `chat gpt-4o-mini`, `execute_tool get_weather`), or `"{span type} {identifier}"` for the
/// spans the conventions do not name (`workflow_step fetch`).
pub fn otel_name(span: &SpanRecord) -> String {
    let identifier = match span.span_type {
        SpanType::ModelGeneration => span
            .attributes
            .get("model")
            .and_then(Json::as_str)
            .map(str::to_owned),
        SpanType::AgentRun => span.entity_name.clone().or_else(|| span.entity_id.clone()),
        _ => span.entity_id.clone(),
    }
    .unwrap_or_else(|| span.name.clone());
    let operation = operation(span.span_type).unwrap_or(span.span_type.as_str());
    format!("{operation} {identifier}")
}

/// The span's kind: a model call is a client of the model's server, a request Kestrel's MCP
/// server answered is a server span, everything else is internal.
pub fn kind(span_type: SpanType) -> SpanKind {
    match span_type {
        SpanType::ModelGeneration | SpanType::McpToolCall => SpanKind::Client,
        SpanType::McpServerRequest => SpanKind::Server,
        _ => SpanKind::Internal,
    }
}

fn time(ns: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(ns)
}

/// A JSON value as an attribute: scalars as themselves, anything else as its JSON text.
fn attribute_value(value: &Json) -> Value {
    match value {
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::I64(i),
            None => Value::F64(n.as_f64().unwrap_or_default()),
        },
        Json::String(s) => Value::String(s.clone().into()),
        other => Value::String(other.to_string().into()),
    }
}

/// A JSON value as text: a string as itself, anything else as its JSON.
fn text(value: &Json) -> String {
    match value {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn push(attributes: &mut Vec<KeyValue>, key: &'static str, value: Option<impl Into<Value>>) {
    if let Some(value) = value {
        attributes.push(KeyValue::new(key, value));
    }
}

/// The `gen_ai.*` attributes of a span, from what Kestrel recorded.
fn gen_ai_attributes(span: &SpanRecord, out: &mut Vec<KeyValue>) {
    let attr = |key: &str| span.attributes.get(key);
    let Some(operation) = operation(span.span_type) else {
        return;
    };
    out.push(KeyValue::new(gen_ai::OPERATION_NAME, operation));
    push(
        out,
        gen_ai::CONVERSATION_ID,
        span.thread_id.clone().map(Value::from),
    );
    match span.span_type {
        SpanType::AgentRun => {
            push(
                out,
                gen_ai::AGENT_ID,
                span.entity_id.clone().map(Value::from),
            );
            push(
                out,
                gen_ai::AGENT_NAME,
                span.entity_name.clone().map(Value::from),
            );
            push(
                out,
                gen_ai::TOOL_DEFINITIONS,
                attr("availableTools").map(|tools| Value::from(tools.to_string())),
            );
        }
        SpanType::ModelGeneration => {
            push(
                out,
                gen_ai::PROVIDER_NAME,
                attr("provider").map(|p| Value::from(text(p))),
            );
            push(
                out,
                gen_ai::REQUEST_MODEL,
                attr("model").map(|m| Value::from(text(m))),
            );
            push(
                out,
                gen_ai::RESPONSE_FINISH_REASONS,
                attr("finishReason").map(|reason| {
                    Value::Array(Array::String(vec![StringValue::from(text(reason))]))
                }),
            );
            if let Some(usage) = attr("usage") {
                let tokens = |key: &str| usage.get(key).and_then(Json::as_i64).map(Value::I64);
                push(out, gen_ai::USAGE_INPUT_TOKENS, tokens("inputTokens"));
                push(out, gen_ai::USAGE_OUTPUT_TOKENS, tokens("outputTokens"));
            }
            push(
                out,
                gen_ai::INPUT_MESSAGES,
                span.input.as_ref().map(|input| Value::from(text(input))),
            );
            push(
                out,
                gen_ai::OUTPUT_MESSAGES,
                span.output
                    .as_ref()
                    .map(|output| Value::from(output.to_string())),
            );
        }
        SpanType::ToolCall | SpanType::ClientToolCall | SpanType::McpToolCall => {
            push(
                out,
                gen_ai::TOOL_NAME,
                span.entity_id.clone().map(Value::from),
            );
            let tool_type = if span.span_type == SpanType::McpToolCall {
                "extension"
            } else {
                "function"
            };
            out.push(KeyValue::new(gen_ai::TOOL_TYPE, tool_type));
            push(
                out,
                gen_ai::TOOL_CALL_ID,
                attr("toolCallId").map(|id| Value::from(text(id))),
            );
            push(
                out,
                gen_ai::TOOL_CALL_ARGUMENTS,
                span.input
                    .as_ref()
                    .map(|args| Value::from(args.to_string())),
            );
            push(
                out,
                gen_ai::TOOL_CALL_RESULT,
                span.output.as_ref().map(|result| Value::from(text(result))),
            );
        }
        _ => {}
    }
}

/// Everything else Kestrel recorded, under `kestrel.*`: the span's type and name, the run,
/// thread, resource and user, the entity, the input and output (JSON), each attribute and
/// metadata value, and the tags.
fn kestrel_attributes(span: &SpanRecord, out: &mut Vec<KeyValue>) {
    out.push(KeyValue::new("kestrel.span.type", span.span_type.as_str()));
    out.push(KeyValue::new("kestrel.span.name", span.name.clone()));
    let ids = [
        ("kestrel.run_id", &span.run_id),
        ("kestrel.thread_id", &span.thread_id),
        ("kestrel.resource_id", &span.resource_id),
        ("kestrel.user_id", &span.user_id),
        ("kestrel.entity.type", &span.entity_type),
        ("kestrel.entity.id", &span.entity_id),
        ("kestrel.entity.name", &span.entity_name),
    ];
    for (key, value) in ids {
        push(out, key, value.clone().map(Value::from));
    }
    push(
        out,
        "kestrel.input",
        span.input.as_ref().map(|v| Value::from(text(v))),
    );
    push(
        out,
        "kestrel.output",
        span.output.as_ref().map(|v| Value::from(text(v))),
    );
    for (key, value) in &span.attributes {
        out.push(KeyValue::new(
            format!("kestrel.attributes.{key}"),
            attribute_value(value),
        ));
    }
    for (key, value) in &span.metadata {
        out.push(KeyValue::new(
            format!("kestrel.metadata.{key}"),
            attribute_value(value),
        ));
    }
    if !span.tags.is_empty() {
        let tags = span.tags.iter().cloned().map(StringValue::from).collect();
        out.push(KeyValue::new(
            "kestrel.tags",
            Value::Array(Array::String(tags)),
        ));
    }
}

/// Why a record cannot be exported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConvertError {
    /// Its trace id is not 32 hex digits.
    #[error("span {span_id}: trace id {trace_id:?} is not 32 hex digits")]
    TraceId {
        /// The span.
        span_id: String,
        /// The id found.
        trace_id: String,
    },
    /// Its span id (or its parent's) is not 16 hex digits.
    #[error("span id {0:?} is not 16 hex digits")]
    SpanId(String),
}

fn span_id(id: &str) -> Result<SpanId, ConvertError> {
    SpanId::from_hex(id)
        .ok()
        .filter(|id| *id != SpanId::INVALID)
        .ok_or_else(|| ConvertError::SpanId(id.to_owned()))
}

/// `span` as OpenTelemetry's `SpanData`, recorded by `scope`, its ids unchanged.
pub fn span_data(
    span: &SpanRecord,
    scope: &InstrumentationScope,
) -> Result<SpanData, ConvertError> {
    let trace_id = TraceId::from_hex(&span.trace_id)
        .ok()
        .filter(|id| *id != TraceId::INVALID)
        .ok_or_else(|| ConvertError::TraceId {
            span_id: span.span_id.clone(),
            trace_id: span.trace_id.clone(),
        })?;
    let parent = match &span.parent_span_id {
        Some(parent) => span_id(parent)?,
        None => SpanId::INVALID,
    };
    let mut attributes = Vec::with_capacity(16 + span.attributes.len() + span.metadata.len());
    gen_ai_attributes(span, &mut attributes);
    kestrel_attributes(span, &mut attributes);
    let status = match &span.error {
        Some(error) => {
            push(
                &mut attributes,
                gen_ai::ERROR_TYPE,
                Some(Value::from(
                    error.kind.clone().unwrap_or_else(|| "error".into()),
                )),
            );
            Status::error(error.message.clone())
        }
        None => Status::Ok,
    };
    Ok(SpanData {
        span_context: SpanContext::new(
            trace_id,
            span_id(&span.span_id)?,
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
        parent_span_id: parent,
        parent_span_is_remote: false,
        span_kind: kind(span.span_type),
        name: Cow::Owned(otel_name(span)),
        start_time: time(span.started_at),
        end_time: time(span.ended_at.max(span.started_at)),
        attributes,
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status,
        instrumentation_scope: scope.clone(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use kestrel_core::trace::{InMemorySpanStore, SpanStore, Tracer, TracingConfig};
    use std::sync::Arc;

    fn value<'a>(data: &'a SpanData, key: &str) -> Option<&'a Value> {
        data.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| &kv.value)
    }

    async fn recorded() -> Vec<SpanRecord> {
        let store = Arc::new(InMemorySpanStore::default());
        let tracer = Tracer::storing(TracingConfig::new(), store.clone(), Vec::new());
        let mut run = tracer
            .start(None, SpanType::AgentRun, "agent run: 'weather'")
            .unwrap();
        run.entity("agent", "weather", Some("Weather Agent"));
        run.scope("run-1", Some("thread-1"), Some("user-1"));
        let mut model = tracer
            .start(Some(&run.context()), SpanType::ModelGeneration, "llm: 'm'")
            .unwrap();
        model.attribute("model", "gpt-test");
        model.attribute("provider", "openai");
        model.attribute("finishReason", "tool-calls");
        model.attribute(
            "usage",
            serde_json::json!({"inputTokens": 12, "outputTokens": 3, "totalTokens": 15}),
        );
        model.end();
        let mut tool = tracer
            .start(
                Some(&run.context()),
                SpanType::ToolCall,
                "tool: 'get_weather'",
            )
            .unwrap();
        tool.entity("tool", "get_weather", None);
        tool.attribute("toolCallId", "call-1");
        tool.input(serde_json::json!({"city": "Lisbon"}));
        tool.fail("no network", Some("tool"));
        run.end();
        tracer.flush().await;
        let trace = store.list_traces(&Default::default()).await.unwrap();
        store.trace(&trace.traces[0].root.trace_id).await.unwrap()
    }

    #[tokio::test]
    async fn records_become_genai_spans_with_the_same_ids() {
        let scope = InstrumentationScope::builder("kestrel").build();
        let spans = recorded().await;
        let by_type = |t: SpanType| {
            let record = spans.iter().find(|s| s.span_type == t).unwrap();
            (record, span_data(record, &scope).unwrap())
        };
        let (agent, data) = by_type(SpanType::AgentRun);
        assert_eq!(data.name, "invoke_agent Weather Agent");
        assert_eq!(data.span_context.trace_id().to_string(), agent.trace_id);
        assert_eq!(data.span_context.span_id().to_string(), agent.span_id);
        assert_eq!(data.parent_span_id, SpanId::INVALID);
        assert_eq!(data.span_kind, SpanKind::Internal);
        assert_eq!(
            value(&data, gen_ai::AGENT_NAME),
            Some(&Value::from("Weather Agent"))
        );
        assert_eq!(
            value(&data, gen_ai::CONVERSATION_ID),
            Some(&Value::from("thread-1"))
        );

        let (model, data) = by_type(SpanType::ModelGeneration);
        assert_eq!(data.name, "chat gpt-test");
        assert_eq!(data.span_kind, SpanKind::Client);
        assert_eq!(
            data.parent_span_id.to_string(),
            model.parent_span_id.clone().unwrap()
        );
        assert_eq!(
            value(&data, gen_ai::USAGE_INPUT_TOKENS),
            Some(&Value::I64(12))
        );
        assert_eq!(
            value(&data, gen_ai::USAGE_OUTPUT_TOKENS),
            Some(&Value::I64(3))
        );
        assert_eq!(
            value(&data, gen_ai::PROVIDER_NAME),
            Some(&Value::from("openai"))
        );

        let (_, data) = by_type(SpanType::ToolCall);
        assert_eq!(data.name, "execute_tool get_weather");
        assert_eq!(
            value(&data, gen_ai::TOOL_CALL_ID),
            Some(&Value::from("call-1"))
        );
        assert_eq!(
            value(&data, gen_ai::TOOL_CALL_ARGUMENTS),
            Some(&Value::from(r#"{"city":"Lisbon"}"#))
        );
        assert_eq!(data.status, Status::error("no network"));
        assert_eq!(value(&data, gen_ai::ERROR_TYPE), Some(&Value::from("tool")));
        // Usage is on the model call only.
        assert!(value(&data, gen_ai::USAGE_INPUT_TOKENS).is_none());
    }

    #[tokio::test]
    async fn a_record_with_a_bad_id_is_refused_by_name() {
        let scope = InstrumentationScope::builder("kestrel").build();
        let mut span = recorded().await.remove(0);
        span.trace_id = "not-hex".into();
        let error = span_data(&span, &scope).unwrap_err();
        assert!(error.to_string().contains("not-hex"), "{error}");
    }
}
