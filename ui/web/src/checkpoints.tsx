// A session's checkpoint rail: the state at the end of each turn, with
// fork here and rewind here, and the diff between two checkpoints.
import { useEffect, useState } from "preact/hooks";
import { api, problem, type Schemas, type Session } from "./api";
import { clock } from "./format";

type Checkpoint = Schemas["Checkpoint"];
type Diff = Schemas["CheckpointDiff"];

const rewindable: Session["status"][] = ["Idle", "Paused", "Interrupted"];

// bytes says a size for a reader: 512 B, 4.0 KiB.
function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB"];
  let v = n / 1024, i = 0;
  while (v >= 1024 && i < units.length - 1) (v /= 1024), i++;
  return `${v.toFixed(1)} ${units[i]}`;
}

export function Checkpoints({ session, changes, onDone }: { session: Session; changes: number; onDone: () => void }) {
  const [list, setList] = useState<Schemas["CheckpointList"] | null>(null);
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const [from, setFrom] = useState("");
  const [to, setTo] = useState("");
  const [diff, setDiff] = useState<Diff | null>(null);
  const id = session.id;
  // Read again on every change the page sees, and every few seconds: a
  // turn's end or a rewind's restored state reaches the list shortly after
  // the event that announces it.
  useEffect(() => {
    let stale = false;
    const read = () =>
      api.GET("/api/agents/sessions/{id}/checkpoints", { params: { path: { id } } }).then(({ data }) => {
        if (!stale && data) setList(data);
      });
    read();
    const timer = setInterval(read, 3000);
    return () => {
      stale = true;
      clearInterval(timer);
    };
  }, [id, changes, session.status]);
  if (!list || list.items.length === 0) return null;
  const act = async (call: () => Promise<{ data?: unknown; error?: unknown }>, then?: (data: unknown) => void) => {
    setBusy(true);
    setError("");
    const { data, error } = await call();
    setBusy(false);
    if (error) return setError(problem(error));
    then?.(data);
    onDone();
  };
  const fork = (turn: number) =>
    act(() => api.POST("/api/agents/sessions/{id}/fork", { params: { path: { id } }, body: { checkpoint: turn } }), (data) => {
      location.hash = `#/sessions/${(data as Schemas["StartSessionResponse"]).session.id}`;
    });
  const rewind = (turn: number) =>
    act(() => api.POST("/api/agents/sessions/{id}/rewind", { params: { path: { id } }, body: { checkpoint: turn } }));
  const compare = () =>
    act(
      () => api.GET("/api/agents/sessions/{id}/checkpoints/diff", { params: { path: { id }, query: { from: Number(from), to: Number(to) } } }),
      (data) => setDiff(data as Diff),
    );
  const turns = [...new Set(list.items.filter((c) => !c.pruned).map((c) => c.turn))];
  const canRewind = rewindable.includes(session.status);
  return (
    <div class="card" id="checkpoints">
      <h3>Checkpoints</h3>
      <p class="muted" id="checkpoints-storage">
        {list.kept} of {list.items.length} kept · store {bytes(list.storeBytes)}
      </p>
      <ol class="checkpoint-rail">
        {list.items.map((c: Checkpoint) => (
          <li key={c.cursor} class={c.pruned ? "pruned" : c.rewound ? "rewound" : ""} data-turn={c.turn}>
            <strong>Turn {c.turn}</strong> <time>{clock(c.recordedAt)}</time>
            {c.rewound && <span class="muted"> · rewound</span>}
            {c.pruned && <span class="muted"> · pruned</span>}
            <div class="muted">
              {c.filesChanged} files changed · {bytes(c.bytes)}
            </div>
            {c.lastMessage && <div class="text">{c.lastMessage}</div>}
            {!c.pruned && (
              <div>
                <button class="secondary fork-here" disabled={busy} onClick={() => fork(c.turn)}>Fork here</button>{" "}
                <button class="secondary rewind-here" disabled={busy || !canRewind} onClick={() => rewind(c.turn)}>Rewind here</button>
              </div>
            )}
          </li>
        ))}
      </ol>
      <div class="row">
        <select id="diff-from" value={from} onChange={(e) => setFrom((e.target as HTMLSelectElement).value)}>
          <option value="">from…</option>
          {turns.map((t) => <option value={String(t)}>turn {t}</option>)}
        </select>
        <select id="diff-to" value={to} onChange={(e) => setTo((e.target as HTMLSelectElement).value)}>
          <option value="">to…</option>
          {turns.map((t) => <option value={String(t)}>turn {t}</option>)}
        </select>
        <button id="diff-compare" disabled={busy || from === "" || to === ""} onClick={compare}>Compare</button>
      </div>
      {error && <p class="error" id="checkpoints-error">{error}</p>}
      {diff && (
        <div id="checkpoint-diff">
          {diff.files.length === 0 && <p class="muted">No files changed.</p>}
          {diff.files.map((f) => (
            <details open>
              <summary>
                {f.status} <code>{f.path}</code> <span class="muted">{bytes(f.oldBytes)} → {bytes(f.newBytes)}</span>
              </summary>
              {f.binary ? <p class="muted">binary</p> : f.omitted ? <p class="muted">{f.omitted}</p> : <pre>{f.patch}</pre>}
            </details>
          ))}
        </div>
      )}
    </div>
  );
}
