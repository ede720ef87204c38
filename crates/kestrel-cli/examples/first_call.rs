//! What the first step of `kestrel dev`'s assistant does on the embedded model, over two fixed
//! sets of prompts: call the right tool for the tool prompts, answer in text for the others.
//! The figures in BENCHMARKS.md ("The forced first call") come from it.
//!
//! ```text
//! cargo run -p kestrel-cli --example first_call -- "$(kestrel models pull smollm2)"
//! ```
//!
//! Each prompt runs for one step in a thread of its own (the last one after an earlier turn in
//! its thread), with the assistant's memory on a temporary SQLite database.

use std::sync::Arc;

use kestrel::agent::Agent;
use kestrel::model::ModelSpec;
use kestrel::providers::local::LocalModel;
use kestrel_cli::dev::{ASSISTANT, BOOKING_TOOL, EMAIL_TOOL, WEATHER_TOOL};

/// Prompts each of which one of the assistant's tools fits.
const TOOL_PROMPTS: &[(&str, &str)] = &[
    (WEATHER_TOOL, "What's the weather in Lisbon?"),
    (WEATHER_TOOL, "Is it raining in Paris today?"),
    (WEATHER_TOOL, "Do I need an umbrella in London?"),
    (WEATHER_TOOL, "How warm is it in Rome?"),
    (WEATHER_TOOL, "Weather for Tokyo please."),
    (
        EMAIL_TOOL,
        "Send an email to bob@example.com saying the meeting moved to 3pm.",
    ),
    (EMAIL_TOOL, "Email alice@example.com that I'll be late."),
    (
        EMAIL_TOOL,
        "Write to my boss at boss@corp.com to ask for Friday off.",
    ),
    (
        EMAIL_TOOL,
        "Please send a message to tom@example.org with subject Lunch.",
    ),
    (BOOKING_TOOL, "Book a table for 2 at Nopa."),
    (
        BOOKING_TOOL,
        "Reserve a table for four at Chez Panisse tonight.",
    ),
    (BOOKING_TOOL, "Can you book dinner for 3 at Zuni Cafe?"),
    (
        BOOKING_TOOL,
        "I need a restaurant reservation for 6 people at Nobu.",
    ),
];

/// A second set, written after the design was chosen on the first.
const TOOL_PROMPTS_2: &[(&str, &str)] = &[
    (WEATHER_TOOL, "Will it be sunny in Madrid tomorrow?"),
    (WEATHER_TOOL, "What's the temperature in Berlin right now?"),
    (WEATHER_TOOL, "Should I wear a jacket in Oslo today?"),
    (WEATHER_TOOL, "Check the forecast for Sydney."),
    (
        EMAIL_TOOL,
        "Send Jane (jane@example.com) a note that the report is ready.",
    ),
    (
        EMAIL_TOOL,
        "Mail the team at team@example.com: standup is cancelled.",
    ),
    (
        EMAIL_TOOL,
        "Can you email carl@example.net and thank him for the gift?",
    ),
    (BOOKING_TOOL, "Get me a table for two at Septime on Friday."),
    (BOOKING_TOOL, "Book Nopa for 5 people."),
    (
        BOOKING_TOOL,
        "Make a dinner reservation at Lazy Bear for 2.",
    ),
];

/// Prompts no tool fits.
const OTHER_PROMPTS: &[&str] = &[
    "Hi, how are you?",
    "Tell me a joke.",
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Who wrote Hamlet?",
    "Thanks, that's all!",
    "What can you do?",
    "Translate 'good morning' into Spanish.",
    "My name is Ada and I love sailing.",
    "What is 2 plus 2?",
];

const OTHER_PROMPTS_2: &[&str] = &[
    "Good morning!",
    "How old is the universe?",
    "Can you recommend a good book?",
    "Explain what a black hole is.",
    "I'm feeling a bit tired today.",
    "What's your name?",
    "Tell me something interesting.",
    "Who are you?",
    "Why is the sky blue?",
    "Nice to meet you.",
];

/// What the first step of a run did.
struct FirstStep {
    /// The tools it called (none: it answered).
    calls: Vec<String>,
    /// Its answer.
    text: String,
}

impl FirstStep {
    fn show(&self, ok: bool, prompt: &str) {
        let mut text: String = self.text.chars().take(100).collect();
        if text.len() < self.text.len() {
            text.push('…');
        }
        println!(
            "{} {prompt} -> {:?} {text:?} ({} chars)",
            if ok { "ok " } else { "BAD" },
            self.calls,
            self.text.chars().count()
        );
    }
}

/// The first step of a run of `prompt` in `thread`.
async fn first_step(
    assistant: &Agent,
    prompt: &str,
    thread: &str,
) -> Result<FirstStep, Box<dyn std::error::Error>> {
    let result = assistant
        .generate(prompt)
        .memory(thread, format!("user-{thread}"))
        .max_steps(1)
        .await?;
    // A run stopped for a decision (an approval, a suspension) has not finished its step.
    let made = result
        .steps
        .first()
        .map_or(&result.tool_calls, |step| &step.tool_calls);
    let mut calls: Vec<String> = made.iter().map(|c| c.tool_name.clone()).collect();
    for waiting in &result.waiting {
        if !calls.contains(&waiting.tool_name) {
            calls.push(waiting.tool_name.clone());
        }
    }
    Ok(FirstStep {
        calls,
        text: result.text,
    })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(gguf) = std::env::args().nth(1) else {
        return Err("usage: first_call <path to a GGUF>".into());
    };
    let dir = tempfile::tempdir()?;
    let storage = kestrel_cli::dev::open_storage(&dir.path().join("dev.db")).await?;
    let model = ModelSpec::Model(Arc::new(LocalModel::from_path(gguf)));
    let kestrel = kestrel_cli::dev::demo_kestrel(model, Arc::new(storage.clone()))?;
    let assistant = kestrel.agent(ASSISTANT)?;

    let mut thread = 0;
    let mut lengths = Vec::new();
    for (set, tool_prompts, other_prompts) in [
        (1, TOOL_PROMPTS, OTHER_PROMPTS),
        (2, TOOL_PROMPTS_2, OTHER_PROMPTS_2),
    ] {
        let mut right = 0;
        for (tool, prompt) in tool_prompts {
            thread += 1;
            let step = first_step(assistant, prompt, &format!("t{thread}")).await?;
            let ok = step.calls == [*tool];
            right += usize::from(ok);
            step.show(ok, prompt);
        }
        let mut replies = 0;
        let mut others = other_prompts.len();
        for prompt in other_prompts {
            thread += 1;
            let step = first_step(assistant, prompt, &format!("t{thread}")).await?;
            let ok = step.calls.is_empty();
            replies += usize::from(ok);
            if ok {
                lengths.push(step.text.chars().count());
            }
            step.show(ok, prompt);
        }
        if set == 1 {
            // A question about the user's earlier message, in the thread of that message.
            assistant
                .generate("My name is Ada and I love sailing.")
                .memory("ada", "user-ada")
                .await?;
            let prompt = "What did I just tell you?";
            let step = first_step(assistant, prompt, "ada").await?;
            let ok = step.calls.is_empty();
            replies += usize::from(ok);
            if ok {
                lengths.push(step.text.chars().count());
            }
            others += 1;
            step.show(ok, &format!("{prompt} (after an earlier turn)"));
        }
        println!(
            "set {set}: right tool {right}/{}, answered in text {replies}/{others}",
            tool_prompts.len()
        );
    }
    lengths.sort_unstable();
    if let (Some(median), Some(longest)) = (lengths.get(lengths.len() / 2), lengths.last()) {
        println!(
            "text answers: {}, median {median} chars, longest {longest}",
            lengths.len()
        );
    }
    storage.close().await;
    Ok(())
}
