// Unit tests of how the Studio folds a workflow run's events
// (crates/kestrel-server/studio/workflow-runs.js), with node's test runner:
// `node --test workflow-runs.test.mjs`. No browser needed.

import { readFile } from "node:fs/promises";
import { test } from "node:test";
import assert from "node:assert/strict";

// workflow-runs.js imports nothing: load it as a module whatever the folder's package type.
const source = await readFile(new URL("../crates/kestrel-server/studio/workflow-runs.js", import.meta.url), "utf8");
const { fold, suspendedItems, suspendedPath, unwrapSchema } = await import(`data:text/javascript,${encodeURIComponent(source)}`);

const ev = (type, payload, from = "WORKFLOW") => ({ type, runId: "r1", from, payload });
const fresh = () => ({ status: "running", steps: {} });

test("steps go running, then done or failed, and the run ends as the finish says", () => {
  const run = fresh();
  fold(run, ev("workflow-start", { workflowId: "w" }));
  fold(run, ev("workflow-step-start", { id: "a", stepName: "a", payload: { v: 1 }, status: "running" }));
  assert.equal(run.steps.a.status, "running");
  assert.deepEqual(run.steps.a.payload, { v: 1 });
  fold(run, ev("workflow-step-result", { id: "a", stepName: "a", status: "success", output: { v: 2 } }));
  assert.equal(run.steps.a.status, "success");
  assert.deepEqual(run.steps.a.output, { v: 2 });
  assert.deepEqual(run.steps.a.payload, { v: 1 }, "the start's input is kept");
  fold(run, ev("workflow-step-start", { id: "b", status: "running" }));
  fold(run, ev("workflow-step-result", { id: "b", status: "failed", error: { message: "no" } }));
  assert.equal(run.steps.b.status, "failed");
  fold(run, ev("workflow-finish", { workflowStatus: "failed", metadata: { error: { message: "no" } } }));
  assert.equal(run.status, "failed");
  assert.equal(run.error.message, "no");
});

test("a nested step keeps its prefixed id, and a suspension names its path", () => {
  const run = fresh();
  fold(run, ev("workflow-step-start", { id: "checks", status: "running" }));
  fold(run, ev("workflow-step-start", { id: "checks.check", status: "running" }));
  fold(run, ev("workflow-step-suspended", { id: "checks.check", suspendPayload: { q: "sure?" } }));
  const meta = { runId: "r1", path: ["check"] };
  fold(run, ev("workflow-step-suspended", { id: "checks", suspendPayload: { q: "sure?", __workflow_meta: meta } }));
  fold(run, ev("workflow-finish", { workflowStatus: "suspended", metadata: {} }));
  assert.equal(run.status, "suspended");
  assert.equal(run.steps["checks.check"].status, "suspended");
  assert.deepEqual(suspendedPath("checks", run.steps.checks), ["checks", "check"]);
  assert.deepEqual(suspendedPath("ask", { suspendPayload: { q: 1 } }), ["ask"]);
});

test("an agent step's text grows as it streams; sleeps, foreach progress and a cancel show", () => {
  const run = fresh();
  fold(run, ev("workflow-step-start", { id: "research", status: "running" }));
  for (const text of ["kest", "rels"]) {
    fold(run, ev("workflow-step-output", { stepName: "research", output: { type: "text-delta", payload: { id: "t", text } } }, "USER"));
  }
  assert.equal(run.steps.research.live, "kestrels");
  fold(run, ev("workflow-step-waiting", { id: "sleep_1", status: "waiting" }));
  assert.equal(run.steps.sleep_1.status, "waiting");
  fold(run, ev("workflow-step-start", { id: "each", status: "running" }));
  fold(run, ev("workflow-step-progress", { id: "each", completedCount: 2, totalCount: 5 }));
  assert.equal(run.steps.each.progress, "2/5");
  fold(run, ev("workflow-canceled", {}));
  assert.equal(run.status, "canceled");
  fold(run, ev("workflow-finish", { workflowStatus: "success", finalWorkflowResult: { ok: 1 }, metadata: {} }));
  assert.deepEqual(run.result, { ok: 1 });
});

test("a suspended foreach lists its waiting items", () => {
  const items = [{ index: 1, payload: { check: 1 } }, { index: 3, payload: { check: 3 } }];
  assert.deepEqual(suspendedItems({ suspendPayload: { check: 1, __foreach_meta: { items } } }), items);
  assert.equal(suspendedItems({ suspendPayload: { q: 1 } }), null);
});

test("schemas come as JSON strings of {json: schema}", () => {
  assert.deepEqual(unwrapSchema('{"json":{"type":"object"}}'), { type: "object" });
  assert.deepEqual(unwrapSchema({ type: "string" }), { type: "string" });
  assert.equal(unwrapSchema("not json"), null);
  assert.equal(unwrapSchema(null), null);
});
