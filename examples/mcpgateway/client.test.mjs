// An agent built on the official MCP TypeScript SDK uses
// @modelcontextprotocol/server-filesystem through the axgate gateway, with
// this folder's manifest: over streamable HTTP as three callers (carol may
// read, alice may also write, bob approves), and over stdio as the local
// user (alice).
//
// Environment: MCP_URL (the gateway's /mcp), HUMAN_URL (the person-facing
// endpoints, where bob approves), ROOT (the directory the server may touch)
// and GATEWAY_COMMAND (a program that serves the gateway on stdio). The Go
// test TestServerFilesystemNodeClient in adapters/mcpgate/gateway sets them
// and runs this file with node --test.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const { MCP_URL, HUMAN_URL, ROOT, GATEWAY_COMMAND } = process.env;
// BEARER_TOKENS maps the callers' names (carol-token, alice-token,
// bob-token) to the bearer tokens a gateway with real keys accepts (JWTs,
// for axgate mcp); without it the names are the tokens.
const BEARER_TOKENS = JSON.parse(process.env.BEARER_TOKENS ?? '{}');
const bearer = (name) => BEARER_TOKENS[name] ?? name;
// HUMAN_TOKENS maps the same names to the tokens the person-facing
// endpoints accept, where they differ (axgate mcp --human takes tokens of
// --human-audience only, never an agent's); by default the bearer tokens.
const HUMAN_TOKENS = JSON.parse(process.env.HUMAN_TOKENS ?? '{}');
const person = (name) => HUMAN_TOKENS[name] ?? bearer(name);
assert.ok(MCP_URL && HUMAN_URL && ROOT && GATEWAY_COMMAND, 'MCP_URL, HUMAN_URL, ROOT and GATEWAY_COMMAND must be set');

const READS = ['read_text_file', 'read_multiple_files', 'search_files', 'get_file_info', 'list_directory', 'directory_tree', 'list_allowed_directories'];
const WRITES = ['write_file', 'edit_file', 'move_file', 'create_directory'];

// client returns a client; with answer set it supports elicitation and
// answers every question with it, recording the questions.
function client(answer) {
  const c = new Client(
    { name: 'axgate-gateway-node-test', version: '0.0.1' },
    { capabilities: answer ? { elicitation: { form: {} } } : {} },
  );
  const questions = [];
  if (answer) {
    c.setRequestHandler(ElicitRequestSchema, async (req) => {
      questions.push(req.params.message);
      return answer === 'accept' ? { action: 'accept', content: {} } : { action: answer };
    });
  }
  return { c, questions };
}

async function overHTTP(token, answer) {
  const { c, questions } = client(answer);
  await c.connect(new StreamableHTTPClientTransport(new URL(MCP_URL), { requestInit: { headers: { Authorization: `Bearer ${bearer(token)}` } } }));
  return { client: c, questions };
}

async function overStdio(answer) {
  const { c, questions } = client(answer);
  await c.connect(new StdioClientTransport({ command: GATEWAY_COMMAND, env: { ...process.env }, stderr: 'ignore' }));
  return { client: c, questions };
}

function refusal(res) {
  assert.equal(res.isError, true, `want a refusal, got ${JSON.stringify(res)}`);
  assert.ok(res.structuredContent?.error, 'structuredContent carries the AXAG envelope');
  return res.structuredContent.error;
}

function text(res) {
  return res.content.filter((b) => b.type === 'text').map((b) => b.text).join('\n');
}

async function names(c) {
  const { tools } = await c.listTools();
  return tools.map((t) => t.name).sort();
}

function file(name, content) {
  const p = path.join(ROOT, name);
  if (content !== undefined) fs.writeFileSync(p, content);
  return p;
}

function read(p) {
  try {
    return fs.readFileSync(p, 'utf8');
  } catch (e) {
    return `(${e.code})`;
  }
}

test('HTTP: each caller lists the tools it may call, never the undeclared ones', async () => {
  const carol = await overHTTP('carol-token');
  const alice = await overHTTP('alice-token');
  try {
    assert.deepEqual(await names(carol.client), [...READS].sort());
    assert.deepEqual(await names(alice.client), [...READS, ...WRITES].sort());
    const { tools } = await alice.client.listTools();
    const write = tools.find((t) => t.name === 'write_file');
    assert.equal(write.description, 'Create a file or overwrite it entirely. Asks the person first.', "the manifest's description");
    assert.equal(write.inputSchema.properties.content.maxLength, 1000000, 'the enforced input schema');
  } finally {
    await carol.client.close();
    await alice.client.close();
  }
});

test('HTTP: a read, and a check the server itself does not make', async () => {
  const p = file('read.txt', 'one\ntwo\nthree\n');
  const { client: c } = await overHTTP('carol-token');
  try {
    const res = await c.callTool({ name: 'read_text_file', arguments: { path: p, head: 1 } });
    assert.notEqual(res.isError, true, JSON.stringify(res));
    assert.match(text(res), /^one/);
    const both = refusal(await c.callTool({ name: 'read_text_file', arguments: { path: p, head: 1, tail: 1 } }));
    assert.equal(both.code, 'AXAG_PRECONDITION_FAILED');
  } finally {
    await c.close();
  }
});

test('HTTP: refused writes leave the file alone', async () => {
  const p = file('refused.txt', 'before');
  const carol = await overHTTP('carol-token');
  const alice = await overHTTP('alice-token');
  try {
    assert.equal(refusal(await carol.client.callTool({ name: 'write_file', arguments: { path: p, content: 'x' } })).code, 'AXAG_ROLE_INSUFFICIENT');
    // alice's client cannot be asked: the person must confirm with a token.
    assert.equal(refusal(await alice.client.callTool({ name: 'write_file', arguments: { path: p, content: 'x' } })).code, 'AXAG_CONFIRMATION_MISSING');
    assert.equal(read(p), 'before');
  } finally {
    await carol.client.close();
    await alice.client.close();
  }
});

test('HTTP: a write the person confirms is written, one the person declines is not', async () => {
  const p = file('confirmed.txt', 'before');
  const yes = await overHTTP('alice-token', 'accept');
  const no = await overHTTP('alice-token', 'decline');
  try {
    const res = await yes.client.callTool({ name: 'write_file', arguments: { path: p, content: 'after' } });
    assert.notEqual(res.isError, true, JSON.stringify(res));
    assert.equal(read(p), 'after');
    assert.deepEqual(yes.questions, [`Write ${p}, replacing what it holds?`]);
    const declined = refusal(await no.client.callTool({ name: 'write_file', arguments: { path: p, content: 'declined' } }));
    assert.equal(declined.code, 'AXAG_CONFIRMATION_MISSING');
    assert.equal(declined.details.reason, 'declined');
    assert.equal(read(p), 'after');
  } finally {
    await yes.client.close();
    await no.client.close();
  }
});

test('HTTP: a move needs the person and an approver', async () => {
  const from = file('draft.txt', 'draft');
  const to = path.join(ROOT, 'final.txt');
  const alice = await overHTTP('alice-token', 'accept');
  try {
    const args = { source: from, destination: to };
    const missing = refusal(await alice.client.callTool({ name: 'move_file', arguments: args }));
    assert.equal(missing.code, 'AXAG_APPROVAL_MISSING');
    const id = missing.details.approval_request_id;
    assert.ok(id, JSON.stringify(missing));
    assert.equal(read(to), '(ENOENT)');

    const decided = await fetch(`${HUMAN_URL}/approvals/${encodeURIComponent(id)}`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${person('bob-token')}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ approve: true, reason: 'fine' }),
    });
    assert.equal(decided.status, 200, await decided.clone().text());
    const { token } = await decided.json();

    const res = await alice.client.callTool({ name: 'move_file', arguments: args, _meta: { 'axag/approvals': [token] } });
    assert.notEqual(res.isError, true, JSON.stringify(res));
    assert.equal(read(to), 'draft');
    assert.equal(read(from), '(ENOENT)');
  } finally {
    await alice.client.close();
  }
});

test('HTTP: a tool of the server the manifest does not declare is refused', async () => {
  const p = file('hidden.txt', 'x');
  const { client: c } = await overHTTP('bob-token');
  try {
    assert.equal(refusal(await c.callTool({ name: 'read_media_file', arguments: { path: p } })).code, 'AXAG_INTENT_NOT_FOUND');
  } finally {
    await c.close();
  }
});

test('stdio: the local user lists, reads, and writes what the person confirms', async () => {
  const p = file('stdio.txt', 'before');
  const yes = await overStdio('accept');
  try {
    assert.deepEqual(await names(yes.client), [...READS, ...WRITES].sort());
    const res = await yes.client.callTool({ name: 'read_text_file', arguments: { path: p } });
    assert.equal(text(res), 'before');
    const w = await yes.client.callTool({ name: 'write_file', arguments: { path: p, content: 'after' } });
    assert.notEqual(w.isError, true, JSON.stringify(w));
    assert.equal(read(p), 'after');
  } finally {
    await yes.client.close();
  }
  const no = await overStdio('decline');
  try {
    const declined = refusal(await no.client.callTool({ name: 'write_file', arguments: { path: p, content: 'declined' } }));
    assert.equal(declined.details.reason, 'declined');
    assert.equal(read(p), 'after');
    assert.equal(refusal(await no.client.callTool({ name: 'read_media_file', arguments: { path: p } })).code, 'AXAG_INTENT_NOT_FOUND');
  } finally {
    await no.client.close();
  }
});
