//! `kestrel eval`: a demo agent over a dataset, scored, as a table or JSON, with an exit code
//! a CI step can gate on.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;

use kestrel::evals::code::{NAMES as SCORERS, by_name as scorer};
use kestrel::evals::experiment::{Dataset, Experiment, ExperimentReport, Progress};
use kestrel::evals::llm::{
    JudgeOptions, NAMES as JUDGES, by_name as judge, knows as is_judge, rubric,
};
use kestrel::model::ModelSpec;
use kestrel::storage::InMemoryStorage;

use crate::cli::EvalArgs;
use crate::exit::{FAILURE, USAGE, fail};

/// Whether `name` names the rubric judge (`rubric`, or its Mastra id `rubric-scorer`).
fn is_rubric(name: &str) -> bool {
    matches!(name, "rubric" | "rubric-scorer")
}

/// Runs `kestrel eval`.
pub async fn run(args: EvalArgs) -> ExitCode {
    let unknown = args
        .scorers
        .iter()
        .find(|name| scorer(name).is_none() && !is_judge(name) && !is_rubric(name));
    if let Some(name) = unknown {
        return fail(
            USAGE,
            format!(
                "--scorer {name:?} is not a scorer; the scorers are: {SCORERS}, and the LLM \
                 judges {JUDGES}, rubric (with --criterion)"
            ),
        );
    }
    let wants_rubric = args.scorers.iter().any(|name| is_rubric(name));
    if wants_rubric && args.criteria.is_empty() {
        return fail(
            USAGE,
            "--scorer rubric grades answers against criteria: give at least one with --criterion",
        );
    }
    if !wants_rubric && !args.criteria.is_empty() {
        return fail(
            USAGE,
            "--criterion is a criterion of the rubric judge: add --scorer rubric",
        );
    }
    let text = match std::fs::read_to_string(&args.dataset) {
        Ok(text) => text,
        Err(e) => return fail(USAGE, format!("{}: {e}", args.dataset.display())),
    };
    let name = args.dataset.file_stem().map_or_else(
        || "dataset".to_owned(),
        |s| s.to_string_lossy().into_owned(),
    );
    let dataset = match Dataset::from_jsonl(name, &text) {
        Ok(dataset) => dataset,
        Err(e) => return fail(USAGE, format!("{}: {e}", args.dataset.display())),
    };
    let (_, model) =
        match crate::model_choice::resolved_model_for_command(args.model.as_deref()).await {
            Ok(model) => model,
            Err(code) => return code,
        };
    // The judges answer on --judge-model, else on the agent's model.
    let judge_model = match &args.judge_model {
        Some(spec) => match crate::model_choice::resolved_model_for_command(Some(spec)).await {
            Ok((_, model)) => model,
            Err(code) => return code,
        },
        None => model.clone(),
    };
    let mut scorers = Vec::new();
    for name in &args.scorers {
        let built = match scorer(name) {
            Some(code) => Ok(code),
            None if is_rubric(name) => rubric(
                ModelSpec::Model(judge_model.clone()),
                args.criteria.iter().map(|c| (c.clone(), true)).collect(),
                JudgeOptions::new(),
            )
            .map(|judge| Arc::new(judge) as kestrel::eval::SharedScorer)
            .map_err(|e| e.to_string()),
            None => match judge(name, ModelSpec::Model(judge_model.clone())) {
                Some(Ok(judge)) => Ok(Arc::new(judge) as kestrel::eval::SharedScorer),
                Some(Err(e)) => Err(e.to_string()),
                None => Err(format!("--scorer {name:?} is not a scorer")),
            },
        };
        match built {
            Ok(scorer) => scorers.push(scorer),
            Err(e) => return fail(USAGE, e),
        }
    }
    let kestrel = match kestrel_cli::dev::demo_kestrel(
        ModelSpec::Model(model),
        Arc::new(InMemoryStorage::new()),
    ) {
        Ok(kestrel) => kestrel,
        Err(e) => return fail(FAILURE, e),
    };
    let agent = match kestrel.agent(&args.agent) {
        Ok(agent) => agent.clone(),
        Err(_) => {
            let ids: Vec<&str> = kestrel.agents().map(|a| a.id()).collect();
            return fail(
                USAGE,
                format!(
                    "--agent {:?} is not a demo agent; they are: {}",
                    args.agent,
                    ids.join(", ")
                ),
            );
        }
    };
    let tty = std::io::stderr().is_terminal();
    let mut experiment = Experiment::new(agent, dataset)
        .concurrency(usize::try_from(args.concurrency).unwrap_or(1))
        .retries(args.retries)
        .on_progress(move |p: Progress| {
            let mut err = std::io::stderr().lock();
            if tty {
                let width = 30;
                let filled = p.done * width / p.total.max(1);
                let _ = write!(
                    err,
                    "\r[{}{}] {}/{} items{}",
                    "#".repeat(filled),
                    " ".repeat(width - filled),
                    p.done,
                    p.total,
                    if p.failed > 0 {
                        format!(", {} failed", p.failed)
                    } else {
                        String::new()
                    }
                );
                if p.done == p.total {
                    let _ = writeln!(err);
                }
            }
        });
    for s in scorers {
        experiment = experiment.scorer(s);
    }
    let report = match experiment.run().await {
        Ok(report) => report,
        Err(e) => return fail(USAGE, e),
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(json) => {
                let _ = writeln!(out, "{json}");
            }
            Err(e) => return fail(FAILURE, e),
        }
    } else {
        let _ = write!(out, "{}", table(&report));
    }
    let Some(min) = args.min_score else {
        return ExitCode::SUCCESS;
    };
    let below = report.below(min);
    if below.is_empty() {
        return ExitCode::SUCCESS;
    }
    let detail: Vec<String> = below
        .iter()
        .map(|id| match report.summary.get(*id).and_then(|s| s.mean) {
            Some(mean) => format!("{id} {mean:.3}"),
            None => format!("{id} (nothing scored)"),
        })
        .collect();
    fail(
        FAILURE,
        format!("below --min-score {min}: {}", detail.join(", ")),
    )
}

/// The report as a table: an item a row, a scorer a column, then the means.
fn table(report: &ExperimentReport) -> String {
    let scorers: Vec<&String> = report.summary.keys().collect();
    let width = report
        .items
        .iter()
        .map(|i| i.item_id.chars().count())
        .chain([4])
        .max()
        .unwrap_or(4)
        .min(40);
    let mut text = format!("{:width$}", "item");
    for s in &scorers {
        text.push_str(&format!("  {s:>w$}", w = s.len().max(6)));
    }
    text.push('\n');
    let cell = |value: Option<f64>, failed: bool| match (value, failed) {
        (Some(v), _) => format!("{v:.3}"),
        (None, true) => "error".to_owned(),
        (None, false) => "n/a".to_owned(),
    };
    for item in &report.items {
        let id: String = item.item_id.chars().take(width).collect();
        text.push_str(&format!("{id:width$}"));
        for s in &scorers {
            let score = item.scores.iter().find(|x| &x.scorer_id == *s);
            let value = score.and_then(|x| x.score);
            let failed = score.is_none_or(|x| x.error.is_some());
            text.push_str(&format!(
                "  {:>w$}",
                cell(value, failed),
                w = s.len().max(6)
            ));
        }
        text.push('\n');
    }
    text.push_str(&format!("{:width$}", "mean"));
    for s in &scorers {
        let mean = report.summary.get(*s).and_then(|x| x.mean);
        text.push_str(&format!("  {:>w$}", cell(mean, false), w = s.len().max(6)));
    }
    text.push('\n');
    if report.failed_items > 0 {
        text.push_str(&format!("{} item(s) failed to run\n", report.failed_items));
    }
    text
}
