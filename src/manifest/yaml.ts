import { readFile } from 'node:fs/promises';
import { LineCounter } from 'yaml';
import type * as z from 'zod';
import type { Problem } from '../errors.js';
import { joinPath } from '../models/index.js';
import { splitPath } from './coerce.js';
import type { JobBuilder, ManifestJob } from './job.js';
import { headSchema, jobSchema } from './schema.js';
import { splitFile, type Item, type SplitYaml } from './yaml-split.js';
import { cleanValue, type ValueProblem } from './safe.js';
import { isPlainObject } from './template.js';
import { chunkEntries, type RawEntry } from './yaml-batch.js';
import { expandEntry, literalId, type Entry } from './yaml-entry.js';
import { issueProblems, nodeAt, parseYaml, syntaxProblems, toJs, type Loc, type Path } from './yaml-loc.js';

/**
 * A YAML manifest: parse, check the manifest's own keys (positions from the
 * yaml library's source ranges), then expand each `jobs` entry lazily into
 * jobs (rows x glob files x matrix combinations), streaming rows sources.
 */

export const KEYS = {
  manifest: ['budget', 'budget_per_invocation', 'pricing', 'defaults', 'jobs'],
  defaults: ['model', 'input', 'callback_url', 'protocol', 'rehost'],
  job: ['id', 'model', 'input', 'callback_url', 'protocol', 'rehost', 'needs', 'for_each', 'rows', 'glob', 'matrix'],
  rows: ['file', 'limit'],
} as const;

export interface YamlManifest {
  budget: number | null;
  budgetPerInvocation: number | null;
  pricing: Record<string, number> | null;
  /** Problems found while reading the file (syntax, manifest keys). */
  problems: Problem[];
  /** Expand the valid entries into jobs; problems of sources go to `problems`. */
  jobs(builder: JobBuilder, problems: Problem[]): AsyncGenerator<ManifestJob>;
}

/** Reads a YAML manifest file: split and streamed when it has the usual shape, else parsed whole. Throws when the file cannot be read. */
export async function openYaml(file: string, name: string, dir: string): Promise<YamlManifest> {
  const split = await splitFile(file);
  return readYaml(split ?? (await readFile(file, 'utf8')), name, dir);
}

/** A YAML manifest from its split (yaml-split.ts), or from its whole text (parsed whole). */
export function readYaml(source: string | SplitYaml<Iterable<Item> | AsyncIterable<Item>>, name: string, dir: string): YamlManifest {
  const split = typeof source === 'string' ? null : source;
  let lc = new LineCounter();
  // The head is parsed without its blanked item lines (a blank line costs the library ~15 us before it is optimised:
  // 60 ms for 4,000 of them); nodes after them are numbered as in the file. A head with syntax errors is parsed
  // again with the blank lines (an error may sit at the end of the text, where no line maps back).
  let gap = split ? split.blankTo - split.blankFrom : 0;
  let doc = parseYaml(split ? (gap > 0 ? split.compactHead : split.head) : (source as string), lc);
  if (split && gap > 0 && doc.errors.length > 0) {
    gap = 0;
    lc = new LineCounter();
    doc = parseYaml(split.head, lc);
  }
  const problems: Problem[] = [];
  const lineAt = (offset: number) => {
    const line = lc.linePos(offset).line;
    return `${name}:${split && gap > 0 && line > split.blankFrom ? line + gap : line}`;
  };
  const empty: YamlManifest = { budget: null, budgetPerInvocation: null, pricing: null, problems, jobs: async function* () {} };
  for (const p of syntaxProblems(doc, lineAt)) problems.push(p);
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
  let entries: () => Iterable<RawEntry> | AsyncIterable<RawEntry>;
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
      const c: EntryJobsContext = { defaults, defaultsLoc: headLoc, name, dir, builder, problems: sourceProblems, keys: KEYS.job };
      for await (const raw of entries()) {
        if (raw.errors.length > 0) for (const p of raw.errors) sourceProblems.push(p);
        else yield* entryJobs(raw.js, raw.loc, ['jobs', raw.index], c);
      }
    },
  };
}

export interface EntryJobsContext {
  defaults: Entry;
  defaultsLoc: Loc;
  name: string;
  dir: string;
  builder: JobBuilder;
  problems: Problem[];
  /** The keys an entry may have (named in an unknown key's message). */
  keys: readonly string[];
}

/**
 * The jobs of one `jobs` entry (a YAML item, or a JSONL line): its keys checked (problems at `loc`; `prefix`
 * names the entry in a problem's path when it has no id of its own, e.g. jobs[3]), then expanded.
 */
export async function* entryJobs(value: unknown, loc: Loc, prefix: Path, c: EntryJobsContext): AsyncGenerator<ManifestJob> {
  const unsafe: ValueProblem[] = [];
  const js = cleanValue(value, '', unsafe);
  for (const p of unsafe) {
    const owner = literalId(js);
    const offset = nodeAt(loc.doc, [...loc.base, ...splitPath(p.path)]).offset;
    c.problems.push({ job: owner, where: loc.lineAt(offset), path: owner === null ? joinPath('', [...prefix, ...splitPath(p.path)]) : p.path, message: p.message });
  }
  // The common entry (id, model, input, ... of the right types) passes jobSchema for sure: not checked again by zod.
  const checked = surelyValidEntry(js) ? ({ success: true } as const) : jobSchema.safeParse(js);
  let entry = js;
  if (!checked.success || !isPlainObject(js)) {
    const known = checked.success ? null : knownPart(js, checked.error.issues);
    const owner = known ? literalId(known.entry) : literalId(js);
    const keysAt = (path: Path) => (path.length === 0 ? c.keys : path[path.length - 1] === 'rows' ? KEYS.rows : []);
    const list = checked.success ? [] : issueProblems(known ? known.report : checked.error.issues, loc, owner, owner === null ? prefix : [], keysAt);
    c.problems.push(...list.map((p) => p.problem));
    if (!known) return;
    entry = known.entry;
  }
  yield* expandEntry({ entry: entry as Entry, loc, defaults: c.defaults, defaultsLoc: c.defaultsLoc, name: c.name, dir: c.dir, builder: c.builder, problems: c.problems });
}

function priced(root: Entry, problems: Problem[]): { budget: number | null; budgetPerInvocation: number | null; pricing: Record<string, number> | null } {
  const budget = typeof root.budget === 'number' && root.budget >= 0 ? root.budget : null;
  const perInvocation = root.budget_per_invocation;
  const budgetPerInvocation = typeof perInvocation === 'number' && perInvocation >= 0 ? perInvocation : null;
  const pricing = isPlainObject(root.pricing) && !problems.some((p) => p.path.startsWith('pricing')) ? (root.pricing as Record<string, number>) : null;
  return { budget, budgetPerInvocation, pricing };
}

const STRING_FIELDS: ReadonlySet<string> = new Set(['id', 'model', 'callback_url', 'protocol']);

/**
 * True only for an entry jobSchema accepts whatever else it holds: a plain object whose keys are among id,
 * model, callback_url, protocol (strings), input (a plain object) and rehost (a boolean). False says nothing:
 * jobSchema decides (and words the problems). test/manifest.fast.test.ts checks it against jobSchema.
 */
export function surelyValidEntry(js: unknown): boolean {
  if (typeof js !== 'object' || js === null || Object.getPrototypeOf(js) !== Object.prototype) return false;
  for (const key of Object.keys(js)) {
    const v = (js as Record<string, unknown>)[key];
    if (STRING_FIELDS.has(key)) {
      if (typeof v !== 'string') return false;
    } else if (key === 'input') {
      if (typeof v !== 'object' || v === null || Object.getPrototypeOf(v) !== Object.prototype) return false;
    } else if (key === 'rehost') {
      if (typeof v !== 'boolean') return false;
    } else return false;
  }
  return true;
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
