//! Trajectory accuracy: how closely the steps a run took follow the expected path
//! (Mastra's `createTrajectoryAccuracyScorerCode` and its `compareTrajectories`).

use async_trait::async_trait;
use kestrel_core::eval::{
    ExpectedStep, ExpectedTrajectory, Ordering, ScoreResult, Scorer, ScorerError, ScorerKind,
    ScorerOutput, ScorerRun, Trajectory,
};
use serde::Serialize;
use serde_json::json;

/// How a trajectory compared with the expected path.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    /// From 0 to 1, rounded to two decimals.
    pub score: f64,
    /// Expected steps matched.
    pub matched_steps: usize,
    /// Expected steps.
    pub total_expected_steps: usize,
    /// Steps taken.
    pub total_actual_steps: usize,
    /// Expected steps not matched.
    pub missing_steps: Vec<String>,
    /// Steps taken that were not expected.
    pub extra_steps: Vec<String>,
    /// Expected steps taken, but not where expected.
    pub out_of_order_steps: Vec<String>,
    /// Steps taken more than once.
    pub repeated_steps: Vec<String>,
}

/// Rounds as Mastra's `roundToTwoDecimals` (`Math.round((n + EPSILON) * 100) / 100`).
fn round2(n: f64) -> f64 {
    ((n + f64::EPSILON) * 100.0 + 0.5).floor() / 100.0
}

/// Compares `actual` with `expected` as `ordering` says; repeated steps cost 0.1 each when
/// not allowed.
pub fn compare(
    actual: &Trajectory,
    expected: &[ExpectedStep],
    ordering: Ordering,
    allow_repeated: bool,
) -> Comparison {
    let names: Vec<&str> = actual.steps.iter().map(|s| s.name.as_str()).collect();
    let wanted: Vec<&str> = expected.iter().map(|s| s.name.as_str()).collect();
    if expected.is_empty() {
        return Comparison {
            score: if actual.steps.is_empty() { 1.0 } else { 0.0 },
            matched_steps: 0,
            total_expected_steps: 0,
            total_actual_steps: names.len(),
            missing_steps: Vec::new(),
            extra_steps: names.iter().map(|n| (*n).to_owned()).collect(),
            out_of_order_steps: Vec::new(),
            repeated_steps: Vec::new(),
        };
    }
    // Names taken more than once, in the order they first appear.
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for name in &names {
        match counts.iter_mut().find(|(n, _)| n == name) {
            Some((_, count)) => *count += 1,
            None => counts.push((name, 1)),
        }
    }
    let repeated: Vec<String> = counts
        .iter()
        .filter(|(_, c)| *c > 1)
        .map(|(n, _)| (*n).to_owned())
        .collect();
    let mut matched_steps = 0usize;
    let mut matched = vec![false; expected.len()];
    let mut out_of_order: Vec<String> = Vec::new();
    let mut extra_penalty = 0.0;
    match ordering {
        Ordering::Strict => {
            for i in 0..names.len().max(wanted.len()) {
                let name = names.get(i).copied();
                if name.is_some() && name == wanted.get(i).copied() {
                    if expected[i].matches(&actual.steps[i]) {
                        matched_steps += 1;
                        matched[i] = true;
                    }
                } else if let Some(name) = name
                    && wanted.contains(&name)
                {
                    out_of_order.push(name.to_owned());
                }
            }
            if names.len() > wanted.len() {
                extra_penalty = (names.len() - wanted.len()) as f64 / wanted.len() as f64 * 0.5;
            }
        }
        Ordering::Relaxed => {
            let mut next = 0usize;
            for (i, step) in expected.iter().enumerate() {
                let found = (next..names.len())
                    .find(|&j| names[j] == step.name && step.matches(&actual.steps[j]));
                match found {
                    Some(j) => {
                        matched_steps += 1;
                        matched[i] = true;
                        next = j + 1;
                    }
                    None if names.contains(&step.name.as_str()) => {
                        out_of_order.push(step.name.clone());
                    }
                    None => {}
                }
            }
        }
        Ordering::Unordered => {
            let mut used = vec![false; names.len()];
            for (i, step) in expected.iter().enumerate() {
                if let Some(j) =
                    (0..names.len()).find(|&j| !used[j] && step.matches(&actual.steps[j]))
                {
                    used[j] = true;
                    matched[i] = true;
                    matched_steps += 1;
                }
            }
        }
    }
    let mut score = matched_steps as f64 / expected.len() as f64;
    if extra_penalty > 0.0 {
        score = (score - extra_penalty).max(0.0);
    }
    if !allow_repeated && !repeated.is_empty() {
        score = (score - repeated.len() as f64 * 0.1).max(0.0);
    }
    Comparison {
        score: round2(score.clamp(0.0, 1.0)),
        matched_steps,
        total_expected_steps: expected.len(),
        total_actual_steps: names.len(),
        missing_steps: wanted
            .iter()
            .zip(&matched)
            .filter(|(_, m)| !**m)
            .map(|(n, _)| (*n).to_owned())
            .collect(),
        extra_steps: names
            .iter()
            .filter(|n| !wanted.contains(n))
            .map(|n| (*n).to_owned())
            .collect(),
        out_of_order_steps: out_of_order,
        repeated_steps: repeated,
    }
}

/// Scores how closely a run's trajectory follows an expected path: the scorer's, or the
/// run's own ([`ScorerRun::expected_trajectory`], a dataset item's), whose ordering and
/// repetition rule win over the scorer's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TrajectoryAccuracy {
    /// The expected steps, when the scorer has them (else each run brings its own).
    pub expected: Option<Vec<ExpectedStep>>,
    /// How steps are compared (relaxed by default).
    pub ordering: Ordering,
    /// Whether repeated steps go unpenalised (yes by default).
    pub allow_repeated_steps: bool,
}

impl TrajectoryAccuracy {
    /// Compares runs with their own expected trajectories.
    pub fn new() -> Self {
        Self {
            expected: None,
            ordering: Ordering::Relaxed,
            allow_repeated_steps: true,
        }
    }

    /// Compares every run with `steps`.
    pub fn expected(mut self, steps: Vec<ExpectedStep>) -> Self {
        self.expected = Some(steps);
        self
    }

    /// Compares as `ordering` says.
    pub fn ordering(mut self, ordering: Ordering) -> Self {
        self.ordering = ordering;
        self
    }

    /// Whether repeated steps go unpenalised.
    pub fn allow_repeated_steps(mut self, allow: bool) -> Self {
        self.allow_repeated_steps = allow;
        self
    }
}

#[async_trait]
impl Scorer for TrajectoryAccuracy {
    fn id(&self) -> &str {
        "code-trajectory-accuracy-scorer"
    }

    fn name(&self) -> &str {
        "Trajectory Accuracy Scorer"
    }

    fn description(&self) -> &str {
        "Evaluates whether the trajectory matches the expected path"
    }

    fn kind(&self) -> ScorerKind {
        ScorerKind::Trajectory
    }

    async fn run(&self, run: ScorerRun) -> Result<ScoreResult, ScorerError> {
        let actual = match &run.output {
            ScorerOutput::Trajectory(t) => t.clone(),
            ScorerOutput::Messages(messages) => Trajectory::from_messages(messages),
            ScorerOutput::Value(_) => {
                return Err(ScorerError::invalid_run(
                    self.id(),
                    "the output is neither a trajectory nor an agent's messages",
                ));
            }
        };
        let own: Option<&ExpectedTrajectory> = run.expected_trajectory.as_ref();
        let steps = self.expected.as_deref().or(own.map(|e| e.steps.as_slice()));
        let actual_names: Vec<&str> = actual.steps.iter().map(|s| s.name.as_str()).collect();
        let Some(steps) = steps else {
            return Ok(ScoreResult::new(run.run_id, 0.0).preprocess(json!({
                "actualStepNames": actual_names,
                "expectedStepNames": [],
                "error": "No expected trajectory provided (pass via options or dataset item expectedTrajectory)",
            })));
        };
        let ordering = own.and_then(|e| e.ordering).unwrap_or(self.ordering);
        let allow = own
            .and_then(|e| e.allow_repeated_steps)
            .unwrap_or(self.allow_repeated_steps);
        let comparison = compare(&actual, steps, ordering, allow);
        let expected_names: Vec<&str> = steps.iter().map(|s| s.name.as_str()).collect();
        Ok(
            ScoreResult::new(run.run_id, comparison.score).preprocess(json!({
                "comparison": comparison,
                "actualStepNames": actual_names,
                "expectedStepNames": expected_names,
            })),
        )
    }
}
