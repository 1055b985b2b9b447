import { copyFile, link, lstat, mkdir, readFile, rename, unlink } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { sanitizeName, sha256OfFile, tmpSuffix } from '../download/index.js';
import { GenbatchError, UsageError, EXIT } from '../errors.js';
import { writeFileAtomic } from '../report/atomic.js';
import type { Mark, Store } from '../store/index.js';
import { csvField } from '../report/csv.js';

/**
 * `genbatch export`: the chosen results of a run copied into a folder as a data set.
 *
 *   which    default: every done job not marked rejected; `approved`: the approved ones; `done`: every done job
 *   files    only the result files recorded in the state file (state done, with a path and a sha256), each at
 *            `<job id>/<file path inside the job folder>` (the job id through sanitizeName, as the output
 *            folder names it), hard-linked from the output folder when DIR is on the same filesystem, else
 *            copied; placed under a temporary name, its sha256 checked against the recorded one, then renamed
 *   index    imagefolder: `metadata.jsonl`, one line per file (`file_name` relative to DIR, `job_id`, `model`,
 *            `prompt`, `sha256`, then the input fields as sent), which Hugging Face `datasets` reads as an
 *            ImageFolder/AudioFolder; jsonl: the same lines in `export.jsonl`; csv: `export.csv` with the input
 *            as one JSON column
 *   again    `.genbatch-export.json` in DIR lists what genbatch wrote there (name and sha256): a file already
 *            there with the recorded sha256 is not copied again; a file genbatch wrote for a job no longer
 *            chosen is removed; a file genbatch did not write is never replaced (that file is refused, named)
 *
 * Nothing is written outside DIR: every name is checked to stay inside it, and a folder on the way that is a
 * symbolic link is refused.
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

const LEDGER = '.genbatch-export.json';
/** export.csv: these columns of the index row, then the whole input as sent, as JSON. */
const CSV_INDEX_COLUMNS = ['file_name', 'job_id', 'model', 'prompt', 'sha256', 'input'] as const;
const INDEX_NAME: Record<ExportFormat, string> = { imagefolder: 'metadata.jsonl', jsonl: 'export.jsonl', csv: 'export.csv' };

interface Ledger {
  version: 1;
  files: Record<string, string>;
}

interface Entry {
  name: string;
  source: string;
  sha256: string;
  row: Record<string, unknown>;
  /** The input as sent (the csv index's input column). */
  input: Record<string, unknown>;
}

export async function exportResults(store: Store, o: ExportOptions): Promise<ExportOutcome> {
  const run = store.run();
  const outDir = resolve(run.out_dir);
  const dir = resolve(o.to);
  const rel = relative(outDir, dir);
  if (rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel))) throw new UsageError(`--to ${o.to}: the export folder must be outside the run's output folder ${outDir}`);
  await mkdir(dir, { recursive: true });
  const ledger = await readLedger(dir);
  const indexName = INDEX_NAME[o.format];
  if (!(indexName in ledger.files) && (await exists(join(dir, indexName)))) {
    throw new UsageError(`--to ${o.to}: ${indexName} is already there and genbatch did not write it; choose an empty folder or one genbatch exported to`);
  }
  const marks = store.marks();
  const out: ExportOutcome = { dir, index: join(dir, indexName), jobs: 0, files: 0, linked: 0, copied: 0, kept: 0, removed: 0, problems: [] };
  const entries = chooseEntries(store, outDir, marks, o.which, out.problems);
  const written = new Map<string, string>();
  const jobs = new Set<string>();
  for (const e of entries) {
    const how = await place(dir, e, ledger, out.problems);
    if (how === null) continue;
    out[how]++;
    out.files++;
    jobs.add(String(e.row.job_id));
    written.set(e.name, e.sha256);
  }
  out.jobs = jobs.size;
  // Files genbatch wrote before for results no longer chosen (rejected since, made again): removed while unchanged.
  for (const [name, sha] of Object.entries(ledger.files)) {
    if (written.has(name) || name === indexName || name in INDEX_BY_NAME) continue;
    const path = inside(dir, name);
    if (path && (await isFileWith(path, sha))) {
      await unlink(path);
      out.removed++;
    }
  }
  const kept = entries.filter((e) => written.has(e.name));
  await writeFileAtomic(out.index, async (w) => {
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
  files[indexName] = await sha256OfFile(out.index);
  await writeFileAtomic(join(dir, LEDGER), (w) => w.write(JSON.stringify({ version: 1, files } satisfies Ledger) + '\n'));
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
function chooseEntries(store: Store, outDir: string, marks: ReadonlyMap<string, Mark>, which: ExportWhich, problems: string[]): Entry[] {
  const out: Entry[] = [];
  const ids = [...store.summaryRows()].filter((r) => r.state === 'done').map((r) => r.id);
  for (const id of ids) {
    const mark = marks.get(id)?.state;
    if (which === 'approved' ? mark !== 'approved' : which === 'default' ? mark === 'rejected' : false) continue;
    const job = store.getJob(id)!;
    const input = inputOf(job.submitted_input, job.spec);
    const folder = sanitizeName(id, 'job');
    for (const f of store.filesOf(id)) {
      if (f.state !== 'done' || f.path === null || f.sha256 === null) continue;
      const source = inside(outDir, f.path);
      if (source === null) {
        problems.push(`job ${id}: file ${f.path} is recorded outside the output folder; not exported`);
        continue;
      }
      // The path inside the job's folder (image-1.png, stems/vocals.mp3), each part cleaned again.
      const parts = f.path.split(/[\\/]/).filter((p) => p !== '');
      const within = (parts.length > 1 ? parts.slice(1) : parts).map((p) => sanitizeName(p, 'file'));
      const name = [folder, ...within].join('/');
      const row: Record<string, unknown> = { file_name: name, job_id: id, model: job.model, prompt: typeof input.prompt === 'string' ? input.prompt : null, sha256: f.sha256 };
      // The input's prompt is the prompt column already.
      for (const [k, v] of Object.entries(input)) if (k !== 'prompt') row[k in row || FILE_COLUMN.test(k) ? `input_${k}` : k] = v;
      out.push({ name, source, sha256: f.sha256.toLowerCase(), row, input });
    }
  }
  return out;
}

function inputOf(submitted: string | null, spec: string): Record<string, unknown> {
  try {
    const parsed = JSON.parse(submitted ?? '') as unknown;
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    // not sent (a for_each job) or not JSON: the manifest's input
  }
  const s = JSON.parse(spec) as { input?: Record<string, unknown> };
  return s.input ?? {};
}

/**
 * One file into DIR: kept when already there with its sha256, else linked (or copied) to a temporary name,
 * checked, renamed. Null (with a problem) when it cannot be exported.
 */
async function place(dir: string, e: Entry, ledger: Ledger, problems: string[]): Promise<'linked' | 'copied' | 'kept' | null> {
  const dest = inside(dir, e.name);
  if (dest === null || !(await realFolders(dir, dirname(e.name)))) {
    problems.push(`${e.name}: a folder on the way in ${dir} is a symbolic link or a file; not exported`);
    return null;
  }
  const st = await lstat(dest).catch(() => null);
  if (st) {
    if (st.isFile() && (await sha256OfFile(dest)) === e.sha256) return 'kept';
    if (!(e.name in ledger.files) || !st.isFile()) {
      problems.push(`${dest}: already there and genbatch did not write it; not replaced (job ${String(e.row.job_id)} not exported)`);
      return null;
    }
  }
  await mkdir(dirname(dest), { recursive: true });
  const temp = join(dirname(dest), `.${e.name.split('/').at(-1)}.${tmpSuffix()}.part`);
  let how: 'linked' | 'copied' = 'linked';
  try {
    await link(e.source, temp);
  } catch {
    how = 'copied';
    await copyFile(e.source, temp);
  }
  try {
    const got = await sha256OfFile(temp);
    if (got !== e.sha256) {
      problems.push(`${e.source}: sha256 ${got} is not the recorded ${e.sha256} (changed since it was downloaded); not exported`);
      await unlink(temp);
      return null;
    }
    await rename(temp, dest);
  } catch (err) {
    await unlink(temp).catch(() => undefined);
    throw err;
  }
  return how;
}

/** Every folder of `sub` under `dir` is a real folder or absent (never a symbolic link). */
async function realFolders(dir: string, sub: string): Promise<boolean> {
  let cur = dir;
  for (const part of sub.split('/').filter((p) => p !== '' && p !== '.')) {
    cur = join(cur, part);
    const st = await lstat(cur).catch(() => null);
    if (st && !st.isDirectory()) return false;
  }
  return true;
}

/** `name` under `root`, or null when it would leave it. */
function inside(root: string, name: string): string | null {
  const full = resolve(root, name);
  return full.startsWith(root.endsWith(sep) ? root : root + sep) ? full : null;
}

async function exists(path: string): Promise<boolean> {
  return (await lstat(path).catch(() => null)) !== null;
}

async function isFileWith(path: string, sha: string): Promise<boolean> {
  const st = await lstat(path).catch(() => null);
  return st !== null && st.isFile() && (await sha256OfFile(path)) === sha;
}

async function readLedger(dir: string): Promise<Ledger> {
  let text: string;
  try {
    text = await readFile(join(dir, LEDGER), 'utf8');
  } catch {
    return { version: 1, files: {} };
  }
  try {
    const parsed = JSON.parse(text) as Ledger;
    if (parsed.version === 1 && parsed.files && typeof parsed.files === 'object') return parsed;
  } catch {
    // fall through
  }
  throw new GenbatchError('GB_EXPORT', `${join(dir, LEDGER)} is not a genbatch export record; remove it or choose another folder`, EXIT.usage);
}
