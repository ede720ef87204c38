// Unit tests of the Studio's event folding (crates/kestrel-server/studio/runs.js), with node's
// test runner: `node --test runs.test.mjs`. No browser needed.

import { readFile } from "node:fs/promises";
import { test } from "node:test";
import assert from "node:assert/strict";

// runs.js imports nothing: load it as a module whatever the folder's package type.
const source = await readFile(new URL("../crates/kestrel-server/studio/runs.js", import.meta.url), "utf8");
const { Run, delegatedAgent, inline, totalTokens } = await import(`data:text/javascript,${encodeURIComponent(source)}`);

const ev = (type, runId, payload) => ({ type, runId, from: "AGENT", payload });
const nested = (parent, callId, agent, event) => ev("tool-output", parent, { toolCallId: callId, toolName: `agent-${agent}`, output: event });

test("text deltas become one text part and one timeline row", () => {
  const run = new Run("r1", "assistant");
  run.apply(ev("start", "r1", { id: "assistant", messageId: "m1" }));
  run.apply(ev("text-start", "r1", { id: "t1" }));
  for (const text of ["Hel", "lo", "!"]) run.apply(ev("text-delta", "r1", { id: "t1", text }));
  run.apply(ev("finish", "r1", { stepResult: { reason: "stop" }, output: { text: "Hello!", usage: { inputTokens: 3, outputTokens: 2 } } }));
  assert.equal(run.text, "Hello!");
  assert.equal(run.status, "done");
  const rows = run.timeline.filter((r) => r.kind === "text");
  assert.equal(rows.length, 1);
  assert.match(rows[0].text, /Hello!/);
  assert.equal(totalTokens(run.usage), 5);
});

test("a tool call goes from preparing to done, with its result", () => {
  const run = new Run("r1", "assistant");
  run.apply(ev("tool-call-input-streaming-start", "r1", { toolCallId: "c1", toolName: "get_weather" }));
  run.apply(ev("tool-call-delta", "r1", { toolCallId: "c1", toolName: "get_weather", argsTextDelta: '{"city":' }));
  assert.equal(run.calls.get("c1").status, "preparing");
  run.apply(ev("tool-call", "r1", { toolCallId: "c1", toolName: "get_weather", args: { city: "Oslo" } }));
  run.apply(ev("tool-result", "r1", { toolCallId: "c1", toolName: "get_weather", args: { city: "Oslo" }, result: { sky: "clear" }, isError: false }));
  const call = run.calls.get("c1");
  assert.equal(call.status, "done");
  assert.deepEqual(call.result, { sky: "clear" });
  assert.ok(run.timeline.some((r) => r.text === "Called get_weather(city: Oslo)"));
});

test("a sub-agent's events fill a child run under the delegation", () => {
  const run = new Run("p", "supervisor");
  run.apply(ev("tool-call", "p", { toolCallId: "d1", toolName: "agent-research", args: { prompt: "Facts" } }));
  run.apply(nested("p", "d1", "research", ev("start", "c", { id: "research", messageId: "m" })));
  run.apply(nested("p", "d1", "research", ev("text-delta", "c", { id: "t", text: "- voles" })));
  const child = run.calls.get("d1").delegation;
  assert.equal(child.agentId, "research");
  assert.equal(child.depth, 1);
  assert.equal(child.text, "- voles");
  assert.equal(child.status, "running");
  assert.deepEqual(run.delegations.map((c) => c.delegation.agentId), ["research"]);
  // The parent's timeline holds the child's rows, one level in.
  assert.ok(run.timeline.some((r) => r.depth === 1 && r.agent === "research"));
  run.apply(ev("tool-result", "p", { toolCallId: "d1", toolName: "agent-research", args: {}, result: "- voles", isError: false }));
  assert.equal(child.status, "done");
});

test("an approval inside a sub-agent is decided through the top run", () => {
  const run = new Run("p", "supervisor");
  run.apply(ev("tool-call", "p", { toolCallId: "d1", toolName: "agent-writing", args: { prompt: "Publish" } }));
  run.apply(nested("p", "d1", "writing", ev("tool-call", "c", { toolCallId: "x1", toolName: "publish", args: { title: "T" } })));
  run.apply(nested("p", "d1", "writing", ev("tool-call-approval", "c", { toolCallId: "x1", toolName: "publish", args: { title: "T" }, resumeSchema: "{}", fingerprint: "f" })));
  const via = [{ toolCallId: "d1", agentId: "writing", runId: "c" }];
  run.apply(ev("tool-call-approval", "p", { toolCallId: "x1", toolName: "publish", args: { title: "T" }, resumeSchema: "{}", fingerprint: "f", via }));
  run.ended();
  assert.equal(run.status, "waiting");
  const decision = run.decisions.get("x1");
  assert.equal(decision.runId, "p", "decided with the top run's id");
  assert.deepEqual(decision.via, via);
  assert.equal(run.openDecisions.length, 1);
  assert.equal(run.findCall("x1").status, "approval");
  assert.equal(run.calls.get("d1").delegation.decisions.size, 0, "only the top run offers decisions");

  run.markDecided("x1", "approved");
  assert.equal(run.findCall("x1").decided, "approved");
  assert.equal(run.status, "running");
  run.apply(nested("p", "d1", "writing", ev("tool-result", "c", { toolCallId: "x1", toolName: "publish", args: {}, result: "ok", isError: false })));
  assert.equal(run.openDecisions.length, 0, "the call's result closes the decision");
});

test("a suspension keeps its question and resume schema", () => {
  const run = new Run("r", "assistant");
  run.apply(ev("tool-call", "r", { toolCallId: "b1", toolName: "book_table", args: { guests: 2 } }));
  run.apply(ev("tool-call-suspended", "r", { toolCallId: "b1", toolName: "book_table", args: { guests: 2 }, suspendPayload: { question: "Which time?" }, resumeSchema: '{"type":"object"}', fingerprint: "f" }));
  const d = run.decisions.get("b1");
  assert.equal(d.kind, "resume");
  assert.equal(d.resumeSchema, '{"type":"object"}');
  assert.ok(run.timeline.some((r) => r.text === "book_table asks: Which time?"));
});

test("calls cut short by the end of a run are not left running", () => {
  const run = new Run("r", "supervisor");
  run.apply(ev("tool-call-input-streaming-start", "r", { toolCallId: "d1", toolName: "agent-writing" }));
  run.apply(ev("finish", "r", { stepResult: { reason: "length" }, output: { text: "", usage: {} } }));
  assert.equal(run.calls.get("d1").status, "cut");
  assert.equal(run.status, "done");
});

test("errors and aborts end the run", () => {
  const failed = new Run("r", "a");
  failed.apply(ev("error", "r", { error: "the model provider failed", kind: "model" }));
  assert.equal(failed.status, "error");
  assert.equal(failed.error, "the model provider failed");
  const stopped = new Run("s", "a");
  stopped.apply(ev("abort", "s", {}));
  assert.equal(stopped.status, "aborted");
  const dropped = new Run("t", "a");
  dropped.ended();
  assert.equal(dropped.status, "error");
});

test("helpers", () => {
  assert.equal(delegatedAgent("agent-research"), "research");
  assert.equal(delegatedAgent("get_weather"), null);
  assert.equal(inline({ a: 1, b: "x" }), "a: 1, b: x");
  assert.equal(inline(["a", "b"]), "a, b");
});
