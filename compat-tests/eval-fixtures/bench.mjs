// Mastra's side of `kestrel-bench evals-scorers`: the same code scorers on the same agent
// turn, scorings per second (median of 3 passes of N). Usage: node bench.mjs [N]
import {
  createCompletenessScorer,
  createContentSimilarityScorer,
  createKeywordCoverageScorer,
  createTextualDifferenceScorer,
  createToneScorer,
  createToolCallAccuracyScorerCode,
} from '@mastra/evals/scorers/prebuilt';
import { createAgentTestRun, createTestMessage } from '@mastra/evals/scorers/utils';

const QUESTION = 'Could you please summarize what the quarterly budget review decided about hiring, marketing spend and the new office, and whether anything changed since last month?';
const ANSWER = 'The quarterly budget review decided to pause new hiring until the autumn, to cut the marketing spend by ten percent and to move the new office to next year. Compared with last month, the only change is the office: it was planned for this summer. Everything else stays as agreed, and the team will review the numbers again in six weeks.';
const n = Number(process.argv[2] ?? 10000);
const run = createAgentTestRun({
  inputMessages: [createTestMessage({ content: QUESTION, role: 'user', id: 'u' })],
  output: [createTestMessage({
    content: ANSWER, role: 'assistant', id: 'a',
    toolInvocations: ['search', 'summarize'].map((toolName, i) => ({ toolCallId: `c${i}`, toolName, args: { q: QUESTION }, result: {}, state: 'result' })),
  })],
  runId: 'bench',
});
const scorers = [
  createContentSimilarityScorer(),
  createTextualDifferenceScorer(),
  createKeywordCoverageScorer(),
  createCompletenessScorer(),
  createToneScorer(),
  createToolCallAccuracyScorerCode({ expectedToolOrder: ['search', 'summarize'] }),
];
console.log(`mastra evals-scorers: ${n} scorings each, median of 3`);
for (const scorer of scorers) {
  const rates = [];
  for (let pass = 0; pass < 3; pass++) {
    const started = process.hrtime.bigint();
    for (let i = 0; i < n; i++) await scorer.run(run);
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    rates.push(n / seconds);
  }
  rates.sort((a, b) => a - b);
  console.log(`  ${scorer.id}: ${rates[1].toFixed(0)} scorings/s (${(1e6 / rates[1]).toFixed(1)} µs each)`);
}
