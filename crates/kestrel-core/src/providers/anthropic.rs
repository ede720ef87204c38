//! The Anthropic Messages API, streamed (`POST {base_url}/v1/messages`).
//!
//! Conversion notes:
//!
//! - System messages are joined (blank line between) into the top-level `system` field.
//! - Tool messages become `user` messages of `tool_result` blocks; consecutive messages that map
//!   to the same role are merged, since the API wants roles to alternate, and `tool_result`
//!   blocks are put first in their message as the API requires.
//! - Reasoning parts are not sent back: replaying `thinking` blocks needs their signatures,
//!   which the message model does not keep.
//! - [`ResponseFormat::Json`] has no native equivalent in API version `2023-06-01`: the schema is
//!   added to the system prompt with an instruction to answer with JSON only. The agent still
//!   validates the answer against the schema.
//! - `max_tokens` is required by the API; it defaults to 4096
//!   ([`Anthropic::with_default_max_tokens`]) when the request sets no limit.

use std::collections::BTreeMap;

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

/// Anthropic's API root.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// The `anthropic-version` header sent with every request.
pub const API_VERSION: &str = "2023-06-01";

/// `max_tokens` used when the request sets no output limit.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// A Claude model served over the Anthropic Messages API.
///
/// ```no_run
/// use kestrel_core::providers::HttpConfig;
/// use kestrel_core::providers::anthropic::{Anthropic, DEFAULT_BASE_URL};
///
/// let model = Anthropic::new(
///     "claude-sonnet-4-5",
///     HttpConfig::new(DEFAULT_BASE_URL).with_api_key("sk-ant-..."),
/// );
/// ```
pub struct Anthropic {
    model_id: String,
    http: HttpClient,
    default_max_tokens: u32,
}

impl std::fmt::Debug for Anthropic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Anthropic")
            .field("model_id", &self.model_id)
            .field("config", self.http.config())
            .field("default_max_tokens", &self.default_max_tokens)
            .finish()
    }
}

impl Anthropic {
    /// The model `model_id`; the API key, if any, is sent as `x-api-key`.
    pub fn new(model_id: impl Into<String>, config: HttpConfig) -> Self {
        let mut headers = vec![("anthropic-version", API_VERSION.to_string())];
        if let Some(key) = &config.api_key {
            headers.push(("x-api-key", key.clone()));
        }
        Self {
            model_id: model_id.into(),
            http: HttpClient::new("anthropic", config, headers),
            default_max_tokens: DEFAULT_MAX_TOKENS,
        }
    }

    /// Sets the `max_tokens` sent when the request sets no output limit.
    pub fn with_default_max_tokens(mut self, max_tokens: u32) -> Self {
        self.default_max_tokens = max_tokens;
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
        let settings = &request.settings;
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model_id));
        let max_tokens = settings
            .max_output_tokens
            .unwrap_or(self.default_max_tokens);
        body.insert("max_tokens".into(), json!(max_tokens));
        body.insert("stream".into(), json!(true));
        if let Some(system) = system_prompt(&request.messages, request.response_format.as_ref()) {
            body.insert("system".into(), json!(system));
        }
        body.insert(
            "messages".into(),
            Value::Array(wire_messages(&request.messages)),
        );
        if !request.tools.is_empty() {
            body.insert(
                "tools".into(),
                request.tools.iter().map(wire_tool).collect(),
            );
            body.insert("tool_choice".into(), wire_tool_choice(&request.tool_choice));
        }
        if !settings.stop_sequences.is_empty() {
            body.insert("stop_sequences".into(), json!(settings.stop_sequences));
        }
        if let Some(t) = settings.temperature {
            body.insert("temperature".into(), json!(t));
        }
        if let Some(p) = settings.top_p {
            body.insert("top_p".into(), json!(p));
        }
        Value::Object(body)
    }
}

#[async_trait::async_trait]
impl LanguageModel for Anthropic {
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
            .post_events("/v1/messages", &body, &request.abort)
            .await?;
        let decoder = EventDecoder::new(self.http.provider());
        Ok(http::decode_events(events, decoder, request.abort))
    }
}

// ---------------------------------------------------------------------------------------------
// Request conversion

/// The `system` field: every system message's text, plus the JSON instruction if asked for.
fn system_prompt(messages: &[Message], format: Option<&ResponseFormat>) -> Option<String> {
    let mut sections: Vec<String> = messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(Message::text)
        .filter(|text| !text.is_empty())
        .collect();
    if let Some(ResponseFormat::Json { schema, .. }) = format {
        let schema = serde_json::to_string_pretty(schema).unwrap_or_else(|_| schema.to_string());
        sections.push(format!(
            "Answer with a single JSON value that conforms to the JSON schema below. Output only \
             the JSON value: no other text and no Markdown code fences.\n\nJSON schema:\n{schema}"
        ));
    }
    (!sections.is_empty()).then(|| sections.join("\n\n"))
}

/// Converts the non-system messages, merging consecutive messages of the same wire role.
fn wire_messages(messages: &[Message]) -> Vec<Value> {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in messages {
        let role = match message.role {
            Role::System => continue,
            Role::User | Role::Tool => "user",
            Role::Assistant => "assistant",
        };
        let blocks = content_blocks(message);
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last_role, content)) if *last_role == role => content.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    turns
        .into_iter()
        .map(|(role, mut content)| {
            // Tool results must open the user turn that answers a tool use.
            content.sort_by_key(|block| block["type"] != "tool_result");
            json!({ "role": role, "content": content })
        })
        .collect()
}

fn content_blocks(message: &Message) -> Vec<Value> {
    message
        .parts
        .iter()
        .filter_map(|part| match part {
            // The API rejects empty text blocks.
            Part::Text { text } if text.is_empty() => None,
            Part::Text { text } => Some(json!({ "type": "text", "text": text })),
            Part::Reasoning { .. } => None,
            Part::ToolCall {
                tool_call_id,
                tool_name,
                args,
            } => Some(json!({
                "type": "tool_use",
                "id": tool_call_id,
                "name": tool_name,
                "input": tool_input(args),
            })),
            Part::ToolResult {
                tool_call_id,
                result,
                is_error,
                ..
            } => {
                let content = match result {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                let mut block = Map::new();
                block.insert("type".into(), json!("tool_result"));
                block.insert("tool_use_id".into(), json!(tool_call_id));
                block.insert("content".into(), json!(content));
                if *is_error {
                    block.insert("is_error".into(), json!(true));
                }
                Some(Value::Object(block))
            }
        })
        .collect()
}

/// `tool_use.input` must be an object. Arguments kept as raw text (the model produced invalid
/// JSON) are parsed if possible, else replaced by `{}`: the tool's error result explains it.
fn tool_input(args: &Value) -> Value {
    match args {
        Value::Object(_) => args.clone(),
        Value::String(text) => serde_json::from_str::<Value>(text)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({})),
        _ => json!({}),
    }
}

fn wire_tool(tool: &ToolDefinition) -> Value {
    json!({
        "name": tool.name,
        "description": tool.description,
        "input_schema": tool.input_schema,
    })
}

fn wire_tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!({ "type": "auto" }),
        ToolChoice::None => json!({ "type": "none" }),
        ToolChoice::Required => json!({ "type": "any" }),
        ToolChoice::Tool(name) => json!({ "type": "tool", "name": name }),
    }
}

// ---------------------------------------------------------------------------------------------
// Response parsing

/// One streamed event; which fields are set depends on `type`.
#[derive(Debug, Deserialize)]
struct WireEvent {
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<WireMessage>,
    index: Option<u32>,
    content_block: Option<ContentBlock>,
    delta: Option<WireDelta>,
    usage: Option<WireUsage>,
    error: Option<WireError>,
}

#[derive(Debug, Deserialize)]
struct WireMessage {
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
struct ContentBlock {
    #[serde(rename = "type")]
    kind: Option<String>,
    id: Option<String>,
    name: Option<String>,
    text: Option<String>,
    thinking: Option<String>,
    input: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct WireDelta {
    #[serde(rename = "type")]
    kind: Option<String>,
    text: Option<String>,
    partial_json: Option<String>,
    thinking: Option<String>,
    stop_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct WireError {
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<String>,
}

/// A content block being streamed.
#[derive(Debug)]
enum Block {
    ToolUse {
        id: String,
        name: String,
        input: String,
    },
    /// Text, thinking, and blocks we do not surface (server tools...).
    Other,
}

/// Token counts as Anthropic reports them; `input_tokens` excludes cache reads and writes.
#[derive(Debug, Default)]
struct TokenCounts {
    input: u64,
    output: u64,
    cache_read: Option<u64>,
    cache_creation: Option<u64>,
}

impl TokenCounts {
    /// Later reports (in `message_delta`) are cumulative and override earlier ones.
    fn update(&mut self, usage: &WireUsage) {
        if let Some(n) = usage.input_tokens {
            self.input = n;
        }
        if let Some(n) = usage.output_tokens {
            self.output = n;
        }
        if usage.cache_read_input_tokens.is_some() {
            self.cache_read = usage.cache_read_input_tokens;
        }
        if usage.cache_creation_input_tokens.is_some() {
            self.cache_creation = usage.cache_creation_input_tokens;
        }
    }

    /// Our usage counts every input token, cached or not.
    fn to_usage(&self) -> Usage {
        let input = self.input + self.cache_read.unwrap_or(0) + self.cache_creation.unwrap_or(0);
        let mut usage = Usage::new(input, self.output);
        usage.cached_input_tokens = self.cache_read;
        usage
    }
}

fn stop_reason(wire: &str) -> FinishReason {
    match wire {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "max_tokens" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "refusal" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

/// Assembles model events from Messages stream events.
#[derive(Debug)]
struct EventDecoder {
    provider: String,
    /// Open content blocks by index.
    blocks: BTreeMap<u32, Block>,
    tokens: TokenCounts,
    stop_reason: Option<FinishReason>,
}

impl EventDecoder {
    fn new(provider: &str) -> Self {
        Self {
            provider: provider.to_string(),
            blocks: BTreeMap::new(),
            tokens: TokenCounts::default(),
            stop_reason: None,
        }
    }

    fn on_wire_event(
        &mut self,
        kind: &str,
        event: WireEvent,
        out: &mut Vec<ModelEvent>,
    ) -> Result<Progress, ModelError> {
        match kind {
            "message_start" => {
                if let Some(usage) = event.message.and_then(|m| m.usage) {
                    self.tokens.update(&usage);
                }
            }
            "content_block_start" => {
                if let Some(block) = event.content_block {
                    self.start_block(event.index.unwrap_or(0), block, out);
                }
            }
            "content_block_delta" => {
                if let Some(delta) = event.delta {
                    self.on_delta(event.index.unwrap_or(0), delta, out);
                }
            }
            "content_block_stop" => {
                if let Some(block) = self.blocks.remove(&event.index.unwrap_or(0)) {
                    complete_block(block, out);
                }
            }
            "message_delta" => {
                if let Some(reason) = event.delta.and_then(|d| d.stop_reason) {
                    self.stop_reason = Some(stop_reason(&reason));
                }
                if let Some(usage) = &event.usage {
                    self.tokens.update(usage);
                }
            }
            "message_stop" => {
                self.finish(out);
                return Ok(Progress::Done);
            }
            "error" => return Err(self.stream_error(event.error)),
            // `ping` and event types added after this was written.
            _ => {}
        }
        Ok(Progress::Continue)
    }

    fn start_block(&mut self, index: u32, block: ContentBlock, out: &mut Vec<ModelEvent>) {
        let state = match block.kind.as_deref() {
            Some("tool_use") => {
                let id = block.id.unwrap_or_default();
                let name = block.name.unwrap_or_default();
                out.push(ModelEvent::ToolInputStart {
                    id: id.clone(),
                    name: name.clone(),
                });
                // The API sends `input: {}` here and the real input as deltas; a proxy may send
                // the whole input up front instead.
                let input = match block.input {
                    Some(Value::Object(map)) if !map.is_empty() => {
                        let text = Value::Object(map).to_string();
                        out.push(ModelEvent::ToolInputDelta {
                            id: id.clone(),
                            delta: text.clone(),
                        });
                        text
                    }
                    _ => String::new(),
                };
                Block::ToolUse { id, name, input }
            }
            Some("text") => {
                if let Some(text) = block.text.filter(|t| !t.is_empty()) {
                    out.push(ModelEvent::TextDelta { text });
                }
                Block::Other
            }
            Some("thinking") => {
                if let Some(text) = block.thinking.filter(|t| !t.is_empty()) {
                    out.push(ModelEvent::ReasoningDelta { text });
                }
                Block::Other
            }
            _ => Block::Other,
        };
        self.blocks.insert(index, state);
    }

    fn on_delta(&mut self, index: u32, delta: WireDelta, out: &mut Vec<ModelEvent>) {
        match delta.kind.as_deref() {
            Some("text_delta") => {
                if let Some(text) = delta.text.filter(|t| !t.is_empty()) {
                    out.push(ModelEvent::TextDelta { text });
                }
            }
            Some("thinking_delta") => {
                if let Some(text) = delta.thinking.filter(|t| !t.is_empty()) {
                    out.push(ModelEvent::ReasoningDelta { text });
                }
            }
            Some("input_json_delta") => {
                let piece = delta.partial_json.unwrap_or_default();
                // Input of blocks we do not surface (server tools) is dropped with them.
                if let Some(Block::ToolUse { id, input, .. }) = self.blocks.get_mut(&index)
                    && !piece.is_empty()
                {
                    input.push_str(&piece);
                    out.push(ModelEvent::ToolInputDelta {
                        id: id.clone(),
                        delta: piece,
                    });
                }
            }
            // `signature_delta` (thinking signatures) and anything newer.
            _ => {}
        }
    }

    fn finish(&mut self, out: &mut Vec<ModelEvent>) {
        // Blocks left open are completed rather than lost.
        for (_, block) in std::mem::take(&mut self.blocks) {
            complete_block(block, out);
        }
        out.push(ModelEvent::Finish {
            reason: self.stop_reason.unwrap_or(FinishReason::Unknown),
            usage: self.tokens.to_usage(),
        });
    }

    fn stream_error(&self, error: Option<WireError>) -> ModelError {
        let (kind, message) = match error {
            Some(e) => (e.kind.unwrap_or_default(), e.message.unwrap_or_default()),
            None => (String::new(), String::new()),
        };
        let status = match kind.as_str() {
            "invalid_request_error" => 400,
            "authentication_error" => 401,
            "permission_error" => 403,
            "not_found_error" => 404,
            "request_too_large" => 413,
            "rate_limit_error" => 429,
            "api_error" => 500,
            "overloaded_error" => 529,
            _ => {
                return ModelError::Other {
                    provider: self.provider.clone(),
                    message: format!("error in stream ({kind}): {message}"),
                };
            }
        };
        http::status_error(&self.provider, status, message, 1, None)
    }
}

fn complete_block(block: Block, out: &mut Vec<ModelEvent>) {
    if let Block::ToolUse { id, name, input } = block {
        out.push(ModelEvent::ToolInputEnd { id: id.clone() });
        let input = if input.trim().is_empty() {
            "{}".to_string()
        } else {
            input
        };
        out.push(ModelEvent::ToolCall { id, name, input });
    }
}

impl SseDecoder for EventDecoder {
    fn on_event(
        &mut self,
        event: &Event,
        out: &mut Vec<ModelEvent>,
    ) -> Result<Progress, ModelError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(Progress::Continue);
        }
        let wire: WireEvent =
            serde_json::from_str(data).map_err(|e| http::invalid_json(&self.provider, data, &e))?;
        // The data's `type` names the event; the SSE `event:` line repeats it.
        let kind = wire.kind.clone().unwrap_or_else(|| event.event.clone());
        self.on_wire_event(&kind, wire, out)
    }

    fn on_eof(&mut self, _out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        Err(ModelError::Connection {
            provider: self.provider.clone(),
            message: "stream ended before the model finished".into(),
        })
    }
}
