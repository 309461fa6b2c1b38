// Webhooks: the endpoints your sessions' events are posted to, and each
// one's delivery log with redelivery and a test event.
import { useEffect, useState } from "preact/hooks";
import { api, problem, type Schemas } from "./api";

export function Webhooks() {
  const [items, setItems] = useState<Schemas["Webhook"][]>([]);
  const [error, setError] = useState("");
  useEffect(() => {
    api.GET("/api/agents/webhooks").then(({ data, error }) => {
      if (error) setError(problem(error));
      else setItems(data.webhooks ?? []);
    });
  }, []);
  return (
    <section>
      <h1>Webhooks</h1>
      {error && <p class="error">{error}</p>}
      <table id="webhooks">
        <thead>
          <tr><th>URL</th><th>Events</th><th>Enabled</th><th>Failures in a row</th><th>Created</th></tr>
        </thead>
        <tbody>
          {items.map((w) => (
            <tr>
              <td><a href={`#/webhooks/${w.id}`}>{w.url}</a></td>
              <td>{w.eventTypes?.length ? w.eventTypes.join(", ") : "all"}</td>
              <td>{w.enabled ? "yes" : `no${w.disabledReason ? `: ${w.disabledReason}` : ""}`}</td>
              <td>{w.consecutiveFailures}</td>
              <td>{new Date(w.createdAt).toLocaleString()}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {items.length === 0 && !error && <p class="muted">No webhooks: create one with the API or `agentbus webhooks create URL`.</p>}
    </section>
  );
}

export function WebhookPage({ id }: { id: string }) {
  const [hook, setHook] = useState<Schemas["Webhook"] | null>(null);
  const [log, setLog] = useState<Schemas["WebhookDelivery"][]>([]);
  const [error, setError] = useState("");
  const load = () => {
    api.GET("/api/agents/webhooks/{id}", { params: { path: { id } } }).then(({ data, error }) => {
      if (error) setError(problem(error));
      else setHook(data);
    });
    api.GET("/api/agents/webhooks/{id}/deliveries", { params: { path: { id }, query: { limit: 100 } } }).then(({ data, error }) => {
      if (error) setError(problem(error));
      else setLog(data.deliveries ?? []);
    });
  };
  useEffect(load, [id]);
  const act = (p: Promise<{ error?: unknown }>) =>
    p.then(({ error }) => {
      if (error) setError(problem(error));
      else setError("");
      load();
    });
  if (!hook) return error ? <p class="error">{error}</p> : <p class="muted">Loading…</p>;
  return (
    <section>
      <h1>{hook.url}</h1>
      <p>
        {hook.enabled ? "Enabled" : `Disabled${hook.disabledReason ? `: ${hook.disabledReason}` : ""}`} ·{" "}
        {hook.eventTypes?.length ? hook.eventTypes.join(", ") : "every event"}
      </p>
      {error && <p class="error">{error}</p>}
      <p>
        <button id="send-test" onClick={() => act(api.POST("/api/agents/webhooks/{id}/test", { params: { path: { id } } }))}>Send test event</button>{" "}
        <button id="refresh" onClick={load}>Refresh</button>
      </p>
      <table id="deliveries">
        <thead>
          <tr><th>Event</th><th>Status</th><th>Attempts</th><th>Code</th><th>Latency</th><th>Next retry</th><th>Answer</th><th></th></tr>
        </thead>
        <tbody>
          {log.map((d) => (
            <tr>
              <td>{d.eventType}</td>
              <td>{d.status}</td>
              <td>{d.attempts}</td>
              <td>{d.statusCode ?? ""}</td>
              <td>{d.latencyMs != null ? `${d.latencyMs} ms` : ""}</td>
              <td>{d.nextAttemptAt ? new Date(d.nextAttemptAt).toLocaleString() : ""}</td>
              <td>{d.error ?? d.responseExcerpt ?? ""}</td>
              <td>
                {d.status !== "pending" && (
                  <button
                    class="link"
                    onClick={() =>
                      act(api.POST("/api/agents/webhooks/{id}/deliveries/{deliveryId}/redeliver", { params: { path: { id, deliveryId: d.id } } }))
                    }
                  >
                    Redeliver
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {log.length === 0 && <p class="muted">No deliveries yet.</p>}
    </section>
  );
}
