// The Agent tab's editor: an agent's instructions kept as numbered versions (docs/versions.md).
//
// The draft is the latest version; one version is published, and runs use it unless they ask
// for another. The editor saves the textarea as a new version (`POST
// /api/stored/agents/{id}/versions`), publishes one (`…/versions/{versionId}/activate`), lists
// them newest first and sets two side by side (`…/versions/compare?from=&to=`). The composer's
// Draft switch runs the chat on the draft: the run's body carries `versionsBody(agentId)`.
//
// The pure functions at the top (no DOM) are tested by studio-tests/versions.test.mjs.

import { api, query } from "./api.js";
import { ago, h, value } from "./render.js";

/** Whether `a` (an agent of `GET /api/agents`) lets versions change its instructions. */
export function isEditable(a) {
  return !!(a && ((a.editable && a.editable.instructions) || a.source === "stored"));
}

/** The `versions` of a run's body that runs `agentId`'s draft (Mastra's `versions.agents`). */
export function versionsBody(agentId) {
  return { agents: { [agentId]: { status: "draft" } } };
}

/** `body` with the draft of `agentId` chosen when `draft` is on; `body` itself otherwise. */
export function withDraft(body, agentId, draft) {
  if (!draft || !agentId) return body;
  return { ...body, versions: versionsBody(agentId) };
}

/** The versions newest first (by number), whatever order the server listed them in. */
export function newestFirst(versions) {
  return [...(versions || [])].sort((x, y) => (y.versionNumber || 0) - (x.versionNumber || 0));
}

/**
 * What a version is to a person: `published` (runs use it), `draft` (the latest, when it is
 * not the published one) or `older`.
 */
export function versionRole(version, versions, activeVersionId) {
  if (version.id === activeVersionId) return "published";
  const latest = newestFirst(versions)[0];
  return latest && latest.id === version.id ? "draft" : "older";
}

/**
 * The two versions set side by side at first, as `{from, to}` ids: the published version
 * against the draft when the draft is newer, otherwise the two newest; null with fewer than two.
 */
export function comparePair(versions, activeVersionId) {
  const list = newestFirst(versions);
  if (list.length < 2) return null;
  const latest = list[0];
  const active = list.find((v) => v.id === activeVersionId);
  if (active && active.id !== latest.id) return { from: active.id, to: latest.id };
  return { from: list[1].id, to: latest.id };
}

/** Lines longer than this product (old × new lines) are compared as wholes, not line by line. */
const DIFF_LIMIT = 250_000;

/**
 * Two texts line by line, for two columns: `left` the old text's lines, `right` the new one's,
 * each `{text, kind}` with kind `same`, `removed` (left only) or `added` (right only).
 */
export function lineDiff(oldText, newText) {
  const a = oldText ? String(oldText).split("\n") : [];
  const b = newText ? String(newText).split("\n") : [];
  if (a.length * b.length > DIFF_LIMIT) {
    const same = oldText === newText;
    return {
      left: a.map((text) => ({ text, kind: same ? "same" : "removed" })),
      right: b.map((text) => ({ text, kind: same ? "same" : "added" })),
    };
  }
  // The longest common subsequence of lines, from the end.
  const lcs = Array.from({ length: a.length + 1 }, () => new Uint32Array(b.length + 1));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const left = [];
  const right = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      left.push({ text: a[i++], kind: "same" });
      right.push({ text: b[j++], kind: "same" });
    } else if (j < b.length && (i === a.length || lcs[i][j + 1] >= lcs[i + 1][j])) {
      right.push({ text: b[j++], kind: "added" });
    } else {
      left.push({ text: a[i++], kind: "removed" });
    }
  }
  return { left, right };
}

/** An error of the API as a sentence for the page (`not_editable` says what to do). */
export function errorText(error, what) {
  const message = (error && error.message) || String(error);
  if (error && error.code === "not_editable") return `${what}, the agent does not let versions change this: ${message}`;
  return `${what}: ${message}`;
}

/** A version's label in lists and selects: `v3 · Shorter answers`. */
export function versionLabel(version) {
  const message = version.changeMessage ? ` · ${version.changeMessage}` : "";
  return `v${version.versionNumber}${message}`;
}

// ---------------------------------------------------------------------------------------
// The Editor section

/**
 * The "Editor" section of the Agent tab for agent `a`, or null when `a` is not editable.
 * `onPublished(agent)` gets the agent as runs now see it (`GET /api/agents/{id}`) after a
 * version is published.
 */
export function editorSection(a, { onPublished } = {}) {
  if (!isEditable(a)) return null;
  return new AgentEditor(a, onPublished).el;
}

class AgentEditor {
  constructor(a, onPublished) {
    this.agentId = a.id;
    this.onPublished = onPublished;
    this.base = `/api/stored/agents/${encodeURIComponent(a.id)}`;
    this.versions = [];
    this.activeVersionId = null;
    /** The instructions of the draft as last read, to tell unsaved edits. */
    this.saved = null;
    const id = (name) => `editor-${name}-${a.id.replace(/[^a-z0-9_-]/gi, "")}`;

    this.instructions = h("textarea", { id: id("instructions"), rows: 8, spellcheck: "false", "data-testid": "editor-instructions", oninput: () => this.drawDirty() });
    this.message = h("input", { type: "text", id: id("message"), autocomplete: "off", placeholder: "What changed (optional)", "data-testid": "editor-message" });
    this.saveButton = h("button", { type: "button", class: "primary small", "data-testid": "editor-save", onclick: () => this.save() }, "Save draft");
    this.publishButton = h("button", { type: "button", class: "small", "data-testid": "editor-publish", onclick: () => this.publish(this.latest() && this.latest().id) }, "Publish draft");
    this.dirty = h("span", { class: "hint", hidden: true }, "Unsaved changes.");
    this.status = h("p", { class: "hint", role: "status", "data-testid": "editor-status" });
    this.error = h("p", { class: "error-text", role: "alert", "data-testid": "editor-error", hidden: true });
    this.list = h("ol", { class: "version-list", "data-testid": "version-list" });
    this.from = h("select", { id: id("from"), "data-testid": "compare-from" });
    this.to = h("select", { id: id("to"), "data-testid": "compare-to" });
    this.compareButton = h("button", { type: "button", class: "small", "data-testid": "compare-versions", onclick: () => this.compare() }, "Compare");
    this.compared = h("div", { "data-testid": "version-compare" });
    this.compareBox = h(
      "div",
      { class: "compare-box", hidden: true },
      h("h5", {}, "Side by side"),
      h("div", { class: "compare-pick" }, h("label", { for: id("from") }, "From"), this.from, h("label", { for: id("to") }, "to"), this.to, this.compareButton),
      this.compared,
    );
    this.el = h(
      "div",
      { class: "agent-editor", "data-testid": "agent-editor" },
      h("h4", {}, "Editor"),
      h("p", { class: "hint" }, "Saved edits are versions; runs use the published one. The chat's Draft switch tries the latest."),
      h("div", { class: "field" }, h("label", { for: id("instructions") }, "Instructions (draft)"), this.instructions, this.dirty),
      h("div", { class: "field" }, h("label", { for: id("message") }, "Change message"), this.message),
      h("div", { class: "actions" }, this.publishButton, this.saveButton),
      this.status,
      this.error,
      h("h5", {}, "Versions"),
      this.list,
      this.compareBox,
    );
    this.load();
  }

  latest() {
    return this.versions[0] || null;
  }

  /** Reads the draft's instructions (unless `keepText`), the published version and the list. */
  async load({ keepText = false } = {}) {
    const id = encodeURIComponent(this.agentId);
    const missing = (fallback) => (error) => {
      if (error && error.status === 404) return fallback;
      throw error;
    };
    try {
      const [draft, page] = await Promise.all([
        keepText ? null : api(`/api/agents/${id}${query({ status: "draft" })}`),
        api(`${this.base}/versions`).catch(missing({ versions: [] })),
      ]);
      const versions = newestFirst((page && page.versions) || []);
      // Without versions the stored agent does not exist (404): nothing is published. Not
      // asked for then, so the browser logs no failed request.
      const stored = versions.length ? await api(this.base).catch(missing(null)) : null;
      if (draft) {
        const text = typeof draft.instructions === "string" ? draft.instructions : "";
        this.instructions.value = text;
        this.saved = text;
      }
      this.activeVersionId = (stored && stored.activeVersionId) || null;
      this.versions = versions;
      this.more = page && page.hasMore ? Math.max(0, (page.total || 0) - this.versions.length) : 0;
      this.showError(null);
    } catch (error) {
      this.showError(errorText(error, "Could not read the versions"));
    }
    this.draw();
  }

  drawDirty() {
    this.dirty.hidden = this.saved === null || this.instructions.value === this.saved;
  }

  showError(text) {
    this.error.hidden = !text;
    this.error.textContent = text || "";
  }

  draw() {
    this.drawDirty();
    const latest = this.latest();
    const active = this.versions.find((v) => v.id === this.activeVersionId);
    this.publishButton.disabled = !latest || latest.id === this.activeVersionId;
    this.status.textContent = active
      ? `Published: v${active.versionNumber}.${latest && latest.id !== active.id ? ` Draft: v${latest.versionNumber}.` : ""}`
      : latest
        ? `Nothing published: runs use the agent's own definition. Draft: v${latest.versionNumber}.`
        : "No versions yet: runs use the agent's own definition.";
    const items = this.versions.length ? this.versions.map((v) => this.versionItem(v)) : [h("li", { class: "empty" }, "No versions yet: save a draft to start.")];
    if (this.more) items.push(h("li", { class: "muted" }, `and ${this.more} older`));
    this.list.replaceChildren(...items);
    const pair = comparePair(this.versions, this.activeVersionId);
    this.compareBox.hidden = !pair;
    if (pair) {
      const keep = (select, fallback) => (this.versions.some((v) => v.id === select.value) ? select.value : fallback);
      const from = keep(this.from, pair.from);
      const to = keep(this.to, pair.to);
      const options = (selected) => this.versions.map((v) => h("option", { value: v.id, selected: v.id === selected }, versionLabel(v)));
      this.from.replaceChildren(...options(from));
      this.to.replaceChildren(...options(to));
    } else {
      this.compared.replaceChildren();
    }
  }

  versionItem(v) {
    const role = versionRole(v, this.versions, this.activeVersionId);
    return h(
      "li",
      { class: `version-item version-${role}`, "data-testid": "version-item", "data-version": v.versionNumber, "data-version-id": v.id, "data-role": role, "data-published": role === "published" ? "true" : "false" },
      h(
        "div",
        { class: "version-head" },
        h("strong", {}, `v${v.versionNumber}`),
        role !== "older" ? h("span", { class: `chip chip-${role}` }, role) : null,
        h("span", { class: "muted" }, v.createdAt ? ago(v.createdAt) : ""),
        role !== "published" ? h("button", { type: "button", class: "small ghost", "data-testid": "version-publish", onclick: () => this.publish(v.id) }, "Publish") : null,
      ),
      v.changeMessage ? h("div", {}, v.changeMessage) : null,
      (v.changedFields || []).length ? h("div", { class: "hint" }, `Changed: ${v.changedFields.join(", ")}`) : null,
    );
  }

  /** Saves the textarea as a new version: the draft. */
  async save() {
    const instructions = this.instructions.value;
    const changeMessage = this.message.value.trim();
    this.saveButton.disabled = true;
    this.showError(null);
    try {
      const version = await api(`${this.base}/versions`, { method: "POST", body: { instructions, ...(changeMessage ? { changeMessage } : {}) } });
      this.message.value = "";
      this.saved = instructions;
      await this.load({ keepText: true });
      this.status.textContent = `Saved v${version.versionNumber} as the draft. ${this.status.textContent}`;
    } catch (error) {
      this.draw();
      this.showError(errorText(error, "Could not save the draft"));
    } finally {
      this.saveButton.disabled = false;
    }
  }

  /** Publishes version `versionId`: runs use it from now on. */
  async publish(versionId) {
    if (!versionId) return;
    this.publishButton.disabled = true;
    this.showError(null);
    try {
      const answer = await api(`${this.base}/versions/${encodeURIComponent(versionId)}/activate`, { method: "POST" });
      await this.load({ keepText: true });
      if (answer && answer.message) this.status.textContent = `${capitalized(answer.message)}. ${this.status.textContent}`;
      if (this.onPublished) this.onPublished(await api(`/api/agents/${encodeURIComponent(this.agentId)}`));
    } catch (error) {
      this.draw();
      this.showError(errorText(error, "Could not publish"));
    }
  }

  /** Sets the two chosen versions side by side, with the fields that changed between them. */
  async compare() {
    const from = this.from.value;
    const to = this.to.value;
    if (!from || !to) return;
    if (from === to) {
      this.compared.replaceChildren(h("p", { class: "muted" }, "Choose two different versions."));
      return;
    }
    this.compareButton.disabled = true;
    try {
      const answer = await api(`${this.base}/versions/compare${query({ from, to })}`);
      const find = (id) => this.versions.find((v) => v.id === id) || {};
      this.compared.replaceChildren(sideBySide({ ...find(from), ...((answer && answer.fromVersion) || {}) }, { ...find(to), ...((answer && answer.toVersion) || {}) }, (answer && answer.diffs) || [], this.activeVersionId));
    } catch (error) {
      this.compared.replaceChildren(h("p", { class: "error-text", role: "alert" }, errorText(error, "Could not compare")));
    } finally {
      this.compareButton.disabled = false;
    }
  }
}

function capitalized(text) {
  return text.charAt(0).toUpperCase() + text.slice(1).replace(/\.$/, "");
}

/** Two versions' instructions in two columns, their changed lines marked, and the diffs. */
function sideBySide(from, to, diffs, activeVersionId) {
  const { left, right } = lineDiff(from.instructions, to.instructions);
  const column = (v, lines) =>
    h(
      "div",
      { class: "compare-column", "data-testid": "compare-column", "data-version": v.versionNumber },
      h("div", { class: "compare-title" }, h("strong", {}, `v${v.versionNumber}`), v.id === activeVersionId ? h("span", { class: "chip chip-published" }, "published") : null),
      typeof v.instructions === "string"
        ? h("div", { class: "compare-text" }, lines.map((line) => h("div", { class: `diff-line diff-${line.kind}` }, line.text || "\u00a0")))
        : h("p", { class: "muted" }, "Instructions not set: the agent's own."),
    );
  const other = diffs.filter((d) => d.field !== "instructions");
  return h(
    "div",
    {},
    h(
      "p",
      { class: "hint", "data-testid": "compare-fields" },
      diffs.length ? `Changed: ${diffs.map((d) => d.field).join(", ")}` : "No field changed between these versions.",
    ),
    h("div", { class: "compare-columns" }, column(from, left), column(to, right)),
    other.length
      ? h(
          "dl",
          { class: "kv compare-diffs" },
          other.map((d) => [h("dt", {}, d.field), h("dd", {}, value(d.previousValue), " → ", value(d.currentValue))]),
        )
      : null,
  );
}
