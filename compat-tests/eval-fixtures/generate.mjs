// Runs @mastra/evals' code scorers on fixed inputs and writes what they return to
// crates/kestrel-evals/tests/fixtures/code-scorers.json, for the Rust port's parity tests.
// See README.md.
import { mkdirSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import {
  createCompletenessScorer,
  createContentSimilarityScorer,
  createKeywordCoverageScorer,
  createTextualDifferenceScorer,
  createToneScorer,
  createToolCallAccuracyScorerCode,
  createTrajectoryAccuracyScorerCode,
} from '@mastra/evals/scorers/prebuilt';
import { createAgentTestRun, createTestMessage, createTrajectoryTestRun } from '@mastra/evals/scorers/utils';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, '..', '..', 'crates', 'kestrel-evals', 'tests', 'fixtures', 'code-scorers.json');

// Text pairs (the user's input, the agent's answer) shared by the text scorers.
const pairs = [
  ['The quick brown fox', 'The quick brown dog'],
  ['hello world', 'hello there world'],
  ['hello world', 'hello world'],
  ['Hello   World', 'hello world'],
  ['', 'something'],
  ['something', ''],
  ['', ''],
  ['abc', 'xyz'],
  ['a', 'a'],
  ['a', 'b'],
  ['Paris is the capital of France.', 'The capital of France is Paris.'],
  ['What is the weather in Berlin today?', 'It is sunny and 21 degrees in Berlin today.'],
  ['Summarize the meeting notes about the Q3 budget review', 'The Q3 budget review meeting covered spending cuts, hiring plans and the marketing budget.'],
  ['Explain how photosynthesis works in plants', 'Plants convert sunlight, water and carbon dioxide into glucose and oxygen using chlorophyll.'],
  ['I love this product, it is amazing!', 'Thank you! We are so happy you enjoy it. It is great to hear.'],
  ['This is terrible. I hate it.', 'I am sorry it was a bad experience. That is awful and we will fix it.'],
  ['The service was not good at all', 'It was not bad, actually quite good.'],
  ['café naïve résumé', 'cafe naive resume'],
  ['日本語のテキスト', '日本語のテキストです'],
  ['emoji 😀 test 🎉', 'emoji 😀 test'],
  ['tabs\tand\nnewlines  here', 'tabs and newlines here'],
  ['Running, jumped, swimming and was eating', 'run jump swim eat'],
  ['The cats are running quickly across the gardens', 'A cat runs across a garden'],
  ['Numbers 123 and 4567 appear with words like alpha', 'alpha appears, numbers do not'],
  ['OpenAI GPT-4o and Claude-3 models compared', 'gpt 4o vs claude 3: a comparison of models'],
  ['Please book a flight from New York to London on March 3rd.', 'I booked your flight from New York to London for March 3rd.'],
  ['Is it good? Yes! It is very good. Really good.', 'Bad. Awful! Terrible? Horrible.'],
  ['aaaa', 'aaa'],
  ['abcdef', 'fedcba'],
  ['The the THE the', 'the'],
  ['Can you help me reset my password for my account?', 'Sure, go to settings, choose security and click reset password.'],
  ['supercalifragilisticexpialidocious', 'super'],
  ['don\'t won\'t can\'t shouldn\'t', 'do not will not cannot should not'],
];

const message = (role, text, extra = {}) => createTestMessage({ content: text, role, id: `${role}-1`, ...extra });

function agentRun(input, output) {
  return createAgentTestRun({
    inputMessages: [message('user', input)],
    output: [message('assistant', output)],
    runId: 'fixture-run',
  });
}

// What a step result holds, as JSON (Sets become sorted arrays).
function plain(value) {
  return JSON.parse(
    JSON.stringify(value ?? null, (_key, v) => (v instanceof Set ? [...v].sort() : v)),
  );
}

async function scoreText(scorer, input, output) {
  try {
    const result = await scorer.run(agentRun(input, output));
    return {
      score: result.score ?? null,
      preprocessStepResult: plain(result.preprocessStepResult),
      analyzeStepResult: plain(result.analyzeStepResult),
    };
  } catch (error) {
    return { error: String(error?.message ?? error) };
  }
}

const scorers = {};

async function textScorer(id, make, optionSets) {
  const cases = [];
  for (const options of optionSets) {
    const scorer = make(options);
    for (const [input, output] of pairs) {
      cases.push({ options, input, output, ...(await scoreText(scorer, input, output)) });
    }
  }
  scorers[id] = cases;
}

await textScorer('content-similarity', (o) => createContentSimilarityScorer(o), [
  { ignoreCase: true, ignoreWhitespace: true },
  { ignoreCase: false, ignoreWhitespace: false },
  { ignoreCase: true, ignoreWhitespace: false },
]);
await textScorer('textual-difference', () => createTextualDifferenceScorer(), [{}]);
await textScorer('keyword-coverage', () => createKeywordCoverageScorer(), [{}]);
await textScorer('completeness', () => createCompletenessScorer(), [{}]);
await textScorer('tone', (o) => createToneScorer(o), [
  {},
  { referenceTone: 'I am so happy and excited about this wonderful news!' },
  { referenceTone: 'This is a neutral statement.' },
]);

// Tool calls: the agent's answer carries tool invocations.
const invocation = (toolName, i) => ({
  toolCallId: `call-${i}`,
  toolName,
  args: { q: i },
  result: { ok: true },
  state: 'result',
});
const toolRuns = [
  [],
  ['weather'],
  ['search', 'weather'],
  ['weather', 'search'],
  ['search', 'weather', 'search'],
  ['weather', 'weather'],
  ['calendar'],
];
const toolOptions = [
  { expectedTool: 'weather' },
  { expectedTool: 'weather', strictMode: true },
  { expectedToolOrder: ['search', 'weather'] },
  { expectedToolOrder: ['search', 'weather'], strictMode: true },
  { expectedToolOrder: ['weather'] },
];
{
  const cases = [];
  for (const options of toolOptions) {
    const scorer = createToolCallAccuracyScorerCode(options);
    for (const tools of toolRuns) {
      const output = [
        message('assistant', 'Done.', { toolInvocations: tools.map(invocation) }),
      ];
      let result;
      try {
        const run = await scorer.run(
          createAgentTestRun({ inputMessages: [message('user', 'Do it')], output, runId: 'fixture-run' }),
        );
        result = { score: run.score ?? null, preprocessStepResult: plain(run.preprocessStepResult) };
      } catch (error) {
        result = { error: String(error?.message ?? error) };
      }
      cases.push({ options, tools, ...result });
    }
  }
  scorers['tool-call-accuracy'] = cases;
}

// Trajectories: steps of tool calls compared with an expected path.
const step = (name, extra = {}) => ({ stepType: 'tool_call', name, ...extra });
const trajectories = [
  [],
  ['search', 'summarize'],
  ['summarize', 'search'],
  ['search', 'fetch', 'summarize'],
  ['search', 'search', 'summarize'],
  ['search'],
  ['other'],
];
const expectations = [
  { expected: ['search', 'summarize'], comparisonOptions: { ordering: 'relaxed', allowRepeatedSteps: true } },
  { expected: ['search', 'summarize'], comparisonOptions: { ordering: 'strict', allowRepeatedSteps: true } },
  { expected: ['search', 'summarize'], comparisonOptions: { ordering: 'unordered', allowRepeatedSteps: true } },
  { expected: ['search', 'summarize'], comparisonOptions: { ordering: 'relaxed', allowRepeatedSteps: false } },
  { expected: ['search', 'summarize'], comparisonOptions: { ordering: 'strict', allowRepeatedSteps: false } },
];
{
  const cases = [];
  for (const { expected, comparisonOptions } of expectations) {
    const scorer = createTrajectoryAccuracyScorerCode({
      expectedTrajectory: { steps: expected.map((n) => step(n)) },
      comparisonOptions,
    });
    for (const names of trajectories) {
      const run = createTrajectoryTestRun({
        inputMessages: [message('user', 'Find and summarize')],
        trajectory: { steps: names.map((n) => step(n)) },
        runId: 'fixture-run',
      });
      let result;
      try {
        const r = await scorer.run(run);
        result = { score: r.score ?? null, comparison: plain(r.preprocessStepResult?.comparison) };
      } catch (error) {
        result = { error: String(error?.message ?? error) };
      }
      cases.push({ expected, comparisonOptions, actual: names, ...result });
    }
  }
  scorers['trajectory-accuracy'] = cases;
}

// Live sampling: sha256 of the trace id (or run id), its first 6 bytes big-endian over 2^48.
const sampling = ['0af7651916cd43dd8448eb211c80319c', 'run-1', 'a', '', '4bf92f3577b34da6a3ce929d0e0e4736'].map(
  (id) => {
    const digest = createHash('sha256').update(id).digest();
    return { id, fraction: digest.readUIntBE(0, 6) / 2 ** 48 };
  },
);

const pkg = JSON.parse(
  (await import('node:fs')).readFileSync(join(here, 'node_modules', '@mastra', 'evals', 'package.json'), 'utf8'),
);
mkdirSync(dirname(out), { recursive: true });
writeFileSync(
  out,
  `${JSON.stringify({ mastraEvals: pkg.version, scorers, sampling }, null, 1)}\n`,
);
console.log(`wrote ${out}`);
