//! Whether an iteration completed the task: the scorers of [`super::NetworkCompletion`], or
//! (without any) the routing model asked ("Default LLM Completion"); then the final answer
//! and the checks' feedback in the thread.
//!
//! A check that fails (the routing model's call, a scorer) is reported in the library's words:
//! its reason reaches the stream, the thread's feedback and the router, and the failure's own
//! text (a provider's answer) goes to the log.

use std::time::Instant;

use serde::Deserialize;
use serde_json::json;

use super::call::ABORTED;
use super::primitives::Exec;
use super::records::{self, FEEDBACK_HEADING};
use crate::agent::{Agent, RunOptions, StructuredOutput};
use crate::definition::iteration::{CompletionStrategy, TaskContext};
use crate::event::{
    EventKind, NetworkValidationEndPayload, NetworkValidationStartPayload, PrimitiveType,
    RoutingAgentTextDeltaPayload, RoutingAgentTextStartPayload, RoutingDecision, ScorerResult,
    WorkflowUsage,
};
use crate::message::Message;

/// The default check's id and name (Mastra's).
const DEFAULT_CHECK_ID: &str = "default-completion";
const DEFAULT_CHECK_NAME: &str = "Default LLM Completion";

/// What the checks of an iteration decided.
pub(crate) struct Verdict {
    pub passed: bool,
    pub reason: Option<String>,
    /// The answer the user reads, when the checks wrote one.
    pub final_result: Option<String>,
    pub feedback: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DefaultAnswer {
    is_complete: bool,
    #[serde(default)]
    completion_reason: String,
    #[serde(default)]
    final_result: String,
}

fn millis(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Checks the iteration's `result`, streams `network-validation-*`, and saves the final
/// answer and the feedback to the thread.
pub(crate) async fn check(
    exec: &Exec<'_>,
    router: &Agent,
    decision: &RoutingDecision,
    result: &str,
    previous: Option<&str>,
    last: bool,
    usage: &mut WorkflowUsage,
) -> Verdict {
    let completion = &exec.network.options.completion;
    let run_id = exec.ctx.run_id().to_owned();
    let iteration = decision.iteration;
    exec.emit(EventKind::NetworkValidationStart(
        NetworkValidationStartPayload {
            run_id: run_id.clone(),
            iteration,
            checks_count: completion.scorers.len().max(1),
        },
    ))
    .await;
    let started = Instant::now();
    let mut timed_out = false;
    let (passed, reason, final_result, results) = if result == ABORTED {
        (true, Some("Task aborted".to_owned()), None, Vec::new())
    } else if completion.scorers.is_empty() {
        let (result, answer) = default_check(exec, router, decision, result, previous, usage).await;
        (result.passed, result.reason.clone(), answer, vec![result])
    } else {
        let (results, out_of_time) = scorers(exec, decision, result).await;
        timed_out = out_of_time;
        let passed = match completion.strategy {
            CompletionStrategy::All => results.iter().all(|r| r.passed),
            CompletionStrategy::Any => results.iter().any(|r| r.passed),
        };
        let reason = results
            .iter()
            .find(|r| r.passed)
            .or_else(|| results.first())
            .and_then(|r| r.reason.clone());
        (passed, reason, None, results)
    };
    let duration = millis(started);
    exec.emit(EventKind::NetworkValidationEnd(
        NetworkValidationEndPayload {
            run_id,
            iteration,
            passed,
            results: results.clone(),
            duration,
            timed_out,
            reason: reason.clone(),
            max_iteration_reached: last,
            suppress_feedback: completion.suppress_feedback,
        },
    ))
    .await;
    let feedback = feedback(passed, duration, timed_out, &results, last);
    let mut saved = Vec::new();
    if passed {
        let answer = final_result.clone().unwrap_or_else(|| result.to_owned());
        if !answer.is_empty() && result != ABORTED {
            saved.push(Message::assistant(answer));
        }
    }
    if !completion.suppress_feedback {
        saved.push(Message::assistant(feedback.clone()));
    }
    records::save(exec.memory.as_ref(), &exec.scope, &saved).await;
    Verdict {
        passed,
        reason,
        final_result,
        feedback,
    }
}

/// The routing model judges; its final answer streams as `routing-agent-text-*`.
async fn default_check(
    exec: &Exec<'_>,
    router: &Agent,
    decision: &RoutingDecision,
    result: &str,
    previous: Option<&str>,
    usage: &mut WorkflowUsage,
) -> (ScorerResult, Option<String>) {
    let started = Instant::now();
    let text_run = crate::id::new_id();
    let verdict = |passed: bool, reason: String, final_result: Option<String>| ScorerResult {
        score: if passed { 1.0 } else { 0.0 },
        passed,
        reason: Some(reason),
        final_result,
        scorer_id: DEFAULT_CHECK_ID.to_owned(),
        scorer_name: DEFAULT_CHECK_NAME.to_owned(),
        duration: millis(started),
    };
    exec.emit(EventKind::RoutingAgentTextStart(
        RoutingAgentTextStartPayload {
            run_id: text_run.clone(),
        },
    ))
    .await;
    // A router that chose `none` found the task complete itself: no second opinion is asked.
    if decision.primitive_type == PrimitiveType::None {
        let answer = previous.unwrap_or(&decision.selection_reason).to_owned();
        if !answer.is_empty() {
            exec.emit(EventKind::RoutingAgentTextDelta(
                RoutingAgentTextDeltaPayload {
                    text: answer.clone(),
                },
            ))
            .await;
        }
        let reason = decision.selection_reason.clone();
        return (verdict(true, reason, Some(answer.clone())), Some(answer));
    }
    let prompt = format!(
        "The {kind} {id} has contributed to the task. Its result:\n{result}\n\nThe task: {task}\n\n\
Judge, strictly by the system instructions, whether the task is now complete. If it is, \
finalResult is the answer the user will read: leave it empty when the result above already is \
that answer, else write it in full. Answer with JSON: {{\"isComplete\": boolean, \
\"completionReason\": string, \"finalResult\": string}}.",
        kind = decision.primitive_type.as_str(),
        id = decision.primitive_id,
        task = exec.init.task,
    );
    let schema = json!({
        "type": "object",
        "properties": {
            "isComplete": {"type": "boolean"},
            "completionReason": {"type": "string"},
            "finalResult": {"type": "string"}
        },
        "required": ["isComplete", "completionReason", "finalResult"],
        "additionalProperties": false
    });
    let mut output = StructuredOutput::new(schema);
    output.name = Some("completion".to_owned());
    let mut options = RunOptions::new()
        .run_id(text_run)
        .max_steps(1)
        .context(exec.history().await)
        .structured_output(output)
        .request_context(exec.ctx.request_context().clone())
        .abort_signal(exec.ctx.abort_signal().child());
    if let Some(settings) = &exec.network.options.model_settings {
        options = options.model_settings(settings.clone());
    }
    let answer = router.generate(prompt).options(options).await;
    // On failure: what the reason says, and what only the log gets.
    let answer = match answer {
        Ok(generated) => {
            usage.add(&generated.usage);
            generated
                .object
                .ok_or_else(|| ("its answer was empty", "no object".to_owned()))
                .and_then(|o| {
                    serde_json::from_value::<DefaultAnswer>(o)
                        .map_err(|e| ("its answer was malformed", e.to_string()))
                })
        }
        Err(error) => Err(("the model provider failed", error.to_string())),
    };
    match answer {
        Ok(answer) if answer.is_complete => {
            let text = if answer.final_result.trim().is_empty() {
                result.to_owned()
            } else {
                answer.final_result
            };
            if !text.is_empty() {
                exec.emit(EventKind::RoutingAgentTextDelta(
                    RoutingAgentTextDeltaPayload { text: text.clone() },
                ))
                .await;
            }
            (
                verdict(true, answer.completion_reason, Some(text.clone())),
                Some(text),
            )
        }
        Ok(answer) => (verdict(false, answer.completion_reason, None), None),
        Err((public, detail)) => {
            let reason = format!("LLM completion check failed: {public}");
            tracing::warn!(error = %detail, "{reason}");
            (verdict(false, reason, None), None)
        }
    }
}

/// Runs the configured scorers (at once or in turn), within the timeout.
async fn scorers(
    exec: &Exec<'_>,
    decision: &RoutingDecision,
    result: &str,
) -> (Vec<ScorerResult>, bool) {
    let completion = &exec.network.options.completion;
    let task = TaskContext {
        task: exec.init.task.clone(),
        answer: result.to_owned(),
        iteration: decision.iteration,
    };
    let deadline = tokio::time::Instant::now() + completion.timeout;
    let one = |scorer: std::sync::Arc<dyn crate::definition::iteration::Scorer>| {
        let task = task.clone();
        async move {
            let started = Instant::now();
            let name = scorer.name().to_owned();
            let outcome = tokio::time::timeout_at(deadline, scorer.score(&task)).await;
            let (score, passed, reason, late) = match outcome {
                Ok(Ok(score)) => (score.score, score.passed, score.reason, false),
                Ok(Err(error)) => {
                    tracing::warn!(scorer = %name, %error, "a network's completion scorer failed");
                    (
                        0.0,
                        false,
                        Some("Scorer threw an error (its text is in the log)".to_owned()),
                        false,
                    )
                }
                Err(_) => (
                    0.0,
                    false,
                    Some("Scorer did not finish before the completion timeout".to_owned()),
                    true,
                ),
            };
            let result = ScorerResult {
                score,
                passed,
                reason,
                final_result: None,
                scorer_id: name.clone(),
                scorer_name: name,
                duration: millis(started),
            };
            (result, late)
        }
    };
    let outcomes: Vec<(ScorerResult, bool)> = if completion.parallel {
        let pending: Vec<_> = completion.scorers.iter().cloned().map(one).collect();
        futures::future::join_all(pending).await
    } else {
        let mut outcomes = Vec::new();
        for scorer in completion.scorers.iter().cloned() {
            let outcome = one(scorer).await;
            let decided = match completion.strategy {
                CompletionStrategy::All => !outcome.0.passed,
                CompletionStrategy::Any => outcome.0.passed,
            };
            let late = outcome.1;
            outcomes.push(outcome);
            if decided || late {
                break;
            }
        }
        outcomes
    };
    let timed_out = outcomes.iter().any(|(_, late)| *late);
    (outcomes.into_iter().map(|(r, _)| r).collect(), timed_out)
}

/// The feedback message of an iteration's checks (the router reads it next).
fn feedback(
    passed: bool,
    duration: u64,
    timed_out: bool,
    results: &[ScorerResult],
    last: bool,
) -> String {
    let mut lines = vec![
        FEEDBACK_HEADING.to_owned(),
        String::new(),
        format!(
            "Overall: {}",
            if passed {
                "✅ COMPLETE"
            } else {
                "❌ NOT COMPLETE"
            }
        ),
        format!("Duration: {duration}ms"),
    ];
    if timed_out {
        lines.push("⚠️ Scoring timed out".to_owned());
    }
    lines.push(String::new());
    for result in results {
        lines.push(format!(
            "###### {} ({})",
            result.scorer_name, result.scorer_id
        ));
        lines.push(format!(
            "Score: {} {}",
            result.score,
            if result.passed { "✅" } else { "❌" }
        ));
        if let Some(reason) = &result.reason {
            lines.push(format!("Reason: {reason}"));
        }
        lines.push(String::new());
    }
    lines.push(
        if passed {
            "✅ The task is complete."
        } else if last {
            "⚠️ Max iterations reached."
        } else {
            "🔄 Will continue working on the task."
        }
        .to_owned(),
    );
    lines.join("\n")
}
