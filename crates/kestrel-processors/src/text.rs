//! Editing the text a processor checks: the text parts of messages, and the strings of a
//! JSON value (a tool's result).

use kestrel_core::message::{Message, Part, Role};
use serde_json::Value;

/// Applies `edit` to every text part of the user messages of `messages` (what a user sent:
/// input checks leave the model's own messages and tool results alone). Returns whether
/// anything changed.
pub(crate) fn edit_user_text(
    messages: &mut [Message],
    mut edit: impl FnMut(&str) -> Option<String>,
) -> bool {
    let mut changed = false;
    for message in messages.iter_mut().filter(|m| m.role == Role::User) {
        for part in &mut message.parts {
            if let Part::Text { text } = part
                && let Some(new) = edit(text)
            {
                *text = new;
                changed = true;
            }
        }
    }
    changed
}

/// Applies `edit` to every string in `value` (keys stay). Returns whether anything changed.
pub(crate) fn edit_strings(
    value: &mut Value,
    edit: &mut impl FnMut(&str) -> Option<String>,
) -> bool {
    match value {
        Value::String(s) => match edit(s) {
            Some(new) => {
                *s = new;
                true
            }
            None => false,
        },
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |changed, item| edit_strings(item, edit) | changed),
        Value::Object(map) => map
            .values_mut()
            .fold(false, |changed, item| edit_strings(item, edit) | changed),
        _ => false,
    }
}

/// Every string in `value`, joined with newlines (what a check of a tool result reads).
pub(crate) fn strings_of(value: &Value) -> String {
    let mut out = String::new();
    collect(value, &mut out);
    out
}

fn collect(value: &Value, out: &mut String) {
    match value {
        Value::String(s) => {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(s);
        }
        Value::Array(items) => items.iter().for_each(|v| collect(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect(v, out)),
        _ => {}
    }
}
