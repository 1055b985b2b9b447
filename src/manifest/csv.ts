import type { Problem } from '../errors.js';
import { findModel } from '../models/index.js';
import { splitPath, typedCell } from './coerce.js';
import type { JobBuilder, ManifestJob } from './job.js';
import { readTable } from './table.js';
import { nearest } from '../lib/nearest.js';
import { isPlainObject } from './template.js';
import { FORBIDDEN_KEYS, MAX_DEPTH, forbiddenKeyMessage } from './safe.js';

/**
 * A CSV or TSV manifest: one row per job. Columns: `model` (required), `id`,
 * `callback_url`, `protocol`, and `input.<field>` with dotted paths and
 * indexes (`input.prompt`, `input.size.width`, `input.image_urls[0]`). Cells
 * are typed by the model's schema (see coerce.ts); an empty cell is absent.
 * Positions are `file:LINE, row N` (the file line the row starts on; row 1 = first row after the header).
 */

const JOB_COLUMNS = new Set(['id', 'model', 'callback_url', 'protocol']);
/** Largest list index a column may name (`input.image_urls[1000]`). */
export const MAX_INDEX = 1000;

interface Column {
  index: number;
  /** Path below `input`, split. */
  parts: Array<string | number>;
  /** Path below `input` as written, e.g. `size.width`. */
  path: string;
}

export async function* csvJobs(file: string, name: string, builder: JobBuilder, problems: Problem[]): AsyncGenerator<ManifestJob> {
  let cols: Map<string, number> | null = null;
  let inputs: Column[] = [];
  let idx: Record<'id' | 'model' | 'callback_url' | 'protocol', number | undefined> = { id: undefined, model: undefined, callback_url: undefined, protocol: undefined };
  let rows = 0;
  for await (const item of readTable(file)) {
    if (item.kind !== 'header' && item.row !== null) rows++;
    if (item.kind === 'error') {
      problems.push({ job: null, where: item.row === null ? name : rowWhere(name, item.row, item.line), path: '', message: item.message });
      continue;
    }
    if (item.kind === 'header') {
      const head = readHeader(item.cells, name, problems);
      cols = head.cols;
      inputs = head.inputs;
      idx = { id: cols.get('id'), model: cols.get('model'), callback_url: cols.get('callback_url'), protocol: cols.get('protocol') };
      continue;
    }
    if (!cols) continue;
    const cells = item.cells;
    const model = cellAt(cells, idx.model);
    const spec = model === undefined ? null : (findModel(model) ?? null);
    const input: Record<string, unknown> = {};
    for (const col of inputs) {
      const v = cells[col.index];
      if (v === undefined || v === '') continue;
      if (col.parts.length === 1) input[col.path] = typedCell(spec, col.path, v);
      else setPath(input, col.parts, typedCell(spec, col.path, v));
    }
    const where = rowWhere(name, item.row, item.line);
    yield await builder.build({
      id: cellAt(cells, idx.id),
      model,
      input,
      callback_url: cellAt(cells, idx.callback_url),
      protocol: cellAt(cells, idx.protocol),
      where,
      locate: () => where,
    });
  }
  if (cols && rows === 0) problems.push({ job: null, where: `${name}:header`, path: '', message: 'no jobs: the file has no rows after its header line' });
}

/** `jobs.csv:4, row 3`: the file line a row starts on and its row number; `jobs.csv:row 3` when the line is not known (a record the parser skipped). */
export function rowWhere(file: string, row: number, line: number | undefined): string {
  // Joined, not a template: one flat string (a template makes a chain of 4 string pieces, ~170 bytes a row, that the
  // builder keeps for every id until the manifest is read: 12 MB at 100,000 rows).
  return line === undefined ? [file, ':row ', row].join('') : [file, ':', line, ', row ', row].join('');
}

/** A cell's text, or undefined for a missing column or an empty cell (absent). */
function cellAt(cells: string[], index: number | undefined): string | undefined {
  const v = index === undefined ? undefined : cells[index];
  return v === undefined || v === '' ? undefined : v;
}

function readHeader(cells: string[], name: string, problems: Problem[]): { cols: Map<string, number>; inputs: Column[] } {
  const cols = new Map<string, number>();
  const inputs: Column[] = [];
  const where = `${name}:header`;
  cells.forEach((raw, index) => {
    const col = raw.trim();
    if (cols.has(col)) {
      problems.push({ job: null, where, path: col, message: `column ${JSON.stringify(col)} appears twice` });
      return;
    }
    cols.set(col, index);
    if (JOB_COLUMNS.has(col)) return;
    if (col.startsWith('input.') && col.length > 'input.'.length) {
      const path = col.slice('input.'.length);
      const parts = splitPath(path);
      const bad = columnPathProblem(parts);
      if (bad) problems.push({ job: null, where, path: col.length > 80 ? `${col.slice(0, 77)}...` : col, message: bad });
      else inputs.push({ index, path, parts });
      return;
    }
    const near = nearest(col, JOB_COLUMNS);
    problems.push({
      job: null,
      where,
      path: col,
      message: `unknown column ${JSON.stringify(col)} (${near ? `did you mean "${near}"? ` : ''}columns are id, model, callback_url, protocol and input.<field>, e.g. input.prompt)`,
    });
  });
  if (!cols.has('model')) problems.push({ job: null, where, path: 'model', message: 'a model column is required' });
  return { cols, inputs: contiguous(distinctFields(inputs, where, problems), where, problems) };
}

/** `input.` and a split path, written back: ["size", "width"] -> input.size.width, ["image_urls", 0] -> input.image_urls[0]. */
function fieldName(parts: ReadonlyArray<string | number>): string {
  return `input.${parts.map((p) => (typeof p === 'number' ? `[${p}]` : `.${p}`)).join('').replace(/^\./, '').replace(/\.\[/g, '[')}`;
}

/**
 * Each field is set by one column: a column whose path is spelled another way (`input.a.[0]` after
 * `input.a[0]`) or lies inside another column's field (`input.size.width` next to `input.size`) would
 * overwrite that column's cell, or have its own overwritten, without a word. Such a column is reported
 * and left out.
 */
function distinctFields(inputs: Column[], where: string, problems: Problem[]): Column[] {
  const whole = new Map<string, Column>();
  for (const col of inputs) {
    const key = JSON.stringify(col.parts);
    if (!whole.has(key)) whole.set(key, col);
  }
  return inputs.filter((col) => {
    const name = `input.${col.path}`;
    const first = whole.get(JSON.stringify(col.parts));
    if (first !== undefined && first !== col) {
      problems.push({ job: null, where, path: name, message: `sets the same field as column ${JSON.stringify(`input.${first.path}`)}` });
      return false;
    }
    for (let i = 1; i < col.parts.length; i++) {
      const outer = whole.get(JSON.stringify(col.parts.slice(0, i)));
      if (outer === undefined) continue;
      problems.push({ job: null, where, path: name, message: `sets a part of ${fieldName(col.parts.slice(0, i))}, which column ${JSON.stringify(`input.${outer.path}`)} sets whole: use one or the other` });
      return false;
    }
    return true;
  });
}

/** Why a column path cannot be used (forbidden key, too deep, index too big), or null. */
function columnPathProblem(parts: Array<string | number>): string | null {
  if (parts.length > MAX_DEPTH) return `the column path is ${MAX_DEPTH} levels deep at most (has ${parts.length})`;
  for (const part of parts) {
    if (typeof part === 'string' && FORBIDDEN_KEYS.has(part)) return forbiddenKeyMessage(part);
    if (typeof part === 'number' && part > MAX_INDEX) return `list index [${part}] is over ${MAX_INDEX}`;
  }
  return null;
}

/**
 * The columns of each list must name indexes 0, 1, 2, ... without gaps
 * (`input.image_urls[1]` alone would leave item 0 empty). Columns of a list
 * with a gap are reported once and left out.
 */
function contiguous(inputs: Column[], where: string, problems: Problem[]): Column[] {
  const lists = new Map<string, Set<number>>();
  const listOf = (col: Column, i: number) => JSON.stringify(col.parts.slice(0, i));
  for (const col of inputs) {
    col.parts.forEach((part, i) => {
      if (typeof part !== 'number') return;
      const key = listOf(col, i);
      let set = lists.get(key);
      if (!set) lists.set(key, (set = new Set()));
      set.add(part);
    });
  }
  const gappy = new Set<string>();
  for (const [key, set] of lists) {
    const missing = [...Array(Math.max(...set) + 1).keys()].filter((n) => !set.has(n));
    if (missing.length === 0) continue;
    gappy.add(key);
    const name = fieldName(JSON.parse(key) as Array<string | number>);
    problems.push({ job: null, where, path: name, message: `list columns must number their items from [0] without gaps: no column for ${missing.slice(0, 5).map((n) => `[${n}]`).join(', ')}${missing.length > 5 ? ', ...' : ''}` });
  }
  if (gappy.size === 0) return inputs;
  return inputs.filter((col) => !col.parts.some((p, i) => typeof p === 'number' && gappy.has(listOf(col, i))));
}

/** Set `value` at a split path, creating objects and arrays on the way. */
function setPath(root: Record<string, unknown>, parts: Array<string | number>, value: unknown): void {
  if (parts.some((p) => typeof p === 'string' && FORBIDDEN_KEYS.has(p))) return;
  let cur: Record<string, unknown> | unknown[] = root;
  parts.forEach((part, i) => {
    const last = i === parts.length - 1;
    const nextIsIndex = typeof parts[i + 1] === 'number';
    if (Array.isArray(cur) && typeof part === 'number') {
      if (last) cur[part] = value;
      else {
        const existing: unknown = cur[part];
        const child = nextIsIndex ? (Array.isArray(existing) ? existing : []) : isPlainObject(existing) ? existing : {};
        cur[part] = child;
        cur = child;
      }
    } else if (!Array.isArray(cur)) {
      const key = String(part);
      if (last) cur[key] = value;
      else {
        const existing = cur[key];
        const child = nextIsIndex ? (Array.isArray(existing) ? existing : []) : isPlainObject(existing) ? existing : {};
        cur[key] = child;
        cur = child;
      }
    }
  });
}
