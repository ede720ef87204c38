//! A processor as a workflow step ([`ProcessorStep`], Mastra's processor steps, with the id
//! `processor:<id>`): messages or an answer's text in, the same as the processor left them
//! out; a tripwire ends the run with the status `tripwire`.

use serde_json::{Value, json};

use super::step::{Step, StepContext, StepError};
use crate::message::{Message, Role};
use crate::processor::{
    IntoProcessor, Pipeline, ProcessorContext, ProcessorPhase, SharedProcessor, Stopped,
};

/// Which of a processor's hooks a step runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// `process_input` over `{messages}`.
    Input,
    /// `process_output_step` then `process_output_result` over `{text}`.
    Output,
}

/// A processor as a step.
///
/// - [`ProcessorStep::input`]: input `{messages}` — strings (user messages) or messages
///   (`{role, parts}`) — through the processor's input hook; output `{messages}`.
/// - [`ProcessorStep::output`]: input `{text, messages?}` (an answer, and the conversation it
///   answers) through its output step and output result hooks; output `{text}`.
///
/// A tripwire ends the run with the status `tripwire` (the step's error names the processor
/// and carries the tripwire); a processor that fails fails the step.
#[derive(Clone)]
pub struct ProcessorStep {
    id: String,
    processor: SharedProcessor,
    side: Side,
    input_schema: Value,
    output_schema: Value,
}

impl std::fmt::Debug for ProcessorStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessorStep")
            .field("id", &self.id)
            .field("side", &self.side)
            .finish()
    }
}

fn messages_schema() -> Value {
    json!({
        "type": "array",
        "items": {"anyOf": [
            {"type": "string"},
            {"type": "object", "properties": {"role": {"type": "string"}, "parts": {"type": "array"}}, "required": ["role", "parts"]}
        ]}
    })
}

impl ProcessorStep {
    /// A step running `processor`'s input hook over `{messages}`.
    pub fn input(processor: impl IntoProcessor) -> Self {
        let processor = processor.into_processor();
        let schema = json!({
            "type": "object",
            "properties": {"messages": messages_schema()},
            "required": ["messages"],
        });
        Self {
            id: format!("processor:{}", processor.id()),
            processor,
            side: Side::Input,
            input_schema: schema.clone(),
            output_schema: schema,
        }
    }

    /// A step running `processor`'s output step and output result hooks over `{text}`.
    pub fn output(processor: impl IntoProcessor) -> Self {
        let processor = processor.into_processor();
        Self {
            id: format!("processor:{}", processor.id()),
            processor,
            side: Side::Output,
            input_schema: json!({
                "type": "object",
                "properties": {"text": {"type": "string"}, "messages": messages_schema()},
                "required": ["text"],
            }),
            output_schema: json!({
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            }),
        }
    }
}

/// The messages of a step's input: strings are user messages.
fn messages_of(value: Option<&Value>) -> Result<Vec<Message>, StepError> {
    let Some(items) = value else {
        return Ok(Vec::new());
    };
    let Some(items) = items.as_array() else {
        return Err(StepError::new("messages must be an array"));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::String(text) => Ok(Message::user(text.clone())),
            other => {
                let mut object = other.clone();
                if let Some(map) = object.as_object_mut() {
                    map.entry("id")
                        .or_insert_with(|| Value::String(crate::id::new_id()));
                }
                serde_json::from_value::<Message>(object)
                    .map_err(|e| StepError::new(format!("messages[{i}]: {e}")))
            }
        })
        .collect()
}

fn stopped(stopped: Stopped) -> StepError {
    match stopped {
        Stopped::Tripwire(tripwire) => StepError::Tripwire {
            tripwire: Box::new(tripwire),
        },
        Stopped::Failed(failure) => StepError::new(failure.to_string()),
    }
}

#[async_trait::async_trait]
impl Step for ProcessorStep {
    fn id(&self) -> &str {
        &self.id
    }

    fn description(&self) -> &str {
        self.processor.description().unwrap_or("")
    }

    fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    fn output_schema(&self) -> &Value {
        &self.output_schema
    }

    async fn execute(&self, ctx: StepContext) -> Result<Value, StepError> {
        let pipeline = Pipeline::new(vec![self.processor.clone()]);
        let cx = ProcessorContext::new(
            ctx.run_id(),
            ctx.workflow_id(),
            ctx.request_context(),
            ctx.abort_signal(),
        );
        let input = ctx.input();
        match self.side {
            Side::Input => {
                let mut messages = messages_of(input.get("messages"))?;
                if self.processor.phases().contains(ProcessorPhase::Input) {
                    pipeline
                        .input(&cx, None, &mut messages, &[])
                        .await
                        .map_err(stopped)?;
                }
                let messages = serde_json::to_value(&messages)?;
                Ok(json!({ "messages": messages }))
            }
            Side::Output => {
                let Some(text) = input.get("text").and_then(Value::as_str) else {
                    return Err(StepError::new(format!(
                        "processor step {:?} needs a \"text\" string",
                        self.id
                    )));
                };
                let mut text = text.to_owned();
                let messages = messages_of(input.get("messages"))?;
                let system: Vec<String> = messages
                    .iter()
                    .filter(|m| m.role == Role::System)
                    .map(Message::text)
                    .collect();
                pipeline
                    .output_step(
                        &cx,
                        None,
                        0,
                        &mut text,
                        "",
                        &system,
                        &[],
                        crate::model::FinishReason::Stop,
                        &messages,
                    )
                    .await
                    .map_err(stopped)?;
                pipeline
                    .output_result(&cx, None, &mut text, &[], &messages, Default::default())
                    .await
                    .map_err(stopped)?;
                Ok(json!({ "text": text }))
            }
        }
    }
}
