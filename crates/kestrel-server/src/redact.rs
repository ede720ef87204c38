//! What of a run's failure a client may read: its kind and a generic message with the run id.
//!
//! An `error` event carries the failure's text as the library saw it, and that text can hold
//! a provider's answer (an API key, an organisation), a database error or a prompt. Every
//! stream the server writes (the `/api` streams, thread subscriptions, the chat route) passes
//! its events through [`public_event`] first: the text goes to the log, the client gets a
//! message that says only what kind of thing failed. Sub-agents' events travel inside
//! `tool-output` events, an agent step's inside `workflow-step-output`, and a network's
//! sub-agents' and workflows' whole, as `agent-execution-event-*` and
//! `workflow-execution-event-*`: those are searched too, at any depth.
//!
//! Texts that are not `error` events (a network's results and completion reasons, a
//! workflow's step errors, the thread a network writes) are the library's own words for a
//! failure: kestrel-core never puts a provider's or a store's text in them.

use std::borrow::Cow;

use kestrel_core::event::{ErrorPayload, Event, EventKind};
use serde_json::Value;

/// Error kinds whose text the library writes itself from what the caller sent or the run's
/// own state, never from a provider or a store: passed on as they are.
const OWN_TEXT: &[&str] = &[
    "abort",
    "paused",
    "structured-output",
    "invalid-run-state",
    "thread-busy",
    "run-id-taken",
];

/// The generic message of an error kind.
pub(crate) fn generic_message(kind: &str) -> &'static str {
    match kind {
        "model" | "model-resolution" => "the model provider failed",
        "memory" => "memory failed",
        "run-store" => "saving the run failed",
        _ => "the run failed",
    }
}

/// `event` as a client may see it: an `error` event of a kind whose text may hold internals
/// gets a generic message (the text is logged), and so does every error event nested in
/// another event (a sub-agent's, an agent step's, a network primitive's). Other events pass
/// unchanged, without a copy.
pub(crate) fn public_event(event: &Event) -> Cow<'_, Event> {
    match &event.kind {
        EventKind::Error(error) => match public_error(&event.run_id, error) {
            Some(payload) => Cow::Owned(Event {
                kind: EventKind::Error(payload),
                ..event.clone()
            }),
            None => Cow::Borrowed(event),
        },
        EventKind::ToolOutput(output) if holds_error(&output.output) => {
            let mut redacted = event.clone();
            if let EventKind::ToolOutput(output) = &mut redacted.kind {
                redact_nested(&mut output.output);
            }
            Cow::Owned(redacted)
        }
        // An agent step's events travel inside `workflow-step-output`.
        EventKind::WorkflowStepOutput(output) if holds_error(&output.output) => {
            let mut redacted = event.clone();
            if let EventKind::WorkflowStepOutput(output) = &mut redacted.kind {
                redact_nested(&mut output.output);
            }
            Cow::Owned(redacted)
        }
        // A network's primitives' events, whole (in which the cases above recur).
        EventKind::AgentExecutionEvent(inner) | EventKind::WorkflowExecutionEvent(inner) => {
            let Cow::Owned(public) = public_event(inner) else {
                return Cow::Borrowed(event);
            };
            let public = Box::new(public);
            let kind = match &event.kind {
                EventKind::AgentExecutionEvent(_) => EventKind::AgentExecutionEvent(public),
                _ => EventKind::WorkflowExecutionEvent(public),
            };
            Cow::Owned(Event {
                run_id: event.run_id.clone(),
                from: event.from,
                kind,
            })
        }
        _ => Cow::Borrowed(event),
    }
}

/// The generic payload of `error`, or `None` when its text may be shown.
fn public_error(run_id: &str, error: &ErrorPayload) -> Option<ErrorPayload> {
    if OWN_TEXT.contains(&error.kind.as_str()) {
        return None;
    }
    tracing::warn!(%run_id, kind = %error.kind, detail = %error.error, "a run failed");
    Some(ErrorPayload {
        error: format!("run {run_id}: {}", generic_message(&error.kind)),
        kind: error.kind.clone(),
    })
}

/// Whether `value` holds an `error` event (`{"type": "error", "payload": {...}}`) at any depth.
fn holds_error(value: &Value) -> bool {
    match value {
        Value::Object(object) => {
            object.get("type").and_then(Value::as_str) == Some("error")
                || object.values().any(holds_error)
        }
        Value::Array(items) => items.iter().any(holds_error),
        _ => false,
    }
}

/// Replaces the text of every nested `error` event whose kind may hold internals.
fn redact_nested(value: &mut Value) {
    match value {
        Value::Object(object) => {
            if object.get("type").and_then(Value::as_str) == Some("error") {
                let run_id = object
                    .get("runId")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                if let Some(payload) = object.get_mut("payload")
                    && let Ok(error) = serde_json::from_value::<ErrorPayload>(payload.clone())
                {
                    if let Some(public) = public_error(&run_id, &error) {
                        *payload = serde_json::to_value(public).unwrap_or(Value::Null);
                    }
                    return;
                }
            }
            object.values_mut().for_each(redact_nested);
        }
        Value::Array(items) => items.iter_mut().for_each(redact_nested),
        _ => {}
    }
}

/// An event's JSON as a client may read it: [`public_event`], written out.
pub(crate) fn public_json(event: &kestrel_core::event::Event) -> String {
    public_event(event).to_json()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use kestrel_core::event::ToolOutputPayload;
    use serde_json::json;

    fn error(kind: &str, text: &str) -> Event {
        Event::agent(
            "run-1".into(),
            EventKind::Error(ErrorPayload {
                error: text.to_owned(),
                kind: kind.to_owned(),
            }),
        )
    }

    #[test]
    fn provider_text_is_replaced_and_own_text_kept() {
        let failed = error("model", "401: sk-SECRET");
        let json = public_event(&failed).to_json();
        assert!(!json.contains("SECRET"), "{json}");
        assert!(
            json.contains("run run-1: the model provider failed"),
            "{json}"
        );
        assert!(json.contains(r#""kind":"model""#), "{json}");
        let busy = error("thread-busy", "thread \"t\" is busy with run r2");
        assert!(matches!(public_event(&busy), Cow::Borrowed(_)));
    }

    #[test]
    fn nested_sub_agent_errors_are_replaced() {
        let inner = error("internal", "db password=hunter2").to_json();
        let nested: Value = serde_json::from_str(&inner).unwrap_or_default();
        let outer = Event::agent(
            "run-0".into(),
            EventKind::ToolOutput(ToolOutputPayload {
                tool_call_id: "c".into(),
                tool_name: "agent-x".into(),
                output: json!({"deeper": [nested]}),
            }),
        );
        let json = public_event(&outer).to_json();
        assert!(!json.contains("hunter2"), "{json}");
        assert!(json.contains("run run-1: the run failed"), "{json}");
    }

    #[test]
    fn a_network_primitives_errors_are_replaced() {
        let network = |kind: EventKind| Event {
            run_id: "net-run".into(),
            from: kestrel_core::event::EventSource::Network,
            kind,
        };
        let failed = error("model", "401: sk-SECRET");
        let direct = network(EventKind::AgentExecutionEvent(Box::new(failed.clone())));
        let json = public_event(&direct).to_json();
        assert!(!json.contains("SECRET"), "{json}");
        assert!(json.contains("agent-execution-event-error"), "{json}");
        assert!(json.contains("the model provider failed"), "{json}");
        // An agent step's error, in a workflow the network ran.
        let step = Event {
            run_id: "wf-run".into(),
            from: kestrel_core::event::EventSource::Workflow,
            kind: EventKind::WorkflowStepOutput(kestrel_core::event::WorkflowStepOutputPayload {
                step_name: "research".into(),
                output: serde_json::from_str(&failed.to_json()).unwrap_or_default(),
                run_id: "wf-run".into(),
            }),
        };
        let nested = network(EventKind::WorkflowExecutionEvent(Box::new(step)));
        let json = public_event(&nested).to_json();
        assert!(!json.contains("SECRET"), "{json}");
        assert!(
            json.contains("workflow-execution-event-workflow-step-output"),
            "{json}"
        );
        assert!(json.contains("the model provider failed"), "{json}");
        // Nothing to hide: not copied.
        let busy = error("thread-busy", "thread \"t\" is busy");
        let own = network(EventKind::AgentExecutionEvent(Box::new(busy)));
        assert!(matches!(public_event(&own), Cow::Borrowed(_)));
    }

    #[test]
    fn an_agent_steps_errors_are_replaced() {
        let inner = error("model", "401: sk-SECRET").to_json();
        let nested: Value = serde_json::from_str(&inner).unwrap_or_default();
        let outer = Event {
            run_id: "wf-run".into(),
            from: kestrel_core::event::EventSource::Workflow,
            kind: EventKind::WorkflowStepOutput(kestrel_core::event::WorkflowStepOutputPayload {
                step_name: "research".into(),
                output: nested,
                run_id: "wf-run".into(),
            }),
        };
        let json = public_event(&outer).to_json();
        assert!(!json.contains("SECRET"), "{json}");
        assert!(json.contains("the model provider failed"), "{json}");
    }
}
