//! Tool-or-answer decisions of `kestrel dev`'s assistant on each local model: a fixed set of
//! prompts (a tool needed or not, which tool, which arguments, multi-turn, a follow-up about
//! an earlier answer), the first step of each run judged, with the model's speed and memory.
//! The table of BENCHMARKS.md ("Which local model") comes from it.
//!
//! ```text
//! cargo run --release -p kestrel-cli --example decisions -- smollm2 qwen2.5-coder-0.5b qwen2.5-coder-1.5b
//! ```
//!
//! Each model runs in a process of its own (its peak memory is that process's); a name is a
//! catalog model (pulled if needed) or a path to a GGUF file. Each case runs for one step in a
//! thread of its own, with the assistant's memory on a temporary SQLite database; a case with
//! an earlier turn runs that turn whole first, in the same thread. Greedy decoding: one run
//! per model says it all. `-v` prints every case; `--policy model-decides` or
//! `--policy call-then-answer` overrides the engine's default tool policy (models under 300M
//! parameters call-then-answer, larger ones decide).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kestrel::agent::Agent;
use kestrel::event::EventKind;
use kestrel::model::ModelSpec;
use kestrel::providers::local::{AutoToolPolicy, LocalModel};
use kestrel_cli::dev::{ASSISTANT, BOOKING_TOOL, EMAIL_TOOL, WEATHER_TOOL};
use serde_json::{Value, json};

/// What the first step should do.
enum Expect {
    /// Call `tool` with arguments whose fields contain these values (case-insensitive).
    Tool(&'static str, &'static [(&'static str, &'static str)]),
    /// Answer in text.
    Text,
}

/// One prompt, maybe after an earlier turn in its thread.
struct Case {
    before: Option<&'static str>,
    prompt: &'static str,
    expect: Expect,
}

const fn tool(
    name: &'static str,
    prompt: &'static str,
    args: &'static [(&'static str, &'static str)],
) -> Case {
    Case {
        before: None,
        prompt,
        expect: Expect::Tool(name, args),
    }
}

const fn text(prompt: &'static str) -> Case {
    Case {
        before: None,
        prompt,
        expect: Expect::Text,
    }
}

/// The decision set: 23 tool prompts, 21 others, 4 in a thread with an earlier turn.
const CASES: &[Case] = &[
    tool(
        WEATHER_TOOL,
        "What's the weather in Lisbon?",
        &[("city", "lisbon")],
    ),
    tool(
        WEATHER_TOOL,
        "Is it raining in Paris today?",
        &[("city", "paris")],
    ),
    tool(
        WEATHER_TOOL,
        "Do I need an umbrella in London?",
        &[("city", "london")],
    ),
    tool(WEATHER_TOOL, "How warm is it in Rome?", &[("city", "rome")]),
    tool(
        WEATHER_TOOL,
        "Weather for Tokyo please.",
        &[("city", "tokyo")],
    ),
    tool(
        WEATHER_TOOL,
        "Will it be sunny in Madrid tomorrow?",
        &[("city", "madrid")],
    ),
    tool(
        WEATHER_TOOL,
        "What's the temperature in Berlin right now?",
        &[("city", "berlin")],
    ),
    tool(
        WEATHER_TOOL,
        "Should I wear a jacket in Oslo today?",
        &[("city", "oslo")],
    ),
    tool(
        WEATHER_TOOL,
        "Check the forecast for Sydney.",
        &[("city", "sydney")],
    ),
    tool(
        EMAIL_TOOL,
        "Send an email to bob@example.com saying the meeting moved to 3pm.",
        &[("to", "bob@example.com")],
    ),
    tool(
        EMAIL_TOOL,
        "Email alice@example.com that I'll be late.",
        &[("to", "alice@example.com")],
    ),
    tool(
        EMAIL_TOOL,
        "Write to my boss at boss@corp.com to ask for Friday off.",
        &[("to", "boss@corp.com")],
    ),
    tool(
        EMAIL_TOOL,
        "Please send a message to tom@example.org with subject Lunch.",
        &[("to", "tom@example.org"), ("subject", "lunch")],
    ),
    tool(
        EMAIL_TOOL,
        "Send Jane (jane@example.com) a note that the report is ready.",
        &[("to", "jane@example.com")],
    ),
    tool(
        EMAIL_TOOL,
        "Mail the team at team@example.com: standup is cancelled.",
        &[("to", "team@example.com")],
    ),
    tool(
        EMAIL_TOOL,
        "Can you email carl@example.net and thank him for the gift?",
        &[("to", "carl@example.net")],
    ),
    tool(
        BOOKING_TOOL,
        "Book a table for 2 at Nopa.",
        &[("restaurant", "nopa"), ("guests", "2")],
    ),
    tool(
        BOOKING_TOOL,
        "Reserve a table for four at Chez Panisse tonight.",
        &[("restaurant", "chez panisse"), ("guests", "4")],
    ),
    tool(
        BOOKING_TOOL,
        "Can you book dinner for 3 at Zuni Cafe?",
        &[("restaurant", "zuni"), ("guests", "3")],
    ),
    tool(
        BOOKING_TOOL,
        "I need a restaurant reservation for 6 people at Nobu.",
        &[("restaurant", "nobu"), ("guests", "6")],
    ),
    tool(
        BOOKING_TOOL,
        "Get me a table for two at Septime on Friday.",
        &[("restaurant", "septime"), ("guests", "2")],
    ),
    tool(
        BOOKING_TOOL,
        "Book Nopa for 5 people.",
        &[("restaurant", "nopa"), ("guests", "5")],
    ),
    tool(
        BOOKING_TOOL,
        "Make a dinner reservation at Lazy Bear for 2.",
        &[("restaurant", "lazy bear"), ("guests", "2")],
    ),
    text("Hi, how are you?"),
    text("Tell me a joke."),
    text("What is the capital of France?"),
    text("Write a haiku about the sea."),
    text("Who wrote Hamlet?"),
    text("Thanks, that's all!"),
    text("What can you do?"),
    text("Translate 'good morning' into Spanish."),
    text("My name is Ada and I love sailing."),
    text("What is 12 times 7?"),
    text("Good morning!"),
    text("How old is the universe?"),
    text("Can you recommend a good book?"),
    text("Explain what a black hole is."),
    text("I'm feeling a bit tired today."),
    text("What's your name?"),
    text("Tell me something interesting."),
    text("Who are you?"),
    text("Why is the sky blue?"),
    text("Nice to meet you."),
    text("What is an email?"),
    Case {
        before: Some("What's the weather in Lisbon?"),
        prompt: "And in Porto?",
        expect: Expect::Tool(WEATHER_TOOL, &[("city", "porto")]),
    },
    Case {
        before: Some("My name is Ada and I love sailing."),
        prompt: "What did I just tell you?",
        expect: Expect::Text,
    },
    Case {
        before: Some("What's the weather in Rome?"),
        prompt: "Thanks! So should I bring a coat?",
        expect: Expect::Text,
    },
    Case {
        before: Some("I'm planning dinner with my sister on Saturday."),
        prompt: "Book us a table for 2 at Nopa.",
        expect: Expect::Tool(BOOKING_TOOL, &[("restaurant", "nopa"), ("guests", "2")]),
    },
];

/// What the first step of a case did, and how fast.
struct Step {
    calls: Vec<(String, Value)>,
    text: String,
    /// From the request to the first streamed part.
    first: Option<Duration>,
    /// From the first streamed part to the step's end.
    rest: Duration,
    output_tokens: u64,
    input_tokens: u64,
}

async fn first_step(
    assistant: &Agent,
    prompt: &str,
    thread: &str,
) -> Result<Step, Box<dyn std::error::Error>> {
    let started = Instant::now();
    let mut first = None;
    let mut stream = assistant
        .stream(prompt)
        .memory(thread, format!("user-{thread}"))
        .max_steps(1)
        .into_stream();
    while let Some(event) = stream.next().await {
        let part = matches!(
            event.kind,
            EventKind::TextDelta(_)
                | EventKind::ToolCallInputStreamingStart(_)
                | EventKind::ToolCallDelta(_)
                | EventKind::ToolCall(_)
        );
        if part && first.is_none() {
            first = Some(started.elapsed());
        }
    }
    let ended = started.elapsed();
    let result = stream.result().await?;
    let step = result.steps.first();
    let made = step.map_or(&result.tool_calls, |s| &s.tool_calls);
    let mut calls: Vec<(String, Value)> = made
        .iter()
        .map(|c| (c.tool_name.clone(), c.args.clone()))
        .collect();
    for waiting in &result.waiting {
        if !calls.iter().any(|(name, _)| *name == waiting.tool_name) {
            calls.push((waiting.tool_name.clone(), waiting.args.clone()));
        }
    }
    Ok(Step {
        calls,
        text: result.text,
        rest: ended.saturating_sub(first.unwrap_or(ended)),
        first,
        output_tokens: result.usage.output_tokens,
        input_tokens: result.usage.input_tokens,
    })
}

/// Whether `args` has each field containing its value (numbers compared as text).
fn args_match(args: &Value, want: &[(&str, &str)]) -> bool {
    want.iter().all(|(field, value)| {
        let have = match &args[*field] {
            Value::String(s) => s.to_lowercase(),
            Value::Null => return false,
            other => other.to_string(),
        };
        have.contains(value)
    })
}

/// The tool policy `--policy` names.
fn policy(name: &str) -> Result<AutoToolPolicy, Box<dyn std::error::Error>> {
    match name {
        "model-decides" => Ok(AutoToolPolicy::ModelDecides),
        "call-then-answer" => Ok(AutoToolPolicy::CallThenAnswer),
        other => Err(format!("--policy {other:?}: model-decides or call-then-answer").into()),
    }
}

/// Runs every case on the GGUF at `path`; prints the summary as one JSON line.
async fn one(
    path: &str,
    policy: Option<AutoToolPolicy>,
    verbose: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let storage = kestrel_cli::dev::open_storage(&dir.path().join("dev.db")).await?;
    let mut local = LocalModel::from_path(path);
    if let Some(policy) = policy {
        local = local.with_auto_tool_policy(policy);
    }
    let model = ModelSpec::Model(Arc::new(local));
    let kestrel = kestrel_cli::dev::demo_kestrel(model, Arc::new(storage.clone()))?;
    let assistant = kestrel.agent(ASSISTANT)?;
    // Loads the model (not timed).
    assistant.generate("Hello").max_steps(1).await?;

    let (mut right, mut tool_cases, mut right_tool, mut valid_args, mut text_cases, mut texts) =
        (0, 0, 0, 0, 0, 0);
    let mut firsts = Vec::new();
    let (mut decoded, mut decoding) = (0u64, Duration::ZERO);
    for (index, case) in CASES.iter().enumerate() {
        let thread = format!("t{index}");
        if let Some(before) = case.before {
            assistant
                .generate(before)
                .memory(&thread, format!("user-{thread}"))
                .await?;
        }
        let step = first_step(assistant, case.prompt, &thread).await?;
        if let Some(first) = step.first {
            firsts.push(first);
        }
        if step.output_tokens > 1 && step.first.is_some() {
            decoded += step.output_tokens - 1;
            decoding += step.rest;
        }
        let ok = match &case.expect {
            Expect::Tool(name, want) => {
                tool_cases += 1;
                let called = step.calls.len() == 1 && step.calls[0].0 == *name;
                let args = called && args_match(&step.calls[0].1, want);
                right_tool += usize::from(called);
                valid_args += usize::from(args);
                called
            }
            Expect::Text => {
                text_cases += 1;
                let answered = step.calls.is_empty() && !step.text.trim().is_empty();
                texts += usize::from(answered);
                answered
            }
        };
        right += usize::from(ok);
        if verbose {
            let shown: String = step.text.chars().take(80).collect();
            eprintln!(
                "{} {}{} -> {:?} {shown:?} ({} in, {} out, first part {:?})",
                if ok { "ok " } else { "BAD" },
                case.before.map_or(String::new(), |b| format!("[{b}] ")),
                case.prompt,
                step.calls,
                step.input_tokens,
                step.output_tokens,
                step.first,
            );
        }
    }
    firsts.sort_unstable();
    let median_first = firsts.get(firsts.len() / 2).copied().unwrap_or_default();
    let summary = json!({
        "model": path,
        "cases": CASES.len(),
        "right": right,
        "toolCases": tool_cases,
        "rightTool": right_tool,
        "validArgs": valid_args,
        "textCases": text_cases,
        "texts": texts,
        "medianFirstPartMs": median_first.as_millis() as u64,
        "decodeTokensPerSecond": if decoding.is_zero() { 0.0 } else { decoded as f64 / decoding.as_secs_f64() },
        "peakRssMb": peak_rss_mb(),
    });
    println!("{summary}");
    storage.close().await;
    Ok(())
}

/// This process's peak resident memory (VmHWM), in MB.
fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1000.0)
}

/// A GGUF path: `name` itself when it is a file, else the catalog model of that name, pulled.
fn resolve(name: &str) -> Result<String, Box<dyn std::error::Error>> {
    if std::path::Path::new(name).is_file() {
        return Ok(name.to_owned());
    }
    let store = kestrel_model_store::ModelStore::from_env()?;
    let pulled = store.pull(name, |_| {})?;
    Ok(pulled.path.display().to_string())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut verbose = false;
    let mut chosen: Option<String> = None;
    let mut only = None;
    let mut models = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-v" => verbose = true,
            "--policy" => chosen = Some(args.next().ok_or("--policy needs a value")?),
            "--one" => only = Some(args.next().ok_or("--one needs a path")?),
            _ => models.push(arg),
        }
    }
    let policy_of = chosen.as_deref().map(policy).transpose()?;
    if let Some(path) = only {
        return one(&path, policy_of, verbose).await;
    }
    if models.is_empty() {
        return Err(
            "usage: decisions [-v] [--policy model-decides|call-then-answer] <model or GGUF path>..."
                .into(),
        );
    }
    println!(
        "| model | right decisions | right tool | valid arguments | text answers | first part (median) | decode | peak RSS |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for name in models {
        let path = resolve(&name)?;
        let mut command = std::process::Command::new(std::env::current_exe()?);
        command.arg("--one").arg(&path);
        if verbose {
            command.arg("-v");
        }
        if let Some(chosen) = &chosen {
            command.arg("--policy").arg(chosen);
        }
        let output = command.stderr(std::process::Stdio::inherit()).output()?;
        let line = String::from_utf8_lossy(&output.stdout);
        let Some(summary) = line
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str::<Value>(l).ok())
        else {
            return Err(format!("{name}: no summary ({})", output.status).into());
        };
        let shown = match &chosen {
            Some(chosen) => format!("{name} ({chosen})"),
            None => name.clone(),
        };
        println!(
            "| {shown} | {}/{} | {}/{} | {}/{} | {}/{} | {} ms | {:.1} tok/s | {:.0} MB |",
            summary["right"],
            summary["cases"],
            summary["rightTool"],
            summary["toolCases"],
            summary["validArgs"],
            summary["toolCases"],
            summary["texts"],
            summary["textCases"],
            summary["medianFirstPartMs"],
            summary["decodeTokensPerSecond"]
                .as_f64()
                .unwrap_or_default(),
            summary["peakRssMb"].as_f64().unwrap_or_default(),
        );
    }
    Ok(())
}
