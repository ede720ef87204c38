//! The prompt format for tools: how tools, earlier tool calls and tool results are shown to
//! the model. See the crate docs for the format.

use serde_json::Value;

use crate::grammar::{Answer, CALLS_CLOSE, CALLS_OPEN, Plan, REPLY_DESCRIPTION, REPLY_RULE};
use crate::request::{ChatMessage, Role, ToolCall, ToolSpec};
use crate::template::{TemplateCall, TemplateMessage, python_json};

/// Converts the conversation into template messages, adding the tool instructions to the
/// system message (creating one if there is none).
///
/// Tool results go to the template as `tool` messages when it handles that role
/// (`tool_role`), holding the raw result; otherwise consecutive results become one `user`
/// message: "The get_weather tool returned: {...}" lines, then "Answer my question using this
/// result." (SmolLM2 answers from that far more reliably than from a `tool` turn it was not
/// trained on).
pub(crate) fn template_messages(
    messages: &[ChatMessage],
    plan: &Plan,
    tool_role: bool,
) -> Vec<TemplateMessage> {
    let mut out: Vec<TemplateMessage> = Vec::with_capacity(messages.len() + 1);
    let mut pending_instructions = tool_instructions(plan);
    let mut previous_was_tool = false;
    for message in messages {
        if message.role != Role::System
            && let Some(tools) = pending_instructions.take()
        {
            // No system message before the first other message: add one.
            out.push(TemplateMessage::new("system", tools));
        }
        let is_tool = message.role == Role::Tool;
        let (role, content) = match message.role {
            Role::System => {
                let mut content = message.content.clone();
                if let Some(tools) = pending_instructions.take() {
                    if !content.is_empty() {
                        content.push_str("\n\n");
                    }
                    content.push_str(&tools);
                }
                ("system", content)
            }
            Role::User => ("user", message.content.clone()),
            Role::Assistant => ("assistant", assistant_content(message)),
            Role::Tool if tool_role => ("tool", message.content.clone()),
            Role::Tool => {
                let line = format!(
                    "The {} tool returned: {}",
                    message.tool_name.as_deref().unwrap_or("tool"),
                    message.content
                );
                if previous_was_tool && let Some(last) = out.last_mut() {
                    // Merge with the previous result, keeping the closing request last.
                    if let Some(body) = last.content.strip_suffix(TOOL_RESULTS_END) {
                        last.content = format!("{body}\n{line}{TOOL_RESULTS_END}");
                        previous_was_tool = true;
                        continue;
                    }
                }
                ("user", format!("{line}{TOOL_RESULTS_END}"))
            }
        };
        previous_was_tool = is_tool;
        out.push(TemplateMessage::new(role, content));
    }
    if let Some(tools) = pending_instructions {
        out.insert(0, TemplateMessage::new("system", tools));
    }
    out
}

/// The conversation and the tools for a template that lists tools and renders calls itself
/// ([`crate::template::ChatTemplate::render_with_tools`]): messages as they are (results as
/// `tool` messages, calls as `tool_calls`), and each tool (the reply option first, when the plan
/// has one) as the JSON text of `{"type": "function", "function": {...}}`.
pub(crate) fn native_messages(
    messages: &[ChatMessage],
    plan: &Plan,
) -> (Vec<TemplateMessage>, Vec<String>) {
    let out = messages
        .iter()
        .map(|message| {
            let role = match message.role {
                Role::System => "system",
                Role::User => "user",
                Role::Assistant => "assistant",
                Role::Tool => "tool",
            };
            let mut out = TemplateMessage::new(role, message.content.clone());
            out.tool_calls = message
                .tool_calls
                .iter()
                .map(|call| TemplateCall {
                    name: call.name.clone(),
                    arguments: match serde_json::from_str::<Value>(&call.arguments) {
                        Ok(value) => python_json(&value),
                        // A model's broken output, as a JSON string.
                        Err(_) => python_json(&Value::String(call.arguments.clone())),
                    },
                })
                .collect();
            out
        })
        .collect();
    let reply = plan.reply.as_ref().map(|reply| {
        ToolSpec::new(
            reply.name,
            REPLY_DESCRIPTION,
            serde_json::json!({"type": "object", "properties": {}}),
        )
    });
    let tools = reply
        .iter()
        .chain(&plan.tools)
        .map(|tool| {
            // Built as text to keep the key order of the format.
            format!(
                "{{\"type\": \"function\", \"function\": {{\"name\": {}, \"description\": {}, \"parameters\": {}}}}}",
                python_json(&Value::String(tool.name.clone())),
                python_json(&Value::String(tool.description.clone())),
                python_json(&tool.parameters)
            )
        })
        .collect();
    (out, tools)
}

/// Ends the user message that carries tool results.
const TOOL_RESULTS_END: &str = "\nAnswer my question using this result.";

/// The system-prompt block that lists the tools and the call format.
fn tool_instructions(plan: &Plan) -> Option<String> {
    if plan.tools.is_empty() {
        return None;
    }
    let mut text = String::from("You have access to the following tools:\n<tools>\n");
    // The reply option comes first (measured: see `grammar::REPLY_NAMES`).
    if let Some(reply) = &plan.reply {
        text.push_str(&tool_line(&ToolSpec::new(
            reply.name,
            REPLY_DESCRIPTION,
            serde_json::json!({"type": "object", "properties": {}}),
        )));
        text.push('\n');
    }
    for tool in &plan.tools {
        text.push_str(&tool_line(tool));
        text.push('\n');
    }
    text.push_str("</tools>\n\n");
    text.push_str(&format!(
        "To call tools, reply with only:\n{CALLS_OPEN}[{{\"name\": \"<tool name>\", \"arguments\": {{<arguments>}}}}]{CALLS_CLOSE}\n"
    ));
    match plan.answer {
        Answer::None => match &plan.reply {
            Some(reply) => text.push_str(&REPLY_RULE.replace("{name}", reply.name)),
            None => text.push_str("You must call a tool."),
        },
        Answer::Text => text.push_str(
            "If no tool is needed, or a tool has already given you what you need, answer the user directly.",
        ),
        Answer::Json => text.push_str(
            "If no tool is needed, or a tool has already given you what you need, answer with the JSON object asked for.",
        ),
    }
    Some(text)
}

fn tool_line(tool: &ToolSpec) -> String {
    // Written by hand to keep the key order name, description, parameters.
    format!(
        "{{\"name\": {}, \"description\": {}, \"parameters\": {}}}",
        Value::String(tool.name.clone()),
        Value::String(tool.description.clone()),
        tool.parameters
    )
}

/// An assistant message: its text, then its calls in the format the model produces.
fn assistant_content(message: &ChatMessage) -> String {
    let mut content = message.content.clone();
    if !message.tool_calls.is_empty() {
        if !content.is_empty() {
            content.push('\n');
        }
        content.push_str(&format_calls(&message.tool_calls));
    }
    content
}

/// `<tool_call>[{"name": ..., "arguments": ...}, ...]</tool_call>`.
pub(crate) fn format_calls(calls: &[ToolCall]) -> String {
    let items: Vec<String> = calls
        .iter()
        .map(|call| {
            // Arguments that are not valid JSON (a model's broken output) are embedded as a
            // JSON string so the block stays parseable.
            let arguments = match serde_json::from_str::<Value>(&call.arguments) {
                Ok(value) => value.to_string(),
                Err(_) => Value::String(call.arguments.clone()).to_string(),
            };
            format!(
                "{{\"name\": {}, \"arguments\": {arguments}}}",
                Value::String(call.name.clone())
            )
        })
        .collect();
    format!("{CALLS_OPEN}[{}]{CALLS_CLOSE}", items.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plan_with(tools: Vec<ToolSpec>, answer: Answer) -> Plan {
        Plan {
            tools,
            answer,
            gbnf: None,
            reply: None,
        }
    }

    #[test]
    fn tools_go_into_a_new_or_existing_system_message() {
        let tools = vec![ToolSpec::new("add", "Adds", json!({"type":"object"}))];
        let plan = plan_with(tools, Answer::Text);
        let out = template_messages(&[ChatMessage::user("hi")], &plan, false);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].role, "system");
        assert!(
            out[0]
                .content
                .contains(r#"{"name": "add", "description": "Adds""#)
        );
        let out = template_messages(
            &[ChatMessage::system("Be nice."), ChatMessage::user("hi")],
            &plan,
            false,
        );
        assert_eq!(out.len(), 2);
        assert!(out[0].content.starts_with("Be nice.\n\nYou have access"));
        let none = plan_with(Vec::new(), Answer::Text);
        let out = template_messages(&[ChatMessage::user("hi")], &none, false);
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn calls_and_results_are_rendered() {
        let calls = vec![ToolCall {
            name: "add".into(),
            arguments: r#"{"a": 1, "b": 2}"#.into(),
        }];
        let msgs = [
            ChatMessage::user("1+2?"),
            ChatMessage::assistant_tool_calls("", calls),
            ChatMessage::tool_result("add", "3"),
            ChatMessage::tool_result("mul", "2"),
        ];
        let out = template_messages(&msgs, &plan_with(Vec::new(), Answer::Text), false);
        assert_eq!(out.len(), 3);
        assert_eq!(
            out[1].content,
            r#"<tool_call>[{"name": "add", "arguments": {"a":1,"b":2}}]</tool_call>"#
        );
        assert_eq!(out[2].role, "user");
        assert_eq!(
            out[2].content,
            "The add tool returned: 3\nThe mul tool returned: 2\nAnswer my question using this result."
        );
        let out = template_messages(&msgs, &plan_with(Vec::new(), Answer::Text), true);
        assert_eq!(out.len(), 4);
        assert_eq!((out[2].role, out[2].content.as_str()), ("tool", "3"));
    }
}
