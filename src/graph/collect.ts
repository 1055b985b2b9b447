import type { Problem } from '../errors.js';
import { nearest } from '../lib/nearest.js';
import { describe, documentedCount, outputShape, shapeAt, type Shape } from './outputs.js';
import { findRefs, parseRef, refText, type Ref, type Step } from './refs.js';

/**
 * The job graph of a manifest, collected while its jobs stream by and checked
 * once every id is known: unknown job ids, cycles, references to fields a
 * model never returns, `for_each` over a non-list, item/index outside a
 * `for_each` job. Only jobs that take part in a graph keep a node; every job
 * keeps its id, model and kind (small).
 */

export interface ForEach {
  /** The job whose output is iterated. */
  parent: string;
  path: Step[];
  expr: string;
}

/** The links of one job, final after the whole manifest was read. */
export interface JobLinks {
  /** Jobs that must be done before this one runs (references and `needs`). */
  parents: string[];
  forEach: ForEach | null;
}

interface Known {
  model: string;
  kind: string;
  /** The documented item count of its list outputs (ModelSpec.outputCount), or null. */
  count: number | null;
  forEach: boolean;
}

interface Node {
  id: string;
  where: string;
  locate(path: string): string;
  input: Record<string, unknown>;
  needs: string[];
  forEach: string | null;
}

export interface GraphResult {
  problems: Problem[];
  /** Links of every job that has any; jobs without links are absent. */
  links: Map<string, JobLinks>;
}

/** List outputs whose length is the documented count (n images, music variations, covers, lyrics). */
const COUNTED_LISTS = new Set(['audio', 'lyrics', 'covers', 'files', 'items']);

export class GraphCollector {
  private readonly known = new Map<string, Known>();
  readonly ids = new Set<string>();
  private readonly nodes: Node[] = [];

  /** One shared record per (model, kind, count, for_each): a 100,000-job manifest keeps a handful. */
  private readonly shared = new Map<string, Known>();

  /** Record a built job (every job, valid or not); only its id, model, kind and documented count are kept. */
  add(job: { id: string; model: string; kind: string; input: Record<string, unknown> }, node: Omit<Node, 'id'> | null): void {
    this.ids.add(job.id);
    const info: Known = { model: job.model, kind: job.kind, count: documentedCount(job.model, job.kind, job.input, 'items'), forEach: node?.forEach != null };
    const key = `${info.model}\u0000${info.kind}\u0000${info.count}\u0000${info.forEach}`;
    let one = this.shared.get(key);
    if (!one) this.shared.set(key, (one = info));
    this.known.set(job.id, one);
    if (node) this.nodes.push({ id: job.id, ...node });
  }

  /** The model and kind of a job already read, or undefined. */
  info(id: string): { model: string; kind: string; forEach: boolean } | undefined {
    return this.known.get(id);
  }

  /** The shape a reference gives, when its job was read already; null when unknown yet. */
  shapeOf(ref: Ref, forEachItem: Shape | null): Shape | null {
    if (ref.scope === 'index') return { type: 'number' };
    if (ref.scope === 'item') {
      if (!forEachItem) return null;
      const s = shapeAt(forEachItem, ref.path);
      return 'shape' in s ? s.shape : null;
    }
    const k = this.known.get(ref.job);
    if (!k || k.forEach) return null;
    const root = outputShape(k.model, k.kind);
    if (!root) return null;
    const s = shapeAt(root, ref.path);
    return 'shape' in s ? s.shape : null;
  }

  /** How many children a `for_each` over `expr` makes, when the count is documented before the parent runs. */
  fanoutCount(expr: string): { count: number | null; basis: string } {
    const parsed = parseRef(stripBraces(expr), this.ids);
    if (!('ref' in parsed) || parsed.ref.scope !== 'jobs') return { count: null, basis: 'unknown count' };
    const ref = parsed.ref;
    const k = this.known.get(ref.job);
    const field = typeof ref.path[0] === 'string' ? ref.path[0] : '';
    if (!k) return { count: null, basis: `children unknown until ${ref.job} runs (it is listed later in the manifest)` };
    const n = ref.path.length === 1 && COUNTED_LISTS.has(field) ? k.count : null;
    if (n === null) return { count: null, basis: `children unknown until ${ref.job} runs (${k.kind === 'chat' ? `a chat answer has no documented number of ${field || 'items'}` : `${k.model} documents no count for ${field || 'this list'}`})` };
    return { count: n, basis: `${n} children: the documented count of ${ref.job}.${field} (${k.model})` };
  }

  finish(): GraphResult {
    const problems: Problem[] = [];
    const links = new Map<string, JobLinks>();
    const vias = new Map<string, Map<string, string>>();
    for (const n of this.nodes) {
      const add = (path: string, message: string) => problems.push({ job: n.id, where: n.locate(path), path, message });
      const parents = new Set<string>();
      /** The first field that links this job to each parent (where a cycle through that link is reported). */
      const via = new Map<string, string>();
      const link = (p: string, field: string) => {
        parents.add(p);
        if (!via.has(p)) via.set(p, field);
      };
      let forEach: ForEach | null = null;
      let itemShape: Shape | null = null;
      if (n.forEach !== null) {
        const parsed = parseRef(stripBraces(n.forEach), this.ids);
        if (!('ref' in parsed)) add('for_each', parsed.error);
        else if (parsed.ref.scope !== 'jobs') add('for_each', `must reference another job's list (\${{ jobs.<id>.<field> }}), not ${refText(parsed.ref)}`);
        else {
          const target = this.checkJobRef(n.id, parsed.ref, 'for_each', add);
          if (target) {
            link(parsed.ref.job, 'for_each');
            if (target.type !== 'list' && target.type !== 'any') add('for_each', `\${{ ${stripBraces(n.forEach)} }} is ${describe(target)}, not a list: for_each needs a list (e.g. audio, files, lines)`);
            else {
              itemShape = target.type === 'list' ? target.item : { type: 'any' };
              forEach = { parent: parsed.ref.job, path: parsed.ref.path, expr: stripBraces(n.forEach) };
            }
          }
        }
      }
      for (const r of findRefs(n.input, 'input', this.ids)) {
        if (!r.ref) {
          add(r.field, r.unclosed ? (r.error ?? 'an unclosed "${{"') : `reference \${{ ${r.expr} }}: ${r.error ?? 'cannot be read'}`);
          continue;
        }
        if (r.ref.scope !== 'jobs') {
          if (n.forEach === null) add(r.field, `\${{ ${r.expr} }} is only defined inside a for_each job`);
          else if (r.ref.scope === 'item' && itemShape) {
            const s = shapeAt(itemShape, r.ref.path);
            if ('error' in s) add(r.field, `\${{ ${r.expr} }}: the items of ${forEach ? `jobs.${forEach.parent}${pathOf(forEach.path)}` : 'for_each'}: ${s.error}`);
          }
          continue;
        }
        if (this.checkJobRef(n.id, r.ref, r.field, add, r.expr)) link(r.ref.job, r.field);
      }
      n.needs.forEach((p, i) => {
        if (p === n.id) add(`needs[${i}]`, `a job cannot need itself (cycle: ${n.id} -> ${n.id})`);
        else if (!this.known.has(p)) add(`needs[${i}]`, unknownJob(p, this.ids));
        else if (this.known.get(p)?.forEach) add(`needs[${i}]`, `${p} is a for_each job; waiting for all of its children is not supported (need its parent instead)`);
        else link(p, `needs[${i}]`);
      });
      parents.delete(n.id);
      links.set(n.id, { parents: [...parents], forEach });
      vias.set(n.id, via);
    }
    const byId = new Map(this.nodes.map((x) => [x.id, x]));
    for (const found of findCycles(links)) {
      // Reported at the reference that closes the cycle: the last job's link back to the first.
      const last = found[found.length - 1]!;
      const cycle = [last, ...found.slice(0, -1)];
      const field = vias.get(last)?.get(cycle[1] ?? last) ?? 'needs';
      const node = byId.get(last);
      problems.push({ job: last, where: node ? node.locate(field) : '', path: field, message: `jobs form a cycle: ${[...cycle, last].join(' -> ')} (each waits for the next)` });
    }
    return { problems, links };
  }

  private checkJobRef(self: string, ref: Extract<Ref, { scope: 'jobs' }>, field: string, add: (path: string, message: string) => void, expr = refText(ref)): Shape | null {
    if (ref.job === self) {
      add(field, `\${{ ${expr} }}: a job cannot reference itself (cycle: ${self} -> ${self})`);
      return null;
    }
    const k = this.known.get(ref.job);
    if (!k) {
      add(field, `\${{ ${expr} }}: ${unknownJob(ref.job, this.ids)}`);
      return null;
    }
    if (k.forEach) {
      add(field, `\${{ ${expr} }}: ${ref.job} is a for_each job (one job per item); its children cannot be referenced`);
      return null;
    }
    const root = outputShape(k.model, k.kind);
    if (!root) return { type: 'any' };
    const s = shapeAt(root, ref.path);
    if ('error' in s) {
      add(field, `\${{ ${expr} }}: ${k.kind === 'chat' ? 'chat' : k.model} jobs never return that: ${s.error}`);
      return null;
    }
    return s.shape;
  }
}

function pathOf(path: Step[]): string {
  return path.map((s) => (typeof s === 'number' ? `[${s}]` : `.${s}`)).join('');
}

/** `${{ x }}` -> `x`; other text as it is. */
export function stripBraces(expr: string): string {
  const m = /^\s*\$\{\{([^{}]*)\}\}\s*$/.exec(expr);
  return (m ? m[1]! : expr).trim();
}

function unknownJob(id: string, ids: ReadonlySet<string>): string {
  const near = nearest(id, ids);
  return `no job with id "${id}" in this manifest${near !== null ? ` (did you mean "${near}"?)` : ''}`;
}

/**
 * Every cycle (as a list of ids in order: each waits for the next, the last for
 * the first), each reported once. Iterative depth-first search: a chain of any
 * length (e.g. 20,000 jobs linked by `needs`) needs no call stack.
 */
export function findCycles(links: ReadonlyMap<string, JobLinks>): string[][] {
  const color = new Map<string, 1 | 2>();
  const cycles: string[][] = [];
  const path: string[] = [];
  const onPath = new Map<string, number>();
  const next: number[] = [];
  for (const start of links.keys()) {
    if (color.has(start)) continue;
    color.set(start, 1);
    onPath.set(start, 0);
    path.push(start);
    next.push(0);
    while (path.length > 0) {
      const top = path.length - 1;
      const id = path[top]!;
      const parents = links.get(id)?.parents ?? [];
      const i = next[top]!;
      if (i >= parents.length) {
        path.pop();
        next.pop();
        onPath.delete(id);
        color.set(id, 2);
        continue;
      }
      next[top] = i + 1;
      const p = parents[i]!;
      const c = color.get(p);
      if (c === 1) cycles.push(path.slice(onPath.get(p)));
      else if (c === undefined) {
        color.set(p, 1);
        onPath.set(p, path.length);
        path.push(p);
        next.push(0);
      }
    }
  }
  return cycles;
}
