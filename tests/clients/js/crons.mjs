// Crons through the official JS client (@langchain/langgraph-sdk, pinned in
// package.json): a cron on a thread every second fires runs until deleted;
// search and count answer in the SDK's shapes.
//
// Usage: node crons.mjs <server url>. Prints "ok <step>" per step; exits 1 on failure.
import assert from "node:assert/strict";
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.argv[2] });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const input = { messages: [{ type: "human", content: "tick" }] };

async function main() {
  const thread = await client.threads.create();
  const cron = await client.crons.createForThread(thread.thread_id, "agent", {
    schedule: "* * * * * *",
    input,
    metadata: { from: "js" },
  });
  assert.equal(cron.thread_id, thread.thread_id);
  assert.ok(cron.next_run_date);
  console.log("ok create");

  const found = await client.crons.search({ threadId: thread.thread_id });
  assert.deepEqual(found.map((c) => c.cron_id), [cron.cron_id]);
  assert.equal(await client.crons.count({ threadId: thread.thread_id }), 1);
  console.log("ok search");

  for (let i = 0; i < 100; i++) {
    const runs = await client.runs.list(thread.thread_id, { limit: 100 });
    if (runs.length >= 3) break;
    await sleep(100);
  }
  const runs = await client.runs.list(thread.thread_id, { limit: 100 });
  assert.ok(runs.length >= 3, `only ${runs.length} runs`);
  assert.ok(runs.every((r) => r.metadata.cron_id === cron.cron_id));
  console.log("ok fired");

  await client.crons.delete(cron.cron_id);
  assert.equal(await client.crons.count({}), 0);
  console.log("ok delete");
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
