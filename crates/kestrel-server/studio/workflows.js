// Kestrel Studio's workflows: a workflow's graph (sequence, parallel arms, branches, loops,
// foreach, sleeps, nested workflows), a run form built from its input schema, each step lit
// with its status as the run streams, a suspended step's resume form from its resume schema,
// and the workflow's runs with each step's input and output.
//
// A run is read back from the server whenever it is opened (`#workflow/<id>/<run>`), so a
// reload, or a restart of the server, shows the same run and the same resume form.

import { api, query, records } from "./api.js";
import { schemaForm } from "./forms.js";
import { ago, h, value } from "./render.js";
import { fold, suspendedItems, suspendedPath, unwrapSchema } from "./workflow-runs.js";

/** A run's or a step's status, as its pill says it. */
const LABELS = {
  pending: "Not run",
  running: "Running…",
  success: "Done",
  bailed: "Ended the run",
  failed: "Failed",
  suspended: "Waiting for you",
  waiting: "Sleeping",
  canceled: "Canceled",
  skipped: "Skipped",
};

/** The pill class of each status (the page's colours). */
const TONE = {
  running: "running",
  waiting: "waiting",
  suspended: "waiting",
  success: "done",
  bailed: "done",
  failed: "error",
  canceled: "aborted",
  tripwire: "blocked",
};

const ws = {
  /** WorkflowInfo by id. */
  list: {},
  id: null,
  runId: null,
  /** The open run: {status, steps: {id: step}, result, error, input}. */
  run: null,
  runs: [],
  streaming: null,
  /** The step whose details are shown. */
  selected: null,
  /** The key of the resume forms drawn, so a redraw keeps what a person typed. */
  resumeKey: null,
  options: { resource: () => "studio", navigate: () => {} },
};

const $ = (id) => document.getElementById(id);

/** Wires the module to the page: `resource()` names the Studio's resource, `navigate(hash)`. */
export function mountWorkflows(options) {
  ws.options = { ...ws.options, ...options };
}

/** Loads the workflows and draws them in the sidebar; resolves to their ids. */
export async function loadWorkflows() {
  try {
    ws.list = (await api("/api/workflows")) || {};
  } catch (error) {
    ws.list = {};
    $("workflow-list").replaceChildren(h("li", { class: "empty error-text" }, `Workflows unavailable: ${error.message}`));
    return [];
  }
  drawWorkflowList();
  return Object.keys(ws.list);
}

/** Whether `id` is a workflow of the server. */
export function hasWorkflow(id) {
  return Boolean(ws.list[id]);
}

function drawWorkflowList() {
  const ids = Object.keys(ws.list);
  if (!ids.length) {
    $("workflow-list").replaceChildren(h("li", { class: "empty" }, "No workflows."));
    return;
  }
  $("workflow-list").replaceChildren(
    ...ids.map((id) => {
      const info = ws.list[id];
      const selected = id === ws.id;
      return h(
        "li",
        {},
        h(
          "button",
          {
            type: "button",
            class: `agent-item${selected ? " selected" : ""}`,
            "aria-current": selected ? "true" : null,
            "data-testid": `workflow-${id}`,
            onclick: () => ws.options.navigate(`#workflow/${encodeURIComponent(id)}`),
          },
          h("span", { class: "agent-name" }, info.name || id),
          info.description ? h("span", { class: "agent-desc" }, info.description) : null,
        ),
      );
    }),
  );
}

/** Shows workflow `id`, and its run `runId` when given (read back from the server). */
export async function openWorkflow(id, runId) {
  if (!ws.list[id]) return;
  if (ws.id !== id) {
    ws.selected = null;
    ws.runs = [];
  }
  ws.id = id;
  ws.runId = runId || null;
  ws.run = null;
  ws.resumeKey = null;
  drawWorkflowList();
  $("topbar-agent").replaceChildren(h("strong", {}, ws.list[id].name || id), h("span", { class: "muted" }, runId ? ` · run ${runId}` : " · workflow"));
  drawView();
  await Promise.all([runId ? loadRun() : null, loadRuns()]);
}

/** Forgets the open workflow (the page shows an agent). */
export function closeWorkflow() {
  ws.id = null;
  ws.runId = null;
  ws.run = null;
  drawWorkflowList();
}

async function loadRun() {
  const { id, runId } = ws;
  try {
    const stored = await api(`/api/workflows/${encodeURIComponent(id)}/runs/${encodeURIComponent(runId)}`);
    if (ws.id !== id || ws.runId !== runId || ws.streaming) return;
    ws.run = {
      status: stored.status,
      steps: Object.fromEntries(Object.entries(stored.steps || {}).map(([step, result]) => [step, { ...result }])),
      result: stored.result,
      error: stored.error,
      input: stored.payload,
    };
  } catch (error) {
    if (ws.id !== id || ws.runId !== runId) return;
    ws.run = { status: "failed", steps: {}, error: { message: `This run cannot be read: ${error.message}` } };
  }
  drawView();
}

async function loadRuns() {
  const id = ws.id;
  try {
    const page = await api(`/api/workflows/${encodeURIComponent(id)}/runs${query({ perPage: 20, resourceId: ws.options.resource() })}`);
    if (ws.id !== id) return;
    ws.runs = (page && page.runs) || [];
  } catch {
    ws.runs = [];
  }
  drawRuns();
}

// ---------------------------------------------------------------------------------------
// Drawing

function drawView() {
  const info = ws.list[ws.id];
  const view = $("workflow-view");
  if (!info) return;
  if (!view.firstChild || view.dataset.workflow !== ws.id) {
    view.dataset.workflow = ws.id;
    view.replaceChildren(
      h("header", { class: "wf-head" },
        h("h1", {}, info.name || ws.id),
        info.description ? h("p", { class: "muted" }, info.description) : null),
      h("div", { class: "wf-body" },
        h("section", { class: "wf-main", "aria-label": "Graph" },
          h("div", { id: "wf-status", class: "wf-status", "aria-live": "polite" }),
          h("div", { id: "wf-graph" }),
          h("div", { id: "wf-resume" }),
          h("h2", {}, "Steps of this run"),
          h("div", { id: "wf-steps" })),
        h("aside", { class: "wf-side", "aria-label": "Runs" },
          h("h2", {}, "Run it"),
          h("div", { id: "wf-form" }),
          h("div", { class: "section-head" }, h("h2", {}, "Runs"), h("button", { type: "button", class: "small ghost", onclick: loadRuns }, "Refresh")),
          h("ul", { id: "wf-runs", class: "thread-list", "data-testid": "workflow-runs" }))),
    );
    drawForm();
  }
  drawStatus();
  drawGraph();
  drawResume();
  drawSteps();
  drawRuns();
}

function statusOf(stepId) {
  const step = ws.run && ws.run.steps[stepId];
  return step ? step.status : "pending";
}

function stepPill(status) {
  return h("span", { class: `pill pill-${TONE[status] || "idle"}`, "data-testid": "step-status" }, LABELS[status] || status);
}

/** One step's box: its id, its description, its status. `prefix` names a nested workflow's. */
function stepBox(step, label, prefix = "") {
  const key = `${prefix}${step.id}`;
  const status = statusOf(key);
  const live = ws.run && ws.run.steps[key] && ws.run.steps[key].progress;
  return h(
    "button",
    {
      type: "button",
      class: `wf-step${ws.selected === key ? " selected" : ""}`,
      "data-testid": "workflow-step",
      "data-step": key,
      "data-status": status,
      "aria-label": `${key}: ${LABELS[status] || status}`,
      onclick: () => {
        ws.selected = key;
        drawGraph();
        drawSteps();
      },
    },
    h("span", { class: "wf-step-id" }, label || step.id),
    step.description ? h("span", { class: "wf-step-desc" }, step.description) : null,
    stepPill(status),
    live ? h("span", { class: "muted wf-progress" }, live) : null,
  );
}

function group(kind, title, ...children) {
  return h("div", { class: `wf-group wf-${kind}`, "data-testid": `workflow-${kind}` }, h("div", { class: "wf-group-title" }, title), ...children);
}

/** One entry of a serialized step graph; a nested workflow's steps are `<its id>.<step>`. */
function entry(node, prefix) {
  const each = (nodes) => nodes.map((n) => entry(n, prefix));
  switch (node.type) {
    case "step":
      return node.step.serializedStepFlow
        ? group("nested", `workflow ${node.step.id}`, stepBox(node.step, null, prefix), graphOf(node.step.serializedStepFlow, `${prefix}${node.step.id}.`))
        : stepBox(node.step, null, prefix);
    case "parallel":
      return group("parallel", "at once", h("div", { class: "wf-row" }, each(node.steps)));
    case "conditional":
      return group("branch", "each arm whose condition holds", h("div", { class: "wf-row" }, each(node.steps)));
    case "loop":
      return group("loop", node.loopType === "dountil" ? "repeat until the condition holds" : "repeat while the condition holds", stepBox(node.step, null, prefix));
    case "foreach":
      return group("foreach", `for each item, ${node.opts && node.opts.concurrency > 1 ? `${node.opts.concurrency} at a time` : "one at a time"}`, stepBox(node.step, null, prefix));
    case "sleep":
      return stepBox({ id: node.id }, `sleep ${node.duration} ms`, prefix);
    case "sleepUntil":
      return stepBox({ id: node.id }, `sleep until ${new Date(node.date).toLocaleString()}`, prefix);
    default:
      return h("div", { class: "muted" }, `(${node.type})`);
  }
}

function graphOf(entries, prefix = "") {
  return h("ol", { class: "wf-graph" }, (entries || []).map((node) => h("li", {}, entry(node, prefix))));
}

function drawGraph() {
  const info = ws.list[ws.id];
  const el = $("wf-graph");
  const graph = graphOf(info.stepGraph);
  graph.setAttribute("data-testid", "workflow-graph");
  el.replaceChildren(graph);
}

function drawStatus() {
  const el = $("wf-status");
  if (!ws.run) {
    el.replaceChildren(h("span", { class: "muted" }, ws.runId ? "Loading the run…" : "Run the workflow with the form: each step lights up as it goes."));
    return;
  }
  const status = ws.run.status;
  el.replaceChildren(
    h("span", { class: `pill pill-${TONE[status] || "idle"}`, "data-testid": "workflow-run-status", "data-status": status }, LABELS[status] || status),
    ws.runId ? h("span", { class: "muted" }, ` run ${ws.runId}`) : null,
    status === "running" || status === "suspended" || status === "waiting"
      ? h("button", { type: "button", class: "small danger", "data-testid": "workflow-cancel", onclick: cancelRun }, "Cancel")
      : null,
    ws.run.result !== undefined && ws.run.result !== null && status === "success"
      ? h("div", { class: "wf-result", "data-testid": "workflow-result" }, h("strong", {}, "Result "), value(ws.run.result))
      : null,
    ws.run.error ? h("p", { class: "error-text", "data-testid": "workflow-error" }, ws.run.error.message || String(ws.run.error)) : null,
  );
}

function drawForm() {
  const info = ws.list[ws.id];
  const schema = unwrapSchema(info.inputSchema);
  $("wf-form").replaceChildren(
    schemaForm(schema, startRun, { submitLabel: "Run", testId: "workflow-run-form", jsonLabel: "Input (JSON)" }),
  );
}

/** The resume forms of the suspended steps, kept while the same steps wait. */
function drawResume() {
  const el = $("wf-resume");
  const waiting = ws.run && ws.run.status === "suspended" && !ws.streaming
    ? Object.entries(ws.run.steps).filter(([, step]) => step.status === "suspended")
    : [];
  const key = waiting.map(([id]) => id).join(",");
  if (key === ws.resumeKey) return;
  ws.resumeKey = key;
  const info = ws.list[ws.id];
  el.replaceChildren(
    ...waiting.flatMap(([id, step]) => {
      const path = suspendedPath(id, step);
      const described = (info.allSteps || info.steps || {})[path.join(".")] || {};
      const schema = unwrapSchema(described.resumeSchema);
      // A foreach waits once per suspended item: one form each, resumed by its index.
      const items = suspendedItems(step) || [{ index: null, payload: step.suspendPayload }];
      return items.map(({ index, payload }) => h(
        "div",
        { class: "card wf-suspension", "data-testid": "workflow-suspension", "data-step": id, "data-item": index === null ? null : String(index) },
        h("p", {}, h("strong", {}, path.join(" › ")), index === null ? "" : ` (item ${index})`, " waits for you."),
        payload !== undefined ? h("div", { class: "card-row" }, h("span", { class: "muted" }, "Asks"), value(payload)) : null,
        schemaForm(schema, (data) => resumeRun(path, data, index), { testId: "workflow-resume-form" }),
      ));
    }),
  );
}

function drawSteps() {
  const el = $("wf-steps");
  if (!ws.run || !Object.keys(ws.run.steps).length) {
    el.replaceChildren(h("p", { class: "muted" }, "No step has run yet."));
    return;
  }
  const rows = Object.entries(ws.run.steps)
    .filter(([id]) => !ws.selected || id === ws.selected)
    .map(([id, step]) =>
      h(
        "div",
        { class: "card wf-detail", "data-testid": "step-detail", "data-step": id },
        h("div", { class: "section-head" }, h("strong", {}, id), stepPill(step.status)),
        h("div", { class: "card-row" }, h("span", { class: "muted" }, "Input"), value(step.payload)),
        step.output !== undefined ? h("div", { class: "card-row" }, h("span", { class: "muted" }, "Output"), value(step.output)) : null,
        step.live ? h("div", { class: "card-row" }, h("span", { class: "muted" }, "Agent"), h("span", { "data-testid": "step-live" }, step.live)) : null,
        step.resumePayload !== undefined ? h("div", { class: "card-row" }, h("span", { class: "muted" }, "Resumed"), value(step.resumePayload)) : null,
        step.error ? h("div", { class: "card-row" }, h("span", { class: "muted" }, "Error"), h("span", { class: "error-text" }, step.error.message || String(step.error))) : null,
      ),
    );
  el.replaceChildren(
    ws.selected ? h("button", { type: "button", class: "small ghost", onclick: () => { ws.selected = null; drawGraph(); drawSteps(); } }, "All steps") : null,
    ...rows,
  );
}

function drawRuns() {
  const el = $("wf-runs");
  if (!el) return;
  if (!ws.runs.length) {
    el.replaceChildren(h("li", { class: "empty" }, "No runs yet."));
    return;
  }
  el.replaceChildren(
    ...ws.runs.map((run) => {
      const status = run.snapshot && run.snapshot.status;
      return h(
        "li",
        {},
        h(
          "button",
          {
            type: "button",
            class: `thread-item${run.runId === ws.runId ? " selected" : ""}`,
            "data-testid": "workflow-run-item",
            "data-run": run.runId,
            "data-status": status,
            onclick: () => ws.options.navigate(`#workflow/${encodeURIComponent(ws.id)}/${encodeURIComponent(run.runId)}`),
          },
          h("span", { class: "agent-name" }, run.runId.slice(0, 8)),
          h("span", { class: "agent-desc" }, `${LABELS[status] || status} · ${ago(run.updatedAt || run.createdAt)}`),
        ),
      );
    }),
  );
}

// ---------------------------------------------------------------------------------------
// Running

/** Streams `path` into the open run, then reads the run back. */
async function follow(path, body) {
  const { id, runId } = ws;
  // Until the server takes the request, its form stays (to show why it was refused).
  const opened = () => {
    ws.streaming = runId;
    ws.resumeKey = null;
    drawView();
  };
  try {
    await records(path, body, (event) => {
      if (ws.id !== id || ws.runId !== runId) return;
      fold(ws.run, event);
      drawStatus();
      drawGraph();
      drawSteps();
    }, { onOpen: opened });
  } finally {
    ws.streaming = null;
  }
  if (ws.id === id && ws.runId === runId) {
    await Promise.all([loadRun(), loadRuns()]);
  }
}

async function startRun(input) {
  const id = ws.id;
  const resourceId = ws.options.resource();
  const created = await api(`/api/workflows/${encodeURIComponent(id)}/create-run`, { method: "POST", body: { resourceId } });
  ws.runId = created.runId;
  ws.run = { status: "running", steps: {}, input };
  ws.selected = null;
  history.pushState(null, "", `#workflow/${encodeURIComponent(id)}/${encodeURIComponent(ws.runId)}`);
  $("topbar-agent").replaceChildren(h("strong", {}, ws.list[id].name || id), h("span", { class: "muted" }, ` · run ${ws.runId}`));
  drawForm();
  await follow(`/api/workflows/${encodeURIComponent(id)}/stream${query({ runId: ws.runId })}`, { inputData: input, resourceId });
}

async function resumeRun(path, data, index = null) {
  const body = { step: path, resumeData: data };
  if (index !== null) body.forEachIndex = index;
  await follow(`/api/workflows/${encodeURIComponent(ws.id)}/resume-stream${query({ runId: ws.runId })}`, body);
}

async function cancelRun() {
  try {
    await api(`/api/workflows/${encodeURIComponent(ws.id)}/runs/${encodeURIComponent(ws.runId)}/cancel`, { method: "POST", body: {} });
  } catch (error) {
    ws.run.error = { message: error.message };
  }
  if (!ws.streaming) await loadRun();
}
