// A front end written for Mastra's HTTP API, unchanged, against a Kestrel server: every call
// goes through @mastra/client-js. Usage: node mastra-client.mjs http://127.0.0.1:PORT
//
// The server (crates/kestrel-server/tests/it/js_clients.rs) has `echo` (replies "echo: <last
// message>", with memory) and `mailer` (calls the approval-gated `send_email`, then says
// "Done.").
import assert from 'node:assert/strict';
import { runChecks } from './checks.mjs';
import { MastraClient } from '@mastra/client-js';

const baseUrl = process.argv[2];
if (!baseUrl) {
  console.error('usage: node mastra-client.mjs BASE_URL');
  process.exit(2);
}
const client = new MastraClient({ baseUrl, retries: 0 });

async function chunksOf(response) {
  const chunks = [];
  await response.processDataStream({ onChunk: async (chunk) => { chunks.push(chunk); } });
  return chunks;
}

const checks = {
  async 'listAgents and details'() {
    const agents = await client.listAgents();
    assert.deepEqual(Object.keys(agents).sort(), ['asker', 'echo', 'mailer']);
    const mailer = await client.getAgent('mailer').details();
    assert.equal(mailer.id, 'mailer');
    assert.ok(mailer.tools.send_email, 'the mailer lists its tool');
  },

  async 'generate'() {
    const result = await client.getAgent('echo').generate('hello');
    assert.equal(result.text, 'echo: hello');
  },

  async 'stream with processDataStream'() {
    const response = await client.getAgent('echo').stream('streaming please');
    const chunks = await chunksOf(response);
    const types = chunks.map((c) => c.type);
    assert.equal(types[0], 'start');
    assert.equal(types.at(-1), 'finish');
    const text = chunks.filter((c) => c.type === 'text-delta').map((c) => c.payload.text).join('');
    assert.equal(text, 'echo: streaming please');
    for (const chunk of chunks) assert.equal(typeof chunk.runId, 'string');
  },

  async 'approval: stream, list suspended runs, approve'() {
    const mailer = client.getAgent('mailer');
    const response = await mailer.stream('mail bob', {
      memory: { thread: 'mail-thread', resource: 'alice' },
    });
    const chunks = await chunksOf(response);
    const approval = chunks.find((c) => c.type === 'tool-call-approval');
    assert.ok(approval, `an approval chunk among ${chunks.map((c) => c.type)}`);
    assert.equal(approval.payload.toolName, 'send_email');
    const suspended = await mailer.listSuspendedRuns({ threadId: 'mail-thread' });
    assert.equal(suspended.runs.length, 1);
    assert.equal(suspended.runs[0].runId, approval.runId);
    const continued = await mailer.approveToolCall({
      runId: approval.runId,
      toolCallId: approval.payload.toolCallId,
    });
    const after = await chunksOf(continued);
    const result = after.find((c) => c.type === 'tool-result');
    assert.ok(result, `a tool result among ${after.map((c) => c.type)}`);
    assert.equal(result.payload.result, 'sent to bob@example.com');
    const text = after.filter((c) => c.type === 'text-delta').map((c) => c.payload.text).join('');
    assert.equal(text, 'Done.');
    const none = await mailer.listSuspendedRuns({ threadId: 'mail-thread' });
    assert.equal(none.runs.length, 0);
  },

  async 'decline with the generate form'() {
    const mailer = client.getAgent('mailer');
    const first = await mailer.generate('mail bob again', {
      memory: { thread: 'decline-thread', resource: 'alice' },
    });
    assert.equal(first.suspended.length, 1, JSON.stringify(first));
    const declined = await mailer.declineToolCallGenerate({
      runId: first.runId,
      toolCallId: first.suspended[0].toolCallId,
    });
    assert.equal(declined.text, 'Done.');
  },

  async 'memory threads: create, get, list, update, messages, delete'() {
    const created = await client.createMemoryThread({
      agentId: 'echo',
      resourceId: 'carol',
      threadId: 'carol-1',
      title: 'First',
      metadata: { topic: 'birds' },
    });
    assert.equal(created.id, 'carol-1');
    await client.getAgent('echo').generate('remember kestrels', {
      memory: { thread: 'carol-1', resource: 'carol' },
    });
    const thread = client.getMemoryThread({ threadId: 'carol-1', agentId: 'echo' });
    const fetched = await thread.get();
    assert.equal(fetched.title, 'First');
    assert.equal(fetched.resourceId, 'carol');
    const listed = await client.listMemoryThreads({
      resourceId: 'carol',
      agentId: 'echo',
      page: 0,
      perPage: 10,
      orderBy: { field: 'updatedAt', direction: 'DESC' },
    });
    assert.equal(listed.total, 1);
    assert.equal(listed.threads[0].id, 'carol-1');
    const updated = await thread.update({ title: 'Kestrels', metadata: { topic: 'raptors' } });
    assert.equal(updated.title, 'Kestrels');
    const { messages, uiMessages } = await thread.listMessages();
    assert.deepEqual(messages.map((m) => m.role), ['user', 'assistant']);
    // MastraDBMessage: the parts are in `content`, format 2.
    assert.deepEqual(messages.map((m) => m.content.format), [2, 2]);
    assert.equal(messages[0].content.parts[0].type, 'text');
    assert.equal(typeof messages[1].content.parts[0].text, 'string');
    assert.ok(Array.isArray(uiMessages), 'uiMessages is an array');
    assert.deepEqual(uiMessages.map((m) => m.role), ['user', 'assistant']);
    const listedMessages = await client.listThreadMessages('carol-1', { agentId: 'echo' });
    assert.equal(listedMessages.messages.length, 2);
    await thread.delete();
    await assert.rejects(() => thread.get(), /404/);
  },

  async 'sendMessage with a fork, and queueMessage'() {
    const echo = client.getAgent('echo');
    await echo.generate('first words', { memory: { thread: 'dana-1', resource: 'dana' } });
    const sent = await echo.sendMessage({ message: 'a branch', resourceId: 'dana', threadId: 'dana-1', fork: true });
    assert.equal(sent.accepted, true);
    assert.notEqual(sent.threadId, 'dana-1');
    const texts = async (threadId, n) => {
      for (let i = 0; i < 200; i++) {
        const { messages } = await client.listThreadMessages(threadId, { agentId: 'echo' });
        if (messages.length >= n) return messages.map((m) => m.content.parts.map((p) => p.text).join(''));
        await new Promise((r) => setTimeout(r, 10));
      }
      throw new Error(`thread ${threadId} never held ${n} messages`);
    };
    assert.equal((await texts(sent.threadId, 4)).length, 4);
    const original = await client.listThreadMessages('dana-1', { agentId: 'echo' });
    assert.equal(original.messages.length, 2, 'the original thread is untouched');

    const queued = await echo.queueMessage({ message: 'later please', resourceId: 'dana', threadId: 'dana-1' });
    assert.equal(queued.accepted, true);
    assert.equal(typeof queued.runId, 'string');
    assert.equal((await texts('dana-1', 4)).length, 4);
  },

  async 'memory status'() {
    const status = await client.getMemoryStatus('echo');
    assert.equal(status.result, true);
  },

  async 'errors carry the status and the JSON error'() {
    await assert.rejects(() => client.getAgent('ghost').details(), /404/);
  },
};

await runChecks(checks);
