// The traces page (`#traces`, `#traces/<traceId>`, `#traces/run/<runId>`), from
// `/api/observability/traces`: the traces newest first, filtered by agent and status; a trace
// as a waterfall of its spans (nested under their parents, each bar where it ran), and a span's
// attributes, input, output and error. A chat run's footer links to its trace.

import { ApiError, api, query } from "./api.js";
import { runScores } from "./experiments.js";
import { h, json, pill, value } from "./render.js";

const $ = (id) => document.getElementById(id);

/** Whether the server traces; the sidebar's entry (and the runs' links) appear when it does. */
export async function loadTraces(navigate) {
  try {
    await api("/api/observability/traces?perPage=1");
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 404) console.warn("traces unavailable", error);
    $("traces-section").hidden = true;
    delete document.body.dataset.tracing;
    return false;
  }
  $("traces-section").hidden = false;
  document.body.dataset.tracing = "on";
  $("traces-open").onclick = () => navigate("#traces");
  return true;
}

/** Draws what `hash` names into `#traces-view`. */
export async function openTraces(hash, navigate) {
  $("traces-open").classList.add("selected");
  const rest = hash.replace(/^#traces\/?/, "");
  if (rest.startsWith("run/")) return openRun(decodeURIComponent(rest.slice(4)), navigate);
  if (rest) return openTrace(decodeURIComponent(rest), navigate);
  return openList(navigate);
}

export function closeTraces() {
  const open = $("traces-open");
  if (open) open.classList.remove("selected");
}

function ms(span) {
  return typeof span.durationMs === "number" ? `${span.durationMs.toFixed(span.durationMs < 10 ? 2 : 0)} ms` : "";
}

async function openList(navigate, filters = {}) {
  const view = $("traces-view");
  const agent = h("input", { type: "text", id: "trace-agent", placeholder: "agent id", value: filters.entityId || "", "data-testid": "trace-filter-agent" });
  const status = h("select", { id: "trace-status", "data-testid": "trace-filter-status" },
    h("option", { value: "" }, "any status"), h("option", { value: "success" }, "success"), h("option", { value: "error" }, "error"));
  status.value = filters.status || "";
  const list = h("div", { "data-testid": "trace-list" }, h("p", { class: "muted" }, "Loading the traces…"));
  const apply = () => openList(navigate, { entityId: agent.value.trim(), status: status.value });
  const form = h("form", { class: "trace-filters" },
    h("label", { for: "trace-agent" }, "Agent"), agent,
    h("label", { for: "trace-status" }, "Status"), status,
    h("button", { type: "submit", class: "small" }, "Filter"));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    apply();
  });
  view.replaceChildren(h("div", { class: "wf-head" }, h("h1", {}, "Traces"), h("p", { class: "muted" }, "Every run a trace: its agent runs, model calls and tool calls.")), form, list);
  let page;
  try {
    page = await api(`/api/observability/traces${query({ perPage: 50, entityId: filters.entityId, status: filters.status })}`);
  } catch (error) {
    list.replaceChildren(h("p", { class: "error-text" }, error.message));
    return;
  }
  if (!page.spans.length) {
    list.replaceChildren(h("p", { class: "empty" }, "No traces yet: run an agent."));
    return;
  }
  list.replaceChildren(
    h("table", { class: "trace-table" },
      h("thead", {}, h("tr", {}, ["Trace", "Status", "Started", "Duration", "Spans"].map((t) => h("th", {}, t)))),
      h("tbody", {}, page.spans.map((root) =>
        h("tr", { "data-testid": "trace-row", "data-trace": root.traceId },
          h("td", {}, h("a", { href: `#traces/${root.traceId}`, onclick: (e) => { e.preventDefault(); navigate(`#traces/${root.traceId}`); } }, root.name)),
          h("td", {}, pill(root.status === "error" ? "error" : "done", root.status)),
          h("td", {}, new Date(root.startedAt).toLocaleString()),
          h("td", {}, ms(root)),
          h("td", {}, String(root.spanCount)))))),
    page.pagination.hasMore ? h("p", { class: "muted" }, `Showing the newest 50 of ${page.pagination.total}.`) : null,
  );
}

/** The trace of run `runId` (the newest, when it has several drives in one trace). */
async function openRun(runId, navigate) {
  const view = $("traces-view");
  view.replaceChildren(h("p", { class: "muted" }, "Finding the run's trace…"));
  try {
    const page = await api(`/api/observability/traces${query({ runId, perPage: 1 })}`);
    if (!page.spans.length) {
      view.replaceChildren(h("p", { class: "empty", "data-testid": "trace-missing" }, `No trace of run ${runId} yet.`));
      return;
    }
    return openTrace(page.spans[0].traceId, navigate);
  } catch (error) {
    view.replaceChildren(h("p", { class: "error-text" }, error.message));
  }
}

async function openTrace(traceId, navigate) {
  const view = $("traces-view");
  view.replaceChildren(h("p", { class: "muted" }, "Loading the trace…"));
  let trace;
  try {
    trace = await api(`/api/observability/traces/${encodeURIComponent(traceId)}`);
  } catch (error) {
    view.replaceChildren(h("p", { class: "error-text", role: "alert" }, error.message));
    return;
  }
  const spans = trace.spans;
  const ids = new Set(spans.map((s) => s.spanId));
  const children = new Map();
  for (const span of spans) {
    const parent = span.parentSpanId && ids.has(span.parentSpanId) ? span.parentSpanId : null;
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(span);
  }
  const start = Math.min(...spans.map((s) => Date.parse(s.startedAt)));
  const end = Math.max(...spans.map((s) => Date.parse(s.endedAt)));
  const total = Math.max(end - start, 1);
  const detail = h("div", { class: "span-detail", "data-testid": "span-detail" }, h("p", { class: "muted" }, "Choose a span to see its details."));
  const rows = [];
  const walk = (parent, depth) => {
    for (const span of (children.get(parent) || []).sort((a, b) => Date.parse(a.startedAt) - Date.parse(b.startedAt))) {
      const left = ((Date.parse(span.startedAt) - start) / total) * 100;
      const width = Math.max(((Date.parse(span.endedAt) - Date.parse(span.startedAt)) / total) * 100, 0.5);
      // Positions go through the CSSOM: the page's CSP refuses inline style attributes.
      const bar = h("span", { class: "span-bar" });
      bar.style.left = `${left}%`;
      bar.style.width = `${width}%`;
      const name = h("span", { class: "span-name" }, span.name);
      name.style.paddingLeft = `${depth * 14}px`;
      const row = h("button", {
        type: "button",
        class: `span-row${span.error ? " span-error" : ""}`,
        "data-testid": "span-row",
        "data-span-type": span.spanType,
        "data-name": span.name,
      },
      name,
      h("span", { class: "span-track" }, bar),
      h("span", { class: "span-time muted" }, ms(span)));
      row.addEventListener("click", () => detail.replaceChildren(spanDetail(span)));
      rows.push(row);
      walk(span.spanId, depth + 1);
    }
  };
  walk(null, 0);
  const tokens = spans.filter((s) => s.spanType === "model_generation").reduce((sum, s) => sum + ((s.attributes && s.attributes.usage && s.attributes.usage.totalTokens) || 0), 0);
  const back = h("a", { href: "#traces", onclick: (e) => { e.preventDefault(); navigate("#traces"); } }, "← All traces");
  view.replaceChildren(
    h("div", { class: "wf-head" }, back, h("h1", {}, spans[0] ? spans[0].name : traceId),
      h("p", { class: "muted", "data-testid": "trace-summary" }, `${spans.length} spans · ${total} ms${tokens ? ` · ${tokens} tokens` : ""} · trace ${traceId}`)),
    h("div", { class: "trace-body" }, h("div", { class: "waterfall", "data-testid": "waterfall" }, rows), detail),
  );
  // The scores of the trace's agent runs (live, and from experiments).
  const runs = [...new Set(spans.filter((s) => s.spanType === "agent_run" && s.runId).map((s) => s.runId))];
  for (const runId of runs) {
    const scores = await runScores(runId);
    if (scores) view.append(scores);
  }
}

function spanDetail(span) {
  return h("div", {},
    h("h3", {}, span.name),
    h("p", { class: "muted" }, `${span.spanType} · ${ms(span)} · span ${span.spanId}`),
    span.error ? h("p", { class: "error-text", role: "alert" }, `${span.error.kind ? `${span.error.kind}: ` : ""}${span.error.message}`) : null,
    span.input !== undefined ? h("div", { class: "card-row" }, h("span", { class: "label" }, "Input"), value(span.input)) : null,
    span.output !== undefined ? h("div", { class: "card-row" }, h("span", { class: "label" }, "Output"), value(span.output)) : null,
    span.attributes ? json(span.attributes, "Attributes") : null,
    json(span, "The whole span"));
}
