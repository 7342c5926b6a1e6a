// A small page that talks to the server exactly as deep-agents-ui does: its
// useChat hook (src/app/hooks/useChat.ts) calls useStream from
// @langchain/langgraph-sdk/react with these options, sends follow-ups with
// stream.submit, and answers an interrupt (ToolApprovalInterrupt.tsx) with
// stream.submit(null, {command: {resume: {decisions: [...]}}}). useStream adds
// the head checkpoint from /history to every submit on an existing thread.
// Bundled by esbuild for the browser test (tests/clients/test_browser.py).
import React, { useState } from "react";
import { createRoot } from "react-dom/client";
import { Client } from "@langchain/langgraph-sdk";
import { useStream } from "@langchain/langgraph-sdk/react";

const params = new URLSearchParams(window.location.search);
const api = params.get("api");
const client = new Client({ apiUrl: api });

function text(message) {
  return typeof message.content === "string" ? message.content : JSON.stringify(message.content);
}

function Approval({ request, onResume }) {
  const [editing, setEditing] = useState(false);
  const [args, setArgs] = useState(JSON.stringify(request.args));
  const [rejecting, setRejecting] = useState(false);
  const [reason, setReason] = useState("");
  return (
    <div id="interrupt">
      <span id="tool">{request.name}</span> <code id="args">{JSON.stringify(request.args)}</code>
      <button id="approve" onClick={() => onResume({ decisions: [{ type: "approve" }] })}>
        Approve
      </button>
      {rejecting ? (
        <span>
          <input id="reason" value={reason} onChange={(e) => setReason(e.target.value)} />
          <button
            id="confirm-reject"
            onClick={() => onResume({ decisions: [{ type: "reject", message: reason.trim() }] })}
          >
            Confirm reject
          </button>
        </span>
      ) : (
        <button id="reject" onClick={() => setRejecting(true)}>
          Reject
        </button>
      )}
      {editing ? (
        <span>
          <textarea id="edit-args" value={args} onChange={(e) => setArgs(e.target.value)} />
          <button
            id="save-edit"
            onClick={() =>
              onResume({
                decisions: [
                  { type: "edit", edited_action: { name: request.name, args: JSON.parse(args) } },
                ],
              })
            }
          >
            Save
          </button>
        </span>
      ) : (
        <button id="edit" onClick={() => setEditing(true)}>
          Edit
        </button>
      )}
    </div>
  );
}

function Chat() {
  const [threadId, setThreadId] = useState(params.get("threadId"));
  const [draft, setDraft] = useState("");
  const stream = useStream({
    assistantId: "agent",
    client,
    reconnectOnMount: true,
    threadId,
    onThreadId: (id) => {
      setThreadId(id);
      const url = new URL(window.location.href);
      url.searchParams.set("threadId", id);
      window.history.replaceState(null, "", url);
    },
    defaultHeaders: { "x-auth-scheme": "langsmith" },
    fetchStateHistory: true,
  });
  const send = () => {
    const message = { id: crypto.randomUUID(), type: "human", content: draft };
    stream.submit(
      { messages: [message] },
      {
        optimisticValues: (prev) => ({ messages: [...(prev.messages ?? []), message] }),
        config: { recursion_limit: 100 },
      },
    );
    setDraft("");
  };
  const resume = (value) => stream.submit(null, { command: { resume: value } });
  const request = stream.interrupt?.value?.action_requests?.[0];
  return (
    <main>
      <div id="status">{stream.isLoading ? "loading" : "idle"}</div>
      <div id="error">{stream.error ? String(stream.error) : ""}</div>
      <ul id="messages">
        {stream.messages.map((m) => (
          <li key={m.id} data-type={m.type}>
            {text(m)}
          </li>
        ))}
      </ul>
      <div id="todos">{(stream.values.todos ?? []).length} todos</div>
      <div id="files">{Object.keys(stream.values.files ?? {}).join(" ")}</div>
      {request && !stream.isLoading ? (
        <Approval key={stream.interrupt.id ?? request.name} request={request} onResume={resume} />
      ) : null}
      <input id="text" value={draft} onChange={(e) => setDraft(e.target.value)} />
      <button id="send" disabled={stream.isLoading} onClick={send}>
        Send
      </button>
    </main>
  );
}

createRoot(document.getElementById("root")).render(<Chat />);
