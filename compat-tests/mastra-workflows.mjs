// A front end that drives Mastra workflows through @mastra/client-js, unchanged, against a
// Kestrel server. Usage: node mastra-workflows.mjs http://127.0.0.1:PORT
//
// The server (crates/kestrel-server/tests/it/js_clients.rs) has the workflows of
// crates/kestrel-server/tests/it/workflows.rs: `numbers` (s1: v + 1, then a: v × 2 and
// b: v × 3 in parallel, then sum), `gate` (`ask` suspends until resumed with {approved},
// then `after`), `slow` (`wait` waits for its abort signal) and `wrapped` (`lift`: v + 100,
// then the nested workflow `checks`, whose `check` suspends until resumed with {approved})
// and `batch` (a foreach whose odd items suspend until resumed with {approved}).
import assert from 'node:assert/strict';
import { runChecks } from './checks.mjs';
import { MastraClient } from '@mastra/client-js';

const baseUrl = process.argv[2];
if (!baseUrl) {
  console.error('usage: node mastra-workflows.mjs BASE_URL');
  process.exit(2);
}
const client = new MastraClient({ baseUrl, retries: 0 });

async function readAll(stream) {
  const records = [];
  for await (const record of stream) records.push(record);
  return records;
}

async function until(check) {
  for (let i = 0; i < 200; i += 1) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error('timed out waiting');
}

const checks = {
  async 'listWorkflows, details and getSchema'() {
    const workflows = await client.listWorkflows();
    assert.deepEqual(Object.keys(workflows).sort(), ['batch', 'gate', 'numbers', 'slow', 'wrapped']);
    const details = await client.getWorkflow('numbers').details();
    assert.equal(details.name, 'numbers');
    assert.deepEqual(Object.keys(details.steps).sort(), ['a', 'b', 's1', 'sum']);
    assert.equal(details.stepGraph[1].type, 'parallel');
    const { inputSchema } = await client.getWorkflow('numbers').getSchema();
    assert.deepEqual(inputSchema.required, ['v']);
    const partial = await client.listWorkflows(undefined, true);
    assert.equal(partial.numbers.stepCount, 4);
  },

  async 'createRun then startAsync'() {
    const run = await client.getWorkflow('numbers').createRun();
    assert.equal(typeof run.runId, 'string');
    const result = await run.startAsync({ inputData: { v: 1 } });
    assert.equal(result.status, 'success');
    assert.deepEqual(result.result, { v: 10 });
    assert.deepEqual(result.steps.a.output, { v: 4 });
  },

  async 'stream: the record-separated events, ending in workflow-finish'() {
    const run = await client.getWorkflow('numbers').createRun({ runId: 'client-stream-1' });
    assert.equal(run.runId, 'client-stream-1');
    const records = await readAll(await run.stream({ inputData: { v: 2 } }));
    const types = records.map((r) => r.type);
    assert.equal(types[0], 'workflow-start');
    assert.equal(types.at(-1), 'workflow-finish');
    assert.equal(types.filter((t) => t === 'workflow-step-result').length, 4);
    assert.equal(records.at(-1).payload.workflowStatus, 'success');
    const stepNames = records
      .filter((r) => r.type === 'workflow-step-start')
      .map((r) => r.payload.stepName);
    assert.deepEqual(stepNames, ['s1', 'a', 'b', 'sum']);
    for (const record of records) assert.equal(record.runId, 'client-stream-1');
  },

  async 'suspend, then resumeAsync; a second resume is refused'() {
    const run = await client.getWorkflow('gate').createRun();
    const suspended = await run.startAsync({ inputData: { v: 5 } });
    assert.equal(suspended.status, 'suspended');
    assert.deepEqual(suspended.suspended, [['ask']]);
    assert.deepEqual(suspended.suspendPayload.ask, { question: 'approve?' });
    await assert.rejects(
      () => run.resumeAsync({ step: 'ask', resumeData: { approved: 'yes' } }),
      /422/,
    );
    const resumed = await run.resumeAsync({ step: 'ask', resumeData: { approved: true } });
    assert.equal(resumed.status, 'success');
    assert.deepEqual(resumed.result, { done: true, v: 5 });
    await assert.rejects(() => run.resumeAsync({ step: 'ask', resumeData: { approved: true } }), /409/);
  },

  async 'resumeStream streams the rest of a suspended run'() {
    const run = await client.getWorkflow('gate').createRun();
    const records = await readAll(await run.stream({ inputData: { v: 3 } }));
    assert.equal(records.at(-1).payload.workflowStatus, 'suspended');
    assert.ok(records.some((r) => r.type === 'workflow-step-suspended'));
    const rest = await readAll(await run.resumeStream({ step: 'ask', resumeData: { approved: false } }));
    assert.equal(rest[0].type, 'workflow-start');
    assert.equal(rest.at(-1).payload.workflowStatus, 'success');
  },

  async 'start and resumeNoWait do not wait; runById reads the run'() {
    const workflow = client.getWorkflow('gate');
    const run = await workflow.createRun();
    const started = await run.start({ inputData: { v: 9 } });
    assert.equal(started.message, 'Workflow run started');
    await until(async () => (await workflow.runById(run.runId)).status === 'suspended');
    const { runId } = await run.resumeNoWait({ resumeData: { approved: true } });
    assert.equal(runId, run.runId);
    await until(async () => (await workflow.runById(run.runId)).status === 'success');
    const read = await workflow.runById(run.runId, { fields: ['result', 'steps'] });
    assert.deepEqual(read.result, { done: true, v: 9 });
    assert.deepEqual(read.steps.ask.resumePayload, { approved: true });
    assert.equal(read.payload, undefined);
  },

  async 'cancel a run in progress'() {
    const workflow = client.getWorkflow('slow');
    const run = await workflow.createRun();
    await run.start({ inputData: { v: 1 } });
    await until(async () => (await workflow.runById(run.runId)).status === 'running');
    const counts = await client.listWorkflowRunCounts();
    assert.deepEqual(counts.slow, { running: 1, suspended: 0 });
    const canceled = await run.cancel();
    assert.equal(canceled.message, 'Workflow run cancelled');
    await until(async () => (await workflow.runById(run.runId)).status === 'canceled');
  },

  async 'runs lists and deleteRunById deletes'() {
    const workflow = client.getWorkflow('numbers');
    const listed = await workflow.runs({ perPage: 1, page: 0 });
    assert.equal(listed.runs.length, 1);
    assert.ok(listed.total >= 2, `total ${listed.total}`);
    assert.equal(listed.runs[0].workflowName, 'numbers');
    const all = await workflow.runs({ status: 'success' });
    assert.equal(all.total, listed.total);
    const deleted = await workflow.deleteRunById('client-stream-1');
    assert.equal(deleted.message, 'Workflow run deleted');
    await assert.rejects(() => workflow.runById('client-stream-1'), /404/);
  },

  async 'a nested step is resumed by its path'() {
    const run = await client.getWorkflow('wrapped').createRun();
    const suspended = await run.startAsync({ inputData: { v: 1 } });
    assert.equal(suspended.status, 'suspended');
    assert.deepEqual(suspended.suspended, [['checks', 'check']]);
    const done = await run.resumeAsync({ step: ['checks', 'check'], resumeData: { approved: true } });
    assert.equal(done.status, 'success');
    assert.deepEqual(done.result, { v: 101, sure: true });
  },

  async 'a foreach item is resumed by forEachIndex'() {
    const run = await client.getWorkflow('batch').createRun();
    const suspended = await run.startAsync({ inputData: [1, 2] });
    assert.equal(suspended.status, 'suspended');
    const done = await run.resumeAsync({ step: 'item', forEachIndex: 0, resumeData: { approved: true } });
    assert.equal(done.status, 'success');
    assert.deepEqual(done.result, [10, 2]);
  },

  async 'timeTravelAsync runs a run again from a step'() {
    const run = await client.getWorkflow('numbers').createRun();
    await run.startAsync({ inputData: { v: 1 } });
    const again = await run.timeTravelAsync({ step: 'sum', inputData: { a: { v: 5 }, b: { v: 6 } } });
    assert.equal(again.status, 'success');
    assert.deepEqual(again.result, { v: 11 });
    assert.deepEqual(again.steps.s1.output, { v: 2 });
  },

  async 'errors carry the status'() {
    await assert.rejects(() => client.getWorkflow('ghost').details(), /404/);
    const run = await client.getWorkflow('numbers').createRun();
    await assert.rejects(() => run.startAsync({ inputData: { v: 'one' } }), /422/);
  },
};

await runChecks(checks);
