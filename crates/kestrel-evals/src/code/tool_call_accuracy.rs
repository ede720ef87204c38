//! Tool-call accuracy: whether the agent called the expected tool, or the expected tools in
//! order (Mastra's `createToolCallAccuracyScorerCode`).

use async_trait::async_trait;
use kestrel_core::eval::{ScoreResult, Scorer, ScorerError, ScorerRun};
use serde_json::json;

/// What the agent should have called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// This tool, among others (strict: only this one, once).
    Tool(String),
    /// These tools in this order, others allowed between (strict: exactly these).
    Order(Vec<String>),
}

/// Scores 1 when the answer's tool calls are as expected, else 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallAccuracy {
    /// What is expected.
    pub expected: Expected,
    /// Whether nothing else may be called.
    pub strict: bool,
}

impl ToolCallAccuracy {
    /// Expects `tool` to be called.
    pub fn tool(tool: impl Into<String>) -> Self {
        Self {
            expected: Expected::Tool(tool.into()),
            strict: false,
        }
    }

    /// Expects `tools` called in this order.
    pub fn order<I, S>(tools: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            expected: Expected::Order(tools.into_iter().map(Into::into).collect()),
            strict: false,
        }
    }

    /// Nothing else may be called.
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }
}

/// Whether `actual` holds `expected` in order (strict: is exactly it).
fn in_order(actual: &[String], expected: &[String], strict: bool) -> bool {
    if strict {
        return actual == expected;
    }
    let mut last: Option<usize> = None;
    for tool in expected {
        // The first call of each expected tool, as Mastra looks them up.
        let Some(index) = actual.iter().position(|a| a == tool) else {
            return false;
        };
        if last.is_some_and(|last| index <= last) {
            return false;
        }
        last = Some(index);
    }
    true
}

#[async_trait]
impl Scorer for ToolCallAccuracy {
    fn id(&self) -> &str {
        "code-tool-call-accuracy-scorer"
    }

    fn name(&self) -> &str {
        "Tool Call Accuracy Scorer"
    }

    fn description(&self) -> &str {
        match self.expected {
            Expected::Tool(_) => "Evaluates whether the LLM selected the correct tool",
            Expected::Order(_) => "Evaluates whether the LLM called tools in the correct order",
        }
    }

    async fn run(&self, run: ScorerRun) -> Result<ScoreResult, ScorerError> {
        if run.input_text().is_empty() && run.output_text().is_empty() {
            return Err(ScorerError::invalid_run(
                self.id(),
                "input and output messages cannot be empty",
            ));
        }
        let actual = run.tool_calls();
        let (expected_tool, order) = match &self.expected {
            Expected::Tool(tool) => (Some(tool.as_str()), None),
            Expected::Order(order) => (None, Some(order.as_slice())),
        };
        let correct_tool = expected_tool.is_some_and(|tool| {
            if self.strict {
                actual.len() == 1 && actual[0] == tool
            } else {
                actual.iter().any(|a| a == tool)
            }
        });
        let correct_order = order.map(|order| in_order(&actual, order, self.strict));
        let score = if actual.is_empty() {
            0.0
        } else if let Some(order) = order.filter(|o| !o.is_empty()) {
            f64::from(u8::from(in_order(&actual, order, self.strict)))
        } else {
            f64::from(u8::from(correct_tool))
        };
        Ok(ScoreResult::new(run.run_id, score).preprocess(json!({
            "expectedTool": expected_tool,
            "actualTools": actual,
            "strictMode": self.strict,
            "expectedToolOrder": order,
            "hasToolCalls": !actual.is_empty(),
            "correctToolCalled": correct_tool,
            "correctOrderCalled": correct_order,
        })))
    }
}
