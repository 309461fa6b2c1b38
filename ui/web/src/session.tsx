// A session's page: its live activity, queue, composer, controls, the
// cards of what waits on a person, budget and charts.
import { useEffect, useRef, useState } from "preact/hooks";
import { api, follow, problem, type DomainEvent, type FeedMessage, type QueuedMessage, type Schemas, type Session } from "./api";
import { clock, countdown, ended, money, percent, statusLabel } from "./format";
import { Checkpoints } from "./checkpoints";
import { Timeline, apply, exportJSONL, type Entry } from "./timeline";
import { ToolInput, parseInput } from "./toolinput";

type Point = { at: number; cost: number; context: number };
type Waiting = NonNullable<Session["waitingFor"]>;

// The status a session is in right after these events: shown at once,
// before the session is read again.
const statusAfter: Partial<Record<DomainEvent["type"], Session["status"]>> = {
  session_pause_requested: "Pausing",
  session_paused: "Paused",
  session_resume_requested: "Resuming",
  session_resumed: "Running",
};

// useNow is the clock, ticking every second while on is true: for the
// countdowns.
function useNow(on: boolean): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (!on) return;
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, [on]);
  return now;
}

export function SessionPage({ id }: { id: string }) {
  const [session, setSession] = useState<Session | null>(null);
  const [queue, setQueue] = useState<QueuedMessage[]>([]);
  const [entries, setEntries] = useState<Entry[]>([]);
  const [drafts, setDrafts] = useState<Record<string, string>>({});
  const [points, setPoints] = useState<Point[]>([]);
  const [waiting, setWaiting] = useState<Waiting | null | undefined>(undefined);
  const [error, setError] = useState<{ text: string; missing: boolean } | null>(null);
  const [changes, setChanges] = useState(0);
  const feed = useRef<FeedMessage[]>([]);
  // told is set once the live stream said what the session waits for. From
  // then on the stream is the one source: it follows tool calls from the
  // feed itself, while the session's detail reads them from the recorded
  // activity, which may lag, and a late read would hide the running call.
  const told = useRef(false);

  useEffect(() => {
    let stale = false;
    (async () => {
      const [s, q] = await Promise.all([
        api.GET("/api/agents/sessions/{id}", { params: { path: { id } } }),
        api.GET("/api/agents/sessions/{id}/messages/queue", { params: { path: { id } } }),
      ]);
      if (stale) return;
      if (s.error) return setError({ text: problem(s.error), missing: s.response.status === 404 || s.response.status === 422 });
      setSession(s.data);
      if (!told.current) setWaiting(s.data.waitingFor ?? null);
      if (q.data) setQueue(q.data.pending);
    })();
    return () => {
      stale = true;
    };
  }, [id, changes]);

  // The whole feed from its beginning, then live.
  useEffect(() => {
    let timer = 0;
    feed.current = [];
    told.current = false;
    setEntries([]);
    const refresh = () => {
      clearTimeout(timer);
      timer = setTimeout(() => setChanges((n) => n + 1), 100);
    };
    const on = (m: FeedMessage) => {
      if (m.event !== "ping" && m.event !== "text_delta") feed.current.push(m);
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
          break;
        }
        case "waiting":
          told.current = true;
          setWaiting(m.data.waitingFor ?? null);
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
          refresh();
          break;
        }
      }
      setEntries((es) => apply(es, m));
    };
    const stop = follow(`/api/agents/sessions/${id}/stream`, on, true);
    return () => {
      stop();
      clearTimeout(timer);
    };
  }, [id]);

  if (error)
    return (
      <section class="card missing" id="session-missing">
        <h1>{error.missing ? "No such session" : "The session could not be read"}</h1>
        <p class="muted">{error.missing ? `There is no session ${id} of yours.` : error.text}</p>
        <a class="button" href="#/sessions">Back to the sessions</a>
      </section>
    );
  if (!session) return <p class="muted">Loading…</p>;
  const reload = () => setChanges((n) => n + 1);
  const over = ended.includes(session.status);
  return (
    <section class="session" id="session-page">
      <p class="crumbs"><a href="#/sessions">Sessions</a> / {session.id.slice(0, 8)}</p>
      <header class="row">
        <h1>{session.name || session.objective.slice(0, 60)}</h1>
        <span id="session-status" class={`status s-${session.status}`}>
          {statusLabel(session.status)}
        </span>
        {session.status === "Idle" && session.hasPendingReview && <span class="status s-review">Awaiting Review</span>}
        <button class="secondary" id="export" onClick={() => exportJSONL(id, feed.current)}>Export JSONL</button>
      </header>
      <p class="objective">{session.objective}</p>
      <p class="muted meta">
        Created {new Date(session.createdAt).toLocaleString()} · session id <code>{session.id}</code>
        {session.chainId && (
          <>
            {" "}· part of chain <a href={`#/chains/${session.chainId}`}>{session.chainId.slice(0, 8)}</a>
          </>
        )}
        {session.runner && (
          <span id="runner">
            {" "}· runs on runner <code>{session.runner}</code>
          </span>
        )}
        {session.traceId && (
          <span id="trace">
            {" "}· trace{" "}
            {session.traceUrl ? (
              <a href={session.traceUrl} target="_blank" rel="noopener noreferrer"><code>{session.traceId}</code></a>
            ) : (
              <code>{session.traceId}</code>
            )}
          </span>
        )}
      </p>
      {waiting && <WaitingLine waiting={waiting} />}
      {!over && <Controls session={session} onDone={reload} />}
      <div class="columns">
        <div class="main-col">
          <Cards session={session} onDone={reload} />
          <Timeline entries={entries} drafts={drafts} />
          {!over && session.status !== "Failed" && <Composer id={id} onDone={reload} />}
        </div>
        <aside>
          <Budget session={session} onDone={reload} over={over} />
          <Charts points={points} />
          {!over && <Queue id={id} queue={queue} onDone={reload} />}
          <Checkpoints session={session} changes={changes} onDone={reload} />
        </aside>
      </div>
    </section>
  );
}

// waitingWords says each kind of wait in words, before its detail.
const waitingWords: Record<Waiting["kind"], string> = {
  Runner: "a runner:", Model: "the model:", ToolCall: "tool call", SafePoint: "a safe point:", Permission: "your allow or deny of",
  Answer: "your answer to", PlanDecision: "your decision on the plan", Resume: "", Review: "", Message: "",
};

// WaitingLine says what the session waits for, since when, and how long
// until it stops waiting by itself.
function WaitingLine({ waiting }: { waiting: Waiting }) {
  const now = useNow(!!waiting.deadline);
  return (
    <p class="waiting" id="waiting" data-kind={waiting.kind}>
      Waiting for {waitingWords[waiting.kind]} {waiting.detail}
      {waiting.since && <> · since {clock(waiting.since)}</>}
      {waiting.deadline && <> · {countdown(waiting.deadline, now)} left</>}
    </p>
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

// cancelWaits says, for a status that waits for the sidecar to confirm a
// request, when a cancel becomes possible: a session takes one request at
// a time.
const cancelWaits: Partial<Record<Session["status"], string>> = {
  Pausing: "Cancel once it has paused: it pauses when the running tool call ends.",
  Interrupting: "Cancel once the interrupt has stopped the turn.",
  Resuming: "Cancel once it runs again.",
};

function Controls({ session, onDone }: { session: Session; onDone: () => void }) {
  const { error, busy, run } = useAction(onDone);
  const path = { params: { path: { id: session.id } } };
  const s = session.status;
  const live = !["Completed", "Cancelled", "Failed", "ContextExhausted"].includes(s);
  const cancelLater = cancelWaits[s];
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
      <button id="cancel" class="danger" disabled={busy || !live || s === "Cancelling" || !!cancelLater} title={cancelLater}
        onClick={() => run(() => api.POST("/api/agents/sessions/{id}/cancel", path))}>
        {s === "Cancelling" ? "Cancelling…" : "Cancel"}
      </button>
      {cancelLater && <span class="muted" id="cancel-note">{cancelLater}</span>}
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
  const now = useNow(!!perm || !!q);
  const reported = session.output ? reportedOutput(session.output) : [];
  return (
    <>
      {q && session.status === "WaitingForInput" && (
        <div class="card ask" id="question">
          <h3>Question</h3>
          <p>{q.content}</p>
          <p class="muted countdown">Waits {countdown(q.expiresAt, now)} more (until {clock(q.expiresAt)})</p>
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
      {perm && session.status === "WaitingForApproval" && (
        <div class="card ask" id="permission">
          <h3>Allow {perm.toolName}?</h3>
          <ToolInput input={parseInput(perm.input)} />
          <p class="countdown" id="permission-countdown">
            {session.toolApproval.onTimeout === "Allow" ? "Allowed" : session.toolApproval.onTimeout === "Fail" ? "The session fails" : "Denied"} automatically in{" "}
            {countdown(perm.expiresAt, now)} (at {clock(perm.expiresAt)})
          </p>
          <input placeholder="Message to the agent (optional)" value={text} onInput={(e) => setText(e.currentTarget.value)} />
          <button disabled={busy} onClick={() => run(() => api.POST("/api/agents/sessions/{id}/permissions/{requestId}/allow", { params: { path: { id: session.id, requestId: perm.requestId } }, body: { message: text || undefined } }))}>
            Allow
          </button>
          <button class="danger" disabled={busy} onClick={() => run(() => api.POST("/api/agents/sessions/{id}/permissions/{requestId}/deny", { params: { path: { id: session.id, requestId: perm.requestId } }, body: { message: text || undefined } }))}>
            Deny
          </button>
        </div>
      )}
      {plan && plan.requiresApproval && plan.status === "PendingApproval" && session.status === "WaitingForApproval" && (
        <div class="card ask" id="plan">
          <h3>Plan v{plan.version}</h3>
          <pre>{plan.content}</pre>
          <input placeholder="Feedback (to reject)" value={text} onInput={(e) => setText(e.currentTarget.value)} />
          <button disabled={busy} onClick={() => run(() => api.POST("/api/agents/sessions/{id}/plan/approve", path))}>
            Approve plan
          </button>
          <button class="danger" id="reject-plan" disabled={busy || !text.trim()} onClick={() => run(() => api.POST("/api/agents/sessions/{id}/plan/reject", { ...path, body: { feedback: text } }))}>
            Reject plan
          </button>
        </div>
      )}
      {session.hasPendingReview && session.status === "Idle" && (
        <div class="card ask" id="review">
          <h3>Output to review</h3>
          {reported.length > 0 && <p id="reported">{reported.join(", ")}</p>}
          <input placeholder="Reason or instruction (for reject or retry)" value={text} onInput={(e) => setText(e.currentTarget.value)} />
          <div class="actions">
            <button id="approve" disabled={busy} onClick={() => run(() => api.POST("/api/agents/sessions/{id}/approve", path))}>
              Approve
            </button>
            <button id="reject" class="danger" disabled={busy} onClick={() => run(() => api.POST("/api/agents/sessions/{id}/reject", { ...path, body: { reason: text || undefined } }))}>
              Reject
            </button>
            <button id="retry" class="secondary" disabled={busy} onClick={() => run(() => api.POST("/api/agents/sessions/{id}/retry", { ...path, body: { additionalInstruction: text || undefined } }))}>
              Retry
            </button>
            <button id="close" class="secondary" disabled={busy} onClick={() => run(() => api.POST("/api/agents/sessions/{id}/close", path))}>
              Close
            </button>
          </div>
        </div>
      )}
      {session.status === "Failed" && (
        <div class="card" id="failed">
          <h3>Failed{session.failure ? `: ${session.failure.reason}` : ""}</h3>
          {session.failure?.message && <p>{session.failure.message}</p>}
          <input placeholder="An instruction for the new attempt (optional)" value={text} onInput={(e) => setText(e.currentTarget.value)} />
          <button id="retry-failed" disabled={busy} onClick={() => run(() => api.POST("/api/agents/sessions/{id}/retry", { ...path, body: { additionalInstruction: text || undefined } }))}>
            Retry
          </button>
        </div>
      )}
      {error && <p class="error">{error}</p>}
    </>
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

// reportedOutput is what the agent reported of its output, and only
// that: counts of nothing and a test result nobody ran are not news.
function reportedOutput(o: Schemas["Output"]): string[] {
  const out: string[] = [];
  if (o.filesChanged > 0) out.push(`${o.filesChanged} file${o.filesChanged === 1 ? "" : "s"} changed`);
  if (o.testsAdded > 0) out.push(`${o.testsAdded} test${o.testsAdded === 1 ? "" : "s"} added`);
  if (o.allTestsPassing) out.push("all tests passing");
  if (o.commitSha) out.push(`commit ${o.commitSha.slice(0, 12)}`);
  return out;
}

function Budget({ session, onDone, over }: { session: Session; onDone: () => void; over: boolean }) {
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
      {!over && (
        <form
          class="row"
          onSubmit={(e) => {
            e.preventDefault();
            run(() => api.POST("/api/agents/sessions/{id}/budget", { params: { path: { id: session.id } }, body: { hardCapUsd: Number(cap) } }));
          }}
        >
          <input type="number" step="0.5" min="0" placeholder="New cap $" value={cap} onInput={(e) => setCap(e.currentTarget.value)} />
          <button class="secondary" disabled={busy || !cap}>Raise cap</button>
        </form>
      )}
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
