import { resolve, extname, basename } from 'node:path';
import type { Problem } from '../errors.js';
import { findModel } from '../models/index.js';
import { splitPath, typedCell } from './coerce.js';
import type { JobBuilder, ManifestJob } from './job.js';
import { readTable } from './table.js';
import { rowWhere } from './csv.js';
import { MAX_COMBINATIONS, product } from './matrix.js';
import { ABSENT, deepMerge, fill, isPlainObject, templateNames, varName, type Vars } from './template.js';
import { nodeAt, type Loc } from './yaml-loc.js';

/**
 * One checked `jobs` entry of a YAML manifest expanded into jobs (rows x glob
 * files x matrix combinations), streaming rows sources.
 */

const JOB_FIELDS = ['id', 'model', 'input', 'callback_url', 'protocol', 'rehost', 'needs', 'for_each'] as const;
const GLOB_VARS = ['path', 'name', 'ext', 'index'];

export type Entry = Record<string, unknown>;

export interface EntryContext {
  entry: Entry;
  loc: Loc;
  defaults: Entry;
  defaultsLoc: Loc;
  name: string;
  dir: string;
  builder: JobBuilder;
  problems: Problem[];
}

export async function* expandEntry(c: EntryContext): AsyncGenerator<ManifestJob> {
  const { entry, loc, defaults, defaultsLoc, dir, builder, problems } = c;
  const entryWhere = loc.entryWhere ?? loc.lineAt(nodeAt(loc.doc, loc.base).offset);
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
    const confine = builder.confine;
    const badPattern = confine ? patterns.find((p) => confine.patternProblem(p) !== null) : undefined;
    if (confine && badPattern !== undefined) {
      entryProblem('glob', `${JSON.stringify(badPattern)} ${confine.patternProblem(badPattern)}`);
      return;
    }
    // Loaded on first use (~40 ms of start-up otherwise, for manifests without glob entries).
    const fg = (await import('fast-glob')).default;
    files = (await fg(patterns, { cwd: dir, onlyFiles: true })).sort();
    if (files.length === 0) {
      entryProblem('glob', `matched no files (patterns are relative to ${dir})`);
      return;
    }
    const escaped = confine ? files.map((f) => [f, confine.problem(resolve(dir, f))] as const).filter(([, why]) => why !== null) : [];
    for (const [f, why] of escaped) entryProblem('glob', `matches ${JSON.stringify(f)}, which ${why}`);
    if (escaped.length > 0) return;
  }
  const matrix = isPlainObject(entry.matrix) ? (entry.matrix as Record<string, unknown[]>) : null;
  const comboCount = matrix ? Object.values(matrix).reduce((n, values) => n * values.length, 1) : 0;
  if (comboCount > MAX_COMBINATIONS) {
    entryProblem('matrix', `makes ${comboCount.toExponential(2).replace('e+', 'e')} combinations; at most ${MAX_COMBINATIONS.toLocaleString('en-US')} per entry`);
    return;
  }
  const combos = matrix ? { [Symbol.iterator]: () => product(matrix) } : null;
  const rowsSpec = isPlainObject(entry.rows) ? (entry.rows as { file: string; limit?: number }) : null;
  const rowsOutside = rowsSpec ? builder.confine?.problem(resolve(dir, rowsSpec.file)) : null;
  if (rowsSpec && rowsOutside) {
    entryProblem('rows.file', `${JSON.stringify(rowsSpec.file)} ${rowsOutside}`);
    return;
  }
  const rows = rowsSpec ? readTable(resolve(dir, rowsSpec.file), rowsSpec.limit ?? null)[Symbol.asyncIterator]() : null;
  let columns: string[] = [];
  if (rows && rowsSpec) {
    const first = await rows.next();
    if (first.done || first.value.kind !== 'header') {
      const message = first.done ? 'has no header line' : first.value.kind === 'error' ? first.value.message : 'has no header line';
      entryProblem('rows.file', message.replace(resolve(dir, rowsSpec.file), rowsSpec.file));
      return;
    }
    // Names without surrounding spaces (as a CSV job list reads its header): a template's name is trimmed, so " sec " could never be named.
    columns = first.value.cells.map((c) => varName(c.trim()));
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
  // A column name the rows file has twice: {{name}} would take the last of them without a word (glob and matrix variables win over columns).
  const shadowing = new Set([...(files ? GLOB_VARS : []), ...(combos ? Object.keys(entry.matrix as object) : [])]);
  for (const name of templateNames(fields)) {
    if (shadowing.has(name)) continue;
    const at = columns.flatMap((col, i) => (col === name ? [i + 1] : []));
    if (at.length < 2) continue;
    bad = true;
    entryProblem(templatePath(fields, name) ?? '', `template {{${name}}} is ambiguous: ${rowsSpec?.file ?? 'the rows file'} has ${at.length} columns named ${JSON.stringify(name)} (columns ${at.join(', ')})`);
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
  // One job without templates (the usual item of a long list): built from its fields as they are.
  if (available.size === 0) {
    const { id, model, input, callback_url, protocol, rehost, needs, for_each } = fields;
    yield await builder.build({ id: typeof id === 'number' ? String(id) : id, model, input, callback_url, protocol, rehost, needs, for_each, where: entryWhere, locate: (path) => fieldWhere(path, '') });
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
      vars: Object.fromEntries(vars),
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
      problems.push({ job: null, where: `${entryWhere}, ${item.row === null ? rowsName : rowWhere(rowsName, item.row, item.line)}`, path: '', message: item.message });
      continue;
    }
    if (item.kind !== 'row') continue;
    const vars = new Map<string, unknown>([['row', item.row]]);
    columns.forEach((col, i) => vars.set(col, item.cells[i] ?? ''));
    for (const one of inner(vars, [rowWhere(rowsName, item.row, item.line)])) yield await make(one.vars, one.suffix);
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

/** The entry's id when it is plain text (no template): the job a key problem belongs to. */
export function literalId(entry: unknown): string | null {
  if (!isPlainObject(entry) || typeof entry.id !== 'string' || entry.id.includes('{{')) return null;
  return entry.id;
}
