// The MCP page (`#mcp`): the MCP servers the instance's agents use (`kestrel.toml`'s
// `[mcp.servers.<name>]` under `kestrel dev`), from `/api/mcp-client`: each server's state,
// protocol, last error and last log lines; its tools on demand; and a tool called by hand, a
// server's question answered in a form of its requested schema.

import { ApiError, api } from "./api.js";
import { schemaForm } from "./forms.js";
import { h, json, value } from "./render.js";

const $ = (id) => document.getElementById(id);

/** Whether the server shows MCP servers; the sidebar's entry appears when it does. */
export async function loadMcp(navigate) {
  let servers;
  try {
    servers = (await api("/api/mcp-client/servers")).servers || [];
  } catch (error) {
    // 404: this instance's agents use no MCP servers.
    if (!(error instanceof ApiError) || error.status !== 404) console.warn("MCP servers unavailable", error);
    $("mcp-section").hidden = true;
    return false;
  }
  $("mcp-section").hidden = false;
  $("mcp-open").textContent = `MCP servers (${servers.length})`;
  $("mcp-open").onclick = () => navigate("#mcp");
  return true;
}

/** Draws the page into `#mcp-view`. */
export async function openMcp() {
  const view = $("mcp-view");
  $("mcp-open").classList.add("selected");
  view.replaceChildren(h("p", { class: "muted" }, "Loading the MCP servers…"));
  let servers;
  try {
    servers = (await api("/api/mcp-client/servers")).servers || [];
  } catch (error) {
    view.replaceChildren(h("p", { class: "error-text" }, `MCP servers unavailable: ${error.message}`));
    return;
  }
  view.replaceChildren(
    h("div", { class: "wf-head" }, h("h1", {}, "MCP servers"), h("p", { class: "muted" }, "The MCP servers the agents use, and their tools. Call a tool by hand to try it.")),
    ...servers.map(serverCard),
  );
}

export function closeMcp() {
  const open = $("mcp-open");
  if (open) open.classList.remove("selected");
}

/** One server: its status, errors and logs, and its tools on demand. */
function serverCard(status) {
  const tools = h("div", { "data-testid": "mcp-tools" });
  const statusBox = h("div", {});
  const draw = (s) =>
    statusBox.replaceChildren(
      h("div", { class: "wf-status" },
        h("span", { class: `pill pill-${s.state === "connected" ? "success" : s.state === "failed" ? "failed" : "pending"}`, "data-testid": "mcp-state" }, s.state),
        h("span", { class: "chip" }, s.transport),
        s.protocolVersion ? h("span", { class: "chip", "data-testid": "mcp-protocol" }, s.protocolVersion) : null,
        s.serverInfo ? h("span", { class: "muted" }, s.serverInfo) : null),
      s.lastError ? h("p", { class: "error-text", role: "alert", "data-testid": "mcp-error" }, s.lastError) : null,
      s.logs && s.logs.length ? json(s.logs, `Last ${s.logs.length} log line${s.logs.length === 1 ? "" : "s"}`) : null,
    );
  draw(status);
  const refresh = async () => {
    try {
      const all = (await api("/api/mcp-client/servers")).servers || [];
      const now = all.find((s) => s.name === status.name);
      if (now) draw(now);
    } catch {
      // The status stays as it was.
    }
  };
  const show = h("button", { type: "button", class: "small", "data-testid": "mcp-show-tools" }, "Tools");
  show.addEventListener("click", async () => {
    show.disabled = true;
    tools.replaceChildren(h("p", { class: "muted" }, "Connecting…"));
    try {
      const listed = await api(`/api/mcp-client/servers/${encodeURIComponent(status.name)}/tools`);
      tools.replaceChildren(
        listed.tools.length
          ? h("ul", { class: "tool-list", "data-testid": "mcp-tool-list" }, listed.tools.map((tool) => toolItem(status.name, tool, refresh)))
          : h("p", { class: "muted" }, "This server lists no tools."),
      );
    } catch (error) {
      tools.replaceChildren(h("p", { class: "error-text", role: "alert" }, error.message));
    } finally {
      show.disabled = false;
      refresh();
    }
  });
  const reconnect = h("button", { type: "button", class: "small ghost", "data-testid": "mcp-reconnect" }, "Reconnect");
  reconnect.addEventListener("click", async () => {
    reconnect.disabled = true;
    try {
      const all = (await api(`/api/mcp-client/servers/${encodeURIComponent(status.name)}/reconnect`, { method: "POST", body: {} })).servers || [];
      const now = all.find((s) => s.name === status.name);
      if (now) draw(now);
    } catch (error) {
      statusBox.append(h("p", { class: "error-text" }, error.message));
    } finally {
      reconnect.disabled = false;
    }
  });
  return h(
    "section",
    { class: "card", "data-testid": "mcp-server", "data-server": status.name },
    h("div", { class: "card-head" }, h("strong", {}, status.name), h("span", { class: "actions" }, show, reconnect)),
    statusBox,
    tools,
  );
}

/** One tool: its description and schema, and a form to call it. */
function toolItem(server, tool, refresh) {
  const slot = h("div", {});
  const result = h("div", { "data-testid": "mcp-result", role: "status" });
  const open = h("button", { type: "button", class: "small ghost", "data-testid": `mcp-try-${tool.name}` }, "Call");
  open.addEventListener("click", () => {
    if (slot.childElementCount) {
      slot.replaceChildren();
      return;
    }
    slot.replaceChildren(
      schemaForm(tool.inputSchema, (data) => call(server, tool, { data }, slot, result, refresh), { submitLabel: "Call", testId: "mcp-call-form", jsonLabel: "Input (JSON)" }),
      result,
    );
  });
  return h(
    "li",
    { "data-testid": "mcp-tool", "data-tool": tool.id },
    h("strong", {}, tool.id), " ", open,
    tool.description ? h("div", { class: "muted" }, tool.description) : null,
    json(tool.inputSchema, "input schema"),
    slot,
  );
}

/** Calls the tool; a server's question is asked in a form, and the answer calls again. */
async function call(server, tool, body, slot, result, refresh) {
  result.replaceChildren(h("p", { class: "muted" }, "Calling…"));
  let answer;
  try {
    answer = await api(`/api/mcp-client/servers/${encodeURIComponent(server)}/tools/${encodeURIComponent(tool.id)}/execute`, { method: "POST", body });
  } catch (error) {
    result.replaceChildren(h("p", { class: "error-text", role: "alert", "data-testid": "mcp-call-error" }, error.message));
    refresh();
    return;
  }
  if (!answer.question) {
    result.replaceChildren(h("div", { "data-testid": "mcp-output" }, h("span", { class: "label" }, "Result"), value(answer.result)));
    refresh();
    return;
  }
  const asked = answer.question;
  const again = (reply) => call(server, tool, { data: body.data, question: asked, answer: reply }, slot, result, refresh);
  const decline = h("button", { type: "button", class: "danger", "data-testid": "mcp-decline" }, "Decline");
  decline.addEventListener("click", () => again({ action: "decline" }));
  result.replaceChildren(
    h("div", { class: "card decision", "data-testid": "mcp-question" },
      h("p", { class: "question" }, `${asked.server} asks: ${asked.message}`),
      asked.invalidAnswer && asked.invalidAnswer.length ? h("p", { class: "error-text", role: "alert" }, `The last answer was not taken: ${asked.invalidAnswer.join("; ")}`) : null,
      asked.mode === "url" && /^https?:\/\//.test(asked.url || "")
        ? h("p", {}, h("a", { href: asked.url, target: "_blank", rel: "noopener noreferrer" }, asked.url))
        : schemaForm(asked.requestedSchema || { type: "object", properties: {} }, (content) => again({ action: "accept", content }), { submitLabel: "Answer", testId: "mcp-form", jsonLabel: "Answer (JSON)" }),
      h("div", { class: "actions" }, decline,
        asked.mode === "url" ? h("button", { type: "button", class: "primary", onclick: () => again({ action: "accept" }) }, "Done") : null),
    ),
  );
}
