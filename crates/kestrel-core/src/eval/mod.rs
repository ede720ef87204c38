//! Evals: scorers that say how good a run was, on their own or sampled on live runs.
//!
//! - [`scorer`]: the [`Scorer`] trait, the run it scores ([`ScorerRun`]) and what it returns
//!   ([`ScoreResult`]), with typed errors naming the step that failed ([`ScorerError`]);
//! - [`pipeline`]: [`create_scorer`], Mastra's four-step pipeline — preprocess, analyze,
//!   generate score, generate reason — each step a function or a judge's prompt answered
//!   through structured output;
//! - [`trajectory`]: what a run did, step by step ([`Trajectory`]), and what it was expected
//!   to do ([`ExpectedTrajectory`]);
//! - [`live`]: scorers an agent runs on its finished runs, off their path, kept pending until
//!   stored (a restart resumes them), with the denominator kept ([`ScoringStats`]);
//! - [`sampling`]: which live runs a scorer scores ([`ScoreSampling`]), decided from the trace
//!   or run id exactly as Mastra decides it, so every scorer at one rate picks the same runs.
//!
//! The prebuilt scorers (content similarity, textual difference, the LLM judges...) live in
//! the `kestrel-evals` crate.
//!
//! ```
//! use kestrel_core::eval::{Scorer, ScorerRun, create_scorer};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Scores 1 when the answer mentions the city the user asked about.
//! let mentions_city = create_scorer("mentions-city")
//!     .description("Whether the answer names the city")
//!     .generate_score(|cx| async move {
//!         let city = cx.run.input_text().split_whitespace().last().unwrap_or("").to_owned();
//!         Ok(if cx.run.output_text().contains(city.trim_end_matches('?')) { 1.0 } else { 0.0 })
//!     })
//!     .build()?;
//! let result = mentions_city
//!     .run(ScorerRun::texts("What is the weather in Paris?", "Sunny in Paris."))
//!     .await?;
//! assert_eq!(result.score, Some(1.0));
//! # Ok(())
//! # }
//! ```

pub mod live;
pub mod pipeline;
pub mod sampling;
pub mod scorer;
pub mod trajectory;

pub use live::{LiveScorer, MAX_SCORING_ATTEMPTS, ScoreCounts, ScoringStats};
pub use pipeline::{
    Judge, JudgePrompt, NotScorable, PipelineScorer, ScorerBuildError, ScorerBuilder, SharedJudge,
    StepContext, create_scorer,
};
pub use sampling::{ScoreSampling, sample_fraction};
pub use scorer::{
    AgentInput, IntoScorer, ScoreResult, Scorer, ScorerError, ScorerInput, ScorerKind,
    ScorerOutput, ScorerRun, ScorerStep, SharedScorer, score_record,
};
pub use trajectory::{
    ExpectedStep, ExpectedTrajectory, Ordering, StepKind, Trajectory, TrajectoryStep,
};
