// Unit tests of the Studio's agent editor logic (crates/kestrel-server/studio/versions.js): the
// run body that chooses the draft, which versions are set side by side, and the line diff of
// their instructions. Node's test runner, no browser: `node --test versions.test.mjs`.

import { copyFile, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { test } from "node:test";
import assert from "node:assert/strict";

// versions.js imports api.js and render.js (which imports runs.js): load them as modules from a
// folder of their own, whatever the Studio folder's package type. Nothing here draws.
const dir = await mkdtemp(join(tmpdir(), "kestrel-studio-"));
await writeFile(join(dir, "package.json"), '{"type": "module"}');
for (const file of ["api.js", "runs.js", "render.js", "versions.js"]) {
  await copyFile(new URL(`../crates/kestrel-server/studio/${file}`, import.meta.url), join(dir, file));
}
const { isEditable, versionsBody, withDraft, newestFirst, versionRole, comparePair, lineDiff, errorText, versionLabel } = await import(
  pathToFileURL(join(dir, "versions.js")).href
);

const version = (n, extra = {}) => ({ id: `v${n}-id`, agentId: "assistant", versionNumber: n, changedFields: ["instructions"], changeMessage: null, createdAt: "2025-01-01T00:00:00Z", ...extra });

test("an agent is editable when its instructions are, or when it is stored", () => {
  assert.equal(isEditable({ id: "a", editable: { instructions: true, toolDescriptions: false } }), true);
  assert.equal(isEditable({ id: "a", editable: { instructions: false, toolDescriptions: true } }), false);
  assert.equal(isEditable({ id: "a", editable: null, source: "code" }), false);
  assert.equal(isEditable({ id: "a", source: "stored" }), true);
  assert.equal(isEditable({ id: "a" }), false);
  assert.equal(isEditable(null), false);
});

test("the Draft switch adds the agent's draft to the run's body, and nothing else", () => {
  assert.deepEqual(versionsBody("assistant"), { agents: { assistant: { status: "draft" } } });
  const body = { messages: [{ role: "user", content: "Hi" }], memory: { thread: "t", resource: "r" } };
  assert.deepEqual(withDraft(body, "assistant", true), { ...body, versions: { agents: { assistant: { status: "draft" } } } });
  assert.equal(withDraft(body, "assistant", false), body, "without the switch the body is untouched");
  assert.equal(body.versions, undefined, "the body given is not changed");
});

test("versions are listed newest first, the published and the draft told apart", () => {
  const list = [version(1), version(3), version(2)];
  assert.deepEqual(newestFirst(list).map((v) => v.versionNumber), [3, 2, 1]);
  assert.deepEqual(list.map((v) => v.versionNumber), [1, 3, 2], "the list given is not reordered");
  assert.equal(versionRole(version(3), list, "v1-id"), "draft");
  assert.equal(versionRole(version(1), list, "v1-id"), "published");
  assert.equal(versionRole(version(2), list, "v1-id"), "older");
  // The latest, once published, is no draft.
  assert.equal(versionRole(version(3), list, "v3-id"), "published");
  assert.equal(versionRole(version(3), list, null), "draft");
});

test("side by side: the published version against the draft, else the two newest", () => {
  assert.equal(comparePair([], null), null);
  assert.equal(comparePair([version(1)], "v1-id"), null);
  assert.deepEqual(comparePair([version(3), version(2), version(1)], "v1-id"), { from: "v1-id", to: "v3-id" });
  assert.deepEqual(comparePair([version(3), version(2), version(1)], "v3-id"), { from: "v2-id", to: "v3-id" });
  assert.deepEqual(comparePair([version(1), version(2)], null), { from: "v1-id", to: "v2-id" });
  // A published id the list does not hold (an older page): the two newest.
  assert.deepEqual(comparePair([version(5), version(4)], "v1-id"), { from: "v4-id", to: "v5-id" });
});

test("the line diff marks what left the old text and what came in the new one", () => {
  const { left, right } = lineDiff("You help.\nAnswer briefly.\nBe kind.", "You help.\nAnswer as a pirate.\nBe kind.\nSign off.");
  assert.deepEqual(left, [
    { text: "You help.", kind: "same" },
    { text: "Answer briefly.", kind: "removed" },
    { text: "Be kind.", kind: "same" },
  ]);
  assert.deepEqual(right, [
    { text: "You help.", kind: "same" },
    { text: "Answer as a pirate.", kind: "added" },
    { text: "Be kind.", kind: "same" },
    { text: "Sign off.", kind: "added" },
  ]);
  // A version that does not set the instructions has no lines.
  assert.deepEqual(lineDiff(undefined, "New."), { left: [], right: [{ text: "New.", kind: "added" }] });
  assert.deepEqual(lineDiff("Same.", "Same."), { left: [{ text: "Same.", kind: "same" }], right: [{ text: "Same.", kind: "same" }] });
});

test("huge texts are compared whole, not line by line", () => {
  const big = (tag) => Array.from({ length: 600 }, (_, i) => `${tag} ${i}`).join("\n");
  const { left, right } = lineDiff(big("a"), big("b"));
  assert.equal(left.length, 600);
  assert.ok(left.every((l) => l.kind === "removed") && right.every((l) => l.kind === "added"));
});

test("errors and labels read as sentences", () => {
  const refused = Object.assign(new Error("the agent does not let versions set tools"), { status: 422, code: "not_editable" });
  assert.equal(errorText(refused, "Could not save the draft"), "Could not save the draft, the agent does not let versions change this: the agent does not let versions set tools");
  assert.equal(errorText(new Error("boom"), "Could not publish"), "Could not publish: boom");
  assert.equal(versionLabel(version(2, { changeMessage: "Shorter" })), "v2 · Shorter");
  assert.equal(versionLabel(version(1)), "v1");
});
