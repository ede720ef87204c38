//! Moderation: a judge model reads the input (as an input processor) or each answer (as an
//! output processor) and says whether it falls in a harmful category. It fails closed.

use async_trait::async_trait;
use kestrel_core::eval::SharedJudge;
use kestrel_core::message::Role;
use kestrel_core::processor::{
    InputArgs, OutputStepArgs, Phases, Processor, ProcessorContext, ProcessorError, ProcessorPhase,
};
use serde_json::json;

use crate::classify::{ClassifierOutput, classify};

/// What moderation does with flagged text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ModerationStrategy {
    /// Stop the run with a tripwire (the default).
    #[default]
    Block,
    /// Drop it: flagged input messages, or a flagged answer's text.
    Filter,
    /// Let it through; report a `warn` decision and log it.
    Warn,
}

/// See the [module docs](self).
#[derive(Clone)]
pub struct Moderation {
    judge: SharedJudge,
    threshold: f64,
    strategy: ModerationStrategy,
    categories: Vec<String>,
}

impl std::fmt::Debug for Moderation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Moderation")
            .field("judge", &self.judge.judge_id())
            .field("threshold", &self.threshold)
            .field("categories", &self.categories)
            .finish()
    }
}

/// The categories asked about by default (OpenAI's moderation categories, as Mastra's).
const CATEGORIES: [&str; 11] = [
    "hate",
    "hate/threatening",
    "harassment",
    "harassment/threatening",
    "self-harm",
    "self-harm/intent",
    "self-harm/instructions",
    "sexual",
    "sexual/minors",
    "violence",
    "violence/graphic",
];

const TASK: &str = "You are a content moderator. Decide whether the text falls into one of \
                    the categories.";

impl Moderation {
    /// Moderation by `judge` (an agent: `Arc::new(agent)`), blocking what it flags with a
    /// score of 0.5 or more, in the default categories.
    pub fn new(judge: SharedJudge) -> Self {
        Self {
            judge,
            threshold: 0.5,
            strategy: ModerationStrategy::Block,
            categories: CATEGORIES.iter().map(|c| (*c).to_owned()).collect(),
        }
    }

    /// The categories to ask about instead.
    pub fn categories<I, S>(mut self, categories: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.categories = categories.into_iter().map(Into::into).collect();
        self
    }

    /// The score from which flagged text counts (0 to 1, default 0.5).
    pub fn threshold(mut self, threshold: f64) -> Self {
        self.threshold = threshold.clamp(0.0, 1.0);
        self
    }

    /// What to do with flagged text.
    pub fn strategy(mut self, strategy: ModerationStrategy) -> Self {
        self.strategy = strategy;
        self
    }

    async fn check(&self, text: &str) -> Result<Option<ClassifierOutput>, ProcessorError> {
        if text.trim().is_empty() {
            return Ok(None);
        }
        let verdict = classify(&self.judge, TASK, &self.categories, text).await?;
        Ok((verdict.flagged && verdict.score >= self.threshold).then_some(verdict))
    }

    fn blocked(&self, what: &str, verdict: &ClassifierOutput) -> ProcessorError {
        let categories = if verdict.categories.is_empty() {
            "flagged content".to_owned()
        } else {
            verdict.categories.join(", ")
        };
        ProcessorError::abort(format!("{what} was flagged by moderation: {categories}"))
            .with_metadata(detail(verdict))
    }

    fn warn(&self, cx: &ProcessorContext<'_>, verdict: &ClassifierOutput) {
        tracing::warn!(run_id = cx.run_id, categories = ?verdict.categories, "flagged content was let through");
        cx.decide("warn", Some(detail(verdict)));
    }
}

fn detail(verdict: &ClassifierOutput) -> serde_json::Value {
    json!({"score": verdict.score, "categories": verdict.categories})
}

#[async_trait]
impl Processor for Moderation {
    fn id(&self) -> &str {
        "moderation"
    }

    fn name(&self) -> Option<&str> {
        Some("Moderation")
    }

    fn description(&self) -> Option<&str> {
        Some("A model checks the input or the answers for harmful content")
    }

    fn phases(&self) -> Phases {
        Phases::of(&[ProcessorPhase::Input, ProcessorPhase::OutputStep])
    }

    async fn process_input(&self, args: &mut InputArgs<'_>) -> Result<(), ProcessorError> {
        let mut flagged = Vec::new();
        for (index, message) in args.messages.iter().enumerate() {
            if message.role != Role::User {
                continue;
            }
            if let Some(verdict) = self.check(&message.text()).await? {
                flagged.push((index, verdict));
            }
        }
        let Some((_, first)) = flagged.first() else {
            return Ok(());
        };
        match self.strategy {
            ModerationStrategy::Block => Err(self.blocked("the input", first)),
            ModerationStrategy::Filter => {
                let detail = detail(first);
                for (index, _) in flagged.iter().rev() {
                    args.messages.remove(*index);
                }
                if !args.messages.iter().any(|m| m.role == Role::User) {
                    return Err(ProcessorError::abort(
                        "the input was flagged by moderation: nothing of it is left",
                    )
                    .with_metadata(detail));
                }
                args.cx.decide("filter", Some(detail));
                Ok(())
            }
            ModerationStrategy::Warn => {
                self.warn(args.cx, first);
                Ok(())
            }
        }
    }

    async fn process_output_step(
        &self,
        args: &mut OutputStepArgs<'_>,
    ) -> Result<(), ProcessorError> {
        let Some(verdict) = self.check(args.text).await? else {
            return Ok(());
        };
        match self.strategy {
            ModerationStrategy::Block => Err(self.blocked("the answer", &verdict)),
            ModerationStrategy::Filter => {
                args.text.clear();
                args.cx.decide("filter", Some(detail(&verdict)));
                Ok(())
            }
            ModerationStrategy::Warn => {
                self.warn(args.cx, &verdict);
                Ok(())
            }
        }
    }
}
