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

type Sort = "newest" | "oldest" | "cost" | "name";
const pageSize = 25;

// listAll reads every page of the caller's sessions in status and of
// templateId (up to a thousand): search, filters and sorting then work on
// all of them.
async function listAll(status: Status | undefined, templateId: string | undefined): Promise<{ items: SessionSummary[]; error?: unknown }> {
  const items: SessionSummary[] = [];
  for (let page = 1; page <= 10; page++) {
    const { data, error } = await api.GET("/api/agents/sessions", { params: { query: { status, templateId, page, pageSize: 100 } } });
    if (error) return { items, error };
    items.push(...data.items);
    if (page * data.pageSize >= data.total) break;
  }
  return { items };
}

type Chain = Schemas["ChainDetail"];

// A row of the list: a session, and where it stands in its chain.
type Row = { s: SessionSummary; chain?: Chain; position?: number; previous?: Schemas["ChainedSession"] };

// lineage keeps the sessions of a chain together, in the chain's order,
// where its first shown session falls in rows: each one after the first
// continues the one before it.
function lineage(rows: SessionSummary[], chains: Record<string, Chain>): Row[] {
  const out: Row[] = [];
  const placed = new Set<string>();
  for (const s of rows) {
    if (placed.has(s.id)) continue;
    const chain = s.chainId ? chains[s.chainId] : undefined;
    if (!chain || !chain.sessions.some((c) => c.sessionId === s.id)) {
      out.push({ s });
      continue;
    }
    for (const c of chain.sessions) {
      const member = rows.find((r) => r.id === c.sessionId);
      if (!member || placed.has(member.id)) continue;
      placed.add(member.id);
      out.push({ s: member, chain, position: c.position, previous: chain.sessions.find((p) => p.position === c.position - 1) });
    }
  }
  return out;
}

export function SessionList({ template }: { template: string }) {
  const [filter, setFilter] = useState("");
  const [templateFilter, setTemplateFilter] = useState("");
  const [templates, setTemplates] = useState<Schemas["TemplateSummary"][]>([]);
  const [chains, setChains] = useState<Record<string, Chain>>({});
  const [search, setSearch] = useState("");
  const [minCost, setMinCost] = useState("");
  const [since, setSince] = useState("");
  const [sort, setSort] = useState<Sort>("newest");
  const [page, setPage] = useState(1);
  const [selected, setSelected] = useState<string[]>([]);
  const [items, setItems] = useState<SessionSummary[]>([]);
  const [pool, setPool] = useState<Schemas["PoolUtilization"] | null>(null);
  const [error, setError] = useState("");
  const [changes, setChanges] = useState(0);

  useEffect(() => {
    let stale = false;
    (async () => {
      const status = filter && filter !== awaitingReview ? (filter as Status) : filter === awaitingReview ? "Idle" : undefined;
      const [list, p] = await Promise.all([listAll(status, templateFilter || undefined), api.GET("/api/agents/pool")]);
      if (stale) return;
      if (list.error) return setError(problem(list.error));
      let rows = list.items;
      if (filter === awaitingReview) rows = rows.filter((s) => s.hasPendingReview);
      setItems(rows);
      if (p.data) setPool(p.data);
    })();
    return () => {
      stale = true;
    };
  }, [filter, templateFilter, changes]);

  useEffect(() => {
    api.GET("/api/agents/templates", { params: { query: { pageSize: 100 } } }).then(({ data }) => data && setTemplates(data.items));
  }, []);

  // The chains of the listed sessions, for their lineage.
  const chainIds = [...new Set(items.map((s) => s.chainId).filter((c): c is string => !!c))].sort().join(",");
  useEffect(() => {
    if (!chainIds) return setChains({});
    let stale = false;
    const ids = chainIds.split(",");
    Promise.all(ids.map((id) => api.GET("/api/agents/chains/{id}", { params: { path: { id } } }))).then((results) => {
      if (stale) return;
      const found: Record<string, Chain> = {};
      results.forEach((r, i) => {
        if (r.data) found[ids[i]] = r.data;
      });
      setChains(found);
    });
    return () => {
      stale = true;
    };
  }, [chainIds, changes]);

  // Any event of any of the caller's sessions may change a row.
  useEffect(() => {
    let timer = 0;
    return follow("/api/agents/stream", (m) => {
      if (m.event !== "event") return;
      clearTimeout(timer);
      timer = setTimeout(() => setChanges((n) => n + 1), 200);
    }, false);
  }, []);

  const needle = search.trim().toLowerCase();
  const shown = items
    .filter((s) => !needle || s.name.toLowerCase().includes(needle) || s.id.startsWith(needle))
    .filter((s) => !minCost || s.totalCostUsd >= Number(minCost))
    .filter((s) => !since || Date.parse(s.createdAt) >= Date.parse(since))
    .sort((a, b) =>
      sort === "cost" ? b.totalCostUsd - a.totalCostUsd
      : sort === "name" ? a.name.localeCompare(b.name)
      : sort === "oldest" ? Date.parse(a.createdAt) - Date.parse(b.createdAt)
      : Date.parse(b.createdAt) - Date.parse(a.createdAt));
  const rows = lineage(shown, chains);
  const pages = Math.max(1, Math.ceil(rows.length / pageSize));
  const onPage = rows.slice((Math.min(page, pages) - 1) * pageSize, Math.min(page, pages) * pageSize);
  // A session waiting for the confirmation of a pause, interrupt or
  // resume takes no cancel until it has it.
  const cancellable = (s: SessionSummary) =>
    !["Completed", "Cancelled", "Cancelling", "Failed", "ContextExhausted", "Pausing", "Interrupting", "Resuming"].includes(s.status);
  const cancelSelected = async () => {
    const results = await Promise.all(selected.map((id) => api.POST("/api/agents/sessions/{id}/cancel", { params: { path: { id } } })));
    const failed = results.filter((r) => r.error).length;
    setError(failed ? `${failed} of ${selected.length} could not be cancelled: ${problem(results.find((r) => r.error)?.error)}` : "");
    setSelected([]);
    setChanges((n) => n + 1);
  };

  return (
    <section>
      <header class="row">
        <h1>Sessions</h1>
        <PoolGauge pool={pool} />
      </header>
      <StartSession template={template} />
      <div class="row filters">
        <input id="search" type="search" placeholder="Search by name or id" value={search} onInput={(e) => { setSearch(e.currentTarget.value); setPage(1); }} />
        <label>
          Status{" "}
          <select id="status-filter" value={filter} onChange={(e) => { setFilter(e.currentTarget.value); setPage(1); }}>
            <option value="">All</option>
            <option value={awaitingReview}>Awaiting Review</option>
            {statuses.map((s) => (
              <option value={s}>{statusLabel(s)}</option>
            ))}
          </select>
        </label>
        <label>
          Template{" "}
          <select id="template-filter" value={templateFilter} onChange={(e) => { setTemplateFilter(e.currentTarget.value); setPage(1); }}>
            <option value="">Any</option>
            {templates.map((t) => (
              <option value={t.id}>{t.name}</option>
            ))}
          </select>
        </label>
        <label>Cost ≥ $ <input id="min-cost" type="number" step="0.01" min="0" value={minCost} onInput={(e) => setMinCost(e.currentTarget.value)} /></label>
        <label>Since <input id="since" type="date" value={since} onInput={(e) => setSince(e.currentTarget.value)} /></label>
        <label>
          Sort{" "}
          <select id="sort" value={sort} onChange={(e) => setSort(e.currentTarget.value as Sort)}>
            <option value="newest">Newest</option>
            <option value="oldest">Oldest</option>
            <option value="cost">Cost</option>
            <option value="name">Name</option>
          </select>
        </label>
        <button id="cancel-selected" class="danger" disabled={selected.length === 0} onClick={cancelSelected}>
          Cancel selected ({selected.length})
        </button>
      </div>
      {error && <p class="error">{error}</p>}
      <table id="sessions">
        <thead>
          <tr>
            <th></th>
            <th>Name</th>
            <th>Status</th>
            <th>Cost</th>
            <th>Context</th>
            <th>Turns</th>
            <th>Created</th>
          </tr>
        </thead>
        <tbody>
          {onPage.map(({ s, chain, position, previous }) => (
            <tr data-session={s.id} data-chain={chain?.id} data-position={position} class={position && position > 1 ? "continued" : undefined}>
              <td>
                <input type="checkbox" class="pick" disabled={!cancellable(s)} checked={selected.includes(s.id)}
                  onChange={(e) => setSelected(e.currentTarget.checked ? [...selected, s.id] : selected.filter((x) => x !== s.id))} />
              </td>
              <td>
                <a href={`#/sessions/${s.id}`}>{s.name || s.id.slice(0, 8)}</a>
                {chain && (
                  <div class="lineage muted">
                    {previous ? (
                      <>↳ continues <a href={`#/sessions/${previous.sessionId}`}>{previous.name || previous.sessionId.slice(0, 8)}</a> · </>
                    ) : null}
                    <a href={`#/chains/${chain.id}`}>chain</a> {position}/{chain.sessions.length}
                  </div>
                )}
                {s.templateId && <div class="muted template-of">{templates.find((t) => t.id === s.templateId)?.name ?? "from a template"}</div>}
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
      {shown.length === 0 && <p class="muted">No sessions.</p>}
      {pages > 1 && (
        <p class="row pager">
          <button class="secondary" disabled={page <= 1} onClick={() => setPage(page - 1)}>Previous</button>
          Page {Math.min(page, pages)} of {pages} ({rows.length} sessions)
          <button class="secondary" disabled={page >= pages} onClick={() => setPage(page + 1)}>Next</button>
        </p>
      )}
    </section>
  );
}

function StartSession({ template }: { template: string }) {
  const [objective, setObjective] = useState("");
  const [dir, setDir] = useState("");
  const [cap, setCap] = useState("5");
  const [templateId, setTemplateId] = useState(template);
  const [model, setModel] = useState("");
  const [warnAt, setWarnAt] = useState("");
  const [skillIds, setSkillIds] = useState<string[]>([]);
  const [approval, setApproval] = useState<"" | "None" | "All" | "List">("");
  const [approvalTools, setApprovalTools] = useState("");
  const [templates, setTemplates] = useState<Schemas["TemplateSummary"][]>([]);
  const [skills, setSkills] = useState<Schemas["SkillSummary"][]>([]);
  const [error, setError] = useState("");
  useEffect(() => {
    api.GET("/api/agents/templates", { params: { query: { isActive: "true", pageSize: 100 } } }).then(({ data }) => data && setTemplates(data.items));
    api.GET("/api/agents/skills", { params: { query: { isActive: "true", pageSize: 100 } } }).then(({ data }) => data && setSkills(data.items));
  }, []);
  useEffect(() => setTemplateId(template), [template]);
  const chosen = templates.find((t) => t.id === templateId);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError("");
    const body: Schemas["StartSessionRequest"] = { objective };
    // A template brings its own budget unless one is given.
    if (!chosen || cap !== "") body.budgetCapUsd = Number(cap);
    if (dir) body.workingDirectory = dir;
    if (templateId) body.templateId = templateId;
    if (model) body.modelId = model;
    if (warnAt) body.warnAtPercent = Number(warnAt);
    if (skillIds.length) body.skillIds = skillIds;
    if (approval) body.toolApproval = { mode: approval, tools: approval === "List" ? approvalTools.split(",").map((t) => t.trim()).filter(Boolean) : undefined };
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
          Template{" "}
          <select id="start-template" value={templateId} onChange={(e) => { setTemplateId(e.currentTarget.value); if (e.currentTarget.value) setCap(""); }}>
            <option value="">None</option>
            {templates.map((t) => <option value={t.id}>{t.name}</option>)}
          </select>
        </label>
        <label>
          Budget ${" "}
          <input id="budget" type="number" step="0.5" min="0" placeholder={chosen ? String(chosen.defaultBudgetCapUsd) : ""} value={cap} onInput={(e) => setCap(e.currentTarget.value)} />
        </label>
        <button id="start" type="submit" disabled={!objective.trim()}>
          Start
        </button>
      </div>
      <details class="more">
        <summary>More: model, skills, tool approval, budget warning</summary>
        <div class="row">
          <label>Model <input id="start-model" placeholder={chosen?.modelId ?? "claude-sonnet-4-5"} value={model} onInput={(e) => setModel(e.currentTarget.value)} /></label>
          <label>Warn at % <input id="start-warn" type="number" min="1" max="100" placeholder="80" value={warnAt} onInput={(e) => setWarnAt(e.currentTarget.value)} /></label>
          <label>
            Tool approval{" "}
            <select id="start-approval" value={approval} onChange={(e) => setApproval(e.currentTarget.value as typeof approval)}>
              <option value="">{chosen ? "The template's" : "None"}</option>
              <option value="None">No tool waits</option>
              <option value="All">Every tool use waits for me</option>
              <option value="List">These tools wait:</option>
            </select>
          </label>
          {approval === "List" && <input id="start-approval-tools" placeholder="Bash, Write" value={approvalTools} onInput={(e) => setApprovalTools(e.currentTarget.value)} />}
        </div>
        {skills.length > 0 && (
          <div class="row">
            Skills:
            {skills.map((s) => (
              <label class="inline">
                <input type="checkbox" checked={skillIds.includes(s.id)} onChange={(e) => setSkillIds(e.currentTarget.checked ? [...skillIds, s.id] : skillIds.filter((x) => x !== s.id))} /> {s.name}
              </label>
            ))}
          </div>
        )}
      </details>
      {error && <p class="error">{error}</p>}
    </form>
  );
}
