// Drives a real `gatehouse serve` through the official LangGraph JS SDK, as
// an application and Agent Inbox do. Run by internal/langgraph's
// TestOfficialJSSDK with GATEHOUSE_API_URL (<base>/langgraph),
// GATEHOUSE_API_KEY and SDK_PACKAGE (the package to import: the current SDK
// or the 1.9.28 that Agent Inbox ships). Exits non-zero on the first failed
// check.
import assert from "node:assert/strict";

const pkg = process.env.SDK_PACKAGE ?? "@langchain/langgraph-sdk";
const { Client } = await import(pkg);
const apiUrl = process.env.GATEHOUSE_API_URL;
const apiKey = process.env.GATEHOUSE_API_KEY;
const workflows = (process.env.GATEHOUSE_WORKFLOWS ?? "").split(",").filter(Boolean);
assert.ok(apiUrl && apiKey, "GATEHOUSE_API_URL and GATEHOUSE_API_KEY are required");

const client = new Client({ apiUrl, apiKey });
const step = (name) => console.log(`--- ${name}`);

async function collect(gen) {
  const out = [];
  for await (const chunk of gen) out.push(chunk);
  return out;
}

async function expectHTTP(status, promise, what) {
  try {
    await promise;
  } catch (err) {
    assert.equal(err.status, status, `${what}: ${err}`);
    return err;
  }
  assert.fail(`${what}: no error, want HTTP ${status}`);
}

// The interrupt a thread waits on, checked for Agent Inbox's schema.
async function waitingAt(threadId, node) {
  const thread = await client.threads.get(threadId);
  assert.equal(thread.status, "interrupted", `thread ${threadId} status`);
  assert.equal(typeof thread.interrupts, "object");
  assert.ok(!Array.isArray(thread.interrupts), "interrupts is a map keyed by node");
  assert.deepEqual(Object.keys(thread.interrupts), [node], "interrupts keyed by the waiting node");
  const [entry] = thread.interrupts[node];
  assert.equal(typeof entry.id, "string");
  const hi = entry.value;
  assert.equal(typeof hi.action_request.action, "string");
  assert.equal(typeof hi.action_request.args, "object");
  for (const k of ["allow_accept", "allow_respond", "allow_edit", "allow_ignore"]) {
    assert.equal(typeof hi.config[k], "boolean", `config.${k}`);
  }
  assert.equal(hi.config.allow_ignore, false);
  assert.equal(typeof hi.description, "string");
  assert.ok(!Number.isNaN(Date.parse(thread.created_at)) && !Number.isNaN(Date.parse(thread.updated_at)));
  const state = await client.threads.getState(threadId);
  assert.deepEqual(state.next, [node], "getState().next");
  assert.ok(state.tasks.length > 0 && state.tasks[0].interrupts.length === 1, "a waiting thread's state has tasks");
  return { thread, entry, hi, state };
}

const gates = { configurable: { gates: {} } };

step(`${pkg}: assistants.search finds every workflow`);
const assistants = await client.assistants.search({ limit: 100 });
const graphIds = assistants.map((a) => a.graph_id).sort();
assert.deepEqual(graphIds, [...workflows].sort());
for (const a of assistants) {
  const byName = await client.assistants.get(a.graph_id);
  assert.equal(byName.assistant_id, a.assistant_id, "a graph name is accepted wherever an assistant id is");
}

step("runs.stream: metadata first, values and updates with __interrupt__, ends by itself");
const t1 = (await client.threads.create({ metadata: { purpose: "sdk test" } })).thread_id;
const chunks = await collect(
  client.runs.stream(t1, "feature", {
    input: { description: "Export invoices as CSV <img src=x onerror=alert(1)>" },
    config: gates,
    streamMode: ["values", "updates"],
  }),
);
assert.equal(chunks[0].event, "metadata");
assert.equal(chunks[0].data.thread_id, t1);
const events = chunks.map((c) => c.event);
assert.ok(events.includes("values") && events.includes("updates"), `events ${events}`);
const lastValues = chunks.filter((c) => c.event === "values").at(-1).data;
assert.ok(Array.isArray(lastValues.__interrupt__) && lastValues.__interrupt__.length === 1, "last values carry __interrupt__");
assert.ok(chunks.some((c) => c.event === "updates" && c.data.__interrupt__), "an update carries __interrupt__");
let { hi, entry } = await waitingAt(t1, "requirements");
assert.equal(hi.action_request.action, "prd");
assert.ok(hi.config.allow_accept && hi.config.allow_respond && hi.config.allow_edit);
assert.ok(!hi.description.includes("<img"), "the description escapes what the input said");
assert.equal(lastValues.__interrupt__[0].id, entry.id);

step("resume as Agent Inbox does: response re-runs the node with the feedback");
const feedback = "Please add an audit log of every export";
const resumed = await collect(
  client.runs.stream(t1, "feature", {
    command: { resume: [{ type: "response", args: feedback }] },
    streamMode: "events",
  }),
);
const starts = resumed.filter((c) => c.event === "events" && c.data.event === "on_chain_start");
assert.ok(starts.some((c) => c.data.metadata.langgraph_node === "requirements"), "requirements ran again");
assert.ok(resumed.some((c) => c.event === "events" && c.data.event === "on_chain_end" && c.data.metadata.langgraph_node === "requirements"));
({ hi, entry } = await waitingAt(t1, "requirements"));
assert.ok(JSON.stringify(hi.action_request.args).includes(feedback), "the new PRD carries the feedback");
assert.ok(hi.description.includes(feedback), "the description shows the feedback");

step("accept continues (a plain approval, with the action request as args)");
await collect(
  client.runs.stream(t1, "feature", {
    command: { resume: [{ type: "accept", args: hi.action_request }] },
    streamMode: "values",
  }),
);
({ hi } = await waitingAt(t1, "plan"));

step("edit continues with the edited document");
const [planName] = Object.keys(hi.action_request.args);
const edited = hi.action_request.args[planName] + "\n# edited in Agent Inbox\n";
await collect(
  client.runs.stream(t1, "feature", {
    command: { resume: [{ type: "edit", args: { action: hi.action_request.action, args: { [planName]: edited } } }] },
  }),
);
await waitingAt(t1, "merge");
const afterEdit = await client.threads.getState(t1);
assert.ok(JSON.stringify(afterEdit.values).includes("# edited in Agent Inbox"), "the state holds the edited plan");
const history = await client.threads.getHistory(t1, { limit: 5 });
assert.ok(history.length === 5 && history[0].checkpoint.checkpoint_id === afterEdit.checkpoint.checkpoint_id, "history newest first");

step("threads.search(interrupted, graph_id) returns exactly the waiting threads");
const t2 = (await client.threads.create()).thread_id; // idle, never run
const t3 = (await client.threads.create()).thread_id; // will end: no gates
const done = await client.runs.wait(t3, "feature", { input: { description: "No gates at all" } });
assert.ok(done && typeof done === "object" && !done.__interrupt__, "runs.wait returns the final values");
assert.equal((await client.threads.get(t3)).status, "idle");
const t4 = (await client.threads.create()).thread_id;
await client.runs.wait(t4, "feature", { input: { description: "Second waiting one" }, config: gates });
await waitingAt(t4, "requirements");
const found = await client.threads.search({ status: "interrupted", metadata: { graph_id: "feature" }, limit: 100 });
assert.deepEqual(found.map((t) => t.thread_id).sort(), [t1, t4].sort());
const newest = await client.threads.search({ limit: 100 });
assert.equal(newest[0].thread_id, t4, "search without sort_by: newest first");
assert.ok(newest.some((t) => t.thread_id === t2 && t.status === "idle"));

step("runs.wait on a failing task throws");
const t5 = (await client.threads.create()).thread_id;
await assert.rejects(client.runs.wait(t5, "sdd", { input: { project_brief: "A brief the architect answers too shortly" } }));
assert.equal((await client.threads.get(t5)).status, "error");
const runs5 = await client.runs.list(t5);
assert.equal(runs5[0].status, "error");

step("a second run on a busy thread with multitaskStrategy reject is 409; runs.cancel stops it");
const t6 = (await client.threads.create()).thread_id;
const slow = await client.runs.create(t6, "slogan", { input: { user_input: "a slow slogan" } });
assert.ok(["pending", "running"].includes(slow.status));
assert.equal((await client.threads.get(t6)).status, "busy");
await expectHTTP(409, client.runs.create(t6, "slogan", { multitaskStrategy: "reject" }), "second run");
await client.runs.cancel(t6, slow.run_id, true);
assert.equal((await client.runs.get(t6, slow.run_id)).status, "interrupted");
assert.equal((await client.threads.get(t6)).status, "idle");

step("updateState(asNode __end__) is Agent Inbox's mark as resolved");
await client.threads.updateState(t4, { values: null, asNode: "__end__" });
const resolved = await client.threads.get(t4);
assert.equal(resolved.status, "idle");
assert.deepEqual(resolved.interrupts, {});

step("runs of a thread, and join");
const runs1 = await client.runs.list(t1);
assert.equal(runs1.length, 4);
assert.ok(runs1.every((r) => r.status === "success"));
const joined = await client.runs.join(t1, runs1[0].run_id);
assert.ok(Array.isArray(joined.__interrupt__), "join of a run that stopped at an interrupt");
const replay = await collect(client.runs.joinStream(t1, runs1[0].run_id));
assert.equal(replay[0].event, "metadata");

console.log(`ok ${pkg}`);
