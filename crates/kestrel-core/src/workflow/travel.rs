//! Time travel (Mastra's `timeTravel`): a stored run runs again from one of its steps, with
//! new input (or the input that step had), keeping the results of what came before it.

use std::sync::Arc;

use serde_json::Value;

use super::WorkflowResult;
use super::engine::Resume;
use super::entry::Entry;
use super::error::WorkflowRunError;
use super::run::WorkflowRun;
use super::stream::WorkflowStream;
use crate::event::WorkflowStatus;

/// Where a run travels to: [`TimeTravel::to`] a step, with its input and resume data.
#[derive(Debug, Clone)]
pub struct TimeTravel {
    step: String,
    input: Option<Value>,
    resume_data: Option<Value>,
    state: Option<Value>,
}

impl TimeTravel {
    /// Runs again from `step` (a step of the workflow's top level, or an arm of a parallel
    /// or branch entry: the whole entry runs again).
    pub fn to(step: impl Into<String>) -> Self {
        Self {
            step: step.into(),
            input: None,
            resume_data: None,
            state: None,
        }
    }

    /// The input the step runs on (by default, the input it had in the run).
    pub fn input(mut self, input: Value) -> Self {
        self.input = Some(input);
        self
    }

    /// Data the step is resumed with, for a step that suspends.
    pub fn resume_data(mut self, data: Value) -> Self {
        self.resume_data = Some(data);
        self
    }

    /// The workflow state to run on (by default, the run's).
    pub fn state(mut self, state: Value) -> Self {
        self.state = Some(state);
        self
    }
}

impl WorkflowRun {
    /// Runs this stored run again from a step (Mastra's `timeTravel`): the entries before it
    /// keep their results, the step's entry runs on the given input (or the one it had), and
    /// everything after it runs again. The run must have ended or be suspended: one in
    /// progress (here or, stored `running`, anywhere) is refused with
    /// [`WorkflowRunError::TravelRefused`], a step the workflow does not have with
    /// [`WorkflowRunError::UnknownStep`].
    pub async fn time_travel(
        &self,
        travel: TimeTravel,
    ) -> Result<WorkflowResult, WorkflowRunError> {
        let engine = self.travelled(travel, None).await?;
        Ok(engine.run().await)
    }

    /// [`WorkflowRun::time_travel`], streamed.
    pub async fn time_travel_stream(
        &self,
        travel: TimeTravel,
    ) -> Result<WorkflowStream, WorkflowRunError> {
        let (sender, receiver) = super::events::event_channel();
        let engine = self.travelled(travel, Some(sender)).await?;
        Ok(WorkflowStream::spawn(engine, receiver))
    }

    async fn travelled(
        &self,
        travel: TimeTravel,
        events: Option<super::events::EventSender>,
    ) -> Result<super::engine::Engine, WorkflowRunError> {
        let workflow = self.workflow();
        let store = workflow.store();
        let Some(mut stored) = store.load(workflow.id(), self.run_id()).await? else {
            return Err(WorkflowRunError::UnknownRun {
                workflow: workflow.id().to_owned(),
                run_id: self.run_id().to_owned(),
            });
        };
        let refused = |status| WorkflowRunError::TravelRefused {
            run_id: self.run_id().to_owned(),
            status,
        };
        if !matches!(
            stored.status,
            WorkflowStatus::Success
                | WorkflowStatus::Failed
                | WorkflowStatus::Canceled
                | WorkflowStatus::Tripwire
                | WorkflowStatus::Suspended
        ) || workflow.is_run_in_progress(self.run_id())
        {
            return Err(refused(stored.status));
        }
        let entries = &workflow.inner.entries;
        let Some(position) = entries
            .iter()
            .position(|entry| entry.steps().iter().any(|s| s.id() == travel.step))
        else {
            return Err(WorkflowRunError::UnknownStep {
                workflow: workflow.id().to_owned(),
                step: travel.step,
            });
        };
        let input = match travel.input {
            Some(input) => Arc::new(input),
            None => match stored.steps.get(&travel.step) {
                Some(result) => Arc::clone(&result.payload),
                None => {
                    return Err(WorkflowRunError::InvalidInput {
                        workflow: workflow.id().to_owned(),
                        errors: vec![format!(
                            "step {:?} never ran in run {:?}: give the input to run it on",
                            travel.step,
                            self.run_id()
                        )],
                    });
                }
            },
        };
        if let Some(step) = workflow.step(&travel.step) {
            let errors = crate::schema::schema_errors(step.input_schema(), &input);
            if !errors.is_empty() {
                return Err(WorkflowRunError::InvalidInput {
                    workflow: workflow.id().to_owned(),
                    errors,
                });
            }
            // Resume data is held to the step's resume schema, as a resume's is.
            if let (Some(data), Some(schema)) = (&travel.resume_data, step.resume_schema()) {
                let errors = crate::schema::schema_errors(schema, data);
                if !errors.is_empty() {
                    return Err(WorkflowRunError::InvalidResumeData {
                        step: step.id().to_owned(),
                        errors,
                    });
                }
            }
        }
        // What came before the step's entry stays; the rest is forgotten, to run again.
        let later: Vec<String> = entries[position..]
            .iter()
            .flat_map(Entry::steps)
            .map(|s| s.id().to_owned())
            .chain(entries[position..].iter().filter_map(|e| match e {
                Entry::Sleep { id, .. } => Some(id.clone()),
                _ => None,
            }))
            .collect();
        stored.steps.retain(|id, _| !later.contains(id));
        stored.step_execution_path.retain(|id| !later.contains(id));
        if let Some(state) = travel.state {
            stored.state = Arc::new(state);
        }
        stored.position = position;
        stored.entry_input = input;
        stored.result = None;
        stored.error = None;
        let from = stored.status;
        let resume = travel.resume_data.map(|data| Resume {
            step: Some(travel.step.clone()),
            data,
            path: Vec::new(),
            item: None,
        });
        let engine = self
            .take_over(stored, from, resume, events)
            .await?
            .ok_or_else(|| refused(WorkflowStatus::Running))?;
        Ok(engine)
    }
}
