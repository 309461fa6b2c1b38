// A session's page: its live activity, queue, composer, controls, the
// cards of what waits on a person, budget and charts.
import { useEffect, useRef, useState } from "preact/hooks";
import { api, follow, problem, type DomainEvent, type FeedMessage, type QueuedMessage, type Schemas, type Session } from "./api";
import { money, percent, statusLabel } from "./format";

// One line of the activity, built from the live feed.
type Entry =
  | { kind: "text"; key: string; text: string; sub?: string }
  | { kind: "tool"; key: string; name: string; input: Record<string, unknown>; result?: string; isError?: boolean; sub?: string }
  | { kind: "activity"; key: string; type: string; summary: string; detail?: string; sub?: string }
  | { kind: "event"; key: string; text: string };

type Point = { at: number; cost: number; context: number };

// The domain events worth a line in the activity; the rest show in the
// page's state.
function describeEvent(ev: DomainEvent): string | null {
  switch (ev.type) {
    case "agent_session_started":
      return "Session started";
    case "session_pause_requested":
      return "Pausing…";
    case "session_paused":
      return "Paused";
    case "session_resume_requested":
      return "Resuming…";
    case "session_resumed":
      return "Resumed";
    case "session_waiting_for_input":
      return `Question: ${ev.data.questionContent}`;
    case "session_input_received":
      return "Answered";
    case "message_enqueued":
      return `Message queued (${ev.data.priority})`;
    case "message_promoted_to_immediate":
      return "Message promoted to Immediate";
    case "message_delivered":
      return "Message delivered";
    case "agent_session_output_ready":
      return `Output ready: ${ev.data.filesChanged} files changed, ${ev.data.testsAdded} tests added`;
    case "session_budget_warning":
      return `Budget warning: ${money(ev.data.spentUsd)} of ${money(ev.data.capUsd)}`;
    case "session_handoff_initiated":
      return `Handed off (chain ${ev.data.chainId.slice(0, 8)})`;
    case "session_added_to_chain":
      return `Continued by session ${ev.data.newSessionId.slice(0, 8)}`;
    case "agent_session_approved":
      return "Output approved";
    case "agent_session_failed":
      return `Failed: ${ev.data.failureReason}`;
    default:
      return null;
  }
}

// The status a session is in right after these events: shown at once,
// before the session is read again.
const statusAfter: Partial<Record<DomainEvent["type"], Session["status"]>> = {
  session_pause_requested: "Pausing",
  session_paused: "Paused",
  session_resume_requested: "Resuming",
  session_resumed: "Running",
};

export function SessionPage({ id }: { id: string }) {
  const [session, setSession] = useState<Session | null>(null);
  const [queue, setQueue] = useState<QueuedMessage[]>([]);
  const [entries, setEntries] = useState<Entry[]>([]);
  const [drafts, setDrafts] = useState<Record<string, string>>({});
  const [points, setPoints] = useState<Point[]>([]);
  const [error, setError] = useState("");
  const [changes, setChanges] = useState(0);

  useEffect(() => {
    let stale = false;
    (async () => {
      const [s, q] = await Promise.all([
        api.GET("/api/agents/sessions/{id}", { params: { path: { id } } }),
        api.GET("/api/agents/sessions/{id}/messages/queue", { params: { path: { id } } }),
      ]);
      if (stale) return;
      if (s.error) return setError(problem(s.error));
      setSession(s.data);
      if (q.data) setQueue(q.data.pending);
    })();
    return () => {
      stale = true;
    };
  }, [id, changes]);

  // The whole feed from its beginning, then live.
  useEffect(() => {
    let timer = 0;
    const refresh = () => {
      clearTimeout(timer);
      timer = setTimeout(() => setChanges((n) => n + 1), 100);
    };
    const on = (m: FeedMessage) => {
      const key = String(m.id ?? Math.random());
      switch (m.event) {
        case "text_delta":
          setDrafts((d) => ({ ...d, [m.data.messageId ?? ""]: (d[m.data.messageId ?? ""] ?? "") + m.data.text }));
          return;
        case "assistant_text": {
          const done = m.data.messageId ?? "";
          setDrafts((d) => {
            const { [done]: _, ...rest } = d;
            return rest;
          });
          setEntries((es) => [...es, { kind: "text", key, text: m.data.text, sub: m.data.subAgentId }]);
          return;
        }
        case "tool_call":
          setEntries((es) => [...es, { kind: "tool", key: m.data.toolUseId, name: m.data.toolName, input: m.data.input, sub: m.data.subAgentId }]);
          return;
        case "tool_result": {
          const { toolUseId, content, isError } = m.data;
          setEntries((es) => es.map((e) => (e.kind === "tool" && e.key === toolUseId ? { ...e, result: content, isError } : e)));
          return;
        }
        case "activity":
          if (m.data.type === "StatusChange" || m.data.type === "MetricsUpdate") return;
          setEntries((es) => [...es, { kind: "activity", key, type: m.data.type, summary: m.data.summary, detail: m.data.detail, sub: m.data.subAgentId }]);
          return;
        case "event": {
          const ev = m.data;
          if (ev.type === "session_metrics_updated") {
            const at = Date.parse(ev.occurredAt);
            const { totalCostUsd, contextWindowUsagePercent } = ev.data;
            setPoints((p) => [...p, { at, cost: totalCostUsd, context: contextWindowUsagePercent }]);
          }
          const status = statusAfter[ev.type];
          if (status && ev.aggregate === "session") setSession((s) => s && { ...s, status });
          const text = describeEvent(ev);
          if (text) setEntries((es) => [...es, { kind: "event", key, text }]);
          refresh();
          return;
        }
      }
    };
    const stop = follow(`/api/agents/sessions/${id}/stream`, on, true);
    return () => {
      stop();
      clearTimeout(timer);
    };
  }, [id]);

  if (error) return <p class="error">{error}</p>;
  if (!session) return <p class="muted">Loading…</p>;
  const reload = () => setChanges((n) => n + 1);
  return (
    <section class="session" id="session-page">
      <header class="row">
        <h1>{session.name || session.objective.slice(0, 60)}</h1>
        <span id="session-status" class={`status s-${session.status}`}>
          {statusLabel(session.status)}
        </span>
        {session.status === "Idle" && session.hasPendingReview && <span class="status s-review">Awaiting Review</span>}
      </header>
      <p class="objective">{session.objective}</p>
      {session.chainId && (
        <p>
          Part of chain <a href={`#/chains/${session.chainId}`}>{session.chainId.slice(0, 8)}</a>
        </p>
      )}
      <Controls session={session} onDone={reload} />
      <div class="columns">
        <div class="main-col">
          <Cards session={session} onDone={reload} />
          <Activity entries={entries} drafts={drafts} />
          <Composer id={id} onDone={reload} />
        </div>
        <aside>
          <Budget session={session} onDone={reload} />
          <Charts points={points} />
          <Queue id={id} queue={queue} onDone={reload} />
        </aside>
      </div>
    </section>
  );
}

function useAction(onDone: () => void) {
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const run = async (call: () => Promise<{ error?: unknown }>) => {
    setBusy(true);
    setError("");
    const { error } = await call();
    setBusy(false);
    if (error) setError(problem(error));
    onDone();
  };
  return { error, busy, run };
}

function Controls({ session, onDone }: { session: Session; onDone: () => void }) {
  const { error, busy, run } = useAction(onDone);
  const path = { params: { path: { id: session.id } } };
  const s = session.status;
  const live = !["Completed", "Cancelled", "Failed", "ContextExhausted"].includes(s);
  return (
    <div class="controls">
      <button id="pause" disabled={busy || s !== "Running"} onClick={() => run(() => api.POST("/api/agents/sessions/{id}/pause", path))}>
        {s === "Pausing" ? "Pausing…" : "Pause"}
      </button>
      <button id="resume" disabled={busy || s !== "Paused"} onClick={() => run(() => api.POST("/api/agents/sessions/{id}/resume", path))}>
        {s === "Resuming" ? "Resuming…" : "Resume"}
      </button>
      <button id="interrupt" disabled={busy || s !== "Running"} onClick={() => run(() => api.POST("/api/agents/sessions/{id}/interrupt", path))}>
        {s === "Interrupting" ? "Interrupting…" : "Interrupt"}
      </button>
      <button id="cancel" class="danger" disabled={busy || !live || s === "Cancelling"} onClick={() => run(() => api.POST("/api/agents/sessions/{id}/cancel", path))}>
        {s === "Cancelling" ? "Cancelling…" : "Cancel"}
      </button>
      {error && <span class="error">{error}</span>}
    </div>
  );
}

// Cards for what waits on a person: a question, a plan, a tool permission,
// the output's review.
function Cards({ session, onDone }: { session: Session; onDone: () => void }) {
  const { error, busy, run } = useAction(onDone);
  const [text, setText] = useState("");
  const path = { params: { path: { id: session.id } } };
  const q = session.pendingQuestion;
  const perm = session.pendingPermission;
  const plan = session.plan;
  return (
    <>
      {q && session.status === "WaitingForInput" && (
        <div class="card ask" id="question">
          <h3>Question</h3>
          <p>{q.content}</p>
          <div class="options">
            {(q.options ?? []).map((o) => (
              <button class="option" disabled={busy} onClick={() => run(() => api.POST("/api/agents/sessions/{id}/answer", { ...path, body: { answer: o } }))}>
                {o}
              </button>
            ))}
          </div>
          <form
            onSubmit={(e) => {
              e.preventDefault();
              run(() => api.POST("/api/agents/sessions/{id}/answer", { ...path, body: { answer: text } }));
            }}
          >
            <input placeholder="Or write an answer" value={text} onInput={(e) => setText(e.currentTarget.value)} />
            <button disabled={busy || !text.trim()}>Answer</button>
          </form>
        </div>
      )}
      {perm && (
        <div class="card ask" id="permission">
          <h3>Allow {perm.toolName}?</h3>
          <pre>{perm.input}</pre>
          <input placeholder="Message to the agent (optional)" value={text} onInput={(e) => setText(e.currentTarget.value)} />
          <button disabled={busy} onClick={() => run(() => api.POST("/api/agents/sessions/{id}/permissions/{requestId}/allow", { params: { path: { id: session.id, requestId: perm.requestId } }, body: { message: text || undefined } }))}>
            Allow
          </button>
          <button class="danger" disabled={busy} onClick={() => run(() => api.POST("/api/agents/sessions/{id}/permissions/{requestId}/deny", { params: { path: { id: session.id, requestId: perm.requestId } }, body: { message: text || undefined } }))}>
            Deny
          </button>
        </div>
      )}
      {plan && plan.requiresApproval && plan.status === "PendingApproval" && (
        <div class="card ask" id="plan">
          <h3>Plan v{plan.version}</h3>
          <pre>{plan.content}</pre>
          <input placeholder="Feedback (to reject)" value={text} onInput={(e) => setText(e.currentTarget.value)} />
          <button disabled={busy} onClick={() => run(() => api.POST("/api/agents/sessions/{id}/plan/approve", path))}>
            Approve plan
          </button>
          <button class="danger" disabled={busy || !text.trim()} onClick={() => run(() => api.POST("/api/agents/sessions/{id}/plan/reject", { ...path, body: { feedback: text } }))}>
            Reject plan
          </button>
        </div>
      )}
      {session.hasPendingReview && (
        <div class="card ask" id="review">
          <h3>Output to review</h3>
          {session.output && (
            <p>
              {session.output.filesChanged} files changed, {session.output.testsAdded} tests added,{" "}
              {session.output.allTestsPassing ? "all tests passing" : "tests failing"}
              {session.output.commitSha && <> · commit <code>{session.output.commitSha}</code></>}
            </p>
          )}
          <input placeholder="Reason or instruction (for reject or retry)" value={text} onInput={(e) => setText(e.currentTarget.value)} />
          <button id="approve" disabled={busy} onClick={() => run(() => api.POST("/api/agents/sessions/{id}/approve", path))}>
            Approve
          </button>
          <button disabled={busy} onClick={() => run(() => api.POST("/api/agents/sessions/{id}/reject", { ...path, body: { reason: text || undefined } }))}>
            Reject
          </button>
          <button disabled={busy} onClick={() => run(() => api.POST("/api/agents/sessions/{id}/retry", { ...path, body: { additionalInstruction: text || undefined } }))}>
            Retry
          </button>
          <button disabled={busy} onClick={() => run(() => api.POST("/api/agents/sessions/{id}/close", path))}>
            Close
          </button>
        </div>
      )}
      {error && <p class="error">{error}</p>}
    </>
  );
}

function Activity({ entries, drafts }: { entries: Entry[]; drafts: Record<string, string> }) {
  const end = useRef<HTMLDivElement>(null);
  useEffect(() => end.current?.scrollIntoView({ block: "nearest" }), [entries.length, drafts]);
  return (
    <div class="activity" id="activity">
      {entries.map((e) => {
        const sub = "sub" in e && e.sub ? <span class="sub">subagent {e.sub.slice(0, 8)}</span> : null;
        switch (e.kind) {
          case "text":
            return <div class="item text" key={e.key}>{sub}{e.text}</div>;
          case "tool":
            return (
              <details class={`item tool${e.isError ? " failed" : ""}`} key={e.key} open={e.result === undefined}>
                <summary>
                  {sub}
                  <b>{e.name}</b> {String(e.input["command"] ?? e.input["file_path"] ?? e.input["description"] ?? "")}
                  {e.result === undefined ? " …" : e.isError ? " ✗" : " ✓"}
                </summary>
                <pre>{JSON.stringify(e.input, null, 2)}</pre>
                {e.result !== undefined && <pre class="result">{e.result}</pre>}
              </details>
            );
          case "activity":
            return <div class="item note" key={e.key}>{sub}<i>{e.type}</i> {e.summary}</div>;
          case "event":
            return <div class="item event" key={e.key}>{e.text}</div>;
        }
      })}
      {Object.entries(drafts).map(([k, text]) => (
        <div class="item text draft" key={`draft-${k}`}>{text}▍</div>
      ))}
      <div ref={end} />
    </div>
  );
}

function Composer({ id, onDone }: { id: string; onDone: () => void }) {
  const { error, busy, run } = useAction(onDone);
  const [content, setContent] = useState("");
  const [priority, setPriority] = useState<"Immediate" | "Queued">("Immediate");
  return (
    <form
      class="composer"
      id="composer"
      onSubmit={(e) => {
        e.preventDefault();
        // Cleared at once, so what is typed next is kept; given back if refused.
        const sent = content;
        setContent("");
        run(async () => {
          const r = await api.POST("/api/agents/sessions/{id}/messages/queue", { params: { path: { id } }, body: { content: sent, priority } });
          if (r.error) setContent((now) => now || sent);
          return r;
        });
      }}
    >
      <textarea id="message" rows={2} placeholder="Message the agent" value={content} onInput={(e) => setContent(e.currentTarget.value)} />
      <select id="priority" value={priority} onChange={(e) => setPriority(e.currentTarget.value as "Immediate" | "Queued")}>
        <option value="Immediate">Immediate</option>
        <option value="Queued">Queued</option>
      </select>
      <button id="send" disabled={busy || !content.trim()}>
        Send
      </button>
      {error && <span class="error">{error}</span>}
    </form>
  );
}

function Queue({ id, queue, onDone }: { id: string; queue: QueuedMessage[]; onDone: () => void }) {
  const { error, busy, run } = useAction(onDone);
  return (
    <div class="card" id="queue">
      <h3>Queue</h3>
      {queue.length === 0 && <p class="muted">Nothing waiting.</p>}
      <ol>
        {queue.map((m) => (
          <li data-message={m.messageId} data-priority={m.priority}>
            <span class={`prio p-${m.priority}`}>{m.priority}</span> {m.content}
            <div>
              {m.priority === "Queued" && (
                <button class="promote" disabled={busy} onClick={() => run(() => api.PATCH("/api/agents/sessions/{id}/messages/queue/{messageId}/promote", { params: { path: { id, messageId: m.messageId } } }))}>
                  Promote
                </button>
              )}
              <button class="link" disabled={busy} onClick={() => run(() => api.DELETE("/api/agents/sessions/{id}/messages/queue/{messageId}", { params: { path: { id, messageId: m.messageId } } }))}>
                Cancel
              </button>
            </div>
          </li>
        ))}
      </ol>
      {error && <p class="error">{error}</p>}
    </div>
  );
}

function Budget({ session, onDone }: { session: Session; onDone: () => void }) {
  const { error, busy, run } = useAction(onDone);
  const b: Schemas["SessionBudget"] = session.budget;
  const [cap, setCap] = useState("");
  const used = Math.min(100, b.percentUsed);
  return (
    <div class="card" id="budget">
      <h3>Budget</h3>
      <div class={`bar${used >= b.warnAtPercent ? " warn" : ""}`}>
        <div style={{ width: `${used}%` }} />
      </div>
      <p>
        {money(b.estimatedCostUsd)} of {money(b.hardCapUsd)} ({percent(b.percentUsed)}) · context {percent(session.metrics.contextWindowUsagePercent)} · {session.metrics.turnCount} turns
      </p>
      <form
        class="row"
        onSubmit={(e) => {
          e.preventDefault();
          run(() => api.POST("/api/agents/sessions/{id}/budget", { params: { path: { id: session.id } }, body: { hardCapUsd: Number(cap) } }));
        }}
      >
        <input type="number" step="0.5" min="0" placeholder="New cap $" value={cap} onInput={(e) => setCap(e.currentTarget.value)} />
        <button disabled={busy || !cap}>Raise cap</button>
      </form>
      {error && <p class="error">{error}</p>}
    </div>
  );
}

function Spark({ values, label, format }: { values: number[]; label: string; format: (n: number) => string }) {
  const w = 240, h = 48;
  const max = Math.max(...values, 1e-9);
  const pts = values.map((v, i) => `${values.length === 1 ? w : (i / (values.length - 1)) * w},${h - (v / max) * (h - 4) - 2}`).join(" ");
  return (
    <figure class="spark">
      <figcaption>
        {label}: {values.length ? format(values[values.length - 1]) : "–"}
      </figcaption>
      <svg width={w} height={h} viewBox={`0 0 ${w} ${h}`}>
        <polyline points={pts} fill="none" stroke="currentColor" stroke-width="2" />
      </svg>
    </figure>
  );
}

function Charts({ points }: { points: Point[] }) {
  return (
    <div class="card" id="charts">
      <h3>Over time</h3>
      <Spark label="Cost" values={points.map((p) => p.cost)} format={money} />
      <Spark label="Context" values={points.map((p) => p.context)} format={percent} />
    </div>
  );
}
