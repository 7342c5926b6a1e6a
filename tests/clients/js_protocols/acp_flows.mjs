// The Agent Client Protocol's own client (@agentclientprotocol/sdk) as an editor:
// it spawns `deepactors acp` and drives it over stdio.
//   node acp_flows.mjs <python> <agent module:attr> <cwd> <loop> <db>
// The editor holds a buffer of /notes.md that is not on disk (so a read that
// finds it went through fs/read_text_file), keeps what the agent writes, and
// runs terminal commands itself. Each flow prints "ok <name>".
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import path from "node:path";
import { client, methods, ndJsonStream } from "@agentclientprotocol/sdk";

const [python, target, cwd, loop, db] = process.argv.slice(2);
const buffers = new Map([[path.join(cwd, "notes.md"), "unsaved notes from the editor\n"]]);
const written = new Map();
const terminals = new Map();
const fsCalls = [];
let permission = "allow";
const permissionsAsked = [];
const replayed = []; // session/update notifications no active session took

function start() {
  const child = spawn(python, ["-m", "deepactors", "acp", target, "--loop", loop, "--db", db], {
    cwd,
    stdio: ["pipe", "pipe", "inherit"],
  });
  const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  return { child, stream };
}

const editor = client({ name: "test-editor" })
  .onRequest(methods.client.fs.readTextFile, ({ params }) => {
    fsCalls.push(["read", params.path]);
    const content = buffers.get(params.path);
    if (content === undefined) throw new Error(`no such file: ${params.path}`);
    return { content };
  })
  .onRequest(methods.client.fs.writeTextFile, ({ params }) => {
    fsCalls.push(["write", params.path]);
    written.set(params.path, params.content);
    buffers.set(params.path, params.content);
    return {};
  })
  .onRequest(methods.client.session.requestPermission, ({ params }) => {
    permissionsAsked.push(params);
    if (permission === "cancel") return { outcome: { outcome: "cancelled" } };
    const option = params.options.find((o) => o.kind === `${permission}_once`);
    return { outcome: { outcome: "selected", optionId: option.optionId } };
  })
  .onRequest(methods.client.terminal.create, ({ params }) => {
    const id = `term-${terminals.size + 1}`;
    const output = execFileSync(params.command, params.args ?? [], { cwd: params.cwd }).toString();
    terminals.set(id, { params, output });
    return { terminalId: id };
  })
  .onRequest(methods.client.terminal.waitForExit, () => ({ exitCode: 0, signal: null }))
  .onRequest(methods.client.terminal.output, ({ params }) => ({
    output: terminals.get(params.terminalId).output,
    truncated: false,
    exitStatus: { exitCode: 0, signal: null },
  }))
  .onRequest(methods.client.terminal.release, () => ({}))
  .onRequest(methods.client.terminal.kill, () => ({}))
  .onNotification(methods.client.session.update, ({ params }) => {
    replayed.push(params);
  });

const capabilities = { fs: { readTextFile: true, writeTextFile: true }, terminal: true };

async function turn(session, text) {
  const done = session.prompt(text);
  const updates = [];
  for (;;) {
    const message = await session.nextUpdate();
    if (message.kind === "stop") return { stopReason: message.stopReason, updates, done };
    updates.push(message.update);
  }
}

const said = (updates) =>
  updates
    .filter((u) => u.sessionUpdate === "agent_message_chunk")
    .map((u) => u.content.text)
    .join("");

async function flow(name, body) {
  await body();
  console.log(`ok ${name}`);
}

let firstSession;
let { child, stream } = start();
await editor.connectWith(stream, async (ctx) => {
  const init = await ctx.request(methods.agent.initialize, {
    protocolVersion: 1,
    clientCapabilities: capabilities,
  });
  assert.equal(init.protocolVersion, 1);
  assert.equal(init.agentCapabilities.loadSession, true);
  const session = await ctx.buildSession(cwd).start();
  firstSession = session.sessionId;

  await flow("a prompt turn streams message chunks", async () => {
    const { stopReason, updates } = await turn(session, "hello");
    assert.equal(stopReason, "end_turn");
    assert.ok(updates.filter((u) => u.sessionUpdate === "agent_message_chunk").length > 1);
    assert.equal(said(updates), "echo #1: hello");
  });

  await flow("reasoning is a thought", async () => {
    const { updates } = await turn(session, "think");
    const thought = updates.filter((u) => u.sessionUpdate === "agent_thought_chunk");
    assert.equal(thought.map((u) => u.content.text).join(""), "let me think");
    assert.equal(said(updates), "thought it through");
  });

  await flow("a file is read through the editor's buffer", async () => {
    const { updates } = await turn(session, "read notes");
    const call = updates.find((u) => u.sessionUpdate === "tool_call");
    assert.equal(call.kind, "read");
    assert.deepEqual(call.locations, [{ path: path.join(cwd, "notes.md") }]);
    const ended = updates.find((u) => u.sessionUpdate === "tool_call_update" && u.status === "completed");
    assert.equal(ended.toolCallId, call.toolCallId);
    assert.deepEqual(fsCalls.at(-1), ["read", path.join(cwd, "notes.md")]);
    assert.match(said(updates), /unsaved notes from the editor/);
  });

  await flow("a file is written through the editor", async () => {
    const { updates } = await turn(session, "write notes");
    const call = updates.find((u) => u.sessionUpdate === "tool_call");
    assert.equal(call.kind, "edit");
    assert.equal(written.get(path.join(cwd, "out.md")), "from the agent\n");
    assert.ok(!existsSync(path.join(cwd, "out.md")), "the editor writes it, not the agent");
    assert.match(said(updates), /^write_file gave: /);
  });

  await flow("execute runs in the editor's terminal", async () => {
    const { updates } = await turn(session, "run");
    const call = updates.find((u) => u.sessionUpdate === "tool_call");
    assert.equal(call.kind, "execute");
    assert.equal(terminals.size, 1);
    assert.match(said(updates), /from-terminal/);
  });

  await flow("the plan comes from the todos", async () => {
    const { updates } = await turn(session, "plan");
    const plan = updates.find((u) => u.sessionUpdate === "plan");
    assert.deepEqual(plan.entries, [
      { content: "write notes", priority: "medium", status: "in_progress" },
    ]);
  });

  await flow("permission granted: the call runs", async () => {
    permission = "allow";
    const { stopReason, updates } = await turn(session, "email alice");
    assert.equal(stopReason, "end_turn");
    const asked = permissionsAsked.at(-1);
    assert.equal(asked.toolCall.title, "send_email");
    assert.deepEqual(asked.toolCall.rawInput, { to: "bob", body: "email alice" });
    assert.equal(said(updates), "send_email gave: sent to bob: email alice");
  });

  await flow("permission denied: the call does not run", async () => {
    permission = "reject";
    const { updates } = await turn(session, "email carol");
    const failed = updates.find((u) => u.sessionUpdate === "tool_call_update" && u.status === "failed");
    assert.ok(failed, "the rejected call is reported failed");
    assert.match(said(updates), /^send_email failed: .*rejected/);
  });

  await flow("cancel ends the turn cancelled", async () => {
    const done = session.prompt("slow");
    setTimeout(() => ctx.notify(methods.agent.session.cancel, { sessionId: session.sessionId }), 300);
    const response = await done;
    assert.equal(response.stopReason, "cancelled");
    // The session goes on after a cancelled turn.
    for (;;) if ((await session.nextUpdate()).kind === "stop") break;
    const { updates } = await turn(session, "after");
    assert.match(said(updates), /^echo #\d+: after$/);
  });
});
child.kill();

// Another process, the same database: the session loads, its history replayed.
({ child, stream } = start());
await editor.connectWith(stream, async (ctx) => {
  await ctx.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: capabilities });
  await flow("a saved session loads with its history", async () => {
    const unknown = await ctx
      .request(methods.agent.session.load, { sessionId: "nope", cwd, mcpServers: [] })
      .then(() => null, (e) => e);
    assert.ok(unknown, "an unknown session is an error");
    replayed.length = 0; // (the live turns of the first connection came here too)
    await ctx.request(methods.agent.session.load, { sessionId: firstSession, cwd, mcpServers: [] });
    const shown = replayed.filter((n) => n.sessionId === firstSession).map((n) => n.update);
    const users = shown.filter((u) => u.sessionUpdate === "user_message_chunk");
    assert.equal(users[0].content.text, "hello");
    assert.equal(said(shown.slice(0, 2)), "echo #1: hello");
    assert.ok(shown.some((u) => u.sessionUpdate === "tool_call" && u.kind === "read"));
  });
});
child.kill();
