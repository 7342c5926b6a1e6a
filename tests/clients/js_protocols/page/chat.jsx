// A chat page as AI SDK users write one: useChat from @ai-sdk/react over the
// default transport, tool approvals answered with addToolApprovalResponse and
// sent back automatically (lastAssistantMessageIsCompleteWithApprovalResponses),
// Stop, Regenerate. Every part is rendered: text (a subagent's tagged with its
// actor path), reasoning, dynamic tools, and the data parts (todos, files,
// subagents). Bundled by esbuild for tests/clients/test_ai_sdk.py.
import React, { useState } from "react";
import { createRoot } from "react-dom/client";
import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } from "ai";

const params = new URLSearchParams(window.location.search);
const api = params.get("api");
const chatId = params.get("chat");
const hide = params.get("hide");
const notices = [];

function Part({ part, onApprove }) {
  const path = part.providerMetadata?.deepactors?.path ?? part.callProviderMetadata?.deepactors?.path;
  switch (part.type) {
    case "text":
      return path ? (
        <p className="subagent-text" data-path={path}>{part.text}</p>
      ) : (
        <p className="text">{part.text}</p>
      );
    case "reasoning":
      return <p className="reasoning">{part.text}</p>;
    case "dynamic-tool":
      return (
        <div className="tool" data-name={part.toolName} data-state={part.state} data-path={path ?? ""}>
          <span className="tool-name">{part.toolName}</span>
          <span className="tool-output">{part.state === "output-available" ? String(part.output) : ""}</span>
          {part.state === "approval-requested" ? (
            <span>
              <button className="approve" onClick={() => onApprove(part.approval.id, true)}>Approve</button>
              <button className="deny" onClick={() => onApprove(part.approval.id, false)}>Deny</button>
            </span>
          ) : null}
        </div>
      );
    case "data-todos":
      return (
        <ul className="todos">
          {part.data.todos.map((t) => (
            <li key={t.content} data-status={t.status}>{t.content}</li>
          ))}
        </ul>
      );
    case "data-file":
      return <pre className="file" data-path={part.data.path}>{part.data.content}</pre>;
    case "data-subagent":
      return (
        <div className="subagent" data-path={part.data.path} data-status={part.data.status}>
          {part.data.name}: {part.data.description}
        </div>
      );
    default:
      return null;
  }
}

function App() {
  const [text, setText] = useState("");
  const { messages, sendMessage, status, stop, regenerate, error, addToolApprovalResponse } =
    useChat({
      id: chatId,
      transport: new DefaultChatTransport({
        api,
        body: hide ? { hideSubagents: JSON.parse(hide) } : {},
      }),
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
      onData: (part) => {
        if (part.type === "data-notice") notices.push(part.data);
      },
    });
  window.__chat = { messages, status, notices };
  const onApprove = (id, approved) =>
    addToolApprovalResponse({ id, approved, reason: approved ? undefined : "not this one" });
  return (
    <div>
      <div id="status">{status}</div>
      <div id="error">{error ? error.message : ""}</div>
      <input id="text" value={text} onChange={(e) => setText(e.target.value)} />
      <button
        id="send"
        disabled={status !== "ready" && status !== "error"}
        onClick={() => {
          sendMessage({ text });
          setText("");
        }}
      >
        Send
      </button>
      <button id="stop" onClick={() => stop()}>Stop</button>
      <button id="regenerate" onClick={() => regenerate()}>Regenerate</button>
      <ol id="messages">
        {messages.map((m) => (
          <li key={m.id} className={`message ${m.role}`}>
            {m.parts.map((part, i) => (
              <Part key={i} part={part} onApprove={onApprove} />
            ))}
          </li>
        ))}
      </ol>
    </div>
  );
}

createRoot(document.getElementById("root")).render(<App />);
