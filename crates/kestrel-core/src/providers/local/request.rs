//! A request as the engine takes it: messages in the chat template's roles, tools and
//! structured output as grammars' schemas.

use kestrel_llama::{AutoToolPolicy, RepeatPenalty};
use kestrel_llama::{CancelToken, ChatMessage, GenerateRequest, ToolCall, ToolSpec};
use serde_json::Value;

use crate::message::{Message, Part, Role};
use crate::model::{ModelRequest, ResponseFormat, ToolChoice};

/// Converts a model request into an engine request.
pub(super) fn engine_request(
    request: ModelRequest,
    policy: AutoToolPolicy,
    repeat_penalty: Option<RepeatPenalty>,
) -> GenerateRequest {
    let settings = request.settings;
    GenerateRequest {
        messages: engine_messages(&request.messages),
        tools: request
            .tools
            .iter()
            .map(|tool| ToolSpec {
                name: tool.name.clone(),
                description: tool.description.clone(),
                parameters: tool.input_schema.clone(),
                auxiliary: tool.auxiliary,
            })
            .collect(),
        tool_choice: match request.tool_choice {
            ToolChoice::Auto => kestrel_llama::ToolChoice::Auto,
            ToolChoice::None => kestrel_llama::ToolChoice::None,
            ToolChoice::Required => kestrel_llama::ToolChoice::Required,
            ToolChoice::Tool(name) => kestrel_llama::ToolChoice::Tool(name),
        },
        auto_tool_policy: policy,
        parallel_tool_calls: false,
        response_schema: match request.response_format {
            Some(ResponseFormat::Json { schema, .. }) => Some(schema),
            Some(ResponseFormat::Text) | None => None,
        },
        temperature: settings.temperature,
        top_p: settings.top_p,
        seed: settings.seed,
        max_tokens: settings.max_output_tokens,
        repeat_penalty,
        stop: settings.stop_sequences,
        cancel: CancelToken::new(),
    }
}

/// Converts the conversation. Tool results become tool messages wherever they appear;
/// reasoning parts are not sent back.
pub(super) fn engine_messages(messages: &[Message]) -> Vec<ChatMessage> {
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        match message.role {
            Role::System => out.push(ChatMessage::system(message.text())),
            Role::User => out.push(ChatMessage::user(message.text())),
            Role::Assistant => {
                let calls: Vec<ToolCall> = message
                    .parts
                    .iter()
                    .filter_map(|part| match part {
                        Part::ToolCall {
                            tool_name, args, ..
                        } => Some(ToolCall {
                            name: tool_name.clone(),
                            arguments: value_as_text(args),
                        }),
                        _ => None,
                    })
                    .collect();
                out.push(ChatMessage::assistant_tool_calls(message.text(), calls));
            }
            Role::Tool => {}
        }
        for part in &message.parts {
            if let Part::ToolResult {
                tool_name,
                result,
                is_error,
                ..
            } = part
            {
                let text = value_as_text(result);
                let text = if *is_error {
                    format!("Error: {text}")
                } else {
                    text
                };
                out.push(ChatMessage::tool_result(tool_name.clone(), text));
            }
        }
    }
    out
}

/// JSON as text: strings as they are, anything else serialized.
pub(super) fn value_as_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}
