// The flows deep-agents-ui runs, through the official JS client it uses
// (@langchain/langgraph-sdk, pinned in package.json), against a deepactors server.
// What useStream sends is copied from its source (dist/react/stream.lgp.js):
// follow-ups and decisions carry the head checkpoint from /history (without
// thread_id), stream_resumable with on_disconnect "continue", and a reload
// rejoins the run with Last-Event-ID.
//
// Usage: node sdk_flows.mjs <server url>. Prints "ok <flow>" per flow; exits 1
// on the first failure.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.argv[2], defaultHeaders: { "x-auth-scheme": "langsmith" } });
const MODES = ["values", "messages-tuple", "updates"];

function human(content) {
  return { messages: [{ id: randomUUID(), type: "human", content }] };
}

async function head(threadId) {
  // As useStream: the history's newest entry is the thread's head.
  const history = await client.threads.getHistory(threadId, { limit: 10 });
  const checkpoint = { ...history[0].checkpoint };
  delete checkpoint.thread_id;
  return { checkpoint, history };
}

async function submit(threadId, input, options = {}) {
  const parts = [];
  for await (const part of client.runs.stream(threadId, "agent", {
    input,
    streamMode: MODES,
    streamResumable: true,
    onDisconnect: "continue",
    config: { recursion_limit: 100 },
    ...options,
  })) {
    parts.push(part);
  }
  const errors = parts.filter((p) => p.event === "error");
  assert.deepEqual(errors, []);
  return parts;
}

function lastValues(parts) {
  return parts.filter((p) => p.event === "values").at(-1).data;
}

function lastText(values) {
  return values.messages.at(-1).content;
}

async function followUps() {
  const thread = await client.threads.create();
  await submit(thread.thread_id, human("one"));
  const { checkpoint } = await head(thread.thread_id);
  const parts = await submit(thread.thread_id, human("two"), { checkpoint });
  assert.equal(lastText(lastValues(parts)), "echo #2: two");
  // Every part has its id, in order, when the stream is resumable.
  assert.deepEqual(parts.map((p) => p.id), parts.map((_, i) => String(i)));
  return "follow-ups with the head checkpoint";
}

async function decision(decision, expected) {
  const thread = await client.threads.create();
  const stopped = await submit(thread.thread_id, human("email bob"));
  const interrupt = lastValues(stopped).__interrupt__;
  assert.equal(interrupt[0].value.action_requests[0].name, "send_email");
  const state = await client.threads.getState(thread.thread_id);
  assert.deepEqual(state.next, ["tools"]);
  const { checkpoint } = await head(thread.thread_id);
  // As deep-agents-ui's resumeInterrupt: stream.submit(null, {command: {resume}}).
  const parts = await submit(thread.thread_id, null, {
    command: { resume: { decisions: [decision] } },
    checkpoint,
  });
  assert.ok(lastText(lastValues(parts)).startsWith(expected), lastText(lastValues(parts)));
  assert.equal(lastValues(parts).__interrupt__, undefined);
  return `${decision.type} through command.resume with the head checkpoint`;
}

async function fork() {
  const thread = await client.threads.create();
  await submit(thread.thread_id, human("one"));
  const first = (await head(thread.thread_id)).checkpoint;
  await submit(thread.thread_id, human("two"));
  const before = (await client.threads.getHistory(thread.thread_id, { limit: 100 })).map(
    (s) => s.checkpoint.checkpoint_id,
  );
  // As useStream's branch editing: submit from an older checkpoint.
  const parts = await submit(thread.thread_id, human("again"), { checkpoint: first });
  assert.equal(lastText(lastValues(parts)), "echo #2: again");
  const after = (await client.threads.getHistory(thread.thread_id, { limit: 100 })).map(
    (s) => s.checkpoint.checkpoint_id,
  );
  for (const id of before) assert.ok(after.includes(id), `checkpoint ${id} left history`);
  return "a fork from an older checkpoint, the old branch kept in history";
}

async function rejoin() {
  const thread = await client.threads.create();
  const controller = new AbortController();
  const seen = [];
  let runId;
  try {
    for await (const part of client.runs.stream(thread.thread_id, "agent", {
      input: human("hello"),
      streamMode: MODES,
      streamResumable: true,
      onDisconnect: "continue",
      signal: controller.signal,
      onRunCreated: (meta) => {
        runId = meta.run_id;
      },
    })) {
      seen.push(part);
      if (seen.length === 2) {
        controller.abort(); // the page is reloaded here
        break; // (an aborted fetch body may never settle a pending read in Node)
      }
    }
  } catch (error) {
    assert.equal(error.name, "AbortError");
  }
  assert.ok(runId);
  // As useStream's joinStream after a reload: Last-Event-ID of the last part seen.
  const rest = [];
  for await (const part of client.runs.joinStream(thread.thread_id, runId, {
    lastEventId: seen.at(-1).id,
  })) {
    rest.push(part);
  }
  const ids = [...seen, ...rest].map((p) => p.id);
  assert.deepEqual(ids, ids.map((_, i) => String(i)));
  assert.equal(lastText(lastValues(rest)), "echo #1: hello");
  return "a dropped stream rejoined with Last-Event-ID";
}

async function setFiles() {
  // deep-agents-ui's setFiles: threads.updateState(threadId, {values: {files}}).
  const thread = await client.threads.create();
  await submit(thread.thread_id, human("one"));
  await client.threads.updateState(thread.thread_id, { values: { files: { "/notes.md": "hi" } } });
  const state = await client.threads.getState(thread.thread_id);
  assert.ok("/notes.md" in state.values.files);
  return "files set with updateState";
}

const flows = [
  followUps,
  () => decision({ type: "approve" }, "sent: sent to bob"),
  () => decision({ type: "reject", message: "not now" }, "not sent"),
  () =>
    decision(
      { type: "edit", edited_action: { name: "send_email", args: { to: "al", body: "hi" } } },
      "sent: sent to al: hi",
    ),
  fork,
  rejoin,
  setFiles,
];
for (const flow of flows) {
  console.log(`ok ${await flow()}`);
}
