import { UsageError } from '../errors.js';
import type { Rng } from './rng.js';

/**
 * Fault injection. A spec is a comma list of `endpoint:kind=rate`, e.g.
 * `submit:500=0.1,submit:500-after=0.05,status:429=0.1,*:drop=0.05,file:truncate=0.05,*:slow=0.1/3000`.
 *
 * Endpoints: submit, status, detail, balance, upload, file, chat, or `*` (all).
 * Kinds: 429 (with Retry-After), 500, 502, 503, drop (socket destroyed before
 * any response), slow (delay, then the normal answer; `=rate/ms` sets the delay),
 * truncate (file downloads only: correct Content-Length, then the connection
 * closes early), and for submit only 500-after, 502-after, drop-after (the task
 * IS created and charged, then the error or drop: an ambiguous submit).
 * Rules are drawn in order per request from a seeded Rng; the first hit applies.
 * Scripted steps (`script()`) take precedence over random draws.
 */

export const FAULT_ENDPOINTS = ['submit', 'status', 'detail', 'balance', 'upload', 'file', 'chat'] as const;
export type FaultEndpoint = (typeof FAULT_ENDPOINTS)[number];
export const FAULT_KINDS = ['429', '500', '502', '503', 'drop', 'slow', 'truncate', '500-after', '502-after', 'drop-after'] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];
export type ScriptStep = FaultKind | 'ok';

export interface FaultRule {
  endpoint: FaultEndpoint | '*';
  kind: FaultKind;
  /** Probability per request, 0..1. */
  rate: number;
  /** For `slow`: the delay in ms (default: the sandbox's slowMs). */
  delayMs?: number;
}

/** A fault chosen for one request. */
export interface Fault {
  kind: FaultKind;
  delayMs?: number;
}

const AFTER_KINDS: ReadonlySet<FaultKind> = new Set(['500-after', '502-after', 'drop-after']);

/** Whether a kind can happen on an endpoint. */
export function applies(kind: FaultKind, endpoint: FaultEndpoint): boolean {
  if (kind === 'truncate') return endpoint === 'file';
  if (AFTER_KINDS.has(kind)) return endpoint === 'submit' || endpoint === 'chat'; // chat: charged, then an error mid-stream (src/sandbox/chat.ts)
  return true;
}

export function isAfterKind(kind: FaultKind): boolean {
  return AFTER_KINDS.has(kind);
}

export function parseFaults(spec: string): FaultRule[] {
  const rules: FaultRule[] = [];
  for (const item of spec.split(',').map((s) => s.trim()).filter(Boolean)) {
    const m = /^([a-z*]+):([a-z0-9-]+)=([0-9.]+)(?:\/([0-9]+))?$/.exec(item);
    if (!m) throw new UsageError(`--faults: "${item}" is not endpoint:kind=rate (e.g. submit:500=0.1)`);
    const [, endpoint = '', kind = '', rateText = '', delay] = m;
    if (endpoint !== '*' && !(FAULT_ENDPOINTS as readonly string[]).includes(endpoint)) {
      throw new UsageError(`--faults: endpoint "${endpoint}" in "${item}" is not one of ${FAULT_ENDPOINTS.join(', ')}, *`);
    }
    if (!(FAULT_KINDS as readonly string[]).includes(kind)) {
      throw new UsageError(`--faults: kind "${kind}" in "${item}" is not one of ${FAULT_KINDS.join(', ')}`);
    }
    const rate = Number(rateText);
    if (!Number.isFinite(rate) || rate < 0 || rate > 1) throw new UsageError(`--faults: rate in "${item}" must be from 0 to 1`);
    if (delay !== undefined && kind !== 'slow') throw new UsageError(`--faults: "/ms" is only for slow, in "${item}"`);
    if (endpoint !== '*' && !applies(kind as FaultKind, endpoint as FaultEndpoint)) {
      throw new UsageError(`--faults: kind ${kind} cannot happen on ${endpoint} (truncate is for file, *-after for submit and chat)`);
    }
    const rule: FaultRule = { endpoint: endpoint as FaultEndpoint | '*', kind: kind as FaultKind, rate };
    if (delay !== undefined) rule.delayMs = Number(delay);
    rules.push(rule);
  }
  return rules;
}

export class Faults {
  private readonly rules: FaultRule[];
  private readonly rng: Rng;
  private readonly scripts = new Map<string, ScriptStep[]>();
  /** Faults injected, keyed `endpoint:kind`. */
  readonly injected: Record<string, number> = {};

  constructor(rules: FaultRule[], rng: Rng) {
    this.rules = rules;
    this.rng = rng;
  }

  /** Queue scripted outcomes for the next requests to `endpoint` (`*`: any endpoint without its own script). */
  script(endpoint: FaultEndpoint | '*', steps: ScriptStep[]): void {
    for (const s of steps) {
      if (s !== 'ok' && !(FAULT_KINDS as readonly string[]).includes(s)) throw new UsageError(`script: "${String(s)}" is not ok or a fault kind`);
      // The same rule as --faults: a kind that cannot happen on the endpoint is refused (a `*` step waits for one where it can).
      if (s !== 'ok' && endpoint !== '*' && !applies(s, endpoint)) {
        throw new UsageError(`script: kind ${s} cannot happen on ${endpoint} (truncate is for file, *-after for submit and chat)`);
      }
    }
    const q = this.scripts.get(endpoint) ?? [];
    for (const step of steps) q.push(step);
    this.scripts.set(endpoint, q);
  }

  /** The fault for one request to `endpoint`, or null. */
  draw(endpoint: FaultEndpoint): Fault | null {
    const scripted = this.next(endpoint) ?? this.next('*', endpoint);
    if (scripted !== undefined) return scripted === 'ok' ? null : this.count(endpoint, { kind: scripted });
    for (const rule of this.rules) {
      if (rule.endpoint !== '*' && rule.endpoint !== endpoint) continue;
      if (!applies(rule.kind, endpoint)) continue;
      if (this.rng.next() < rule.rate) {
        const f: Fault = { kind: rule.kind };
        if (rule.delayMs !== undefined) f.delayMs = rule.delayMs;
        return this.count(endpoint, f);
      }
    }
    return null;
  }

  private next(key: FaultEndpoint | '*', endpoint?: FaultEndpoint): ScriptStep | undefined {
    const q = this.scripts.get(key);
    if (!q || q.length === 0) return undefined;
    // A `*` script step that cannot happen on this endpoint waits for one where it can.
    if (endpoint && q[0] !== 'ok' && !applies(q[0] as FaultKind, endpoint)) return undefined;
    return q.shift();
  }

  private count(endpoint: FaultEndpoint, f: Fault): Fault {
    const k = `${endpoint}:${f.kind}`;
    this.injected[k] = (this.injected[k] ?? 0) + 1;
    return f;
  }
}
