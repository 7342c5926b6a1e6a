// The run's stream, read in a worker so the page stays responsive however much
// streams: POST .../runs/stream (stream_mode "events-lite" and "values", subgraphs
// on, resumable),
// or a rejoin (GET .../runs/{id}/stream with Last-Event-ID), the SSE parsed
// here, and what the page shows sent to it in batches (every 50 ms).
// Subagents' values and text deltas are skipped unparsed.

let ops = [];
let values = null;
let timer = null;
let valuesSent = -Infinity;

function flush(last = false) {
  timer = null;
  // The root's values (its messages, todos, files) at most four times a second.
  const now = performance.now();
  const withValues = values !== null && (last || now - valuesSent >= 250);
  if (ops.length || withValues) {
    postMessage({ ops, values: withValues ? values : null });
    ops = [];
    if (withValues) {
      values = null;
      valuesSent = now;
    }
  }
  if (values !== null && timer === null) timer = setTimeout(flush, 50);
}

function push(op) {
  ops.push(op);
  if (timer === null) timer = setTimeout(flush, 50);
}

const SKIP = ['state_updated', 'model_delta', 'tool_call_started', 'tool_call_finished', 'custom_event'];

function pathOf(data) {
  // {"event":"<name>","path":"<path>",... : the path without parsing the rest.
  const at = data.indexOf('"path":"');
  if (at < 0) return '';
  return data.slice(at + 8, data.indexOf('"', at + 8));
}

function handle(name, data) {
  const mode = name.split('|')[0];
  if (mode === 'metadata') {
    push(['meta', JSON.parse(data).run_id]);
    return;
  }
  if (mode === 'error') {
    push(['error', data]);
    return;
  }
  if (name === 'values') {
    // The root's state (a subagent's values are named values|<namespace>).
    values = JSON.parse(data);
    if (timer === null) timer = setTimeout(flush, 50);
    return;
  }
  if (mode !== 'events' && mode !== 'events-lite') return;
  for (const kind of SKIP) {
    if (data.startsWith(`{"event":"${kind}"`) && pathOf(data).includes('/')) return;
  }
  const e = JSON.parse(data);
  const root = !e.path.includes('/');
  switch (e.event) {
    case 'run_started':
      if (root) push(['root', e.path]);
      break;
    case 'state_updated':
      values = e.values;
      if (timer === null) timer = setTimeout(flush, 50);
      break;
    case 'model_delta':
      if (e.kind === 'text') push(['delta', e.text]);
      break;
    case 'model_call_started':
      push(['call', e.path, e.model]);
      break;
    case 'model_call_finished':
      push(['called', e.path, e.message && e.message.usage]);
      break;
    case 'subagent_spawned':
      push(['spawn', e.child, e.path, e.subagent_type, e.description]);
      break;
    case 'subagent_finished':
      push(['end', e.child, 'finished', e.usage, null]);
      break;
    case 'subagent_failed':
      push(['end', e.child, 'failed', null, e.error]);
      break;
    case 'subagent_cancelled':
      push(['end', e.child, e.timed_out ? 'timed out' : 'cancelled', null, null]);
      break;
    case 'subagent_interrupted':
      push(['end', e.child, 'interrupted', null, null]);
      break;
    case 'interrupted':
      if (root) push(['interrupt', e.requests]);
      break;
    case 'run_finished':
      if (root) push(['finished', e.outcome, e.usage, e.error]);
      break;
  }
}

async function run({ url, method = 'POST', headers, body }) {
  let response;
  try {
    const sent = body === undefined ? undefined : JSON.stringify(body);
    response = await fetch(url, { method, headers, body: sent });
  } catch (err) {
    push(['error', String(err)]);
    flush();
    postMessage({ done: true });
    return;
  }
  if (!response.ok) {
    const detail = await response.text();
    if (response.status !== 410) push(['error', `${response.status} ${detail}`]);
    flush();
    postMessage({ done: true, status: response.status });
    return;
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n?/g, '\n');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = 'message';
      const data = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('event:')) name = line.slice(6).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
      }
      if (data.length) {
        try {
          handle(name, data.join('\n'));
        } catch (err) {
          push(['error', `bad event: ${err}`]);
        }
      }
    }
  }
  if (timer !== null) clearTimeout(timer);
  flush(true);
  postMessage({ done: true });
}

onmessage = (message) => run(message.data);
