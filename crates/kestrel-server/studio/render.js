// Drawing: a small element helper, and the pieces of the page that show runs and messages.
//
// Values are shown as text a person reads: strings as they are, small objects as "key: value"
// lists, anything larger folded behind a "JSON" toggle.

import { STATUS_LABELS, asText, clip, delegatedAgent, promptOf, questionOf, reasonText, totalTokens } from "./runs.js";

/** `h("div", {class: "x", onclick: f}, child, "text")`: an element. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    // Through the CSSOM: the page's Content-Security-Policy refuses inline style attributes.
    else if (key === "style" && typeof value === "object") for (const [k, v] of Object.entries(value)) el.style.setProperty(k, String(v));
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.append(child);
    else el.append(document.createTextNode(String(child)));
  }
}

/** A value for reading: text, a key/value list, or a list; big ones behind a toggle. */
export function value(v, { depth = 0 } = {}) {
  if (v === undefined) return h("span", { class: "muted" }, "—");
  if (v === null) return h("span", { class: "muted" }, "none");
  if (typeof v === "string") return h("span", { class: "text-value" }, v);
  if (typeof v !== "object") return h("span", { class: "scalar" }, String(v));
  const entries = Array.isArray(v) ? v.map((x, i) => [i + 1, x]) : Object.entries(v);
  const flat = entries.every(([, x]) => x === null || typeof x !== "object" || (Array.isArray(x) && x.every((y) => typeof y !== "object")));
  if (depth > 1 || entries.length > 12 || (!flat && depth > 0)) return json(v);
  if (entries.length === 0) return h("span", { class: "muted" }, Array.isArray(v) ? "empty list" : "nothing");
  return h(
    "dl",
    { class: "kv" },
    entries.map(([k, x]) => [h("dt", {}, String(k)), h("dd", {}, Array.isArray(x) && flat ? x.join(", ") : value(x, { depth: depth + 1 }))]),
  );
}

/** A JSON details toggle. */
export function json(v, label = "JSON") {
  return h("details", { class: "json" }, h("summary", {}, label), h("pre", {}, JSON.stringify(v, null, 2)));
}

/** A status pill. */
export function pill(status, text) {
  return h("span", { class: `pill pill-${status}`, "data-testid": "run-status", "data-status": status }, text || STATUS_LABELS[status] || status);
}

const CALL_STATUS = {
  preparing: ["running", "Preparing…"],
  running: ["running", "Running…"],
  done: ["done", "Done"],
  error: ["error", "Failed"],
  approval: ["waiting", "Needs approval"],
  suspended: ["waiting", "Waiting for input"],
  background: ["running", "In the background"],
  declined: ["error", "Declined"],
  missing: ["muted", "No result"],
  cut: ["aborted", "Not completed"],
};

function callPill(status) {
  const [kind, text] = CALL_STATUS[status] || ["muted", status];
  return h("span", { class: `pill pill-${kind}` }, text);
}

const DECIDED = { approved: "Approved by you", declined: "Declined by you", resumed: "Answered by you" };

/**
 * A tool call card (a delegation gets a delegation card). `swap(call)` may return what to draw
 * in a call's place instead (the form of a decision it waits for), at any depth.
 */
export function toolCard(call, swap) {
  const instead = swap && swap(call);
  if (instead) return instead;
  const sub = delegatedAgent(call.name);
  if (sub) return delegationCard(call, sub, swap);
  const args = call.args !== undefined ? call.args : call.argsText || undefined;
  return h(
    "div",
    { class: `card tool tool-${call.status}`, "data-testid": "tool-call", "data-tool": call.name, "data-status": call.status },
    h("div", { class: "card-head" }, h("span", { class: "icon", "aria-hidden": "true" }, "⚙"), h("strong", {}, call.name), call.decided ? h("span", { class: "chip" }, DECIDED[call.decided]) : null, callPill(call.status)),
    args !== undefined && args !== "" ? h("div", { class: "card-row" }, h("span", { class: "label" }, "Input"), value(args)) : null,
    call.outputs.length ? h("div", { class: "card-row" }, h("span", { class: "label" }, "Output"), value(call.outputs.length === 1 ? call.outputs[0] : call.outputs)) : null,
    call.result !== undefined ? resultRow(call.result) : null,
    call.error ? h("div", { class: "card-row error-text" }, h("span", { class: "label" }, "Error"), call.error) : null,
    call.suspendPayload !== undefined && call.status === "suspended" ? h("div", { class: "card-row" }, h("span", { class: "label" }, "Asks"), value(questionOf(call.suspendPayload))) : null,
  );
}

/**
 * The passages a retrieval tool found (Kestrel's and Mastra's vector query tool answer
 * `{relevantContext, sources: [{id, metadata, score, document}]}`), or null for other results.
 */
export function sourcesOf(result) {
  if (!result || typeof result !== "object" || !Array.isArray(result.sources)) return null;
  const passages = result.sources.filter((s) => s && typeof s === "object" && typeof s.document === "string");
  return passages.length === result.sources.length ? passages : null;
}

/** A tool's result: the sources it retrieved, as a list, or the value itself. */
function resultRow(result) {
  const sources = sourcesOf(result);
  if (!sources) return h("div", { class: "card-row", "data-testid": "tool-result" }, h("span", { class: "label" }, "Result"), value(result));
  const list = sources.length
    ? h(
        "ol",
        { class: "sources", "data-testid": "sources" },
        sources.map((s) => {
          const name = (s.metadata && typeof s.metadata.source === "string" && s.metadata.source) || s.id;
          const score = typeof s.score === "number" ? s.score.toFixed(3) : "";
          return h(
            "li",
            { class: "source", "data-testid": "source", "data-source": name },
            h("div", { class: "source-head" }, h("strong", {}, name), score ? h("span", { class: "muted" }, `score ${score}`) : null),
            h("div", { class: "source-text" }, clip(s.document.replace(/\s+/g, " ").trim(), 320)),
          );
        }),
      )
    : h("span", { class: "muted" }, "No passages found");
  return h("div", { class: "card-row", "data-testid": "tool-result" }, h("span", { class: "label" }, "Sources"), h("div", {}, list, json(result)));
}

/** A delegation: the prompt, then the sub-agent's live output (or its final answer). */
export function delegationCard(call, sub, swap) {
  const child = call.delegation;
  const status = child ? child.status : { done: "done", error: "error", cut: "aborted", missing: "aborted" }[call.status] || "running";
  let body = null;
  if (child) body = runBody(child, swap);
  else if (call.result !== undefined) body = h("div", { class: "assistant-text" }, asText(call.result));
  else if (call.args === undefined && call.argsText) body = h("p", { class: "muted" }, `Writing the prompt: ${clip(call.argsText, 200)}`);
  return h(
    "div",
    { class: "card delegation", "data-testid": "delegation", "data-agent": sub, "data-status": status },
    h("div", { class: "card-head" }, h("span", { class: "icon", "aria-hidden": "true" }, "↳"), h("span", {}, "Delegated to "), h("strong", {}, sub), child ? pill(status) : callPill(call.status)),
    call.args !== undefined ? h("p", { class: "prompt" }, clip(promptOf(call.args), 400)) : null,
    h("div", { class: "delegation-body" }, body),
    call.error ? h("p", { class: "error-text" }, call.error) : null,
  );
}

/** A run's text, reasoning and tool calls, in order (`swap`: see `toolCard`). */
export function runBody(run, swap) {
  return run.items.map((item) => {
    if (item.kind === "network-record") return networkRecordCard(item);
    if (item.kind === "network-check") {
      return h("details", { class: `network-check ${item.passed ? "passed" : "failed"}`, "data-testid": "network-check-stored" }, h("summary", {}, item.passed ? "✓ Completion check passed" : "✗ Completion check: not complete"), h("pre", {}, item.text));
    }
    if (item.kind === "text") return item.text ? h("div", { class: "assistant-text", "data-testid": "assistant-text" }, item.text) : null;
    if (item.kind === "reasoning") return item.text ? h("details", { class: "reasoning" }, h("summary", {}, "Reasoning"), h("div", {}, item.text)) : null;
    return toolCard(item.call, swap);
  });
}

/** A stored network iteration: where the router sent the task, why, and what came back. */
function networkRecordCard(item) {
  const result = item.finalResult || {};
  const shown = result.error !== undefined ? result.error : result.text !== undefined ? result.text : result.runResult !== undefined ? result.runResult : result.result;
  return h(
    "div",
    { class: "card network-iteration", "data-testid": "network-record", "data-primitive": item.primitiveId },
    h("div", { class: "card-head" }, h("span", { class: "icon", "aria-hidden": "true" }, "⇢"), h("span", {}, `Network: ${item.primitiveType} `), h("code", {}, item.primitiveId)),
    item.selectionReason ? h("p", { class: "network-reason" }, item.selectionReason) : null,
    shown !== undefined ? h("div", { class: "card-row" }, h("span", { class: "label" }, result.error !== undefined ? "Error" : "Result"), value(shown)) : null,
  );
}

/** The footer of a run: status, steps, tokens, time. */
export function runFooter(run) {
  const bits = [];
  if (run.steps) bits.push(`${run.steps} step${run.steps === 1 ? "" : "s"}`);
  const tokens = totalTokens(run.usage);
  if (tokens) bits.push(`${tokens} tokens`);
  if (run.endedAt) bits.push(`${((run.endedAt - run.startedAt) / 1000).toFixed(1)} s`);
  return h(
    "div",
    { class: "run-footer" },
    pill(run.status),
    run.status === "running" ? h("span", { class: "spinner", "aria-hidden": "true" }) : null,
    h("span", { class: "muted" }, bits.join(" · ")),
    run.error ? h("span", { class: "error-text" }, run.error) : null,
    // Its live scores, once stored (a failed scoring shows as such).
    (run.scores || []).map((s) =>
      h("span", { class: "score-chip", "data-testid": "footer-score", "data-scorer": s.scorerId, title: s.reason || (s.metadata && s.metadata.error && s.metadata.error.message) || "" },
        `${s.scorerId}: ${typeof s.score === "number" ? s.score.toFixed(2) : s.notScorable ? "not scorable" : "failed"}`)),
    // The run's trace, when the server traces (and the run is done with its drive).
    document.body.dataset.tracing === "on" && run.runId && run.status !== "running" && !run.depth
      ? h("a", { class: "run-trace", href: `#traces/run/${encodeURIComponent(run.runId)}`, "data-testid": "run-trace" }, "Trace")
      : null,
  );
}

/** The timeline of a run: one readable row per event (text streams folded into one row). */
export function timeline(run) {
  if (!run) return h("p", { class: "empty" }, "Send a message to see its run here, event by event.");
  return h(
    "ol",
    { class: "timeline", "data-testid": "timeline" },
    run.timeline.map((row) =>
      h(
        "li",
        { class: `row row-${row.kind}`, style: { "--depth": row.depth }, "data-testid": "timeline-row", "data-kind": row.kind },
        h("span", { class: "at" }, `${(row.at / 1000).toFixed(2)}s`),
        h("span", { class: "dot", "aria-hidden": "true" }),
        h("div", { class: "what" }, row.depth ? h("span", { class: "agent-tag" }, row.agent) : null, h("span", {}, row.text), row.event ? json(row.event, "details") : null),
      ),
    ),
  );
}

/** The delegation tree of a run: the run, each sub-agent's run under it, their live output. */
export function delegationTree(run) {
  if (!run) return null;
  const node = (r, label, call) =>
    h(
      "li",
      { class: "tree-node", "data-testid": r === run ? "delegation-root" : "delegation-node", "data-agent": r.agentId, "data-status": r.status },
      h("div", { class: "tree-head" }, h("strong", {}, label), pill(r.status), r.steps ? h("span", { class: "muted" }, `${r.steps} step${r.steps === 1 ? "" : "s"}`) : null),
      call && call.args !== undefined ? h("div", { class: "tree-prompt" }, clip(promptOf(call.args), 160)) : null,
      r !== run ? h("div", { class: "tree-output", "data-testid": "delegation-output" }, r.text || h("span", { class: "muted" }, r.status === "running" ? "working…" : "no text")) : null,
      toolsLine(r),
      r.delegations.length ? h("ul", {}, r.delegations.map((c) => node(c.delegation, c.delegation.agentId, c))) : null,
    );
  return h("ul", { class: "tree", "data-testid": "delegation-tree" }, node(run, run.agentId, null));
}

function toolsLine(run) {
  const plain = [...run.calls.values()].filter((c) => !c.delegation && !delegatedAgent(c.name));
  if (!plain.length) return null;
  return h("div", { class: "tree-tools" }, plain.map((c) => h("span", { class: `chip chip-${c.status}` }, `${c.name}: ${(CALL_STATUS[c.status] || [null, c.status])[1]}`)));
}

/**
 * Stored messages (Mastra's `MastraDBMessage`: `content.parts`, each tool call a
 * `tool-invocation` part holding its result) as chat entries: one bubble per user message, one
 * per assistant turn (its steps' text and tool calls).
 */
export function storedTurns(messages) {
  const turns = [];
  let current = null;
  for (const m of messages) {
    if (m.role === "system") continue;
    if (m.role === "user") {
      current = null;
      turns.push({ role: "user", text: textOf(m), id: m.id });
      continue;
    }
    if (!current) {
      current = { role: "assistant", items: [], calls: [], status: m.status, id: m.id };
      turns.push(current);
    }
    if (m.status && m.status !== "complete") current.status = m.status;
    for (const p of partsOf(m)) {
      const record = p.type === "text" && p.text ? networkItem(p.text) : null;
      if (record) current.items.push(record);
      else if (p.type === "text" && p.text) current.items.push({ kind: "text", text: p.text });
      else if (p.type === "reasoning" && p.reasoning) current.items.push({ kind: "reasoning", text: p.reasoning });
      else if (p.type === "tool-invocation" && p.toolInvocation) {
        const t = p.toolInvocation;
        const done = t.state === "result";
        const known = current.calls.find((c) => c.id === t.toolCallId);
        const call = known || {
          id: t.toolCallId,
          name: t.toolName,
          args: t.args,
          argsText: "",
          status: "missing",
          result: undefined,
          error: null,
          outputs: [],
          delegation: null,
        };
        if (done) {
          call.status = t.isError ? "error" : "done";
          call.result = t.isError ? undefined : t.result;
          call.error = t.isError ? asText(t.result) : null;
        }
        if (!known) {
          current.items.push({ kind: "tool", call });
          current.calls.push(call);
        }
      }
    }
  }
  return turns;
}

/** A stored message's parts. */
function partsOf(message) {
  return (message.content && message.content.parts) || [];
}

/**
 * A network's own record in a thread, read back: an iteration (`{"isNetwork": true, …}`, as
 * Mastra saves it) or a completion check's feedback; null for any other text.
 */
export function networkItem(text) {
  const trimmed = text.trimStart();
  if (trimmed.startsWith("#### Completion Check Results")) {
    return { kind: "network-check", passed: trimmed.includes("✅ COMPLETE"), text: trimmed };
  }
  if (!trimmed.startsWith("{")) return null;
  let record;
  try {
    record = JSON.parse(trimmed);
  } catch {
    return null;
  }
  if (!record || record.isNetwork !== true) return null;
  return {
    kind: "network-record",
    primitiveType: record.primitiveType,
    primitiveId: record.primitiveId,
    selectionReason: record.selectionReason,
    input: record.input,
    finalResult: record.finalResult,
  };
}

function textOf(message) {
  return partsOf(message)
    .filter((p) => p.type === "text")
    .map((p) => p.text)
    .join("");
}

/** A stored assistant turn's body (`swap`: see `toolCard`). */
export function storedBody(turn, swap) {
  return runBody(turn, swap);
}

/** "3 minutes ago", "yesterday", or a date. */
export function ago(when) {
  const t = typeof when === "number" ? when : Date.parse(when);
  if (!Number.isFinite(t)) return "";
  const s = Math.round((Date.now() - t) / 1000);
  if (s < 45) return "just now";
  if (s < 90) return "a minute ago";
  const m = Math.round(s / 60);
  if (m < 45) return `${m} minutes ago`;
  const hrs = Math.round(m / 60);
  if (hrs < 24) return `${hrs} hour${hrs === 1 ? "" : "s"} ago`;
  const d = Math.round(hrs / 24);
  if (d < 2) return "yesterday";
  if (d < 30) return `${d} days ago`;
  return new Date(t).toLocaleDateString();
}

export { reasonText };
