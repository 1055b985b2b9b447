import { resolve, extname, basename } from 'node:path';
import fg from 'fast-glob';
import { LineCounter, parseDocument, isMap, isSeq, isScalar, type Document } from 'yaml';
import type { Problem } from '../errors.js';
import { findModel, joinPath } from '../models/index.js';
import { splitPath, typedCell } from './coerce.js';
import { nearest, type JobBuilder, type ManifestJob } from './job.js';
import { RESERVED_JOB_KEYS, manifestSchema } from './schema.js';
import { readTable } from './table.js';
import { ABSENT, deepMerge, fill, isPlainObject, templateNames, type Vars } from './template.js';

/**
 * A YAML manifest: parse, check the manifest's own keys (positions from the
 * yaml library's source ranges), then expand each `jobs` entry lazily into
 * jobs (rows x glob files x matrix combinations), streaming rows sources.
 */

const KEYS: Record<string, readonly string[]> = {
  manifest: ['budget', 'pricing', 'defaults', 'jobs'],
  defaults: ['model', 'input', 'callback_url', 'protocol'],
  job: ['id', 'model', 'input', 'callback_url', 'protocol', 'rows', 'glob', 'matrix'],
  rows: ['file', 'limit'],
};
const JOB_FIELDS = ['id', 'model', 'input', 'callback_url', 'protocol'] as const;
const GLOB_VARS = ['path', 'name', 'ext', 'index'];

type Path = Array<string | number>;
type Entry = Record<string, unknown>;

export interface YamlManifest {
  budget: number | null;
  pricing: Record<string, number> | null;
  /** Problems found while reading the file (syntax, manifest keys). */
  problems: Problem[];
  /** Expand the valid entries into jobs; problems of sources go to `problems`. */
  jobs(builder: JobBuilder, problems: Problem[]): AsyncGenerator<ManifestJob>;
}

export function readYaml(text: string, name: string, dir: string): YamlManifest {
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc, prettyErrors: false, uniqueKeys: true });
  const problems: Problem[] = [];
  const lineAt = (offset: number) => `${name}:${lc.linePos(offset).line}`;
  const empty: YamlManifest = { budget: null, pricing: null, problems, jobs: async function* () {} };
  for (const e of doc.errors) {
    problems.push({ job: null, where: lineAt(e.pos[0]), path: '', message: `YAML syntax: ${e.message.split('\n')[0]?.replace(/ at line \d+, column \d+:?$/, '')}` });
  }
  if (problems.length > 0) return empty;
  let js: unknown;
  try {
    js = doc.toJS({ maxAliasCount: 1000 });
  } catch (err) {
    problems.push({ job: null, where: name, path: '', message: `YAML: ${err instanceof Error ? err.message : String(err)}` });
    return empty;
  }
  if (!isPlainObject(js)) {
    problems.push({ job: null, where: `${name}:1`, path: '', message: 'a manifest is a mapping with a `jobs:` list (see manifests/README.md)' });
    return empty;
  }
  const root = js;
  const entries: unknown[] = Array.isArray(root.jobs) ? root.jobs : [];
  const badEntries = new Set<number>();
  let badTop = false;
  const badDefaults = new Set<string>();

  const parsed = manifestSchema.safeParse(root);
  const keyed: Array<{ offset: number; problem: Problem }> = [];
  if (!parsed.success) {
    for (const iss of parsed.error.issues) {
      const keys: Array<string | null> = iss.code === 'unrecognized_keys' ? iss.keys : [null];
      for (const key of keys) {
        const path: Path = key === null ? iss.path.map((p) => (typeof p === 'symbol' ? String(p) : p)) : [...iss.path.map((p) => (typeof p === 'symbol' ? String(p) : p)), key];
        const entryIndex = path[0] === 'jobs' && typeof path[1] === 'number' ? path[1] : null;
        if (entryIndex !== null) badEntries.add(entryIndex);
        else if (path[0] === 'jobs' && path.length === 1) badTop = true;
        else if (path[0] === 'defaults') badDefaults.add(String(path[1] ?? ''));
        const ownerId = entryIndex !== null ? literalId(entries[entryIndex]) : null;
        const message = key === null ? iss.message : unknownKeyMessage(key, keysFor(iss.path.length === 0 ? 'manifest' : String(iss.path[iss.path.length - 1] ?? ''), iss.path.length));
        const offset = nodeAt(doc, path).offset;
        keyed.push({ offset, problem: { job: ownerId, where: lineAt(offset), path: joinPath('', ownerId !== null ? path.slice(2) : path), message } });
      }
    }
  }
  // In file order: sort is stable, so issues of one node keep zod's order.
  problems.push(...keyed.sort((a, b) => a.offset - b.offset).map((k) => k.problem));
  const budget = typeof root.budget === 'number' && root.budget >= 0 ? root.budget : null;
  const pricing = isPlainObject(root.pricing) && !problems.some((p) => p.path.startsWith('pricing')) ? (root.pricing as Record<string, number>) : null;
  if (badTop) return { ...empty, budget, pricing };
  // Defaults keys with problems are left out (reported once, not once per job).
  const defaults: Entry = isPlainObject(root.defaults) && !badDefaults.has('') ? Object.fromEntries(Object.entries(root.defaults).filter(([k]) => !badDefaults.has(k))) : {};

  return {
    budget,
    pricing,
    problems,
    async *jobs(builder, sourceProblems) {
      for (let i = 0; i < entries.length; i++) {
        const entry = entries[i];
        if (badEntries.has(i) || !isPlainObject(entry)) continue;
        yield* expandEntry({ entry, index: i, defaults, doc, name, dir, lineAt, builder, problems: sourceProblems });
      }
    },
  };
}

interface EntryContext {
  entry: Entry;
  index: number;
  defaults: Entry;
  doc: Document;
  name: string;
  dir: string;
  lineAt(offset: number): string;
  builder: JobBuilder;
  problems: Problem[];
}

async function* expandEntry(c: EntryContext): AsyncGenerator<ManifestJob> {
  const { entry, index, defaults, doc, name, dir, lineAt, builder, problems } = c;
  const entryPath: Path = ['jobs', index];
  const entryWhere = lineAt(nodeAt(doc, entryPath).offset);
  const fieldWhere = (path: string, suffix: string): string => {
    const parts = splitPath(path);
    const own = nodeAt(doc, [...entryPath, ...parts]);
    if (!own.complete && defaults[String(parts[0])] !== undefined) {
      const fromDefaults = nodeAt(doc, ['defaults', ...parts]);
      if (fromDefaults.complete) return lineAt(fromDefaults.offset) + suffix;
    }
    return lineAt(own.offset) + suffix;
  };
  const entryProblem = (path: string, message: string) => problems.push({ job: literalId(entry), where: fieldWhere(path, ''), path, message });

  // Sources: glob files and matrix combinations are listed up front; rows stream.
  let files: string[] | null = null;
  if (entry.glob !== undefined) {
    const patterns = typeof entry.glob === 'string' ? [entry.glob] : (entry.glob as string[]);
    files = (await fg(patterns, { cwd: dir, onlyFiles: true })).sort();
    if (files.length === 0) {
      entryProblem('glob', `matched no files (patterns are relative to ${dir})`);
      return;
    }
  }
  const combos = isPlainObject(entry.matrix) ? product(entry.matrix as Record<string, unknown[]>) : null;
  const rowsSpec = isPlainObject(entry.rows) ? (entry.rows as { file: string; limit?: number }) : null;
  const rows = rowsSpec ? readTable(resolve(dir, rowsSpec.file), rowsSpec.limit ?? null)[Symbol.asyncIterator]() : null;
  let columns: string[] = [];
  if (rows && rowsSpec) {
    const first = await rows.next();
    if (first.done || first.value.kind !== 'header') {
      const message = first.done ? 'has no header line' : first.value.kind === 'error' ? first.value.message : 'has no header line';
      entryProblem('rows.file', message.replace(resolve(dir, rowsSpec.file), rowsSpec.file));
      return;
    }
    columns = first.value.cells;
  }

  // Templates: every {{name}} must name a variable of this entry's sources.
  const available = new Set<string>([...columns, ...(rows ? ['row'] : []), ...(files ? GLOB_VARS : []), ...(combos ? Object.keys(entry.matrix as object) : [])]);
  const fields: Entry = {};
  for (const k of JOB_FIELDS) {
    const v = k === 'input' ? deepMerge(defaults.input, entry.input) : k === 'id' ? entry.id : (entry[k] ?? defaults[k]);
    if (v !== undefined) fields[k] = v;
  }
  let bad = false;
  for (const missing of [...templateNames(fields)].filter((n) => !available.has(n))) {
    bad = true;
    const at = templatePath(fields, missing) ?? '';
    const hint = available.size === 0 ? 'this job has no rows, glob or matrix source to fill it' : `available: ${[...available].join(', ')}`;
    entryProblem(at, `template {{${missing}}} names no variable (${hint})`);
  }
  const expands = rows !== null || (files?.length ?? 0) > 1 || (combos?.length ?? 0) > 1;
  if (expands && typeof entry.id === 'string' && templateNames(entry.id).size === 0) {
    bad = true;
    entryProblem('id', 'this entry makes several jobs: use a {{variable}} in the id so each job gets its own, or leave the id out');
  }
  if (bad) {
    await rows?.return?.(undefined);
    return;
  }

  const rowsName = rowsSpec?.file ?? '';
  const make = (vars: Vars, suffix: string) => {
    const model = orUndefined(fill(fields.model, vars, 'model', (_p, t) => t));
    const spec = typeof model === 'string' ? (findModel(model) ?? null) : null;
    const typed = (path: string, text: string) => typedCell(spec, path.slice('input.'.length), text);
    const idValue = orUndefined(fill(fields.id, vars, 'id', (_p, t) => t));
    return builder.build({
      id: typeof idValue === 'number' ? String(idValue) : idValue,
      model,
      input: fields.input === undefined ? undefined : fill(fields.input, vars, 'input', typed),
      callback_url: orUndefined(fill(fields.callback_url, vars, 'callback_url', (_p, t) => t)),
      protocol: orUndefined(fill(fields.protocol, vars, 'protocol', (_p, t) => t)),
      where: entryWhere + suffix,
      locate: (path) => fieldWhere(path, suffix),
    });
  };
  const inner = async function* (base: Map<string, unknown>, baseLabel: string[]): AsyncGenerator<ManifestJob> {
    for (const [fi, file] of (files ?? [null]).entries()) {
      const vars = new Map(base);
      const labels = [...baseLabel];
      if (file !== null) {
        const ext = extname(file);
        vars.set('path', file).set('name', basename(file, ext)).set('ext', ext.replace(/^\./, '')).set('index', fi + 1);
        labels.push(file);
      }
      for (const combo of combos ?? [null]) {
        const v = combo ? new Map([...vars, ...combo]) : vars;
        const l = combo ? [...labels, `matrix ${combo.map(([k, x]) => `${k}=${short(x)}`).join(', ')}`] : labels;
        yield await make(v, l.length > 0 ? `, ${l.join(', ')}` : '');
      }
    }
  };

  if (!rows) {
    yield* inner(new Map(), []);
    return;
  }
  for (let next = await rows.next(); !next.done; next = await rows.next()) {
    const item = next.value;
    if (item.kind === 'error') {
      problems.push({ job: null, where: `${entryWhere}, ${rowsName}${item.row === null ? '' : `:row ${item.row}`}`, path: '', message: item.message });
      continue;
    }
    if (item.kind !== 'row') continue;
    const vars = new Map<string, unknown>([['row', item.row]]);
    columns.forEach((col, i) => vars.set(col, item.cells[i] ?? ''));
    yield* inner(vars, [`${rowsName}:row ${item.row}`]);
  }
}

function orUndefined(v: unknown): unknown {
  return v === ABSENT ? undefined : v;
}

function short(v: unknown): string {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s.length > 24 ? `${s.slice(0, 21)}...` : s;
}

/** Every combination of the matrix values; the first key varies slowest. */
function product(matrix: Record<string, unknown[]>): Array<Array<[string, unknown]>> {
  let out: Array<Array<[string, unknown]>> = [[]];
  for (const [key, values] of Object.entries(matrix)) {
    out = out.flatMap((combo) => values.map((v): Array<[string, unknown]> => [...combo, [key, v]]));
  }
  return out;
}

/** The dotted path of the first field whose text uses {{name}}. */
function templatePath(value: unknown, name: string, base = ''): string | null {
  if (typeof value === 'string') return templateNames(value).has(name) ? base : null;
  const children: Array<[string, unknown]> = Array.isArray(value)
    ? value.map((v, i) => [`${base}[${i}]`, v])
    : isPlainObject(value)
      ? Object.entries(value).map(([k, v]) => [base ? `${base}.${k}` : k, v])
      : [];
  for (const [p, v] of children) {
    const hit = templatePath(v, name, p);
    if (hit !== null) return hit;
  }
  return null;
}

/** The entry's id when it is plain text (no template): the job a key problem belongs to. */
function literalId(entry: unknown): string | null {
  if (!isPlainObject(entry) || typeof entry.id !== 'string' || entry.id.includes('{{')) return null;
  return entry.id;
}

function keysFor(parent: string, depth: number): readonly string[] {
  if (depth === 0) return KEYS.manifest ?? [];
  if (parent === 'defaults') return KEYS.defaults ?? [];
  if (parent === 'rows') return KEYS.rows ?? [];
  if (/^\d+$/.test(parent)) return KEYS.job ?? [];
  return [];
}

function unknownKeyMessage(key: string, allowed: readonly string[]): string {
  if ((RESERVED_JOB_KEYS as readonly string[]).includes(key)) return `job graphs are not supported yet ("${key}" is reserved for them)`;
  const near = nearest(key, [...allowed]);
  return `unknown key "${key}"${near ? ` (did you mean "${near}"?)` : ''}${allowed.length > 0 ? `; allowed keys: ${allowed.join(', ')}` : ''}`;
}

/**
 * The source offset of the node at `path`: the key of the deepest map entry
 * found (its line is where users look), or the item of a list.
 * `complete` is false when the path goes deeper than the document.
 */
function nodeAt(doc: Document, path: Path): { offset: number; complete: boolean } {
  let node: unknown = doc.contents;
  let offset = rangeStart(node) ?? 0;
  for (const part of path) {
    if (isMap(node)) {
      const pair = node.items.find((p) => isScalar(p.key) && String(p.key.value) === String(part));
      if (!pair) return { offset, complete: false };
      offset = rangeStart(pair.key) ?? offset;
      node = pair.value;
    } else if (isSeq(node) && typeof part === 'number') {
      const item: unknown = node.items[part];
      if (item === undefined) return { offset, complete: false };
      offset = rangeStart(item) ?? offset;
      node = item;
    } else {
      return { offset, complete: false };
    }
  }
  return { offset, complete: true };
}

function rangeStart(node: unknown): number | null {
  if (node && typeof node === 'object' && 'range' in node) {
    const range = (node as { range?: unknown }).range;
    if (Array.isArray(range) && typeof range[0] === 'number') return range[0];
  }
  return null;
}
