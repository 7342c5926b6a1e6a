// deepactors' built-in page: threads, messages, todos, files, interrupts and a
// live actor tree of the run. Plain ES module, no build step, nothing from
// elsewhere. The stream is read in a worker (stream.js); the tree's rows are
// updated in place, at most once a frame (requestAnimationFrame).
//
// Runs are streamed resumably and go on when the page goes away: the open
// thread is in the address (#thread=<id>), so a reload reopens it, and a
// thread with a run in progress rejoins that run's stream from its first event
// (Last-Event-ID: -1), which rebuilds the tree. Stop cancels the run.

const $ = (id) => document.getElementById(id);
// events-lite: every event but state snapshots, which would carry the whole
// state at each change (with 1,000 subagents, 250 MB of a run's stream); the
// root's state comes as LangGraph's values, once per step.
const MODES = ['events-lite', 'values'];
const state = { thread: null, assistant: null, running: false, worker: null };

// --- the server's API ------------------------------------------------------------

function headers() {
  const h = { 'Content-Type': 'application/json' };
  const key = sessionStorage.getItem('deepactors.key');
  if (key) h['X-Api-Key'] = key;
  return h;
}

async function api(method, path, body) {
  const response = await fetch(path, {
    method,
    headers: headers(),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 401 || response.status === 403) {
    $('key').focus();
    throw new Error('the server asks for an API key');
  }
  if (!response.ok) throw new Error(`${response.status} ${await response.text()}`);
  return response.json();
}

function status(text, error = false) {
  $('status').textContent = text;
  $('status').classList.toggle('error', error);
}

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  Object.assign(node, props);
  for (const child of children) node.append(child);
  return node;
}

// --- threads -----------------------------------------------------------------------

async function loadAssistants() {
  const found = await api('POST', '/assistants/search', { limit: 100 });
  const select = $('assistant');
  select.replaceChildren(...found.map((a) => el('option', { value: a.assistant_id, textContent: a.graph_id || a.name })));
  state.assistant = found.length ? found[0].assistant_id : 'agent';
  select.onchange = () => { state.assistant = select.value; };
}

async function loadThreads() {
  const threads = await api('POST', '/threads/search', { limit: 50, sort_by: 'updated_at', sort_order: 'desc' });
  $('threads').replaceChildren(...threads.map((t) => {
    const first = ((t.values && t.values.messages) || []).find((m) => m.type === 'human');
    const item = el('li', { title: t.thread_id }, text(first) || t.thread_id.slice(0, 8), ' ', el('small', { textContent: t.status }));
    item.dataset.id = t.thread_id;
    item.classList.toggle('current', t.thread_id === state.thread);
    item.onclick = () => openThread(t.thread_id);
    return item;
  }));
}

function setThread(id) {
  state.thread = id;
  history.replaceState(null, '', id ? `#thread=${id}` : location.pathname + location.search);
  for (const li of $('threads').children) li.classList.toggle('current', li.dataset.id === id);
}

async function openThread(id, reopened = false) {
  if (state.running) return;
  setThread(id);
  tree.clear();
  const current = await api('GET', `/threads/${id}/state`);
  showValues(current.values || {});
  showInterrupts((current.interrupts || []).flatMap(fromLangGraph));
  if (!reopened) status(`thread ${id.slice(0, 8)}`);
  // A run still going (started before a reload, or elsewhere): follow it.
  const runs = await api('GET', `/threads/${id}/runs?limit=10`);
  // The thread's own assistant, not the picker's first: a decision is answered
  // by the assistant that asked (the server carries it out so whatever is sent).
  const select = $('assistant');
  if (runs.length && state.thread === id && [...select.options].some((o) => o.value === runs[0].assistant_id)) {
    select.value = state.assistant = runs[0].assistant_id;
  }
  const going = runs.find((r) => r.status === 'running' || r.status === 'pending');
  if (going && state.thread === id && !state.running) follow(going.run_id, '-1');
}

function fromLangGraph(interrupt) {
  // A stored interrupt as LangGraph shows it: requests with their allowed decisions.
  const value = interrupt.value || {};
  const configs = value.review_configs || [];
  return (value.action_requests || []).map((r, i) => ({
    tool: r.name,
    args: r.args,
    allowed_decisions: (configs[i] || {}).allowed_decisions || ['approve', 'edit', 'reject'],
  }));
}

// --- values: messages, todos, files ---------------------------------------------------

function text(message) {
  if (!message) return '';
  const c = message.content;
  if (typeof c === 'string') return c;
  return (c || []).map((b) => (typeof b === 'string' ? b : b.text || '')).join('');
}

let streaming = null; // the answer being streamed, until the next values

let shown = []; // the ids of the messages on the page, in order

function messageNode(m) {
  const node = el('div', { className: `msg ${m.type}` }, el('span', { className: 'role', textContent: m.type === 'tool' ? `tool ${m.name || ''}` : m.type }), text(m));
  for (const call of m.tool_calls || []) {
    node.append(el('div', { className: 'calls', textContent: `→ ${call.name}(${JSON.stringify(call.args)})` }));
  }
  return node;
}

function showValues(values) {
  const messages = values.messages || [];
  const box = $('messages');
  if (streaming && messages.length !== shown.length) {
    streaming.remove(); // the answer it streamed is in the messages now
    streaming = null;
  }
  // Messages are appended: only new ones are drawn (the page keeps up with a
  // thousand tool results); anything else (a fork, another thread) redraws.
  const same = shown.length <= messages.length && shown.every((id, i) => messages[i].id === id);
  if (!same || box.children.length !== shown.length + (streaming ? 1 : 0)) {
    box.replaceChildren();
    shown = [];
    streaming = null;
  }
  box.append(...messages.slice(shown.length).map(messageNode));
  shown = messages.map((m) => m.id);
  $('messages').scrollTop = $('messages').scrollHeight;
  $('todos').replaceChildren(...(values.todos || []).map((t) => el('li', { className: t.status, textContent: t.content })));
  const files = values.files || {};
  $('files').replaceChildren(...Object.keys(files).sort().map((path) => {
    const item = el('li', { textContent: path });
    item.onclick = () => {
      const data = files[path];
      const body = data && data.content !== undefined ? data.content : data;
      $('file-view').textContent = Array.isArray(body) ? body.join('\n') : String(body);
      $('file-view').hidden = false;
    };
    return item;
  }));
}

function delta(chunk) {
  if (!streaming) {
    streaming = el('div', { className: 'msg ai' }, el('span', { className: 'role', textContent: 'ai' }));
    $('messages').append(streaming);
  }
  streaming.append(chunk);
}

// --- interrupts -----------------------------------------------------------------------

function showInterrupts(requests) {
  const box = $('interrupts');
  box.replaceChildren();
  if (!requests.length) return;
  const decisions = new Array(requests.length);
  const decide = (i, decision, node) => {
    decisions[i] = decision;
    node.querySelectorAll('button').forEach((b) => { b.disabled = true; });
    if (decisions.filter(Boolean).length === requests.length) {
      box.replaceChildren();
      send({ command: { resume: { decisions } } });
    }
  };
  requests.forEach((r, i) => {
    const allowed = r.allowed_decisions || ['approve', 'edit', 'reject'];
    const args = el('textarea', { rows: 3, value: JSON.stringify(r.args, null, 1), readOnly: !allowed.includes('edit') });
    const reason = el('input', { placeholder: 'reason (for reject)' });
    const node = el('div', { className: 'request' }, el('strong', { textContent: `${r.tool} needs approval` }), args);
    const buttons = el('div', { className: 'buttons' });
    const button = (name, label, make) => {
      if (!allowed.includes(name)) return;
      const b = el('button', { type: 'button', textContent: label, className: name });
      b.onclick = () => {
        try {
          decide(i, make(), node);
        } catch (err) {
          status(`edit: ${err.message}`, true);
        }
      };
      buttons.append(b);
    };
    button('approve', 'Approve', () => ({ type: 'approve' }));
    button('edit', 'Send edited', () => ({ type: 'edit', edited_action: { name: r.tool, args: JSON.parse(args.value) } }));
    button('reject', 'Reject', () => (reason.value ? { type: 'reject', message: reason.value } : { type: 'reject' }));
    if (allowed.includes('reject')) buttons.append(reason);
    node.append(buttons);
    box.append(node);
  });
}

// --- the actor tree -------------------------------------------------------------------

const tree = {
  rows: new Map(), // path -> row
  fresh: [], // rows to put in the page
  dirty: new Set(),
  scheduled: false,
  counts: { running: 0, finished: 0, failed: 0, interrupted: 0 },

  clear() {
    this.rows.clear();
    this.fresh = [];
    this.dirty.clear();
    this.counts = { running: 0, finished: 0, failed: 0, interrupted: 0 };
    $('tree').replaceChildren();
    $('tree-summary').textContent = '';
  },

  // `label` tells the row from its siblings (its actor's name: `task-12:worker`),
  // shown first so that it is never cut off; `detail` (a subagent's description,
  // often the same words for a hundred of them) follows as room allows.
  row(path, parent, label, detail = '') {
    let row = this.rows.get(path);
    if (row) return row;
    const cells = ['name', 'state', 'calls', 'tokens', 'cost', 'elapsed'].map((c) => el('span', { className: c }));
    const line = el('div', { className: 'row running' }, ...cells);
    const kids = el('div', { className: 'kids' });
    const node = el('div', { className: 'node' }, line, kids);
    node.dataset.path = path;
    row = {
      path, parent, node, line, kids, cells, label,
      state: 'running', calls: 0, input: 0, output: 0, cost: null,
      start: performance.now(), end: null, usage: false,
    };
    cells[0].append(el('span', { className: 'who', textContent: label }));
    if (detail) cells[0].append(' ', el('span', { className: 'what', textContent: detail }));
    cells[0].title = detail ? `${path}\n${detail}` : path;
    this.rows.set(path, row);
    this.fresh.push(row);
    this.counts.running++;
    this.touch(row);
    return row;
  },

  touch(row) {
    this.dirty.add(row);
    if (!this.scheduled) {
      this.scheduled = true;
      requestAnimationFrame(() => this.paint());
    }
  },

  addUsage(row, usage) {
    if (!usage) return;
    row.input += usage.input_tokens || 0;
    row.output += usage.output_tokens || 0;
    if (usage.cost_usd != null) row.cost = (row.cost || 0) + usage.cost_usd;
  },

  end(row, outcome, usage, error) {
    if (row.state === 'running') {
      this.counts.running--;
      const done = outcome === 'finished' || outcome === 'completed';
      this.counts[done ? 'finished' : outcome === 'interrupted' ? 'interrupted' : 'failed']++;
    }
    row.state = outcome;
    row.end = performance.now();
    if (usage) { // the child and everything under it
      row.input = usage.input_tokens || 0;
      row.output = usage.output_tokens || 0;
      row.cost = usage.cost_usd != null ? usage.cost_usd : row.cost;
    }
    if (error) row.cells[1].title = error;
    this.touch(row);
  },

  paint() {
    this.scheduled = false;
    for (const row of this.fresh) { // in spawn order: a parent is in before its children
      const parent = this.rows.get(row.parent);
      (parent ? parent.kids : $('tree')).append(row.node);
    }
    this.fresh = [];
    const now = performance.now();
    for (const row of this.dirty) {
      const [, st, calls, tokens, cost, elapsed] = row.cells;
      if (row.line.className !== `row ${row.state}`) row.line.className = `row ${row.state}`;
      st.textContent = row.state;
      calls.textContent = row.calls;
      tokens.textContent = row.input || row.output ? `${row.input}/${row.output}` : '';
      cost.textContent = row.cost == null ? '' : `$${row.cost.toFixed(4)}`;
      elapsed.textContent = `${(((row.end ?? now) - row.start) / 1000).toFixed(1)}s`;
    }
    this.dirty.clear();
    const c = this.counts;
    $('tree-summary').textContent = `${this.rows.size} actors: ${c.running} running, ${c.finished} done${c.failed ? `, ${c.failed} failed` : ''}${c.interrupted ? `, ${c.interrupted} waiting for approval` : ''}`;
  },

  tick() { // running rows' elapsed time
    for (const row of this.rows.values()) if (row.state === 'running') this.dirty.add(row);
    if (this.dirty.size) this.touch(this.dirty.values().next().value);
  },
};
setInterval(() => tree.tick(), 1000);

function apply(op) {
  switch (op[0]) {
    case 'meta': state.runId = op[1]; break;
    case 'root': tree.row(op[1], null, op[1]); break;
    case 'spawn': tree.row(op[1], op[2], op[1].slice(op[1].lastIndexOf('/') + 1), op[4]); break;
    case 'call': {
      const row = tree.rows.get(op[1]);
      if (row) { row.calls++; tree.touch(row); }
      break;
    }
    case 'called': {
      const row = tree.rows.get(op[1]);
      if (row) { tree.addUsage(row, op[2]); tree.touch(row); }
      break;
    }
    case 'end': {
      const row = tree.rows.get(op[1]);
      if (row) tree.end(row, op[2], op[3], op[4]);
      break;
    }
    case 'delta': delta(op[1]); break;
    case 'interrupt': state.pending = op[1]; break;
    case 'finished': {
      const row = [...tree.rows.values()].find((r) => r.parent === null);
      if (row) tree.end(row, op[1], op[2], op[3]);
      status(op[1] === 'failed' ? `failed: ${op[3]}` : op[1], op[1] === 'failed');
      break;
    }
    case 'error': status(op[1], true); break;
  }
}

// --- runs -----------------------------------------------------------------------------

async function send(body) {
  if (state.running) return;
  if (!state.thread) {
    const created = await api('POST', '/threads', {});
    setThread(created.thread_id);
  }
  stream({
    url: new URL(`/threads/${state.thread}/runs/stream`, location.href).href,
    headers: headers(),
    body: {
      assistant_id: state.assistant,
      stream_mode: MODES,
      stream_subgraphs: true,
      // Kept, and going on without the page: a reload rejoins it.
      stream_resumable: true,
      on_disconnect: 'continue',
      ...body,
    },
  });
}

function follow(runId, lastEventId) {
  // Rejoin a run of the open thread: from the event after lastEventId (-1: the
  // first), or from now (null; its state so far is on the page already).
  const h = headers();
  if (lastEventId !== null) h['Last-Event-ID'] = lastEventId;
  const path = `/threads/${state.thread}/runs/${runId}/stream?stream_mode=${encodeURIComponent(JSON.stringify(MODES))}`;
  stream({ url: new URL(path, location.href).href, method: 'GET', headers: h }, runId);
}

function stream(request, runId = null) {
  state.running = true;
  state.pending = null;
  state.runId = runId;
  $('send').disabled = true;
  $('stop').hidden = false;
  $('stop').disabled = false;
  tree.clear();
  status(runId ? 'following the run…' : 'running…');
  const worker = new Worker('stream.js', { type: 'module' });
  state.worker = worker;
  worker.onmessage = ({ data }) => {
    if (data.ops) for (const op of data.ops) apply(op);
    if (data.values) showValues(data.values); // after the deltas it may hold the answer of
    if (data.done) {
      worker.terminate();
      state.running = false;
      $('send').disabled = false;
      $('stop').hidden = true;
      if (data.status === 410 && runId) {
        // Its first events are no longer kept (a very long run): from now on.
        status('the run\'s first events are no longer kept: following it from now');
        follow(runId, null);
        return;
      }
      if (state.pending) showInterrupts(state.pending);
      loadThreads().catch((err) => status(err.message, true));
    }
  };
  worker.postMessage(request);
}

async function stop() {
  if (!state.running || !state.runId) return;
  $('stop').disabled = true;
  status('stopping…');
  try {
    await fetch(`/threads/${state.thread}/runs/${state.runId}/cancel`, { method: 'POST', headers: headers() });
  } catch (err) {
    status(`stop: ${err.message}`, true);
    $('stop').disabled = false;
  }
}

// --- the page ---------------------------------------------------------------------------

function start() {
  const key = $('key');
  key.value = sessionStorage.getItem('deepactors.key') || '';
  const setKey = () => {
    sessionStorage.setItem('deepactors.key', key.value);
    init();
  };
  key.onchange = setKey;
  $('key-form').onsubmit = (event) => {
    event.preventDefault();
    setKey();
  };
  $('stop').onclick = () => { stop(); };
  $('new-thread').onclick = async () => {
    if (state.running) return;
    setThread(null);
    tree.clear();
    showValues({});
    showInterrupts([]);
    for (const li of $('threads').children) li.classList.remove('current');
  };
  $('composer').onsubmit = (event) => {
    event.preventDefault();
    const input = $('input');
    if (!input.value.trim() || state.running) return;
    const content = input.value;
    input.value = '';
    send({ input: { messages: [{ role: 'user', content }] } }).catch((err) => status(err.message, true));
  };
  $('input').onkeydown = (event) => {
    if (event.key === 'Enter' && !event.shiftKey) {
      event.preventDefault();
      $('composer').requestSubmit();
    }
  };
  $('tree-toggle').onclick = () => {
    const open = $('tree-toggle').getAttribute('aria-expanded') !== 'true';
    $('tree-toggle').setAttribute('aria-expanded', String(open));
    $('tree').classList.toggle('collapsed', !open);
  };
  init();
}

function init() {
  const opened = /^#thread=(.+)$/.exec(location.hash);
  Promise.all([loadAssistants(), loadThreads()]).then(
    () => {
      status('ready');
      // The thread open before a reload, and its run if one is going.
      if (opened && !state.running && !state.thread) {
        openThread(decodeURIComponent(opened[1]), true).catch((err) => status(err.message, true));
      }
    },
    (err) => status(err.message, true),
  );
}

start();
