// Mastra's side of the RAG benchmark (BENCHMARKS.md, "RAG (issue 41)"): the same corpus
// chunked by @mastra/rag, and the vectors Kestrel's bench exported (the same MiniLM
// embeddings: Mastra's own embedders need a network) stored and searched in @mastra/libsql's
// LibSQLVector (a file database, its DiskANN index), scored with the same title queries.
//
//   KESTREL_BENCH_EXPORT=/tmp/corpus.json kestrel-bench rag-quality <dir>
//   node bench.mjs <dir> /tmp/corpus.json
import { readFileSync, readdirSync, mkdtempSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { performance } from "node:perf_hooks";
import { MDocument } from "@mastra/rag";
import { LibSQLVector } from "@mastra/libsql";

const [dir, exported] = process.argv.slice(2);
if (!dir || !exported) {
  console.error("usage: node bench.mjs <dir of Markdown pages> <export of kestrel-bench rag-quality>");
  process.exit(2);
}

const pct = (sorted, p) => sorted[Math.round((sorted.length - 1) * p)];

// 1. Chunking: Markdown's strategy, 1000/100, as Kestrel's ingest.
const files = readdirSync(dir).filter((f) => f.endsWith(".md")).sort();
let chunks = 0;
const chunkStart = performance.now();
for (const file of files) {
  const text = readFileSync(join(dir, file), "utf8");
  if (!/^# /m.test(text)) continue;
  const doc = MDocument.fromMarkdown(text, { source: file });
  const out = await doc.chunk({ strategy: "markdown", maxSize: 1000, overlap: 100 });
  chunks += out.filter((c) => c.text.trim() !== "").length;
}
const chunkMs = performance.now() - chunkStart;
console.log(`mastra chunking: ${files.length} files, ${chunks} chunks in ${chunkMs.toFixed(0)} ms`);

// 2. LibSQLVector with Kestrel's vectors.
const data = JSON.parse(readFileSync(exported, "utf8"));
const db = join(mkdtempSync(join(tmpdir(), "mastra-libsql-")), "vectors.db");
const store = new LibSQLVector({ id: "bench", url: `file:${db}` });
await store.createIndex({ indexName: "corpus", dimension: 384, metric: "cosine" });
const upsertStart = performance.now();
for (let i = 0; i < data.ids.length; i += 1000) {
  await store.upsert({
    indexName: "corpus",
    vectors: data.vectors.slice(i, i + 1000),
    ids: data.ids.slice(i, i + 1000),
    metadata: data.sources.slice(i, i + 1000).map((source) => ({ source })),
  });
}
const upsertS = (performance.now() - upsertStart) / 1000;
let hits = 0;
let reciprocal = 0;
const latencies = [];
for (let q = 0; q < data.pages.length; q++) {
  const started = performance.now();
  const results = await store.query({ indexName: "corpus", queryVector: data.queries[q], topK: 20 });
  latencies.push(performance.now() - started);
  const ranked = [];
  for (const r of results) if (!ranked.includes(r.metadata.source)) ranked.push(r.metadata.source);
  const rank = ranked.indexOf(data.pages[q].source);
  if (rank >= 0) {
    reciprocal += 1 / (rank + 1);
    if (rank < 5) hits++;
  }
}
latencies.sort((a, b) => a - b);
console.log(
  `mastra LibSQLVector (file, DiskANN index): recall@5 ${(hits / data.pages.length).toFixed(3)}, ` +
    `MRR ${(reciprocal / data.pages.length).toFixed(3)}, upsert ${(data.ids.length / upsertS).toFixed(0)} vectors/s, ` +
    `query p50 ${pct(latencies, 0.5).toFixed(2)} ms p99 ${pct(latencies, 0.99).toFixed(2)} ms`,
);
console.log(`peak RSS ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MB`);
