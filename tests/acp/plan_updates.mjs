// The session's task list over ACP, seen by the official TypeScript SDK
// (@agentclientprotocol/sdk): each change is a `plan` session update with the whole list.
// Started by tests/it/acp_tasks.rs with AC_BIN (the binary), AC_STORE (the session store),
// AC_WS (the workspace, whose
// config/modes.toml has `plan` hand over to a `build` that offers the task tools), and the
// scripted OpenAI-compatible server's OPENAI_BASE_URL and OPENAI_API_KEY. The model writes a
// plan of two numbered steps and submits it; the client approves it into `build`, where the
// model sets step_1 in progress and completes it; a restarted agent's `session/load` replays
// the list as it stands. Prints `ok plan_updates` and exits 0, or
// throws (exit 1, with what went wrong).

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import assert from "node:assert/strict";
import * as acp from "@agentclientprotocol/sdk";

const { methods } = acp;
const ws = process.env.AC_WS;
const store = process.env.AC_STORE;
const args = ["acp", "--model", "openai/test-model", "--store", store];
const child = spawn(process.env.AC_BIN, args, { cwd: ws, stdio: ["pipe", "pipe", "inherit"] });
const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const updates = [];
const app = acp
  .client({ name: "agent-controller-tests" })
  .onNotification(methods.client.session.update, ({ params }) => {
    updates.push(params.update);
  })
  .onRequest(methods.client.session.requestPermission, async () => ({
    outcome: { outcome: "selected", optionId: "switch:build" },
  }));

let sessionId;
await app.connectWith(stream, async (ctx) => {
  await ctx.request(methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: {},
  });
  ({ sessionId } = await ctx.request(methods.agent.session.new, { cwd: ws, mcpServers: [] }));
  const done = await ctx.request(methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "Add dark mode" }],
  });
  assert.equal(done.stopReason, "end_turn");
});

const plans = updates.filter((u) => u.sessionUpdate === "plan");
const shown = plans.map((p) => p.entries.map((e) => [e.content, e.status, e.priority]));
assert.deepEqual(
  shown,
  [
    // Seeded by the approval: the plan's numbered steps, all pending.
    [
      ["Add the theme flag", "pending", "medium"],
      ["Wire the toggle", "pending", "medium"],
    ],
    // task_update step_1 -> in_progress.
    [
      ["Add the theme flag", "in_progress", "medium"],
      ["Wire the toggle", "pending", "medium"],
    ],
    // task_complete step_1.
    [
      ["Add the theme flag", "completed", "medium"],
      ["Wire the toggle", "pending", "medium"],
    ],
  ],
  JSON.stringify(updates.map((u) => u.sessionUpdate)),
);
// The seeded plan comes after the switch to build.
const kinds = updates.map((u) => u.sessionUpdate);
assert.ok(kinds.indexOf("current_mode_update") < kinds.indexOf("plan"), JSON.stringify(kinds));
child.stdin.end();
assert.equal(await exited, 0);

// A restart: `session/load` replays the conversation, then the list as it stands.
const again = spawn(process.env.AC_BIN, args, { cwd: ws, stdio: ["pipe", "pipe", "inherit"] });
const againExited = new Promise((resolve) => again.on("exit", (code) => resolve(code)));
const replayed = [];
await acp
  .client({ name: "agent-controller-tests" })
  .onNotification(methods.client.session.update, ({ params }) => {
    replayed.push(params.update);
  })
  .connectWith(acp.ndJsonStream(Writable.toWeb(again.stdin), Readable.toWeb(again.stdout)), async (ctx) => {
    const init = await ctx.request(methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: {},
    });
    assert.equal(init.agentCapabilities.loadSession, true);
    await ctx.request(methods.agent.session.load, { sessionId, cwd: ws, mcpServers: [] });
  });
const replayedPlans = replayed.filter((u) => u.sessionUpdate === "plan");
assert.deepEqual(
  replayedPlans.map((p) => p.entries.map((e) => [e.content, e.status, e.priority])),
  [shown[2]],
  JSON.stringify(replayed.map((u) => u.sessionUpdate)),
);
again.stdin.end();
assert.equal(await againExited, 0);
console.log("ok plan_updates");
