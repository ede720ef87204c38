// Stored agents and versions through @mastra/client-js, unchanged, against a Kestrel server:
// `createStoredAgent`, `getStoredAgent(..)`'s details / update / listVersions / createVersion /
// activateVersion / restoreVersion / compareVersions / deleteVersion / delete, a code agent's
// `listVersions` / `createVersion` / `activateVersion`, and `generate` with `versions`.
// Usage: node mastra-versions.mjs http://127.0.0.1:PORT
//
// The server (crates/kestrel-server/tests/it/js_clients.rs) has the code agent `writing`
// ("Write plainly."; its instructions editable), the tool `lookup`, and models
// `scripted/<any>` that answer with their system prompt in brackets.
import assert from 'node:assert/strict';
import { runChecks } from './checks.mjs';
import { MastraClient } from '@mastra/client-js';

const baseUrl = process.argv[2];
if (!baseUrl) {
  console.error('usage: node mastra-versions.mjs BASE_URL');
  process.exit(2);
}
const client = new MastraClient({ baseUrl, retries: 0 });

const checks = {
  async 'a stored agent: create, details, run'() {
    const created = await client.createStoredAgent({
      id: 'helper',
      name: 'Helper',
      instructions: 'Help.',
      model: { provider: 'scripted', name: 'echo' },
      tools: ['lookup'],
      metadata: { team: 'care' },
    });
    assert.equal(created.id, 'helper');
    assert.equal(created.status, 'published');
    assert.equal(created.instructions, 'Help.');
    const details = await client.getStoredAgent('helper').details();
    assert.equal(details.activeVersionId, created.activeVersionId);
    assert.deepEqual(details.metadata, { team: 'care' });
    const list = await client.listStoredAgents();
    assert.equal(list.total, 1);
    assert.equal(list.agents[0].id, 'helper');
    const answer = await client.getAgent('helper').generate('hi');
    assert.equal(answer.text, '[Help.]');
  },

  async 'update as a draft, choose it per call, publish it'() {
    const helper = client.getStoredAgent('helper');
    const updated = await helper.update({ instructions: 'Help kindly.', publishOnSave: false });
    assert.equal(updated.instructions, 'Help kindly.');
    const draft = await helper.details(undefined, { status: 'draft' });
    assert.equal(draft.instructions, 'Help kindly.');
    const published = await client.getAgent('helper').generate('hi');
    assert.equal(published.text, '[Help.]');
    const drafted = await client.getAgent('helper').generate('hi', {
      versions: { agents: { helper: { status: 'draft' } } },
    });
    assert.equal(drafted.text, '[Help kindly.]');
    const versions = await helper.listVersions();
    assert.equal(versions.total, 2);
    assert.equal(versions.versions[0].versionNumber, 2);
    const activated = await helper.activateVersion(versions.versions[0].id);
    assert.equal(activated.success, true);
    assert.equal(activated.activeVersionId, versions.versions[0].id);
    const now = await client.getAgent('helper').generate('hi');
    assert.equal(now.text, '[Help kindly.]');
  },

  async 'versions: get, compare, restore, delete'() {
    const helper = client.getStoredAgent('helper');
    const { versions } = await helper.listVersions({ orderBy: { direction: 'ASC' } });
    const [v1, v2] = versions;
    assert.equal(v1.versionNumber, 1);
    const one = await helper.getVersion(v1.id);
    assert.equal(one.instructions, 'Help.');
    const diff = await helper.compareVersions(v1.id, v2.id);
    assert.deepEqual(diff.diffs, [
      { field: 'instructions', previousValue: 'Help.', currentValue: 'Help kindly.' },
    ]);
    const restored = await helper.restoreVersion(v1.id);
    assert.equal(restored.versionNumber, 3);
    assert.equal(restored.instructions, 'Help.');
    await helper.deleteVersion(v1.id);
    await assert.rejects(helper.getVersion(v1.id), /404/);
    // The published version is kept.
    await assert.rejects(helper.deleteVersion(v2.id), /409/);
  },

  async 'a code agent: versions of what it lets change'() {
    const writing = client.getAgent('writing');
    const created = await writing.createVersion({ instructions: 'Write like a pirate.', changeMessage: 'arr' });
    assert.equal(created.versionNumber, 1);
    assert.equal(created.changeMessage, 'arr');
    const plain = await writing.generate('hi');
    assert.equal(plain.text, '[Write plainly.]');
    const listed = await writing.listVersions();
    assert.equal(listed.versions[0].id, created.id);
    await writing.activateVersion(created.id);
    const pirate = await writing.generate('hi');
    assert.equal(pirate.text, '[Write like a pirate.]');
    await assert.rejects(writing.createVersion({ model: 'scripted/other' }), /422/);
  },

  async 'delete a stored agent'() {
    const deleted = await client.getStoredAgent('helper').delete();
    assert.equal(deleted.success, true);
    await assert.rejects(client.getStoredAgent('helper').details(), /404/);
  },
};

await runChecks(checks);
