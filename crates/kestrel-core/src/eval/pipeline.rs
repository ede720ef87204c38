//! [`create_scorer`]: Mastra's scorer pipeline.
//!
//! A scorer runs up to four steps in order — **preprocess** (prepare: extract claims,
//! keywords...), **analyze** (judge what was prepared), **generate score** (a number) and
//! **generate reason** (why) — and only the score step is required. Each step is either a
//! function of the [`StepContext`] (the run and the results of the steps before it) or a
//! [`JudgePrompt`]: a prompt a judge model answers through structured output, so a judge
//! on the local model answers under its grammar and its answer is checked against the
//! schema before the next step reads it.
//!
//! A function step returns `Result<_, BoxError>` (so `?` works on any error). A step may
//! give up with [`NotScorable`]: the result then has no score and says why. Any
//! other failure is a [`ScorerError::Step`] naming the step and those that finished before
//! it. The run is checked first: a scorer does not score an empty input or output (Mastra's
//! judges scored empty traces 0 without a word), unless it was built with
//! [`ScorerBuilder::allow_empty`].

use std::sync::Arc;

use async_trait::async_trait;
use futures::future::BoxFuture;
use serde_json::Value;

use super::scorer::{ScoreResult, Scorer, ScorerError, ScorerKind, ScorerRun, ScorerStep};
use crate::error::BoxError;

/// Who answers a scorer's judge prompts: a model behind instructions that say how to judge.
/// [`Agent`](crate::agent::Agent) is one (its answer asked for through structured output, so
/// a local model answers under the schema's grammar).
#[async_trait]
pub trait Judge: Send + Sync {
    /// A name for errors and logs (the agent's id).
    fn judge_id(&self) -> &str;

    /// Answers `prompt`: JSON matching `schema` when one is given (checked), else text (as
    /// a JSON string).
    async fn judge(&self, prompt: &str, schema: Option<&Value>) -> Result<Value, BoxError>;
}

/// A judge shared by steps and scorers.
pub type SharedJudge = Arc<dyn Judge>;

/// What a step reads: the run, and what the steps before it gave.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StepContext {
    /// The run being scored.
    pub run: Arc<ScorerRun>,
    /// What the preprocess step gave, once it ran.
    pub preprocess: Option<Value>,
    /// What the analyze step gave, once it ran.
    pub analyze: Option<Value>,
    /// The score, for the reason step.
    pub score: Option<f64>,
}

/// A step's way of saying the run cannot be scored (no tool calls to judge, no context to
/// check against): return it as the step's error. The result then has no score, and
/// [`ScoreResult::not_scorable`] holds the reason.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("not scorable: {0}")]
pub struct NotScorable(pub String);

impl NotScorable {
    /// Not scorable, for `reason`.
    pub fn new(reason: impl Into<String>) -> Self {
        Self(reason.into())
    }
}

type StepFuture<T> = BoxFuture<'static, Result<T, BoxError>>;
type StepFn<T> = Arc<dyn Fn(StepContext) -> StepFuture<T> + Send + Sync>;
type PromptFn = Arc<dyn Fn(&StepContext) -> Result<String, BoxError> + Send + Sync>;

/// A step answered by a judge: the prompt made from the [`StepContext`], and the JSON schema
/// the answer must match (none: the answer is text).
#[derive(Clone)]
pub struct JudgePrompt {
    prompt: PromptFn,
    schema: Option<Value>,
    judge: Option<SharedJudge>,
}

impl std::fmt::Debug for JudgePrompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JudgePrompt")
            .field("schema", &self.schema)
            .field(
                "judge",
                &self.judge.as_ref().map(|j| j.judge_id().to_owned()),
            )
            .finish_non_exhaustive()
    }
}

impl JudgePrompt {
    /// A prompt answered in text.
    pub fn new<F>(prompt: F) -> Self
    where
        F: Fn(&StepContext) -> String + Send + Sync + 'static,
    {
        Self::try_new(move |cx| Ok(prompt(cx)))
    }

    /// A prompt that may not be made: its error fails the step (or, a [`NotScorable`], ends
    /// the run not scorable) before the judge is asked.
    pub fn try_new<F>(prompt: F) -> Self
    where
        F: Fn(&StepContext) -> Result<String, BoxError> + Send + Sync + 'static,
    {
        Self {
            prompt: Arc::new(prompt),
            schema: None,
            judge: None,
        }
    }

    /// The answer must be JSON matching `schema`.
    pub fn schema(mut self, schema: Value) -> Self {
        self.schema = Some(schema);
        self
    }

    /// The answer must be JSON of type `T`'s schema.
    pub fn output<T: schemars::JsonSchema>(self) -> Self {
        self.schema(crate::schema::schema_of::<T>())
    }

    /// This step's judge, instead of the scorer's.
    pub fn judge(mut self, judge: impl Judge + 'static) -> Self {
        self.judge = Some(Arc::new(judge));
        self
    }
}

enum Step<T> {
    Function(StepFn<T>),
    Judge(JudgePrompt),
}

impl<T> Clone for Step<T> {
    fn clone(&self) -> Self {
        match self {
            Self::Function(f) => Self::Function(Arc::clone(f)),
            Self::Judge(j) => Self::Judge(j.clone()),
        }
    }
}

/// Why [`ScorerBuilder::build`] refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ScorerBuildError {
    /// No score step.
    #[error("scorer `{0}` has no generate_score step: it is the one step a scorer needs")]
    NoScoreStep(String),
    /// A judge step without a judge.
    #[error(
        "scorer `{scorer}`: step `{step}` is a judge prompt but no judge was given (set one with `judge` on the scorer or the prompt)"
    )]
    NoJudge {
        /// The scorer.
        scorer: String,
        /// The step.
        step: ScorerStep,
    },
    /// An empty id.
    #[error("a scorer's id must not be empty")]
    EmptyId,
}

/// Starts a scorer named `id`: add steps, then [`ScorerBuilder::build`].
pub fn create_scorer(id: impl Into<String>) -> ScorerBuilder {
    ScorerBuilder {
        id: id.into(),
        name: None,
        description: String::new(),
        kind: ScorerKind::Agent,
        judge: None,
        allow_empty: false,
        preprocess: None,
        analyze: None,
        score: None,
        reason: None,
    }
}

/// A scorer being built ([`create_scorer`]).
#[must_use = "a scorer builder does nothing until built"]
pub struct ScorerBuilder {
    id: String,
    name: Option<String>,
    description: String,
    kind: ScorerKind,
    judge: Option<SharedJudge>,
    allow_empty: bool,
    preprocess: Option<Step<Value>>,
    analyze: Option<Step<Value>>,
    score: Option<Step<f64>>,
    reason: Option<Step<String>>,
}

impl std::fmt::Debug for ScorerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScorerBuilder")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

fn function<T, F, Fut>(f: F) -> Step<T>
where
    F: Fn(StepContext) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<T, BoxError>> + Send + 'static,
    T: 'static,
{
    Step::Function(Arc::new(move |cx| Box::pin(f(cx))))
}

impl ScorerBuilder {
    /// A name for people.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// What it measures.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// What it scores (an agent's turn by default).
    pub fn kind(mut self, kind: ScorerKind) -> Self {
        self.kind = kind;
        self
    }

    /// The judge answering the judge prompts: an agent whose instructions say how to judge.
    pub fn judge(mut self, judge: impl Judge + 'static) -> Self {
        self.judge = Some(Arc::new(judge));
        self
    }

    /// Scores runs with an empty input or output too (by default they are refused with
    /// [`ScorerError::InvalidRun`]).
    pub fn allow_empty(mut self) -> Self {
        self.allow_empty = true;
        self
    }

    /// The preprocess step, a function.
    pub fn preprocess<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(StepContext) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<Value, BoxError>> + Send + 'static,
    {
        self.preprocess = Some(function(f));
        self
    }

    /// The preprocess step, a judge's prompt.
    pub fn preprocess_judge(mut self, prompt: JudgePrompt) -> Self {
        self.preprocess = Some(Step::Judge(prompt));
        self
    }

    /// The analyze step, a function.
    pub fn analyze<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(StepContext) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<Value, BoxError>> + Send + 'static,
    {
        self.analyze = Some(function(f));
        self
    }

    /// The analyze step, a judge's prompt.
    pub fn analyze_judge(mut self, prompt: JudgePrompt) -> Self {
        self.analyze = Some(Step::Judge(prompt));
        self
    }

    /// The score step, a function.
    pub fn generate_score<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(StepContext) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<f64, BoxError>> + Send + 'static,
    {
        self.score = Some(function(f));
        self
    }

    /// The score step, a judge's prompt whose answer is `{"score": <number>}` (the schema is
    /// set to that).
    pub fn generate_score_judge(mut self, prompt: JudgePrompt) -> Self {
        let prompt = prompt.schema(serde_json::json!({
            "type": "object",
            "properties": {"score": {"type": "number"}},
            "required": ["score"],
            "additionalProperties": false
        }));
        self.score = Some(Step::Judge(prompt));
        self
    }

    /// The reason step, a function.
    pub fn generate_reason<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(StepContext) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<String, BoxError>> + Send + 'static,
    {
        self.reason = Some(function(f));
        self
    }

    /// The reason step, a judge's prompt answered in text.
    pub fn generate_reason_judge(mut self, prompt: JudgePrompt) -> Self {
        self.reason = Some(Step::Judge(JudgePrompt {
            schema: None,
            ..prompt
        }));
        self
    }

    /// The scorer: refused without a score step, or with a judge prompt and no judge.
    pub fn build(self) -> Result<PipelineScorer, ScorerBuildError> {
        if self.id.trim().is_empty() {
            return Err(ScorerBuildError::EmptyId);
        }
        let Some(score) = self.score else {
            return Err(ScorerBuildError::NoScoreStep(self.id));
        };
        let no_judge = |step: ScorerStep, judged: Option<&JudgePrompt>| match judged {
            Some(prompt) if prompt.judge.is_none() && self.judge.is_none() => {
                Err(ScorerBuildError::NoJudge {
                    scorer: self.id.clone(),
                    step,
                })
            }
            _ => Ok(()),
        };
        let judged = |step: Option<&Step<Value>>| match step {
            Some(Step::Judge(p)) => Some(p.clone()),
            _ => None,
        };
        no_judge(
            ScorerStep::Preprocess,
            judged(self.preprocess.as_ref()).as_ref(),
        )?;
        no_judge(ScorerStep::Analyze, judged(self.analyze.as_ref()).as_ref())?;
        if let Step::Judge(p) = &score {
            no_judge(ScorerStep::GenerateScore, Some(p))?;
        }
        if let Some(Step::Judge(p)) = &self.reason {
            no_judge(ScorerStep::GenerateReason, Some(p))?;
        }
        Ok(PipelineScorer {
            inner: Arc::new(Pipeline {
                name: self.name.unwrap_or_else(|| self.id.clone()),
                id: self.id,
                description: self.description,
                kind: self.kind,
                judge: self.judge,
                allow_empty: self.allow_empty,
                preprocess: self.preprocess,
                analyze: self.analyze,
                score,
                reason: self.reason,
            }),
        })
    }
}

struct Pipeline {
    id: String,
    name: String,
    description: String,
    kind: ScorerKind,
    judge: Option<SharedJudge>,
    allow_empty: bool,
    preprocess: Option<Step<Value>>,
    analyze: Option<Step<Value>>,
    score: Step<f64>,
    reason: Option<Step<String>>,
}

/// A scorer made of steps ([`create_scorer`]). Cheap to clone.
#[derive(Clone)]
pub struct PipelineScorer {
    inner: Arc<Pipeline>,
}

impl std::fmt::Debug for PipelineScorer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelineScorer")
            .field("id", &self.inner.id)
            .field("kind", &self.inner.kind)
            .finish_non_exhaustive()
    }
}

/// What a step gave: its value and, for a judge step, the prompt it asked.
struct Answer<T> {
    value: T,
    prompt: Option<String>,
}

/// How a step ended short of a value.
enum Stop {
    NotScorable(String),
    Failed(BoxError),
}

impl From<BoxError> for Stop {
    fn from(error: BoxError) -> Self {
        match error.downcast::<NotScorable>() {
            Ok(not) => Stop::NotScorable(not.0),
            Err(error) => Stop::Failed(error),
        }
    }
}

impl Pipeline {
    fn judge_for<'a>(&'a self, prompt: &'a JudgePrompt) -> Result<&'a SharedJudge, BoxError> {
        prompt
            .judge
            .as_ref()
            .or(self.judge.as_ref())
            .ok_or_else(|| "no judge for this step".into())
    }

    /// Asks the judge; the answer's JSON (checked against the prompt's schema) or text.
    async fn ask(&self, prompt: &JudgePrompt, cx: &StepContext) -> Result<Answer<Value>, Stop> {
        let text = (prompt.prompt)(cx)?;
        let judge = self.judge_for(prompt)?;
        let value = judge
            .judge(&text, prompt.schema.as_ref())
            .await
            .map_err(Stop::Failed)?;
        Ok(Answer {
            value,
            prompt: Some(text),
        })
    }

    async fn value_step(
        &self,
        step: &Step<Value>,
        cx: &StepContext,
    ) -> Result<Answer<Value>, Stop> {
        match step {
            Step::Function(f) => Ok(Answer {
                value: f(cx.clone()).await?,
                prompt: None,
            }),
            Step::Judge(prompt) => self.ask(prompt, cx).await,
        }
    }

    async fn score_step(&self, cx: &StepContext) -> Result<Answer<f64>, Stop> {
        let answer = match &self.score {
            Step::Function(f) => Answer {
                value: f(cx.clone()).await?,
                prompt: None,
            },
            Step::Judge(prompt) => {
                let answer = self.ask(prompt, cx).await?;
                let score = answer
                    .value
                    .get("score")
                    .and_then(Value::as_f64)
                    .ok_or_else(|| Stop::Failed("the judge gave no numeric `score`".into()))?;
                Answer {
                    value: score,
                    prompt: answer.prompt,
                }
            }
        };
        if !answer.value.is_finite() {
            return Err(Stop::Failed(
                format!("the score is not a finite number ({})", answer.value).into(),
            ));
        }
        Ok(answer)
    }

    async fn reason_step(
        &self,
        step: &Step<String>,
        cx: &StepContext,
    ) -> Result<Answer<String>, Stop> {
        match step {
            Step::Function(f) => Ok(Answer {
                value: f(cx.clone()).await?,
                prompt: None,
            }),
            Step::Judge(prompt) => {
                let answer = self.ask(prompt, cx).await?;
                Ok(Answer {
                    value: match answer.value {
                        Value::String(text) => text,
                        other => other.to_string(),
                    },
                    prompt: answer.prompt,
                })
            }
        }
    }
}

#[async_trait]
impl Scorer for PipelineScorer {
    fn id(&self) -> &str {
        &self.inner.id
    }

    fn name(&self) -> &str {
        &self.inner.name
    }

    fn description(&self) -> &str {
        &self.inner.description
    }

    fn kind(&self) -> ScorerKind {
        self.inner.kind
    }

    fn uses_judge(&self) -> bool {
        let p = &self.inner;
        matches!(p.preprocess, Some(Step::Judge(_)))
            || matches!(p.analyze, Some(Step::Judge(_)))
            || matches!(p.score, Step::Judge(_))
            || matches!(p.reason, Some(Step::Judge(_)))
    }

    async fn run(&self, run: ScorerRun) -> Result<ScoreResult, ScorerError> {
        let p = &*self.inner;
        if !p.allow_empty
            && let Some(problem) = run.emptiness()
        {
            return Err(ScorerError::invalid_run(&p.id, problem));
        }
        let mut result = ScoreResult {
            run_id: run.run_id.clone(),
            ..ScoreResult::default()
        };
        let mut cx = StepContext {
            run: Arc::new(run),
            preprocess: None,
            analyze: None,
            score: None,
        };
        let mut done: Vec<ScorerStep> = Vec::new();
        let fail = |step: ScorerStep, done: &[ScorerStep], source: BoxError| ScorerError::Step {
            scorer: p.id.clone(),
            failed_step: step,
            completed_steps: done.to_vec(),
            source,
        };
        // Each step: its value, or the result ends not scorable, or the scorer fails.
        macro_rules! step {
            ($name:expr, $call:expr) => {
                match $call {
                    Ok(answer) => {
                        done.push($name);
                        answer
                    }
                    Err(Stop::NotScorable(reason)) => {
                        result.not_scorable = Some(reason);
                        return Ok(result);
                    }
                    Err(Stop::Failed(source)) => return Err(fail($name, &done, source)),
                }
            };
        }
        if let Some(step) = &p.preprocess {
            let answer = step!(ScorerStep::Preprocess, p.value_step(step, &cx).await);
            result.preprocess_prompt = answer.prompt;
            result.preprocess_step_result = Some(answer.value.clone());
            cx.preprocess = Some(answer.value);
        }
        if let Some(step) = &p.analyze {
            let answer = step!(ScorerStep::Analyze, p.value_step(step, &cx).await);
            result.analyze_prompt = answer.prompt;
            result.analyze_step_result = Some(answer.value.clone());
            cx.analyze = Some(answer.value);
        }
        let answer = step!(ScorerStep::GenerateScore, p.score_step(&cx).await);
        result.generate_score_prompt = answer.prompt;
        result.score = Some(answer.value);
        cx.score = Some(answer.value);
        if let Some(step) = &p.reason {
            let answer = step!(ScorerStep::GenerateReason, p.reason_step(step, &cx).await);
            result.generate_reason_prompt = answer.prompt;
            result.reason = Some(answer.value);
        }
        Ok(result)
    }
}
