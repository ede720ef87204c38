//! Delegation hooks: the start hook, failing hooks, the message filter, the complete hook,
//! bail and feedback, and the sub-agent's tool results reaching the parent.

use std::sync::Arc;

use kestrel_core::agent::delegation::DELEGATION_HOOK_ERRORS_KEY;
use kestrel_core::agent::{
    Agent, DelegationCompleteOutcome, DelegationOptions, DelegationStartOutcome, HookErrorStrategy,
};
use kestrel_core::context::RequestContext;
use kestrel_core::memory::{AgentMemory, MemoryError, MemoryScope, Persist, RecalledContext};
use kestrel_core::message::{Message, Role};
use kestrel_core::model::{FinishReason, ModelError, ScriptedModel, ScriptedResponse};
use kestrel_core::tool::create_tool;
use serde_json::{Value, json};

use super::last_results;

/// A parent that delegates once to `child` with `prompt`, then answers with what it read.
fn parent_of(child: Agent, prompt: &'static str) -> (Agent, Arc<ScriptedModel>) {
    let model = Arc::new(ScriptedModel::from_fn(move |req| match last_results(req) {
        None => ScriptedResponse::tool_call(
            "d1",
            format!("agent-{}", "child"),
            json!({ "prompt": prompt }),
        ),
        Some(results) => ScriptedResponse::text(format!("read: {results}")),
    }));
    let parent = Agent::builder("parent")
        .model(model.clone())
        .agents([child])
        .build()
        .unwrap();
    (parent, model)
}

/// A child answering with the last user message it got (and how many steps it may take).
fn echo_child() -> (Agent, Arc<ScriptedModel>) {
    let model = Arc::new(ScriptedModel::from_fn(|req| {
        let last = req.messages.last().unwrap().text();
        ScriptedResponse::text(format!("echo {last}"))
    }));
    let agent = Agent::builder("child")
        .description("Echoes")
        .model(model.clone())
        .build()
        .unwrap();
    (agent, model)
}

fn hook_errors(context: &RequestContext) -> Vec<Value> {
    match context.get(DELEGATION_HOOK_ERRORS_KEY) {
        Some(Value::Array(errors)) => errors,
        _ => Vec::new(),
    }
}

#[tokio::test]
async fn the_start_hook_changes_the_prompt_and_passes_context_or_rejects() {
    let (_, child_model) = echo_child();
    let seen_audience = Arc::new(std::sync::Mutex::new(None));
    let audience = seen_audience.clone();
    let child = Agent::builder("child")
        .description("Echoes")
        .instructions_fn(move |ctx: RequestContext| {
            let audience = audience.clone();
            async move {
                *audience.lock().unwrap() = ctx.get_str("audience");
                Ok("You echo.".to_owned())
            }
        })
        .model(child_model.clone())
        .build()
        .unwrap();
    let (parent, _) = parent_of(child, "research AI");
    let hooks = DelegationOptions::new().on_delegation_start(|start| async move {
        assert_eq!(start.primitive_id, "child");
        assert_eq!(start.iteration, 0);
        assert_eq!(start.tool_call_id, "d1");
        start.request_context.set("audience", "technical");
        Ok(DelegationStartOutcome::proceed()
            .prompt(format!("{} (focus on 2025)", start.prompt))
            .max_steps(1))
    });
    let result = parent.generate("go").delegation(hooks).await.unwrap();
    assert_eq!(result.text, "read: echo research AI (focus on 2025)");
    assert_eq!(seen_audience.lock().unwrap().as_deref(), Some("technical"));

    let (child, child_model) = echo_child();
    let (parent, _) = parent_of(child, "research AI");
    let reject = DelegationOptions::new().on_delegation_start(|_| async {
        Ok(DelegationStartOutcome::reject("Synthesize what you have."))
    });
    let result = parent.generate("go").delegation(reject).await.unwrap();
    assert_eq!(
        result.text,
        "read: error: The delegation to \"child\" was rejected: Synthesize what you have."
    );
    assert_eq!(child_model.calls(), 0, "a rejected delegation never runs");
}

#[tokio::test]
async fn failing_or_contradictory_hooks_are_recorded_and_skipped_or_thrown() {
    for strategy in [HookErrorStrategy::Continue, HookErrorStrategy::Throw] {
        // A start hook that contradicts itself, and a filter that fails.
        let (child, child_model) = echo_child();
        let (parent, _) = parent_of(child, "original");
        let hooks = DelegationOptions::new()
            .hook_error_strategy(strategy)
            .on_delegation_start(|_| async {
                Ok(DelegationStartOutcome::reject("no").prompt("but also this"))
            })
            .message_filter(|_| async { Err::<Vec<Message>, _>("filter broke".into()) });
        let context = RequestContext::new();
        let result = parent
            .generate("go")
            .delegation(hooks)
            .request_context(context.clone())
            .await
            .unwrap();
        let errors = hook_errors(&context);
        match strategy {
            HookErrorStrategy::Continue => {
                assert_eq!(result.text, "read: echo original");
                assert_eq!(errors.len(), 2, "{errors:?}");
                assert_eq!(errors[1]["hook"], "messageFilter");
                assert_eq!(errors[1]["message"], "filter broke");
            }
            HookErrorStrategy::Throw => {
                assert_eq!(
                    result.text,
                    "read: error: The \"child\" agent could not complete the task."
                );
                assert_eq!(child_model.calls(), 0);
                assert_eq!(errors.len(), 1, "{errors:?}");
            }
        }
        let first = &errors[0];
        assert_eq!(first["hook"], "onDelegationStart");
        assert_eq!(first["primitiveId"], "child");
        assert_eq!(first["toolCallId"], "d1");
        assert_eq!(first["runId"], json!(result.run_id));
        assert!(
            first["message"]
                .as_str()
                .unwrap()
                .contains("both rejected the delegation and changed it"),
            "{first}"
        );
    }
}

#[tokio::test]
async fn the_message_filter_chooses_what_the_sub_agent_receives() {
    let (child, child_model) = echo_child();
    let (parent, _) = parent_of(child, "the task");
    let hooks = DelegationOptions::new().message_filter(|ctx| async move {
        assert_eq!(ctx.prompt, "the task");
        // Drop the whole conversation: the sub-agent gets the prompt alone.
        Ok(ctx.messages.into_iter().filter(|_| false).collect())
    });
    parent
        .generate("secret context")
        .delegation(hooks)
        .await
        .unwrap();
    let asked = &child_model.requests()[0];
    let texts: Vec<String> = asked.messages.iter().map(Message::text).collect();
    assert_eq!(texts, ["the task"]);
}

#[tokio::test]
async fn the_complete_hook_replaces_the_text_and_a_failure_stays_a_failure() {
    let (child, _) = echo_child();
    let (parent, _) = parent_of(child, "task");
    let hooks = DelegationOptions::new().on_delegation_complete(|done| async move {
        assert!(done.success);
        let result = done.result.unwrap();
        assert_eq!(result.text, "echo task");
        assert_eq!(result.finish_reason, FinishReason::Stop);
        assert_eq!(done.messages.len(), 1);
        Ok(DelegationCompleteOutcome::keep().result_text("summary only"))
    });
    let result = parent.generate("go").delegation(hooks).await.unwrap();
    assert_eq!(result.text, "read: summary only");

    let broken = Agent::builder("child")
        .description("Breaks")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::error(ModelError::BadRequest {
                provider: "openai".into(),
                status: 400,
                message: "provider secret".into(),
            })
        })))
        .build()
        .unwrap();
    let (parent, _) = parent_of(broken, "task");
    let hooks = DelegationOptions::new().on_delegation_complete(|done| async move {
        assert!(!done.success);
        assert!(done.error.unwrap().contains("provider secret"));
        Ok(DelegationCompleteOutcome::keep().result_text("Try another approach."))
    });
    let result = parent.generate("go").delegation(hooks).await.unwrap();
    assert_eq!(result.text, "read: error: Try another approach.");
}

/// A memory that records what is stored, to see feedback saved for the next turn.
#[derive(Default)]
struct Recorder {
    stored: std::sync::Mutex<Vec<Message>>,
}

#[async_trait::async_trait]
impl AgentMemory for Recorder {
    async fn recall(
        &self,
        _scope: &MemoryScope,
        _input: &[Message],
        _ctx: &RequestContext,
    ) -> Result<RecalledContext, MemoryError> {
        Ok(RecalledContext::default())
    }

    async fn persist(
        &self,
        _scope: &MemoryScope,
        messages: &[Message],
        _how: Persist<'_>,
    ) -> Result<(), MemoryError> {
        self.stored.lock().unwrap().extend(messages.iter().cloned());
        Ok(())
    }
}

#[tokio::test]
async fn bail_stops_the_parent_and_feedback_is_saved_for_the_next_turn() {
    let (child, _) = echo_child();
    let memory = Arc::new(Recorder::default());
    let model = Arc::new(ScriptedModel::from_fn(|req| match last_results(req) {
        None => ScriptedResponse::tool_call("d1", "agent-child", json!({"prompt": "task"})),
        Some(_) => ScriptedResponse::text("the parent went on"),
    }));
    let parent = Agent::builder("parent")
        .model(model.clone())
        .agents([child])
        .memory(memory.clone())
        .build()
        .unwrap();
    let hooks = DelegationOptions::new().on_delegation_complete(|done| async move {
        Ok(DelegationCompleteOutcome::keep()
            .bail()
            .feedback(format!("{} needed a clearer task", done.primitive_id)))
    });
    let result = parent
        .generate("go")
        .delegation(hooks)
        .memory("t1", "alice")
        .await
        .unwrap();
    assert_eq!(model.calls(), 1, "the loop stopped after the delegation");
    assert_eq!(result.finish_reason, FinishReason::Stop);
    assert_eq!(result.tool_results[0].result, json!("echo task"));
    let stored = memory.stored.lock().unwrap().clone();
    let last = stored.last().unwrap();
    assert_eq!(last.role, Role::System);
    assert_eq!(last.text(), "child needed a clearer task");
}

#[tokio::test]
async fn sub_agent_tool_results_reach_the_parent_model_only_when_asked() {
    let lookup = create_tool("lookup")
        .description("Looks up")
        .input_schema(json!({"type": "object"}))
        .execute(|_input: Value, _ctx| async { Ok("42") });
    let child = || {
        Agent::builder("child")
            .description("Uses a tool")
            .model(Arc::new(ScriptedModel::from_fn(|req| {
                match last_results(req) {
                    None => ScriptedResponse::tool_call("l1", "lookup", json!({})),
                    Some(_) => ScriptedResponse::text("found it"),
                }
            })))
            .tool(lookup.clone())
            .build()
            .unwrap()
    };
    let (parent, _) = parent_of(child(), "task");
    let plain = parent.generate("go").await.unwrap();
    assert_eq!(plain.text, "read: found it");
    let (parent, _) = parent_of(child(), "task");
    let hooks = DelegationOptions::new().include_sub_agent_tool_results_in_model_context(true);
    let detailed = parent.generate("go").delegation(hooks).await.unwrap();
    assert_eq!(
        detailed.text,
        "read: found it\n\nTool results of the sub-agent:\n- lookup({}) returned \"42\""
    );
}
