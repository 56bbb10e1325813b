// Drives a real `gatehouse serve` at /mcp through the official MCP
// TypeScript SDK's Client and StreamableHTTPClientTransport, as a coding
// agent does. Run by internal/mcp's TestOfficialTypeScriptSDK with
// GATEHOUSE_URL (the server's base URL), GATEHOUSE_AGENT_TOKEN (an operator
// API token), GATEHOUSE_VIEWER_TOKEN (a viewer's) and
// GATEHOUSE_ADMIN_TOKEN (decides through the API). Exits non-zero on the
// first failed check.
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const base = process.env.GATEHOUSE_URL;
const agentToken = process.env.GATEHOUSE_AGENT_TOKEN;
const viewerToken = process.env.GATEHOUSE_VIEWER_TOKEN;
const adminToken = process.env.GATEHOUSE_ADMIN_TOKEN;
assert.ok(base && agentToken && viewerToken && adminToken, "GATEHOUSE_URL and the three tokens are required");
const step = (name) => console.log(`--- ${name}`);

async function connect(token) {
  const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
    requestInit: token ? { headers: { Authorization: `Bearer ${token}` } } : {},
  });
  const client = new Client({ name: "gatehouse-sdk-test", version: "1.0.0" });
  await client.connect(transport);
  return client;
}

// result returns a successful call's structuredContent, checking that the
// text block carries the same JSON.
function result(res) {
  assert.ok(!res.isError, `isError: ${JSON.stringify(res.content)}`);
  assert.equal(typeof res.structuredContent, "object");
  const textBlock = res.content.find((c) => c.type === "text");
  assert.ok(textBlock, "a text block");
  assert.deepEqual(JSON.parse(textBlock.text), res.structuredContent, "the text block is the structured JSON");
  return res.structuredContent;
}

function toolError(res, ...names) {
  assert.equal(res.isError, true, `want isError, got ${JSON.stringify(res)}`);
  const msg = res.content.map((c) => c.text ?? "").join(" ");
  for (const n of names) assert.ok(msg.includes(n), `error ${JSON.stringify(msg)} names ${n}`);
  return msg;
}

async function api(method, path, body) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { Authorization: `Bearer ${adminToken}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  assert.ok(res.ok, `${method} ${path}: ${res.status} ${text}`);
  return JSON.parse(text);
}

step("auth: no token and a wrong one are 401 with WWW-Authenticate: Bearer");
for (const headers of [{}, { Authorization: "Bearer nope" }]) {
  const res = await fetch(`${base}/mcp`, {
    method: "POST",
    headers: { ...headers, "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } }),
  });
  assert.equal(res.status, 401);
  assert.match(res.headers.get("www-authenticate") ?? "", /^Bearer/);
}
await assert.rejects(connect(undefined), "the SDK's client without a token is refused");

step("list tools: every tool with input and output schemas the client accepts");
const agent = await connect(agentToken);
const { tools } = await agent.listTools();
const names = tools.map((t) => t.name).sort();
const want = (process.env.GATEHOUSE_MCP_TOOLS ?? "").split(",").filter(Boolean).sort();
assert.deepEqual(names, want);
for (const t of tools) {
  assert.equal(t.inputSchema.type, "object", `${t.name} inputSchema`);
  assert.equal(t.outputSchema?.type, "object", `${t.name} outputSchema`);
}

step("list_workflows, start_task, get_task");
const { workflows } = result(await agent.callTool({ name: "list_workflows", arguments: {} }));
assert.ok(workflows.length > 0 && workflows.every((w) => typeof w.input_schema === "object"));
const slogan = workflows.find((w) => w.name === "slogan");
assert.ok(slogan, "the slogan workflow");
const started = result(await agent.callTool({ name: "start_task",
  arguments: { workflow: "slogan", input: { user_input: "a durable approval desk for agents" }, title: "Via MCP" } }));
assert.equal(started.workflow, "slogan");
assert.equal(started.title, "Via MCP");
const got = result(await agent.callTool({ name: "get_task", arguments: { id: started.id } }));
assert.equal(got.id, started.id);
const fromAPI = await api("GET", `/api/v1/tasks/${started.id}`);
assert.deepEqual(Object.keys(got).sort(), Object.keys(fromAPI).sort(), "get_task is the API's Task");

step("bad arguments: a tool error naming the field");
toolError(await agent.callTool({ name: "get_task", arguments: { id: "nope" } }), "id");
toolError(await agent.callTool({ name: "start_task", arguments: { workflow: "none", input: {} } }), "workflow");
await assert.rejects(agent.callTool({ name: "decide", arguments: {} }), "an unknown tool is a protocol error");

step("a viewer reads but does not start");
const viewer = await connect(viewerToken);
result(await viewer.callTool({ name: "get_task", arguments: { id: started.id } }));
toolError(await viewer.callTool({ name: "start_task", arguments: { workflow: "slogan", input: { user_input: "x" } } }), "operator");

if (names.includes("request_approval")) {
  await requests();
}
await agent.close();
await viewer.close();
console.log("ok");

async function requests() {
  step("request_approval: a pending request, made by the agent's token");
  const asked = result(await agent.callTool({ name: "request_approval", arguments: {
    kind: "deploy", title: "Deploy v2 to production", payload: { tool: "deploy", args: { env: "prod" } },
    idempotency_key: "ts-sdk-1" } }));
  assert.equal(asked.status, "pending");
  assert.equal(asked.created_by, "token:agent");
  assert.deepEqual(asked.actions, ["approve", "reject"]);
  assert.match(asked.url, /\/tasks\//);
  const again = result(await agent.callTool({ name: "request_approval", arguments: {
    kind: "deploy", title: "Deploy v2 to production", payload: { tool: "deploy", args: { env: "prod" } },
    idempotency_key: "ts-sdk-1" } }));
  assert.equal(again.id, asked.id, "the same idempotency key is the same request");

  step("wait with progress, decide on the API, the wait returns");
  const progress = [];
  const waiting = agent.callTool({ name: "get_request", arguments: { id: asked.id, wait_seconds: 40 } }, undefined, {
    onprogress: (p) => progress.push(p), resetTimeoutOnProgress: true, timeout: 60_000 });
  await new Promise((r) => setTimeout(r, 6_000));
  const t0 = Date.now();
  await api("POST", `/api/v1/tasks/${asked.task_id}/decisions`, { interrupt_id: asked.interrupt_id, action: "approve" });
  const decided = result(await waiting);
  assert.ok(Date.now() - t0 < 5_000, "the waiting call returned soon after the decision");
  assert.equal(decided.status, "approved");
  assert.equal(decided.decision.action, "approve");
  assert.equal(decided.decision.by, "bootstrap");
  assert.ok(progress.length >= 2, `progress notifications while waiting: ${JSON.stringify(progress)}`);
  assert.ok(progress.every((p) => p.total === 40 && typeof p.message === "string"));

  step("get_request reads it afterwards; the viewer too");
  assert.equal(result(await agent.callTool({ name: "get_request", arguments: { id: asked.id } })).status, "approved");
  assert.equal(result(await viewer.callTool({ name: "get_request", arguments: { id: asked.id } })).status, "approved");
  toolError(await viewer.callTool({ name: "request_approval", arguments: { title: "May I?" } }), "operator");

  step("ask_human: a typed answer");
  const q = result(await agent.callTool({ name: "ask_human", arguments: { question: "Which region?",
    response_schema: { type: "object", required: ["region"],
      properties: { region: { type: "string", enum: ["eu-west-1", "us-east-1"] } } } } }));
  assert.equal(q.kind, "question");
  assert.deepEqual(q.actions, ["respond"]);
  await api("POST", `/api/v1/tasks/${q.task_id}/decisions`, { interrupt_id: q.interrupt_id, action: "respond",
    value: { region: "eu-west-1" } });
  const answered = result(await agent.callTool({ name: "get_request", arguments: { id: q.id, wait_seconds: 5 } }));
  assert.equal(answered.status, "responded");
  assert.deepEqual(answered.decision.value, { region: "eu-west-1" });

  step("cancel_request; bad arguments name the field");
  const c = result(await agent.callTool({ name: "request_approval", arguments: { title: "Never mind" } }));
  assert.equal(result(await agent.callTool({ name: "cancel_request", arguments: { id: c.id } })).status, "cancelled");
  toolError(await agent.callTool({ name: "request_approval", arguments: {} }), "title");
  toolError(await agent.callTool({ name: "request_approval", arguments: { title: "x", kind: "Bad Kind" } }), "kind");
  toolError(await agent.callTool({ name: "request_approval", arguments: { title: "x", wait_seconds: 99 } }), "wait_seconds");
  toolError(await agent.callTool({ name: "ask_human", arguments: {} }), "question");
  toolError(await agent.callTool({ name: "get_request", arguments: { id: "nope" } }), "id");
}
