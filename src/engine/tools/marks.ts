import { UsageError } from '../../errors.js';
import type { MarkState, Store } from '../../store/index.js';
import { globTest } from '../prepare/select.js';

export type MarkAction = 'approve' | 'reject' | 'clear';

/**
 * Review marks written to the state file: `genbatch mark` and the view's POST /api/marks both come here.
 * Every pattern (an id, or a glob as `run --only`) must name a job of the run; only done jobs are approved
 * or rejected (an exact id of a job in another state is a UsageError naming its state; a glob takes the done
 * jobs it matches and must match one). Nothing is written unless every pattern is good; then one row per job
 * in one transaction (clearing a job that has no mark adds nothing). Returns the ids chosen, in manifest order.
 */
export function markJobs(store: Store, patterns: readonly string[], action: MarkAction, note: string | null, flag = `--${action}`): { ids: string[]; changed: number; state: MarkState | null } {
  const ids = chosenJobs(store, patterns, action, flag);
  store.refuseLinkedPath();
  const state: MarkState | null = action === 'approve' ? 'approved' : action === 'reject' ? 'rejected' : null;
  const current = store.marks();
  let changed = 0;
  store.db.transaction(() => {
    for (const id of ids) {
      if (state === null && !current.has(id)) continue;
      store.addMark(id, state, note);
      changed++;
    }
  }).immediate();
  return { ids, changed, state };
}

/** The ids the patterns name, in manifest order; a usage error naming every pattern that names no job (or no done job). */
function chosenJobs(store: Store, patterns: readonly string[], action: MarkAction, flag: string): string[] {
  const tests = patterns.map(globTest);
  const glob = patterns.map((p) => /[*?]/.test(p));
  const matched = new Array<boolean>(patterns.length).fill(false);
  const known = new Array<boolean>(patterns.length).fill(false);
  const notDone: string[] = [];
  const ids: string[] = [];
  for (const row of store.summaryRows()) {
    let hit = false;
    for (let i = 0; i < tests.length; i++) {
      if (!tests[i]!(row.id)) continue;
      known[i] = true;
      if (action !== 'clear' && row.state !== 'done') {
        if (!glob[i]) notDone.push(`job ${row.id} is ${row.state}`);
        continue;
      }
      matched[i] = true;
      hit = true;
    }
    if (hit) ids.push(row.id);
  }
  const problems: string[] = [];
  const none = patterns.filter((_, i) => !known[i] && !glob[i]);
  if (none.length > 0) problems.push(`${none.map((p) => `"${p}"`).join(', ')} ${none.length === 1 ? 'is' : 'are'} not a job of the run`);
  const emptyGlobs = patterns.filter((p, i) => !matched[i] && glob[i]);
  if (emptyGlobs.length > 0) problems.push(`${emptyGlobs.map((p) => `"${p}"`).join(', ')} ${emptyGlobs.length === 1 ? 'matches' : 'match'} no ${action === 'clear' ? '' : 'done '}job of the run`);
  if (notDone.length > 0) {
    problems.push(`${notDone.join(', ')}: only done jobs can be marked (a failed or expired job is sent again with run --redo failed,expired)`);
  }
  if (problems.length > 0) throw new UsageError(`${flag}: ${problems.join('; ')}`);
  return ids;
}
