//! The tool calls of a step: parsing what the model sent, and the table that says, for each
//! call, whether it runs now, waits (for an approval, resume data, a client's result) or is
//! settled by a decision recorded on the stopped run.

use serde_json::Value;

use super::state::{
    CallDecision, CallProgress, StepResult, ToolCallRecord, ToolResultRecord, Waiting,
};

/// A tool call as the model sent it: its argument text parsed as JSON (an empty text is no
/// arguments); text that does not parse is kept, with the parser's message, so the call fails
/// with an error the model can read.
pub fn parse_call(id: String, name: String, input: String) -> ToolCallRecord {
    let trimmed = input.trim();
    // Providers send an empty argument string for tools without parameters.
    let parsed = if trimmed.is_empty() {
        Ok(Value::Object(Default::default()))
    } else {
        serde_json::from_str::<Value>(trimmed)
    };
    match parsed {
        Ok(args) => ToolCallRecord {
            tool_call_id: id,
            tool_name: name,
            args,
            parse_error: None,
        },
        Err(e) => ToolCallRecord {
            tool_call_id: id,
            tool_name: name,
            args: Value::String(input),
            parse_error: Some(e.to_string()),
        },
    }
}

/// The progress table of a step whose tools are about to run: each call with whether it needs
/// approval (asked once, now, and kept with the run).
pub fn prepare_calls(
    step: &StepResult,
    step_index: usize,
    mut needs_approval: impl FnMut(&ToolCallRecord) -> bool,
) -> Vec<CallProgress> {
    step.tool_calls
        .iter()
        .map(|call| {
            let approval = needs_approval(call);
            CallProgress::new(call.clone(), approval, step_index)
        })
        .collect()
}

/// A suspended call resumed: what it is resumed with, and what it suspended with.
#[derive(Debug, Clone, PartialEq)]
pub struct Resumption {
    /// The resume data (checked against the tool's resume schema).
    pub data: Value,
    /// The payload the call suspended with.
    pub suspend_payload: Value,
}

/// What [`plan_calls`] decided for a step's calls.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct CallPlan {
    /// The calls that run now, by index, with what a resumed call is resumed with.
    pub run: Vec<(usize, Option<Resumption>)>,
    /// The calls a decision settled without running (declined, a client's result), by index:
    /// their results are new.
    pub settled: Vec<usize>,
}

/// Acts on the decisions recorded on the calls and says which run now. A call without a
/// decision waits when it needs an approval it does not have, or when its tool is a client
/// tool (`is_client_tool`); a call that waits keeps waiting until it gets a decision.
pub fn plan_calls(calls: &mut [CallProgress], is_client_tool: impl Fn(&str) -> bool) -> CallPlan {
    let mut plan = CallPlan::default();
    for (index, progress) in calls.iter_mut().enumerate() {
        if progress.result.is_some() {
            continue;
        }
        let settle = |progress: &CallProgress, result: Value, is_error: bool, denied: bool| {
            ToolResultRecord {
                tool_call_id: progress.call.tool_call_id.clone(),
                tool_name: progress.call.tool_name.clone(),
                args: progress.call.args.clone(),
                result,
                is_error,
                denied,
            }
        };
        match progress.decision.take() {
            Some(CallDecision::Declined { reason }) => {
                progress.waiting = None;
                progress.result = Some(settle(progress, Value::String(reason), true, true));
                plan.settled.push(index);
            }
            Some(CallDecision::ClientResult { result, is_error }) => {
                progress.waiting = None;
                progress.result = Some(settle(progress, result, is_error, false));
                plan.settled.push(index);
            }
            Some(CallDecision::Approved) => {
                progress.waiting = None;
                progress.approved = true;
                plan.run.push((index, None));
            }
            Some(CallDecision::Resumed { data }) => {
                let suspend_payload = match progress.waiting.take() {
                    Some(Waiting::Resume { payload }) => payload,
                    _ => Value::Null,
                };
                plan.run.push((
                    index,
                    Some(Resumption {
                        data,
                        suspend_payload,
                    }),
                ));
            }
            Some(CallDecision::SubAgent) => {
                // The decision is in the sub-agent's run: the delegation continues it.
                progress.waiting = None;
                plan.run.push((index, None));
            }
            None if progress.waiting.is_some() => {}
            None if progress.requires_approval && !progress.approved => {
                progress.waiting = Some(Waiting::Approval);
            }
            None if is_client_tool(&progress.call.tool_name) => {
                progress.waiting = Some(Waiting::ClientResult);
            }
            None => plan.run.push((index, None)),
        }
    }
    plan
}

/// How a step's calls stand once those that could run have: some still wait (`Err`: the run
/// stops on them), or the step is done with their results, in the model's order.
pub fn calls_outcome(calls: Vec<CallProgress>) -> Result<Vec<ToolResultRecord>, Vec<CallProgress>> {
    if calls.iter().any(|c| c.waiting.is_some()) {
        return Err(calls);
    }
    Ok(calls.into_iter().filter_map(|c| c.result).collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::model::{FinishReason, Usage};
    use serde_json::json;

    fn call(id: &str, tool: &str) -> ToolCallRecord {
        ToolCallRecord {
            tool_call_id: id.into(),
            tool_name: tool.into(),
            args: json!({"a": 200}),
            parse_error: None,
        }
    }

    fn step(calls: Vec<ToolCallRecord>) -> StepResult {
        StepResult {
            message_id: "m".into(),
            text: String::new(),
            reasoning: String::new(),
            tool_calls: calls,
            tool_results: Vec::new(),
            finish_reason: FinishReason::ToolCalls,
            usage: Usage::default(),
        }
    }

    #[test]
    fn arguments_parse_or_keep_their_text_and_error() {
        let ok = parse_call("1".into(), "t".into(), r#" {"a": 1} "#.into());
        assert_eq!(ok.args, json!({"a": 1}));
        assert_eq!(ok.parse_error, None);
        let empty = parse_call("2".into(), "t".into(), "  ".into());
        assert_eq!(empty.args, json!({}));
        let bad = parse_call("3".into(), "t".into(), "{oops".into());
        assert_eq!(bad.args, json!("{oops"));
        assert!(bad.parse_error.is_some());
    }

    #[test]
    fn approval_is_asked_once_per_call_when_the_step_is_prepared() {
        let s = step(vec![call("1", "add"), call("2", "mul")]);
        let calls = prepare_calls(&s, 3, |c| c.tool_name == "add");
        assert!(calls[0].requires_approval);
        assert!(!calls[1].requires_approval);
        assert_ne!(
            calls[0].fingerprint,
            prepare_calls(&s, 4, |_| true)[0].fingerprint
        );
    }

    #[test]
    fn calls_run_wait_or_settle_by_the_table() {
        let s = step(vec![
            call("free", "add"),
            call("gated", "add"),
            call("client", "ui"),
        ]);
        let mut calls = prepare_calls(&s, 0, |c| c.tool_call_id == "gated");
        let plan = plan_calls(&mut calls, |name| name == "ui");
        assert_eq!(plan.run, vec![(0, None)]);
        assert!(plan.settled.is_empty());
        assert_eq!(calls[1].waiting, Some(Waiting::Approval));
        assert_eq!(calls[2].waiting, Some(Waiting::ClientResult));
        // The first ran; the others wait, so the run stops on them.
        calls[0].result = Some(ToolResultRecord {
            tool_call_id: "free".into(),
            tool_name: "add".into(),
            args: json!({}),
            result: json!(1),
            is_error: false,
            denied: false,
        });
        let mut calls = calls_outcome(calls).unwrap_err();
        // Waiting calls without a decision keep waiting.
        assert_eq!(
            plan_calls(&mut calls, |name| name == "ui"),
            CallPlan::default()
        );

        calls[1].decision = Some(CallDecision::Declined {
            reason: "no".into(),
        });
        calls[2].decision = Some(CallDecision::ClientResult {
            result: json!("done"),
            is_error: false,
        });
        let plan = plan_calls(&mut calls, |name| name == "ui");
        assert!(plan.run.is_empty());
        assert_eq!(plan.settled, vec![1, 2]);
        let declined = calls[1].result.as_ref().unwrap();
        assert!(declined.denied && declined.is_error);
        assert_eq!(declined.result, json!("no"));
        let results = calls_outcome(calls).unwrap();
        assert_eq!(results.len(), 3);
        assert_eq!(results[2].result, json!("done"));
    }

    #[test]
    fn an_approved_call_runs_and_is_not_asked_again() {
        let s = step(vec![call("gated", "add")]);
        let mut calls = prepare_calls(&s, 0, |_| true);
        plan_calls(&mut calls, |_| false);
        calls[0].decision = Some(CallDecision::Approved);
        assert_eq!(plan_calls(&mut calls, |_| false).run, vec![(0, None)]);
        assert!(calls[0].approved);
        assert_eq!(calls[0].waiting, None);
        // Still without a result (say the process stopped while it ran): it runs again,
        // without asking again.
        assert_eq!(plan_calls(&mut calls, |_| false).run, vec![(0, None)]);
    }

    #[test]
    fn resumed_and_sub_agent_decisions_run_the_call_again() {
        let s = step(vec![call("a", "ask"), call("d", "agent-helper")]);
        let mut calls = prepare_calls(&s, 0, |_| false);
        calls[0].waiting = Some(Waiting::Resume {
            payload: json!({"asked": 1}),
        });
        calls[0].decision = Some(CallDecision::Resumed {
            data: json!({"ok": true}),
        });
        calls[1].decision = Some(CallDecision::SubAgent);
        let plan = plan_calls(&mut calls, |_| false);
        let resumed = Resumption {
            data: json!({"ok": true}),
            suspend_payload: json!({"asked": 1}),
        };
        assert_eq!(plan.run, vec![(0, Some(resumed)), (1, None)]);
        assert!(
            calls
                .iter()
                .all(|c| c.waiting.is_none() && c.decision.is_none())
        );
    }
}
