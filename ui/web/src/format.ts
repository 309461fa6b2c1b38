import type { Status } from "./api";

export function money(usd: number | undefined): string {
  return `$${(usd ?? 0).toFixed(2)}`;
}

export function percent(p: number | undefined): string {
  return `${Math.round(p ?? 0)}%`;
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
