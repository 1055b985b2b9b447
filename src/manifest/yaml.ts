import { resolve, extname, basename } from 'node:path';
import fg from 'fast-glob';
import { LineCounter, parseDocument, isMap, isSeq, isScalar, type Document } from 'yaml';
import type { z } from 'zod';
import type { Problem } from '../errors.js';
import { findModel, joinPath } from '../models/index.js';
import { splitPath, typedCell } from './coerce.js';
import { nearest, type JobBuilder, type ManifestJob } from './job.js';
import { headSchema, jobSchema } from './schema.js';
import { splitJobs } from './yaml-split.js';
import { readTable } from './table.js';
import { MAX_DEPTH, cleanValue, type ValueProblem } from './safe.js';
import { MAX_COMBINATIONS, product } from './matrix.js';
import { ABSENT, deepMerge, fill, isPlainObject, templateNames, type Vars } from './template.js';

/**
 * A YAML manifest: parse, check the manifest's own keys (positions from the
 * yaml library's source ranges), then expand each `jobs` entry lazily into
 * jobs (rows x glob files x matrix combinations), streaming rows sources.
 */

const KEYS = {
  manifest: ['budget', 'pricing', 'defaults', 'jobs'],
  defaults: ['model', 'input', 'callback_url', 'protocol', 'rehost'],
  job: ['id', 'model', 'input', 'callback_url', 'protocol', 'rehost', 'needs', 'for_each', 'rows', 'glob', 'matrix'],
  rows: ['file', 'limit'],
} as const;
const JOB_FIELDS = ['id', 'model', 'input', 'callback_url', 'protocol', 'rehost', 'needs', 'for_each'] as const;
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
  const split = splitJobs(text);
  const lc = new LineCounter();
  const doc = parseDocument(split ? split.head : text, { lineCounter: lc, prettyErrors: false, uniqueKeys: true, merge: true });
  const problems: Problem[] = [];
  const lineAt = (offset: number) => `${name}:${lc.linePos(offset).line}`;
  const empty: YamlManifest = { budget: null, pricing: null, problems, jobs: async function* () {} };
  problems.push(...syntaxProblems(doc, lineAt));
  if (problems.length > 0) return empty;
  const js = toJs(doc, name, problems);
  if (js === undefined) return empty;
  if (!isPlainObject(js)) {
    problems.push({ job: null, where: `${name}:1`, path: '', message: 'a manifest is a mapping with a `jobs:` list (see manifests/README.md)' });
    return empty;
  }
  const headLoc: Loc = { doc, lineAt, base: [] };
  // Forbidden keys and too-deep values are removed before anything walks them (the job entries: one by one below).
  const root: Entry = {};
  const headIssues: ValueProblem[] = [];
  for (const k of Object.keys(js)) {
    const v = k === 'jobs' ? js[k] : (cleanValue({ [k]: js[k] }, '', headIssues) as Entry)[k];
    if (v !== undefined) root[k] = v;
  }
  for (const p of headIssues) problems.push({ job: null, where: lineAt(nodeAt(doc, splitPath(p.path)).offset), path: p.path, message: p.message });

  // Everything but the job entries (checked one by one while the jobs stream by).
  const badDefaults = new Set<string>();
  const parsed = headSchema.safeParse(root);
  if (!parsed.success) {
    for (const p of issueProblems(parsed.error.issues, headLoc, null, [], (path) => (path.length === 0 ? KEYS.manifest : path[path.length - 1] === 'defaults' ? KEYS.defaults : []))) {
      if (p.issuePath[0] === 'defaults') badDefaults.add(String(p.issuePath[1] ?? ''));
      problems.push(p.problem);
    }
  }
  let entries: () => Iterable<RawEntry>;
  if (split) {
    entries = () => chunkEntries(split.items, name);
  } else {
    const list = root.jobs;
    const jobsWhere = lineAt(nodeAt(doc, ['jobs']).offset);
    const bad = list === undefined || list === null ? 'is required (a list of jobs)' : !Array.isArray(list) ? 'must be a list of jobs' : list.length === 0 ? 'must list at least one job' : null;
    if (bad || !Array.isArray(list)) {
      problems.push({ job: null, where: list === undefined ? `${name}:1` : jobsWhere, path: 'jobs', message: bad ?? 'must be a list of jobs' });
      return { ...empty, ...priced(root, problems) };
    }
    entries = () => list.map((entryJs, index): RawEntry => ({ js: entryJs, loc: { doc, lineAt, base: ['jobs', index] }, index, errors: [] }));
  }
  // Defaults keys with problems are left out (reported once, not once per job).
  const defaults: Entry = isPlainObject(root.defaults) && !badDefaults.has('') ? Object.fromEntries(Object.entries(root.defaults).filter(([k]) => !badDefaults.has(k))) : {};

  return {
    ...priced(root, problems),
    problems,
    async *jobs(builder, sourceProblems) {
      for (const raw of entries()) {
        if (raw.errors.length > 0) {
          sourceProblems.push(...raw.errors);
          continue;
        }
        const unsafe: ValueProblem[] = [];
        const js = cleanValue(raw.js, '', unsafe);
        for (const p of unsafe) {
          const owner = literalId(js);
          const offset = nodeAt(raw.loc.doc, [...raw.loc.base, ...splitPath(p.path)]).offset;
          sourceProblems.push({ job: owner, where: raw.loc.lineAt(offset), path: owner === null ? joinPath('', ['jobs', raw.index, ...splitPath(p.path)]) : p.path, message: p.message });
        }
        const checked = jobSchema.safeParse(js);
        let entry = js;
        if (!checked.success || !isPlainObject(js)) {
          const known = checked.success ? null : knownPart(js, checked.error.issues);
          const owner = known ? literalId(known.entry) : literalId(js);
          const keysAt = (path: Path) => (path.length === 0 ? KEYS.job : path[path.length - 1] === 'rows' ? KEYS.rows : []);
          const list = checked.success ? [] : issueProblems(known ? known.report : checked.error.issues, raw.loc, owner, owner === null ? ['jobs', raw.index] : [], keysAt);
          sourceProblems.push(...list.map((p) => p.problem));
          if (!known) continue;
          entry = known.entry;
        }
        yield* expandEntry({ entry: entry as Entry, loc: raw.loc, defaults, defaultsLoc: headLoc, name, dir, builder, problems: sourceProblems });
      }
    },
  };
}

/** Where a node lives: its document, how offsets become `file:line`, and the path of the entry in it. */
interface Loc {
  doc: Document;
  lineAt(offset: number): string;
  base: Path;
}

interface RawEntry {
  js: unknown;
  loc: Loc;
  index: number;
  /** Syntax problems of this entry (it is then skipped). */
  errors: Problem[];
}

/** Items of a split file parsed together: bounded memory, without a parser per item. */
const BATCH_ITEMS = 200;

/** The items of a split file, parsed a batch at a time; a batch with a syntax error is parsed item by item. */
function* chunkEntries(items: Array<{ line: number; text: string }>, name: string): Generator<RawEntry> {
  for (let from = 0; from < items.length; from += BATCH_ITEMS) {
    const batch = items.slice(from, from + BATCH_ITEMS);
    const first = batch[0];
    if (!first) break;
    const parsed = parseChunk(batch.map((it) => it.text).join('\n'), first.line, name);
    const list = parsed.errors.length === 0 ? toJs(parsed.loc.doc, `${name}:${first.line}`, parsed.errors) : undefined;
    if (parsed.errors.length === 0 && Array.isArray(list) && list.length === batch.length) {
      for (let k = 0; k < batch.length; k++) yield { js: list[k], loc: { ...parsed.loc, base: [k] }, index: from + k, errors: [] };
      continue;
    }
    for (const [k, item] of batch.entries()) {
      const one = parseChunk(item.text, item.line, name);
      const js = one.errors.length === 0 ? toJs(one.loc.doc, `${name}:${item.line}`, one.errors) : undefined;
      yield { js: Array.isArray(js) ? js[0] : undefined, loc: one.loc, index: from + k, errors: one.errors };
    }
  }
}

function parseChunk(text: string, line: number, name: string): { loc: Loc; errors: Problem[] } {
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc, prettyErrors: false, uniqueKeys: true, merge: true });
  const lineAt = (offset: number) => `${name}:${lc.linePos(offset).line + line - 1}`;
  return { loc: { doc, lineAt, base: [0] }, errors: syntaxProblems(doc, lineAt) };
}

function syntaxProblems(doc: Document, lineAt: (offset: number) => string): Problem[] {
  // The yaml library reports its own stack overflow (thousands of nested levels) as an error at the deep node.
  const text = (m: string) => (/Maximum call stack/i.test(m) ? `too deeply nested to read (values may be nested at most ${MAX_DEPTH} levels)` : `YAML syntax: ${m.split('\n')[0]?.replace(/ at line \d+, column \d+:?$/, '')}`);
  return doc.errors.map((e) => ({ job: null, where: lineAt(e.pos[0]), path: '', message: text(e.message) }));
}

function toJs(doc: Document, where: string, problems: Problem[]): unknown {
  try {
    return doc.toJS({ maxAliasCount: 1000 }) as unknown;
  } catch (err) {
    problems.push({ job: null, where, path: '', message: `YAML: ${err instanceof Error ? err.message : String(err)}` });
    return undefined;
  }
}

function priced(root: Entry, problems: Problem[]): { budget: number | null; pricing: Record<string, number> | null } {
  const budget = typeof root.budget === 'number' && root.budget >= 0 ? root.budget : null;
  const pricing = isPlainObject(root.pricing) && !problems.some((p) => p.path.startsWith('pricing')) ? (root.pricing as Record<string, number>) : null;
  return { budget, pricing };
}

/**
 * Problems from zod issues, positioned at their nodes and in file order.
 * `owner`: the job id they belong to; `prefix`: shown before the path when
 * there is no owner (e.g. jobs[3]); `keysAt`: the allowed keys of a mapping.
 */
function issueProblems(issues: readonly z.core.$ZodIssue[], loc: Loc, owner: string | null, prefix: Path, keysAt: (path: Path) => readonly string[]): Array<{ offset: number; issuePath: Path; problem: Problem }> {
  const out: Array<{ offset: number; issuePath: Path; problem: Problem }> = [];
  for (const iss of issues) {
    const base: Path = iss.path.map((p) => (typeof p === 'symbol' ? String(p) : p));
    const keys: Array<string | null> = iss.code === 'unrecognized_keys' ? iss.keys : [null];
    for (const key of keys) {
      const path: Path = key === null ? base : [...base, key];
      const offset = nodeAt(loc.doc, [...loc.base, ...path]).offset;
      const message = key === null ? iss.message : unknownKeyMessage(key, keysAt(base));
      out.push({ offset, issuePath: path, problem: { job: owner, where: loc.lineAt(offset), path: joinPath('', [...prefix, ...path]), message } });
    }
  }
  // Stable sort: issues of one node keep zod's order.
  return out.sort((a, b) => a.offset - b.offset);
}

interface EntryContext {
  entry: Entry;
  loc: Loc;
  defaults: Entry;
  defaultsLoc: Loc;
  name: string;
  dir: string;
  builder: JobBuilder;
  problems: Problem[];
}

async function* expandEntry(c: EntryContext): AsyncGenerator<ManifestJob> {
  const { entry, loc, defaults, defaultsLoc, dir, builder, problems } = c;
  const entryWhere = loc.lineAt(nodeAt(loc.doc, loc.base).offset);
  const fieldWhere = (path: string, suffix: string): string => {
    const parts = splitPath(path);
    const own = nodeAt(loc.doc, [...loc.base, ...parts]);
    if (!own.complete && defaults[String(parts[0])] !== undefined) {
      const fromDefaults = nodeAt(defaultsLoc.doc, ['defaults', ...parts]);
      if (fromDefaults.complete) return defaultsLoc.lineAt(fromDefaults.offset) + suffix;
    }
    return loc.lineAt(own.offset) + suffix;
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
  const matrix = isPlainObject(entry.matrix) ? (entry.matrix as Record<string, unknown[]>) : null;
  const comboCount = matrix ? Object.values(matrix).reduce((n, values) => n * values.length, 1) : 0;
  if (comboCount > MAX_COMBINATIONS) {
    entryProblem('matrix', `makes ${comboCount.toExponential(2).replace('e+', 'e')} combinations; at most ${MAX_COMBINATIONS.toLocaleString('en-US')} per entry`);
    return;
  }
  const combos = matrix ? { [Symbol.iterator]: () => product(matrix) } : null;
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
  const expands = rows !== null || (files?.length ?? 0) > 1 || comboCount > 1;
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
      rehost: fields.rehost,
      needs: orUndefined(fill(fields.needs, vars, 'needs', (_p, t) => t)),
      for_each: orUndefined(fill(fields.for_each, vars, 'for_each', (_p, t) => t)),
      where: entryWhere + suffix,
      locate: (path) => fieldWhere(path, suffix),
    });
  };
  // Files x combinations, with their variables and position labels (a sync list: no async hop per job).
  function* inner(base: Map<string, unknown>, baseLabel: string[]): Generator<{ vars: Vars; suffix: string }> {
    for (const [fi, file] of (files ?? [null]).entries()) {
      const vars = file === null ? base : new Map(base);
      const labels = file === null ? baseLabel : [...baseLabel, file];
      if (file !== null) {
        const ext = extname(file);
        (vars as Map<string, unknown>).set('path', file).set('name', basename(file, ext)).set('ext', ext.replace(/^\./, '')).set('index', fi + 1);
      }
      for (const combo of combos ?? [null]) {
        const v = combo ? new Map([...vars, ...combo]) : vars;
        const l = combo ? [...labels, `matrix ${combo.map(([k, x]) => `${k}=${short(x)}`).join(', ')}`] : labels;
        yield { vars: v, suffix: l.length > 0 ? `, ${l.join(', ')}` : '' };
      }
    }
  }

  if (!rows) {
    for (const one of inner(new Map(), [])) yield await make(one.vars, one.suffix);
    return;
  }
  let seenRows = 0;
  for (let next = await rows.next(); !next.done; next = await rows.next()) {
    const item = next.value;
    if (item.kind !== 'header' && item.row !== null) seenRows++;
    if (item.kind === 'error') {
      problems.push({ job: null, where: `${entryWhere}, ${rowsName}${item.row === null ? '' : `:row ${item.row}`}`, path: '', message: item.message });
      continue;
    }
    if (item.kind !== 'row') continue;
    const vars = new Map<string, unknown>([['row', item.row]]);
    columns.forEach((col, i) => vars.set(col, item.cells[i] ?? ''));
    for (const one of inner(vars, [`${rowsName}:row ${item.row}`])) yield await make(one.vars, one.suffix);
  }
  if (seenRows === 0) entryProblem('rows.file', `${rowsName} has no rows after its header line`);
}

function orUndefined(v: unknown): unknown {
  return v === ABSENT ? undefined : v;
}

function short(v: unknown): string {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s.length > 24 ? `${s.slice(0, 21)}...` : s;
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

/** Fields the job builder checks itself (its message is reported, not the schema's). */
const BUILDER_CHECKED = new Set(['model', 'input', 'callback_url', 'protocol', 'rehost', 'needs', 'for_each']);

/**
 * A job entry with key problems that can still be built from its known keys:
 * unknown keys are left out, a numeric id becomes its text. Null when a
 * source (rows, glob, matrix) or the id itself is unusable, or the entry is
 * not a mapping. `report`: the issues to report (the builder reports the
 * fields it checks itself).
 */
function knownPart(js: unknown, issues: readonly z.core.$ZodIssue[]): { entry: Entry; report: z.core.$ZodIssue[] } | null {
  if (!isPlainObject(js)) return null;
  const entry: Entry = {};
  for (const k of KEYS.job) if (js[k] !== undefined) entry[k] = js[k];
  if (typeof entry.id === 'number') entry.id = String(entry.id);
  const report: z.core.$ZodIssue[] = [];
  for (const iss of issues) {
    const top = iss.path[0];
    if (iss.path.length === 0 && iss.code !== 'unrecognized_keys') return null;
    if (top === 'rows' || top === 'glob' || top === 'matrix') return null;
    if (top === 'id' && typeof js.id !== 'number') return null;
    if (typeof top === 'string' && BUILDER_CHECKED.has(top)) continue;
    report.push(iss);
  }
  return { entry, report };
}

/** The entry's id when it is plain text (no template): the job a key problem belongs to. */
function literalId(entry: unknown): string | null {
  if (!isPlainObject(entry) || typeof entry.id !== 'string' || entry.id.includes('{{')) return null;
  return entry.id;
}

function unknownKeyMessage(key: string, allowed: readonly string[]): string {
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
