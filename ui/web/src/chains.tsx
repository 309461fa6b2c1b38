// Chains: sessions that continued each other, with their handoff documents.
import { useEffect, useState } from "preact/hooks";
import { api, problem, type Schemas } from "./api";
import { money, statusLabel } from "./format";

export function Chains() {
  const [items, setItems] = useState<Schemas["ChainSummary"][]>([]);
  const [error, setError] = useState("");
  useEffect(() => {
    api.GET("/api/agents/chains", { params: { query: { pageSize: 100 } } }).then(({ data, error }) => {
      if (error) setError(problem(error));
      else setItems(data.items);
    });
  }, []);
  return (
    <section>
      <h1>Chains</h1>
      {error && <p class="error">{error}</p>}
      <table>
        <thead>
          <tr><th>Objective</th><th>Status</th><th>Sessions</th><th>Cost</th><th>Created</th></tr>
        </thead>
        <tbody>
          {items.map((c) => (
            <tr>
              <td><a href={`#/chains/${c.id}`}>{c.originalObjective}</a></td>
              <td>{c.status}</td>
              <td>{c.sessionCount}</td>
              <td>{money(c.totalCostUsd)}</td>
              <td>{new Date(c.createdAt).toLocaleString()}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {items.length === 0 && !error && <p class="muted">No chains: a session that runs out of context continues in one.</p>}
    </section>
  );
}

export function ChainPage({ id }: { id: string }) {
  const [chain, setChain] = useState<Schemas["ChainDetail"] | null>(null);
  const [error, setError] = useState("");
  useEffect(() => {
    api.GET("/api/agents/chains/{id}", { params: { path: { id } } }).then(({ data, error }) => {
      if (error) setError(problem(error));
      else setChain(data);
    });
  }, [id]);
  if (error) return <p class="error">{error}</p>;
  if (!chain) return <p class="muted">Loading…</p>;
  return (
    <section>
      <h1>{chain.originalObjective}</h1>
      <p>{chain.status} · {money(chain.totalCostUsd)}</p>
      <ol class="chain">
        {chain.sessions.map((s) => {
          const doc = chain.handoffDocuments.find((d) => d.fromSessionId === s.sessionId);
          return (
            <li>
              <a href={`#/sessions/${s.sessionId}`}>{s.name || s.sessionId.slice(0, 8)}</a> · {statusLabel(s.status as Schemas["SessionDetail"]["status"])} · {money(s.totalCostUsd)}
              {doc && (
                <div class="card handoff">
                  <h4>Handoff</h4>
                  <p><b>Summary</b> {doc.summary}</p>
                  <p><b>Remaining work</b> {doc.remainingWork}</p>
                  {doc.keyDecisions && <p><b>Key decisions</b> {doc.keyDecisions}</p>}
                </div>
              )}
            </li>
          );
        })}
      </ol>
    </section>
  );
}
