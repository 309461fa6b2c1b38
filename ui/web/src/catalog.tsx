// Templates and skills: list, create, edit, activate and deactivate them.
import { useEffect, useState } from "preact/hooks";
import { api, problem, type Schemas } from "./api";
import { money } from "./format";
import { TemplateEditor } from "./template_editor";

type Kind = "templates" | "skills";
type Row = { id: string; name: string; description?: string; isActive: boolean };

export function Catalog({ kind, id }: { kind: Kind; id?: string }) {
  const [rows, setRows] = useState<(Row & Partial<Schemas["TemplateSummary"]>)[]>([]);
  const [error, setError] = useState("");
  const [changes, setChanges] = useState(0);
  useEffect(() => {
    const load = kind === "templates"
      ? api.GET("/api/agents/templates", { params: { query: { pageSize: 100 } } })
      : api.GET("/api/agents/skills", { params: { query: { pageSize: 100 } } });
    load.then(({ data, error }) => {
      if (error) setError(problem(error));
      else if (data) setRows(data.items);
    });
  }, [kind, changes]);
  const saved = (newId: string) => {
    setChanges((n) => n + 1);
    if (newId !== id) location.hash = `#/${kind}/${newId}`;
  };
  const noun = kind === "templates" ? "template" : "skill";
  return (
    <section class="columns catalog">
      <div>
        <header class="row">
          <h1>{kind === "templates" ? "Templates" : "Skills"}</h1>
          <a class="button" id={`new-${noun}`} href={`#/${kind}/new`}>New {noun}</a>
        </header>
        {error && <p class="error">{error}</p>}
        <ul id={`${kind}-list`}>
          {rows.map((r) => (
            <li data-id={r.id}>
              <a href={`#/${kind}/${r.id}`}>{r.name}</a> {!r.isActive && <span class="muted">(inactive)</span>}
              {r.defaultBudgetCapUsd !== undefined && <span class="muted"> · {r.modelId} · {money(r.defaultBudgetCapUsd)}{r.scheduled ? " · scheduled" : ""}</span>}
            </li>
          ))}
        </ul>
        {rows.length === 0 && !error && <p class="muted">None yet: create one with “New {noun}”.</p>}
      </div>
      <div>
        {id && (kind === "templates"
          ? <TemplateEditor key={id} id={id === "new" ? undefined : id} onSaved={saved} />
          : <SkillEditor key={id} id={id === "new" ? undefined : id} onSaved={saved} />)}
      </div>
    </section>
  );
}

function SkillEditor({ id, onSaved }: { id?: string; onSaved: (id: string) => void }) {
  const [s, setS] = useState<Schemas["SkillDetail"] | null>(null);
  const [draft, setDraft] = useState({ name: "", description: "", instructions: "" });
  const [note, setNote] = useState("");
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    if (!id) return;
    api.GET("/api/agents/skills/{id}", { params: { path: { id } } }).then(({ data, error }) => {
      if (error) return setNote(problem(error));
      setS(data);
      setDraft({ name: data.name, description: data.description, instructions: data.instructions });
    });
  }, [id]);
  if (id && !s) return <p class="muted">{note || "Loading…"}</p>;
  const save = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    const r = id
      ? await api.PUT("/api/agents/skills/{id}", { params: { path: { id } }, body: draft })
      : await api.POST("/api/agents/skills", { body: draft });
    setBusy(false);
    if (r.error) return setNote(problem(r.error));
    setS(r.data);
    setNote("Saved.");
    onSaved(r.data.id);
  };
  const toggle = async () => {
    if (!s) return;
    const path = { params: { path: { id: s.id } } };
    const r = s.isActive ? await api.POST("/api/agents/skills/{id}/deactivate", path) : await api.POST("/api/agents/skills/{id}/activate", path);
    if (r.error) return setNote(problem(r.error));
    setS(r.data);
    onSaved(r.data.id);
  };
  return (
    <form class="card editor" id="skill-editor" onSubmit={save}>
      <h3>{s ? <>{s.name} <small>v{s.version}{s.isActive ? "" : " · inactive"}</small></> : "New skill"}</h3>
      <label>Name <input id="skill-name" required value={draft.name} onInput={(e) => setDraft({ ...draft, name: e.currentTarget.value })} /></label>
      <label>Description <input id="skill-description" required value={draft.description} onInput={(e) => setDraft({ ...draft, description: e.currentTarget.value })} /></label>
      <label>Instructions <textarea id="skill-instructions" rows={10} value={draft.instructions} onInput={(e) => setDraft({ ...draft, instructions: e.currentTarget.value })} /></label>
      {s && <p class="muted">{s.memoryPills.length} memory pills</p>}
      <div class="actions">
        <button id="save-skill" disabled={busy || !draft.name.trim() || !draft.description.trim()}>{id ? "Save" : "Create"}</button>
        {s && <button type="button" class="secondary" onClick={toggle}>{s.isActive ? "Deactivate" : "Activate"}</button>}
        <span id="skill-note">{note}</span>
      </div>
    </form>
  );
}
