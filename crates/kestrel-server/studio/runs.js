// Runs as the Studio sees them: the events of a stream folded into a model the page draws.
//
// Every event is `{type, runId, from, payload}`. A sub-agent's events reach its parent's stream
// as `tool-output` events of the delegation's tool call (tool name `agent-<id>`), with the
// sub-agent's own event as `payload.output`; they are folded into a child run hanging off that
// call, at any depth. The timeline of the top run lists everyone's events, indented by depth.

/** The prefix of delegation tool names. */
export const DELEGATION_PREFIX = "agent-";

/** The sub-agent id a tool name delegates to, or null. */
export function delegatedAgent(toolName) {
  return typeof toolName === "string" && toolName.startsWith(DELEGATION_PREFIX)
    ? toolName.slice(DELEGATION_PREFIX.length)
    : null;
}

/** Status names a person reads. */
export const STATUS_LABELS = {
  running: "Running",
  waiting: "Waiting for you",
  done: "Done",
  error: "Failed",
  aborted: "Stopped",
  blocked: "Blocked",
};

/** One run: its text, reasoning and tool calls in order, its status, and its timeline. */
export class Run {
  constructor(runId, agentId, { depth = 0, root = null } = {}) {
    this.runId = runId;
    this.agentId = agentId;
    this.depth = depth;
    this.root = root || this;
    this.status = "running";
    /** In order: {kind: "text"|"reasoning", id, text} and {kind: "tool", call}. */
    this.items = [];
    /** Tool calls by id: {id, name, args, argsText, status, result, error, outputs, delegation}. */
    this.calls = new Map();
    /** Only on the top run: every row of every depth. */
    this.timeline = [];
    /** Only on the top run: decisions a person can take, by tool call id. */
    this.decisions = new Map();
    this.steps = 0;
    this.usage = null;
    this.error = null;
    this.finishReason = null;
    this.startedAt = Date.now();
    this.endedAt = null;
    this.textRows = new Map();
    /** Only on the top run: how a person decided on a call (`approved`, `declined`, `resumed`). */
    this.decided = new Map();
    /** Bumped on every change, so the page redraws only what changed. */
    this.version = 0;
  }

  /** The run's text so far. */
  get text() {
    return this.items
      .filter((item) => item.kind === "text")
      .map((item) => item.text)
      .join("");
  }

  /** Decisions still open. */
  get openDecisions() {
    return [...this.decisions.values()].filter((d) => d.state !== "done");
  }

  /** Every delegation of this run, in order. */
  get delegations() {
    return this.items
      .filter((item) => item.kind === "tool" && item.call.delegation)
      .map((item) => item.call);
  }

  /** Records a person's decision on a call, shown on its card. */
  markDecided(toolCallId, how) {
    const root = this.root;
    const call = root.findCall(toolCallId);
    if (how) {
      root.decided.set(toolCallId, how);
      const name = (call && call.name) || (root.decisions.get(toolCallId) || {}).toolName || "the tool";
      root.row("decision", `You ${how === "resumed" ? "answered" : how} ${name}: the run continues`, null);
      root.status = "running";
      root.endedAt = null;
    } else {
      root.decided.delete(toolCallId);
    }
    if (call) call.decided = how;
    this.touch();
  }

  /** The tool call with this id, in this run or any of its sub-agents' runs. */
  findCall(id) {
    if (this.calls.has(id)) return this.calls.get(id);
    for (const call of this.calls.values()) {
      const found = call.delegation && call.delegation.findCall(id);
      if (found) return found;
    }
    return null;
  }

  touch() {
    this.version += 1;
    if (this.root !== this) this.root.touch();
  }

  row(kind, text, event, extra = {}) {
    const row = {
      at: Date.now() - this.root.startedAt,
      kind,
      text,
      agent: this.agentId,
      depth: this.depth,
      event,
      ...extra,
    };
    this.root.timeline.push(row);
    return row;
  }

  call(id, name) {
    let call = this.calls.get(id);
    if (!call) {
      call = {
        id,
        name: name || "tool",
        args: undefined,
        argsText: "",
        status: "preparing",
        result: undefined,
        error: null,
        outputs: [],
        delegation: null,
        suspendPayload: undefined,
        decided: this.root.decided.get(id),
      };
      this.calls.set(id, call);
      this.items.push({ kind: "tool", call });
    } else if (name && call.name === "tool") {
      call.name = name;
    }
    return call;
  }

  part(kind, id) {
    let part = this.items.find((item) => item.kind === kind && item.id === id);
    if (!part) {
      part = { kind, id, text: "" };
      this.items.push(part);
    }
    return part;
  }

  /** Folds one event in. */
  apply(event) {
    const p = event.payload || {};
    switch (event.type) {
      case "start":
        if (this.status !== "running" || this.endedAt) {
          this.row("start", "Continued", event);
        } else {
          this.row("start", `Run started (${p.id || this.agentId})`, event);
        }
        this.status = "running";
        this.endedAt = null;
        if (p.id && !this.agentId) this.agentId = p.id;
        break;
      case "step-start":
        this.steps += 1;
        this.row("step", `Step ${this.steps}`, event);
        break;
      case "text-start":
      case "reasoning-start": {
        const kind = event.type.startsWith("text") ? "text" : "reasoning";
        this.part(kind, p.id);
        this.textRows.set(
          `${kind}:${p.id}`,
          this.row(kind, kind === "text" ? "Writing…" : "Thinking…", event, { chars: 0 }),
        );
        break;
      }
      case "text-delta":
      case "reasoning-delta": {
        const kind = event.type.startsWith("text") ? "text" : "reasoning";
        const part = this.part(kind, p.id);
        part.text += p.text || "";
        const key = `${kind}:${p.id}`;
        let row = this.textRows.get(key);
        if (!row) {
          row = this.row(kind, "", event, { chars: 0 });
          this.textRows.set(key, row);
        }
        row.chars = part.text.length;
        row.text = `${kind === "text" ? "Wrote" : "Thought"}: “${clip(part.text, 80)}”`;
        row.event = { ...event, payload: { ...p, text: part.text } };
        break;
      }
      case "text-end":
      case "reasoning-end":
        break;
      case "tool-call-input-streaming-start": {
        const call = this.call(p.toolCallId, p.toolName);
        this.textRows.set(`call:${call.id}`, this.row("tool", `Preparing ${call.name}…`, event));
        break;
      }
      case "tool-call-delta": {
        const call = this.call(p.toolCallId, p.toolName);
        call.argsText += p.argsTextDelta || "";
        const row = this.textRows.get(`call:${call.id}`);
        if (row) {
          row.text = `Preparing ${call.name}: ${call.argsText.length} characters of input`;
          row.event = { ...event, payload: { ...p, argsTextDelta: call.argsText } };
        }
        break;
      }
      case "tool-call-input-streaming-end":
        break;
      case "tool-call": {
        const call = this.call(p.toolCallId, p.toolName);
        call.args = p.args;
        call.status = "running";
        const sub = delegatedAgent(call.name);
        this.row(
          sub ? "delegate" : "tool",
          sub ? `Delegated to ${sub}: “${clip(promptOf(p.args), 80)}”` : `Called ${call.name}(${inline(p.args)})`,
          event,
        );
        break;
      }
      case "tool-result": {
        const call = this.call(p.toolCallId, p.toolName);
        call.status = "done";
        call.result = p.result;
        if (call.args === undefined) call.args = p.args;
        const sub = delegatedAgent(call.name);
        if (call.delegation && call.delegation.status === "running") call.delegation.status = "done";
        this.row(
          "result",
          sub ? `${sub} answered: “${clip(asText(p.result), 80)}”` : `${call.name} returned ${clip(inline(p.result), 100)}`,
          event,
        );
        this.resolve(p.toolCallId);
        break;
      }
      case "tool-error": {
        const call = this.call(p.toolCallId, p.toolName);
        call.status = "error";
        call.error = p.error;
        if (call.delegation && call.delegation.status === "running") call.delegation.status = "error";
        this.row("error", `${call.name} failed: ${clip(p.error, 100)}`, event);
        this.resolve(p.toolCallId);
        break;
      }
      case "tool-output": {
        const call = this.call(p.toolCallId, p.toolName);
        const sub = delegatedAgent(call.name);
        const nested = p.output;
        if (sub && nested && typeof nested === "object" && typeof nested.type === "string") {
          if (!call.delegation) {
            call.delegation = new Run(nested.runId, sub, { depth: this.depth + 1, root: this.root });
          }
          call.delegation.apply(nested);
        } else {
          call.outputs.push(p.output);
          this.row("output", `${call.name} wrote ${clip(inline(p.output), 100)}`, event);
        }
        break;
      }
      case "tool-call-approval":
      case "tool-call-suspended": {
        const approval = event.type === "tool-call-approval";
        const call = this.call(p.toolCallId, p.toolName);
        if (call.args === undefined) call.args = p.args;
        call.status = approval ? "approval" : "suspended";
        if (!approval) call.suspendPayload = p.suspendPayload;
        this.row(
          "wait",
          approval ? `${p.toolName} waits for your approval` : `${p.toolName} asks: ${clip(asText(questionOf(p.suspendPayload)), 100)}`,
          event,
        );
        // A sub-agent's stop reaches the top run as its own event (with `via`): decide there.
        if (this.depth === 0) {
          this.decisions.set(p.toolCallId, {
            kind: approval ? "approval" : "resume",
            runId: this.runId,
            agentId: this.agentId,
            toolCallId: p.toolCallId,
            toolName: p.toolName,
            args: p.args,
            fingerprint: p.fingerprint,
            resumeSchema: approval ? undefined : p.resumeSchema,
            suspendPayload: approval ? undefined : p.suspendPayload,
            via: p.via || [],
            state: "open",
          });
        }
        break;
      }
      case "step-finish":
        if (p.output && p.output.usage) this.row("step-end", `Step ${this.steps} done (${reasonText(p.stepResult && p.stepResult.reason)})`, event);
        break;
      case "finish": {
        this.settleCalls();
        this.finishReason = p.stepResult ? p.stepResult.reason : null;
        this.usage = p.output ? p.output.usage : null;
        this.endedAt = Date.now();
        const waiting = this.openDecisions.length > 0 || this.finishReason === "suspended" || [...this.calls.values()].some((c) => c.status === "approval" || c.status === "suspended");
        if (this.finishReason === "tripwire") {
          // The `tripwire` event before it said why.
          this.status = "blocked";
          break;
        }
        this.status = waiting ? "waiting" : "done";
        const tokens = this.usage ? totalTokens(this.usage) : null;
        this.row(
          waiting ? "wait" : "finish",
          waiting ? "Stopped: waiting for a person" : `Finished${tokens ? ` · ${tokens} tokens` : ""}`,
          event,
        );
        break;
      }
      case "error":
        this.settleCalls();
        this.status = "error";
        this.error = p.error || "the run failed";
        this.endedAt = Date.now();
        this.row("error", `Failed: ${p.error || "unknown error"}`, event);
        break;
      case "tripwire":
        // A processor stopped the run; what it held back never reached the stream.
        this.settleCalls();
        this.status = "blocked";
        this.tripwire = p;
        this.error = `Blocked${p.processorId ? ` by ${p.processorId}` : ""}: ${p.reason}`;
        this.endedAt = Date.now();
        this.row("tripwire", this.error, event);
        break;
      case "processor-decision":
        this.row("decision", `${p.processorId}: ${p.action}${p.phase ? ` (${p.phase})` : ""}`, event);
        break;
      case "abort":
        this.settleCalls();
        this.status = "aborted";
        this.endedAt = Date.now();
        this.row("abort", `Stopped${p.reason ? `: ${p.reason}` : ""}`, event);
        break;
      case "background-task-started": {
        const call = this.call(p.toolCallId, p.toolName);
        call.status = "background";
        this.row("tool", `${p.toolName} goes on in the background`, event);
        break;
      }
      case "background-task-completed":
      case "background-task-failed": {
        const call = this.call(p.toolCallId, p.toolName);
        const failed = event.type.endsWith("failed");
        call.status = failed ? "error" : "done";
        if (failed) call.error = asText(p.result);
        else call.result = p.result;
        this.row(failed ? "error" : "result", `${p.toolName} (background) ${failed ? "failed" : "finished"}: ${clip(asText(p.result), 80)}`, event);
        break;
      }
      default:
        this.row("other", event.type, event);
    }
    this.touch();
  }

  /** At the run's end, calls still being prepared or run never completed. */
  settleCalls() {
    for (const call of this.calls.values()) {
      if (call.status === "preparing" || call.status === "running") call.status = "cut";
    }
  }

  /** A decision was taken (or the call ended another way). */
  resolve(toolCallId) {
    const decision = this.root.decisions.get(toolCallId);
    if (decision) decision.state = "done";
  }

  /** The stream ended without `finish`, `error` or `abort` (a dropped connection). */
  ended() {
    if (this.status === "running") {
      // A run that stops for a person ends its stream after the approval or suspension.
      const waiting = this.openDecisions.length > 0;
      this.status = waiting ? "waiting" : "error";
      if (waiting) this.row("wait", "Stopped: waiting for a person", null);
      else this.error = "the connection closed before the run ended";
      this.endedAt = Date.now();
      this.touch();
    }
  }
}

/** The total of a usage object, whatever its field names. */
export function totalTokens(usage) {
  if (!usage || typeof usage !== "object") return null;
  if (typeof usage.totalTokens === "number") return usage.totalTokens;
  const input = usage.inputTokens ?? usage.promptTokens ?? 0;
  const output = usage.outputTokens ?? usage.completionTokens ?? 0;
  return input + output || null;
}

/** Why a step ended, as words. */
export function reasonText(reason) {
  return (
    {
      stop: "answered",
      "tool-calls": "called tools",
      length: "hit the length limit",
      "max-steps": "hit the step limit",
      suspended: "waiting for a person",
      abort: "stopped",
      error: "failed",
      "content-filter": "filtered",
      tripwire: "blocked by a processor",
      retry: "sent back for another try",
    }[reason] || reason || "ended"
  );
}

/** The prompt of a delegation's arguments. */
export function promptOf(args) {
  if (args && typeof args === "object" && typeof args.prompt === "string") return args.prompt;
  return asText(args);
}

/** The question a suspended tool asks, if its payload names one. */
export function questionOf(payload) {
  if (payload && typeof payload === "object") {
    for (const key of ["question", "message", "prompt", "reason"]) {
      if (typeof payload[key] === "string") return payload[key];
    }
  }
  return payload;
}

/** A value as one line of text. */
export function inline(value) {
  if (value === undefined || value === null) return "";
  if (typeof value === "string") return value;
  if (typeof value !== "object") return String(value);
  if (Array.isArray(value)) return value.map(inline).join(", ");
  return Object.entries(value)
    .map(([k, v]) => `${k}: ${typeof v === "object" && v !== null ? JSON.stringify(v) : v}`)
    .join(", ");
}

/** A value as text: strings as they are, anything else as one line. */
export function asText(value) {
  return typeof value === "string" ? value : inline(value);
}

/** `text` cut to `n` characters. */
export function clip(text, n) {
  const s = String(text ?? "").replace(/\s+/g, " ").trim();
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}
