// The experiments page (`#experiments`, `#experiments/<id>`), from `/api/experiments` and
// `/api/datasets/<id>/compare`: experiments newest first (their dataset and version, agent,
// status, items); one experiment's results item by item with each scorer's score and a link to
// the run's trace; and two experiments of one dataset compared, scorer by scorer and item by
// item. The traces page shows a run's scores (`runScores`).

import { api } from "./api.js";
import { h, pill, value } from "./render.js";

const $ = (id) => document.getElementById(id);

const TONE = { pending: "waiting", running: "running", completed: "done", failed: "error" };

export function loadExperiments(navigate) {
  $("experiments-open").onclick = () => navigate("#experiments");
}

/** Draws what `hash` names into `#experiments-view`. */
export async function openExperiments(hash, navigate) {
  $("experiments-open").classList.add("selected");
  const rest = hash.replace(/^#experiments\/?/, "");
  if (rest) return openExperiment(decodeURIComponent(rest), navigate);
  return openList(navigate);
}

export function closeExperiments() {
  const open = $("experiments-open");
  if (open) open.classList.remove("selected");
}

function fixed(n) {
  return typeof n === "number" ? n.toFixed(2) : "–";
}

async function openList(navigate) {
  const view = $("experiments-view");
  view.replaceChildren(h("p", { class: "muted" }, "Loading the experiments…"));
  let page;
  try {
    page = await api("/api/experiments?perPage=100");
  } catch (error) {
    view.replaceChildren(h("p", { class: "error-text", role: "alert" }, error.message));
    return;
  }
  const head = h("div", { class: "wf-head" }, h("h1", {}, "Experiments"),
    h("p", { class: "muted" }, "Agents run over a dataset's items and scored. Tick two of one dataset to compare them."));
  if (!page.experiments.length) {
    view.replaceChildren(head, h("p", { class: "empty", "data-testid": "experiments-empty" }, "No experiments yet: start one with POST /api/datasets/<id>/experiments."));
    return;
  }
  const chosen = [];
  const compareButton = h("button", { type: "button", class: "small", "data-testid": "experiments-compare", disabled: true }, "Compare");
  const out = h("div", { "data-testid": "comparison" });
  const rows = page.experiments.map((e) => {
    const tick = h("input", { type: "checkbox", "data-testid": "experiment-pick", "aria-label": `Pick ${e.name || e.id}` });
    tick.addEventListener("change", () => {
      if (tick.checked) chosen.push(e);
      else chosen.splice(chosen.indexOf(e), 1);
      compareButton.disabled = !(chosen.length === 2 && chosen[0].datasetId === chosen[1].datasetId);
    });
    return h("tr", { "data-testid": "experiment-row", "data-experiment": e.id },
      h("td", {}, tick),
      h("td", {}, h("a", { href: `#experiments/${e.id}`, onclick: (ev) => { ev.preventDefault(); navigate(`#experiments/${encodeURIComponent(e.id)}`); } }, e.name || e.id)),
      h("td", {}, `${e.datasetId} v${e.datasetVersion}`),
      h("td", {}, e.targetId),
      h("td", {}, pill(TONE[e.status] || "running", e.status)),
      h("td", {}, `${e.succeededCount}/${e.totalItems}${e.failedCount ? ` · ${e.failedCount} failed` : ""}`));
  });
  compareButton.addEventListener("click", () => compare(chosen[0], chosen[1], out));
  view.replaceChildren(head,
    h("table", { class: "trace-table", "data-testid": "experiment-list" },
      h("thead", {}, h("tr", {}, ["", "Experiment", "Dataset", "Agent", "Status", "Items"].map((t) => h("th", {}, t)))),
      h("tbody", {}, rows)),
    h("p", {}, compareButton),
    out);
}

/** Two experiments of one dataset side by side (the first picked is the baseline). */
async function compare(a, b, out) {
  out.replaceChildren(h("p", { class: "muted" }, "Comparing…"));
  let c;
  try {
    c = await api(`/api/datasets/${encodeURIComponent(a.datasetId)}/compare`, { method: "POST", body: { experimentIdA: a.id, experimentIdB: b.id } });
  } catch (error) {
    out.replaceChildren(h("p", { class: "error-text", role: "alert" }, error.message));
    return;
  }
  const delta = (d) => (typeof d === "number" ? `${d > 0 ? "+" : ""}${d.toFixed(2)}` : "–");
  out.replaceChildren(
    h("h2", {}, `${c.baseline.name || c.baseline.id} → ${c.candidate.name || c.candidate.id}`),
    h("table", { class: "trace-table", "data-testid": "comparison-scorers" },
      h("thead", {}, h("tr", {}, ["Scorer", "Baseline", "Candidate", "Change"].map((t) => h("th", {}, t)))),
      h("tbody", {}, c.scorers.map((s) => h("tr", { "data-testid": "comparison-scorer", "data-scorer": s.scorerId },
        h("td", {}, s.scorerId), h("td", {}, fixed(s.baseline)), h("td", {}, fixed(s.candidate)),
        h("td", { "data-testid": "comparison-delta" }, delta(s.delta)))))),
    h("table", { class: "trace-table", "data-testid": "comparison-items" },
      h("thead", {}, h("tr", {}, ["Item", "Baseline", "Candidate"].map((t) => h("th", {}, t)))),
      h("tbody", {}, c.items.map((i) => h("tr", { "data-testid": "comparison-item", "data-item": i.itemId },
        h("td", {}, i.itemId),
        h("td", {}, value(i.baselineOutput), scoresLine(i.scores, "baseline")),
        h("td", {}, value(i.candidateOutput), scoresLine(i.scores, "candidate")))))));
}

function scoresLine(scores, side) {
  return h("div", { class: "muted" }, scores.map((s) => `${s.scorerId}: ${fixed(s[side])}`).join(" · "));
}

async function openExperiment(id, navigate) {
  const view = $("experiments-view");
  view.replaceChildren(h("p", { class: "muted" }, "Loading the experiment…"));
  let found;
  try {
    found = await api(`/api/experiments/${encodeURIComponent(id)}`);
  } catch (error) {
    view.replaceChildren(h("p", { class: "error-text", role: "alert" }, error.message));
    return;
  }
  const e = found.experiment;
  const back = h("a", { href: "#experiments", onclick: (ev) => { ev.preventDefault(); navigate("#experiments"); } }, "← All experiments");
  const means = Object.entries(found.summary || {}).map(([scorer, s]) =>
    h("li", { "data-testid": "experiment-mean", "data-scorer": scorer }, `${scorer}: ${fixed(s.mean)} over ${s.scored} item${s.scored === 1 ? "" : "s"}`));
  view.replaceChildren(
    h("div", { class: "wf-head" }, back, h("h1", {}, e.name || e.id),
      h("p", { class: "muted", "data-testid": "experiment-summary" }, `${e.targetId} on ${e.datasetId} v${e.datasetVersion} · ${e.status} · ${e.succeededCount}/${e.totalItems} items`)),
    h("ul", {}, means),
    h("table", { class: "trace-table", "data-testid": "experiment-results" },
      h("thead", {}, h("tr", {}, ["Item", "Input", "Output", "Scores", "Run"].map((t) => h("th", {}, t)))),
      h("tbody", {}, found.results.map((r) => h("tr", { "data-testid": "experiment-result", "data-item": r.itemId },
        h("td", {}, r.itemId),
        h("td", {}, value(r.input)),
        h("td", {}, r.error ? h("span", { class: "error-text" }, r.error) : value(r.output)),
        h("td", {}, (r.scores || []).map((s) => h("div", {}, `${s.scorerId}: ${fixed(s.score)}`))),
        h("td", {}, r.runId ? h("a", { href: `#traces/run/${encodeURIComponent(r.runId)}`, "data-testid": "experiment-run", onclick: (ev) => { ev.preventDefault(); navigate(`#traces/run/${encodeURIComponent(r.runId)}`); } }, "trace") : null))))));
}

/** A run's scores (live and from experiments), for the traces page. */
export async function runScores(runId) {
  if (!runId) return null;
  let page;
  try {
    page = await api(`/api/scores/run/${encodeURIComponent(runId)}?perPage=100`);
  } catch {
    return null;
  }
  if (!page.scores.length) return null;
  return h("div", { class: "run-scores", "data-testid": "run-scores" },
    h("h3", {}, "Scores"),
    h("ul", {}, page.scores.map((s) => h("li", { "data-testid": "run-score", "data-scorer": s.scorerId },
      h("strong", {}, s.scorerId), `: ${fixed(s.score)}`, s.reason ? h("span", { class: "muted" }, ` — ${s.reason}`) : null, ` (${s.source})`))));
}
