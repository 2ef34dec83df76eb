// An agent on the official MCP TypeScript SDKs, driven by the Go test
// TestEndToEndThroughAxgateMCP one JSON line at a time on standard input; it
// answers with JSON lines on standard output.
//
// Commands:
//   {"op":"connect","id":ID,"sdk":"client"|"sdk","url":MCP_URL,"bearer":JWT,"urlElicitation":bool}
//     client: @modelcontextprotocol/client 2.x (asks for MCP 2026-07-28
//     with server/discover, falls back to what the server speaks); sdk:
//     @modelcontextprotocol/sdk 1.x (2025-11-25). Answers
//     {"ev":"connected","id":ID,"version":V}.
//   {"op":"call","id":ID,"tool":T,"args":{...}}
//     answers {"ev":"result","id":ID,"result":{...}} (the tool's result,
//     refusals included); on the way, a URL-mode elicitation is reported as
//     {"ev":"elicit","id":ID,"url":U,"elicitationId":E} and waits for
//   {"op":"answer","id":ID,"action":"accept"|"decline"|"cancel"}.
//   {"op":"close","id":ID}  answers {"ev":"closed","id":ID}.
// A failure is {"ev":"error","id":ID,"message":M}. The script ends with its
// standard input.
//
// It runs beside the node_modules of examples/mcpgateway (its package.json
// pins the clients), where its imports resolve.
import readline from 'node:readline';
import { Client as Client1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as Transport1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client as Client2, StreamableHTTPClientTransport as Transport2 } from '@modelcontextprotocol/client';

const clients = new Map(); // id -> { client, answer: resolve of the pending elicitation }

function send(ev) {
  process.stdout.write(JSON.stringify(ev) + '\n');
}

// elicitation reports a URL-mode request of the gateway and waits for the
// test's answer (the person decided on the page, or not).
function elicitation(id) {
  return (req) => {
    const params = req.params;
    if (params.mode !== 'url') {
      send({ ev: 'error', id, message: `not a URL-mode request: ${JSON.stringify(params)}` });
      return { action: 'decline' };
    }
    return new Promise((resolve) => {
      clients.get(id).answer = resolve;
      send({ ev: 'elicit', id, url: params.url, elicitationId: params.elicitationId });
    });
  };
}

async function connect(cmd) {
  const requestInit = { headers: { Authorization: `Bearer ${cmd.bearer}` } };
  const capabilities = cmd.urlElicitation ? { elicitation: { url: {} } } : {};
  const info = { name: 'axgate-e2e-agent', version: '0.0.1' };
  let client;
  if (cmd.sdk === 'client') {
    client = new Client2(info, { capabilities, versionNegotiation: { mode: 'auto' } });
    if (cmd.urlElicitation) client.setRequestHandler('elicitation/create', elicitation(cmd.id));
    clients.set(cmd.id, { client });
    await client.connect(new Transport2(new URL(cmd.url), { requestInit }));
  } else {
    client = new Client1(info, { capabilities });
    if (cmd.urlElicitation) client.setRequestHandler(ElicitRequestSchema, elicitation(cmd.id));
    clients.set(cmd.id, { client });
    await client.connect(new Transport1(new URL(cmd.url), { requestInit }));
  }
  const version = client.getNegotiatedProtocolVersion?.() ?? client.transport?.protocolVersion ?? '';
  send({ ev: 'connected', id: cmd.id, version });
}

async function handle(cmd) {
  try {
    switch (cmd.op) {
      case 'connect':
        await connect(cmd);
        break;
      case 'call': {
        const result = await clients.get(cmd.id).client.callTool({ name: cmd.tool, arguments: cmd.args });
        send({ ev: 'result', id: cmd.id, result });
        break;
      }
      case 'answer': {
        const c = clients.get(cmd.id);
        const answer = c.answer;
        c.answer = undefined;
        answer({ action: cmd.action });
        break;
      }
      case 'close':
        await clients.get(cmd.id).client.close();
        clients.delete(cmd.id);
        send({ ev: 'closed', id: cmd.id });
        break;
      default:
        throw new Error(`unknown op ${cmd.op}`);
    }
  } catch (err) {
    send({ ev: 'error', id: cmd.id, message: String(err?.stack ?? err) });
  }
}

// Commands run concurrently: an answer arrives while its call waits.
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  if (line.trim() !== '') handle(JSON.parse(line));
}).on('close', async () => {
  for (const { client } of clients.values()) await client.close().catch(() => {});
  process.exit(0);
});
