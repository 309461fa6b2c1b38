// A UI's use of the client types generated from agentbus's OpenAPI
// document. It is type-checked, never run: if the document stops describing
// what a UI needs, this stops compiling.
import type { components, paths } from "./schema";

type Schemas = components["schemas"];

// The live stream of one session: its path, parameters and events.
type SessionStream = paths["/api/agents/sessions/{id}/stream"]["get"];
const params: SessionStream["parameters"] = {
  path: { id: "0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10" },
  header: { "Last-Event-ID": 1042 },
  query: { since: "2025-01-02T15:04:05Z" },
};

function url(p: SessionStream["parameters"]): string {
  return `/api/agents/sessions/${p.path.id}/stream`;
}

// What each SSE event carries.
function onEvent(name: string, id: string | undefined, data: string): string {
  switch (name) {
    case "event": {
      const ev: Schemas["StreamEvent"] = JSON.parse(data);
      return `${id}: ${ev.aggregate} ${ev.aggregateId} ${ev.type} v${ev.version} at ${ev.occurredAt}`;
    }
    case "ping": {
      const ping: Schemas["StreamPing"] = JSON.parse(data);
      return ping.time;
    }
    case "reconnect": {
      const rc: Schemas["StreamReconnect"] = JSON.parse(data);
      const reason: "slow_client" | "unavailable" = rc.reason;
      return `${reason}, resume after ${rc.lastEventId}`;
    }
  }
  return "";
}

// The same events, typed by the document: a union discriminated by the
// SSE event name, so a handler reads each event's data without a cast.
type FeedMessage = SessionStream["responses"][200]["content"]["text/event-stream"][number];
function render(m: FeedMessage): string {
  switch (m.event) {
    case "tool_call": {
      const input: Record<string, unknown> = m.data.input;
      return `${m.data.toolName} ${m.data.toolUseId} ${String(input["command"])}`;
    }
    case "tool_result":
      return `${m.data.toolUseId}${m.data.isError ? " failed" : ""}: ${m.data.content}`;
    case "assistant_text":
      return m.data.text;
    case "text_delta":
      return `${m.data.messageId ?? ""}[${m.data.index}] += ${m.data.text}`;
    case "activity":
      return `${m.data.type} ${m.data.summary}`;
    case "event":
      return `${m.id ?? 0}: ${domainEvent(m.data)}`;
    case "waiting":
      return `${m.data.waitingFor?.kind ?? "nothing"} since ${m.data.waitingFor?.since ?? "-"}`;
    case "ping":
      return m.data.time;
    case "reconnect":
      return `resume after ${m.data.lastEventId}`;
    default: {
      const unknownEvent: never = m;
      return unknownEvent;
    }
  }
}

// A domain event is itself a union discriminated by its type, so each
// event's data is typed too.
type DomainEvent = Extract<FeedMessage, { event: "event" }>["data"];
function domainEvent(ev: DomainEvent): string {
  switch (ev.type) {
    case "session_paused":
      return `${ev.data.sessionId} paused at ${ev.occurredAt}`;
    case "message_enqueued": {
      const priority: string = ev.data.priority;
      return `${ev.data.messageId} queued ${priority}`;
    }
    case "session_waiting_for_input":
      return `${ev.data.questionContent} ${(ev.data.options ?? []).join(" / ")}`;
    case "session_metrics_updated":
      return `$${ev.data.totalCostUsd} ${ev.data.contextWindowUsagePercent}%`;
    case "session_handoff_initiated": {
      const aggregate: "chain" = ev.aggregate;
      return `${aggregate} ${ev.data.chainId}: ${ev.data.fromSessionId} wrote ${ev.data.handoffDocumentId}`;
    }
    case "session_added_to_chain":
      return `${ev.data.newSessionId} at ${ev.data.position}`;
    default:
      return ev.type;
  }
}
// @ts-expect-error: not a domain event.
const badDomainEvent: DomainEvent["type"] = "session_exploded";

// Errors are problem+json with a kind a UI can switch on.
type NotFound = SessionStream["responses"][404]["content"]["application/problem+json"];
function describe(p: NotFound): string {
  switch (p.kind) {
    case "conflict":
      return `refused while ${p.currentStatus ?? "unknown"}`;
    case "validation":
      return (p.errors ?? []).map((e) => `${e.location ?? "body"}: ${e.message ?? ""}`).join("; ");
    default:
      return p.detail ?? p.title ?? "error";
  }
}

const problem: Schemas["Problem"] = { type: "about:blank", status: 409, title: "Conflict", kind: "conflict", currentStatus: "Paused" };

// The document says what is wrong, too.
// @ts-expect-error: not a kind of error.
const badKind: Schemas["Problem"] = { type: "about:blank", kind: "teapot" };
// @ts-expect-error: the session id is required.
const noID: SessionStream["parameters"]["path"] = {};

// Every stream needs a person's token.
type AllStreams = paths["/api/agents/stream"]["get"];
type Unauthorized = AllStreams["responses"][401]["content"]["application/problem+json"];
const unauthorized: Unauthorized = { type: "about:blank", status: 401, kind: "unauthorized" };

// Starting a session: the body, and the key that comes back once.
type Start = paths["/api/agents/sessions"]["post"];
const startBody: Start["requestBody"]["content"]["application/json"] = {
  workingDirectory: "/home/bruno/src/shop",
  objective: "Add retries with backoff to the HTTP client, with tests.",
  budgetCapUsd: 10,
  toolApproval: { mode: "List", tools: ["Bash"] },
};
type Started = Start["responses"][201]["content"]["application/json"];
function agentKey(s: Started): string {
  const status: Schemas["SessionDetail"]["status"] = s.session.status;
  return `${s.session.id} ${status} ${s.apiKey ?? "(shown once)"}`;
}

// Steering a session: enqueue an Immediate message, then read the queue.
type Enqueue = paths["/api/agents/sessions/{id}/messages/queue"]["post"];
const steer: Enqueue["requestBody"]["content"]["application/json"] = { content: "Also handle 429.", priority: "Immediate" };
// @ts-expect-error: not a priority.
const badSteer: Enqueue["requestBody"]["content"]["application/json"] = { content: "hi", priority: "Urgent" };
type Queue = Enqueue["responses"][201]["content"]["application/json"];
function nextMessage(q: Queue): string {
  return q.pending.length > 0 ? q.pending[0].content : "";
}
type Flooded = Enqueue["responses"][429]["content"]["application/problem+json"];
const flooded: Flooded = { type: "about:blank", status: 429, kind: "rate_limited" };

// A refused transition says the current status.
type Pause = paths["/api/agents/sessions/{id}/pause"]["post"];
type Refused = Pause["responses"][409]["content"]["application/problem+json"];
const refused: Refused = { type: "about:blank", status: 409, kind: "conflict", currentStatus: "Paused" };

// The session list and the pool.
type List = paths["/api/agents/sessions"]["get"];
const listQuery: List["parameters"]["query"] = { status: "Running", page: 1, pageSize: 20 };
type Pool = paths["/api/agents/pool"]["get"]["responses"][200]["content"]["application/json"];
function poolLabel(p: Pool): string {
  return `${p.activeCount}/${p.maxCount} (${p.percentage}%)`;
}

export { url, onEvent, render, badDomainEvent, describe, params, problem, badKind, noID, unauthorized };
export { startBody, agentKey, steer, badSteer, nextMessage, flooded, refused, listQuery, poolLabel };
