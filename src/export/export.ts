import { existsSync } from 'node:fs';
import { dirname, relative, resolve, sep } from 'node:path';
import pLimit from 'p-limit';
import { nestingWithin } from '../client/limits.js'; // not the barrel: it loads the whole client
import { sanitizeName } from '../download/names.js'; // not the barrel: it loads the whole downloader, which readers of a state never use
import { setAtPath } from '../engine/index.js';
import type { StoredSpec } from '../engine/spec.js';
import { UnsafePathError, UsageError } from '../errors.js';
import { nameProblem, realpathOrAncestor, within as folderWithin } from '../lib/root.js';
import type { Mark, Store } from '../store/index.js';
import { csvField } from '../report/csv.js';
import { varsOf } from '../report/prompt.js';
import { openManifest } from '../manifest/index.js';
import { isS3Url, parseS3Url, s3UrlOf } from '../storage/url.js';
import { folderDest, folderSource } from './folder.js';
import { ExportProblem, LEDGER, type ExportDest, type ExportEntry, type Placement, type ExportSource, type Ledger } from './places.js';

/**
 * `genbatch export`: the chosen results of a run copied into a folder as a data set.
 *
 *   which    default: every done job not marked rejected; `approved`: the approved ones; `done`: every done job
 *   files    only the result files recorded in the state file (state done, with a path and a sha256), each at
 *            `<job id>/<file path inside the job folder>` (the job id through sanitizeName, as the output
 *            folder names it), hard-linked from the output folder when DIR is on the same filesystem, else
 *            copied; placed under a temporary name, its sha256 checked against the recorded one, then renamed
 *   index    imagefolder: `metadata.jsonl`, one line per file (`file_name` relative to DIR, `job_id`, `model`,
 *            `prompt`, `sha256`, `mark`, `mark_note`, the manifest's variables, then the input fields as sent,
 *            local reference images by their path relative to the manifest), which Hugging Face `datasets` reads as an
 *            ImageFolder/AudioFolder; jsonl: the same lines in `export.jsonl`; csv: `export.csv` with the input
 *            as one JSON column
 *   again    `.genbatch-export.json` in DIR lists what genbatch wrote there (name and sha256): a file already
 *            there with the recorded sha256 is not copied again; a file genbatch wrote for a job no longer
 *            chosen is removed; a file genbatch did not write is never replaced (that file is refused, named)
 *
 * Nothing is written outside DIR: every name is checked to stay inside it, and a folder on the way that is a
 * symbolic link is refused.
 *
 * In a bucket: a run whose output is `s3://bucket/prefix` exports from its objects, and `--to s3://bucket/prefix`
 * exports into a bucket (src/export/bucket.ts: each file copied server-side, or streamed from the disk; the
 * index and the record are objects under the export prefix).
 */

export type ExportWhich = 'default' | 'approved' | 'done';
export type ExportFormat = 'imagefolder' | 'jsonl' | 'csv';
export const EXPORT_FORMATS: readonly ExportFormat[] = ['imagefolder', 'jsonl', 'csv'];

export interface ExportOptions {
  to: string;
  which: ExportWhich;
  format: ExportFormat;
}

export interface ExportOutcome {
  dir: string;
  index: string;
  jobs: number;
  files: number;
  linked: number;
  copied: number;
  /** Already in DIR with the right sha256. */
  kept: number;
  /** Files genbatch had written for jobs no longer chosen, removed. */
  removed: number;
  /** Files not exported, each with why (sha256 mismatch, a file genbatch did not write, ...). */
  problems: string[];
}

/** export.csv: these columns of the index row, then the whole input as sent, as JSON. */
const CSV_INDEX_COLUMNS = ['file_name', 'job_id', 'model', 'prompt', 'sha256', 'input'] as const;
const INDEX_NAME: Record<ExportFormat, string> = { imagefolder: 'metadata.jsonl', jsonl: 'export.jsonl', csv: 'export.csv' };

type Entry = ExportEntry;

/** Files placed at once: hard links read back, uploads or server-side copies (CopyObject) in flight. */
export const PLACE_AT_ONCE = 16;

/** `out` as a location: `s3://bucket/prefix` normalised, else the absolute folder. */
const locationOf = (out: string): string => (isS3Url(out) ? s3UrlOf(parseS3Url(out, '--to')) : resolve(out));

/**
 * True when `inner` is `outer` or inside it: two bucket prefixes, or two folders by their text or once their
 * symbolic links are resolved (a --to that leads into the output folder through a link is inside it).
 */
function within(outer: string, inner: string): boolean {
  if (isS3Url(outer) !== isS3Url(inner)) return false;
  if (isS3Url(outer)) return inner === outer || inner.startsWith(`${outer}/`);
  return folderWithin(outer, inner) || folderWithin(realpathOrAncestor(outer), realpathOrAncestor(inner));
}

/** What an error met while exporting one file means for that file (a named problem), or null when it stops the export. */
function problemOf(err: unknown, name: string, dest: ExportDest): string | null {
  if (err instanceof ExportProblem) return err.message;
  if (err instanceof UnsafePathError) return `${name}: a folder on the way in ${dest.where} is a symbolic link or a file; not exported (${err.path} ${err.what})`;
  if ((err as { code?: string }).code === 'ENAMETOOLONG') return `${name}: the name is too long for the file system of ${dest.where} (ENAMETOOLONG); not exported`;
  return null;
}

async function openSource(outDir: string): Promise<ExportSource> {
  if (!isS3Url(outDir)) return folderSource(outDir);
  const { bucketSource } = await import('./bucket.js');
  return bucketSource(outDir);
}

async function openDest(to: string): Promise<ExportDest> {
  if (!isS3Url(to)) return folderDest(to);
  const { bucketDest } = await import('./bucket.js');
  return bucketDest(to);
}

export async function exportResults(store: Store, o: ExportOptions): Promise<ExportOutcome> {
  const run = store.run();
  const outDir = locationOf(run.out_dir);
  const to = locationOf(o.to);
  if (within(outDir, to) || within(to, outDir)) throw new UsageError(`--to ${o.to}: the export ${isS3Url(to) ? 'prefix' : 'folder'} must be outside the run's output ${isS3Url(outDir) ? 'prefix' : 'folder'} ${outDir}`);
  const source = await openSource(outDir);
  let dest: ExportDest | null = null;
  try {
    dest = await openDest(to);
    return await exportInto(store, o, source, dest);
  } finally {
    dest?.close();
    source.close?.();
  }
}

async function exportInto(store: Store, o: ExportOptions, source: ExportSource, dest: ExportDest): Promise<ExportOutcome> {
  const ledger = await dest.readLedger();
  const indexName = INDEX_NAME[o.format];
  if (!(indexName in ledger.files) && (await dest.exists(indexName))) {
    throw new UsageError(`--to ${o.to}: ${indexName} is already there and genbatch did not write it; choose an empty ${isS3Url(dest.where) ? 'prefix' : 'folder'} or one genbatch exported to`);
  }
  const marks = store.marks();
  const vars = await manifestVars(store.run().manifest);
  const out: ExportOutcome = { dir: dest.where, index: dest.at(indexName), jobs: 0, files: 0, linked: 0, copied: 0, kept: 0, removed: 0, problems: [] };
  const entries = chooseEntries(store, marks, vars, o.which, out.problems);
  const written = new Map<string, string>();
  const jobs = new Set<string>();
  // PLACE_AT_ONCE files placed at once (hard links and read-backs, uploads, server-side copies); the outcomes
  // are taken in manifest order, so the counts, problems and the record read as a one-at-a-time export's.
  // Two entries of one name (job ids cleaned to the same folder name) are placed one after the other, as before.
  const limit = pLimit(PLACE_AT_ONCE);
  const last = new Map<string, Promise<unknown>>();
  const placed = await limit.map(entries, (e): Promise<Placement | { problem: string }> => {
    const before = last.get(e.name);
    const p = (async () => {
      if (before) await before.catch(() => undefined);
      try {
        return await dest.place(e, source, ledger);
      } catch (err) {
        const why = problemOf(err, e.name, dest);
        if (why === null) throw err;
        return { problem: why };
      }
    })();
    last.set(e.name, p);
    return p;
  });
  for (const [i, how] of placed.entries()) {
    const e = entries[i]!;
    if (typeof how !== 'string') {
      out.problems.push(how.problem);
      continue;
    }
    out[how]++;
    out.files++;
    jobs.add(String(e.row.job_id));
    written.set(e.name, e.sha256);
  }
  out.jobs = jobs.size;
  // Files genbatch wrote before for results no longer chosen (rejected since, made again): removed while unchanged.
  // The record is data from outside (anyone could have written it): each name is checked before anything is removed.
  for (const [name, sha] of Object.entries(ledger.files)) {
    if (written.has(name) || name === indexName || name in INDEX_BY_NAME || name === LEDGER) continue;
    const bad = nameProblem(name);
    if (bad !== null) {
      out.problems.push(`${dest.where}/${LEDGER}: the entry ${JSON.stringify(name)} ${bad}, not a name inside the export; nothing removed for it`);
      continue;
    }
    try {
      if (await dest.removeIfUnchanged(name, sha)) out.removed++;
    } catch (err) {
      if (!(err instanceof UnsafePathError)) throw err;
      out.problems.push(`${dest.where}/${LEDGER}: the entry ${JSON.stringify(name)} leads through ${err.path}, which ${err.what}; nothing removed for it`);
    }
  }
  const kept = entries.filter((e) => written.has(e.name));
  const indexSha = await dest.write(indexName, async (w) => {
    if (o.format === 'csv') {
      await w.write(`${CSV_INDEX_COLUMNS.join(',')}\r\n`);
      for (const e of kept) {
        const cells = CSV_INDEX_COLUMNS.slice(0, -1).map((c) => e.row[c]);
        await w.write(cells.map((v) => csvField(typeof v === 'string' ? v : null)).join(',') + `,${csvField(JSON.stringify(e.input))}\r\n`);
      }
    } else {
      const keys = columnsOf(kept);
      for (const e of kept) await w.write(JSON.stringify(Object.fromEntries(keys.map((k) => [k, e.row[k] ?? null]))) + '\n');
    }
  });
  const files: Record<string, string> = {};
  for (const [name, sha] of Object.entries(ledger.files)) if (name in INDEX_BY_NAME) files[name] = sha;
  for (const [name, sha] of written) files[name] = sha;
  files[indexName] = indexSha;
  await dest.write(LEDGER, (w) => w.write(JSON.stringify({ version: 1, files } satisfies Ledger) + '\n'));
  return out;
}

/**
 * Every line of metadata.jsonl and export.jsonl has the same keys (the union over the lines, in order of first
 * use; null where a job's input has none): `datasets` takes the columns from the first lines it reads.
 */
function columnsOf(entries: readonly Entry[]): string[] {
  const keys = new Set<string>();
  for (const e of entries) for (const k of Object.keys(e.row)) keys.add(k);
  return [...keys];
}

/**
 * Input fields that `datasets` would take for file columns (`file_name`, `*_file_name`, `file_names`,
 * `*_file_names`), and those named like the index's own columns: written as `input_<name>`.
 */
const FILE_COLUMN = /(^|_)file_names?$/;

const INDEX_BY_NAME: Record<string, true> = Object.fromEntries(Object.values(INDEX_NAME).map((n) => [n, true]));

/** The recorded result files of the chosen jobs, in manifest order, each with its name in DIR and its index row. */
function chooseEntries(store: Store, marks: ReadonlyMap<string, Mark>, manifestVars: ReadonlyMap<string, Record<string, unknown>> | null, which: ExportWhich, problems: string[]): Entry[] {
  const out: Entry[] = [];
  const base = dirname(resolve(store.run().manifest));
  const ids = [...store.summaryRows()].filter((r) => r.state === 'done').map((r) => r.id);
  for (const id of ids) {
    const mark = marks.get(id);
    if (which === 'approved' ? mark?.state !== 'approved' : which === 'default' ? mark?.state === 'rejected' : false) continue;
    const job = store.getJob(id)!;
    const input = inputOf(job.submitted_input, job.spec);
    localNames(input, job.spec, base);
    // The manifest's variables (read again from it), else those `where` records (row number, matrix values cut at 24 characters).
    const vars = manifestVars?.get(id) ?? varsOf(job.where);
    const folder = sanitizeName(id, 'job');
    for (const f of store.filesOf(id)) {
      if (f.state !== 'done' || f.path === null || f.sha256 === null) continue;
      if (nameProblem(f.path) !== null) {
        problems.push(`job ${id}: file ${f.path} is recorded outside the output folder; not exported`);
        continue;
      }
      // The path inside the job's folder (image-1.png, stems/vocals.mp3), each part cleaned again.
      const parts = f.path.split(/[\\/]/).filter((p) => p !== '');
      const within = (parts.length > 1 ? parts.slice(1) : parts).map((p) => sanitizeName(p, 'file'));
      const name = [folder, ...within].join('/');
      const row: Record<string, unknown> = {
        file_name: name,
        job_id: id,
        model: job.model,
        prompt: typeof input.prompt === 'string' ? input.prompt : null,
        sha256: f.sha256,
        mark: mark?.state ?? null,
        mark_note: mark?.note ?? null,
      };
      for (const [k, v] of Object.entries(vars)) row[k in row || FILE_COLUMN.test(k) ? `var_${k}` : k] = v;
      // The input's prompt is the prompt column already.
      for (const [k, v] of Object.entries(input)) if (k !== 'prompt') row[k in row || FILE_COLUMN.test(k) ? `input_${k}` : k] = v;
      out.push({ name, rel: f.path, size: f.size ?? 0, sha256: f.sha256.toLowerCase(), row, input });
    }
  }
  return out;
}

/**
 * Each local image the manifest names (its `refs`: uploaded before the submit, so the input as sent holds a
 * temporary URL of the service) written back as its path relative to the manifest's folder, `/`-separated.
 */
function localNames(input: Record<string, unknown>, specJson: string, base: string): void {
  let refs: StoredSpec['refs'] = [];
  try {
    refs = (JSON.parse(specJson) as Partial<StoredSpec>).refs ?? [];
  } catch {
    return;
  }
  for (const ref of Array.isArray(refs) ? refs : []) {
    if (ref.data || ref.remote || typeof ref.file !== 'string' || typeof ref.path !== 'string') continue;
    try {
      setAtPath(input, ref.path, relative(base, ref.file).split(sep).join('/'));
    } catch {
      // not at that path in this input (an input sent before the manifest changed): left as sent
    }
  }
}

/**
 * The template variables of each job of the run's manifest (rows columns, glob and matrix variables), read
 * from the manifest again; null when it cannot be read (moved, deleted): `where`'s variables are used then.
 */
async function manifestVars(path: string): Promise<Map<string, Record<string, unknown>> | null> {
  if (!existsSync(path)) return null;
  const out = new Map<string, Record<string, unknown>>();
  try {
    const manifest = await openManifest(path);
    for await (const job of manifest.jobs()) if (job.vars !== undefined) out.set(job.id, job.vars);
  } catch {
    return null;
  }
  return out;
}

/** The input as sent, else the manifest's; none ({}) when neither can be read (a row edited by hand). */
function inputOf(submitted: string | null, spec: string): Record<string, unknown> {
  // not sent (a for_each job) or not JSON: the manifest's input
  const sent = parseObject(submitted);
  if (sent !== null) return sent;
  const input = parseObject(spec)?.input;
  return isObject(input) ? input : {};
}

/**
 * The JSON object `text` holds, else null. One nested deeper than MAX_DEPTH is not read: the index writes the input
 * out again, and JSON.stringify overflows the stack on such a value.
 */
function parseObject(text: string | null): Record<string, unknown> | null {
  if (text === null || !nestingWithin(text)) return null;
  try {
    const v = JSON.parse(text) as unknown;
    return isObject(v) ? v : null;
  } catch {
    return null;
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}
