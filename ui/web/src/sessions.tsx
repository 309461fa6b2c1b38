// The session list, the pool gauge and the form that starts a session.
import { useEffect, useState } from "preact/hooks";
import { api, follow, problem, type Schemas, type SessionSummary, type Status } from "./api";
import { money, percent, statusLabel } from "./format";

const statuses: Status[] = [
  "Queued", "Running", "Pausing", "Paused", "Resuming", "WaitingForInput", "WaitingForApproval", "Idle",
  "Interrupting", "Interrupted", "Cancelling", "Cancelled", "ContextExhausted", "Completed", "Failed",
];
const awaitingReview = "AwaitingReview";

export function PoolGauge({ pool }: { pool: Schemas["PoolUtilization"] | null }) {
  if (!pool) return null;
  return (
    <div class="gauge" id="pool" title={`${pool.availableSlots} slots free`}>
      <span>
        Pool {pool.activeCount}/{pool.maxCount}
      </span>
      <div class="bar">
        <div style={{ width: `${Math.min(100, pool.percentage)}%` }} />
      </div>
    </div>
  );
}

export function SessionList() {
  const [filter, setFilter] = useState("");
  const [items, setItems] = useState<SessionSummary[]>([]);
  const [pool, setPool] = useState<Schemas["PoolUtilization"] | null>(null);
  const [error, setError] = useState("");
  const [changes, setChanges] = useState(0);

  useEffect(() => {
    let stale = false;
    (async () => {
      const status = filter && filter !== awaitingReview ? (filter as Status) : filter === awaitingReview ? "Idle" : undefined;
      const [list, p] = await Promise.all([
        api.GET("/api/agents/sessions", { params: { query: { status, pageSize: 100 } } }),
        api.GET("/api/agents/pool"),
      ]);
      if (stale) return;
      if (list.error) return setError(problem(list.error));
      let rows = list.data.items;
      if (filter === awaitingReview) rows = rows.filter((s) => s.hasPendingReview);
      setItems(rows);
      if (p.data) setPool(p.data);
    })();
    return () => {
      stale = true;
    };
  }, [filter, changes]);

  // Any event of any of the caller's sessions may change a row.
  useEffect(() => {
    let timer = 0;
    return follow("/api/agents/stream", (m) => {
      if (m.event !== "event") return;
      clearTimeout(timer);
      timer = setTimeout(() => setChanges((n) => n + 1), 200);
    }, false);
  }, []);

  return (
    <section>
      <header class="row">
        <h1>Sessions</h1>
        <PoolGauge pool={pool} />
      </header>
      <StartSession />
      <label>
        Status{" "}
        <select id="status-filter" value={filter} onChange={(e) => setFilter(e.currentTarget.value)}>
          <option value="">All</option>
          <option value={awaitingReview}>Awaiting Review</option>
          {statuses.map((s) => (
            <option value={s}>{statusLabel(s)}</option>
          ))}
        </select>
      </label>
      {error && <p class="error">{error}</p>}
      <table id="sessions">
        <thead>
          <tr>
            <th>Name</th>
            <th>Status</th>
            <th>Cost</th>
            <th>Context</th>
            <th>Turns</th>
            <th>Created</th>
          </tr>
        </thead>
        <tbody>
          {items.map((s) => (
            <tr data-session={s.id}>
              <td>
                <a href={`#/sessions/${s.id}`}>{s.name || s.id.slice(0, 8)}</a>
              </td>
              <td>
                <span class={`status s-${s.status}`}>{s.status === "Idle" && s.hasPendingReview ? "Awaiting Review" : statusLabel(s.status)}</span>
              </td>
              <td>{money(s.totalCostUsd)}</td>
              <td>{percent(s.contextWindowUsagePercent)}</td>
              <td>{s.turnCount}</td>
              <td>{new Date(s.createdAt).toLocaleString()}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {items.length === 0 && <p class="muted">No sessions.</p>}
    </section>
  );
}

function StartSession() {
  const [objective, setObjective] = useState("");
  const [dir, setDir] = useState("");
  const [cap, setCap] = useState("5");
  const [error, setError] = useState("");
  const submit = async (e: Event) => {
    e.preventDefault();
    setError("");
    const body: Schemas["StartSessionRequest"] = { objective, budgetCapUsd: Number(cap) };
    if (dir) body.workingDirectory = dir;
    const { data, error } = await api.POST("/api/agents/sessions", { body });
    if (error) return setError(problem(error));
    location.hash = `#/sessions/${data.session.id}`;
  };
  return (
    <form class="card start" id="start-session" onSubmit={submit}>
      <h3>Start a session</h3>
      <textarea id="objective" rows={2} placeholder="Objective" value={objective} onInput={(e) => setObjective(e.currentTarget.value)} />
      <div class="row">
        <input id="working-directory" placeholder="Working directory (optional)" value={dir} onInput={(e) => setDir(e.currentTarget.value)} />
        <label>
          Budget $ <input id="budget" type="number" step="0.5" min="0" value={cap} onInput={(e) => setCap(e.currentTarget.value)} />
        </label>
        <button id="start" type="submit" disabled={!objective.trim()}>
          Start
        </button>
      </div>
      {error && <p class="error">{error}</p>}
    </form>
  );
}
