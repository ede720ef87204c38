//! The agents' processors, under Mastra's routes:
//!
//! - `GET /processors`: every processor of the agents, by id, with its hooks (`phases`), the
//!   agents that run it and where (`configurations`: input or output);
//! - `GET /processors/{processorId}`: one of them;
//! - `POST /processors/{processorId}/execute`: runs one hook of it over messages a caller
//!   sends (`input`, `inputStep`, `outputStep`, `outputResult`), to try a guardrail without
//!   an agent run. A tripwire is an answer (`success: false`, `tripwire.triggered`), not an
//!   error status.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use kestrel_core::abort::AbortSignal;
use kestrel_core::message::{Message, Part, Role};
use kestrel_core::model::{FinishReason, ToolChoice};
use kestrel_core::processor::{
    Pipeline, ProcessorContext, ProcessorPhase, SharedProcessor, Stopped,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::auth::Caller;
use crate::openapi::{Doc, Routes};
use crate::wire::Body;
use crate::{ApiError, AppState};

type Shared = State<Arc<AppState>>;

const TAG: &str = "processors";

pub(crate) fn routes() -> Routes<Arc<AppState>> {
    Routes::new()
        .get(
            "/processors",
            list_processors,
            Doc::json(TAG, "The agents' processors, by id")
                .returns::<BTreeMap<String, ProcessorView>>(),
        )
        .get(
            "/processors/{processor_id}",
            get_processor,
            Doc::json(TAG, "One processor").returns::<ProcessorView>(),
        )
        .post(
            "/processors/{processor_id}/execute",
            execute,
            Doc::json(TAG, "Run one hook of a processor over messages")
                .body::<ExecuteBody>()
                .returns::<Executed>(),
        )
}

/// A processor as listed (Mastra's shape).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ProcessorView {
    /// Its id.
    id: String,
    /// Its name.
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    /// What it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    /// The hooks it implements (`input`, `inputStep`, `outputStream`, `outputStep`,
    /// `outputResult`, `toolResult`, `apiError`).
    phases: Vec<ProcessorPhase>,
    /// The agents that run it.
    agent_ids: Vec<String>,
    /// Where each agent runs it.
    configurations: Vec<Configuration>,
    /// Whether it is a workflow (never, here).
    is_workflow: bool,
}

/// An agent running a processor, and in which pipeline.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct Configuration {
    /// The agent.
    agent_id: String,
    /// `input` or `output`.
    #[serde(rename = "type")]
    kind: &'static str,
}

/// `POST /processors/{id}/execute`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ExecuteBody {
    /// The hook.
    phase: ExecutePhase,
    /// The messages: strings, `{role, content}` with a string or parts, or Mastra's
    /// `{role, content: {format: 2, parts}}`.
    #[schemars(schema_with = "execute_messages_schema")]
    messages: Vec<Value>,
    /// The agent whose processor of this id runs (default: the first agent that has one).
    #[schemars(length(min = 1, max = 512))]
    agent_id: Option<String>,
    /// The request context the hook sees.
    request_context: Option<Map<String, Value>>,
}

/// The hooks that run over messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
enum ExecutePhase {
    /// `process_input`.
    Input,
    /// `process_input_step`.
    InputStep,
    /// `process_output_step`.
    OutputStep,
    /// `process_output_result`.
    OutputResult,
}

impl ExecutePhase {
    fn phase(self) -> ProcessorPhase {
        match self {
            Self::Input => ProcessorPhase::Input,
            Self::InputStep => ProcessorPhase::InputStep,
            Self::OutputStep => ProcessorPhase::OutputStep,
            Self::OutputResult => ProcessorPhase::OutputResult,
        }
    }
}

/// 1 to 200 messages: non-blank strings, or `{role, content}` with non-blank text.
fn execute_messages_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let text = json!({"type": "string", "pattern": "\\S"});
    let part = json!({
        "type": "object",
        "properties": {"type": {"const": "text"}, "text": text},
        "required": ["type", "text"],
    });
    let message = json!({
        "type": "object",
        "properties": {
            "role": {"enum": ["user", "assistant", "system"]},
            "content": {"anyOf": [text, {"type": "array", "items": part, "minItems": 1}]},
        },
        "required": ["role", "content"],
    });
    schemars::json_schema!({
        "type": "array",
        "items": {"anyOf": [text, message]},
        "minItems": 1,
        "maxItems": 200,
    })
}

/// What a hook made of the messages.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct Executed {
    /// Whether the hook let the messages through.
    success: bool,
    /// The hook.
    phase: String,
    /// The messages as the hook left them (Mastra's `{id, role, content: {format: 2,
    /// parts}}`), when it let them through.
    #[serde(skip_serializing_if = "Option::is_none")]
    messages: Option<Vec<Value>>,
    /// `{messages}`, the same messages (Mastra's clients read either).
    #[serde(skip_serializing_if = "Option::is_none")]
    message_list: Option<Value>,
    /// Whether the hook stopped the run, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    tripwire: Option<Value>,
    /// What the hook reported doing.
    decisions: Vec<Value>,
    /// Why the processor failed, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Every processor of the agents: `(agent id, pipeline kind, processor)`.
fn all(state: &AppState) -> Vec<(String, &'static str, SharedProcessor)> {
    let mut out = Vec::new();
    for agent in state.kestrel.agents() {
        for p in agent.input_processors() {
            out.push((agent.id().to_owned(), "input", Arc::clone(p)));
        }
        for p in agent.output_processors() {
            out.push((agent.id().to_owned(), "output", Arc::clone(p)));
        }
    }
    out
}

fn views(state: &AppState) -> BTreeMap<String, ProcessorView> {
    let mut views: BTreeMap<String, ProcessorView> = BTreeMap::new();
    for (agent_id, kind, processor) in all(state) {
        let view = views
            .entry(processor.id().to_owned())
            .or_insert_with(|| ProcessorView {
                id: processor.id().to_owned(),
                name: processor.name().map(str::to_owned),
                description: processor.description().map(str::to_owned),
                phases: processor.phases().iter().collect(),
                agent_ids: Vec::new(),
                configurations: Vec::new(),
                is_workflow: false,
            });
        if !view.agent_ids.contains(&agent_id) {
            view.agent_ids.push(agent_id.clone());
        }
        view.configurations.push(Configuration { agent_id, kind });
    }
    views
}

async fn list_processors(
    State(state): Shared,
    _caller: Caller,
) -> Json<BTreeMap<String, ProcessorView>> {
    Json(views(&state))
}

fn unknown(id: &str) -> ApiError {
    ApiError::not_found(format!("processor {id:?} not found"))
}

async fn get_processor(
    State(state): Shared,
    _caller: Caller,
    Path(processor_id): Path<String>,
) -> Result<Json<ProcessorView>, ApiError> {
    views(&state)
        .remove(&processor_id)
        .map(Json)
        .ok_or_else(|| unknown(&processor_id))
}

/// A message of the body as the wire's messages take it (Mastra's `content: {format: 2,
/// parts}` unwrapped).
fn unwrapped(item: &Value) -> Value {
    let mut item = item.clone();
    if let Some(object) = item.as_object_mut()
        && let Some(Value::Object(content)) = object.get("content")
    {
        let parts = content.get("parts").cloned().unwrap_or(Value::Null);
        object.remove("content");
        object.insert("parts".into(), parts);
    }
    item
}

/// A message in Mastra's stored shape.
fn db_message(index: usize, message: &Message) -> Value {
    let parts: Vec<Value> = message
        .parts
        .iter()
        .filter_map(|part| match part {
            Part::Text { text } => Some(json!({"type": "text", "text": text})),
            _ => None,
        })
        .collect();
    let role = match message.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    json!({
        "id": if message.id.is_empty() { format!("msg-{index}") } else { message.id.clone() },
        "role": role,
        "content": {"format": 2, "parts": parts},
    })
}

async fn execute(
    State(state): Shared,
    caller: Caller,
    Path(processor_id): Path<String>,
    Body(body): Body<ExecuteBody>,
) -> Result<Json<Executed>, ApiError> {
    let phase = body.phase.phase();
    if body.messages.is_empty() || body.messages.len() > 200 {
        return Err(ApiError::invalid("messages must hold 1 to 200 messages"));
    }
    let processor = all(&state)
        .into_iter()
        .find(|(agent, _, p)| {
            p.id() == processor_id && body.agent_id.as_ref().is_none_or(|a| a == agent)
        })
        .map(|(_, _, p)| p)
        .ok_or_else(|| match &body.agent_id {
            Some(agent) => ApiError::not_found(format!(
                "processor {processor_id:?} not found on agent {agent:?}"
            )),
            None => unknown(&processor_id),
        })?;
    if !processor.phases().contains(phase) {
        return Err(ApiError::not_found(format!(
            "processor {processor_id:?} has no {} hook",
            phase.as_str()
        )));
    }
    let items: Vec<Value> = body.messages.iter().map(unwrapped).collect();
    let mut messages = crate::wire::input_messages(&Value::Array(items), true)?;
    let context = crate::wire::client_context(body.request_context);
    if let Some(resource) = &caller.resource {
        context.set(kestrel_core::context::RESOURCE_ID_KEY, resource.as_str());
    }
    let run_id = format!("processor-execute-{}", kestrel_core::id::new_id());
    let agent_id = body.agent_id.clone().unwrap_or_default();
    let abort = AbortSignal::new();
    let pipeline = Pipeline::new(vec![processor]);
    let cx = ProcessorContext::new(&run_id, &agent_id, &context, &abort);
    let outcome = match phase {
        ProcessorPhase::Input => pipeline.input(&cx, None, &mut messages, &[]).await,
        ProcessorPhase::InputStep => {
            let (system, mut rest): (Vec<Message>, Vec<Message>) =
                messages.drain(..).partition(|m| m.role == Role::System);
            let mut system: Vec<String> = system.iter().map(Message::text).collect();
            let outcome = pipeline
                .input_step(
                    &cx,
                    None,
                    0,
                    &mut rest,
                    0,
                    &mut system,
                    &mut Vec::new(),
                    &mut ToolChoice::default(),
                )
                .await;
            messages = system.into_iter().map(Message::system).collect();
            messages.extend(rest);
            outcome
        }
        _ => {
            // The answer is the last assistant message (a user's text is judged as one when
            // there is none).
            let at = messages
                .iter()
                .rposition(|m| m.role == Role::Assistant)
                .unwrap_or(messages.len() - 1);
            let mut text = messages[at].text();
            let history = &messages[..at];
            let outcome = if phase == ProcessorPhase::OutputStep {
                pipeline
                    .output_step(
                        &cx,
                        None,
                        0,
                        &mut text,
                        "",
                        &[],
                        &[],
                        FinishReason::Stop,
                        history,
                    )
                    .await
            } else {
                pipeline
                    .output_result(&cx, None, &mut text, &[], history, Default::default())
                    .await
            };
            messages[at].parts = vec![Part::Text { text }];
            outcome
        }
    };
    let mut executed = Executed {
        success: true,
        phase: phase.as_str().to_owned(),
        messages: None,
        message_list: None,
        tripwire: None,
        decisions: Vec::new(),
        error: None,
    };
    match outcome {
        Ok(decisions) => {
            let listed: Vec<Value> = messages
                .iter()
                .enumerate()
                .map(|(i, m)| db_message(i, m))
                .collect();
            executed.message_list = Some(json!({"messages": listed}));
            executed.messages = Some(listed);
            executed.decisions = decisions
                .iter()
                .filter_map(|d| serde_json::to_value(d).ok())
                .collect();
        }
        Err(Stopped::Tripwire(tripwire)) => {
            executed.success = false;
            executed.tripwire = Some(json!({
                "triggered": true,
                "reason": tripwire.reason,
                "retry": tripwire.retry,
                "metadata": tripwire.metadata,
                "processorId": tripwire.processor_id,
            }));
        }
        Err(Stopped::Failed(failure)) => {
            tracing::warn!(%failure, "a processor failed in /execute");
            executed.success = false;
            executed.error = Some(failure.to_string());
        }
    }
    Ok(Json(executed))
}
