// Reference benchmark: the same model and prompts as `examples/bench.rs`, run through
// node-llama-cpp 3.21.1 (a prebuilt llama.cpp), so our engine's figures have a native
// llama.cpp baseline measured the same way on the same machine.
//
// Setup (once, outside the repository; nothing here is a dependency of the crate):
//
//   mkdir -p /tmp/nodebench && cd /tmp/nodebench
//   npm init -y && npm pkg set type=module && npm i -E node-llama-cpp@3.21.1
//
// The install needs no postinstall script: the optional package @node-llama-cpp/linux-x64
// already holds prebuilt binaries, including one ggml CPU library per x86 CPU family
// (libggml-cpu-haswell.so, -zen4.so, -sapphirerapids.so, ...). At start llama.cpp loads the best
// one this CPU supports. To pin a variant, make a copy of the install and delete the others:
//
//   cp -a /tmp/nodebench /tmp/nodebench-avx2
//   cd /tmp/nodebench-avx2/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
//   for f in libggml-cpu-*.so; do [ "$f" = libggml-cpu-haswell.so ] || rm "$f"; done
//
// Run it from the install you want to measure. node-llama-cpp is resolved from the current
// directory, not from this file's location, so the same script serves every copy:
//
//   cd /tmp/nodebench      && node <repo>/crates/kestrel-llama/bench/node_reference.mjs <model.gguf>
//   cd /tmp/nodebench-avx2 && node <repo>/crates/kestrel-llama/bench/node_reference.mjs <model.gguf>
//
//   args: <model.gguf> [--runs 5] [--tokens 128] [--threads 2] [--ctx 2048]
//
// The script prints the ggml CPU library it found mapped into the process, per-run figures,
// medians, and a last line of JSON.
//
// What it measures (figure definitions follow examples/bench.rs):
// - Prompts: the texts from bench.rs, unchanged. The short one is the "essay" request, the long
//   one is "Summarize the following text in one sentence. " plus 7 copies of the paragraph.
//   bench.rs renders them with the GGUF's chat template. For SmolLM2 that means ChatML plus the
//   template's default system prompt. The same text is written here and tokenized the way
//   the engine does it: template text with special-token parsing, message content without it,
//   and BOS only if the vocabulary asks for it. The script warns if the GGUF's template is not
//   the SmolLM2 one, because then the prompts would no longer match. Token counts are printed
//   and should equal those bench.rs prints.
// - Warm-up: one 8-token generation of the short prompt, as bench.rs does.
// - decode tok/s: greedy (temperature 0), `--tokens` tokens. (generated tokens - 1) divided by
//   the time from the first generated token to the last, which is the same definition as
//   bench.rs (generation_micros starts when the prompt is done).
// - TTFT ms: from the start of evaluation of the already-tokenized short prompt (KV cache
//   cleared) until the first generated token reaches JavaScript. This is prompt evaluation plus
//   one greedy sample. bench.rs has no TTFT figure; its nearest one is prompt_micros, which is
//   prompt evaluation without the sample.
// - prompt tok/s (short / long): prompt tokens / TTFT of that prompt. For the long prompt,
//   generation stops after the first token, like bench.rs's max_tokens 2 run, which only
//   times the prompt. The extra sample and the hand-off to JavaScript are included here but
//   not in bench.rs. They take well under a millisecond.
// - Run order as in bench.rs: warm-up, then `--runs` decode runs, then `--runs` long-prompt runs.
// - Median: bench.rs's definition (sorted[len/2], so the upper median for an even count), with
//   [min-max] alongside.
// - Peak RSS: VmHWM of this process, after the decode runs and at the end. It includes the
//   Node.js runtime (V8 heap, JS code, the addon), tens of MB that the Rust binary does not
//   have.
// - bench.rs's constrained (JSON-schema / tool-call) figures are not reproduced here:
//   node-llama-cpp's grammar path differs from ours, so those figures would not be comparable.
//
// Engine settings: CPU only (gpu: false, no layers offloaded), the given thread count for both
// prompt and generation, batch size 512 (our EngineOptions default), one sequence, and
// flash attention left at node-llama-cpp's default ("auto", which is also llama.cpp's default).
// The prebuilt binary is never rebuilt from source (build: "never"). If it cannot load, the
// script fails instead of compiling llama.cpp.

import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const ENGINE = "node-llama-cpp 3.21.1";

// ---- arguments -------------------------------------------------------------------------------

const argv = process.argv.slice(2);
const modelPath = argv[0];
if (!modelPath || modelPath.startsWith("--")) {
    console.error("usage: node node_reference.mjs <model.gguf> [--runs 5] [--tokens 128] [--threads 2] [--ctx 2048]");
    process.exit(2);
}
function numberArg(name, fallback) {
    const i = argv.indexOf(name);
    if (i < 0) return fallback;
    const value = Number(argv[i + 1]);
    if (!Number.isInteger(value) || value < 1) {
        console.error(`${name} needs a positive integer, got ${argv[i + 1]}`);
        process.exit(2);
    }
    return value;
}
const runs = numberArg("--runs", 5);
const maxTokens = numberArg("--tokens", 128);
const threads = numberArg("--threads", 2);
const ctxSize = numberArg("--ctx", 2048);
const BATCH_SIZE = 512;

// ---- node-llama-cpp, resolved from the current directory ----------------------------------------

const requireFromCwd = createRequire(`${process.cwd()}/`);
let entry;
try {
    entry = requireFromCwd.resolve("node-llama-cpp");
} catch {
    console.error(`node-llama-cpp is not installed under ${process.cwd()} (run this from the npm project that has it)`);
    process.exit(1);
}
const { getLlama, LlamaLogLevel } = await import(pathToFileURL(entry).href);

// The package's exports hide package.json, so read it next to the resolved entry point.
let installedVersion = "?";
const packageDir = entry.slice(0, entry.lastIndexOf("/node_modules/node-llama-cpp/") + "/node_modules/node-llama-cpp/".length);
try {
    installedVersion = JSON.parse(readFileSync(`${packageDir}package.json`, "utf8")).version;
} catch {
    // Leave "?".
}

// ---- prompts (texts from examples/bench.rs) -----------------------------------------------------

const SHORT_USER = "Write a detailed essay about the history of the printing press.";
const PARAGRAPH =
    "The printing press, developed by Johannes Gutenberg around 1440, transformed the spread of knowledge across Europe. Movable metal type allowed books to be produced faster and more cheaply than ever before, and literacy rose as printed material became widely available. ";
const LONG_USER = "Summarize the following text in one sentence. " + PARAGRAPH.repeat(7);

// SmolLM2's GGUF chat template. bench.rs renders the GGUF's own template; these
// segments are what that template gives for a single user message.
const SMOLLM2_TEMPLATE =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
const BEFORE_CONTENT =
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\n";
const AFTER_CONTENT = "<|im_end|>\n<|im_start|>assistant\n";

function promptTokens(model, userText) {
    const tokens = [
        ...model.tokenize(BEFORE_CONTENT, true),
        ...model.tokenize(userText, false),
        ...model.tokenize(AFTER_CONTENT, true),
    ];
    const bos = model.tokens.bos;
    if (model.tokens.shouldPrependBosToken && bos != null && tokens[0] !== bos) tokens.unshift(bos);
    return tokens;
}

// ---- helpers ---------------------------------------------------------------------------------

const now = () => Number(process.hrtime.bigint()) / 1e6; // ms

function peakRssMb() {
    try {
        const line = readFileSync("/proc/self/status", "utf8").split("\n").find((l) => l.startsWith("VmHWM:"));
        return Number(line.replace("VmHWM:", "").replace("kB", "").trim()) / 1024;
    } catch {
        return NaN;
    }
}

function loadedCpuLibraries() {
    try {
        const libs = new Set();
        for (const line of readFileSync("/proc/self/maps", "utf8").split("\n")) {
            const m = line.match(/\S*libggml-cpu[^/\s]*\.so\S*$/);
            if (m) libs.add(m[0]);
        }
        return [...libs];
    } catch {
        return [];
    }
}

// bench.rs: sorted[len / 2], min, max.
function stats(values) {
    const sorted = [...values].sort((a, b) => a - b);
    return { median: sorted[Math.floor(sorted.length / 2)], min: sorted[0], max: sorted[sorted.length - 1] };
}

// Evaluates `tokens` on a cleared sequence and generates up to `limit` greedy tokens.
// Returns the time to the first token and the time from the first token to the last.
async function generate(sequence, tokens, limit) {
    await sequence.clearHistory();
    let generated = 0;
    let firstAt = 0;
    let lastAt = 0;
    const started = now();
    for await (const _token of sequence.evaluate(tokens, { temperature: 0 })) {
        lastAt = now();
        generated += 1;
        if (generated === 1) firstAt = lastAt;
        if (generated >= limit) break;
    }
    if (generated === 0) throw new Error("the model generated no token");
    return {
        generated,
        ttftMs: firstAt - started,
        afterFirstMs: lastAt - firstAt,
    };
}

const fmt = (v, digits = 1) => (Number.isFinite(v) ? v.toFixed(digits) : String(v));

// ---- main ------------------------------------------------------------------------------------

const loadStarted = now();
const llama = await getLlama({
    gpu: false,
    build: "never",
    maxThreads: threads,
    logLevel: LlamaLogLevel.warn,
});
const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
const context = await model.createContext({
    contextSize: ctxSize,
    batchSize: BATCH_SIZE,
    sequences: 1,
    threads: { ideal: threads, min: threads },
});
const sequence = context.getSequence();
const loadSeconds = (now() - loadStarted) / 1000;

const cpuLibs = loadedCpuLibraries();
const release = llama.llamaCppRelease;
console.log(`engine ${ENGINE} (installed ${installedVersion}, ${llama.buildType} binary, llama.cpp ${release?.release ?? "?"})`);
console.log(`node-llama-cpp from ${entry}`);
console.log(`ggml CPU variant: ${cpuLibs.length ? cpuLibs.join(", ") : "none found in /proc/self/maps (statically linked?)"}`);
console.log(`system info: ${llama.systemInfo.trim()}`);

const template = model.fileInfo?.metadata?.tokenizer?.chat_template;
if (template !== SMOLLM2_TEMPLATE) {
    console.warn(
        "WARNING: the GGUF's chat template is not SmolLM2's; the prompts below are SmolLM2's ChatML and will not match what bench.rs renders for this model",
    );
}
const shortTokens = promptTokens(model, SHORT_USER);
const longTokens = promptTokens(model, LONG_USER);
console.log(
    `model ${model.fileInfo?.metadata?.general?.name ?? "?"} (${model.fileInfo?.metadata?.general?.architecture ?? "?"}), ` +
        `ctx ${context.contextSize}, batch ${context.batchSize}, ${context.currentThreads} threads, ` +
        `flash attention ${context.flashAttention}, load ${fmt(loadSeconds, 2)}s`,
);
console.log(`short prompt ${shortTokens.length} tokens, long prompt ${longTokens.length} tokens`);
if (longTokens.length >= context.contextSize) {
    console.error(`the long prompt (${longTokens.length} tokens) does not fit in --ctx ${context.contextSize}`);
    process.exit(1);
}

// Warm-up (page in the weights), as in bench.rs.
await generate(sequence, shortTokens, 8);

const decode = [];
const ttft = [];
const promptShort = [];
let generated = 0;
for (let run = 1; run <= runs; run++) {
    const r = await generate(sequence, shortTokens, maxTokens);
    generated = r.generated;
    const rate = r.generated > 1 ? (r.generated - 1) / (r.afterFirstMs / 1000) : NaN;
    const pp = shortTokens.length / (r.ttftMs / 1000);
    decode.push(rate);
    ttft.push(r.ttftMs);
    promptShort.push(pp);
    console.log(
        `run ${run}/${runs} short: ${r.generated} tokens, TTFT ${fmt(r.ttftMs)} ms, ` +
            `prompt ${fmt(pp)} tok/s, decode ${fmt(rate)} tok/s`,
    );
}
const decodeRss = peakRssMb();

const promptLong = [];
for (let run = 1; run <= runs; run++) {
    const r = await generate(sequence, longTokens, 1);
    const pp = longTokens.length / (r.ttftMs / 1000);
    promptLong.push(pp);
    console.log(`run ${run}/${runs} long: ${longTokens.length}-token prompt in ${fmt(r.ttftMs)} ms, prompt ${fmt(pp)} tok/s`);
}
const endRss = peakRssMb();

const rows = [
    [`decode tok/s (${generated} tokens, greedy)`, stats(decode)],
    [`TTFT ms (${shortTokens.length}-token prompt)`, stats(ttft)],
    [`prompt tok/s (${shortTokens.length}-token prompt)`, stats(promptShort)],
    [`prompt tok/s (${longTokens.length}-token prompt)`, stats(promptLong)],
];
console.log(`${"".padEnd(44)} ${"median".padStart(8)}  [min-max] over ${runs} runs`);
for (const [label, s] of rows) {
    console.log(`${label.padEnd(44)} ${fmt(s.median).padStart(8)}  [${fmt(s.min)}-${fmt(s.max)}]`);
}
console.log(`peak RSS after the decode runs ${fmt(decodeRss, 0)} MB`);
console.log(`peak RSS after everything ${fmt(endRss, 0)} MB`);

const round = (v, d = 1) => (Number.isFinite(v) ? Number(v.toFixed(d)) : null);
console.log(
    JSON.stringify({
        engine: ENGINE,
        installed: installedVersion,
        cpu_variant: cpuLibs.map((p) => p.split("/").pop()),
        install_dir: process.cwd(),
        threads: context.currentThreads,
        ctx: context.contextSize,
        runs,
        decode_tokens: generated,
        short_prompt_tokens: shortTokens.length,
        long_prompt_tokens: longTokens.length,
        decode_tok_s: round(stats(decode).median),
        ttft_ms: round(stats(ttft).median),
        prompt_short_tok_s: round(stats(promptShort).median),
        prompt_long_tok_s: round(stats(promptLong).median),
        peak_rss_decode_mb: round(decodeRss, 0),
        peak_rss_mb: round(endRss, 0),
        load_s: round(loadSeconds, 2),
    }),
);

await context.dispose();
await model.dispose();
await llama.dispose();
