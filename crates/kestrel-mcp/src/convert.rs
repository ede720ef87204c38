//! What an MCP tool's result is as a Kestrel tool's output, and back.
//!
//! - A result with `structuredContent` gives that value.
//! - Else a result of text blocks only gives the text (one block) or the texts (several).
//! - Else (images, audio, resources) it gives the content blocks as MCP wrote them.
//! - A result with `isError: true` is the tool's failure, its text the message.
//!
//! Kestrel's own tools give JSON: a string is served as one text block; a list of MCP content
//! blocks (`{"type": "image", "data", "mimeType"}`, `text`, `audio`, `resource`,
//! `resource_link`), as those blocks, the way the client reads them back; anything else as its
//! JSON text, and, when it is an object, as `structuredContent` too.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

/// The output of an MCP tool's result, or the failure's text.
pub(crate) fn tool_output(result: CallToolResult) -> Result<Value, String> {
    if result.is_error == Some(true) {
        let text = texts(&result.content)
            .map(|texts| texts.join("\n"))
            .unwrap_or_else(|| blocks(&result.content).to_string());
        return Err(text);
    }
    if let Some(structured) = result.structured_content {
        return Ok(structured);
    }
    Ok(match texts(&result.content) {
        Some(mut texts) if texts.len() == 1 => Value::String(texts.remove(0)),
        Some(texts) if !texts.is_empty() => {
            Value::Array(texts.into_iter().map(Value::String).collect())
        }
        _ => blocks(&result.content),
    })
}

/// The texts of `content`, when it holds text blocks only.
fn texts(content: &[ContentBlock]) -> Option<Vec<String>> {
    content
        .iter()
        .map(|block| match block {
            ContentBlock::Text(text) => Some(text.text.clone()),
            _ => None,
        })
        .collect()
}

fn blocks(content: &[ContentBlock]) -> Value {
    serde_json::to_value(content).unwrap_or(Value::Null)
}

/// The kinds of MCP content block.
const BLOCK_TYPES: [&str; 5] = ["text", "image", "audio", "resource", "resource_link"];

/// `output` as MCP content blocks, when it is a list of them.
fn as_blocks(output: &Value) -> Option<Vec<ContentBlock>> {
    let items = output.as_array().filter(|items| !items.is_empty())?;
    items
        .iter()
        .map(|item| {
            let kind = item.get("type").and_then(Value::as_str)?;
            if !BLOCK_TYPES.contains(&kind) {
                return None;
            }
            serde_json::from_value(item.clone()).ok()
        })
        .collect()
}

/// A Kestrel tool's output as an MCP result.
pub(crate) fn tool_result(output: Value) -> CallToolResult {
    if let Some(blocks) = as_blocks(&output) {
        return CallToolResult::success(blocks);
    }
    match output {
        Value::String(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
        Value::Object(_) => {
            let mut result = CallToolResult::success(vec![ContentBlock::text(output.to_string())]);
            result.structured_content = Some(output);
            result
        }
        other => CallToolResult::success(vec![ContentBlock::text(other.to_string())]),
    }
}

/// A failure as an MCP result the model on the other side reads (`isError: true`).
pub(crate) fn tool_error(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}
