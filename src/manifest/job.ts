import { createHash } from 'node:crypto';
import { isAbsolute, resolve } from 'node:path';
import type { Problem } from '../errors.js';
import { findModel, isRemoteRef, listModels, checkSubmit, type ModelSpec } from '../models/index.js';
import { nearest } from '../lib/nearest.js';
import { CHAT_MODELS, checkChatJob, findChatModel, isChatModelId } from '../models/chat.js';
import { GraphCollector, REFS_ONLY_IN_INPUT, hasRef, inRefField, parseRef, placeholderInput, restoreRefs, stripBraces } from '../graph/index.js';
import { FileChecks } from './files.js';
import type { Confine } from './confine.js';
import { isPlainObject } from './template.js';
import { cleanValue, type ValueProblem } from './safe.js';
import { checkCallback } from './callback.js';
import { sanitizeName } from '../download/names.js';

/** One job of a manifest, defaults and templates applied. */
export interface ManifestJob {
  /** Stable job id: given in the manifest, or derived from the job content (see deriveId). */
  id: string;
  model: string;
  /** `submit` for POST /api/generate/submit models and music workflows; `chat` for chat models. */
  kind: 'submit' | 'chat';
  /** The input after defaults and schema defaults when the job is valid; as written (merged) otherwise. */
  input: Record<string, unknown>;
  callback_url?: string;
  /** Chat protocol (chat jobs only): as given, or the one the chat catalogue picks. */
  protocol?: string;
  /** `rehost: true`: remote http(s) image URLs are re-hosted through the service's URL upload before the submit. */
  rehost?: boolean;
  /** Source position of the job: `file:line`, `file:row N`, or for expanded entries `file:line, rows.tsv:row N, path/of/glob.png, matrix k=v`. */
  where: string;
  /** Absolute folder that relative local paths in `input` resolve against (the manifest's folder). */
  dir: string;
  /** Every problem found in this job; empty when the job is valid. */
  problems: Problem[];
  /** `needs:` as written: ids of jobs that must be done first (order without data). */
  needs?: string[];
  /** `for_each:` as written (`${{ jobs.<id>.<list> }}`): this entry makes one job per item once that job is done. */
  for_each?: string;
  /** For a for_each job: how many children it makes when that is documented before the parent runs. */
  fanout?: { count: number | null; basis: string };
  /** True when the job holds references, `needs` or `for_each` (it takes part in the job graph). */
  graph?: boolean;
  /** The template variables that made this job (a rows entry's `row` and columns, glob and matrix variables); absent for a plain job. */
  vars?: Record<string, unknown>;
}

/** A job as read from a source, before checks. */
export interface RawJob {
  id: unknown;
  model: unknown;
  input: unknown;
  callback_url: unknown;
  protocol: unknown;
  /** `rehost` as written (absent in sources without it, such as CSV). */
  rehost?: unknown;
  needs?: unknown;
  for_each?: unknown;
  /** The template variables of an expanded entry (see ManifestJob.vars). */
  vars?: Record<string, unknown>;
  where: string;
  /** Position of a field path such as `input.size` (falls back to `where`). */
  locate(path: string): string;
}

/** Allowed job ids: also used as file and folder names by the runner. */
export const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
/** Names of the output folder's own files: a job id (used as a folder name there) must not take one. */
const RESERVED_IDS = ['report.json', 'report.csv', 'report.md', 'report.html'];

/** Why `id` is reserved, or null. Case-insensitive (macOS and Windows folders are). */
export function reservedIdProblem(id: string): string | null {
  const lower = id.toLowerCase();
  if (RESERVED_IDS.includes(lower) || lower.startsWith('state.db')) {
    return `"${id}" is reserved: the output folder holds genbatch's own ${lower.startsWith('state.db') ? 'state database (state.db and its state.db-* files)' : 'report files (report.json, report.csv, report.md, report.html)'}`;
  }
  return null;
}

/**
 * A job's output folder is out/<sanitizeName(id)>/ (src/engine/fetch/fetch.ts): trailing dots are dropped
 * and, on macOS and Windows, letter case does not tell folders apart. Two ids with one key would
 * write into one folder (one result.json over the other), on any platform the output is copied to.
 */
function folderKey(id: string): string {
  return sanitizeName(id, 'job').toLowerCase();
}

/**
 * Turns raw jobs into checked ManifestJobs. One builder per manifest: it
 * remembers ids (to report duplicates and to keep derived ids unique) and
 * caches file checks per path.
 */
export class JobBuilder {
  private readonly ids = new Map<string, string>();
  /** Output folder names (out/<folder>/), folded to lower case, and the id that has each. */
  private readonly folders = new Map<string, string>();
  private readonly files = new FileChecks();
  /** The job graph (references, needs, for_each), checked once every job was read. */
  readonly graph = new GraphCollector();

  /** `confine`: with --confine, the check every file a manifest names must pass (null: any file). */
  constructor(
    readonly dir: string,
    readonly confine: Confine | null = null,
  ) {}

  async build(raw: RawJob): Promise<ManifestJob> {
    // Forbidden keys and too-deep values (e.g. from a CSV JSON cell) are removed before any walk.
    const unsafe: ValueProblem[] = [];
    const input = cleanValue(raw.input, 'input', unsafe);
    if (unsafe.length > 0) raw = { ...raw, input };
    const job = await this.buildJob(raw);
    for (const p of unsafe) job.problems.push({ job: job.id, where: raw.locate(p.path), path: p.path, message: p.message });
    const graphed = job.graph === true;
    this.graph.add(job, graphed ? { where: job.where, locate: raw.locate, input: job.input, needs: job.needs ?? [], forEach: job.for_each ?? null } : null);
    return job;
  }

  /** needs / for_each as written: checked, and recorded on the job. */
  private graphKeys(raw: RawJob, job: ManifestJob, add: (path: string, message: string) => void): void {
    if (raw.needs !== undefined) {
      const list = typeof raw.needs === 'string' ? [raw.needs] : raw.needs;
      if (!Array.isArray(list) || list.some((x) => typeof x !== 'string' || x === '')) add('needs', 'must be a list of job ids');
      else job.needs = list as string[];
    }
    if (raw.for_each !== undefined) {
      if (typeof raw.for_each !== 'string' || !/^\s*\$\{\{[^{}]*\}\}\s*$/.test(raw.for_each)) add('for_each', 'must be one reference to a list, e.g. ${{ jobs.song.audio }}');
      else {
        job.for_each = raw.for_each.trim();
        job.fanout = this.graph.fanoutCount(job.for_each);
        if (job.id.length > 120) add('id', 'a for_each job id must be at most 120 characters (its children are named <id>.<index>)');
      }
    }
    job.graph = job.needs !== undefined || job.for_each !== undefined || hasRef(raw.input);
  }

  /** The shape of one item of this job's for_each list, when known already. */
  private itemShape(job: ManifestJob) {
    if (job.for_each === undefined) return null;
    const parsed = parseRef(stripBraces(job.for_each), this.graph.ids);
    if (!('ref' in parsed) || parsed.ref.scope !== 'jobs') return null;
    const s = this.graph.shapeOf(parsed.ref, null);
    return s?.type === 'list' ? s.item : null;
  }

  private async buildJob(raw: RawJob): Promise<ManifestJob> {
    const problems: Problem[] = [];
    const inputObj = isPlainObject(raw.input) ? raw.input : {};
    const model = typeof raw.model === 'string' ? raw.model : '';
    const id = this.takeId(raw, model, problems);
    const add = (path: string, message: string) => problems.push({ job: id, where: raw.locate(path), path, message });

    // A given input that is not a mapping is reported here once; the model's own "input" issue about it is dropped below.
    const badInput = raw.input !== undefined && !isPlainObject(raw.input);
    if (badInput) add('input', 'must be a mapping of model parameters');
    const ownIssue = (path: string) => badInput && path === 'input';
    const callback = typeof raw.callback_url === 'string' ? raw.callback_url : undefined;
    if (raw.callback_url !== undefined && callback === undefined) add('callback_url', 'must be a string URL');
    const protocol = typeof raw.protocol === 'string' ? raw.protocol : undefined;
    if (raw.protocol !== undefined && protocol === undefined) add('protocol', 'must be a string');
    if (raw.rehost !== undefined && typeof raw.rehost !== 'boolean') add('rehost', 'must be true or false');

    const job: ManifestJob = { id, model, kind: 'submit', input: inputObj, where: raw.where, dir: this.dir, problems };
    if (raw.vars !== undefined) job.vars = raw.vars;
    // ${{ }} is filled only inside input: elsewhere it would be sent (or looked up) literally.
    const refKeys = (['model', 'callback_url', 'protocol'] as const).filter((k) => hasRef(raw[k]));
    for (const k of refKeys) add(k, REFS_ONLY_IN_INPUT);
    if (refKeys.includes('model')) return job;
    if (callback !== undefined) job.callback_url = callback;
    if (protocol !== undefined) job.protocol = protocol;
    if (raw.rehost === true) job.rehost = true;
    this.graphKeys(raw, job, add);
    const itemShape = this.itemShape(job);
    const ph = placeholderInput(inputObj, (ref) => this.graph.shapeOf(ref, itemShape), this.graph.ids);
    const checkedInput = ph.refs.length > 0 ? ph.input : (raw.input ?? {});
    const keep = (c: { input?: Record<string, unknown> | null | undefined }) => {
      if (c.input) job.input = ph.refs.length > 0 ? restoreRefs(c.input, inputObj, ph.refs) : c.input;
    };

    if (raw.model === undefined || raw.model === '') {
      add('model', 'is required (a model id; see `genbatch models`)');
      return job;
    }
    if (typeof raw.model !== 'string') {
      add('model', 'must be a string (a model id)');
      return job;
    }
    const spec = findModel(model);
    if (spec) {
      if (protocol !== undefined) add('protocol', 'applies only to chat models; this is a submit model');
      if (callback !== undefined && !refKeys.includes('callback_url')) checkCallback(callback, add);
      const check = checkSubmit({ model, input: checkedInput, ...(callback !== undefined ? { callback_url: callback } : {}) });
      for (const iss of check.issues) if (iss.path !== 'callback_url' && !ownIssue(iss.path) && !inRefField(iss.path, ph.refs)) add(iss.path, iss.message);
      keep(check);
      if (spec.imageFields.length > 0 || spec.urlOnlyFields.length > 0) await this.checkFiles(spec, inputObj, add, new Set(check.issues.map((i) => i.path)));
      return job;
    }
    if (findChatModel(model) || protocol !== undefined) {
      job.kind = 'chat';
      if (callback !== undefined) add('callback_url', 'applies only to submit models; chat answers come back in the response');
      if (raw.rehost === true) add('rehost', 'applies only to submit models (image uploads)');
      const check = checkChatJob({ model, input: checkedInput, ...(protocol !== undefined ? { protocol } : {}) });
      for (const iss of check.issues) if (!ownIssue(iss.path) && !inRefField(iss.path, ph.refs)) add(iss.path, iss.message);
      keep(check);
      if (check.protocol) job.protocol = check.protocol;
      return job;
    }
    add('model', unknownModelMessage(model, isChatModelId(model)));
    return job;
  }

  /** Records the output folder of `id`; returns the id that already has it, or null. */
  private takeFolder(id: string): string | null {
    const key = folderKey(id);
    const other = this.folders.get(key);
    if (other !== undefined) return other;
    this.folders.set(key, id);
    return null;
  }

  private takeId(raw: RawJob, model: string, problems: Problem[]): string {
    if (raw.id !== undefined && raw.id !== '') {
      const id = typeof raw.id === 'string' ? raw.id : String(raw.id);
      // Located only when there is a problem to report (finding a node's line may parse the item again: yaml-batch.ts).
      const where = () => raw.locate('id');
      if (typeof raw.id !== 'string' || !ID_PATTERN.test(id)) {
        problems.push({ job: id, where: where(), path: 'id', message: 'must be 1 to 128 letters, digits, ".", "_" or "-", starting with a letter or digit' });
      } else {
        const reserved = reservedIdProblem(id);
        if (reserved) problems.push({ job: id, where: where(), path: 'id', message: reserved });
      }
      const first = this.ids.get(id);
      if (first !== undefined) problems.push({ job: id, where: where(), path: 'id', message: `duplicate id (first used at ${first})` });
      else {
        this.ids.set(id, raw.where);
        const other = ID_PATTERN.test(id) ? this.takeFolder(id) : null;
        if (other !== null) {
          problems.push({
            job: id,
            where: where(),
            path: 'id',
            message: `its output folder is the same as job ${other}'s (first used at ${this.ids.get(other)}): ids must differ in more than letter case and trailing dots`,
          });
        }
      }
      return id;
    }
    const base = deriveId({ model, input: raw.input, callback_url: raw.callback_url, protocol: raw.protocol, needs: raw.needs, for_each: raw.for_each });
    let id = base;
    for (let n = 2; this.ids.has(id) || this.folders.has(folderKey(id)); n++) id = `${base}-${n}`;
    this.ids.set(id, raw.where);
    this.takeFolder(id);
    return id;
  }

  private async checkFiles(spec: ModelSpec, input: Record<string, unknown>, add: (path: string, message: string) => void, reported: Set<string>): Promise<void> {
    for (const field of spec.imageFields) {
      for (const [path, value] of valuesAt(input, field, 'input')) {
        if (typeof value !== 'string' || value === '' || isRemoteRef(value) || reported.has(path) || hasRef(value)) continue;
        const scheme = otherScheme(value);
        if (scheme) {
          add(path, `${JSON.stringify(value)} uses the unsupported URL scheme ${scheme}; an image is an http(s) URL, a data: URL or a local file path`);
          continue;
        }
        const file = isAbsolute(value) ? value : resolve(this.dir, value);
        const name = JSON.stringify(value);
        const outside = this.confine?.problem(file);
        if (outside) {
          add(path, `local file ${name} ${outside}`);
          continue;
        }
        const check = await this.files.checkImage(file);
        if (check.problem) add(path, `local file ${name} ${check.problem}`);
        else if (check.format && spec.imageFormats && !spec.imageFormats.includes(check.format)) {
          add(path, `local file ${name} is ${FORMAT_NAMES[check.format] ?? check.format} (from its bytes); ${spec.id} takes ${spec.imageFormats.map((f) => FORMAT_NAMES[f] ?? f).join(', ')} only`);
        } else if (spec.imageMaxBytes !== undefined && check.bytes > spec.imageMaxBytes) {
          add(path, `local file ${name} has ${megabytes(check.bytes)}; ${spec.id} takes images of at most ${megabytes(spec.imageMaxBytes)}`);
        }
      }
    }
    for (const field of spec.urlOnlyFields) {
      for (const [path, value] of valuesAt(input, field, 'input')) {
        if (typeof value !== 'string' || isRemoteRef(value) || reported.has(path) || hasRef(value)) continue;
        const scheme = otherScheme(value);
        if (scheme) {
          add(path, `${JSON.stringify(value)} uses the unsupported URL scheme ${scheme}; this field takes only an http(s) URL`);
          continue;
        }
        add(path, `${JSON.stringify(value)} is a local path; this field takes only an http(s) URL (the service cannot take a local file here: put it somewhere public first)`);
      }
    }
  }
}

/**
 * The id of a job that names none: `j-` and the first 12 hex digits of the
 * SHA-256 of its content (model, input, callback_url, protocol after defaults
 * and templates, keys sorted). Adding or removing other jobs never changes it;
 * a second job with identical content gets `-2`, a third `-3`, in file order.
 */
export function deriveId(content: Record<string, unknown>): string {
  return `j-${createHash('sha256').update(stableJson(content)).digest('hex').slice(0, 12)}`;
}

function stableJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableJson).join(',')}]`;
  if (isPlainObject(v)) {
    const keys = Object.keys(v).filter((k) => v[k] !== undefined).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${stableJson(v[k])}`).join(',')}}`;
  }
  return v === undefined ? 'null' : JSON.stringify(v);
}

/** Values at a spec field path such as `image_urls[]` or `start_image_url`, with their concrete paths. */
export function valuesAt(root: unknown, field: string, prefix: string): Array<[string, unknown]> {
  let cur: Array<[string, unknown]> = [[prefix, root]];
  for (const part of field.split('.')) {
    const many = part.endsWith('[]');
    const key = many ? part.slice(0, -2) : part;
    const next: Array<[string, unknown]> = [];
    for (const [p, v] of cur) {
      if (!isPlainObject(v) || v[key] === undefined) continue;
      const child = v[key];
      const cp = p ? `${p}.${key}` : key;
      if (many) {
        if (Array.isArray(child)) child.forEach((item, i) => next.push([`${cp}[${i}]`, item]));
      } else next.push([cp, child]);
    }
    cur = next;
  }
  return cur;
}

const suggestions = new Map<string, string>();

function unknownModelMessage(model: string, chatShaped: boolean): string {
  let msg = suggestions.get(model);
  if (msg === undefined) {
    const near = nearest(model, [...listModels().map((m) => m.id), ...CHAT_MODELS.map((m) => m.id)]);
    const hint = chatShaped ? '; for a chat model outside the catalogue, set the job\'s protocol' : '';
    msg = `unknown model "${model}"${near ? `; did you mean "${near}"?` : ''} (see \`genbatch models\`${hint})`;
    suggestions.set(model, msg);
  }
  return msg;
}

const FORMAT_NAMES: Record<string, string> = { jpeg: 'JPEG', png: 'PNG', gif: 'GIF', webp: 'WebP' };

/** Bytes as decimal megabytes with one decimal and the exact count, e.g. `10.5 MB (10,485,760 bytes)`. */
function megabytes(bytes: number): string {
  return `${(bytes / 1_000_000).toFixed(1)} MB (${bytes.toLocaleString('en-US')} bytes)`;
}

/** The scheme (`ftp:`) of a value written as a URL other than http(s) or data:, or null (a one-letter Windows drive such as `C:` is a path). */
function otherScheme(value: string): string | null {
  const m = /^([a-z][a-z0-9+.-]*):/i.exec(value);
  if (!m?.[1] || m[1].length === 1) return null;
  return `${m[1].toLowerCase()}:`;
}
