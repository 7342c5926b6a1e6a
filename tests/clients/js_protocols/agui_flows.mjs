// AG-UI's own client, @ag-ui/client's HttpAgent, against `deepactors serve`:
// node agui_flows.mjs <server url>. Each flow prints "ok <name>"; any failure
// (an assertion, a warning of the client's verifier or enforcer) exits non-zero.
import assert from "node:assert/strict";
import { HttpAgent } from "@ag-ui/client";

const base = process.argv[2];
const url = `${base}/agui/agent`;

// The client warns (and strips the field) when an event has something the
// protocol does not describe: every warning is a failure here.
const warnings = [];
console.warn = (...args) => warnings.push(args.map(String).join(" "));

let threads = 0;
function newAgent() {
  threads += 1;
  return new HttpAgent({ url, threadId: `agui-${process.pid}-${threads}` });
}

let ids = 0;
function say(agent, text) {
  ids += 1;
  agent.addMessage({ id: `u-${process.pid}-${ids}`, role: "user", content: text });
}

async function run(agent, params = {}, more = {}) {
  const events = [];
  const outcome = {};
  const result = await agent.runAgent(params, {
    ...more,
    onEvent: ({ event }) => {
      events.push(event);
    },
    onRunFinishedEvent: (finished) => {
      outcome.outcome = finished.outcome;
      outcome.interrupts = finished.interrupts;
    },
  });
  return { events, result, outcome };
}

const of = (events, type) => events.filter((e) => e.type === type);
const lastAssistant = (agent) =>
  agent.messages.filter((m) => m.role === "assistant" && m.content && !m.subagentRunId).at(-1);

async function flow(name, body) {
  await body();
  assert.deepEqual(warnings, [], `${name}: the client warned`);
  console.log(`ok ${name}`);
}

await flow("text streams and a follow-up sees the thread", async () => {
  const agent = newAgent();
  say(agent, "hello");
  const first = await run(agent);
  assert.equal(first.events[0].type, "RUN_STARTED");
  assert.equal(first.events.at(-1).type, "RUN_FINISHED");
  assert.equal(first.outcome.outcome, "success");
  assert.ok(of(first.events, "TEXT_MESSAGE_CONTENT").length > 1, "streamed in pieces");
  assert.equal(lastAssistant(agent).content, "echo #1: hello");
  say(agent, "again");
  await run(agent);
  assert.equal(lastAssistant(agent).content, "echo #2: again");
});

await flow("todos and files arrive as state", async () => {
  const agent = newAgent();
  say(agent, "plan");
  const { events } = await run(agent);
  assert.equal(of(events, "STATE_SNAPSHOT").length, 1);
  assert.ok(of(events, "STATE_DELTA").length >= 2);
  assert.deepEqual(agent.state.todos, [{ content: "write notes", status: "in_progress" }]);
  assert.equal(agent.state.files["/notes.md"].content, "# notes\n");
  const calls = agent.messages.flatMap((m) => m.toolCalls ?? []).map((c) => c.function.name);
  assert.deepEqual(calls, ["write_todos", "write_file"]);
  const results = agent.messages.filter((m) => m.role === "tool");
  assert.equal(results.length, 2);
  assert.equal(lastAssistant(agent).content, "planned");
});

await flow("reasoning arrives as reasoning", async () => {
  const agent = newAgent();
  say(agent, "think");
  const { events } = await run(agent);
  const thought = of(events, "REASONING_MESSAGE_CONTENT").map((e) => e.delta).join("");
  assert.equal(thought, "let me think");
  assert.equal(lastAssistant(agent).content, "thought it through");
  const finished = events.at(-1);
  assert.equal(finished.usage[0].inputTokens, 7);
  assert.equal(finished.usage[0].outputTokens, 3);
});

await flow("50 subagents stream, each attributed to its actor path", async () => {
  const agent = newAgent();
  say(agent, "fan 50");
  const { events } = await run(agent);
  const started = of(events, "SUBAGENT_STARTED");
  assert.equal(started.length, 50);
  assert.equal(new Set(started.map((e) => e.subagentRunId)).size, 50);
  for (const e of started) {
    assert.match(e.subagentRunId, /^main\/task-\d+:worker$/);
    assert.equal(e.name, "worker");
    assert.ok(e.parentToolCallId);
  }
  assert.equal(of(events, "SUBAGENT_FINISHED").length, 50);
  const texts = new Map();
  for (const e of of(events, "TEXT_MESSAGE_CONTENT").filter((e) => e.subagentRunId)) {
    texts.set(e.subagentRunId, (texts.get(e.subagentRunId) ?? "") + e.delta);
  }
  assert.equal(texts.size, 50);
  const answers = new Set(texts.values());
  for (let i = 0; i < 50; i++) assert.ok(answers.has(`done: job ${i}`), `job ${i}`);
  const mine = agent.messages.filter((m) => m.subagentRunId);
  assert.equal(mine.filter((m) => m.role === "assistant" && m.content).length, 50);
  assert.equal(lastAssistant(agent).content, "all 50 subagents done");
});

await flow("hidden subagents send only their lifecycle", async () => {
  const agent = newAgent();
  say(agent, "fan 50");
  const { events } = await run(agent, { forwardedProps: { hideSubagents: true } });
  assert.equal(of(events, "SUBAGENT_STARTED").length, 50);
  assert.equal(of(events, "SUBAGENT_FINISHED").length, 50);
  const tagged = events.filter((e) => e.subagentRunId && !e.type.startsWith("SUBAGENT_"));
  assert.deepEqual(tagged, []);
  assert.equal(lastAssistant(agent).content, "all 50 subagents done");
});

await flow("one subagent type hidden, the others shown", async () => {
  const agent = newAgent();
  say(agent, "fan 6 mixed");
  const { events } = await run(agent, { forwardedProps: { hideSubagents: ["reader"] } });
  const texts = of(events, "TEXT_MESSAGE_CONTENT").filter((e) => e.subagentRunId);
  const paths = new Set(texts.map((e) => e.subagentRunId));
  assert.equal(paths.size, 3);
  for (const p of paths) assert.match(p, /:worker$/);
  assert.equal(of(events, "SUBAGENT_STARTED").length, 6);
});

await flow("an approval is an interrupt; resumed, the call runs", async () => {
  const agent = newAgent();
  say(agent, "email alice");
  const stopped = await run(agent);
  assert.equal(stopped.outcome.outcome, "interrupt");
  const [interrupt] = stopped.outcome.interrupts;
  assert.equal(interrupt.reason, "tool_approval");
  assert.equal(interrupt.metadata.deepactors.tool, "send_email");
  assert.deepEqual(agent.pendingInterrupts.map((i) => i.id), [interrupt.id]);
  const resumed = await run(agent, {
    resume: [{ interruptId: interrupt.id, status: "resolved", payload: { type: "approve" } }],
  });
  assert.equal(resumed.outcome.outcome, "success");
  const result = of(resumed.events, "TOOL_CALL_RESULT")[0];
  assert.equal(result.toolCallId, interrupt.toolCallId);
  assert.equal(lastAssistant(agent).content, "sent: sent to bob: email alice");
});

await flow("a cancelled interrupt rejects the call", async () => {
  const agent = newAgent();
  say(agent, "email carol");
  const stopped = await run(agent);
  const [interrupt] = stopped.outcome.interrupts;
  await run(agent, { resume: [{ interruptId: interrupt.id, status: "cancelled" }] });
  assert.match(lastAssistant(agent).content, /^not sent: /);
});

await flow("an approval inside a subagent suspends it", async () => {
  const agent = newAgent();
  say(agent, "delegate email");
  const stopped = await run(agent);
  assert.equal(stopped.outcome.outcome, "interrupt");
  const [interrupt] = stopped.outcome.interrupts;
  assert.match(interrupt.subagentRunId, /^main\/task-\d+:mailer$/);
  const suspended = of(stopped.events, "SUBAGENT_FINISHED")[0];
  assert.equal(suspended.subagentRunId, interrupt.subagentRunId);
  assert.deepEqual(suspended.outcome, { type: "suspended", interruptIds: [interrupt.id] });
  const resumed = await run(agent, {
    resume: [{ interruptId: interrupt.id, status: "resolved", payload: { type: "approve" } }],
  });
  assert.equal(resumed.outcome.outcome, "success");
  const sent = of(resumed.events, "TOOL_CALL_RESULT").find((e) => e.toolCallId === interrupt.toolCallId);
  assert.equal(sent.subagentRunId, interrupt.subagentRunId);
  assert.equal(sent.content, "sent to dan: mail dan");
  assert.equal(lastAssistant(agent).content, "all 1 subagents done");
});

await flow("a run cancelled elsewhere ends cancelled, its subagents closed", async () => {
  const agent = newAgent();
  say(agent, "fan 3 slow");
  let started = 0;
  const { events, outcome } = await run(agent, {}, {
    onSubagentStartedEvent: () => {
      started += 1;
      if (started === 3) {
        (async () => {
          const runs = await (await fetch(`${base}/threads/${agent.threadId}/runs`)).json();
          const going = runs.find((r) => r.status === "running");
          await fetch(`${base}/threads/${agent.threadId}/runs/${going.run_id}/cancel`, {
            method: "POST",
          });
        })();
      }
    },
  });
  assert.equal(outcome.outcome, "cancelled");
  const closed = events.filter((e) => e.type === "SUBAGENT_ERROR" || e.type === "SUBAGENT_FINISHED");
  assert.equal(closed.length, 3);
  for (const e of closed) assert.equal(e.type, "SUBAGENT_ERROR");
});

await flow("a failing run ends with RUN_ERROR", async () => {
  const agent = newAgent();
  say(agent, "fail");
  const errors = [];
  try {
    await agent.runAgent({}, { onRunErrorEvent: ({ event }) => errors.push(event) });
  } catch {
    // the client may also reject the run: the event is what matters
  }
  assert.equal(errors.length, 1);
  assert.match(errors[0].message, /the model broke/);
});

await flow("aborting the client cancels the run", async () => {
  const agent = newAgent();
  say(agent, "slow");
  const running = agent.runAgent({}, {
    onRunStartedEvent: () => {
      setTimeout(() => agent.abortRun(), 200);
    },
  });
  await running.catch(() => {});
  for (let i = 0; ; i++) {
    const runs = await (await fetch(`${base}/threads/${agent.threadId}/runs`)).json();
    if (runs.length === 1 && runs[0].status === "interrupted") break;
    assert.ok(i < 200, `the run was not cancelled: ${JSON.stringify(runs)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
});
