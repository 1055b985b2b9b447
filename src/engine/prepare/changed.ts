import { ChangedGuardError, type ChangedFacts } from '../../errors.js';
import type { Store } from '../../store/index.js';

/**
 * The guard on mass re-sends (issue #26 item 5). A manifest edit that changes the spec of more than `max`
 * finished (done) jobs stops the run before anything is recorded or sent (ChangedGuardError, exit 4), naming
 * how many, three examples of the change and their estimated cost.
 *
 *   ask   (default) up to `max` changed done jobs are sent again as before; more: the run stops, unless --yes
 *   send  `--redo changed`: every changed done job is sent again, also those kept earlier
 *   keep  `--keep-changed`: they keep their results and their old spec, recorded as changed-not-sent (meta key
 *         CHANGED_KEY: id -> the manifest's spec hash); later runs keep them while the manifest says the same
 *         (a further edit counts again); `--redo changed` sends them
 */
export interface ChangedGuard {
  mode: 'ask' | 'send' | 'keep';
  /** More changed done jobs than this need a decision. */
  max: number;
  /** --yes: go on without asking. */
  yes: boolean;
}

export const DEFAULT_MAX_CHANGED = 10;

/** Meta key (per run) of the jobs kept by --keep-changed: JSON { id: spec hash the manifest gives }. */
export const changedKey = (runId: number): string => `changed_not_sent:${runId}`;

/** The jobs of the run kept by --keep-changed (id -> the manifest's spec hash they were kept under). */
export function keptChanged(store: Store): Record<string, string> {
  const raw = store.getMeta(changedKey(store.currentRunId));
  if (raw === null) return {};
  try {
    const v = JSON.parse(raw) as unknown;
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return {};
    return Object.fromEntries(Object.entries(v).filter((e): e is [string, string] => typeof e[1] === 'string'));
  } catch {
    return {};
  }
}

/** One changed done job: its id, old and new spec (JSON) and the new estimate. */
export interface ChangedJob {
  id: string;
  oldSpec: string;
  newSpec: string;
  credits: number | null;
}

/** How many changed done jobs, their estimate, and a refusal naming three examples. */
export function changedRefusal(jobs: readonly ChangedJob[], max: number): ChangedGuardError {
  const facts = changedFacts(jobs, max);
  const lines = facts.examples.map((e) => `  ${e.id}: ${e.diff}`);
  if (jobs.length > 3) lines.push(`  and ${jobs.length - 3} more`);
  return new ChangedGuardError(
    `the manifest change would send ${jobs.length} finished (done) jobs again, ${changedCost(facts)}; more than --max-changed ${max}:\n${lines.join('\n')}\n` +
      'nothing was sent. To send them: the same command with --redo changed (or --yes); to keep their results: --keep-changed',
    facts,
  );
}

/** The numbers of a refusal: count, known estimate, how many of unknown price, three examples. */
export function changedFacts(jobs: readonly ChangedJob[], max: number): ChangedFacts {
  return {
    count: jobs.length,
    credits: +jobs.reduce((s, j) => s + (j.credits ?? 0), 0).toFixed(6),
    unknown: jobs.filter((j) => j.credits === null).length,
    examples: jobs.slice(0, 3).map((j) => ({ id: j.id, diff: firstDiff(j.oldSpec, j.newSpec) })),
    max,
  };
}

/** `estimated 108 credits (+2 of unknown price)`. */
export function changedCost(f: ChangedFacts): string {
  return `estimated ${f.credits} credits${f.unknown > 0 ? ` (+${f.unknown} of unknown price)` : ''}`;
}

/** The first place two stored specs differ: `input.prompt: "old" -> "new"` (values cut to about 40 characters around their first difference). */
export function firstDiff(oldJson: string, newJson: string): string {
  const d = diffAt(parse(oldJson), parse(newJson), '');
  return d ?? 'the spec changed';
}

function diffAt(a: unknown, b: unknown, path: string): string | null {
  if (isObject(a) && isObject(b)) {
    for (const k of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) {
      const d = diffAt(a[k], b[k], path === '' ? k : `${path}.${k}`);
      if (d) return d;
    }
    return null;
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      const d = diffAt(a[i], b[i], `${path}[${i}]`);
      if (d) return d;
    }
    return null;
  }
  if (JSON.stringify(a) === JSON.stringify(b)) return null;
  const [x, y] = around(a === undefined ? '(none)' : JSON.stringify(a), b === undefined ? '(none)' : JSON.stringify(b));
  return `${path || 'spec'}: ${x} -> ${y}`;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * Two values cut to about 40 characters each around where they first differ (a prompt edited at its end shows
 * its end): `…of product 1, soft light"` -> `…of product 1, hard light"`.
 */
function around(a: string, b: string): [string, string] {
  let at = 0;
  while (at < a.length && at < b.length && a[at] === b[at]) at++;
  const from = Math.max(0, at - 20);
  const cut = (s: string): string => {
    const end = Math.min(s.length, from + 40);
    return `${from > 0 ? '…' : ''}${s.slice(from, end)}${end < s.length ? '…' : ''}`;
  };
  return [cut(a), cut(b)];
}

function parse(json: string): unknown {
  try {
    return JSON.parse(json) as unknown;
  } catch {
    return null;
  }
}
