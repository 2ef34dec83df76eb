// MCP clients on the official TypeScript SDKs, driven by the Go test
// TestOneGatewayThreeUpstreams one JSON line at a time on standard input;
// each command is answered with one JSON line on standard output.
//
// Commands:
//   {"op":"connect","id":ID,"sdk":"client"|"sdk","url":MCP_URL,"bearer":JWT,"roots":[URI...]}
//     client: @modelcontextprotocol/client 2.x (asks for MCP 2026-07-28,
//     falls back to what the server speaks); sdk: @modelcontextprotocol/sdk
//     1.x (2025-11-25). With roots (even []), the client declares the roots
//     capability and answers roots/list with them. Answers
//     {"ev":"connected","id":ID,"version":V}.
//   {"op":"roots","id":ID,"roots":[URI...]}  replaces the client's roots
//     and sends notifications/roots/list_changed; answers
//     {"ev":"roots","id":ID}.
//   {"op":"list","id":ID}  answers {"ev":"tools","id":ID,"tools":[NAME...]}
//     (every page of tools/list).
//   {"op":"call","id":ID,"tool":T,"args":{...}}  answers
//     {"ev":"result","id":ID,"result":{...}} (the tool's result, refusals
//     included).
//   {"op":"close","id":ID}  answers {"ev":"closed","id":ID}.
// A failure is {"ev":"error","id":ID,"message":M}. The script ends with its
// standard input.
//
// It runs beside the node_modules of this folder's package.json, which
// pins the clients.
import readline from 'node:readline';
import { Client as Client1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as Transport1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client as Client2, StreamableHTTPClientTransport as Transport2 } from '@modelcontextprotocol/client';

const clients = new Map(); // id -> client
const roots = new Map(); // id -> the client's roots, as roots/list answers them

function send(ev) {
  process.stdout.write(JSON.stringify(ev) + '\n');
}

async function connect(cmd) {
  const requestInit = { headers: { Authorization: `Bearer ${cmd.bearer}` } };
  roots.set(cmd.id, (cmd.roots ?? []).map((uri) => ({ uri })));
  const capabilities = cmd.roots ? { roots: { listChanged: true } } : {};
  const listRoots = () => ({ roots: roots.get(cmd.id) });
  const info = { name: 'axgate-e2e-' + cmd.id, version: '0.0.1' };
  let client;
  if (cmd.sdk === 'client') {
    client = new Client2(info, { capabilities, versionNegotiation: { mode: 'auto' } });
    if (cmd.roots) client.setRequestHandler('roots/list', listRoots);
    await client.connect(new Transport2(new URL(cmd.url), { requestInit }));
  } else {
    client = new Client1(info, { capabilities });
    if (cmd.roots) client.setRequestHandler(ListRootsRequestSchema, listRoots);
    await client.connect(new Transport1(new URL(cmd.url), { requestInit }));
  }
  clients.set(cmd.id, client);
  const version = client.getNegotiatedProtocolVersion?.() ?? client.transport?.protocolVersion ?? '';
  send({ ev: 'connected', id: cmd.id, version });
}

async function list(cmd) {
  const client = clients.get(cmd.id);
  const tools = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    for (const t of page.tools) tools.push(t.name);
    cursor = page.nextCursor;
  } while (cursor);
  send({ ev: 'tools', id: cmd.id, tools });
}

async function handle(cmd) {
  try {
    switch (cmd.op) {
      case 'connect':
        await connect(cmd);
        break;
      case 'list':
        await list(cmd);
        break;
      case 'roots':
        roots.set(cmd.id, cmd.roots.map((uri) => ({ uri })));
        await clients.get(cmd.id).sendRootsListChanged();
        send({ ev: 'roots', id: cmd.id });
        break;
      case 'call': {
        const result = await clients.get(cmd.id).callTool({ name: cmd.tool, arguments: cmd.args });
        send({ ev: 'result', id: cmd.id, result });
        break;
      }
      case 'close':
        await clients.get(cmd.id).close();
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

readline.createInterface({ input: process.stdin }).on('line', (line) => {
  if (line.trim() !== '') handle(JSON.parse(line));
}).on('close', async () => {
  for (const client of clients.values()) await client.close().catch(() => {});
  process.exit(0);
});
