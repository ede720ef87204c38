// Mastra's agent networks through @mastra/client-js, unchanged, against a Kestrel server:
// `agent.network()`, then `approveNetworkToolCall` and `declineNetworkToolCall` with the
// network's run id. Usage: node mastra-networks.mjs http://127.0.0.1:PORT
//
// The server (crates/kestrel-server/tests/it/js_clients.rs, agents from networks.rs) has
// `coordinator` (routes to its sub-agent `greeter`, which says "hi there") and `gatekeeper`
// (routes to its tool `unlock`, which needs approval).
import assert from 'node:assert/strict';
import { runChecks } from './checks.mjs';
import { MastraClient } from '@mastra/client-js';

const baseUrl = process.argv[2];
if (!baseUrl) {
  console.error('usage: node mastra-networks.mjs BASE_URL');
  process.exit(2);
}
const client = new MastraClient({ baseUrl, retries: 0 });

async function chunksOf(response) {
  const chunks = [];
  await response.processDataStream({ onChunk: async (chunk) => { chunks.push(chunk); } });
  return chunks;
}

const checks = {
  async 'agent details: sub-agents as Mastra gives them, keyed by id'() {
    const coordinator = await client.getAgent('coordinator').details();
    const ids = Object.keys(coordinator.agents);
    assert.ok(ids.length > 0, JSON.stringify(coordinator.agents));
    for (const id of ids) {
      assert.equal(coordinator.agents[id].id, id);
      assert.equal(typeof coordinator.agents[id].name, 'string');
    }
  },

  async 'network: routing, the delegated agent, validation, finish'() {
    const response = await client.getAgent('coordinator').network('Greet me', {
      memory: { thread: 'net-1', resource: 'alice' },
      maxSteps: 3,
    });
    const chunks = await chunksOf(response);
    const types = chunks.map((c) => c.type);
    assert.equal(types[0], 'routing-agent-start', `${types}`);
    assert.equal(types.at(-1), 'network-execution-event-finish', `${types}`);
    const end = chunks.find((c) => c.type === 'routing-agent-end');
    assert.equal(end.payload.primitiveId, 'greeter');
    assert.equal(end.payload.primitiveType, 'agent');
    assert.equal(typeof end.payload.selectionReason, 'string');
    const text = chunks
      .filter((c) => c.type === 'agent-execution-event-text-delta')
      .map((c) => c.payload.payload.text)
      .join('');
    assert.equal(text, 'hi there');
    for (const chunk of chunks) {
      assert.equal(chunk.from, 'NETWORK');
      assert.equal(chunk.runId, chunks[0].runId);
    }
    const finish = chunks.at(-1).payload;
    assert.equal(finish.result, 'hi there');
    assert.equal(finish.isComplete, true);
    assert.equal(typeof finish.usage.totalTokens, 'number');
  },

  async 'approveNetworkToolCall continues the stopped network'() {
    const gatekeeper = client.getAgent('gatekeeper');
    const chunks = await chunksOf(await gatekeeper.network('Unlock the door', {
      memory: { thread: 'net-gate', resource: 'alice' },
    }));
    const approval = chunks.at(-1);
    assert.equal(approval.type, 'tool-execution-approval', `${chunks.map((c) => c.type)}`);
    assert.equal(approval.payload.toolName, 'unlock');
    const continued = await chunksOf(
      await gatekeeper.approveNetworkToolCall({ runId: approval.payload.runId }),
    );
    const types = continued.map((c) => c.type);
    const end = continued.find((c) => c.type === 'tool-execution-end');
    assert.ok(end, `a tool-execution-end among ${types}`);
    assert.equal(end.payload.result, 'unlocked');
    assert.equal(types.at(-1), 'network-execution-event-finish');
  },

  async 'declineNetworkToolCall: the tool never runs'() {
    const gatekeeper = client.getAgent('gatekeeper');
    const chunks = await chunksOf(await gatekeeper.network('Unlock the back door', {
      memory: { thread: 'net-gate-2', resource: 'alice' },
    }));
    const runId = chunks.at(-1).payload.runId;
    const continued = await chunksOf(
      await gatekeeper.declineNetworkToolCall({ runId, reason: 'not now' }),
    );
    const end = continued.find((c) => c.type === 'tool-execution-end');
    assert.equal(end.payload.result, 'Tool call was not approved by the user: not now');
  },
};

await runChecks(checks);
