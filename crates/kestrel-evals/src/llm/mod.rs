//! The LLM judges: scorers whose steps a model answers through structured output (so they
//! run on the local model under its grammar), scored as `@mastra/evals` scores them.
//!
//! Each constructor takes the judge's model and [`JudgeOptions`] and gives a
//! [`PipelineScorer`]: answer relevancy, faithfulness, hallucination, toxicity, bias,
//! context precision, context recall, prompt alignment, rubric and summarization. Their
//! prompts are Kestrel's own; what they ask for and how the verdicts become a score follow
//! Mastra's scorers of the same id. A run a judge cannot score (no context to check an answer
//! against, no ground truth) ends not scorable, with the reason, rather than scoring 0.

mod judges;

pub use judges::{
    Alignment, answer_relevancy, bias, context_precision, context_recall, faithfulness,
    hallucination, prompt_alignment, rubric, summarization, toxicity,
};

use kestrel_core::agent::{Agent, AgentBuildError};
use kestrel_core::eval::{PipelineScorer, ScorerBuildError};
use kestrel_core::model::ModelSpec;

/// How a judge scores.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct JudgeOptions {
    /// The score's upper bound (1 by default): scores are `share × scale`.
    pub scale: f64,
    /// What an `unsure` verdict counts for (answer relevancy; 0.3 by default).
    pub uncertainty_weight: f64,
    /// The context an answer is checked against (faithfulness, hallucination, context
    /// precision and recall); empty: the run's `additional_context` (a list of strings), else
    /// the results of the tools the answer called.
    pub context: Vec<String>,
}

impl Default for JudgeOptions {
    fn default() -> Self {
        Self {
            scale: 1.0,
            uncertainty_weight: 0.3,
            context: Vec::new(),
        }
    }
}

impl JudgeOptions {
    /// Scale 1, `unsure` worth 0.3, the context from the run.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the scale.
    pub fn scale(mut self, scale: f64) -> Self {
        self.scale = scale;
        self
    }

    /// Sets what an `unsure` verdict counts for.
    pub fn uncertainty_weight(mut self, weight: f64) -> Self {
        self.uncertainty_weight = weight;
        self
    }

    /// Checks answers against this context.
    pub fn context<I, S>(mut self, context: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.context = context.into_iter().map(Into::into).collect();
        self
    }
}

/// Why a judge could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JudgeError {
    /// The judge's agent could not be built (its model, say).
    #[error("the judge of `{scorer}` could not be built: {source}")]
    Agent {
        /// The scorer.
        scorer: &'static str,
        /// Why.
        #[source]
        source: AgentBuildError,
    },
    /// The scorer's pipeline was refused.
    #[error(transparent)]
    Scorer(#[from] ScorerBuildError),
    /// An option out of range.
    #[error("`{scorer}`: {message}")]
    Options {
        /// The scorer.
        scorer: &'static str,
        /// What is wrong.
        message: String,
    },
}

/// The judge agent of scorer `id`, on `model`, told how to judge.
fn judge(id: &'static str, model: ModelSpec, instructions: &str) -> Result<Agent, JudgeError> {
    Agent::builder(format!("{id}-judge"))
        .model(model)
        .instructions(instructions)
        .build()
        .map_err(|source| JudgeError::Agent { scorer: id, source })
}

/// Checks the options every judge shares.
fn check(id: &'static str, options: &JudgeOptions) -> Result<(), JudgeError> {
    if !options.scale.is_finite() || options.scale <= 0.0 {
        return Err(JudgeError::Options {
            scorer: id,
            message: format!("scale must be a positive number, got {}", options.scale),
        });
    }
    if !(0.0..=1.0).contains(&options.uncertainty_weight) {
        return Err(JudgeError::Options {
            scorer: id,
            message: format!(
                "uncertainty_weight must be between 0 and 1, got {}",
                options.uncertainty_weight
            ),
        });
    }
    Ok(())
}

/// Mastra's `roundToTwoDecimals`.
pub(crate) fn round2(n: f64) -> f64 {
    ((n + f64::EPSILON) * 100.0 + 0.5).floor() / 100.0
}

/// What every judge constructor returns.
pub type JudgeResult = Result<PipelineScorer, JudgeError>;

/// The judges [`by_name`] knows, as a list for messages: those that read nothing but the run
/// (its input, answer, ground truth, and its context: the run's additional context — a
/// dataset item's `context` — or else the results of the tools it called). The rubric needs
/// criteria: build it with [`rubric`].
pub const NAMES: &str = "answer-relevancy, faithfulness, hallucination, context-precision, \
     context-recall, prompt-alignment, toxicity, bias, summarization";

/// Whether [`by_name`] knows the judge `name`.
pub fn knows(name: &str) -> bool {
    let name = name.strip_suffix("-scorer").unwrap_or(name);
    matches!(
        name,
        "answer-relevancy"
            | "faithfulness"
            | "hallucination"
            | "context-precision"
            | "context-recall"
            | "prompt-alignment"
            | "toxicity"
            | "bias"
            | "summarization"
    )
}

/// The LLM judge named `name` (`answer-relevancy`, or its Mastra id
/// `answer-relevancy-scorer`), judged by `model` with the default options (prompt alignment
/// on the user's prompt); `None` for a name that is not one of [`NAMES`]. The context judges
/// find a run without context not scorable.
pub fn by_name(name: &str, model: impl Into<ModelSpec>) -> Option<JudgeResult> {
    if !knows(name) {
        return None;
    }
    let name = name.strip_suffix("-scorer").unwrap_or(name);
    let options = JudgeOptions::new();
    Some(match name {
        "answer-relevancy" => answer_relevancy(model, options),
        "faithfulness" => faithfulness(model, options),
        "hallucination" => hallucination(model, options),
        "context-precision" => context_precision(model, options),
        "context-recall" => context_recall(model, options),
        "prompt-alignment" => prompt_alignment(model, Alignment::User, options),
        "toxicity" => toxicity(model, options),
        "bias" => bias(model, options),
        "summarization" => summarization(model, options),
        _ => return None,
    })
}
