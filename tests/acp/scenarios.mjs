// The official ACP TypeScript SDK (@agentclientprotocol/sdk) as the client of
// `agent-controller acp`: one scenario per run, `node scenarios.mjs NAME`, started by
// tests/it/acp_sdk.rs with
//   AC_BIN    the agent-controller binary
//   AC_WS     the workspace (its config/modes.toml is the scenario's config)
//   AC_STORE  the session store (scenarios that restart the agent)
// and, for scenarios whose model is the scripted OpenAI-compatible server, OPENAI_BASE_URL and
// OPENAI_API_KEY (the agent then runs with --model openai/test-model).
// A scenario prints `ok NAME` and exits 0, or throws (exit 1, with what went wrong).

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import * as acp from "@agentclientprotocol/sdk";

const { methods } = acp;
const bin = process.env.AC_BIN;
const ws = process.env.AC_WS;
const store = process.env.AC_STORE;

/// The agent as a child process; `answer(request)` decides each permission request, and
/// `elicit(request)`, when given, answers each elicitation request (a client that does not
/// advertise elicitation has no handler for it).
function start(answer, extraArgs = [], elicit = null) {
  const args = ["acp", ...extraArgs];
  if (process.env.OPENAI_BASE_URL) args.push("--model", "openai/test-model");
  if (store) args.push("--store", store);
  const child = spawn(bin, args, { cwd: ws, stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const updates = [];
  const requests = [];
  const elicitations = [];
  let onRequest = () => {};
  let app = acp
    .client({ name: "agent-controller-tests" })
    .onNotification(methods.client.session.update, ({ params }) => {
      updates.push(params.update);
    })
    .onRequest(methods.client.session.requestPermission, async ({ params, signal }) => {
      requests.push(params);
      onRequest(params);
      return answer(params, signal);
    });
  if (elicit) {
    app = app.onRequest(methods.client.elicitation.create, async ({ params }) => {
      elicitations.push(params);
      return elicit(params);
    });
  }
  return {
    child,
    exited,
    updates,
    requests,
    elicitations,
    /// Resolves with the next permission request.
    nextRequest: () => new Promise((resolve) => (onRequest = resolve)),
    run: (op) => app.connectWith(stream, op),
    close: async () => {
      child.stdin.end();
      return exited;
    },
  };
}

const select = (optionId) => ({ outcome: { outcome: "selected", optionId } });
const cancelled = { outcome: { outcome: "cancelled" } };
/// Waits until `signal` aborts (the agent gave the request up), then answers `cancelled`.
const untilGivenUp = (signal) =>
  new Promise((resolve) => {
    if (signal.aborted) resolve(cancelled);
    signal.addEventListener("abort", () => resolve(cancelled));
  });

async function open(ctx, expectLoad = false, clientCapabilities = {}) {
  const init = await ctx.request(methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities,
  });
  assert.equal(init.protocolVersion, acp.PROTOCOL_VERSION);
  assert.equal(init.agentInfo.name, "agent-controller");
  assert.equal(init.agentCapabilities.loadSession, expectLoad);
  return init;
}

async function newSession(ctx) {
  const session = await ctx.request(methods.agent.session.new, { cwd: ws, mcpServers: [] });
  assert.ok(session.modes.availableModes.length >= 2);
  assert.equal(session.configOptions[0].id, "mode");
  assert.equal(session.configOptions[0].currentValue, session.modes.currentModeId);
  return session;
}

const prompt = (ctx, sessionId, text) =>
  ctx.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] });

/// Every session `session/list` gives for `params`, page after page.
async function pages(ctx, params) {
  const sessions = [];
  let cursor;
  do {
    const page = await ctx.request(methods.agent.session.list, { ...params, cursor });
    sessions.push(...page.sessions);
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  return sessions;
}

const kinds = (updates) => updates.map((u) => u.sessionUpdate);
const modeUpdates = (updates) =>
  updates.filter((u) => u.sessionUpdate === "current_mode_update").map((u) => u.currentModeId);
const optionUpdates = (updates) =>
  updates
    .filter((u) => u.sessionUpdate === "config_option_update")
    .map((u) => u.configOptions.find((o) => o.id === "mode").currentValue);

/// The `submit_plan` tool calls in `updates`, in order: each with its last status and the text
/// of its last update's content.
function planCalls(updates) {
  const calls = new Map();
  for (const u of updates) {
    if (u.sessionUpdate === "tool_call" && u.kind === "switch_mode") {
      // A tool_call without a status is `pending` (the protocol's default).
      calls.set(u.toolCallId, { id: u.toolCallId, status: u.status ?? "pending", text: "" });
    } else if (u.sessionUpdate === "tool_call_update" && calls.has(u.toolCallId)) {
      const call = calls.get(u.toolCallId);
      if (u.status) call.status = u.status;
      const text = (u.content ?? []).map((c) => c.content?.text ?? "").join("\n");
      if (text) call.text = text;
    }
  }
  return [...calls.values()];
}

/// Fails unless every `tool_call_update` in `updates` follows the `tool_call` that announced it.
function announcedBeforeUpdated(updates) {
  const announced = new Set();
  for (const u of updates) {
    if (u.sessionUpdate === "tool_call") announced.add(u.toolCallId);
    if (u.sessionUpdate === "tool_call_update") {
      assert.ok(announced.has(u.toolCallId), `update of ${u.toolCallId} before its tool_call: ${JSON.stringify(updates)}`);
    }
  }
}

/// Runs `op` on `agent`'s connection, then closes the agent's stdin as an editor that goes
/// does (while a prompt may still wait), reads on until the agent exits, and checks it exited 0.
async function goneWhileAsked(agent, op) {
  await agent
    .run(async (ctx) => {
      await op(ctx);
      agent.child.stdin.end();
      await agent.exited;
    })
    .catch((error) => {
      // The SDK gives up what the agent never answered once the connection closes.
      if (!/connection closed/.test(error.message)) throw error;
    });
  assert.equal(await agent.exited, 0);
}

/// A session whose plan was asked about when the editor went: stdin closed, or, with
/// `AC_KILL` set, the agent killed (SIGKILL) while the request is open. Returns its id.
async function leaveAsked() {
  let sessionId;
  const first = start((_, signal) => untilGivenUp(signal));
  const op = async (ctx) => {
    await open(ctx, true);
    ({ sessionId } = await newSession(ctx));
    const asking = first.nextRequest();
    prompt(ctx, sessionId, "Add dark mode").catch(() => {});
    await asking;
  };
  if (process.env.AC_KILL) {
    await first
      .run(async (ctx) => {
        await op(ctx);
        first.child.kill("SIGKILL");
        await first.exited;
      })
      .catch((error) => {
        if (!/connection closed/.test(error.message)) throw error;
      });
  } else {
    await goneWhileAsked(first, op);
  }
  return sessionId;
}

const scenarios = {
  /// initialize -> new -> prompt in plan -> permission request -> select build ->
  /// current_mode_update build -> a build-mode tool call -> end_turn.
  async approve() {
    const agent = start(() => select("switch:build"));
    await agent.run(async (ctx) => {
      await open(ctx);
      const { sessionId, modes } = await newSession(ctx);
      assert.equal(modes.currentModeId, "plan");
      const done = await prompt(ctx, sessionId, "Add dark mode");
      assert.equal(done.stopReason, "end_turn");
    });
    const [request] = agent.requests;
    assert.equal(request.toolCall.kind, "switch_mode");
    assert.equal(request.toolCall.title, "Dark mode");
    const plan = fs.readFileSync(path.join(ws, ".agent/plans/dark.md"), "utf8");
    // The plan is shown in a fenced code block, so a Markdown view hides none of it.
    const shown = request.toolCall.content[0].content.text;
    assert.match(shown, /^```text\n[\s\S]*\n```$/);
    assert.ok(plan.includes(shown.slice("```text\n".length, -"\n```".length)));
    assert.match(request.toolCall._meta.agentController.sha256, /^[0-9a-f]{64}$/);
    assert.deepEqual(
      request.options.map((o) => [o.optionId, o.kind]),
      [
        ["switch:build", "allow_once"],
        ["reject", "reject_once"],
      ],
    );
    assert.deepEqual(modeUpdates(agent.updates), ["build"]);
    assert.deepEqual(optionUpdates(agent.updates), ["build"]);
    const switched = kinds(agent.updates).indexOf("current_mode_update");
    const buildCall = agent.updates.findIndex(
      (u) => u.sessionUpdate === "tool_call" && u.title.startsWith("write_file"),
    );
    assert.ok(switched >= 0 && buildCall > switched, JSON.stringify(kinds(agent.updates)));
    assert.equal(agent.updates[buildCall].kind, "edit");
    const end = agent.updates.find(
      (u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === agent.updates[buildCall].toolCallId,
    );
    assert.equal(end.status, "completed");
    assert.equal(fs.readFileSync(path.join(ws, "theme.css"), "utf8"), "body { color: white }");
    assert.equal(await agent.close(), 0);
  },

  /// "No, keep planning": the mode stays; the next prompt (the feedback) plans again.
  async reject() {
    let answers = [select("reject"), cancelled];
    const agent = start(() => answers.shift());
    await agent.run(async (ctx) => {
      await open(ctx);
      const { sessionId } = await newSession(ctx);
      assert.equal((await prompt(ctx, sessionId, "Add dark mode")).stopReason, "end_turn");
      assert.deepEqual(modeUpdates(agent.updates), []);
      const again = await prompt(ctx, sessionId, "Also cover the settings page");
      assert.equal(again.stopReason, "cancelled");
    });
    assert.equal(agent.requests.length, 2, "the feedback prompt planned again");
    assert.deepEqual(modeUpdates(agent.updates), []);
    assert.equal(await agent.close(), 0);
  },

  /// A `cancelled` outcome approves nothing and the prompt returns `cancelled`.
  async cancelled() {
    const agent = start(() => cancelled);
    await agent.run(async (ctx) => {
      await open(ctx);
      const { sessionId } = await newSession(ctx);
      assert.equal((await prompt(ctx, sessionId, "Add dark mode")).stopReason, "cancelled");
    });
    assert.deepEqual(modeUpdates(agent.updates), []);
    assert.equal(await agent.close(), 0);
  },

  /// set_mode while the plan's request is open: the mode is the one chosen (announced), the
  /// agent gives the request up, and the turn ends.
  async set_mode_while_pending() {
    const agent = start((_, signal) => untilGivenUp(signal));
    await agent.run(async (ctx) => {
      await open(ctx);
      const { sessionId } = await newSession(ctx);
      const asked = agent.nextRequest();
      const turn = prompt(ctx, sessionId, "Add dark mode");
      await asked;
      await ctx.request(methods.agent.session.setMode, { sessionId, modeId: "build" });
      assert.equal((await turn).stopReason, "end_turn");
    });
    assert.deepEqual(modeUpdates(agent.updates), ["build"]);
    assert.deepEqual(optionUpdates(agent.updates), ["build"]);
    assert.equal(await agent.close(), 0);
  },

  /// session/cancel while the model works: the prompt returns `cancelled`; the next one runs.
  async cancel_mid_turn() {
    const agent = start(() => cancelled);
    await agent.run(async (ctx) => {
      await open(ctx);
      const { sessionId } = await newSession(ctx);
      const turn = prompt(ctx, sessionId, "Think hard");
      // The test creates this file once the scripted server has the model call: the turn runs.
      const called = path.join(ws, ".model-called");
      while (!fs.existsSync(called)) await new Promise((resolve) => setTimeout(resolve, 10));
      await ctx.notify(methods.agent.session.cancel, { sessionId });
      assert.equal((await turn).stopReason, "cancelled");
      assert.equal((await prompt(ctx, sessionId, "Hello")).stopReason, "end_turn");
    });
    const texts = agent.updates.filter((u) => u.sessionUpdate === "agent_message_chunk");
    assert.deepEqual(
      texts.map((u) => u.content.text),
      ["Hello again."],
    );
    assert.equal(await agent.close(), 0);
  },

  /// session/set_mode while the model works (APPROVING's `build`): the run stops at once, the
  /// prompt ends `cancelled`, the mode is the one chosen, and the next prompt runs in it.
  async set_mode_mid_turn() {
    const agent = start(() => cancelled);
    await agent.run(async (ctx) => {
      await open(ctx);
      const { sessionId } = await newSession(ctx);
      const turn = prompt(ctx, sessionId, "Think hard");
      // The test creates this file once the scripted server has the model call: the turn runs.
      const called = path.join(ws, ".model-called");
      while (!fs.existsSync(called)) await new Promise((resolve) => setTimeout(resolve, 10));
      await ctx.request(methods.agent.session.setMode, { sessionId, modeId: "plan" });
      assert.equal((await turn).stopReason, "cancelled");
      assert.deepEqual(modeUpdates(agent.updates), ["plan"]);
      assert.equal((await prompt(ctx, sessionId, "Hello")).stopReason, "end_turn");
    });
    const texts = agent.updates.filter((u) => u.sessionUpdate === "agent_message_chunk");
    assert.deepEqual(texts.map((u) => u.content.text), ["Hello again."]);
    assert.equal(await agent.close(), 0);
  },

  /// A tool call that waits for approval (APPROVING's `write_file`) is announced `pending`,
  /// never `in_progress`; session/cancel while it is asked about ends the prompt `cancelled`
  /// and gives the call a final update: `failed`, saying it was cancelled (with or without a
  /// store); it never runs.
  async cancel_while_a_tool_call_waits() {
    const agent = start((_, signal) => untilGivenUp(signal));
    await agent.run(async (ctx) => {
      await open(ctx, Boolean(store));
      const { sessionId } = await newSession(ctx);
      const asked = agent.nextRequest();
      const turn = prompt(ctx, sessionId, "Write notes");
      await asked;
      await ctx.notify(methods.agent.session.cancel, { sessionId });
      assert.equal((await turn).stopReason, "cancelled");
    });
    assert.equal(await agent.close(), 0);
    const call = agent.updates.find((u) => u.sessionUpdate === "tool_call");
    assert.equal(call.status ?? "pending", "pending", JSON.stringify(call));
    const updates = agent.updates.filter(
      (u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === call.toolCallId,
    );
    assert.ok(
      updates.every((u) => u.status !== "in_progress"),
      JSON.stringify(agent.updates),
    );
    const last = updates.at(-1);
    assert.equal(last?.status, "failed", JSON.stringify(agent.updates));
    assert.match(JSON.stringify(last.content), /cancel/i);
    assert.ok(!fs.existsSync(path.join(ws, "notes.txt")), "a cancelled call never runs");
  },

  /// The model's reply is cut at its token limit: the text shown, the turn ends `max_tokens`.
  async token_limit() {
    const agent = start(() => cancelled);
    await agent.run(async (ctx) => {
      await open(ctx);
      const { sessionId } = await newSession(ctx);
      assert.equal((await prompt(ctx, sessionId, "Answer at length")).stopReason, "max_tokens");
    });
    const texts = agent.updates.filter((u) => u.sessionUpdate === "agent_message_chunk");
    assert.deepEqual(texts.map((u) => u.content.text), ["The answer is"]);
    assert.equal(await agent.close(), 0);
  },

  /// A requireApproval tool call: allowed, it runs; rejected, it does not.
  /// A subagent's call that waits (issue 38): the editor gets a permission request for the
  /// child's call, naming the subagent (title and `_meta.agentController.subagent`); allowed,
  /// the child writes and the turn ends.
  async subagent_permission() {
    const agent = start(() => select("allow"));
    await agent.run(async (ctx) => {
      await open(ctx);
      const { sessionId } = await newSession(ctx);
      assert.equal((await prompt(ctx, sessionId, "Take notes")).stopReason, "end_turn");
    });
    assert.equal(agent.requests.length, 1, JSON.stringify(agent.requests));
    const [asked] = agent.requests;
    assert.deepEqual(asked.toolCall.rawInput, { path: "notes.txt", content: "x" });
    const named = asked.toolCall._meta.agentController.subagent;
    assert.equal(named.agentType, "explore", JSON.stringify(asked));
    assert.equal(named.toolCallId, "call_sub", JSON.stringify(asked));
    assert.ok(asked.toolCall.title.includes("subagent explore"), asked.toolCall.title);
    assert.equal(fs.readFileSync(path.join(ws, "notes.txt"), "utf8"), "x");
    assert.equal(await agent.close(), 0);
  },

  async tool_approval() {
    const answers = [select("allow"), select("reject")];
    const agent = start(() => answers.shift());
    await agent.run(async (ctx) => {
      await open(ctx);
      const { sessionId } = await newSession(ctx);
      assert.equal((await prompt(ctx, sessionId, "Write yes")).stopReason, "end_turn");
      assert.equal((await prompt(ctx, sessionId, "Write no")).stopReason, "end_turn");
    });
    const [allowed, rejected] = agent.requests;
    assert.deepEqual(
      allowed.options.map((o) => o.kind),
      ["allow_once", "allow_always", "reject_once"],
    );
    assert.match(allowed.toolCall._meta.agentController.argsSha256, /^[0-9a-f]{64}$/);
    assert.deepEqual(allowed.toolCall.rawInput, { path: "yes.txt", content: "yes" });
    assert.deepEqual(rejected.toolCall.rawInput, { path: "no.txt", content: "no" });
    assert.equal(fs.readFileSync(path.join(ws, "yes.txt"), "utf8"), "yes");
    assert.ok(!fs.existsSync(path.join(ws, "no.txt")), "a rejected call never runs");
    assert.equal(await agent.close(), 0);
  },

  /// A client without elicitation (issue 37): a select question of `ask_user` is a permission
  /// request with one `allow_once` option per choice (its label, every character visible) and
  /// a `reject_once` "Don't answer"; the question and the options' descriptions are shown
  /// whole in a code block. The option picked is the answer; "Don't answer" answers nothing; a
  /// multi-select question takes one pick (the Rust side checks what the model got).
  async question_permission() {
    const picks = [(o) => o.name === "b\\u{202e}", (o) => o.kind === "reject_once", (o) => o.name === "c"];
    const agent = start((request) => select(request.options.find(picks.shift()).optionId));
    await agent.run(async (ctx) => {
      await open(ctx);
      const { sessionId } = await newSession(ctx);
      for (const text of ["Pick one", "Pick another", "Pick some"]) {
        assert.equal((await prompt(ctx, sessionId, text)).stopReason, "end_turn");
      }
    });
    assert.equal(agent.requests.length, 3, JSON.stringify(agent.requests));
    const [first, , multi] = agent.requests;
    assert.deepEqual(
      first.options.map((o) => [o.name, o.kind]),
      [["a", "allow_once"], ["b\\u{202e}", "allow_once"], ["Don't answer", "reject_once"]],
    );
    const shown = first.toolCall.content[0].content.text;
    assert.ok(shown.startsWith("```"), shown);
    assert.ok(shown.includes("Which\\u{200b} one?"), shown);
    assert.ok(shown.includes("first\\u{1b}[2K"), shown);
    assert.ok(!/[\u200b\u202e]/.test(JSON.stringify(first)), JSON.stringify(first));
    assert.match(first.toolCall._meta.agentController.payloadSha256, /^[0-9a-f]{64}$/);
    assert.deepEqual(multi.options.map((o) => o.name), ["a", "b", "c", "Don't answer"]);
    assert.equal(await agent.close(), 0);
  },

  /// A client without elicitation: a free-text question ends the turn saying the next prompt
  /// is the answer (no permission request); the next prompt answers it and the run carries on
  /// in that prompt's turn (the Rust side checks the model got the answer, not a new message).
  async question_next_prompt() {
    const agent = start(() => {
      throw new Error("no permission request for a free-text question");
    });
    await agent.run(async (ctx) => {
      await open(ctx, Boolean(store));
      const { sessionId } = await newSession(ctx);
      assert.equal((await prompt(ctx, sessionId, "Pick a colour")).stopReason, "end_turn");
      const told = agent.updates
        .filter((u) => u.sessionUpdate === "agent_message_chunk")
        .map((u) => u.content.text)
        .join("");
      assert.ok(told.includes("Which colour?\\u{1b}[2K"), told);
      assert.match(told, /next prompt is the answer/);
      const ask = agent.updates.find((u) => u.sessionUpdate === "tool_call" && u.title.startsWith("ask_user"));
      assert.ok(ask, JSON.stringify(agent.updates));
      assert.equal((await prompt(ctx, sessionId, "Blue")).stopReason, "end_turn");
      const ended = agent.updates.filter(
        (u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === ask.toolCallId && u.status === "completed",
      );
      assert.equal(ended.length, 1, JSON.stringify(agent.updates));
      assert.match(JSON.stringify(ended[0].content), /The user answered: Blue/);
    });
    assert.equal(agent.requests.length, 0);
    assert.equal(await agent.close(), 0);
  },

  /// A client that advertises elicitation (forms): each question is an `elicitation/create`
  /// form in the session, tied to the question's tool call, one `answer` field: a multi-select
  /// (titled choices), free text, a single select; the accepted content is the answer, a
  /// decline answers nothing (the Rust side checks what the model got). No permission request.
  async question_elicitation() {
    const replies = [
      { action: "accept", content: { answer: ["a", "c"] } },
      { action: "accept", content: { answer: "Blue" } },
      { action: "decline" },
    ];
    const agent = start(
      () => {
        throw new Error("no permission request when the client elicits");
      },
      [],
      () => replies.shift(),
    );
    await agent.run(async (ctx) => {
      await open(ctx, false, { elicitation: { form: {} } });
      const { sessionId } = await newSession(ctx);
      for (const text of ["Pick some", "Pick a colour", "Pick one"]) {
        assert.equal((await prompt(ctx, sessionId, text)).stopReason, "end_turn");
      }
      const [multi, free, single] = agent.elicitations;
      assert.equal(multi.mode, "form");
      assert.equal(multi.sessionId, sessionId);
      const ask = agent.updates.find((u) => u.sessionUpdate === "tool_call" && u.title.startsWith("ask_user"));
      assert.equal(multi.toolCallId, ask.toolCallId);
      assert.ok(multi.message.includes("Which\\u{200b} ones?"), multi.message);
      const field = multi.requestedSchema.properties.answer;
      assert.equal(field.type, "array");
      assert.deepEqual(field.items.anyOf.map((o) => [o.const, o.title]), [["a", "a"], ["b", "b"], ["c", "c"]]);
      assert.equal(field.items.anyOf[0].description, "first\\u{1b}[2K");
      assert.deepEqual(multi.requestedSchema.required, ["answer"]);
      assert.equal(free.requestedSchema.properties.answer.type, "string");
      assert.equal(free.requestedSchema.properties.answer.oneOf ?? null, null);
      assert.deepEqual(single.requestedSchema.properties.answer.oneOf.map((o) => o.const), ["x", "y"]);
    });
    assert.equal(agent.elicitations.length, 3);
    assert.equal(agent.requests.length, 0);
    assert.equal(await agent.close(), 0);
  },

  /// The client's MCP server (the reference filesystem server, at AC_FS_SERVER) is started for
  /// the session; its tool is offered as fs__TOOL, waits for approval like any tool
  /// (`requireApproval = true`), runs once allowed, and its result reaches the client.
  async mcp_servers() {
    const agent = start(() => select("allow"));
    // Through sh, which writes its pid and, once the server exits, stays (sleep): the agent
    // stops it when the connection ends, whether or not it exits on its own.
    const script = `echo $$ > '${process.env.AC_FS_PID}'; '${process.execPath}' '${process.env.AC_FS_SERVER}' '${ws}'; exec sleep 300`;
    const fsServer = { name: "fs", command: "sh", args: ["-c", script], env: [] };
    await agent.run(async (ctx) => {
      await open(ctx);
      const { sessionId } = await ctx.request(methods.agent.session.new, {
        cwd: ws,
        mcpServers: [fsServer],
      });
      assert.equal((await prompt(ctx, sessionId, "List the workspace")).stopReason, "end_turn");
    });
    const [request] = agent.requests;
    assert.ok(request, "the MCP tool call waited for approval");
    assert.ok(request.toolCall.title.startsWith("fs__list_directory"), request.toolCall.title);
    const call = agent.updates.find(
      (u) => u.sessionUpdate === "tool_call" && u.title.startsWith("fs__list_directory"),
    );
    assert.ok(call, JSON.stringify(kinds(agent.updates)));
    const end = agent.updates.find(
      (u) =>
        u.sessionUpdate === "tool_call_update" &&
        u.toolCallId === call.toolCallId &&
        u.status === "completed",
    );
    assert.ok(end, JSON.stringify(agent.updates));
    assert.match(JSON.stringify(end.content), /\[DIR\] config/);
    assert.equal(await agent.close(), 0);
  },

  /// With a file store: five plans, rejected, set aside by a manual switch, set aside by a
  /// feedback prompt, approved, and one left open when the editor goes. Live and in the replay
  /// of `session/load`, only the approved one is `completed`; the replay says what became of
  /// each, announces every tool call before its updates, replays every prompt, and the load
  /// answers after all of it.
  async plan_statuses() {
    const prompts = [
      "Add dark mode",
      "Add a settings page",
      "Add a login form",
      "Use OAuth instead",
      "Add theme tokens",
    ];
    let sessionId;
    let strategy = [];
    const first = start((params, signal) => strategy.shift()(params, signal));
    await goneWhileAsked(first, async (ctx) => {
      await open(ctx, true);
      ({ sessionId } = await newSession(ctx));
      strategy = [() => select("reject")];
      assert.equal((await prompt(ctx, sessionId, prompts[0])).stopReason, "end_turn");
      strategy = [(_, signal) => untilGivenUp(signal)];
      const asked = first.nextRequest();
      const turn = prompt(ctx, sessionId, prompts[1]);
      await asked;
      await ctx.request(methods.agent.session.setMode, { sessionId, modeId: "build" });
      assert.equal((await turn).stopReason, "end_turn");
      await ctx.request(methods.agent.session.setMode, { sessionId, modeId: "plan" });
      strategy = [() => cancelled];
      assert.equal((await prompt(ctx, sessionId, prompts[2])).stopReason, "cancelled");
      strategy = [() => select("switch:build")];
      assert.equal((await prompt(ctx, sessionId, prompts[3])).stopReason, "end_turn");
      await ctx.request(methods.agent.session.setMode, { sessionId, modeId: "plan" });
      strategy = [(_, signal) => untilGivenUp(signal)];
      const asking = first.nextRequest();
      prompt(ctx, sessionId, prompts[4]).catch(() => {});
      await asking;
    });
    const live = planCalls(first.updates);
    assert.deepEqual(
      live.map((c) => c.status),
      ["failed", "failed", "failed", "completed", "pending"],
      JSON.stringify(live),
    );

    const second = start(() => cancelled);
    let replayedCount;
    await second.run(async (ctx) => {
      await open(ctx, true);
      await ctx.request(methods.agent.session.load, { sessionId, cwd: ws, mcpServers: [] });
      const replayed = second.updates.slice();
      announcedBeforeUpdated(replayed);
      assert.deepEqual(
        replayed.filter((u) => u.sessionUpdate === "user_message_chunk").map((u) => u.content.text),
        prompts,
      );
      const plans = planCalls(replayed);
      assert.deepEqual(
        plans.map((c) => c.status),
        ["failed", "failed", "failed", "completed", "pending"],
        JSON.stringify(plans),
      );
      const said = plans.map((c) => c.text);
      assert.match(said[0], /rejected/i, said[0]);
      assert.match(said[1], /switch/i, said[1]);
      assert.match(said[2], /new message/i, said[2]);
      assert.match(said[3], /approved/i, said[3]);
      replayedCount = replayed.length;
    });
    assert.equal(await second.close(), 0);
    // Nothing of the replay came after the load's answer.
    assert.deepEqual(kinds(second.updates.slice(replayedCount)), []);
  },

  /// A plan left asked about when the editor went (stdin closed, or the agent killed with
  /// `AC_KILL`): after `session/load` the agent sends nothing of a turn until the editor
  /// prompts; that prompt is accepted as the feedback that sets the old plan aside (`failed`,
  /// saying so), the model plans again inside the turn, and everything of it comes before the
  /// prompt's stop reason.
  async quiet_after_load() {
    const sessionId = await leaveAsked();
    let prompted = false;
    const early = [];
    const second = start((params, signal) => {
      if (!prompted) {
        early.push(params);
        return untilGivenUp(signal);
      }
      return select("switch:build");
    });
    let loadedCount;
    let answeredCount;
    await second.run(async (ctx) => {
      await open(ctx, true);
      await ctx.request(methods.agent.session.load, { sessionId, cwd: ws, mcpServers: [] });
      loadedCount = second.updates.length;
      const old = planCalls(second.updates);
      assert.deepEqual(old.map((c) => c.status), ["pending"]);
      // A moment for anything the agent would send on its own (it must send nothing).
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.deepEqual(early, [], "a permission request came with no prompt open");
      assert.deepEqual(kinds(second.updates.slice(loadedCount)), []);
      prompted = true;
      const done = await prompt(ctx, sessionId, "Use OAuth instead");
      assert.equal(done.stopReason, "end_turn");
      answeredCount = second.updates.length;
    });
    assert.equal(await second.close(), 0);
    assert.deepEqual(kinds(second.updates.slice(answeredCount)), [], "updates after the stop reason");
    const plans = planCalls(second.updates);
    assert.deepEqual(plans.map((c) => c.status), ["failed", "completed"], JSON.stringify(plans));
    assert.match(plans[0].text, /not approved: the user sent a new message/i);
    assert.equal(second.requests.length, 1);
    assert.equal(second.requests[0].toolCall.title, "Use OAuth instead");
    assert.deepEqual(modeUpdates(second.updates), ["build"]);
  },

  /// The same for a tool call left waiting for approval (`write_file` in APPROVING's `build`):
  /// quiet after the load; the next prompt sets the call aside (`failed`, never run).
  async quiet_after_load_tool_call() {
    let sessionId;
    const first = start((_, signal) => untilGivenUp(signal));
    await goneWhileAsked(first, async (ctx) => {
      await open(ctx, true);
      ({ sessionId } = await newSession(ctx));
      const asking = first.nextRequest();
      prompt(ctx, sessionId, "Write notes").catch(() => {});
      await asking;
    });
    const second = start(() => select("allow"));
    let loadedCount;
    await second.run(async (ctx) => {
      await open(ctx, true);
      await ctx.request(methods.agent.session.load, { sessionId, cwd: ws, mcpServers: [] });
      loadedCount = second.updates.length;
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.deepEqual(second.requests, [], "a permission request came with no prompt open");
      assert.deepEqual(kinds(second.updates.slice(loadedCount)), []);
      assert.equal((await prompt(ctx, sessionId, "Never mind")).stopReason, "end_turn");
    });
    assert.equal(await second.close(), 0);
    const calls = second.updates.filter((u) => u.sessionUpdate === "tool_call_update");
    assert.deepEqual(calls.map((u) => u.status), ["failed"], JSON.stringify(second.updates));
    assert.ok(!fs.existsSync(path.join(ws, "notes.txt")), "a call set aside never runs");
  },

  /// `session/cancel` of the first prompt after a load of a session left asked: the prompt
  /// ends `cancelled`, and nothing is approved.
  async cancel_after_load() {
    const sessionId = await leaveAsked();
    const second = start((_, signal) => untilGivenUp(signal));
    await second.run(async (ctx) => {
      await open(ctx, true);
      await ctx.request(methods.agent.session.load, { sessionId, cwd: ws, mcpServers: [] });
      const asked = second.nextRequest();
      const turn = prompt(ctx, sessionId, "Go on");
      await asked;
      await ctx.notify(methods.agent.session.cancel, { sessionId });
      assert.equal((await turn).stopReason, "cancelled");
    });
    assert.equal(await second.close(), 0);
    assert.deepEqual(modeUpdates(second.updates), []);
    assert.equal(second.requests.length, 1, "asked once, inside the prompt's turn");
  },

  /// With a file store: `initialize` advertises `session/close` and `session/resume`; the mode
  /// option has the `mode` category; a closed session is gone (resource not found), and
  /// `session/resume` reopens it without a replay, its plan still pending until the next
  /// prompt, which is its feedback.
  async session_lifecycle() {
    const answers = [cancelled, select("switch:build")];
    const agent = start(() => answers.shift());
    await agent.run(async (ctx) => {
      const init = await open(ctx, true);
      assert.deepEqual(init.agentCapabilities.sessionCapabilities?.close, {});
      assert.deepEqual(init.agentCapabilities.sessionCapabilities?.resume, {});
      const session = await newSession(ctx);
      const { sessionId } = session;
      assert.equal(session.configOptions[0].category, "mode");
      assert.equal((await prompt(ctx, sessionId, "Add dark mode")).stopReason, "cancelled");
      assert.deepEqual(await ctx.request(methods.agent.session.close, { sessionId }), {});
      await assert.rejects(prompt(ctx, sessionId, "Hello"), (e) => e.code === -32002);
      // Closed again: resource not found, which the SDK takes as closed (`{}`).
      assert.deepEqual(await ctx.request(methods.agent.session.close, { sessionId }), {});
      const before = agent.updates.length;
      const resumed = await ctx.request(methods.agent.session.resume, {
        sessionId,
        cwd: ws,
        mcpServers: [],
      });
      assert.equal(resumed.modes.currentModeId, "plan");
      assert.equal(resumed.configOptions[0].category, "mode");
      assert.deepEqual(kinds(agent.updates.slice(before)), [], "resume replays nothing");
      assert.equal((await prompt(ctx, sessionId, "Use OAuth")).stopReason, "end_turn");
      await assert.rejects(
        ctx.request(methods.agent.session.resume, { sessionId: "no-such", cwd: ws, mcpServers: [] }),
        (e) => e.code === -32002,
      );
    });
    assert.deepEqual(modeUpdates(agent.updates), ["build"]);
    assert.equal(await agent.close(), 0);
  },

  /// The `model` config option (issue 36 item 12): offered beside `mode` with the category
  /// `model` where several models are configured (the agent's `--model` and each mode's
  /// `defaultModelId`), its current value the mode's model. Setting it answers with the options
  /// as they now stand and the next model request goes to the chosen model; a model not offered
  /// is refused (invalid params) and changes nothing; a change of mode ends the choice, and the
  /// `config_option_update` that tells the mode tells the new mode's model too.
  async model_option() {
    const agent = start(() => cancelled);
    const model = (options) => options.find((o) => o.id === "model");
    await agent.run(async (ctx) => {
      await open(ctx);
      const session = await newSession(ctx);
      const { sessionId } = session;
      const offered = model(session.configOptions);
      assert.ok(offered, JSON.stringify(session.configOptions));
      assert.equal(offered.category, "model");
      assert.equal(offered.type, "select");
      assert.equal(offered.currentValue, "openai/planner");
      assert.deepEqual(
        offered.options.map((o) => o.value),
        ["openai/test-model", "openai/planner", "openai/builder"],
      );
      const set = (value) =>
        ctx.request(methods.agent.session.setConfigOption, { sessionId, configId: "model", value });
      await assert.rejects(set("openai/gpt-9"), (e) => e.code === -32602 && /not offered/.test(JSON.stringify(e)));
      const chosen = await set("openai/test-model");
      assert.equal(model(chosen.configOptions).currentValue, "openai/test-model");
      assert.equal(chosen.configOptions.find((o) => o.id === "mode").currentValue, "plan");
      assert.equal((await prompt(ctx, sessionId, "Hello")).stopReason, "end_turn");
      const before = agent.updates.length;
      await ctx.request(methods.agent.session.setMode, { sessionId, modeId: "build" });
      const told = agent.updates
        .slice(before)
        .filter((u) => u.sessionUpdate === "config_option_update");
      assert.equal(told.length, 1, JSON.stringify(agent.updates.slice(before)));
      assert.equal(model(told[0].configOptions).currentValue, "openai/builder");
      assert.equal((await prompt(ctx, sessionId, "Build it")).stopReason, "end_turn");
    });
    assert.equal(await agent.close(), 0);
  },

  /// `session/list` with a file store, two sessions a page (`--list-page-size 2`): three
  /// sessions listed newest first over two pages (each once), with their workspace, their first
  /// prompt as title and an RFC 3339 time; filtered by `cwd`; a garbage file, a record stored
  /// under another session's name and a record of another workspace planted in the store are
  /// left out, never a failure; a relative `cwd` and a forged cursor refused (-32602). Then an
  /// agent restricted to the workspace (`--workspace`) lists its sessions only.
  async session_list() {
    const ids = [];
    const agent = start(() => cancelled, ["--list-page-size", "2"]);
    const real = fs.realpathSync(ws);
    const list = (ctx, params = {}) => ctx.request(methods.agent.session.list, params);
    await agent.run(async (ctx) => {
      const init = await open(ctx, true);
      assert.deepEqual(init.agentCapabilities.sessionCapabilities?.list, {});
      for (const text of ["Add dark mode\nand more", "Fix the login", "Write the docs"]) {
        const { sessionId } = await newSession(ctx);
        assert.equal((await prompt(ctx, sessionId, text)).stopReason, "cancelled");
        ids.push(sessionId);
      }
      // Planted behind the agent's back, as a hostile workspace or another release could.
      fs.writeFileSync(path.join(store, "garbage.pending.json"), "{ not json");
      fs.writeFileSync(path.join(store, "bad name.json"), "{}");
      const file = fs.readdirSync(store).find((f) => f.startsWith(ids[0]));
      const record = JSON.parse(fs.readFileSync(path.join(store, file), "utf8"));
      fs.writeFileSync(path.join(store, "twin.json"), JSON.stringify(record));
      const other = fs.mkdtempSync(path.join(real, "other-"));
      const elsewhere = { ...record, sessionId: "elsewhere", workspace: { ...record.workspace, path: other } };
      fs.writeFileSync(path.join(store, "elsewhere.json"), JSON.stringify(elsewhere));

      const first = await list(ctx, { cwd: ws });
      assert.equal(first.sessions.length, 2);
      assert.ok(first.nextCursor, "a second page");
      const second = await list(ctx, { cwd: ws, cursor: first.nextCursor });
      assert.equal(second.sessions.length, 1);
      assert.equal(second.nextCursor ?? null, null, "the last page");
      const listed = [...first.sessions, ...second.sessions];
      assert.deepEqual(listed.map((s) => s.sessionId).sort(), [...ids].sort(), "each once");
      const times = listed.map((s) => s.updatedAt);
      assert.deepEqual([...times].sort().reverse(), times, "newest first");
      for (const s of listed) {
        assert.equal(s.cwd, real);
        assert.match(s.updatedAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
        assert.equal(s._meta.agentController.modeId, "plan");
        assert.equal(s._meta.agentController.pending, true);
      }
      const titles = Object.fromEntries(listed.map((s) => [s.sessionId, s.title]));
      assert.deepEqual(
        ids.map((id) => titles[id]),
        ["Add dark mode", "Fix the login", "Write the docs"],
      );
      // Without cwd: every workspace's (the planted one's too), never what cannot be read.
      const everyId = (await pages(ctx, {})).map((s) => s.sessionId).sort();
      assert.deepEqual(everyId, [...ids, "elsewhere"].sort());
      assert.deepEqual((await list(ctx, { cwd: other })).sessions.map((s) => s.sessionId), ["elsewhere"]);
      assert.deepEqual((await list(ctx, { cwd: path.join(real, "config") })).sessions, []);
      await assert.rejects(list(ctx, { cwd: "relative/dir" }), (e) => e.code === -32602);
      await assert.rejects(list(ctx, { cursor: "../../etc/passwd" }), (e) => e.code === -32602);
      // A listed session loads.
      await ctx.request(methods.agent.session.close, { sessionId: ids[1] });
      const resumed = await ctx.request(methods.agent.session.resume, {
        sessionId: ids[1],
        cwd: listed.find((s) => s.sessionId === ids[1]).cwd,
        mcpServers: [],
      });
      assert.equal(resumed.modes.currentModeId, "plan");
    });
    assert.equal(await agent.close(), 0);

    const only = start(() => cancelled, ["--workspace", ws]);
    await only.run(async (ctx) => {
      await open(ctx, true);
      const listed = (await pages(ctx, {})).map((s) => s.sessionId).sort();
      assert.deepEqual(listed, [...ids].sort(), "the workspace's sessions only");
    });
    assert.equal(await only.close(), 0);
  },

  /// Without a store `session/list` is neither advertised nor answered.
  async session_list_without_store() {
    const agent = start(() => cancelled);
    await agent.run(async (ctx) => {
      const init = await open(ctx, false);
      assert.equal(init.agentCapabilities.sessionCapabilities?.list ?? null, null);
      await assert.rejects(
        ctx.request(methods.agent.session.list, {}),
        (e) => e.code === -32601,
      );
    });
    assert.equal(await agent.close(), 0);
  },

  /// A plan left pending (a `cancelled` outcome, with a file store); the agent restarts; the
  /// session loads with its history, the plan shown pending; the next prompt is its feedback,
  /// and the plan it leads to is approved inside that prompt's turn.
  async load_after_restart() {
    let sessionId;
    const first = start(() => cancelled);
    await first.run(async (ctx) => {
      await open(ctx, true);
      ({ sessionId } = await newSession(ctx));
      assert.equal((await prompt(ctx, sessionId, "Add dark mode")).stopReason, "cancelled");
    });
    assert.equal(await first.close(), 0);

    const second = start(() => select("switch:build"));
    await second.run(async (ctx) => {
      await open(ctx, true);
      const loaded = await ctx.request(methods.agent.session.load, {
        sessionId,
        cwd: ws,
        mcpServers: [],
      });
      assert.equal(loaded.modes.currentModeId, "plan");
      const replayed = second.updates.slice();
      assert.equal(replayed[0].sessionUpdate, "user_message_chunk");
      assert.equal(replayed[0].content.text, "Add dark mode");
      assert.deepEqual(planCalls(replayed).map((c) => c.status), ["pending"]);
      assert.equal((await prompt(ctx, sessionId, "Go ahead")).stopReason, "end_turn");
      const [request] = second.requests;
      assert.equal(request.toolCall.kind, "switch_mode");
    });
    assert.deepEqual(modeUpdates(second.updates), ["build"]);
    assert.equal(await second.close(), 0);
  },
};

const name = process.argv[2];
const scenario = scenarios[name];
if (!scenario) {
  console.error(`unknown scenario ${name}; known: ${Object.keys(scenarios).join(", ")}`);
  process.exit(2);
}
try {
  await scenario();
  console.log(`ok ${name}`);
  process.exit(0);
} catch (error) {
  console.error(`FAILED ${name}:`, error);
  process.exit(1);
}
