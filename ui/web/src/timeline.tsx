// A session's conversation as one timeline, built from its live feed: the
// user's messages with their priority and delivery, the agent's text, its
// tool calls with readable input and collapsible output, questions and
// answers, plans and decisions, permissions and who decided them — each
// with its time and its raw JSON one click away.
import { useEffect, useRef } from "preact/hooks";
import type { DomainEvent, FeedMessage } from "./api";
import { clock, money } from "./format";
import { ToolInput, inputHeadline } from "./toolinput";

export type Entry =
  | { kind: "text"; key: string; at: string; text: string; sub?: string; raw: unknown }
  | { kind: "tool"; key: string; at: string; name: string; input: Record<string, unknown>; result?: string; isError?: boolean; sub?: string; raw: unknown }
  | { kind: "user"; key: string; at: string; text: string; label: string; state?: string; raw: unknown }
  | { kind: "activity"; key: string; at: string; type: string; summary: string; sub?: string; raw: unknown }
  | { kind: "event"; key: string; at: string; text: string; raw: unknown };

// describeEvent is the line a domain event adds to the timeline, or null
// for those that only change the page's state.
function describeEvent(ev: DomainEvent): string | null {
  switch (ev.type) {
    case "agent_session_started":
      return "Session started";
    case "session_pause_requested":
      return "Pausing…";
    case "session_paused":
      return "Paused";
    case "session_resume_requested":
      return "Resuming…";
    case "session_resumed":
      return "Resumed";
    case "session_waiting_for_input":
      return `Question: ${ev.data.questionContent}`;
    case "message_promoted_to_immediate":
      return "Message promoted to Immediate";
    case "tool_permission_requested":
      return `Permission asked: ${ev.data.toolName} ${inputHeadline(safeParse(ev.data.input))}`;
    case "tool_permission_granted":
      return `Allowed ${ev.data.toolName} (by ${ev.data.decidedBy})`;
    case "tool_permission_denied":
      return `Denied ${ev.data.toolName} (by ${ev.data.decidedBy})`;
    case "tool_permission_timed_out":
      return "Permission timed out";
    case "session_plan_pending_approval":
      return "Plan submitted for approval";
    case "session_plan_approved":
      return ev.data.automatic ? "Plan approved automatically" : "Plan approved";
    case "agent_session_output_ready":
      return "Output ready for review";
    case "session_budget_warning":
      return `Budget warning: ${money(ev.data.spentUsd)} of ${money(ev.data.capUsd)}`;
    case "session_handoff_initiated":
      return `Handed off (chain ${ev.data.chainId.slice(0, 8)})`;
    case "session_added_to_chain":
      return `Continued by session ${ev.data.newSessionId.slice(0, 8)}`;
    case "agent_session_approved":
      return "Output approved";
    case "agent_session_rejected":
      return "Output rejected";
    case "agent_session_retried":
      return "Retried";
    case "agent_session_failed":
      return `Failed: ${ev.data.failureReason}`;
    case "session_auto_continued":
      return `Validation failed: continuing (${ev.data.continuationCount} of ${ev.data.maxContinuations})`;
    case "session_auto_continue_exhausted":
      return `Validation failed after ${ev.data.maxContinuations} continuations`;
    case "session_voluntary_handoff":
      return `Handing off: ${ev.data.reason}`;
    case "sub_agent_session_started":
      return `Subagent ${ev.data.subAgentId.slice(0, 8)} started`;
    case "sub_agent_session_completed":
      return `Subagent ${ev.data.subAgentId.slice(0, 8)} finished`;
    case "sub_agent_session_failed":
      return `Subagent ${ev.data.subAgentId.slice(0, 8)} failed: ${ev.data.failureReason}`;
    case "session_interrupted":
      return "Interrupted";
    case "session_cancelled":
      return "Cancelled";
    default:
      return null;
  }
}

function safeParse(s: string): Record<string, unknown> {
  try {
    return JSON.parse(s);
  } catch {
    return {};
  }
}

// apply adds what one feed message says to the timeline. Items are keyed
// by their own ids, so a message seen twice changes nothing.
export function apply(es: Entry[], m: FeedMessage): Entry[] {
  const key = String(m.id ?? "");
  switch (m.event) {
    case "assistant_text":
      return add(es, { kind: "text", key: `t${key}`, at: m.data.occurredAt, text: m.data.text, sub: m.data.subAgentId, raw: m.data });
    case "tool_call":
      return add(es, { kind: "tool", key: m.data.toolUseId, at: m.data.occurredAt, name: m.data.toolName, input: m.data.input, sub: m.data.subAgentId, raw: m.data });
    case "tool_result": {
      const { toolUseId, content, isError } = m.data;
      return es.map((e) => (e.kind === "tool" && e.key === toolUseId ? { ...e, result: content, isError } : e));
    }
    case "activity":
      if (["StatusChange", "MetricsUpdate", "UserAnswer", "UserQuestion", "ToolPermission"].includes(m.data.type)) return es;
      return add(es, { kind: "activity", key: `a${key}`, at: m.data.occurredAt, type: m.data.type, summary: m.data.summary, sub: m.data.subAgentId, raw: m.data });
    case "event": {
      const ev = m.data;
      switch (ev.type) {
        case "message_enqueued":
          return add(es, { kind: "user", key: ev.data.messageId, at: ev.occurredAt, text: ev.data.content,
            label: ev.data.source === "User" ? ev.data.priority : `${ev.data.priority} · ${ev.data.source}`, state: "Pending", raw: ev });
        case "message_promoted_to_immediate":
          return setUser(add(es, eventEntry(key, ev)), ev.data.messageId, { label: "Immediate" });
        case "message_delivered":
          return setUser(es, ev.data.messageId, { state: "Delivered" });
        case "message_cancelled":
          return setUser(es, ev.data.messageId, { state: "Cancelled" });
        case "session_input_received":
          return add(es, { kind: "user", key: `u${key}`, at: ev.occurredAt, text: ev.data.answer, label: ev.data.byTimeout ? "Answer (by timeout)" : "Answer", raw: ev });
        case "session_plan_rejected":
          return add(es, { kind: "user", key: `u${key}`, at: ev.occurredAt, text: ev.data.feedback, label: "Plan rejected", raw: ev });
      }
      return describeEvent(ev) === null ? es : add(es, eventEntry(key, ev));
    }
  }
  return es;
}

function eventEntry(key: string, ev: DomainEvent): Entry {
  return { kind: "event", key: `e${key}`, at: ev.occurredAt, text: describeEvent(ev) ?? ev.type, raw: ev };
}

function add(es: Entry[], e: Entry): Entry[] {
  return es.some((x) => x.key === e.key && x.kind === e.kind) ? es : [...es, e];
}

function setUser(es: Entry[], messageId: string, change: { state?: string; label?: string }): Entry[] {
  return es.map((e) => (e.kind === "user" && e.key === messageId ? { ...e, ...change } : e));
}

function Raw({ value }: { value: unknown }) {
  return (
    <details class="raw">
      <summary title="The item's JSON">{"{ }"}</summary>
      <pre>{JSON.stringify(value, null, 2)}</pre>
    </details>
  );
}

export function Timeline({ entries, drafts }: { entries: Entry[]; drafts: Record<string, string> }) {
  const end = useRef<HTMLDivElement>(null);
  useEffect(() => end.current?.scrollIntoView({ block: "nearest" }), [entries.length, drafts]);
  return (
    <div class="activity" id="activity">
      {entries.map((e) => {
        const sub = "sub" in e && e.sub ? <span class="sub">subagent {e.sub.slice(0, 8)}</span> : null;
        const at = <time datetime={e.at}>{clock(e.at)}</time>;
        switch (e.kind) {
          case "text":
            return <div class={`item text${sub ? " nested" : ""}`} key={e.key}>{at}{sub}<span class="text">{e.text}</span><Raw value={e.raw} /></div>;
          case "user":
            return (
              <div class="item user" key={e.key} data-message={e.key} data-state={e.state ?? ""}>
                {at}
                <span class="who">You</span> <span class="prio">{e.label}</span>
                {e.state && <span class={`state st-${e.state}`}>{e.state}</span>}
                <span class="text">{e.text}</span>
                <Raw value={e.raw} />
              </div>
            );
          case "tool":
            return (
              <details class={`item tool${e.isError ? " failed" : ""}${sub ? " nested" : ""}`} key={e.key} open={e.result === undefined}>
                <summary>
                  {at}
                  {sub}
                  <b>{e.name}</b> <span class="headline">{inputHeadline(e.input)}</span>
                  {e.result === undefined ? " …" : e.isError ? " ✗" : " ✓"}
                </summary>
                <ToolInput input={e.input} />
                {e.result !== undefined && (
                  <details class="result">
                    <summary>output</summary>
                    <pre class="result">{e.result}</pre>
                  </details>
                )}
                <Raw value={e.raw} />
              </details>
            );
          case "activity":
            return <div class="item note" key={e.key}>{at}{sub}<i>{e.type}</i> <span class="text">{e.summary}</span><Raw value={e.raw} /></div>;
          case "event":
            return <div class="item event" key={e.key}>{at}<span class="text">{e.text}</span><Raw value={e.raw} /></div>;
        }
      })}
      {Object.entries(drafts).map(([k, text]) => (
        <div class="item text draft" key={`draft-${k}`}>{text}▍</div>
      ))}
      <div ref={end} />
    </div>
  );
}

// exportJSONL downloads every message of the session's feed, one JSON
// object a line.
export function exportJSONL(id: string, messages: FeedMessage[]) {
  const body = messages.map((m) => JSON.stringify(m)).join("\n") + "\n";
  const a = document.createElement("a");
  a.href = URL.createObjectURL(new Blob([body], { type: "application/x-ndjson" }));
  a.download = `session-${id}.jsonl`;
  a.click();
  URL.revokeObjectURL(a.href);
}
