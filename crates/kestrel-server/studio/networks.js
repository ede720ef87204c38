// Drawing a network run: its iterations (the routing decision and its reason, the
// primitive's live output, the completion check), where it waits (with the decision's
// buttons), and how it ended. The events are folded by network-runs.js.

import { NETWORK_STATUS } from "./network-runs.js";
import { h, json, pill, runBody, value } from "./render.js";
import { totalTokens } from "./runs.js";

const KIND_LABELS = { agent: "Agent", workflow: "Workflow", tool: "Tool", none: "Done" };
const PILL = { running: "running", waiting: "waiting", done: "done", max: "waiting", aborted: "aborted", error: "error", blocked: "blocked" };

/** A workflow's steps as pills, in the order they started. */
function workflowSteps(workflow) {
  const steps = Object.entries(workflow.steps || {});
  if (!steps.length) return h("p", { class: "muted" }, "Starting…");
  return h(
    "ul",
    { class: "network-steps" },
    steps.map(([id, step]) => h("li", {}, h("code", {}, id), " ", pill(step.status === "success" ? "done" : step.status === "failed" ? "error" : step.status === "suspended" ? "waiting" : "running", step.status))),
  );
}

/** What the iteration's primitive did (or is doing). */
function primitiveBody(primitive) {
  if (!primitive) return h("p", { class: "muted" }, "Choosing…");
  if (primitive.kind === "agent") {
    const live = primitive.run && primitive.run.items.length ? runBody(primitive.run, () => null) : null;
    return h("div", { class: "network-output", "data-testid": "network-output" }, live || (primitive.result ? h("div", { class: "assistant-text" }, primitive.result) : h("p", { class: "muted" }, "Working…")));
  }
  if (primitive.kind === "workflow") {
    return h(
      "div",
      { class: "network-output", "data-testid": "network-output" },
      workflowSteps(primitive.workflow),
      primitive.result !== undefined ? h("div", { class: "card-row" }, h("span", { class: "label" }, "Result"), value(primitive.result)) : null,
      primitive.error ? h("p", { class: "error-text" }, primitive.error) : null,
    );
  }
  if (primitive.kind === "tool") {
    return h(
      "div",
      { class: "network-output", "data-testid": "network-output" },
      h("div", { class: "card-row" }, h("span", { class: "label" }, "Input"), value(primitive.input)),
      primitive.result !== undefined ? h("div", { class: "card-row" }, h("span", { class: "label" }, "Result"), value(primitive.result)) : null,
    );
  }
  return null;
}

/** One iteration's card. */
function iterationCard(it) {
  const routing = it.routing;
  const kind = routing ? routing.primitiveType : null;
  const status = it.primitive ? it.primitive.status : "running";
  return h(
    "div",
    { class: "card network-iteration", "data-testid": "network-iteration", "data-iteration": it.iteration, "data-primitive": routing ? routing.primitiveId : "" },
    h(
      "div",
      { class: "card-head" },
      h("span", { class: "icon", "aria-hidden": "true" }, "⇢"),
      h("strong", {}, `Iteration ${it.iteration + 1}`),
      routing ? h("span", {}, kind === "none" ? "— the router found the task done" : ["— ", KIND_LABELS[kind] || kind, " ", h("code", {}, routing.primitiveId)]) : h("span", { class: "muted" }, "— routing…"),
      pill(PILL[status] || status, status),
    ),
    routing && routing.selectionReason ? h("p", { class: "network-reason", "data-testid": "network-reason" }, routing.selectionReason) : null,
    routing && routing.prompt && kind !== "none" ? h("div", { class: "card-row" }, h("span", { class: "label" }, "Prompt"), h("span", { class: "prompt" }, routing.prompt)) : null,
    kind && kind !== "none" ? primitiveBody(it.primitive) : null,
    it.validation
      ? h(
          "div",
          { class: `network-check ${it.validation.passed ? "passed" : "failed"}`, "data-testid": "network-validation", "data-passed": String(it.validation.passed) },
          h("strong", {}, it.validation.passed ? "✓ Complete" : "✗ Not complete yet"),
          it.validation.reason ? h("span", {}, ` — ${it.validation.reason}`) : null,
          it.validation.results.length ? json(it.validation.results, "Checks") : null,
        )
      : null,
  );
}

/**
 * A network run's bubble content. `decide(how)` continues a waiting run: `"approve"`,
 * `"decline"`, or `{resumeData}`.
 */
export function networkBody(run, decide) {
  const waiting = run.waiting;
  const tokens = totalTokens(run.usage);
  return [
    h("div", { class: "network-head" }, h("span", { class: "chip" }, "Network"), pill(PILL[run.status] || run.status, NETWORK_STATUS[run.status] || run.status)),
    run.iterations.map(iterationCard),
    waiting
      ? h(
          "div",
          { class: "card decision", "data-testid": "network-waiting", "data-kind": waiting.kind },
          h("div", { class: "card-head" }, h("strong", {}, waiting.kind === "approval" ? `The ${waiting.primitiveType} needs your approval` : `The ${waiting.primitiveType} waits for your answer`)),
          waiting.payload.suspendPayload !== undefined ? h("div", { class: "card-row" }, h("span", { class: "label" }, "Asks"), value(waiting.payload.suspendPayload)) : null,
          waiting.kind === "approval"
            ? h(
                "div",
                { class: "actions" },
                h("button", { type: "button", class: "primary", "data-testid": "network-approve", onclick: () => decide("approve") }, "Approve"),
                h("button", { type: "button", class: "danger", "data-testid": "network-decline", onclick: () => decide("decline") }, "Decline"),
              )
            : resumeForm(decide),
        )
      : null,
    run.result !== null && run.status !== "waiting" ? h("div", { class: "network-result", "data-testid": "network-result" }, h("div", { class: "assistant-text" }, run.result)) : null,
    run.error ? h("p", { class: "error-text" }, run.error) : null,
    h("div", { class: "run-footer" }, run.reason ? h("span", { class: "muted" }, run.reason) : null, tokens ? h("span", { class: "muted" }, ` · ${tokens} tokens`) : null),
  ];
}

/** Resume data as JSON, for a suspended tool or workflow. */
function resumeForm(decide) {
  const area = h("textarea", { rows: 3, "data-testid": "network-resume-data", "aria-label": "Resume data (JSON)" }, "{}");
  const error = h("p", { class: "error-text", hidden: true });
  return h(
    "div",
    { class: "resume" },
    area,
    error,
    h(
      "button",
      {
        type: "button",
        class: "primary",
        "data-testid": "network-resume",
        onclick: () => {
          try {
            decide({ resumeData: JSON.parse(area.value) });
          } catch (e) {
            error.hidden = false;
            error.textContent = `Not JSON: ${e.message}`;
          }
        },
      },
      "Resume",
    ),
  );
}
