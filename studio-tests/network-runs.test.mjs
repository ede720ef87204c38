// Unit tests of how the Studio folds a network run's events into iterations
// (crates/kestrel-server/studio/network-runs.js), with node's test runner:
// `node --test network-runs.test.mjs`. No browser needed.

import { copyFile, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { test } from "node:test";
import assert from "node:assert/strict";

// network-runs.js imports runs.js and workflow-runs.js: load the three as modules from a
// folder of their own, whatever the Studio folder's package type.
const dir = await mkdtemp(join(tmpdir(), "kestrel-studio-"));
await writeFile(join(dir, "package.json"), '{"type": "module"}');
for (const file of ["runs.js", "workflow-runs.js", "network-runs.js", "render.js"]) {
  await copyFile(new URL(`../crates/kestrel-server/studio/${file}`, import.meta.url), join(dir, file));
}
const { NetworkRun } = await import(pathToFileURL(join(dir, "network-runs.js")).href);
// render.js draws with `document` only when called: its readers of stored threads run here.
const { networkItem, storedTurns } = await import(pathToFileURL(join(dir, "render.js")).href);

const NET = "net-1";
const ev = (type, payload) => ({ type, runId: NET, from: "NETWORK", payload });
const child = (type, runId, payload, from = "AGENT") => ({ type, runId, from, payload });

test("an agent iteration: the decision and its reason, the live text, the check, the finish", () => {
  const run = new NetworkRun("coordinator");
  run.apply(ev("routing-agent-start", { networkId: "coordinator", agentId: "routing-agent", runId: "s1", inputData: { task: "Greet", iteration: 0 } }));
  run.apply(ev("routing-agent-end", { task: "Greet", primitiveId: "helper", primitiveType: "agent", prompt: "say hi", selectionReason: "helper greets", iteration: 0 }));
  run.apply(ev("agent-execution-start", { agentId: "helper", runId: "sub-1", args: { iteration: 0 } }));
  run.apply(ev("agent-execution-event-text-start", child("text-start", "sub-1", { id: "t" })));
  run.apply(ev("agent-execution-event-text-delta", child("text-delta", "sub-1", { id: "t", text: "hi " })));
  run.apply(ev("agent-execution-event-text-delta", child("text-delta", "sub-1", { id: "t", text: "there" })));
  assert.equal(run.runId, NET);
  const [it] = run.iterations;
  assert.deepEqual(it.routing, { primitiveType: "agent", primitiveId: "helper", prompt: "say hi", selectionReason: "helper greets" });
  assert.equal(it.primitive.kind, "agent");
  assert.equal(it.primitive.run.text, "hi there", "the sub-agent's text, as it comes");
  run.apply(ev("agent-execution-end", { agentId: "helper", result: "hi there", iteration: 0, runId: "sub-1" }));
  run.apply(ev("network-validation-start", { runId: NET, iteration: 0, checksCount: 1 }));
  run.apply(ev("routing-agent-text-start", { runId: "c1" }));
  run.apply(ev("routing-agent-text-delta", { text: "Hi there!" }));
  run.apply(ev("network-validation-end", { runId: NET, iteration: 0, passed: true, reason: "greeted", results: [{ scorerName: "Default LLM Completion", passed: true, score: 1 }] }));
  run.apply(ev("network-execution-event-finish", { isComplete: true, completionReason: "greeted", result: "Hi there!", iteration: 0, usage: { totalTokens: 12 } }));
  assert.equal(it.primitive.status, "done");
  assert.equal(it.primitive.result, "hi there");
  assert.equal(it.finalText, "Hi there!");
  assert.deepEqual([it.validation.passed, it.validation.reason], [true, "greeted"]);
  assert.equal(run.status, "done");
  assert.equal(run.result, "Hi there!");
  assert.equal(run.usage.totalTokens, 12);
});

test("a workflow iteration folds its steps; a tool iteration keeps input and result; none ends it", () => {
  const run = new NetworkRun("coordinator");
  run.apply(ev("routing-agent-start", { inputData: { iteration: 0 } }));
  run.apply(ev("routing-agent-end", { primitiveId: "weather-report", primitiveType: "workflow", prompt: '{"city":"Lisbon"}', selectionReason: "a workflow", iteration: 0 }));
  run.apply(ev("workflow-execution-start", { workflowId: "weather-report", runId: "wf-1", args: { iteration: 0 } }));
  run.apply(ev("workflow-execution-event-workflow-step-start", child("workflow-step-start", "wf-1", { id: "forecast", status: "running" }, "WORKFLOW")));
  run.apply(ev("workflow-execution-event-workflow-step-result", child("workflow-step-result", "wf-1", { id: "forecast", status: "success", output: { sky: "sunny" } }, "WORKFLOW")));
  run.apply(ev("workflow-execution-end", { primitiveId: "weather-report", result: { status: "success", result: { report: "sunny" } }, iteration: 0 }));
  run.apply(ev("network-validation-end", { iteration: 0, passed: false, reason: "not shouted" }));
  const wf = run.iterations[0].primitive;
  assert.equal(wf.workflow.steps.forecast.status, "success");
  assert.deepEqual(wf.result, { report: "sunny" });
  assert.equal(run.iterations[0].validation.passed, false);

  run.apply(ev("routing-agent-start", { inputData: { iteration: 1 } }));
  run.apply(ev("routing-agent-end", { primitiveId: "shout", primitiveType: "tool", prompt: '{"text":"hi"}', selectionReason: "a tool", iteration: 1 }));
  run.apply(ev("tool-execution-start", { args: { iteration: 1, args: { text: "hi" }, toolName: "shout", toolCallId: "c1" }, runId: NET }));
  run.apply(ev("tool-execution-end", { primitiveId: "shout", result: "HI", iteration: 1, toolCallId: "c1", toolName: "shout" }));
  assert.deepEqual(run.iterations[1].primitive.input, { text: "hi" });
  assert.equal(run.iterations[1].primitive.result, "HI");

  run.apply(ev("routing-agent-start", { inputData: { iteration: 2 } }));
  run.apply(ev("routing-agent-end", { primitiveId: "none", primitiveType: "none", selectionReason: "done", iteration: 2 }));
  run.apply(ev("network-execution-event-step-finish", { result: "done", isComplete: true, iteration: 2, runId: NET }));
  run.apply(ev("network-execution-event-finish", { isComplete: true, completionReason: "done", result: "HI", iteration: 2 }));
  assert.equal(run.iterations.length, 3);
  assert.equal(run.iterations[2].primitive.kind, "none");
  assert.equal(run.status, "done");
});

test("an approval makes the run wait; the decision's stream goes on in the same iteration", () => {
  const run = new NetworkRun("gatekeeper");
  run.apply(ev("routing-agent-start", { inputData: { iteration: 0 } }));
  run.apply(ev("routing-agent-end", { primitiveId: "unlock", primitiveType: "tool", prompt: "{}", selectionReason: "unlocks", iteration: 0 }));
  run.apply(ev("tool-execution-start", { args: { iteration: 0, args: {}, toolName: "unlock", toolCallId: "c1" }, runId: NET }));
  run.apply(ev("tool-execution-approval", { toolName: "unlock", toolCallId: "c1", args: {}, runId: NET, resumeSchema: "{}" }));
  assert.equal(run.status, "waiting");
  assert.equal(run.waiting.kind, "approval");
  assert.equal(run.waiting.primitiveType, "tool");
  assert.equal(run.iterations[0].primitive.status, "waiting");
  // The approval's stream: the tool starts again, ends, and the network finishes.
  run.apply(ev("tool-execution-start", { args: { iteration: 0, args: {}, toolName: "unlock", toolCallId: "c1" }, runId: NET }));
  assert.equal(run.status, "running");
  assert.equal(run.waiting, null);
  run.apply(ev("tool-execution-end", { result: "unlocked", iteration: 0 }));
  run.apply(ev("network-execution-event-finish", { isComplete: false, completionReason: "Max iterations reached: 1", result: "unlocked", iteration: 0 }));
  assert.equal(run.iterations.length, 1);
  assert.equal(run.status, "max");
});

test("an abort, an error and a stream that ends early", () => {
  const aborted = new NetworkRun("a");
  aborted.apply(ev("routing-agent-start", { inputData: { iteration: 0 } }));
  aborted.apply(ev("agent-execution-start", { agentId: "helper", runId: "s", args: { iteration: 0 } }));
  aborted.apply(ev("agent-execution-abort", { primitiveType: "agent", primitiveId: "helper" }));
  aborted.apply(ev("network-execution-event-finish", { isComplete: true, result: "Aborted", iteration: 0 }));
  assert.equal(aborted.status, "aborted", "the finish of an aborted run keeps it stopped");
  const failed = new NetworkRun("a");
  failed.apply(ev("error", { error: "the routing agent failed", kind: "network" }));
  assert.equal(failed.status, "error");
  assert.equal(failed.error, "the routing agent failed");
  const cut = new NetworkRun("a");
  cut.apply(ev("routing-agent-start", { inputData: { iteration: 0 } }));
  cut.ended();
  assert.equal(cut.status, "error");
});

test("a network's thread read back: its iterations and checks, not raw JSON", () => {
  const record = { isNetwork: true, primitiveType: "agent", primitiveId: "research", selectionReason: "facts first", input: "facts", finalResult: { text: "Kestrels hover." } };
  const text = (t) => ({ format: 2, parts: [{ type: "text", text: t }] });
  const turns = storedTurns([
    { id: "u", role: "user", content: text("Tell me about kestrels") },
    { id: "a1", role: "assistant", content: text(JSON.stringify(record)) },
    { id: "a2", role: "assistant", content: text("#### Completion Check Results\n\nOverall: ✅ COMPLETE\nDuration: 3ms") },
    { id: "a3", role: "assistant", content: text("Kestrels hover.") },
  ]);
  assert.equal(turns.length, 2);
  const kinds = turns[1].items.map((i) => i.kind);
  assert.deepEqual(kinds, ["network-record", "network-check", "text"]);
  assert.equal(turns[1].items[0].primitiveId, "research");
  assert.equal(turns[1].items[0].finalResult.text, "Kestrels hover.");
  assert.equal(turns[1].items[1].passed, true);
  assert.equal(networkItem('{"isNetwork": false}'), null);
  // A tool call holds its result (Mastra's tool-invocation), in the turn that made it.
  const tool = storedTurns([
    { id: "u", role: "user", content: text("Weather?") },
    { id: "a", role: "assistant", content: { format: 2, parts: [{ type: "tool-invocation", toolInvocation: { state: "result", toolCallId: "c1", toolName: "weather", args: { city: "Oslo" }, result: { sky: "clear" } } }] } },
    { id: "b", role: "assistant", content: { format: 2, parts: [{ type: "tool-invocation", toolInvocation: { state: "result", toolCallId: "c2", toolName: "weather", args: {}, result: "no such city", isError: true } }] } },
    { id: "c", role: "assistant", content: text("Clear in Oslo.") },
  ]);
  assert.equal(tool.length, 2);
  assert.deepEqual(tool[1].calls.map((c) => [c.name, c.status]), [["weather", "done"], ["weather", "error"]]);
  assert.deepEqual(tool[1].calls[0].result, { sky: "clear" });
  assert.equal(tool[1].calls[1].error, "no such city");
  assert.equal(networkItem("{not json"), null);
  assert.equal(networkItem("plain text"), null);
});
