import type { ChangedFacts } from '../../errors.js';

/**
 * What the next `genbatch run` of a manifest would do with the state it already has (`estimate` with a state,
 * issue #26): which done jobs it keeps, how many done jobs a manifest edit would send again (and whether the
 * guard on mass re-sends stops it), and what this invocation sends under the caps and the balance.
 *
 * Worked out on a copy of the state file (SQLite's VACUUM INTO, which reads the file and leaves it as it is)
 * by the run's own sync (prepare) and choice of jobs (selectPending): the same code, so the same numbers.
 */
export interface StatePlan {
  state: string;
  /** Done jobs kept, not sent: those whose spec the manifest still gives (and, when the guard stops the run, the changed ones). */
  done: number;
  /** Done jobs whose spec changed, and the guard's verdict on them; null when none changed. */
  changed: (ChangedFacts & { stops: boolean }) | null;
  /** Jobs pending after the sync (what a run without caps sends): count, known credits, how many of unknown price. */
  pending: { jobs: number; credits: number; unknown: number };
  /** What this invocation sends under the caps and the balance (when the guard stops the run: what it sends with --keep-changed); `held`: reason -> count. */
  sends: { jobs: number; credits: number; held: Record<string, number>; held_by: { balance: number; cap: number } };
  /** Jobs in flight, uncertain or failed: not sent by a plain run (failed: --redo failed). */
  other: Record<string, number>;
}
