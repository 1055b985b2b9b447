import { stat } from 'node:fs/promises';
import { Document } from 'yaml';
import type { Problem } from '../errors.js';
import type { JobBuilder, ManifestJob } from './job.js';
import { readLines } from './lines.js';
import { isPlainObject } from './template.js';
import { KEYS, entryJobs, type EntryJobsContext } from './yaml.js';
import type { Loc } from './yaml-loc.js';

/**
 * A JSONL manifest (`.jsonl`, `.ndjson`): one job a line, a JSON object with
 * the keys of a YAML `jobs` entry (id, model, input, callback_url, protocol,
 * rehost, needs, for_each, and rows/glob/matrix with {{templates}}). Read line
 * by line (the file is never one string; a `\r` before the `\n` is whitespace
 * to JSON); blank lines are skipped. Every problem names the line
 * (`jobs.jsonl:41`).
 *
 * The OpenAI Batch line shape is taken too: `custom_id` is the id, `body`
 * holds the model and its input (`{"model": ..., "messages": [...]}`), `url`
 * names the chat protocol (/v1/chat/completions, /v1/responses, /v1/messages)
 * and `method` must be POST. A Responses body's `input` (text or messages)
 * becomes the chat job's `messages`.
 */

/** The keys a line may have: a YAML entry's, and the OpenAI Batch ones. */
const BATCH_KEYS = ['custom_id', 'method', 'url', 'body'] as const;
const LINE_KEYS = [...KEYS.job, ...BATCH_KEYS];
const URL_PROTOCOLS: Record<string, string> = { '/v1/chat/completions': 'chat-completions', '/v1/responses': 'responses', '/v1/messages': 'messages' };
const NO_DOC = new Document(null);

export async function* jsonlJobs(file: string, name: string, dir: string, builder: JobBuilder, problems: Problem[]): AsyncGenerator<ManifestJob> {
  try {
    if (!(await stat(file)).isFile()) {
      problems.push({ job: null, where: name, path: '', message: 'the manifest is not a file' });
      return;
    }
  } catch {
    problems.push({ job: null, where: name, path: '', message: 'manifest file not found' });
    return;
  }
  const c: EntryJobsContext = { defaults: {}, defaultsLoc: lineLoc(name, 1), name, dir, builder, problems, keys: LINE_KEYS };
  let n = 0;
  let jobs = 0;
  try {
    for await (const chunk of readLines(file)) {
      for (const raw of chunk) {
        n++;
        const text = n === 1 ? raw.replace(/^\uFEFF/, '') : raw;
        if (text.trim() === '') continue;
        jobs++;
        const where = `${name}:${n}`;
        let value: unknown;
        try {
          value = JSON.parse(text);
        } catch (err) {
          problems.push({ job: null, where, path: '', message: `not JSON: ${err instanceof Error ? err.message : String(err)}` });
          continue;
        }
        if (!isPlainObject(value)) {
          problems.push({ job: null, where, path: '', message: 'a line must be a JSON object, one job: {"id": ..., "model": ..., "input": {...}}' });
          continue;
        }
        yield* entryJobs(fromBatchShape(value, where, problems), lineLoc(name, n), [], c);
      }
    }
  } catch (err) {
    // A system error while reading (EACCES, EIO) is a problem of the manifest; anything else is a bug.
    if (typeof (err as { code?: unknown }).code !== 'string') throw err;
    problems.push({ job: null, where: n > 0 ? `${name}:${n}` : name, path: '', message: `cannot read the manifest: ${err instanceof Error ? err.message : String(err)}` });
  }
  if (jobs === 0) problems.push({ job: null, where: name, path: '', message: 'no jobs: the file has no job lines (one JSON object a line)' });
}

/** Every position in a line is that line. */
function lineLoc(name: string, line: number): Loc {
  const where = `${name}:${line}`;
  return { doc: NO_DOC, lineAt: () => where, base: [], entryWhere: where };
}

/**
 * An OpenAI Batch line as an entry: custom_id -> id, body -> model and input, url -> protocol; method must be
 * POST. Lines without these keys are returned as they are.
 */
function fromBatchShape(line: Record<string, unknown>, where: string, problems: Problem[]): Record<string, unknown> {
  if (!BATCH_KEYS.some((k) => Object.hasOwn(line, k))) return line;
  const out: Record<string, unknown> = { ...line };
  const id = typeof line.id === 'string' ? line.id : typeof line.custom_id === 'string' ? line.custom_id : null;
  const add = (path: string, message: string) => problems.push({ job: id, where, path, message });
  if (Object.hasOwn(out, 'custom_id')) {
    if (out.id !== undefined) add('custom_id', 'give id or custom_id, not both');
    else out.id = out.custom_id;
    delete out.custom_id;
  }
  if (Object.hasOwn(out, 'method')) {
    if (out.method !== 'POST') add('method', 'must be "POST" (a batch line is a POST request)');
    delete out.method;
  }
  if (Object.hasOwn(out, 'url')) {
    const protocol = typeof out.url === 'string' ? URL_PROTOCOLS[out.url] : undefined;
    if (protocol === undefined) add('url', `must be one of ${Object.keys(URL_PROTOCOLS).join(', ')} (it names the chat protocol)`);
    else if (out.protocol !== undefined && out.protocol !== protocol) add('url', `names the ${protocol} protocol; protocol says ${JSON.stringify(out.protocol)}`);
    else out.protocol = protocol;
    delete out.url;
  }
  if (Object.hasOwn(out, 'body')) {
    const body = out.body;
    if (out.model !== undefined || out.input !== undefined) add('body', 'give model and input, or body, not both');
    else if (!isPlainObject(body)) add('body', 'must be an object: the model and its input ({"model": ..., "messages": [...]})');
    else {
      const { model, ...input } = body;
      if (model !== undefined) out.model = model;
      // A Responses body's `input` (text, or a list of messages) is a chat job's `messages`.
      if (out.protocol === 'responses' && input.messages === undefined && input.input !== undefined) {
        input.messages = typeof input.input === 'string' ? [{ role: 'user', content: input.input }] : input.input;
        delete input.input;
      }
      out.input = input;
    }
    delete out.body;
  }
  return out;
}
