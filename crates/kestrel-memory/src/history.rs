//! The recent-history window and keeping tool calls with their results.
//!
//! Providers refuse a tool result whose call is missing, and an assistant tool call without its
//! results. A window of the last N messages can cut between the two, so:
//!
//! - **the window never starts with a tool result whose call it lacks**: memory fetches one
//!   message more than `last_messages`; when the window starts with tool results and the message
//!   just before it is the assistant message that made those calls, that message is included
//!   (the window is then `last_messages + 1` long);
//! - **whatever remains unpaired is dropped** ([`pair_tool_messages`], applied to the final
//!   history after every processor): tool results whose call is not in the assistant message just
//!   before them (an orphan whose call was deleted), and tool calls without results after them
//!   (their text, if any, is kept).

use std::collections::HashSet;

use kestrel_core::message::{Part, Role};
use kestrel_storage::StoredMessage;

/// The window of the last `n` messages out of `fetched` (the thread's last `n + 1` messages, in
/// seq order; `older` says whether the thread has messages before them). Returns the window and
/// whether older messages exist outside it.
pub(crate) fn window(
    mut fetched: Vec<StoredMessage>,
    n: usize,
    older: bool,
) -> (Vec<StoredMessage>, bool) {
    if fetched.len() <= n {
        return (fetched, older);
    }
    let extra = fetched.len() - n;
    let starts_with_results = fetched
        .get(extra)
        .is_some_and(|first| first.role == Role::Tool);
    let call_before = fetched
        .get(extra - 1)
        .zip(fetched.get(extra))
        .is_some_and(|(before, first)| answers(before, first));
    if starts_with_results && call_before {
        fetched.drain(..extra - 1);
        return (fetched, older || extra > 1);
    }
    fetched.drain(..extra);
    (fetched, true)
}

/// The ids of an assistant message's tool calls.
fn call_ids(message: &StoredMessage) -> HashSet<&str> {
    if message.role != Role::Assistant {
        return HashSet::new();
    }
    message
        .parts
        .iter()
        .filter_map(|part| match part {
            Part::ToolCall { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect()
}

/// Whether `results` (a tool message) answers a call of `call` (an assistant message).
fn answers(call: &StoredMessage, results: &StoredMessage) -> bool {
    let calls = call_ids(call);
    results.parts.iter().any(|part| {
        matches!(part, Part::ToolResult { tool_call_id, .. } if calls.contains(tool_call_id.as_str()))
    })
}

/// Drops unpaired tool results and tool calls (see the module docs), and messages left empty.
pub(crate) fn pair_tool_messages(history: &mut Vec<StoredMessage>) {
    // Results: keep those whose call is in the assistant message before the run of tool messages.
    let mut calls: HashSet<String> = HashSet::new();
    for message in history.iter_mut() {
        match message.role {
            Role::Assistant => {
                calls = call_ids(message).into_iter().map(str::to_owned).collect();
            }
            Role::Tool => message.parts.retain(|part| match part {
                Part::ToolResult { tool_call_id, .. } => calls.contains(tool_call_id),
                _ => true,
            }),
            Role::User | Role::System => calls.clear(),
        }
    }
    history.retain(|m| !(m.role == Role::Tool && m.parts.is_empty()));

    // Calls: keep those answered by the tool messages right after their assistant message.
    let answered: Vec<HashSet<String>> = (0..history.len())
        .map(|i| {
            history
                .iter()
                .skip(i + 1)
                .take_while(|m| m.role == Role::Tool)
                .flat_map(|m| &m.parts)
                .filter_map(|part| match part {
                    Part::ToolResult { tool_call_id, .. } => Some(tool_call_id.clone()),
                    _ => None,
                })
                .collect()
        })
        .collect();
    for (message, answered) in history.iter_mut().zip(&answered) {
        if message.role == Role::Assistant {
            message.parts.retain(|part| match part {
                Part::ToolCall { tool_call_id, .. } => answered.contains(tool_call_id),
                _ => true,
            });
        }
    }
    history.retain(|m| !(m.role == Role::Assistant && m.parts.is_empty()));
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use kestrel_core::message::{Part, Role};
    use kestrel_storage::{MessageStatus, Metadata, StoredMessage};
    use serde_json::json;

    use super::{pair_tool_messages, window};

    fn message(seq: i64, role: Role, parts: Vec<Part>) -> StoredMessage {
        StoredMessage {
            id: format!("m{seq}"),
            thread_id: "t".into(),
            resource_id: "r".into(),
            role,
            parts,
            created_at: kestrel_storage::codec::now(),
            seq,
            status: MessageStatus::Complete,
            metadata: Metadata::new(),
        }
    }

    fn text(seq: i64, role: Role) -> StoredMessage {
        message(
            seq,
            role,
            vec![Part::Text {
                text: format!("{seq}"),
            }],
        )
    }

    fn call(seq: i64, ids: &[&str]) -> StoredMessage {
        let parts = ids
            .iter()
            .map(|id| Part::ToolCall {
                tool_call_id: (*id).into(),
                tool_name: "echo".into(),
                args: json!({}),
            })
            .collect();
        message(seq, Role::Assistant, parts)
    }

    fn results(seq: i64, ids: &[&str]) -> StoredMessage {
        let parts = ids
            .iter()
            .map(|id| Part::ToolResult {
                tool_call_id: (*id).into(),
                tool_name: "echo".into(),
                result: json!(1),
                is_error: false,
                denied: false,
            })
            .collect();
        message(seq, Role::Tool, parts)
    }

    fn seqs(messages: &[StoredMessage]) -> Vec<i64> {
        messages.iter().map(|m| m.seq).collect()
    }

    #[test]
    fn a_short_thread_is_the_window() {
        let (w, older) = window(
            vec![text(1, Role::User), text(2, Role::Assistant)],
            4,
            false,
        );
        assert_eq!((seqs(&w), older), (vec![1, 2], false));
    }

    #[test]
    fn the_extra_message_is_dropped_unless_it_made_the_first_results() {
        let fetched = vec![
            text(1, Role::User),
            text(2, Role::Assistant),
            text(3, Role::User),
        ];
        let (w, older) = window(fetched, 2, false);
        assert_eq!((seqs(&w), older), (vec![2, 3], true));

        let fetched = vec![
            call(4, &["c"]),
            results(5, &["c"]),
            text(6, Role::Assistant),
        ];
        let (w, older) = window(fetched, 2, false);
        assert_eq!((seqs(&w), older), (vec![4, 5, 6], false));
        let fetched = vec![
            call(4, &["c"]),
            results(5, &["c"]),
            text(6, Role::Assistant),
        ];
        let (w, older) = window(fetched, 2, true);
        assert_eq!((seqs(&w), older), (vec![4, 5, 6], true));
    }

    #[test]
    fn orphan_results_and_unanswered_calls_are_dropped() {
        let mut history = vec![
            results(1, &["gone"]),
            text(2, Role::Assistant),
            call(3, &["a", "b"]),
            results(4, &["a"]),
            text(5, Role::User),
            message(
                6,
                Role::Assistant,
                vec![
                    Part::Text {
                        text: "let me check".into(),
                    },
                    Part::ToolCall {
                        tool_call_id: "z".into(),
                        tool_name: "echo".into(),
                        args: json!({}),
                    },
                ],
            ),
        ];
        pair_tool_messages(&mut history);
        assert_eq!(seqs(&history), [2, 3, 4, 5, 6]);
        assert_eq!(
            history[1].parts.len(),
            1,
            "the unanswered call b is dropped"
        );
        assert_eq!(
            history[4].parts,
            vec![Part::Text {
                text: "let me check".into()
            }]
        );
    }

    #[test]
    fn paired_history_is_unchanged() {
        let mut history = vec![
            text(1, Role::User),
            call(2, &["a", "b"]),
            results(3, &["a", "b"]),
            text(4, Role::Assistant),
        ];
        let before = history.clone();
        pair_tool_messages(&mut history);
        assert_eq!(history, before);
    }
}
