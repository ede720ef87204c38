// Traces through @mastra/client-js, unchanged, against a Kestrel server: `getTraces` (with
// pagination, an entity filter and a date range), `listTraces`, `getTrace`, `getSpan` and
// `deleteTraces` on the runs of a traced instance.
// Usage: node mastra-observability.mjs http://127.0.0.1:PORT
//
// The server (crates/kestrel-server/tests/it/js_clients.rs) traces, and has the agent
// `writing` on a scripted model.
import assert from 'node:assert/strict';
import { runChecks } from './checks.mjs';
import { MastraClient } from '@mastra/client-js';

const baseUrl = process.argv[2];
if (!baseUrl) {
  console.error('usage: node mastra-observability.mjs BASE_URL');
  process.exit(2);
}
const client = new MastraClient({ baseUrl, retries: 0 });
const traceIds = [];

const checks = {
  async 'runs answer their trace ids'() {
    for (const prompt of ['one', 'two']) {
      const answer = await client.getAgent('writing').generate(prompt);
      assert.match(answer.traceId, /^[0-9a-f]{32}$/);
      traceIds.push(answer.traceId);
    }
  },

  async 'getTraces pages and filters by entity'() {
    const page = await client.getTraces({
      pagination: { page: 0, perPage: 10 },
      filters: { entityId: 'writing', entityType: 'agent' },
    });
    assert.equal(page.pagination.total, 2);
    assert.equal(page.spans.length, 2);
    // Newest first.
    assert.deepEqual(page.spans.map((s) => s.traceId), [...traceIds].reverse());
    assert.equal(page.spans[0].spanType, 'agent_run');
    assert.equal(page.spans[0].status, 'success');
    const none = await client.getTraces({
      pagination: { page: 0, perPage: 10 },
      filters: { entityId: 'nobody', entityType: 'agent' },
    });
    assert.equal(none.pagination.total, 0);
  },

  async 'getTraces honours a date range'() {
    const future = new Date(Date.now() + 3600_000);
    const later = await client.getTraces({
      pagination: { page: 0, perPage: 10, dateRange: { start: future } },
    });
    assert.equal(later.pagination.total, 0);
    const past = new Date(Date.now() - 3600_000);
    const recent = await client.getTraces({
      pagination: { page: 0, perPage: 10, dateRange: { start: past, end: future } },
    });
    assert.equal(recent.pagination.total, 2);
  },

  async 'listTraces pages'() {
    const first = await client.listTraces({
      pagination: { page: 0, perPage: 1 },
      filters: { entityId: 'writing' },
    });
    assert.equal(first.spans.length, 1);
    assert.equal(first.pagination.hasMore, true);
  },

  async 'getTrace and getSpan read a trace'() {
    const trace = await client.getTrace(traceIds[0]);
    assert.equal(trace.traceId, traceIds[0]);
    const run = trace.spans.find((s) => s.spanType === 'agent_run');
    const model = trace.spans.find((s) => s.spanType === 'model_generation');
    assert.ok(run && model, JSON.stringify(trace.spans));
    assert.equal(model.parentSpanId, run.spanId);
    const span = await client.getSpan(traceIds[0], model.spanId);
    assert.equal(span.spanId, model.spanId);
    assert.equal(span.attributes.finishReason, 'stop');
  },

  async 'deleteTraces deletes'() {
    await client.deleteTraces({ traceIds: [traceIds[0]] });
    await assert.rejects(client.getTrace(traceIds[0]), /404/);
    const left = await client.getTraces({ pagination: { page: 0, perPage: 10 } });
    assert.equal(left.pagination.total, 1);
  },
};

await runChecks(checks);
