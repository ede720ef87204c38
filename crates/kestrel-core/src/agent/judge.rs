//! An agent as a scorer's judge ([`Judge`]): each judge prompt is a run of the agent, its
//! answer asked for through structured output when the step has a schema.

use async_trait::async_trait;
use serde_json::Value;

use crate::definition::{BoxError, StructuredOutput};
use crate::eval::Judge;
use crate::runtime::Agent;

#[async_trait]
impl Judge for Agent {
    fn judge_id(&self) -> &str {
        self.id()
    }

    async fn judge(&self, prompt: &str, schema: Option<&Value>) -> Result<Value, BoxError> {
        let mut request = self.generate(prompt);
        if let Some(schema) = schema {
            request = request.structured_output(StructuredOutput::new(schema.clone()));
        }
        let result = request.await?;
        match (schema, result.object) {
            (Some(_), Some(object)) => Ok(object),
            (Some(_), None) => Err(format!(
                "the judge `{}` did not answer JSON of the step's schema",
                self.id()
            )
            .into()),
            (None, _) => Ok(Value::String(result.text)),
        }
    }
}
