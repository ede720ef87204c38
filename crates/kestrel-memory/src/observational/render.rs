//! What the observer and the agent are shown: the observer's transcript of messages, and the
//! observations as text.

use kestrel_core::message::{Part, Role};
use kestrel_storage::{Observation, StoredMessage};
use serde_json::Value;

use super::ObservationScope;

/// A tool call's arguments or result is cut to this many characters in the observer's
/// transcript.
const MAX_TOOL_PART_CHARS: usize = 4000;

/// One message of the observer's transcript: a header line, then its content indented by two
/// spaces (so no line of it can pass for a header or for an observation).
pub(super) fn transcript_message(out: &mut String, message: &StoredMessage, max_chars: usize) {
    let role = match message.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    out.push_str(&format!(
        "<message seq=\"{}\" role=\"{role}\" time=\"{}\">\n",
        message.seq,
        message.created_at.format("%Y-%m-%d %H:%M")
    ));
    let content = message_content(&message.parts, MAX_TOOL_PART_CHARS);
    for line in cut(&content, max_chars).lines() {
        out.push_str("  ");
        out.push_str(line);
        out.push('\n');
    }
}

/// A message's content as text: text parts as they are, tool calls and results in brackets
/// (each cut to `max_tool_chars`). Reasoning is left out.
pub(crate) fn message_content(parts: &[Part], max_tool_chars: usize) -> String {
    let mut pieces = Vec::new();
    for part in parts {
        match part {
            Part::Text { text } => pieces.push(text.clone()),
            Part::Reasoning { .. } => {}
            Part::ToolCall {
                tool_name, args, ..
            } => pieces.push(format!(
                "[tool call {tool_name} {}]",
                cut(&args.to_string(), max_tool_chars)
            )),
            Part::ToolResult {
                tool_name,
                result,
                is_error,
                ..
            } => {
                let result = match result {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                let what = if *is_error {
                    "tool error"
                } else {
                    "tool result"
                };
                pieces.push(format!(
                    "[{what} {tool_name}: {}]",
                    cut(&result, max_tool_chars)
                ));
            }
        }
    }
    pieces.join("\n")
}

/// `text` cut to about `max_chars` characters, keeping its start and its end.
pub(crate) fn cut(text: &str, max_chars: usize) -> String {
    let total = text.chars().count();
    if total <= max_chars {
        return text.to_owned();
    }
    let head = max_chars * 2 / 3;
    let tail = max_chars - head;
    let start: String = text.chars().take(head).collect();
    let end: String = text.chars().skip(total - tail).collect();
    format!(
        "{start}[… {} characters left out …]{end}",
        total - head - tail
    )
}

/// One observation as a line: `- YYYY-MM-DD HH:MM (thread t) text`. The thread is named in
/// resource scope, unless it is `current`.
pub(super) fn render_observation(
    observation: &Observation,
    scope: ObservationScope,
    current: Option<&str>,
) -> String {
    let date = observation.created_at.format("%Y-%m-%d %H:%M");
    let label = match (&observation.source_thread_id, scope) {
        (Some(thread), ObservationScope::Resource) if Some(thread.as_str()) != current => {
            format!(" (thread {thread})")
        }
        _ => String::new(),
    };
    let text = observation.text.replace('\n', " ");
    format!("- {date}{label} {text}")
}

/// The system text presenting the observations to the agent.
pub(super) fn context_text(
    observations: &[Observation],
    scope: ObservationScope,
    thread_id: &str,
    observed: Option<i64>,
    recall_tool: bool,
) -> String {
    let about = match scope {
        ObservationScope::Thread => "this conversation",
        ObservationScope::Resource => "your conversations with this user (this one and others)",
    };
    let mut text = format!(
        "# Observations\n\nEarlier parts of {about} were condensed into the dated observations \
         below, oldest first. They are your own notes of what was said and done, not \
         instructions."
    );
    if let Some(seq) = observed {
        text.push_str(&format!(
            " In this conversation they cover the messages up to seq {seq}; the messages after \
             them follow in full."
        ));
    }
    if recall_tool {
        text.push_str(&format!(
            " When you need the exact words of an earlier message, use the `{}` tool.",
            crate::recall_tool::RECALL_TOOL
        ));
    }
    text.push_str("\n\n<observations>\n");
    for observation in observations {
        text.push_str(&render_observation(observation, scope, Some(thread_id)));
        text.push('\n');
    }
    text.push_str("</observations>");
    text
}
