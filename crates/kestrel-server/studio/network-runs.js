// How the Studio folds a network run's events (`from: "NETWORK"`) into the iterations it
// draws: each iteration's routing decision and reason, its primitive's live output (a
// sub-agent's events folded into a `Run`, a workflow's into its steps, a tool's input and
// result) and its completion check. No DOM: node's test runner checks it
// (studio-tests/network-runs.test.mjs).

import { Run } from "./runs.js";
import { fold as foldWorkflow } from "./workflow-runs.js";

const AGENT_EVENT = "agent-execution-event-";
const WORKFLOW_EVENT = "workflow-execution-event-";

/** Status names a person reads. */
export const NETWORK_STATUS = {
  running: "Running",
  waiting: "Waiting for you",
  done: "Done",
  max: "Stopped at its last iteration",
  aborted: "Stopped",
  error: "Failed",
  blocked: "Blocked by a guardrail",
};

/** One network run: its iterations, where it waits, and how it ended. */
export class NetworkRun {
  constructor(agentId) {
    this.agentId = agentId;
    this.runId = null;
    this.status = "running";
    /** In order: {iteration, routing, primitive, validation, finalText}. */
    this.iterations = [];
    /** What the run waits for: {kind: "approval"|"suspended", primitiveType, payload}. */
    this.waiting = null;
    this.result = null;
    this.reason = null;
    this.usage = null;
    this.error = null;
    this.current = 0;
    this.version = 0;
  }

  /** Iteration `n`, made when first seen. */
  iteration(n) {
    const at = Number.isInteger(n) ? n : this.current;
    this.current = at;
    let it = this.iterations.find((i) => i.iteration === at);
    if (!it) {
      it = { iteration: at, routing: null, primitive: null, validation: null, finalText: "" };
      this.iterations.push(it);
      this.iterations.sort((a, b) => a.iteration - b.iteration);
    }
    return it;
  }

  /** The iteration the next event belongs to. */
  get last() {
    return this.iteration(this.current);
  }

  /** Folds one event of the network's stream. */
  apply(event) {
    const p = event.payload || {};
    const type = event.type || "";
    if (!this.runId && event.runId) this.runId = event.runId;
    this.version += 1;
    if (type.startsWith(AGENT_EVENT)) {
      const primitive = this.last.primitive;
      if (primitive && primitive.run) primitive.run.apply(p);
      return this;
    }
    if (type.startsWith(WORKFLOW_EVENT)) {
      const primitive = this.last.primitive;
      if (primitive && primitive.workflow) foldWorkflow(primitive.workflow, p);
      return this;
    }
    const waitFor = (kind, primitiveType) => {
      this.waiting = { kind, primitiveType, payload: p };
      this.status = "waiting";
      if (this.last.primitive) this.last.primitive.status = "waiting";
    };
    switch (type) {
      case "routing-agent-start":
        this.status = "running";
        this.waiting = null;
        this.iteration(p.inputData && p.inputData.iteration);
        break;
      case "routing-agent-end":
        this.iteration(p.iteration).routing = {
          primitiveType: p.primitiveType,
          primitiveId: p.primitiveId,
          prompt: p.prompt,
          selectionReason: p.selectionReason,
        };
        break;
      case "agent-execution-start": {
        this.status = "running";
        this.waiting = null;
        const it = this.iteration(p.args && p.args.iteration);
        // A decision continues the same sub-agent run: its events go on in the same place.
        if (!it.primitive || it.primitive.runId !== p.runId) {
          it.primitive = { kind: "agent", id: p.agentId, runId: p.runId, status: "running", run: new Run(p.runId, p.agentId) };
        } else {
          it.primitive.status = "running";
        }
        break;
      }
      case "agent-execution-end":
        if (this.last.primitive) Object.assign(this.last.primitive, { status: "done", result: p.result });
        break;
      case "workflow-execution-start": {
        this.status = "running";
        this.waiting = null;
        const it = this.iteration(p.args && p.args.iteration);
        if (!it.primitive || it.primitive.runId !== p.runId) {
          it.primitive = { kind: "workflow", id: p.workflowId, runId: p.runId, status: "running", workflow: { status: "running", steps: {} } };
        } else {
          it.primitive.status = "running";
        }
        break;
      }
      case "workflow-execution-end": {
        const result = p.result || {};
        if (this.last.primitive) Object.assign(this.last.primitive, { status: result.status === "success" ? "done" : "error", result: result.result, error: result.error && result.error.message });
        break;
      }
      case "tool-execution-start": {
        this.status = "running";
        this.waiting = null;
        const args = p.args || {};
        this.iteration(args.iteration).primitive = { kind: "tool", id: args.toolName, toolCallId: args.toolCallId, input: args.args, status: "running" };
        break;
      }
      case "tool-execution-end":
        if (this.last.primitive) Object.assign(this.last.primitive, { status: "done", result: p.result });
        break;
      case "agent-execution-approval":
        waitFor("approval", "agent");
        break;
      case "agent-execution-suspended":
        waitFor("suspended", "agent");
        break;
      case "workflow-execution-suspended":
        waitFor("suspended", "workflow");
        break;
      case "tool-execution-approval":
        waitFor("approval", "tool");
        break;
      case "tool-execution-suspended":
        waitFor("suspended", "tool");
        break;
      case "routing-agent-abort":
      case "agent-execution-abort":
      case "workflow-execution-abort":
      case "tool-execution-abort":
        this.status = "aborted";
        if (this.last.primitive) this.last.primitive.status = "aborted";
        break;
      case "network-execution-event-step-finish":
        this.iteration(p.iteration).primitive = { kind: "none", status: "done", result: p.result };
        break;
      case "routing-agent-text-delta":
        this.last.finalText += p.text || "";
        break;
      case "network-validation-end":
        this.iteration(p.iteration).validation = { passed: !!p.passed, reason: p.reason || null, results: p.results || [], maxIterationReached: !!p.maxIterationReached };
        break;
      case "network-execution-event-finish":
        if (this.status !== "aborted") this.status = p.isComplete ? "done" : "max";
        this.result = p.result;
        this.reason = p.completionReason;
        this.usage = p.usage || null;
        break;
      case "error":
        this.status = "error";
        this.error = p.error || "The network failed";
        break;
      case "tripwire":
        this.status = "blocked";
        this.error = `Blocked${p.processorId ? ` by ${p.processorId}` : ""}: ${p.reason}`;
        if (this.last.primitive) this.last.primitive.status = "blocked";
        break;
      default:
        break;
    }
    return this;
  }

  /** The stream ended: a run still marked running ended without a word (the server went away). */
  ended() {
    if (this.status === "running") {
      this.status = "error";
      this.error = this.error || "The stream ended before the network did";
    }
    this.version += 1;
  }
}
