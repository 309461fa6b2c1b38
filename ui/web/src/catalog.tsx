// Templates and skills: read each, and edit the fields a person writes.
import { useEffect, useState } from "preact/hooks";
import { api, problem, type Schemas } from "./api";

type Kind = "templates" | "skills";
type Row = { id: string; name: string; description?: string; isActive: boolean };

export function Catalog({ kind, id }: { kind: Kind; id?: string }) {
  const [rows, setRows] = useState<Row[]>([]);
  const [error, setError] = useState("");
  useEffect(() => {
    const load = kind === "templates"
      ? api.GET("/api/agents/templates", { params: { query: { pageSize: 100 } } })
      : api.GET("/api/agents/skills", { params: { query: { pageSize: 100 } } });
    load.then(({ data, error }) => {
      if (error) setError(problem(error));
      else if (data) setRows(data.items);
    });
  }, [kind]);
  return (
    <section class="columns">
      <div>
        <h1>{kind === "templates" ? "Templates" : "Skills"}</h1>
        {error && <p class="error">{error}</p>}
        <ul>
          {rows.map((r) => (
            <li>
              <a href={`#/${kind}/${r.id}`}>{r.name}</a> {r.isActive ? "" : <span class="muted">(inactive)</span>}
            </li>
          ))}
        </ul>
        {rows.length === 0 && !error && <p class="muted">None yet.</p>}
      </div>
      <div>{id && (kind === "templates" ? <TemplateEditor key={id} id={id} /> : <SkillEditor key={id} id={id} />)}</div>
    </section>
  );
}

function TemplateEditor({ id }: { id: string }) {
  const [t, setT] = useState<Schemas["TemplateDetail"] | null>(null);
  const [draft, setDraft] = useState({ name: "", description: "", modelId: "", systemPrompt: "", defaultBudgetCapUsd: 0 });
  const [note, setNote] = useState("");
  useEffect(() => {
    api.GET("/api/agents/templates/{id}", { params: { path: { id } } }).then(({ data, error }) => {
      if (error) return setNote(problem(error));
      setT(data);
      setDraft({ name: data.name, description: data.description ?? "", modelId: data.modelId, systemPrompt: data.systemPrompt ?? "", defaultBudgetCapUsd: data.defaultBudgetCapUsd });
    });
  }, [id]);
  if (!t) return <p class="muted">{note || "Loading…"}</p>;
  const save = async (e: Event) => {
    e.preventDefault();
    const { error } = await api.PUT("/api/agents/templates/{id}", { params: { path: { id } }, body: draft });
    setNote(error ? problem(error) : "Saved.");
  };
  return (
    <form class="card editor" onSubmit={save}>
      <h3>{t.name} <small>v{t.version}</small></h3>
      <label>Name <input value={draft.name} onInput={(e) => setDraft({ ...draft, name: e.currentTarget.value })} /></label>
      <label>Description <input value={draft.description} onInput={(e) => setDraft({ ...draft, description: e.currentTarget.value })} /></label>
      <label>Model <input value={draft.modelId} onInput={(e) => setDraft({ ...draft, modelId: e.currentTarget.value })} /></label>
      <label>Budget cap $ <input type="number" step="0.5" value={draft.defaultBudgetCapUsd} onInput={(e) => setDraft({ ...draft, defaultBudgetCapUsd: Number(e.currentTarget.value) })} /></label>
      <label>System prompt <textarea rows={6} value={draft.systemPrompt} onInput={(e) => setDraft({ ...draft, systemPrompt: e.currentTarget.value })} /></label>
      <p class="muted">Tools: {t.allowedTools.join(", ") || "none"}</p>
      <button>Save</button> <span>{note}</span>
    </form>
  );
}

function SkillEditor({ id }: { id: string }) {
  const [s, setS] = useState<Schemas["SkillDetail"] | null>(null);
  const [draft, setDraft] = useState({ name: "", description: "", instructions: "" });
  const [note, setNote] = useState("");
  useEffect(() => {
    api.GET("/api/agents/skills/{id}", { params: { path: { id } } }).then(({ data, error }) => {
      if (error) return setNote(problem(error));
      setS(data);
      setDraft({ name: data.name, description: data.description, instructions: data.instructions });
    });
  }, [id]);
  if (!s) return <p class="muted">{note || "Loading…"}</p>;
  const save = async (e: Event) => {
    e.preventDefault();
    const { error } = await api.PUT("/api/agents/skills/{id}", { params: { path: { id } }, body: draft });
    setNote(error ? problem(error) : "Saved.");
  };
  return (
    <form class="card editor" onSubmit={save}>
      <h3>{s.name} <small>v{s.version}</small></h3>
      <label>Name <input value={draft.name} onInput={(e) => setDraft({ ...draft, name: e.currentTarget.value })} /></label>
      <label>Description <input value={draft.description} onInput={(e) => setDraft({ ...draft, description: e.currentTarget.value })} /></label>
      <label>Instructions <textarea rows={10} value={draft.instructions} onInput={(e) => setDraft({ ...draft, instructions: e.currentTarget.value })} /></label>
      <p class="muted">{s.memoryPills.length} memory pills</p>
      <button>Save</button> <span>{note}</span>
    </form>
  );
}
