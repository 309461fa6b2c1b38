import type { Status } from "./api";

// money shows enough digits to be true: cents from ten cents up, two
// significant digits below ($0.0024, not $0.00).
export function money(usd: number | undefined): string {
  const v = usd ?? 0;
  if (v === 0 || Math.abs(v) >= 0.1) return `$${v.toFixed(2)}`;
  return `$${Number(v.toPrecision(2)).toString()}`;
}

export function percent(p: number | undefined): string {
  return `${Math.round(p ?? 0)}%`;
}

// clock is a time of day as people read it, in their zone.
export function clock(at: string | number | undefined): string {
  if (at === undefined || at === "") return "";
  const d = new Date(at);
  return isNaN(d.getTime()) ? "" : d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });
}

// countdown is how long until a deadline, as m:ss.
export function countdown(deadline: string, now: number): string {
  const left = Math.max(0, Math.round((Date.parse(deadline) - now) / 1000));
  return `${Math.floor(left / 60)}:${String(left % 60).padStart(2, "0")}`;
}

// The transient states of the two-phase controls end in an ellipsis: the
// request is sent, the sidecar has not confirmed yet.
const transient: Partial<Record<Status, string>> = {
  Pausing: "Pausing…",
  Resuming: "Resuming…",
  Interrupting: "Interrupting…",
  Cancelling: "Cancelling…",
};

export function statusLabel(s: Status): string {
  return transient[s] ?? s.replace(/([a-z])([A-Z])/g, "$1 $2");
}

// ended are the statuses no command leaves: nothing is sent to them.
export const ended: Status[] = ["Completed", "Cancelled"];
