import { findRefs, hasRef, outputsOf, parseRef, pathText, refText, stripBraces, substitute, valueAt, type Ref } from '../../graph/index.js';
import { checkSubmit, findModel } from '../../models/index.js';
import type { ChildInput, JobRow, WorkStore } from '../../store/index.js';
import { canonicalJson, sha256Hex } from '../results.js';
import type { StoredSpec } from '../spec.js';

/**
 * The job graph at run time: references resolved from the parents' stored
 * results just before a submit (and the input checked again in full), and
 * for_each jobs turned into their children once their list is known.
 */

class RefError extends Error {}

/**
 * The outputs of finished parent jobs: read from the store by load() (cached per run: a done
 * job's result does not change), then looked up by get() and value().
 */
export class ParentOutputs {
  private readonly cache = new Map<string, Record<string, unknown>>();
  /** Jobs read by the last load() that were not done: id -> state (null: no such job). */
  private readonly notDone = new Map<string, string | null>();
  constructor(private readonly store: WorkStore) {}

  /** Read these jobs (those not cached yet) from the store, for get() and value(). */
  async load(ids: Iterable<string>): Promise<void> {
    for (const id of ids) {
      if (this.cache.has(id)) continue;
      const row = await this.store.getJob(id);
      if (row?.state === 'done') {
        this.cache.set(id, outputsOf(row.model, row.kind, row.result));
        this.notDone.delete(id);
      } else this.notDone.set(id, row ? row.state : null);
    }
  }

  /** The outputs of a job read by load(); throws RefError when it is not done. */
  get(id: string): Record<string, unknown> {
    const hit = this.cache.get(id);
    if (hit) return hit;
    const state = this.notDone.get(id) ?? null;
    if (state === null) throw new RefError(`job ${id} is not in the state file`);
    throw new RefError(`job ${id} is ${state}, not done`);
  }

  /** The value of a `jobs.*` reference; throws RefError when the result has none. */
  value(ref: Extract<Ref, { scope: 'jobs' }>): unknown {
    const outputs = this.get(ref.job);
    let v: unknown;
    try {
      v = valueAt(outputs, ref.path);
    } catch (err) {
      throw new RefError(`\${{ ${refText(ref)} }}: ${err instanceof Error ? err.message : String(err)}`);
    }
    if (v === undefined || v === null) throw new RefError(`\${{ ${refText(ref)} }} has no value in the result of ${ref.job}${listHint(outputs, ref)}`);
    return v;
  }
}

function listHint(outputs: Record<string, unknown>, ref: Extract<Ref, { scope: 'jobs' }>): string {
  const i = ref.path.findIndex((s) => typeof s === 'number');
  if (i < 0) return '';
  const list = valueAt(outputs, ref.path.slice(0, i));
  return Array.isArray(list) ? ` (jobs.${ref.job}${pathText(ref.path.slice(0, i))} has ${list.length} item(s))` : '';
}

/**
 * The input to send for a job whose spec holds references: every reference
 * replaced by its value, then the model's checks run on the result. Returns
 * the checked input, or the reason the job cannot be sent (it then fails).
 */
export async function resolveInput(parents: ParentOutputs, row: Pick<JobRow, 'id' | 'kind'>, spec: StoredSpec): Promise<{ input: Record<string, unknown> } | { error: string }> {
  if (!hasRef(spec.input)) return { input: spec.input };
  await parents.load(findRefs(spec.input, '').flatMap((f) => (f.ref?.scope === 'jobs' ? [f.ref.job] : [])));
  let input: Record<string, unknown>;
  try {
    input = substitute(spec.input, (ref) => {
      if (ref.scope !== 'jobs') throw new RefError(`\${{ ${refText(ref)} }} was not filled when the for_each job made this job`);
      return parents.value(ref);
    }) as Record<string, unknown>;
  } catch (err) {
    if (err instanceof RefError) return { error: `reference: ${err.message}` };
    return { error: `reference: ${err instanceof Error ? err.message : String(err)}` };
  }
  if (row.kind === 'chat' || !findModel(spec.model)) return { input };
  const check = checkSubmit({ model: spec.model, input });
  if (!check.input) return { error: `input after filling references does not fit ${spec.model}: ${check.issues.map((i) => `${i.path}: ${i.message}`).join('; ')}` };
  return { input: check.input };
}

/**
 * Make the children of a for_each job (its row is ready: every parent done).
 * Children are `<id>.<index>` (index 0-based), with `${{ item }}`,
 * `${{ item.<path> }}` and `${{ index }}` filled; `${{ jobs.* }}` references stay
 * for the submit. Returns the new children's ids, or an error (the job fails).
 */
/** The tightest credit limit of the run (--max-credits or the manifest budget). */
export interface CreditLimit {
  credits: number;
  /** How the limit is named in messages: "--max-credits 10", "the manifest budget of 10". */
  name: string;
  /** Known credits of the pending jobs this run leaves for a later one (--only, --limit): not counted against the limit. */
  leftOut?: number;
}

export async function expandForEach(
  store: WorkStore,
  parents: ParentOutputs,
  row: JobRow,
  limit: CreditLimit | null = null,
): Promise<{ made: string[] | null; count: number } | { error: string } | { held: string }> {
  const spec = JSON.parse(row.spec) as StoredSpec;
  const fe = spec.forEach;
  if (!fe) return { error: 'for_each job without its list (state file from another version?)' };
  const inherited = await store.parentsOf(row.id);
  const parsed = parseRef(stripBraces(fe.expr), new Set(inherited));
  if (!('ref' in parsed) || parsed.ref.scope !== 'jobs') return { error: `for_each ${fe.expr}: not a job reference` };
  await parents.load([parsed.ref.job]);
  let list: unknown;
  try {
    list = valueAt(parents.get(parsed.ref.job), parsed.ref.path);
  } catch (err) {
    return { error: `for_each ${fe.expr}: ${err instanceof Error ? err.message : String(err)}` };
  }
  if (!Array.isArray(list)) return { error: `for_each ${fe.expr}: the result holds no list there` };
  const children: ChildInput[] = list.map((item: unknown, index) => {
    const input = substitute(spec.input, (ref) => (ref.scope === 'index' ? index : ref.scope === 'item' ? (ref.path.length === 0 ? item : valueAt(item, ref.path)) : undefined)) as Record<string, unknown>;
    // Local images of the for_each job are uploaded for each child (once per content: uploads are reused).
    const childSpec: StoredSpec = { model: spec.model, input, refs: spec.refs };
    if (spec.callback_url !== undefined) childSpec.callback_url = spec.callback_url;
    if (spec.protocol !== undefined) childSpec.protocol = spec.protocol;
    const json = canonicalJson(childSpec);
    return {
      id: `${row.id}.${index}`,
      model: spec.model,
      kind: fe.childKind,
      where: `${row.where}, item ${index}`,
      specHash: sha256Hex(json),
      spec: json,
      estimatedCredits: fe.childCredits,
      parents: inherited,
    };
  });
  // Children counted only now (e.g. lines of a chat answer) are checked against the limit before they exist:
  // over it, none is made and the for_each job stays pending (the run ends with the cap's code, exit 5).
  if (limit && fe.childCredits !== null && children.length > 0) {
    const added = children.length * fe.childCredits;
    const total = round6((await store.estimate()).known - (limit.leftOut ?? 0) - (row.estimated_credits ?? 0) + added);
    if (total > limit.credits + 1e-9) {
      return {
        held: `${row.id}: its ${children.length} job(s) from ${fe.expr} (${round6(added)} credits) would bring the known estimate to ${round6(total)} credits, over ${limit.name}; they were not made or sent (${row.id} stays pending: raise the limit and run again)`,
      };
    }
  }
  // made: null when this worker lost the job's lease (nothing was made).
  const made = await store.expand(row.id, children, `${children.length} job(s) from ${fe.expr}`);
  return { made, count: children.length };
}

function round6(n: number): number {
  return Math.round(n * 1e6) / 1e6;
}
