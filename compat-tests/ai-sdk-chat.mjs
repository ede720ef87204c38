// `useChat` against a Kestrel server, without React: the AI SDK's own chat (AbstractChat, the
// class `@ai-sdk/react`'s useChat wraps) with its DefaultChatTransport, so every chunk goes
// through the SDK's schema and its message assembly. Both protocol versions: `ai` (6) and
// `ai-v5` (5). Usage: node ai-sdk-chat.mjs http://127.0.0.1:PORT
//
// The server (crates/kestrel-server/tests/it/js_clients.rs) has `echo`, `mailer` (calls the
// approval-gated `send_email`, then says "Done.") and `asker` (its `ask` tool suspends for
// `{answer}`, then it says "Thanks.").
import assert from 'node:assert/strict';
import { runChecks } from './checks.mjs';
import * as ai6 from 'ai';
import * as ai5 from 'ai-v5';

const baseUrl = process.argv[2];
if (!baseUrl) {
  console.error('usage: node ai-sdk-chat.mjs BASE_URL');
  process.exit(2);
}

/** The state useChat keeps in React, kept in a plain object. */
class State {
  constructor(messages = []) {
    this.messages = messages;
    this.status = 'ready';
    this.error = undefined;
  }
  pushMessage(message) { this.messages = this.messages.concat(message); }
  popMessage() { this.messages = this.messages.slice(0, -1); }
  replaceMessage(index, message) {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
  }
  snapshot(value) { return structuredClone(value); }
}

class Chat extends ai6.AbstractChat {
  constructor({ messages, ...init }) { super({ ...init, state: new State(messages) }); }
}
class Chat5 extends ai5.AbstractChat {
  constructor({ messages, ...init }) { super({ ...init, state: new State(messages) }); }
}

let chats = 0;
function newChat(sdk, agent, version, extra = {}) {
  const errors = [];
  const data = [];
  const Kind = sdk === ai6 ? Chat : Chat5;
  const chat = new Kind({
    id: `chat-${version}-${agent}-${++chats}`,
    transport: new sdk.DefaultChatTransport({
      api: `${baseUrl}/chat/${agent}`,
      body: { version, resourceId: 'web-user' },
    }),
    onError: (error) => errors.push(error),
    onData: (part) => data.push(part),
    ...extra,
  });
  return { chat, errors, data };
}

function assistant(chat) {
  const last = chat.lastMessage;
  assert.equal(last?.role, 'assistant', JSON.stringify(chat.messages));
  return last;
}

function text(message) {
  return message.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
}

function noErrors({ chat, errors }) {
  assert.deepEqual(errors.map(String), []);
  assert.equal(chat.status, 'ready');
}

/** The stored history, as useChat would be given it in `messages`. */
async function history(agent, chatId, version) {
  const response = await fetch(`${baseUrl}/chat/${agent}/${chatId}/messages?version=${version}`);
  assert.equal(response.status, 200, await response.clone().text());
  const { uiMessages } = await response.json();
  return uiMessages;
}

/** Whether the stored form of a message has exactly the parts the live stream built. */
function assertSameParts(stored, live) {
  assert.equal(stored.id, live.id, 'the stored message keeps the streamed id');
  // The same parts with the same fields and values, as JSON (key order aside; the SDK keeps
  // absent fields as `undefined`, which JSON drops).
  const json = (parts) => JSON.parse(JSON.stringify(parts));
  assert.deepEqual(json(stored.parts), json(live.parts),
    `stored parts:\n${JSON.stringify(stored.parts)}\nlive parts:\n${JSON.stringify(live.parts)}`);
}

const checks = {
  async 'v6: streamed text'() {
    const c = newChat(ai6, 'echo', 'v6');
    await c.chat.sendMessage({ text: 'hello' });
    noErrors(c);
    assert.equal(text(assistant(c.chat)), 'echo: hello');
  },

  async 'v5: streamed text'() {
    const c = newChat(ai5, 'echo', 'v5');
    await c.chat.sendMessage({ text: 'hello' });
    noErrors(c);
    assert.equal(text(assistant(c.chat)), 'echo: hello');
  },

  async 'v6: approval requested, approved in the parts, continued'() {
    const c = newChat(ai6, 'mailer', 'v6', {
      sendAutomaticallyWhen: ai6.lastAssistantMessageIsCompleteWithApprovalResponses,
    });
    await c.chat.sendMessage({ text: 'mail bob' });
    noErrors(c);
    const live = structuredClone(assistant(c.chat));
    const tool = live.parts.find((p) => p.type === 'tool-send_email');
    assert.ok(tool, JSON.stringify(live.parts));
    assert.equal(tool.state, 'approval-requested');
    assert.match(tool.approval.id, /::call-1$/);
    assert.ok(live.parts.some((p) => p.type === 'data-tool-call-approval'), 'the data part');

    // Reloading the page: the stored history shows the same parts.
    const stored = await history('mailer', c.chat.id, 'v6');
    assertSameParts(stored.at(-1), live);

    await c.chat.addToolApprovalResponse({ id: tool.approval.id, approved: true });
    // The automatic request runs in the background: wait for it.
    for (let i = 0; i < 100 && (c.chat.status !== 'ready' || text(assistant(c.chat)) !== 'Done.'); i++) {
      await new Promise((r) => setTimeout(r, 20));
    }
    noErrors(c);
    const done = assistant(c.chat);
    const output = done.parts.find((p) => p.type === 'tool-send_email');
    assert.equal(output.state, 'output-available', JSON.stringify(done.parts));
    assert.equal(output.output, 'sent to bob@example.com');
    assert.equal(text(done), 'Done.');
  },

  async 'v6: declined in the parts, the output is denied'() {
    const c = newChat(ai6, 'mailer', 'v6', {
      sendAutomaticallyWhen: ai6.lastAssistantMessageIsCompleteWithApprovalResponses,
    });
    await c.chat.sendMessage({ text: 'mail bob' });
    const tool = assistant(c.chat).parts.find((p) => p.type === 'tool-send_email');
    await c.chat.addToolApprovalResponse({ id: tool.approval.id, approved: false, reason: 'no' });
    for (let i = 0; i < 100 && (c.chat.status !== 'ready' || text(assistant(c.chat)) !== 'Done.'); i++) {
      await new Promise((r) => setTimeout(r, 20));
    }
    noErrors(c);
    const live = structuredClone(assistant(c.chat));
    const denied = live.parts.find((p) => p.type === 'tool-send_email');
    assert.equal(denied.state, 'output-denied', JSON.stringify(live.parts));
    // The stored history shows the same denial and the same text. What it cannot show
    // without the run's id (not stored with messages): the approval id, and the decided
    // call's data part, which the live stream re-sent with `resumed: true`.
    const stored = structuredClone((await history('mailer', c.chat.id, 'v6')).at(-1));
    await ai6.validateUIMessages({ messages: [stored] });
    const storedTool = stored.parts.find((p) => p.type === 'tool-send_email');
    assert.equal(storedTool.approval.id, 'call-1');
    delete storedTool.approval.id;
    delete denied.approval.id;
    const withoutData = (m) => ({ ...m, parts: m.parts.filter((p) => !p.type.startsWith('data-')) });
    assertSameParts(withoutData(stored), withoutData(live));
  },

  async 'v5: approval as a data part, answered with {runId, resumeData}'() {
    const c = newChat(ai5, 'mailer', 'v5');
    await c.chat.sendMessage({ text: 'mail bob' });
    noErrors(c);
    const live = structuredClone(assistant(c.chat));
    const approval = live.parts.find((p) => p.type === 'data-tool-call-approval');
    assert.ok(approval, JSON.stringify(live.parts));
    assert.equal(approval.data.toolName, 'send_email');
    const stored = await history('mailer', c.chat.id, 'v5');
    assertSameParts(stored.at(-1), live);
    // Seed 001's handleResume.
    await c.chat.sendMessage(undefined, {
      body: { runId: approval.data.runId, resumeData: { approved: true } },
    });
    noErrors(c);
    const done = assistant(c.chat);
    const output = done.parts.find((p) => p.type === 'tool-send_email');
    assert.equal(output?.state, 'output-available', JSON.stringify(done.parts));
    assert.equal(text(done), 'Done.');
  },

  async 'v5: a suspension, its history, and a resume'() {
    const c = newChat(ai5, 'asker', 'v5');
    await c.chat.sendMessage({ text: 'ask me' });
    noErrors(c);
    const live = structuredClone(assistant(c.chat));
    const suspended = live.parts.find((p) => p.type === 'data-tool-call-suspended');
    assert.ok(suspended, JSON.stringify(live.parts));
    assert.deepEqual(suspended.data.suspendPayload, { question: 'Which colour?' });
    const stored = await history('asker', c.chat.id, 'v5');
    assertSameParts(stored.at(-1), live);
    await c.chat.sendMessage(undefined, {
      body: { runId: suspended.data.runId, resumeData: { answer: 'green' } },
    });
    noErrors(c);
    const done = assistant(c.chat);
    const tool = done.parts.find((p) => p.type === 'tool-ask');
    assert.equal(tool?.state, 'output-available', JSON.stringify(done.parts));
    assert.deepEqual(tool.output, { topic: 'colour', answer: 'green' });
    assert.equal(text(done), 'Thanks.');
  },

  async 'v6: a reloaded chat continues from its stored history'() {
    const first = newChat(ai6, 'echo', 'v6');
    await first.chat.sendMessage({ text: 'one' });
    const stored = await history('echo', first.chat.id, 'v6');
    const validated = await ai6.validateUIMessages({ messages: stored });
    assert.deepEqual(validated.map((m) => m.role), ['user', 'assistant']);
    const again = newChat(ai6, 'echo', 'v6', { id: first.chat.id, messages: validated });
    await again.chat.sendMessage({ text: 'two' });
    noErrors(again);
    assert.equal(text(assistant(again.chat)), 'echo: two');
    const after = await history('echo', first.chat.id, 'v6');
    assert.deepEqual(after.map((m) => m.role), ['user', 'assistant', 'user', 'assistant']);
  },

  async 'v6: resumeStream with no running turn is a no-op'() {
    const c = newChat(ai6, 'echo', 'v6');
    await c.chat.resumeStream();
    noErrors(c);
    assert.deepEqual(c.chat.messages, []);
  },
};

await runChecks(checks);
