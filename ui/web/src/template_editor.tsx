// The template editor: what every session of a template starts with —
// model, prompt, tools, MCP tools, skills, budget, tool approval, plan
// approval and schedule, with the schedule's next run.
import { useEffect, useState } from "preact/hooks";
import { api, problem, type Schemas } from "./api";

type Template = Schemas["TemplateDetail"];
type Approval = Schemas["ToolApprovalRequest"];

type Draft = {
  name: string; description: string; modelId: string; systemPrompt: string; tools: string;
  budget: string; warnAt: string; planApproval: boolean;
  approvalMode: Approval["mode"]; approvalTools: string; approvalTimeout: string; onTimeout: NonNullable<Approval["onTimeout"]>;
  cron: string; timeZone: string; scheduleOn: boolean; skills: string[];
};

const blank: Draft = {
  name: "", description: "", modelId: "claude-sonnet-4-5", systemPrompt: "", tools: "Read, Edit, Bash",
  budget: "5", warnAt: "80", planApproval: false, approvalMode: "None", approvalTools: "", approvalTimeout: "120", onTimeout: "Deny",
  cron: "", timeZone: "UTC", scheduleOn: true, skills: [],
};

function draftOf(t: Template): Draft {
  return {
    name: t.name, description: t.description ?? "", modelId: t.modelId, systemPrompt: t.systemPrompt ?? "",
    tools: t.allowedTools.join(", "), budget: String(t.defaultBudgetCapUsd), warnAt: String(t.warnAtPercent),
    planApproval: t.planApprovalRequired, approvalMode: t.toolApproval.mode, approvalTools: (t.toolApproval.tools ?? []).join(", "),
    approvalTimeout: String(t.toolApproval.timeoutSeconds), onTimeout: t.toolApproval.onTimeout,
    cron: t.schedule?.cronExpression ?? "", timeZone: t.schedule?.timeZone ?? "UTC", scheduleOn: t.schedule?.isEnabled ?? true,
    skills: t.defaultSkillIds ?? [],
  };
}

function list(s: string): string[] {
  return s.split(",").map((x) => x.trim()).filter(Boolean);
}

function approvalOf(d: Draft): Approval {
  return { mode: d.approvalMode, tools: d.approvalMode === "List" ? list(d.approvalTools) : undefined,
    timeoutSeconds: Number(d.approvalTimeout) || undefined, onTimeout: d.onTimeout };
}

export function TemplateEditor({ id, onSaved }: { id?: string; onSaved: (id: string) => void }) {
  const [t, setT] = useState<Template | null>(null);
  const [d, setD] = useState<Draft>(blank);
  const [skills, setSkills] = useState<Schemas["SkillSummary"][]>([]);
  const [note, setNote] = useState("");
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    api.GET("/api/agents/skills", { params: { query: { isActive: "true", pageSize: 100 } } }).then(({ data }) => data && setSkills(data.items));
    if (!id) return;
    api.GET("/api/agents/templates/{id}", { params: { path: { id } } }).then(({ data, error }) => {
      if (error) return setNote(problem(error));
      setT(data);
      setD(draftOf(data));
    });
  }, [id]);
  if (id && !t) return <p class="muted">{note || "Loading…"}</p>;
  const set = (change: Partial<Draft>) => setD({ ...d, ...change });

  const save = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setNote("");
    const fields = {
      name: d.name, description: d.description, modelId: d.modelId, systemPrompt: d.systemPrompt, allowedTools: list(d.tools),
      defaultBudgetCapUsd: Number(d.budget), warnAtPercent: Number(d.warnAt), planApprovalRequired: d.planApproval,
      toolApproval: approvalOf(d),
      schedule: d.cron.trim() ? { cronExpression: d.cron.trim(), timeZone: d.timeZone, isEnabled: d.scheduleOn } : undefined,
    };
    let r;
    if (id) {
      r = await api.PUT("/api/agents/templates/{id}", { params: { path: { id } },
        body: { ...fields, removeSchedule: !d.cron.trim() && !!t?.schedule ? true : undefined } });
      // Skills are added and removed one by one.
      for (const s of d.skills.filter((s) => !(t?.defaultSkillIds ?? []).includes(s))) {
        if (!r.error) r = await api.POST("/api/agents/templates/{id}/skills/{skillId}", { params: { path: { id, skillId: s } } });
      }
      for (const s of (t?.defaultSkillIds ?? []).filter((s) => !d.skills.includes(s))) {
        if (!r.error) r = await api.DELETE("/api/agents/templates/{id}/skills/{skillId}", { params: { path: { id, skillId: s } } });
      }
    } else {
      r = await api.POST("/api/agents/templates", { body: { ...fields, defaultSkillIds: d.skills } });
    }
    setBusy(false);
    if (r.error) return setNote(problem(r.error));
    setT(r.data);
    setD(draftOf(r.data));
    setNote("Saved.");
    onSaved(r.data.id);
  };
  const toggle = async () => {
    if (!t) return;
    const path = { params: { path: { id: t.id } } };
    const r = t.isActive ? await api.POST("/api/agents/templates/{id}/deactivate", path) : await api.POST("/api/agents/templates/{id}/activate", path);
    if (r.error) return setNote(problem(r.error));
    setT(r.data);
    onSaved(r.data.id);
  };

  return (
    <form class="card editor" id="template-editor" onSubmit={save}>
      <h3>{t ? <>{t.name} <small>v{t.version}{t.isActive ? "" : " · inactive"}</small></> : "New template"}</h3>
      <label>Name <input id="template-name" required value={d.name} onInput={(e) => set({ name: e.currentTarget.value })} /></label>
      <label>Description <input id="template-description" value={d.description} onInput={(e) => set({ description: e.currentTarget.value })} /></label>
      <div class="row">
        <label>Model <input id="template-model" required value={d.modelId} onInput={(e) => set({ modelId: e.currentTarget.value })} /></label>
        <label>Budget cap $ <input id="template-budget" type="number" step="0.5" min="0" value={d.budget} onInput={(e) => set({ budget: e.currentTarget.value })} /></label>
        <label>Warn at % <input id="template-warn" type="number" min="1" max="100" value={d.warnAt} onInput={(e) => set({ warnAt: e.currentTarget.value })} /></label>
      </div>
      <label>System prompt <textarea id="template-prompt" rows={5} value={d.systemPrompt} onInput={(e) => set({ systemPrompt: e.currentTarget.value })} /></label>
      <label>Allowed tools (comma-separated) <input id="template-tools" value={d.tools} onInput={(e) => set({ tools: e.currentTarget.value })} /></label>
      {t && t.customToolDefinitions.length > 0 && (
        <p class="muted">MCP tools: {t.customToolDefinitions.map((c) => `${c.name} (${c.serverUri})`).join(", ")}</p>
      )}
      <fieldset>
        <legend>Skills</legend>
        {skills.length === 0 && <span class="muted">No active skills.</span>}
        {skills.map((s) => (
          <label class="inline">
            <input type="checkbox" checked={d.skills.includes(s.id)}
              onChange={(e) => set({ skills: e.currentTarget.checked ? [...d.skills, s.id] : d.skills.filter((x) => x !== s.id) })} /> {s.name}
          </label>
        ))}
      </fieldset>
      <fieldset>
        <legend>Tool approval</legend>
        <div class="row">
          <select id="template-approval" value={d.approvalMode} onChange={(e) => set({ approvalMode: e.currentTarget.value as Approval["mode"] })}>
            <option value="None">No tool waits</option>
            <option value="All">Every tool use waits for me</option>
            <option value="List">These tools wait for me:</option>
          </select>
          {d.approvalMode === "List" && <input id="template-approval-tools" placeholder="Bash, Write" value={d.approvalTools} onInput={(e) => set({ approvalTools: e.currentTarget.value })} />}
          {d.approvalMode !== "None" && (
            <>
              <label>for <input type="number" min="1" value={d.approvalTimeout} onInput={(e) => set({ approvalTimeout: e.currentTarget.value })} /> s, then</label>
              <select value={d.onTimeout} onChange={(e) => set({ onTimeout: e.currentTarget.value as Draft["onTimeout"] })}>
                <option>Deny</option>
                <option>Allow</option>
                <option>Fail</option>
              </select>
            </>
          )}
        </div>
        <label class="inline"><input type="checkbox" checked={d.planApproval} onChange={(e) => set({ planApproval: e.currentTarget.checked })} /> Plans wait for my approval</label>
      </fieldset>
      <fieldset>
        <legend>Schedule</legend>
        <div class="row">
          <input id="template-cron" placeholder="cron, e.g. 0 8 * * 1-5 (empty: on demand)" value={d.cron} onInput={(e) => set({ cron: e.currentTarget.value })} />
          <input id="template-tz" placeholder="Time zone" value={d.timeZone} onInput={(e) => set({ timeZone: e.currentTarget.value })} />
          <label class="inline"><input type="checkbox" checked={d.scheduleOn} onChange={(e) => set({ scheduleOn: e.currentTarget.checked })} /> on</label>
        </div>
        {t?.nextRunAt && <p class="muted" id="template-next-run">Next run: {new Date(t.nextRunAt).toLocaleString()}</p>}
      </fieldset>
      <div class="actions">
        <button id="save-template" disabled={busy || !d.name.trim() || !d.modelId.trim()}>{id ? "Save" : "Create"}</button>
        {t && <button type="button" class="secondary" id="toggle-template" onClick={toggle}>{t.isActive ? "Deactivate" : "Activate"}</button>}
        {t && t.isActive && <a class="button" href={`#/sessions?template=${t.id}`}>Start a session from it</a>}
        <span id="template-note">{note}</span>
      </div>
    </form>
  );
}
