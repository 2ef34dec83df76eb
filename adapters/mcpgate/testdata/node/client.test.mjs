// An MCP client built on the official TypeScript SDK calls the axgate shop
// server (examples/mcpserver) over streamable HTTP: it lists the tools, is
// refused for bad arguments with the AXAG envelope, succeeds with good ones,
// and gets a confirmation through by token and by elicitation.
//
// Environment: MCP_URL (the /mcp endpoint), HUMAN_URL (the person-facing
// endpoints), AGENT_TOKEN (the agent user's bearer token) and PERSON_TOKEN
// (that user's token for the person-facing endpoints, which refuse the
// agent's). The Go test
// TestNodeClient in examples/mcpserver starts the server and runs this file.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const { MCP_URL, HUMAN_URL, AGENT_TOKEN, PERSON_TOKEN } = process.env;
assert.ok(MCP_URL && HUMAN_URL && AGENT_TOKEN && PERSON_TOKEN, 'MCP_URL, HUMAN_URL, AGENT_TOKEN and PERSON_TOKEN must be set');

const auth = { Authorization: `Bearer ${AGENT_TOKEN}` };

// connect returns a connected client; with answer set it supports
// elicitation and answers every question with it.
async function connect(answer) {
  const client = new Client(
    { name: 'axgate-node-test', version: '0.0.1' },
    { capabilities: answer ? { elicitation: { form: {} } } : {} },
  );
  const questions = [];
  if (answer) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      questions.push(req.params.message);
      return answer === 'accept' ? { action: 'accept', content: {} } : { action: answer };
    });
  }
  const transport = new StreamableHTTPClientTransport(new URL(MCP_URL), { requestInit: { headers: auth } });
  await client.connect(transport);
  return { client, questions };
}

const order = {
  cart_id: '3f0c2a8e-9b1d-4c56-8f3e-2a1b0c9d8e7f',
  shipping_address_id: 'home',
};

function envelope(res) {
  assert.equal(res.isError, true, `want a refusal, got ${JSON.stringify(res)}`);
  assert.ok(res.structuredContent?.error, 'structuredContent carries the AXAG envelope');
  assert.match(res.content[0].text, /^Refused \(/, 'the first text block explains the refusal');
  return res.structuredContent.error;
}

test('lists every tool with its input schema, annotations and AXAG safety block', async () => {
  const { client } = await connect();
  try {
    const { tools } = await client.listTools();
    const search = tools.find((t) => t.name === 'product_search');
    assert.ok(search, 'product_search is listed');
    assert.equal(search.inputSchema.type, 'object');
    assert.ok(search.inputSchema.required.includes('query'));
    assert.equal(search.annotations.readOnlyHint, true);
    assert.equal(search._meta['axag/safety'].intent, 'product.search');
    const place = tools.find((t) => t.name === 'order_place');
    assert.equal(place.annotations.destructiveHint, true);
    assert.equal(place._meta['axag/safety'].confirmation_required, true);
  } finally {
    await client.close();
  }
});

test('refuses bad arguments with every violation, then succeeds with good ones', async () => {
  const { client } = await connect();
  try {
    const bad = await client.callTool({ name: 'product_search', arguments: { limit: 500, category: 'toys' } });
    const err = envelope(bad);
    assert.match(err.code, /^AXAG_/);
    const paths = err.details.violations.map((v) => v.path).sort();
    assert.ok(paths.includes('/limit') && paths.includes('/category'), `violations: ${paths}`);
    assert.equal(err.details.retryable, true);

    const good = await client.callTool({ name: 'product_search', arguments: { query: 'lamp' } });
    assert.notEqual(good.isError, true, JSON.stringify(good));
    assert.equal(good.structuredContent.count, 2);
  } finally {
    await client.close();
  }
});

test('a confirmation refusal, a token from the person, then success', async () => {
  const { client } = await connect();
  try {
    const err = envelope(await client.callTool({ name: 'order_place', arguments: order }));
    assert.equal(err.code, 'AXAG_CONFIRMATION_MISSING');
    assert.ok(err.details.confirmation_message, 'the refusal says what to ask the person');

    // The person confirms in the host's UI, which mints a token for this exact call.
    const r = await fetch(`${HUMAN_URL}/confirmations`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${PERSON_TOKEN}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ tool: 'order_place', arguments: order }),
    });
    assert.equal(r.status, 200);
    const { token } = await r.json();

    const ok = await client.callTool({ name: 'order_place', arguments: order, _meta: { 'axag/confirmation': token } });
    assert.notEqual(ok.isError, true, JSON.stringify(ok));
    assert.equal(ok.structuredContent.status, 'placed');

    // The token is single use.
    const again = envelope(await client.callTool({ name: 'order_place', arguments: order, _meta: { 'axag/confirmation': token } }));
    assert.equal(again.code, 'AXAG_CONFIRMATION_MISSING');
    assert.equal(again.details.reason, 'already_used');
  } finally {
    await client.close();
  }
});

test('a client with elicitation is asked inline: accept runs the call', async () => {
  const { client, questions } = await connect('accept');
  try {
    const ok = await client.callTool({ name: 'order_place', arguments: order });
    assert.notEqual(ok.isError, true, JSON.stringify(ok));
    assert.equal(ok.structuredContent.confirmed_inline, true);
    assert.equal(questions.length, 1);
    assert.match(questions[0], /order\.place/);
  } finally {
    await client.close();
  }
});

test('a client with elicitation is asked inline: decline refuses', async () => {
  const { client, questions } = await connect('decline');
  try {
    const err = envelope(await client.callTool({ name: 'order_place', arguments: order }));
    assert.equal(err.code, 'AXAG_CONFIRMATION_MISSING');
    assert.equal(err.details.reason, 'declined');
    assert.equal(questions.length, 1);
  } finally {
    await client.close();
  }
});
