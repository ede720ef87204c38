//! OpenAI Chat Completions streaming, which also serves every OpenAI-compatible server
//! (DeepSeek, OpenRouter, Groq, Ollama, vLLM, llama.cpp server, LM Studio...).
//!
//! Responses are parsed tolerantly: every field is optional and unknown fields are ignored, since
//! compatible servers differ in what they send. Reasoning arrives as `reasoning_content`
//! (DeepSeek, vLLM) or `reasoning` (OpenRouter, Ollama); both become
//! [`ModelEvent::ReasoningDelta`]. Reasoning parts of earlier assistant messages are not sent
//! back.

use std::collections::HashMap;

use eventsource_stream::Event;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::HttpConfig;
use super::http::{self, HttpClient, Progress, SharedClient, SseDecoder};
use crate::message::{Message, Part, Role};
use crate::model::{
    FinishReason, LanguageModel, ModelError, ModelEvent, ModelRequest, ModelStream, ResponseFormat,
    ToolChoice, ToolDefinition, Usage,
};

/// OpenAI's API root.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// A model served over the OpenAI Chat Completions API (`POST {base_url}/chat/completions`).
///
/// ```no_run
/// use kestrel_core::providers::{HttpConfig, openai::OpenAiCompatible};
///
/// // A local vLLM server.
/// let model = OpenAiCompatible::new(
///     "vllm",
///     "Qwen/Qwen3-8B",
///     HttpConfig::new("http://127.0.0.1:8000/v1"),
/// );
/// ```
pub struct OpenAiCompatible {
    model_id: String,
    http: HttpClient,
    max_completion_tokens: bool,
}

impl std::fmt::Debug for OpenAiCompatible {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiCompatible")
            .field("provider", &self.http.provider())
            .field("model_id", &self.model_id)
            .field("config", self.http.config())
            .finish()
    }
}

impl OpenAiCompatible {
    /// A model `model_id` of `provider` (the name shown in errors and by
    /// [`LanguageModel::provider`]). The API key, if any, is sent as a bearer token.
    ///
    /// The output limit is sent as `max_completion_tokens` when `provider` is `openai` and as
    /// `max_tokens` otherwise, which is what most compatible servers understand; see
    /// [`OpenAiCompatible::with_max_completion_tokens`].
    pub fn new(
        provider: impl Into<String>,
        model_id: impl Into<String>,
        config: HttpConfig,
    ) -> Self {
        let provider = provider.into();
        let auth = config
            .api_key
            .as_ref()
            .map(|key| vec![("authorization", format!("Bearer {key}"))])
            .unwrap_or_default();
        Self {
            model_id: model_id.into(),
            max_completion_tokens: provider == "openai",
            http: HttpClient::new(provider, config, auth),
        }
    }

    /// An OpenAI model at the default base URL.
    pub fn openai(model_id: impl Into<String>, api_key: impl Into<String>) -> Self {
        Self::new(
            "openai",
            model_id,
            HttpConfig::new(DEFAULT_BASE_URL).with_api_key(api_key),
        )
    }

    /// Chooses whether the output limit is sent as `max_completion_tokens` (`true`) or as
    /// `max_tokens` (`false`).
    pub fn with_max_completion_tokens(mut self, yes: bool) -> Self {
        self.max_completion_tokens = yes;
        self
    }

    /// Shares `client` with other models built from the same [`HttpConfig`] (the registry's
    /// factories do this so that their models share one connection pool).
    pub(crate) fn with_shared_client(mut self, client: SharedClient) -> Self {
        self.http = self.http.share(client);
        self
    }

    /// The JSON body sent for `request`.
    fn request_body(&self, request: &ModelRequest) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model_id));
        body.insert(
            "messages".into(),
            Value::Array(wire_messages(&request.messages)),
        );
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({ "include_usage": true }));
        if !request.tools.is_empty() {
            body.insert(
                "tools".into(),
                request.tools.iter().map(wire_tool).collect(),
            );
            body.insert("tool_choice".into(), wire_tool_choice(&request.tool_choice));
        }
        if let Some(ResponseFormat::Json { schema, name }) = &request.response_format {
            body.insert(
                "response_format".into(),
                json!({
                    "type": "json_schema",
                    "json_schema": {
                        "name": name.as_deref().unwrap_or("response"),
                        "schema": schema,
                        "strict": false,
                    },
                }),
            );
        }
        let settings = &request.settings;
        if let Some(t) = settings.temperature {
            body.insert("temperature".into(), json!(t));
        }
        if let Some(p) = settings.top_p {
            body.insert("top_p".into(), json!(p));
        }
        if let Some(max) = settings.max_output_tokens {
            let key = if self.max_completion_tokens {
                "max_completion_tokens"
            } else {
                "max_tokens"
            };
            body.insert(key.into(), json!(max));
        }
        if !settings.stop_sequences.is_empty() {
            body.insert("stop".into(), json!(settings.stop_sequences));
        }
        if let Some(seed) = settings.seed {
            body.insert("seed".into(), json!(seed));
        }
        Value::Object(body)
    }
}

#[async_trait::async_trait]
impl LanguageModel for OpenAiCompatible {
    fn provider(&self) -> &str {
        self.http.provider()
    }

    fn model_id(&self) -> &str {
        &self.model_id
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let body = self.request_body(&request);
        let events = self
            .http
            .post_events("/chat/completions", &body, &request.abort)
            .await?;
        let decoder = ChunkDecoder::new(self.http.provider());
        Ok(http::decode_events(events, decoder, request.abort))
    }
}

// ---------------------------------------------------------------------------------------------
// Request conversion

/// Converts the conversation into Chat Completions messages.
fn wire_messages(messages: &[Message]) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        match message.role {
            Role::System => out.push(json!({ "role": "system", "content": message.text() })),
            Role::User => out.push(json!({ "role": "user", "content": message.text() })),
            Role::Assistant => out.push(assistant_message(message)),
            Role::Tool => {}
        }
        // Tool results become `tool` messages wherever they appear (normally in tool messages).
        for part in &message.parts {
            if let Part::ToolResult {
                tool_call_id,
                result,
                ..
            } = part
            {
                out.push(json!({
                    "role": "tool",
                    "tool_call_id": tool_call_id,
                    "content": value_as_text(result),
                }));
            }
        }
    }
    out
}

fn assistant_message(message: &Message) -> Value {
    let tool_calls: Vec<Value> = message
        .parts
        .iter()
        .filter_map(|part| match part {
            Part::ToolCall {
                tool_call_id,
                tool_name,
                args,
            } => Some(json!({
                "id": tool_call_id,
                "type": "function",
                "function": { "name": tool_name, "arguments": value_as_text(args) },
            })),
            _ => None,
        })
        .collect();
    let text = message.text();
    let mut wire = Map::new();
    wire.insert("role".into(), json!("assistant"));
    // OpenAI wants `content: null` rather than "" next to tool calls.
    let content = if text.is_empty() && !tool_calls.is_empty() {
        Value::Null
    } else {
        Value::String(text)
    };
    wire.insert("content".into(), content);
    if !tool_calls.is_empty() {
        wire.insert("tool_calls".into(), Value::Array(tool_calls));
    }
    Value::Object(wire)
}

/// JSON as the text the wire expects: strings as is (a tool result's text, or arguments the
/// model produced as invalid JSON), anything else serialized.
fn value_as_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn wire_tool(tool: &ToolDefinition) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.input_schema,
        },
    })
}

fn wire_tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Tool(name) => json!({ "type": "function", "function": { "name": name } }),
    }
}

// ---------------------------------------------------------------------------------------------
// Response parsing

/// One streamed chunk. Everything is optional: compatible servers omit or add fields freely.
#[derive(Debug, Deserialize)]
struct Chunk {
    choices: Option<Vec<Choice>>,
    usage: Option<WireUsage>,
    /// Some servers (OpenRouter, vLLM) report failures mid-stream this way.
    error: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    index: Option<u32>,
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Delta {
    content: Option<String>,
    reasoning_content: Option<String>,
    reasoning: Option<String>,
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Debug, Deserialize)]
struct ToolCallDelta {
    index: Option<u32>,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Debug, Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    /// A string on the wire; a few servers send the arguments as a JSON object instead.
    arguments: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    total_tokens: Option<u64>,
    completion_tokens_details: Option<CompletionTokensDetails>,
    prompt_tokens_details: Option<PromptTokensDetails>,
}

#[derive(Debug, Deserialize)]
struct CompletionTokensDetails {
    reasoning_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct PromptTokensDetails {
    cached_tokens: Option<u64>,
}

impl WireUsage {
    fn to_usage(&self) -> Usage {
        let mut usage = Usage::new(
            self.prompt_tokens.unwrap_or(0),
            self.completion_tokens.unwrap_or(0),
        );
        if let Some(total) = self.total_tokens {
            usage.total_tokens = total;
        }
        usage.reasoning_tokens = self
            .completion_tokens_details
            .as_ref()
            .and_then(|d| d.reasoning_tokens);
        usage.cached_input_tokens = self
            .prompt_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens);
        usage
    }
}

fn finish_reason(wire: &str) -> FinishReason {
    match wire {
        "stop" => FinishReason::Stop,
        "length" => FinishReason::Length,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

/// A tool call being assembled from its deltas.
#[derive(Debug)]
struct PendingCall {
    /// The wire `index`; calls are completed in this order.
    index: u32,
    id: String,
    /// Whether `id` came from the server (as opposed to minted by us).
    id_from_server: bool,
    name: Option<String>,
    arguments: String,
    /// Whether `ToolInputStart` was emitted (it needs the name, which may come late).
    started: bool,
}

/// Assembles model events from Chat Completions chunks.
///
/// Tool calls are keyed by their `index`: only the first delta of a call carries its `id` and
/// name, and the deltas of parallel calls may interleave. Calls are completed when the choice
/// finishes; `Finish` itself waits for the end of the stream, because the usage arrives in a
/// later, choice-less chunk.
#[derive(Debug)]
struct ChunkDecoder {
    provider: String,
    calls: Vec<PendingCall>,
    /// Position in `calls` of the latest call seen for each wire index.
    by_index: HashMap<u32, usize>,
    /// Whether any tool call was completed.
    called_tools: bool,
    finish_reason: Option<FinishReason>,
    usage: Option<Usage>,
}

impl ChunkDecoder {
    fn new(provider: &str) -> Self {
        Self {
            provider: provider.to_string(),
            calls: Vec::new(),
            by_index: HashMap::new(),
            called_tools: false,
            finish_reason: None,
            usage: None,
        }
    }

    fn on_chunk(&mut self, chunk: Chunk, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        if let Some(error) = chunk.error {
            return Err(self.stream_error(&error));
        }
        if let Some(usage) = &chunk.usage {
            self.usage = Some(usage.to_usage());
        }
        // We ask for one choice; ignore any others a server might add.
        let choices = chunk.choices.unwrap_or_default();
        for choice in choices.into_iter().filter(|c| c.index.unwrap_or(0) == 0) {
            if let Some(delta) = choice.delta {
                self.on_delta(delta, out);
            }
            let reason = choice.finish_reason.filter(|r| !r.is_empty());
            if let (Some(reason), None) = (reason, self.finish_reason) {
                self.complete_calls(out)?;
                self.finish_reason = Some(finish_reason(&reason));
            }
        }
        Ok(())
    }

    fn on_delta(&mut self, delta: Delta, out: &mut Vec<ModelEvent>) {
        let reasoning = [delta.reasoning_content, delta.reasoning]
            .into_iter()
            .flatten()
            .find(|text| !text.is_empty());
        if let Some(text) = reasoning {
            out.push(ModelEvent::ReasoningDelta { text });
        }
        if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
            out.push(ModelEvent::TextDelta { text });
        }
        for call in delta.tool_calls.unwrap_or_default() {
            self.on_tool_delta(call, out);
        }
    }

    fn on_tool_delta(&mut self, delta: ToolCallDelta, out: &mut Vec<ModelEvent>) {
        let id = delta.id.filter(|id| !id.is_empty());
        let (name, arguments) = match delta.function {
            Some(f) => (
                f.name.filter(|n| !n.is_empty()),
                match f.arguments {
                    Some(Value::String(text)) => text,
                    Some(Value::Null) | None => String::new(),
                    Some(other) => other.to_string(),
                },
            ),
            None => (None, String::new()),
        };
        let pos = self.call_position(delta.index, id);
        let call = &mut self.calls[pos];
        if call.name.is_none() {
            call.name = name;
        }
        call.arguments.push_str(&arguments);
        if call.started {
            if !arguments.is_empty() {
                out.push(ModelEvent::ToolInputDelta {
                    id: call.id.clone(),
                    delta: arguments,
                });
            }
        } else if call.name.is_some() {
            start_call(call, out);
        }
    }

    /// Finds the call a delta belongs to, or opens a new one.
    fn call_position(&mut self, index: Option<u32>, id: Option<String>) -> usize {
        let existing = match (index, &id) {
            (Some(index), _) => self.by_index.get(&index).copied().filter(|&pos| {
                // A new server-given id under a known index is a new call (some servers reuse
                // index 0 for every parallel call).
                let call = &self.calls[pos];
                id.as_ref()
                    .is_none_or(|id| !call.id_from_server || *id == call.id)
            }),
            (None, Some(id)) => self.calls.iter().position(|c| c.id == *id),
            // No index and no id: a continuation of the latest call.
            (None, None) => self.calls.len().checked_sub(1),
        };
        if let Some(pos) = existing {
            return pos;
        }
        let index =
            index.unwrap_or_else(|| self.calls.iter().map(|c| c.index + 1).max().unwrap_or(0));
        let id_from_server = id.is_some();
        self.calls.push(PendingCall {
            index,
            id: id.unwrap_or_else(mint_call_id),
            id_from_server,
            name: None,
            arguments: String::new(),
            started: false,
        });
        let pos = self.calls.len() - 1;
        self.by_index.insert(index, pos);
        pos
    }

    /// Emits `ToolInputEnd` and `ToolCall` for every open call, in index order.
    fn complete_calls(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        let mut calls = std::mem::take(&mut self.calls);
        self.by_index.clear();
        // Stable sort: calls sharing an index keep their arrival order.
        calls.sort_by_key(|c| c.index);
        for mut call in calls {
            let Some(name) = call.name.clone() else {
                return Err(ModelError::Protocol {
                    provider: self.provider.clone(),
                    message: format!(
                        "tool call {} (index {}) has no function name",
                        call.id, call.index
                    ),
                    line: None,
                });
            };
            if !call.started {
                start_call(&mut call, out);
            }
            out.push(ModelEvent::ToolInputEnd {
                id: call.id.clone(),
            });
            self.called_tools = true;
            let input = if call.arguments.trim().is_empty() {
                "{}".to_string()
            } else {
                call.arguments
            };
            out.push(ModelEvent::ToolCall {
                id: call.id,
                name,
                input,
            });
        }
        Ok(())
    }

    /// Completes the answer at `[DONE]` or at the end of the body.
    fn finish(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        self.complete_calls(out)?;
        let mut reason = self.finish_reason.unwrap_or(FinishReason::Unknown);
        // Some servers say `stop` even though the answer is a tool call.
        if reason == FinishReason::Stop && self.called_tools {
            reason = FinishReason::ToolCalls;
        }
        out.push(ModelEvent::Finish {
            reason,
            usage: self.usage.unwrap_or_default(),
        });
        Ok(())
    }

    fn stream_error(&self, error: &Value) -> ModelError {
        let message = http::json_error_message(&json!({ "error": error }))
            .unwrap_or_else(|| error.to_string());
        let code = error
            .get("code")
            .and_then(|c| c.as_u64().or_else(|| c.as_str()?.parse().ok()))
            .and_then(|c| u16::try_from(c).ok())
            .filter(|c| (400..=599).contains(c));
        match code {
            Some(status) => http::status_error(&self.provider, status, message, 1, None),
            None => ModelError::Other {
                provider: self.provider.clone(),
                message: format!("error in stream: {message}"),
            },
        }
    }
}

fn start_call(call: &mut PendingCall, out: &mut Vec<ModelEvent>) {
    call.started = true;
    out.push(ModelEvent::ToolInputStart {
        id: call.id.clone(),
        name: call.name.clone().unwrap_or_default(),
    });
    // Arguments that arrived before the name.
    if !call.arguments.is_empty() {
        out.push(ModelEvent::ToolInputDelta {
            id: call.id.clone(),
            delta: call.arguments.clone(),
        });
    }
}

/// An id for a call the server sent without one. Random, so that ids stay unique across the
/// steps of a run and across restarts.
fn mint_call_id() -> String {
    format!("call_{}", uuid::Uuid::new_v4().simple())
}

impl SseDecoder for ChunkDecoder {
    fn on_event(
        &mut self,
        event: &Event,
        out: &mut Vec<ModelEvent>,
    ) -> Result<Progress, ModelError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.finish(out)?;
            return Ok(Progress::Done);
        }
        if data.is_empty() {
            return Ok(Progress::Continue);
        }
        let chunk: Chunk =
            serde_json::from_str(data).map_err(|e| http::invalid_json(&self.provider, data, &e))?;
        self.on_chunk(chunk, out)?;
        Ok(Progress::Continue)
    }

    fn on_eof(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        // Without `[DONE]`, a finish reason is the only sign that the answer is complete.
        if self.finish_reason.is_none() {
            return Err(ModelError::Connection {
                provider: self.provider.clone(),
                message: "stream ended before the model finished".into(),
            });
        }
        self.finish(out)
    }
}
