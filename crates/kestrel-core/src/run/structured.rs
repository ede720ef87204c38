//! Structured output: asking for a JSON answer, and what becomes of the answer at the end.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::FinishReason;
use crate::schema::{schema_errors, schema_of};

/// What to do when the final answer does not match the structured output schema.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "strategy", content = "value")]
pub enum ErrorStrategy {
    /// Fail the run with [`crate::agent::AgentError::StructuredOutput`] (the default).
    #[default]
    Strict,
    /// Log a warning and finish with no object.
    Warn,
    /// Finish with this value as the object.
    Fallback(Value),
}

/// Asks the model for a JSON answer matching a schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StructuredOutput {
    /// The JSON schema the answer must satisfy.
    pub schema: Value,
    /// A name for the schema (some providers require one).
    pub name: Option<String>,
    /// What to do when the answer does not parse or validate.
    pub error_strategy: ErrorStrategy,
}

impl StructuredOutput {
    /// Structured output with this JSON schema and the strict strategy.
    pub fn new(schema: Value) -> Self {
        Self {
            schema,
            name: None,
            error_strategy: ErrorStrategy::Strict,
        }
    }

    /// Structured output whose schema comes from a type.
    pub fn of<T: schemars::JsonSchema>() -> Self {
        let mut out = Self::new(schema_of::<T>());
        out.name = Some(T::schema_name().into_owned());
        out
    }

    /// Sets the error strategy.
    pub fn error_strategy(mut self, strategy: ErrorStrategy) -> Self {
        self.error_strategy = strategy;
        self
    }
}

/// What the end of a run makes of its final text under [`StructuredOutput`].
#[derive(Debug, Clone, PartialEq)]
pub enum StructuredOutcome {
    /// No structured output was asked for, or the run did not end normally.
    None,
    /// The answer parsed and matched the schema (or the fallback stands in for it).
    Object(Value),
    /// The answer did not do: the run finishes without an object, with this warning.
    Warned(String),
    /// The answer did not do: the run fails with this message.
    Failed(String),
}

/// The structured-output decision at the end of a run that ended for `reason` with `text`.
pub fn structured_outcome(
    spec: Option<&StructuredOutput>,
    reason: FinishReason,
    text: &str,
) -> StructuredOutcome {
    let (FinishReason::Stop, Some(spec)) = (reason, spec) else {
        return StructuredOutcome::None;
    };
    match parse_structured(spec, text) {
        Ok(value) => StructuredOutcome::Object(value),
        Err(message) => match &spec.error_strategy {
            ErrorStrategy::Strict => StructuredOutcome::Failed(message),
            ErrorStrategy::Warn => StructuredOutcome::Warned(message),
            ErrorStrategy::Fallback(value) => StructuredOutcome::Object(value.clone()),
        },
    }
}

/// Parses the final text as JSON (tolerating a Markdown code fence) and validates it.
fn parse_structured(spec: &StructuredOutput, text: &str) -> Result<Value, String> {
    let body = strip_code_fence(text.trim());
    let value: Value =
        serde_json::from_str(body).map_err(|e| format!("the answer is not valid JSON ({e})"))?;
    let errors = schema_errors(&spec.schema, &value);
    if errors.is_empty() {
        Ok(value)
    } else {
        Err(format!(
            "the answer does not match the schema: {}",
            errors.join("; ")
        ))
    }
}

fn strip_code_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let rest = rest.split_once('\n').map(|(_, body)| body).unwrap_or(rest);
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use serde_json::json;

    fn spec(strategy: ErrorStrategy) -> StructuredOutput {
        StructuredOutput::new(json!({
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        }))
        .error_strategy(strategy)
    }

    #[test]
    fn an_answer_parses_with_or_without_a_code_fence() {
        let strict = spec(ErrorStrategy::Strict);
        for text in [
            r#"{"city": "Oslo"}"#,
            "```json\n{\"city\": \"Oslo\"}\n```",
            "  ```\n{\"city\": \"Oslo\"}```  ",
        ] {
            assert_eq!(
                structured_outcome(Some(&strict), FinishReason::Stop, text),
                StructuredOutcome::Object(json!({"city": "Oslo"})),
                "{text}"
            );
        }
    }

    #[test]
    fn a_bad_answer_goes_by_the_error_strategy() {
        let bad = r#"{"town": "Oslo"}"#;
        let StructuredOutcome::Failed(message) =
            structured_outcome(Some(&spec(ErrorStrategy::Strict)), FinishReason::Stop, bad)
        else {
            panic!("strict fails");
        };
        assert!(message.contains("does not match the schema"), "{message}");
        assert!(matches!(
            structured_outcome(Some(&spec(ErrorStrategy::Warn)), FinishReason::Stop, "nope"),
            StructuredOutcome::Warned(m) if m.contains("not valid JSON")
        ));
        assert_eq!(
            structured_outcome(
                Some(&spec(ErrorStrategy::Fallback(json!({"city": "?"})))),
                FinishReason::Stop,
                bad
            ),
            StructuredOutcome::Object(json!({"city": "?"}))
        );
    }

    #[test]
    fn only_a_final_answer_is_parsed() {
        let strict = spec(ErrorStrategy::Strict);
        assert_eq!(
            structured_outcome(Some(&strict), FinishReason::MaxSteps, "not json"),
            StructuredOutcome::None
        );
        assert_eq!(
            structured_outcome(None, FinishReason::Stop, "text"),
            StructuredOutcome::None
        );
    }
}
