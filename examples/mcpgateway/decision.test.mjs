// Agents built on the official MCP TypeScript SDKs write a file through the
// axgate gateway, in front of @modelcontextprotocol/server-filesystem, where
// the write waits for the person's decision on the page of the call:
//
// - @modelcontextprotocol/client 2.x, negotiating with server/discover (it
//   speaks MCP 2026-07-28 and its multi round-trip requests; the gateway's
//   front answers with the 2025-11-25 era, which it falls back to), and
//   declaring URL-mode elicitation: the gateway sends it to the page;
// - @modelcontextprotocol/sdk 1.x on 2025-11-25, declaring URL-mode
//   elicitation: the same;
// - @modelcontextprotocol/sdk 1.x with no elicitation: the refusal names the
//   page (details.decision_url), and the agent calls again after the
//   person decided.
//
// The person is this script: it decides (confirm or deny) the request the
// page shows, with the JSON endpoint beside the pages (POST
// /approvals/{id}), as the person (the pages themselves, their sign-in and
// CSRF are the human pages' browser tests). Then the call's retry writes the
// file, once; a second retry is refused; a denial leaves no file.
//
// Environment: MCP_URL (the gateway's /mcp), HUMAN_URL (the JSON endpoints
// for people), ROOT (the directory the server may touch), BEARER (alice's
// bearer token as the agent, an editor), PERSON (alice's token as a person,
// at HUMAN_URL). The Go test TestDecisionPagesTypeScriptClients in
// adapters/mcpgate/gateway sets them and runs this file with node --test.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { Client as Client1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as Transport1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client as Client2, StreamableHTTPClientTransport as Transport2 } from '@modelcontextprotocol/client';

const { MCP_URL, HUMAN_URL, ROOT, BEARER, PERSON } = process.env;
assert.ok(MCP_URL && HUMAN_URL && ROOT && BEARER && PERSON, 'MCP_URL, HUMAN_URL, ROOT, BEARER and PERSON must be set');
const auth = { headers: { Authorization: `Bearer ${BEARER}` } };

// decide gives the person's decision on request id (the page's request).
async function decide(id, decision) {
  const res = await fetch(`${HUMAN_URL}/approvals/${encodeURIComponent(id)}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${PERSON}` },
    body: JSON.stringify({ approve: decision === 'confirm' }),
  });
  assert.ok(res.status < 400, `deciding ${decision} on ${id}: HTTP ${res.status} ${await res.text()}`);
}

// person answers URL-mode elicitation: it records the page, decides there
// (when it has a decision to give) and says it went to the page.
function person() {
  const p = { pages: [], decision: undefined };
  p.handle = async (req) => {
    const params = req.params;
    assert.equal(params.mode, 'url', `a URL-mode request, got ${JSON.stringify(params)}`);
    p.pages.push(params.url);
    assert.ok(params.url.endsWith(`/requests/${params.elicitationId}`), `the page of request ${params.elicitationId}: ${params.url}`);
    if (p.decision) {
      await decide(params.elicitationId, p.decision);
    }
    return { action: 'accept' };
  };
  return p;
}

function refusal(res) {
  assert.equal(res.isError, true, `want a refusal, got ${JSON.stringify(res)}`);
  assert.ok(res.structuredContent?.error, 'structuredContent carries the AXAG envelope');
  return res.structuredContent.error;
}

function exists(file) {
  return fs.existsSync(file);
}

const clients = {
  // The 2.x client, probing with server/discover: it gets the gateway's
  // 2025-11-25 and takes URL-mode elicitation.
  async 'client 2.4.0'(p) {
    const c = new Client2(
      { name: 'axgate-decision-test', version: '0.0.1' },
      { capabilities: { elicitation: { url: {} } }, versionNegotiation: { mode: 'auto' } },
    );
    c.setRequestHandler('elicitation/create', p.handle);
    await c.connect(new Transport2(new URL(MCP_URL), { requestInit: auth }));
    return c;
  },
  async 'sdk 1.32.2'(p) {
    const c = new Client1({ name: 'axgate-decision-test', version: '0.0.1' }, { capabilities: { elicitation: { url: {} } } });
    c.setRequestHandler(ElicitRequestSchema, p.handle);
    await c.connect(new Transport1(new URL(MCP_URL), { requestInit: auth }));
    return c;
  },
};

for (const [name, connect] of Object.entries(clients)) {
  test(`${name}: sent to the page, the retry writes once, a denial writes nothing`, async () => {
    const p = person();
    const c = await connect(p);
    try {
      const version = c.getNegotiatedProtocolVersion?.() ?? '2025-11-25';
      assert.equal(version, '2025-11-25', 'the gateway front speaks the 2025-11-25 era');
      const file = path.join(ROOT, `${name.replace(/\W+/g, '-')}.txt`);
      const args = { path: file, content: `confirmed on the page by ${name}` };

      p.decision = 'confirm';
      const res = await c.callTool({ name: 'write_file', arguments: args });
      assert.notEqual(res.isError, true, `the write confirmed on its page: ${JSON.stringify(res)}`);
      assert.equal(fs.readFileSync(file, 'utf8'), args.content);
      assert.equal(p.pages.length, 1);
      assert.match(p.pages[0], /\/requests\/[^/]+$/);

      // The decision was for one call: the same call again is refused when
      // the person does not decide again.
      fs.rmSync(file);
      p.decision = undefined;
      const again = refusal(await c.callTool({ name: 'write_file', arguments: args }));
      assert.equal(again.code, 'AXAG_CONFIRMATION_MISSING');
      assert.ok(again.details.decision_url, 'the refusal names the page');
      assert.equal(exists(file), false, 'a second retry wrote the file');

      // Deny: nothing is written.
      const denied = path.join(ROOT, `${name.replace(/\W+/g, '-')}-denied.txt`);
      p.decision = 'deny';
      const no = refusal(await c.callTool({ name: 'write_file', arguments: { path: denied, content: 'denied' } }));
      assert.equal(no.code, 'AXAG_CONFIRMATION_MISSING');
      assert.equal(no.details.reason, 'declined');
      assert.equal(exists(denied), false, 'a denied write wrote the file');
    } finally {
      await c.close();
    }
  });
}

test('a client without elicitation: the refusal names the page, the repeat after the decision writes once', async () => {
  const c = new Client1({ name: 'axgate-decision-test', version: '0.0.1' }, { capabilities: {} });
  await c.connect(new Transport1(new URL(MCP_URL), { requestInit: auth }));
  try {
    const file = path.join(ROOT, 'plain.txt');
    const args = { path: file, content: 'confirmed, then called again' };
    const first = refusal(await c.callTool({ name: 'write_file', arguments: args }));
    assert.equal(first.code, 'AXAG_CONFIRMATION_MISSING');
    assert.ok(first.details.decision_url && first.details.agent_action, `the refusal names the page: ${JSON.stringify(first.details)}`);
    assert.equal(exists(file), false);
    await decide(first.details.decision_id, 'confirm');
    const res = await c.callTool({ name: 'write_file', arguments: args });
    assert.notEqual(res.isError, true, `the repeat after the decision: ${JSON.stringify(res)}`);
    assert.equal(fs.readFileSync(file, 'utf8'), args.content);
    fs.rmSync(file);
    assert.equal(refusal(await c.callTool({ name: 'write_file', arguments: args })).code, 'AXAG_CONFIRMATION_MISSING');
    assert.equal(exists(file), false, 'a second repeat wrote the file');

    const denied = path.join(ROOT, 'plain-denied.txt');
    const ask = refusal(await c.callTool({ name: 'write_file', arguments: { path: denied, content: 'denied' } }));
    await decide(ask.details.decision_id, 'deny');
    const no = refusal(await c.callTool({ name: 'write_file', arguments: { path: denied, content: 'denied' } }));
    assert.equal(no.code, 'AXAG_CONFIRMATION_MISSING');
    assert.equal(exists(denied), false, 'a denied write wrote the file');
  } finally {
    await c.close();
  }
});
