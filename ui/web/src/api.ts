// The API client: types generated from agentbus's OpenAPI document
// (schema.d.ts, by openapi-typescript), requests by openapi-fetch, and the
// live feed read from the SSE stream with the same types.
import createClient, { type Middleware } from "openapi-fetch";
import type { components, paths } from "./schema";

export type Schemas = components["schemas"];
export type Session = Schemas["SessionDetail"];
export type SessionSummary = Schemas["SessionSummary"];
export type QueuedMessage = Schemas["QueuedMessage"];
export type Status = Session["status"];

const tokenKey = "agentbus.token";

export function token(): string {
  return sessionStorage.getItem(tokenKey) ?? "";
}

export function setToken(t: string): void {
  if (t) sessionStorage.setItem(tokenKey, t.trim());
  else sessionStorage.removeItem(tokenKey);
}

const auth: Middleware = {
  onRequest({ request }) {
    const t = token();
    if (t) request.headers.set("Authorization", `Bearer ${t}`);
    return request;
  },
};

export const api = createClient<paths>({ baseUrl: location.origin });
api.use(auth);

// problem turns an error body (problem+json) into one line.
export function problem(err: unknown): string {
  if (!err || typeof err !== "object") return String(err);
  const p = err as Schemas["Problem"];
  const fields = (p.errors ?? []).map((e) => `${e.location ?? ""} ${e.message ?? ""}`.trim());
  return [p.detail ?? p.title ?? "request failed", ...fields].join("; ");
}

// The messages of a live stream, as the document types them: a union
// discriminated by the SSE event name.
export type FeedMessage =
  paths["/api/agents/sessions/{id}/stream"]["get"]["responses"][200]["content"]["text/event-stream"][number];
export type DomainEvent = Extract<FeedMessage, { event: "event" }>["data"];

// follow reads a live stream until stop is called, resuming after a dropped
// connection from the last id it saw, so nothing is missed or repeated.
// fetch rather than EventSource, which cannot send the Authorization header.
export function follow(path: string, onMessage: (m: FeedMessage) => void, fromStart: boolean): () => void {
  const ctl = new AbortController();
  let lastId = fromStart ? "0" : "";
  (async () => {
    while (!ctl.signal.aborted) {
      try {
        const headers: Record<string, string> = { Authorization: `Bearer ${token()}`, Accept: "text/event-stream" };
        if (lastId !== "") headers["Last-Event-ID"] = lastId;
        const resp = await fetch(path, { headers, signal: ctl.signal });
        if (!resp.ok || !resp.body) throw new Error(`stream: ${resp.status}`);
        const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let end: number;
          while ((end = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, end);
            buf = buf.slice(end + 2);
            const m = parseBlock(block);
            if (!m) continue;
            if (m.id !== undefined) lastId = String(m.id);
            if (m.event === "reconnect" && m.data.lastEventId) lastId = m.data.lastEventId;
            onMessage(m);
          }
        }
      } catch (e) {
        if (ctl.signal.aborted) return;
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  })();
  return () => ctl.abort();
}

function parseBlock(block: string): FeedMessage | null {
  let event = "message";
  let id: string | undefined;
  const data: string[] = [];
  for (const line of block.split("\n")) {
    if (line.startsWith("event:")) event = line.slice(6).trim();
    else if (line.startsWith("id:")) id = line.slice(3).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
  }
  if (data.length === 0) return null;
  // The server sends only the events of the document: the parsed value is
  // one of FeedMessage's members, named by event.
  return { event, id: id === undefined ? undefined : Number(id), data: JSON.parse(data.join("\n")) } as FeedMessage;
}
