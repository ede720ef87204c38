// How the Studio folds a workflow run's events into the run it draws (no DOM: node's test
// runner checks it, studio-tests/workflow-runs.test.mjs).

/** A schema as the workflow routes give it: a JSON string of `{"json": schema}`. */
export function unwrapSchema(schema) {
  if (!schema) return null;
  let parsed = schema;
  if (typeof schema === "string") {
    try {
      parsed = JSON.parse(schema);
    } catch {
      return null;
    }
  }
  if (parsed && typeof parsed === "object" && !Array.isArray(parsed) && "json" in parsed) return parsed.json;
  return parsed;
}

/** Where a suspended step waits: its id, then (a nested workflow) the path inside it. */
export function suspendedPath(id, step) {
  const meta = step && step.suspendPayload && step.suspendPayload.__workflow_meta;
  return [id, ...((meta && Array.isArray(meta.path) && meta.path) || [])];
}

/** A suspended foreach step's waiting items (`[{index, payload}]`), or null for another step. */
export function suspendedItems(step) {
  const meta = step && step.suspendPayload && step.suspendPayload.__foreach_meta;
  return meta && Array.isArray(meta.items) ? meta.items : null;
}

/** Folds one event of the run's stream into the run. */
export function fold(run, event) {
  const payload = event.payload || {};
  const id = payload.id;
  const step = (status) => {
    run.steps[id] = { ...(run.steps[id] || {}), ...payload, status };
  };
  switch (event.type) {
    case "workflow-start":
      run.status = "running";
      break;
    case "workflow-step-start":
      step("running");
      break;
    case "workflow-step-result":
      step(payload.status || "success");
      break;
    case "workflow-step-suspended":
      step("suspended");
      break;
    case "workflow-step-waiting":
      step("waiting");
      break;
    case "workflow-step-progress":
      if (run.steps[id]) run.steps[id].progress = `${payload.completedCount}/${payload.totalCount}`;
      break;
    case "workflow-step-output": {
      // An agent step's text, as it comes.
      const output = payload.output || {};
      const target = run.steps[payload.stepName];
      if (target && output.type === "text-delta" && output.payload) target.live = (target.live || "") + (output.payload.text || "");
      break;
    }
    case "workflow-canceled":
      run.status = "canceled";
      break;
    case "workflow-finish":
      run.status = payload.workflowStatus;
      if (payload.finalWorkflowResult !== undefined) run.result = payload.finalWorkflowResult;
      if (payload.metadata && payload.metadata.error) run.error = payload.metadata.error;
      break;
    default:
      break;
  }
  return run;
}
