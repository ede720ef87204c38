// Kestrel Studio: chat with the server's agents, watch their runs, decide on what waits.
//
// The page keeps its place in the URL (`#/<agent>/<thread>`, or `#workflow/<id>/<run>` for
// a workflow and its run: see workflows.js), so a reload shows the same agent and thread,
// whose history comes back from the memory routes, or the same workflow run. Everything else comes
// from the agents routes: runs stream as SSE, and approvals, declines and resumes continue
// the same run in the same chat bubble.

import { ApiError, api, onTokenNeeded, query, setToken, stream, token } from "./api.js";
import { schemaForm } from "./forms.js";
import { ago, delegationTree, h, json, pill, runBody, runFooter, storedBody, storedTurns, timeline, value } from "./render.js";
import { Run, asText, clip, questionOf } from "./runs.js";
import { closeWorkflow, hasWorkflow, loadWorkflows, mountWorkflows, openWorkflow } from "./workflows.js";
import { NetworkRun } from "./network-runs.js";
import { networkBody } from "./networks.js";
import { skillsSection } from "./skills.js";
import { closeMcp, loadMcp, openMcp } from "./mcp.js";
import { closeTraces, loadTraces, openTraces } from "./traces.js";
import { closeExperiments, loadExperiments, openExperiments } from "./experiments.js";
import { QueuePanel } from "./queue.js";
import { editorSection, isEditable, withDraft } from "./versions.js";

const RESOURCE_KEY = "kestrel.studio.resource";
const DEFAULT_RESOURCE = "studio";

const $ = (id) => document.getElementById(id);

/** The thread's queued messages, above the composer; once they have run, the history again. */
let queuePanel = null;

const state = {
  agents: {},
  agentId: null,
  threadId: null,
  threads: [],
  /** Chat entries: {kind: "user", text} | {kind: "stored", turn} | {kind: "run", run}. */
  entries: [],
  /** Runs of this page, by id, newest last. */
  runs: new Map(),
  selectedRunId: null,
  busy: false,
  current: null,
  /** Waiting calls of stored runs on this thread (from suspended-runs). */
  waiting: [],
  /** Decision cards by `${runId}:${toolCallId}`, kept across redraws so typed input stays. */
  cards: new Map(),
  /** What each redraw last drew, by element. */
  drawn: new WeakMap(),
  /** Shows what `hash` names (pages that are not a conversation: MCP, traces). */
  navigate: (hash) => {
    if (location.hash !== hash) history.pushState(null, "", hash);
    route();
  },
};

// ---------------------------------------------------------------------------------------
// Start

onTokenNeeded(askToken);
mountWorkflows({
  resource,
  navigate: (hash) => {
    if (location.hash !== hash) history.pushState(null, "", hash);
    route();
  },
});
window.addEventListener("DOMContentLoaded", boot);

async function boot() {
  $("resource-id").value = resource();
  $("resource-id").addEventListener("change", () => {
    const value = $("resource-id").value.trim() || DEFAULT_RESOURCE;
    $("resource-id").value = value;
    try {
      localStorage.setItem(RESOURCE_KEY, value);
    } catch {
      // No storage: the resource lasts for this page.
    }
    openConversation(state.agentId, null);
  });
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    sendPrompt();
  });
  $("prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      sendPrompt();
    }
  });
  $("stop").addEventListener("click", stopRun);
  queuePanel = new QueuePanel($("queued"), {
    onDrained: () => {
      state.entries = [];
      loadHistory();
      refreshAfterRun();
    },
  });
  $("queue").addEventListener("click", queuePrompt);
  $("new-thread").addEventListener("click", () => openConversation(state.agentId, null));
  $("run-select").addEventListener("change", () => {
    state.selectedRunId = $("run-select").value || null;
    drawInspector();
  });
  $("memory-refresh").addEventListener("click", loadMemory);
  $("waiting-refresh").addEventListener("click", loadWaiting);
  $("token-button").addEventListener("click", () => askToken("Change or forget the token this page sends."));
  const tabs = [...document.querySelectorAll('[role="tab"]')];
  for (const tab of tabs) {
    tab.addEventListener("click", () => selectTab(tab.id.replace("tab-", "")));
    // Arrow keys move between the tabs, as in any tab list.
    tab.addEventListener("keydown", (e) => {
      const step = { ArrowRight: 1, ArrowLeft: -1 }[e.key];
      if (!step) return;
      const next = tabs[(tabs.indexOf(tab) + step + tabs.length) % tabs.length];
      next.focus();
      selectTab(next.id.replace("tab-", ""));
    });
  }
  window.addEventListener("hashchange", route);
  await loadAgents();
}

function resource() {
  try {
    return localStorage.getItem(RESOURCE_KEY) || DEFAULT_RESOURCE;
  } catch {
    return DEFAULT_RESOURCE;
  }
}

/** The workflow the URL names (`#workflow/<id>/<run>`), if it names one. */
function workflowFromHash() {
  if (!location.hash.startsWith("#workflow/")) return null;
  const [workflowId, runId] = location.hash.slice("#workflow/".length).split("/").map((s) => (s ? decodeURIComponent(s) : null));
  return workflowId ? { workflowId, runId: runId || null } : null;
}

/** Shows what the URL names: the MCP page, a workflow (and run), or an agent's thread. */
function route() {
  if (location.hash === "#mcp") {
    showTraces(false);
    showExperiments(false);
    showMcp(true);
    openMcp();
    return;
  }
  showMcp(false);
  if (location.hash.startsWith("#experiments")) {
    showTraces(false);
    showExperiments(true);
    openExperiments(location.hash, state.navigate);
    return;
  }
  showExperiments(false);
  if (location.hash.startsWith("#traces")) {
    showTraces(true);
    openTraces(location.hash, state.navigate);
    return;
  }
  showTraces(false);
  const wanted = workflowFromHash();
  if (wanted && hasWorkflow(wanted.workflowId)) {
    showWorkflows(true);
    openWorkflow(wanted.workflowId, wanted.runId);
    return;
  }
  showWorkflows(false);
  const { agentId, threadId } = fromHash();
  const id = state.agents[agentId] ? agentId : state.agentId || Object.keys(state.agents)[0];
  if (id !== state.agentId || threadId !== state.threadId || !state.shown) openConversation(id, state.agents[agentId] ? threadId : null, { push: false });
}

/** Switches the page between the experiments page and the rest. */
function showExperiments(on) {
  document.querySelector(".layout").classList.toggle("workflow-mode", on);
  $("experiments-view").hidden = !on;
  if (on) {
    $("workflow-view").hidden = true;
    $("mcp-view").hidden = true;
    $("traces-view").hidden = true;
    closeWorkflow();
    state.shown = false;
    state.agentId = null;
    drawAgentList();
  } else {
    closeExperiments();
  }
}

/** Switches the page between the traces page and the rest. */
function showTraces(on) {
  document.querySelector(".layout").classList.toggle("workflow-mode", on);
  $("traces-view").hidden = !on;
  if (on) {
    $("workflow-view").hidden = true;
    $("mcp-view").hidden = true;
    $("experiments-view").hidden = true;
    closeWorkflow();
    state.shown = false;
    state.agentId = null;
    drawAgentList();
  } else {
    closeTraces();
  }
}

/** Switches the page between the MCP page and the rest. */
function showMcp(on) {
  document.querySelector(".layout").classList.toggle("workflow-mode", on);
  $("mcp-view").hidden = !on;
  if (on) {
    $("workflow-view").hidden = true;
    closeWorkflow();
    state.shown = false;
    state.agentId = null;
    drawAgentList();
  } else {
    closeMcp();
  }
}

/** Switches the page between the workflow view and the chat. */
function showWorkflows(on) {
  document.querySelector(".layout").classList.toggle("workflow-mode", on);
  $("workflow-view").hidden = !on;
  if (on) {
    state.shown = false;
    state.agentId = null;
    drawAgentList();
  } else {
    closeWorkflow();
  }
}

function fromHash() {
  const [agentId, threadId] = location.hash.replace(/^#\/?/, "").split("/").map((s) => (s ? decodeURIComponent(s) : null));
  return { agentId: agentId || null, threadId: threadId || null };
}

function setHash(agentId, threadId) {
  const hash = `#/${encodeURIComponent(agentId)}${threadId ? `/${encodeURIComponent(threadId)}` : ""}`;
  if (location.hash !== hash) history.pushState(null, "", hash);
}

async function loadAgents() {
  try {
    state.agents = (await api("/api/agents")) || {};
  } catch (error) {
    setConnection("error", `Cannot reach the server: ${error.message}`);
    $("messages").replaceChildren(notice("error", "The Studio cannot load the agents", error.message, h("button", { type: "button", "data-testid": "retry", onclick: loadAgents }, "Try again")));
    return;
  }
  const ids = Object.keys(state.agents);
  const workflows = await loadWorkflows();
  await loadMcp(state.navigate);
  await loadTraces(state.navigate);
  loadExperiments(state.navigate);
  setConnection("ok", `Connected · ${ids.length} agent${ids.length === 1 ? "" : "s"}${workflows.length ? ` · ${workflows.length} workflow${workflows.length === 1 ? "" : "s"}` : ""}`);
  $("token-button").hidden = !token();
  drawAgentList();
  if (workflowFromHash() || location.hash === "#mcp" || location.hash.startsWith("#traces") || location.hash.startsWith("#experiments")) {
    route();
    return;
  }
  if (!ids.length) {
    $("messages").replaceChildren(notice("info", "No agents", "This server has no agents registered."));
    return;
  }
  const wanted = fromHash();
  const agentId = state.agents[wanted.agentId] ? wanted.agentId : ids[0];
  await openConversation(agentId, wanted.agentId === agentId ? wanted.threadId : null, { push: false });
}

function setConnection(kind, text) {
  const el = $("connection");
  el.textContent = text;
  el.dataset.state = kind;
}

// ---------------------------------------------------------------------------------------
// Token

function askToken(reason) {
  const dialog = $("token-dialog");
  $("token-reason").textContent = reason || "";
  $("token-input").value = token();
  return new Promise((resolve) => {
    const forget = () => {
      setToken("");
      $("token-button").hidden = true;
      dialog.close("forget");
    };
    $("token-forget").onclick = forget;
    dialog.addEventListener(
      "close",
      () => {
        const given = $("token-input").value.trim();
        if (dialog.returnValue === "save" && given) {
          $("token-button").hidden = false;
          resolve(given);
        } else resolve(null);
      },
      { once: true },
    );
    dialog.showModal();
  });
}

// ---------------------------------------------------------------------------------------
// Agents and threads

function agent() {
  return state.agents[state.agentId] || null;
}

function drawAgentList() {
  $("agent-list").replaceChildren(
    ...Object.values(state.agents).map((a) =>
      h(
        "li",
        {},
        h(
          "button",
          {
            type: "button",
            class: `agent-item${a.id === state.agentId ? " selected" : ""}`,
            "aria-current": a.id === state.agentId ? "true" : null,
            "data-testid": `agent-${a.id}`,
            onclick: () => openConversation(a.id, null),
          },
          h("span", { class: "agent-name" }, a.name || a.id),
          a.description ? h("span", { class: "agent-desc" }, a.description) : null,
          badges(a),
        ),
      ),
    ),
  );
}

function badges(a) {
  const list = [];
  const tools = Object.keys(a.tools || {}).filter((t) => !t.startsWith("agent-"));
  if (tools.length) list.push(`${tools.length} tool${tools.length === 1 ? "" : "s"}`);
  const subAgents = Object.keys(a.agents || {}).length;
  if (subAgents) list.push(`${subAgents} sub-agent${subAgents === 1 ? "" : "s"}`);
  if (a.hasMemory) list.push("memory");
  return list.length ? h("span", { class: "agent-badges" }, list.map((b) => h("span", { class: "chip" }, b))) : null;
}

/** Shows `agentId`'s thread `threadId` (its stored history), or a new conversation. */
async function openConversation(agentId, threadId, { push = true } = {}) {
  if (!agentId || !state.agents[agentId]) return;
  if (!$("workflow-view").hidden) showWorkflows(false);
  if (!$("mcp-view").hidden || !$("traces-view").hidden || !$("experiments-view").hidden) {
    showMcp(false);
    showTraces(false);
    showExperiments(false);
    showWorkflows(false);
  }
  state.shown = true;
  if (state.busy && (agentId !== state.agentId || threadId !== state.threadId)) {
    // The run goes on on the server; its bubble belongs to the page that started it.
    state.busy = false;
  }
  state.agentId = agentId;
  state.threadId = threadId;
  state.entries = [];
  state.waiting = [];
  if (push) setHash(agentId, threadId);
  else if (!location.hash || fromHash().agentId !== agentId) history.replaceState(null, "", `#/${encodeURIComponent(agentId)}${threadId ? `/${encodeURIComponent(threadId)}` : ""}`);
  drawAgentList();
  drawHeader();
  drawAgentInfo();
  drawChat();
  drawComposer();
  drawInspector();
  await Promise.all([loadThreads(), threadId ? loadHistory() : null, loadWaiting(), loadMemory()]);
}

function drawHeader() {
  const a = agent();
  const thread = state.threads.find((t) => t.id === state.threadId);
  $("topbar-agent").replaceChildren(
    a ? h("strong", {}, a.name || a.id) : "",
    a && state.threadId ? h("span", { class: "muted" }, ` · ${thread && thread.title ? thread.title : "thread"}`) : a ? h("span", { class: "muted" }, " · new conversation") : "",
  );
}

async function loadThreads() {
  const a = agent();
  const list = $("thread-list");
  if (!a) return;
  if (!a.hasMemory) {
    state.threads = [];
    list.replaceChildren(h("li", { class: "empty" }, `${a.name || a.id} has no memory: its conversation lasts as long as this page.`));
    return;
  }
  try {
    const page = await api(`/api/memory/threads${query({ resourceId: resource(), agentId: a.id, perPage: 50 })}`);
    const threads = (page && page.threads) || [];
    const when = (t) => Date.parse(t.updatedAt || t.createdAt) || 0;
    state.threads = threads
      .filter((t) => {
        const meta = t.metadata || {};
        return meta.agentId ? meta.agentId === a.id : !meta.delegatedBy;
      })
      .sort((x, y) => when(y) - when(x));
  } catch (error) {
    state.threads = [];
    list.replaceChildren(h("li", { class: "empty error-text" }, `Threads unavailable: ${error.message}`));
    return;
  }
  drawThreads();
  drawHeader();
}

function drawThreads() {
  const list = $("thread-list");
  if (!state.threads.length) {
    list.replaceChildren(h("li", { class: "empty" }, "No threads yet: your first message starts one."));
    return;
  }
  list.replaceChildren(
    ...state.threads.map((t) =>
      h(
        "li",
        { class: `thread-item${t.id === state.threadId ? " selected" : ""}`, "data-testid": "thread-item", "data-thread-id": t.id },
        h(
          "button",
          { type: "button", class: "thread-open", "aria-current": t.id === state.threadId ? "true" : null, onclick: () => openConversation(state.agentId, t.id) },
          h("span", { class: "thread-title" }, t.title || "Untitled thread"),
          h("span", { class: "thread-when muted" }, ago(t.updatedAt || t.createdAt)),
        ),
        h("button", { type: "button", class: "icon-button", "aria-label": `Rename thread ${t.title || t.id}`, title: "Rename thread", onclick: () => renameThread(t) }, "✎"),
        h("button", { type: "button", class: "icon-button", "aria-label": `Delete thread ${t.title || t.id}`, title: "Delete thread", onclick: () => deleteThread(t) }, "×"),
      ),
    ),
  );
}

async function renameThread(thread) {
  const title = prompt("New title of the thread", thread.title || "");
  if (title === null || !title.trim() || title.trim() === thread.title) return;
  try {
    await api(`/api/memory/threads/${encodeURIComponent(thread.id)}${query({ resourceId: resource() })}`, { method: "PATCH", body: { title: title.trim(), resourceId: resource() } });
  } catch (error) {
    toast(`Could not rename the thread: ${error.message}`);
    return;
  }
  await loadThreads();
}

async function deleteThread(thread) {
  if (!confirm(`Delete the thread “${thread.title || thread.id}” and its messages?`)) return;
  try {
    await api(`/api/memory/threads/${encodeURIComponent(thread.id)}${query({ resourceId: resource() })}`, { method: "DELETE" });
  } catch (error) {
    toast(`Could not delete the thread: ${error.message}`);
    return;
  }
  if (thread.id === state.threadId) await openConversation(state.agentId, null);
  else await loadThreads();
}

async function loadHistory() {
  const threadId = state.threadId;
  try {
    const body = await api(`/api/memory/threads/${encodeURIComponent(threadId)}/messages${query({ resourceId: resource(), agentId: state.agentId })}`);
    if (threadId !== state.threadId) return;
    const turns = storedTurns((body && body.messages) || []);
    // Runs of this page on this thread are shown live; stored turns come first.
    state.entries = [...turns.map((turn) => (turn.role === "user" ? { kind: "user", text: turn.text } : { kind: "stored", turn })), ...state.entries.filter((e) => e.kind === "run")];
  } catch (error) {
    if (threadId !== state.threadId) return;
    state.entries = [{ kind: "notice", el: notice(error.status === 404 ? "info" : "error", "The thread's history is not available", error.message) }];
  }
  drawChat();
}

// ---------------------------------------------------------------------------------------
// Chat

/** Whether the agent can run as a network: it has memory and primitives to route to. */
function canNetwork(a) {
  return !!(a && a.hasMemory && (Object.keys(a.agents || {}).length || Object.keys(a.workflows || {}).length));
}

function drawComposer() {
  const toggle = $("network-toggle");
  toggle.hidden = !canNetwork(agent());
  if (toggle.hidden) $("network-mode").checked = false;
  // A fork copies a stored thread: an agent with memory, in a thread that exists.
  const fork = $("fork-toggle");
  fork.hidden = !(agent() && agent().hasMemory && state.threadId);
  if (fork.hidden) $("fork-mode").checked = false;
  // Runs on the agent's draft version (the Agent tab's editor saves it).
  $("draft-toggle").hidden = !isEditable(agent());
  if ($("draft-toggle").hidden) $("draft-mode").checked = false;
  $("send").disabled = state.busy;
  $("stop").hidden = !state.busy;
  // While a run is active, a message can wait for the thread's next run.
  const a = agent();
  const queueable = !!(a && a.hasMemory && state.threadId);
  $("queue").hidden = !(state.busy && queueable);
  if (queuePanel) queuePanel.follow(state.agentId, resource(), queueable ? state.threadId : null);
  $("prompt").disabled = false;
}

function drawChat() {
  const box = $("messages");
  const nearBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 120;
  const a = agent();
  const children = [];
  if (!state.entries.length && a) {
    children.push(
      h(
        "div",
        { class: "welcome" },
        h("h1", {}, a.name || a.id),
        a.description ? h("p", {}, a.description) : null,
        h("p", { class: "muted" }, a.hasMemory ? "Your first message starts a thread; it is stored, so a reload shows it again." : "Type a message below to start."),
      ),
    );
  }
  // A stored call that waits for a person shows its form in its place; the rest (a
  // sub-agent's calls, say) go in a block at the end.
  const placed = new Set();
  const swap = (call) => {
    const d = state.waiting.find((w) => w.toolCallId === call.id);
    if (!d) return null;
    placed.add(d);
    return decisionCard(d);
  };
  for (const entry of state.entries) children.push(entryElement(entry, swap));
  const waiting = state.waiting.filter((w) => !placed.has(w) && !state.entries.some((e) => e.kind === "run" && e.run.runId === w.runId));
  if (waiting.length) {
    children.push(
      h("div", { class: "waiting-block", "data-testid": "waiting-block" }, h("h3", {}, "Waiting for you"), waiting.map((w) => decisionCard(w))),
    );
  }
  box.replaceChildren(...children);
  if (nearBottom) box.scrollTop = box.scrollHeight;
}

function entryElement(entry, swap) {
  if (entry.kind === "user") {
    return h("div", { class: "message user", "data-testid": "message-user" }, entry.draft ? h("span", { class: "chip draft-chip", title: "Ran on the agent's draft version" }, "draft") : null, h("div", { class: "bubble" }, entry.text));
  }
  if (entry.kind === "notice") return entry.el;
  if (entry.kind === "network") return networkElement(entry.run);
  if (entry.kind === "stored") {
    const turn = entry.turn;
    return h(
      "div",
      { class: "message assistant", "data-testid": "message-assistant", "data-stored": "true" },
      h("div", { class: "avatar", "aria-hidden": "true" }, initial()),
      h("div", { class: "bubble" }, turn.items.length ? storedBody(turn, swap) : h("p", { class: "muted" }, "No answer was stored for this turn."), turn.status && turn.status !== "complete" ? h("div", { class: "run-footer" }, pill(turn.status === "aborted" ? "aborted" : "waiting", turn.status)) : null),
    );
  }
  return runElement(entry.run);
}

function initial() {
  const a = agent();
  return ((a && (a.name || a.id)) || "A").charAt(0).toUpperCase();
}

/** A run's bubble, redrawn only when the run changed. */
function runElement(run) {
  let el = document.querySelector(`[data-run-id="${CSS.escape(run.runId || "pending")}"]`);
  if (!el) el = h("div", { class: "message assistant", "data-testid": "message-assistant", "data-run-id": run.runId || "pending" });
  el.dataset.status = run.status;
  if (state.drawn.get(el) !== run.version) {
    state.drawn.set(el, run.version);
    // A decision's form stands where its call would (inside a delegation for a sub-agent's
    // call); any other open decision goes below.
    const placed = new Set();
    const swap = (call) => {
      const d = run.decisions.get(call.id);
      if (!d || d.state === "done") return null;
      placed.add(call.id);
      return decisionCard(d);
    };
    const body = run.items.length ? runBody(run, swap) : null;
    const rest = run.openDecisions.filter((d) => !placed.has(d.toolCallId));
    el.replaceChildren(
      h("div", { class: "avatar", "aria-hidden": "true" }, initial()),
      h(
        "div",
        { class: "bubble" },
        body || (run.status === "running" ? h("div", { class: "typing", "aria-label": "The agent is working" }, h("span"), h("span"), h("span")) : null),
        rest.map((d) => decisionCard(d)),
        runFooter(run),
        h("button", { type: "button", class: "link", onclick: () => inspect(run.runId) }, "Inspect run"),
      ),
    );
  }
  return el;
}

let frame = 0;
/** Redraws the changed runs (at most once a frame). */
function schedule() {
  if (frame) return;
  frame = requestAnimationFrame(() => {
    frame = 0;
    const box = $("messages");
    const nearBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 120;
    for (const entry of state.entries) {
      if (entry.kind === "run") runElement(entry.run);
      else if (entry.kind === "network") networkElement(entry.run);
    }
    if (nearBottom) box.scrollTop = box.scrollHeight;
    drawInspector();
    drawComposer();
  });
}

function newThreadId() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
}

async function sendPrompt() {
  const text = $("prompt").value.trim();
  const a = agent();
  if (!text || !a || state.busy) return;
  $("prompt").value = "";
  state.busy = true;
  drawComposer();
  if (a.hasMemory && state.threadId && $("fork-mode").checked) {
    $("fork-mode").checked = false;
    await forkPrompt(a, text);
    state.busy = state.current !== null;
    drawComposer();
    refreshAfterRun();
    return;
  }
  let memory;
  if (a.hasMemory) {
    if (!state.threadId) {
      const threadId = newThreadId();
      try {
        await api("/api/memory/threads", { method: "POST", body: { resourceId: resource(), threadId, title: clip(text, 60), metadata: { agentId: a.id } } });
      } catch (error) {
        // The run creates the thread itself; only the title and the metadata are lost.
        console.warn("creating the thread failed", error);
      }
      state.threadId = threadId;
      setHash(a.id, threadId);
      loadThreads();
    }
    memory = { thread: state.threadId, resource: resource() };
  }
  const history = a.hasMemory ? [] : pageHistory();
  const draft = $("draft-mode").checked && isEditable(a);
  state.entries.push({ kind: "user", text, draft });
  drawChat();
  const body = { messages: [...history, { role: "user", content: text }] };
  if (memory) body.memory = memory;
  if (memory && $("network-mode").checked && canNetwork(a)) {
    const run = new NetworkRun(a.id);
    state.entries.push({ kind: "network", run });
    drawChat();
    await networkStream(`/api/agents/${encodeURIComponent(a.id)}/network`, { ...body, maxSteps: a.defaultOptions && a.defaultOptions.maxSteps }, run);
  } else {
    await runStream(`/api/agents/${encodeURIComponent(a.id)}/stream`, withDraft(body, a.id, draft), null);
  }
  state.busy = state.current !== null;
  drawComposer();
  refreshAfterRun();
}

/** Queues the composer's text for the thread's next run. */
async function queuePrompt() {
  const text = $("prompt").value.trim();
  if (!text || !queuePanel) return;
  // Cleared at once: the next message may be typed while this one is on its way.
  $("prompt").value = "";
  try {
    await queuePanel.queue(text);
  } catch (error) {
    if (!$("prompt").value) $("prompt").value = text;
    toast(error.message || String(error));
  }
}

/**
 * Sends `text` to a fork of the current thread: the page follows the new thread (subscribed
 * before the message is sent, so no event is missed) and shows the run the message wakes
 * there; the original thread is left as it was.
 */
async function forkPrompt(a, text) {
  const source = state.threadId;
  const forkId = newThreadId();
  const agentPath = `/api/agents/${encodeURIComponent(a.id)}`;
  state.threadId = forkId;
  setHash(a.id, forkId);
  // The fork starts with the original's conversation, which the page shows already.
  state.entries.push({ kind: "user", text });
  drawChat();
  await runStream(`${agentPath}/threads/subscribe`, { resourceId: resource(), threadId: forkId }, null, {
    untilFinished: true,
    onOpen: async () => {
      await api(`${agentPath}/send-message`, {
        method: "POST",
        body: { message: text, resourceId: resource(), threadId: source, fork: { threadId: forkId, title: `Fork: ${clip(text, 50)}` } },
      });
      loadThreads();
    },
  });
}

/** The conversation of this page, for an agent without memory. */
function pageHistory() {
  const out = [];
  for (const e of state.entries) {
    if (e.kind === "user") out.push({ role: "user", content: e.text });
    else if (e.kind === "run" && e.run.text) out.push({ role: "assistant", content: e.run.text });
  }
  return out;
}

/**
 * Streams `path` into `run` (a run of this page being continued), or into a new bubble whose
 * run is named by the first event.
 */
async function runStream(path, body, run, { onOpen, untilFinished = false } = {}) {
  const agentId = state.agentId;
  let entry = run ? state.entries.find((e) => e.kind === "run" && e.run === run) : null;
  if (!entry) {
    const pending = run || new Run(null, agentId);
    entry = { kind: "run", run: pending };
    state.entries.push(entry);
    drawChat();
  }
  const controller = new AbortController();
  state.current = { controller, entry, agentId };
  try {
    await stream(
      path,
      body,
      (event) => {
        let target = entry.run;
        if (!target.runId) {
          target.runId = event.runId;
          const el = document.querySelector('[data-run-id="pending"]');
          if (el) el.dataset.runId = event.runId;
        } else if (event.runId !== target.runId && !state.runs.has(event.runId)) {
          return;
        }
        if (!state.runs.has(target.runId)) {
          state.runs.set(target.runId, target);
          state.selectedRunId = target.runId;
        }
        target.apply(event);
        schedule();
        // A thread subscription never ends by itself: it is left once its run has ended or
        // stopped for a person (a moment later, for the other calls of that step).
        if (untilFinished && event.runId === target.runId) {
          if (["finish", "error", "abort"].includes(event.type)) controller.abort();
          else if (["tool-call-approval", "tool-call-suspended"].includes(event.type)) setTimeout(() => controller.abort(), 300);
        }
      },
      { signal: controller.signal, onOpen },
    );
    entry.run.ended();
    footerScores(entry.run);
  } catch (error) {
    const r = entry.run;
    if (error.name === "AbortError" && untilFinished) r.ended();
    else if (error.name !== "AbortError") {
      r.status = "error";
      r.error = error instanceof ApiError ? error.message : `The stream failed: ${error.message}`;
      r.endedAt = Date.now();
      r.touch();
    }
  } finally {
    // Another conversation may have started a run meanwhile: it is the current one then.
    if (state.current && state.current.controller === controller) state.current = null;
  }
  schedule();
}

/** A network run's bubble, redrawn only when the run changed. */
function networkElement(run) {
  const key = run.runId || "pending-network";
  let el = document.querySelector(`[data-network-id="${CSS.escape(key)}"]`);
  if (!el) el = h("div", { class: "message assistant network", "data-testid": "message-network", "data-network-id": key });
  el.dataset.status = run.status;
  if (state.drawn.get(el) !== run.version) {
    state.drawn.set(el, run.version);
    el.replaceChildren(h("div", { class: "avatar", "aria-hidden": "true" }, initial()), h("div", { class: "bubble" }, networkBody(run, (how) => decideNetwork(run, how))));
  }
  return el;
}

/** Streams a network route's events into `run`. */
async function networkStream(path, body, run) {
  const controller = new AbortController();
  const entry = state.entries.find((e) => e.kind === "network" && e.run === run);
  state.current = { controller, entry, agentId: run.agentId, network: true };
  try {
    await stream(
      path,
      body,
      (event) => {
        const pending = !run.runId;
        run.apply(event);
        if (pending && run.runId) {
          const el = document.querySelector('[data-network-id="pending-network"]');
          if (el) el.dataset.networkId = run.runId;
        }
        schedule();
      },
      { signal: controller.signal },
    );
    run.ended();
  } catch (error) {
    if (error.name !== "AbortError") {
      run.status = "error";
      run.error = error instanceof ApiError ? error.message : `The stream failed: ${error.message}`;
      run.version += 1;
    }
  } finally {
    if (state.current && state.current.controller === controller) state.current = null;
  }
  schedule();
}

/** Approves, declines or resumes what a network run waits for, streaming the rest. */
async function decideNetwork(run, how) {
  if (state.busy || !run.runId) return;
  state.busy = true;
  drawComposer();
  const base = `/api/agents/${encodeURIComponent(run.agentId)}`;
  run.waiting = null;
  run.status = "running";
  run.version += 1;
  if (how === "approve") await networkStream(`${base}/approve-network-tool-call`, { runId: run.runId }, run);
  else if (how === "decline") await networkStream(`${base}/decline-network-tool-call`, { runId: run.runId }, run);
  else await networkStream(`${base}/resume-network`, { runId: run.runId, resumeData: how.resumeData }, run);
  state.busy = state.current !== null;
  drawComposer();
  refreshAfterRun();
}

async function stopRun() {
  const current = state.current;
  if (!current) return;
  if (current.network) {
    // A network is aborted by its run id (the sub-agent, workflow or tool it runs with it);
    // its stream then ends with the abort.
    const networkId = current.entry && current.entry.run.runId;
    if (networkId) {
      try {
        await api(`/api/agents/${encodeURIComponent(current.agentId)}/runs/${encodeURIComponent(networkId)}/abort`, { method: "POST" });
        return;
      } catch (error) {
        toast(`Could not stop the network: ${error.message}`);
      }
    }
    current.controller.abort();
    return;
  }
  const runId = current.entry.run.runId;
  if (runId) {
    try {
      await api(`/api/agents/${encodeURIComponent(current.agentId)}/runs/${encodeURIComponent(runId)}/abort`, { method: "POST" });
      return; // The stream ends with an `abort` event.
    } catch (error) {
      toast(`Could not stop the run: ${error.message}`);
    }
  }
  current.controller.abort();
}

// The agents' live scorers, by agent id: read once, from /api/scores/scorers.
let liveScorers = null;

/** How many live scorers agent `agentId` has (0 when the scorers cannot be read). */
async function liveScorersOf(agentId) {
  if (!liveScorers) {
    try {
      const scorers = await api("/api/scores/scorers");
      liveScorers = new Map();
      for (const s of Object.values(scorers)) {
        for (const id of s.agentIds || []) liveScorers.set(id, (liveScorers.get(id) || 0) + 1);
      }
    } catch {
      return 0;
    }
  }
  return liveScorers.get(agentId) || 0;
}

/** Puts a finished run's live scores in its footer: they are stored after the run ends, so
 *  the footer asks a few times, until each scorer has answered (a sampled-out run has none). */
async function footerScores(run) {
  if (!run.runId || run.status !== "done") return;
  const expected = await liveScorersOf(run.agentId);
  if (!expected) return;
  for (const wait of [250, 750, 1500, 3000]) {
    await new Promise((resolve) => setTimeout(resolve, wait));
    let page;
    try {
      page = await api(`/api/scores/run/${encodeURIComponent(run.runId)}?perPage=100`);
    } catch {
      return;
    }
    if (page.scores.length) {
      run.scores = page.scores;
      run.version += 1;
      schedule();
    }
    if (page.scores.length >= expected) return;
  }
}

function refreshAfterRun() {
  loadThreads();
  loadWaiting();
  loadMemory();
}

// ---------------------------------------------------------------------------------------
// Decisions: approve, decline, resume

function cardKey(d) {
  return `${d.runId}:${d.toolCallId}`;
}

function decisionCard(d) {
  const key = cardKey(d);
  const cached = state.cards.get(key);
  if (cached) return cached;
  const where = d.via && d.via.length ? h("p", { class: "muted" }, `In ${d.via.map((hop) => hop.agentId).join(" → ")}, delegated by this run.`) : null;
  let card;
  const status = h("p", { class: "decision-status", role: "status" });
  if (d.kind === "approval") {
    const reasonId = `reason-${key.replace(/[^a-z0-9]/gi, "")}`;
    const reason = h("input", { type: "text", id: reasonId, "data-testid": "decline-reason", placeholder: "Why not? (optional, the model reads it)" });
    const approve = h("button", { type: "button", class: "primary", "data-testid": "approve" }, "Approve");
    const decline = h("button", { type: "button", class: "danger", "data-testid": "decline" }, "Decline");
    const buttons = h("div", { class: "actions" }, decline, approve);
    const decide = async (approved) => {
      approve.disabled = decline.disabled = reason.disabled = true;
      status.textContent = approved ? "Approved: the run goes on…" : "Declined: the run goes on without it…";
      card.dataset.state = approved ? "approved" : "declined";
      const ok = await continueRun(d, approved ? "approved" : "declined", approved ? "approve-tool-call" : "decline-tool-call", {
        runId: d.runId,
        toolCallId: d.toolCallId,
        fingerprint: d.fingerprint,
        reason: approved ? undefined : reason.value.trim() || undefined,
      });
      if (!ok) {
        approve.disabled = decline.disabled = reason.disabled = false;
        status.textContent = "";
        card.dataset.state = "open";
      } else {
        buttons.remove();
        reason.closest(".field").remove();
        status.textContent = approved ? "Approved." : "Declined.";
      }
    };
    approve.addEventListener("click", () => decide(true));
    decline.addEventListener("click", () => decide(false));
    card = h(
      "div",
      { class: "card decision", "data-testid": "approval", "data-tool": d.toolName, "data-state": "open" },
      h("div", { class: "card-head" }, h("span", { class: "icon-badge", "aria-hidden": "true" }, "!"), h("strong", {}, d.toolName), h("span", {}, " wants to run")),
      where,
      h("div", { class: "card-row" }, h("span", { class: "label" }, "Input"), value(d.args)),
      h("div", { class: "field" }, h("label", { for: reasonId }, "Reason for declining"), reason),
      buttons,
      status,
    );
  } else if (d.suspendPayload && d.suspendPayload.type === "mcp-elicitation") {
    card = mcpQuestionCard(d, where, status);
  } else {
    const question = questionOf(d.suspendPayload);
    const formBox = h("div", {}, h("p", { class: "muted" }, "Loading the form…"));
    card = h(
      "div",
      { class: "card decision", "data-testid": "suspension", "data-tool": d.toolName, "data-state": "open" },
      h("div", { class: "card-head" }, h("span", { class: "icon-badge", "aria-hidden": "true" }, "?"), h("strong", {}, d.toolName), h("span", {}, " needs your input")),
      where,
      question !== undefined ? h("p", { class: "question" }, asText(question)) : null,
      d.suspendPayload && typeof d.suspendPayload === "object" && Object.keys(d.suspendPayload).length > 1 ? json(d.suspendPayload, "Everything the tool sent") : null,
      h("div", { class: "card-row" }, h("span", { class: "label" }, "Input"), value(d.args)),
      formBox,
      status,
    );
    resumeSchemaOf(d).then((schema) => {
      formBox.replaceChildren(
        schemaForm(schema, async (data) => {
          status.textContent = "Sent: the run goes on…";
          const ok = await continueRun(d, "resumed", "resume-stream", { runId: d.runId, toolCallId: d.toolCallId, fingerprint: d.fingerprint, resumeData: data });
          if (!ok) throw new Error(status.dataset.error || "The server refused the data.");
          formBox.replaceChildren();
          status.textContent = `Answered: ${Object.entries(data).map(([k, v]) => `${k} ${v}`).join(", ")}.`;
          card.dataset.state = "resumed";
        }),
      );
    });
  }
  state.cards.set(key, card);
  return card;
}

/**
 * An MCP server's question (an `McpElicitation`): its message, a form of its requested schema
 * (or, for a URL question, the link), answered with MCP's answer shape: accept with the
 * form's content, or decline.
 */
function mcpQuestionCard(d, where, status) {
  const asked = d.suspendPayload;
  const formBox = h("div", {});
  let card;
  const answer = async (resumeData, said) => {
    status.textContent = "Sent: the run goes on…";
    const ok = await continueRun(d, "resumed", "resume-stream", { runId: d.runId, toolCallId: d.toolCallId, fingerprint: d.fingerprint, resumeData });
    if (!ok) throw new Error(status.dataset.error || "The server refused the answer.");
    formBox.replaceChildren();
    status.textContent = said;
    card.dataset.state = "resumed";
  };
  const decline = h("button", { type: "button", class: "danger", "data-testid": "mcp-decline" }, "Decline");
  decline.addEventListener("click", () => answer({ action: "decline" }, "Declined.").catch((e) => (status.textContent = e.message)));
  if (asked.mode === "url" && /^https?:\/\//.test(asked.url || "")) {
    const done = h("button", { type: "button", class: "primary", "data-testid": "mcp-accept" }, "Done");
    done.addEventListener("click", () => answer({ action: "accept" }, "Accepted.").catch((e) => (status.textContent = e.message)));
    formBox.replaceChildren(h("p", {}, h("a", { href: asked.url, target: "_blank", rel: "noopener noreferrer" }, asked.url)), h("div", { class: "actions" }, decline, done));
  } else {
    const schema = asked.requestedSchema || { type: "object", properties: {} };
    formBox.replaceChildren(
      schemaForm(schema, (content) => answer({ action: "accept", content }, `Answered: ${Object.entries(content).map(([k, v]) => `${k} ${v}`).join(", ")}.`), { submitLabel: "Answer", testId: "mcp-form", jsonLabel: "Answer (JSON)" }),
      h("div", { class: "actions" }, decline),
    );
  }
  card = h(
    "div",
    { class: "card decision", "data-testid": "mcp-question", "data-tool": d.toolName, "data-state": "open" },
    h("div", { class: "card-head" }, h("span", { class: "icon-badge", "aria-hidden": "true" }, "?"), h("strong", {}, asked.server), h("span", {}, ` asks (MCP tool ${asked.tool})`)),
    where,
    h("p", { class: "question" }, asText(asked.message)),
    asked.invalidAnswer && asked.invalidAnswer.length ? h("p", { class: "error", role: "alert" }, `The last answer was not taken: ${asked.invalidAnswer.join("; ")}`) : null,
    h("div", { class: "card-row" }, h("span", { class: "label" }, "Input"), value(d.args)),
    formBox,
    status,
  );
  return card;
}

/** A JSON schema as the API gives it: JSON text (Mastra's shape for tools), or an object. */
function schemaValue(schema) {
  if (typeof schema !== "string") return schema;
  try {
    return JSON.parse(schema);
  } catch {
    return null;
  }
}

/** The resume schema of a suspension: from its event, else from the tool's description. */
async function resumeSchemaOf(d) {
  if (d.resumeSchema) return schemaValue(d.resumeSchema);
  const owner = d.via && d.via.length ? d.via[d.via.length - 1].agentId : d.agentId || state.agentId;
  try {
    const tool = await api(`/api/agents/${encodeURIComponent(owner)}/tools/${encodeURIComponent(d.toolName)}`);
    return tool && tool.resumeSchema ? schemaValue(tool.resumeSchema) : null;
  } catch {
    return null;
  }
}

/**
 * Continues a stopped run with a decision (`how`: approved, declined, resumed); false (with a
 * message shown) when the server refuses it.
 */
async function continueRun(d, how, route, body) {
  const agentId = d.agentId || state.agentId;
  if (d.threadId && (d.threadId !== state.threadId || agentId !== state.agentId)) {
    // Decided from the Waiting tab: the run goes on in its own thread.
    await openConversation(agentId, d.threadId);
  }
  const existing = state.runs.get(d.runId);
  const onThisPage = existing && state.entries.some((e) => e.kind === "run" && e.run === existing);
  let run = onThisPage ? existing : null;
  if (!run) {
    run = new Run(d.runId, agentId);
    run.status = "running";
  }
  run.markDecided(d.toolCallId, how);
  const card = state.cards.get(cardKey(d));
  state.busy = true;
  drawComposer();
  let refused = null;
  try {
    // A refusal (409, 422…) comes before any event: check it here, not as a failed run.
    await runStreamChecked(`/api/agents/${encodeURIComponent(agentId)}/${route}`, body, run);
  } catch (error) {
    refused = error;
  }
  state.busy = state.current !== null;
  drawComposer();
  state.waiting = state.waiting.filter((w) => !(w.runId === d.runId && w.toolCallId === d.toolCallId));
  if (refused) {
    run.markDecided(d.toolCallId, undefined);
    if (card) card.querySelector(".decision-status").dataset.error = refused.message;
    toast(`The server refused: ${refused.message}`);
    return false;
  }
  d.state = "done";
  if (!onThisPage && state.threadId) {
    // A run stored before this page: show the thread as stored now, in one piece.
    state.entries = [];
    await loadHistory();
  }
  refreshAfterRun();
  return true;
}

async function runStreamChecked(path, body, run) {
  let started = false;
  const entry = state.entries.find((e) => e.kind === "run" && e.run === run);
  const controller = new AbortController();
  state.current = { controller, entry: { run }, agentId: run.agentId };
  const failed = await new Promise((resolve) => {
    stream(path, body, (event) => {
      if (!started) {
        started = true;
        if (!entry) {
          state.entries.push({ kind: "run", run });
          state.runs.set(run.runId, run);
          state.selectedRunId = run.runId;
          drawChat();
        }
      }
      if (event.runId !== run.runId) return;
      run.apply(event);
      schedule();
    }, { signal: controller.signal })
      .then(() => resolve(null))
      .catch((error) => resolve(error));
  });
  if (state.current && state.current.controller === controller) state.current = null;
  if (failed && !started) throw failed;
  if (failed) {
    run.status = "error";
    run.error = failed.message;
    run.touch();
  } else run.ended();
  schedule();
}

// ---------------------------------------------------------------------------------------
// Inspector

function selectTab(name) {
  for (const tab of document.querySelectorAll('[role="tab"]')) {
    const on = tab.id === `tab-${name}`;
    tab.setAttribute("aria-selected", on ? "true" : "false");
    tab.tabIndex = on ? 0 : -1;
    $(tab.getAttribute("aria-controls")).hidden = !on;
  }
  if (name === "memory") loadMemory();
  if (name === "waiting") loadWaiting();
}

function inspect(runId) {
  state.selectedRunId = runId;
  selectTab("run");
  drawInspector();
}

function drawInspector() {
  const select = $("run-select");
  const runs = [...state.runs.values()];
  const options = runs
    .slice()
    .reverse()
    .map((r) => h("option", { value: r.runId, selected: r.runId === state.selectedRunId }, `${new Date(r.startedAt).toLocaleTimeString()} · ${r.agentId} · ${r.status}`));
  select.replaceChildren(...(options.length ? options : [h("option", { value: "" }, "No runs yet on this page")]));
  const run = state.runs.get(state.selectedRunId) || runs[runs.length - 1] || null;
  const tree = delegationTree(run);
  $("tree").replaceChildren(run && run.delegations.length ? tree : h("p", { class: "empty" }, run ? "This run delegated to no sub-agent." : "Runs that delegate show their sub-agents here, live."));
  $("timeline").replaceChildren(timeline(run));
}

function drawAgentInfo() {
  const a = agent();
  const box = $("agent-info");
  if (!a) {
    box.replaceChildren();
    return;
  }
  const tools = Object.values(a.tools || {}).filter((t) => !t.id.startsWith("agent-"));
  box.replaceChildren(
    h("h3", {}, a.name || a.id),
    h("dl", { class: "kv" }, h("dt", {}, "id"), h("dd", {}, a.id), h("dt", {}, "model"), h("dd", {}, a.modelId ? (a.provider ? a.provider + "/" : "") + a.modelId : "—"), h("dt", {}, "memory"), h("dd", {}, a.hasMemory ? "yes" : "no"), a.defaultOptions && a.defaultOptions.maxSteps ? [h("dt", {}, "max steps"), h("dd", {}, a.defaultOptions.maxSteps)] : null),
    a.description ? h("p", {}, a.description) : null,
    h("h4", {}, "Instructions"),
    h("div", { class: "instructions", "data-testid": "agent-instructions" }, a.instructions || h("span", { class: "muted" }, "dynamic or none")),
    h("h4", {}, "Tools"),
    tools.length
      ? h("ul", { class: "tool-list" }, tools.map((t) => h("li", {}, h("strong", {}, t.id), t.resumeSchema ? h("span", { class: "chip" }, "asks for input") : null, t.clientTool ? h("span", { class: "chip" }, "client tool") : null, t.description ? h("div", { class: "muted" }, t.description) : null, json(schemaValue(t.inputSchema), "input schema"))))
      : h("p", { class: "muted" }, "No tools."),
    skillsSection(a),
    h("h4", {}, "Sub-agents"),
    Object.keys(a.agents || {}).length
      ? h("ul", { class: "tool-list" }, Object.keys(a.agents).map((id) => h("li", {}, state.agents[id] ? h("button", { type: "button", class: "link", onclick: () => openConversation(id, null) }, id) : h("strong", {}, id))))
      : h("p", { class: "muted" }, "None."),
    editorSection(a, {
      // A version was published: the agent as runs now see it.
      onPublished: (fresh) => {
        state.agents[fresh.id] = fresh;
        if (fresh.id === state.agentId) box.querySelector('[data-testid="agent-instructions"]').textContent = fresh.instructions || "";
      },
    }),
  );
}

async function loadMemory() {
  const wm = $("working-memory");
  const obs = $("observations");
  const a = agent();
  if (!a || !a.hasMemory) {
    wm.replaceChildren(h("p", { class: "empty" }, "This agent has no memory."));
    obs.replaceChildren();
    return;
  }
  if (!state.threadId) {
    wm.replaceChildren(h("p", { class: "empty" }, "Open or start a thread to see what the agent remembers."));
    obs.replaceChildren(h("p", { class: "empty" }, "None yet."));
    return;
  }
  const threadId = state.threadId;
  const [working, observations] = await Promise.allSettled([
    api(`/api/memory/threads/${encodeURIComponent(threadId)}/working-memory${query({ resourceId: resource(), agentId: a.id })}`),
    api(`/api/memory/observational-memory${query({ threadId, resourceId: resource(), agentId: a.id })}`),
  ]);
  if (threadId !== state.threadId) return;
  if (working.status === "fulfilled") {
    const w = working.value || {};
    wm.replaceChildren(
      w.workingMemory
        ? h("div", {}, h("pre", { class: "working-memory" }, w.workingMemory), h("p", { class: "hint" }, `Kept per ${w.source === "resource" ? "resource (every thread of it)" : "thread"}.`))
        : h(
            "div",
            {},
            h("p", { class: "empty" }, w.threadExists === false ? "The thread is not stored yet." : "Nothing remembered yet."),
            w.workingMemoryTemplate ? h("p", { class: "hint" }, "The agent keeps it in this shape:") : null,
            w.workingMemoryTemplate ? h("pre", { class: "working-memory muted" }, w.workingMemoryTemplate) : null,
          ),
    );
  } else {
    wm.replaceChildren(h("p", { class: "empty" }, `Not available: ${working.reason.message}`));
  }
  if (observations.status === "fulfilled") {
    const body = observations.value || {};
    const list = body.observations || (body.record && body.record.observations) || [];
    const items = Array.isArray(list) ? list : [list];
    let empty = "No observations yet: they appear once a long thread is condensed.";
    if (body.enabled === false) empty = "Observational memory is off for this agent.";
    obs.replaceChildren(
      items.length
        ? h("ul", { class: "observations" }, items.map((o) => h("li", {}, observationText(o))))
        : h("p", { class: "empty" }, empty),
    );
  } else {
    obs.replaceChildren(h("p", { class: "empty" }, `Not available: ${observations.reason.message}`));
  }
}

function observationText(o) {
  if (typeof o === "string") return o;
  if (o && typeof o === "object") {
    const text = o.text || o.content || o.observation || o.observations;
    const when = o.date || o.createdAt || o.observedAt;
    if (typeof text === "string") return h("span", {}, when ? h("span", { class: "muted" }, `${new Date(when).toLocaleString()} · `) : null, text);
  }
  return value(o);
}

async function loadWaiting() {
  const box = $("suspended-runs");
  const a = agent();
  if (!a) return;
  let runs = [];
  try {
    const body = await api(`/api/agents/${encodeURIComponent(a.id)}/suspended-runs${query({ resourceId: a.hasMemory ? resource() : undefined })}`);
    runs = (body && body.runs) || [];
  } catch (error) {
    box.replaceChildren(h("p", { class: "empty" }, `Not available: ${error.message}`));
    return;
  }
  if (a.id !== state.agentId) return;
  const count = $("waiting-count");
  count.hidden = runs.length === 0;
  count.textContent = String(runs.length);
  const decisions = [];
  for (const run of runs) {
    for (const call of run.toolCalls || []) {
      const kind = call.waiting && call.waiting.kind === "resume" ? "resume" : call.waiting && call.waiting.kind === "approval" ? "approval" : null;
      if (!kind) continue;
      decisions.push({ run, d: { kind, runId: run.runId, agentId: a.id, threadId: run.threadId, toolCallId: call.toolCallId, toolName: call.toolName, args: call.args, fingerprint: call.fingerprint, via: call.via || [], suspendPayload: call.waiting.payload, state: "open" } });
    }
  }
  // Decisions on this thread's stored runs also show at the end of the chat.
  state.waiting = decisions.filter(({ run }) => state.threadId && run.threadId === state.threadId).map(({ d }) => d);
  drawChat();
  if (!runs.length) {
    box.replaceChildren(h("p", { class: "empty" }, "Nothing waits for a person."));
    return;
  }
  box.replaceChildren(
    ...runs.map((run) =>
      h(
        "div",
        { class: "card waiting-run", "data-testid": "suspended-run", "data-run-id": run.runId },
        h("div", { class: "card-head" }, h("strong", {}, `Run ${clip(run.runId, 14)}`), h("span", { class: "muted" }, run.suspendedAt ? ago(run.suspendedAt) : "")),
        run.threadId
          ? h("p", {}, "On thread ", run.threadId === state.threadId ? h("strong", {}, "this thread") : h("button", { type: "button", class: "link", onclick: () => openConversation(a.id, run.threadId) }, threadName(run.threadId)))
          : null,
        decisions.filter((x) => x.run === run).map(({ d }) => (run.threadId && run.threadId === state.threadId ? h("p", { class: "muted" }, `${d.toolName}: decide in the chat.`) : decisionCard(d))),
        h("div", { class: "actions" }, h("button", { type: "button", class: "danger small", onclick: () => abortStored(a.id, run.runId) }, "Abort run")),
      ),
    ),
  );
}

function threadName(threadId) {
  const t = state.threads.find((x) => x.id === threadId);
  return t && t.title ? t.title : clip(threadId, 18);
}

async function abortStored(agentId, runId) {
  if (!confirm("Abort this run? It will not continue.")) return;
  try {
    await api(`/api/agents/${encodeURIComponent(agentId)}/runs/${encodeURIComponent(runId)}/abort`, { method: "POST" });
  } catch (error) {
    toast(`Could not abort: ${error.message}`);
  }
  await loadWaiting();
}

// ---------------------------------------------------------------------------------------
// Small things

function notice(kind, title, text, ...extra) {
  return h("div", { class: `notice notice-${kind}`, role: kind === "error" ? "alert" : "status" }, h("strong", {}, title), text ? h("p", {}, text) : null, ...extra);
}

function toast(text) {
  const el = h("div", { class: "toast", role: "alert" }, text);
  document.body.append(el);
  setTimeout(() => el.remove(), 6000);
}
