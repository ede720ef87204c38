//! Speed and memory of the engine on one GGUF model.
//!
//! ```text
//! cargo run --release -p kestrel-llama --example bench -- <model.gguf> [--threads 2] [--runs 5] [--tokens 128] [--ctx 2048] [--prompt-cache]
//! ```
//!
//! Every run evaluates its whole prompt: the prompt cache is off unless `--prompt-cache`
//! (with it, a repeated prompt costs one token and the prompt figures mean nothing).
//!
//! Reports, as median [min-max] over the runs:
//! - decode tok/s: greedy, unconstrained, `--tokens` tokens after the prompt ("decoded tokens
//!   after the first one, divided by their time", like llama.cpp's `eval time`);
//! - time to first token (request to first text delta) for the short chat prompt;
//! - prompt tok/s for the short chat prompt and for a ~400-token prompt;
//! - constrained decode tok/s: a structured-output (JSON schema) answer and a forced tool call;
//! - peak RSS of the process (VmHWM): after the unconstrained decode runs, and at the end.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Instant;

use kestrel_llama::{
    ChatMessage, Completion, Engine, EngineOptions, GenerateRequest, GenerationEvent, StopReason,
    ToolChoice, ToolSpec,
};
use serde_json::json;

fn arg(args: &[String], name: &str, default: u32) -> u32 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(default)
}

fn median(values: &mut [f64]) -> (f64, f64, f64) {
    values.sort_by(|a, b| a.total_cmp(b));
    (
        values[values.len() / 2],
        values[0],
        values[values.len() - 1],
    )
}

fn report(label: &str, values: &mut [f64]) {
    let (med, min, max) = median(values);
    println!("{label:<44} {med:>8.1}  [{min:.1}-{max:.1}]");
}

fn decode_rate(c: &Completion) -> f64 {
    f64::from(c.completion_tokens.saturating_sub(1)) / (c.generation_micros as f64 / 1e6)
}

fn prompt_rate(c: &Completion) -> f64 {
    f64::from(c.prompt_tokens - c.cached_prompt_tokens) / (c.prompt_micros as f64 / 1e6)
}

fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first().filter(|a| !a.starts_with("--")) else {
        eprintln!("usage: bench <model.gguf> [--threads N] [--runs N] [--tokens N] [--ctx N]");
        std::process::exit(2);
    };
    let threads = arg(&args, "--threads", 2);
    let runs = arg(&args, "--runs", 5).max(1);
    let tokens = arg(&args, "--tokens", 128);
    let ctx = arg(&args, "--ctx", 2048);

    let started = Instant::now();
    let engine = Engine::load(
        path,
        EngineOptions {
            context_size: ctx,
            threads: Some(threads),
            prompt_cache: args.iter().any(|a| a == "--prompt-cache"),
            ..EngineOptions::default()
        },
    )
    .unwrap_or_else(|e| {
        eprintln!("cannot load {path}: {e}");
        std::process::exit(1);
    });
    let info = engine.info();
    println!(
        "model {} ({}, {} params), ctx {}, {} threads, load {:.2}s",
        info.name.as_deref().unwrap_or("?"),
        info.architecture,
        info.parameters,
        info.context_size,
        info.threads,
        started.elapsed().as_secs_f64()
    );

    let essay = || {
        GenerateRequest::new(vec![ChatMessage::user(
            "Write a detailed essay about the history of the printing press.",
        )])
    };
    let paragraph = "The printing press, developed by Johannes Gutenberg around 1440, transformed the spread of knowledge across Europe. Movable metal type allowed books to be produced faster and more cheaply than ever before, and literacy rose as printed material became widely available. ";
    let long = || {
        let mut text = String::from("Summarize the following text in one sentence. ");
        for _ in 0..7 {
            text.push_str(paragraph);
        }
        GenerateRequest {
            max_tokens: Some(2),
            ..GenerateRequest::new(vec![ChatMessage::user(text)])
        }
    };
    let structured = || GenerateRequest {
        response_schema: Some(json!({
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "year": {"type": "integer"},
                "facts": {"type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 3}
            },
            "required": ["title", "year", "facts"],
            "additionalProperties": false
        })),
        max_tokens: Some(tokens),
        ..GenerateRequest::new(vec![ChatMessage::user(
            "Describe the invention of the printing press as JSON with a title, the year and three facts.",
        )])
    };
    let tool_call = || GenerateRequest {
        tools: vec![ToolSpec {
            name: "convert_currency".into(),
            description: "Convert an amount of money from one currency to another.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "amount": {"type": "number"},
                    "from": {"type": "string", "description": "ISO currency code"},
                    "to": {"type": "string", "description": "ISO currency code"}
                },
                "required": ["amount", "from", "to"]
            }),
            auxiliary: false,
        }],
        tool_choice: ToolChoice::Required,
        max_tokens: Some(tokens),
        ..GenerateRequest::new(vec![ChatMessage::user(
            "How many Japanese yen is 250 US dollars?",
        )])
    };

    // Warm-up (page in the weights).
    engine
        .generate(GenerateRequest {
            max_tokens: Some(8),
            ..essay()
        })
        .unwrap()
        .collect_blocking()
        .unwrap();

    let mut decode = Vec::new();
    let mut prompt_short = Vec::new();
    let mut ttft = Vec::new();
    let mut generated = 0;
    for _ in 0..runs {
        let asked = Instant::now();
        let mut generation = engine
            .generate(GenerateRequest {
                max_tokens: Some(tokens),
                ..essay()
            })
            .unwrap();
        // Time to first token: from the request to the first text delta (queueing, prompt
        // processing and the first sampled token, as a caller sees it).
        let first = generation.blocking_next().unwrap().unwrap();
        assert!(matches!(first, GenerationEvent::Text(_)), "{first:?}");
        ttft.push(asked.elapsed().as_secs_f64() * 1e3);
        let out = generation.collect_blocking().unwrap();
        generated = out.completion.completion_tokens;
        decode.push(decode_rate(&out.completion));
        prompt_short.push(prompt_rate(&out.completion));
    }
    let decode_rss = peak_rss_mb();

    let mut prompt_long = Vec::new();
    for _ in 0..runs {
        let out = engine.generate(long()).unwrap().collect_blocking().unwrap();
        prompt_long.push(prompt_rate(&out.completion));
    }

    let mut json_rate = Vec::new();
    let mut json_tokens = 0;
    for _ in 0..runs {
        let out = engine
            .generate(structured())
            .unwrap()
            .collect_blocking()
            .unwrap();
        json_tokens = out.completion.completion_tokens;
        json_rate.push(decode_rate(&out.completion));
        serde_json::from_str::<serde_json::Value>(&out.text).expect("valid JSON");
    }

    let mut call_rate = Vec::new();
    let mut call_tokens = 0;
    for _ in 0..runs {
        let out = engine
            .generate(tool_call())
            .unwrap()
            .collect_blocking()
            .unwrap();
        assert_eq!(
            out.completion.reason,
            StopReason::ToolCalls,
            "{:?} {:?}",
            out.text,
            out.tool_calls
        );
        call_tokens = out.completion.completion_tokens;
        call_rate.push(decode_rate(&out.completion));
    }
    let short_tokens = engine.count_prompt_tokens(&essay()).unwrap();
    let long_tokens = engine.count_prompt_tokens(&long()).unwrap();
    println!("{:<44} {:>8}  [min-max] over {runs} runs", "", "median");
    report(
        &format!("decode tok/s ({generated} tokens, greedy)"),
        &mut decode,
    );
    report(
        &format!("time to first token, ms ({short_tokens}-token prompt)"),
        &mut ttft,
    );
    report(
        &format!("prompt tok/s ({short_tokens}-token prompt)"),
        &mut prompt_short,
    );
    report(
        &format!("prompt tok/s ({long_tokens}-token prompt)"),
        &mut prompt_long,
    );
    report(
        &format!("constrained tok/s (JSON schema, {json_tokens} tokens)"),
        &mut json_rate,
    );
    report(
        &format!("constrained tok/s (tool call, {call_tokens} tokens)"),
        &mut call_rate,
    );
    println!("peak RSS after the decode runs {decode_rss:.0} MB");
    println!("peak RSS after everything {:.0} MB", peak_rss_mb());
}
