import { closeSync, fstatSync, statSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { RESULT_FILE, PREVIOUS_DIR } from '../engine/results.js';
import { UnsafePathError } from '../errors.js';
import { Root } from '../lib/root.js';
import { SNIFF_BYTES, inertHeaders, inertType } from '../storage/inert.js';
import { PARTIAL_DIR, isS3Url, openBucket, openObject, type ObjectOut } from '../storage/index.js';
import { pathSegments, sendFile, servedFile } from './files.js';

/**
 * Where the view reads a run's files: the output folder, or the bucket prefix of a run with
 * `--out s3://bucket/prefix` (objects read through the AWS environment's credentials, as the run wrote them).
 * Both answer the same three questions, from what is recorded: no file is hashed for a page.
 */
export interface RunOutput {
  /** GET (HEAD: `headOnly`) /files/<urlPath>: sends the file (true), or false when it may not be served (then a 404). */
  send(res: ServerResponse, urlPath: string, headOnly?: boolean): Promise<boolean>;
  /**
   * A file's size, and its sha256 where genbatch recorded it (an object's metadata), by its path under the output
   * (`<job>/result.json`), or null when there is none (or it is not a regular file). Never hashes.
   */
  info(rel: string): Promise<Shown | null>;
  /**
   * The earlier attempts kept in a job's folder (`previous-<n>/`, newest first), each with its regular files: size,
   * and the sha256 the result.json kept there recorded (null when it records none). Never hashes.
   */
  previous(folder: string): Promise<Array<{ name: string; files: Array<{ path: string } & Shown> }>>;
  close(): void;
}

export interface Shown {
  size: number;
  sha256: string | null;
}

/** The first SNIFF_BYTES (or all) of a body, and the whole body again as one stream. */
async function peek(body: Readable): Promise<{ head: Buffer; all: Readable }> {
  const it = body[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  const chunks: Buffer[] = [];
  let size = 0;
  let ended = false;
  while (size < SNIFF_BYTES) {
    const next = await it.next();
    if (next.done) {
      ended = true;
      break;
    }
    chunks.push(next.value);
    size += next.value.length;
  }
  const head = Buffer.concat(chunks, size);
  async function* whole(): AsyncGenerator<Buffer> {
    yield head;
    if (ended) return;
    for (;;) {
      const next = await it.next();
      if (next.done) return;
      yield next.value;
    }
  }
  return { head, all: Readable.from(whole(), { objectMode: false }) };
}

const byNumberDesc = (a: string, b: string) => Number(b.slice(9)) - Number(a.slice(9));

/** A result.json kept in previous-<n>/ is read for its records when no larger than this. */
const MAX_RECORD = 1 << 20;

/** The sha256 by file name that a result.json records (`files[].path`, `files[].sha256`), or an empty map. */
function recordedShas(text: string | null): Map<string, string> {
  const out = new Map<string, string>();
  try {
    const doc = JSON.parse(text ?? 'null') as { files?: Array<{ path?: unknown; sha256?: unknown }> } | null;
    for (const f of Array.isArray(doc?.files) ? doc.files : []) {
      if (typeof f?.path === 'string' && typeof f.sha256 === 'string' && /^[0-9a-f]{64}$/.test(f.sha256)) out.set(f.path.split('/').at(-1)!, f.sha256);
    }
  } catch {
    // not a result.json genbatch wrote: nothing recorded
  }
  return out;
}

/** SQLite's files beside a database: the file itself, its WAL, shared memory and rollback journal. */
const STATE_SUFFIXES = ['', '-wal', '-shm', '-journal'];

/** True when the open file `fd` is one of the state files `stateFiles` (or its -wal, -shm, -journal), by its identity on disk. */
function isStateFile(fd: number, stateFiles: readonly string[]): boolean {
  const st = fstatSync(fd);
  for (const file of stateFiles) {
    for (const suffix of STATE_SUFFIXES) {
      const other = statSync(`${file}${suffix}`, { throwIfNoEntry: false });
      if (other !== undefined && other.dev === st.dev && other.ino === st.ino) return true;
    }
  }
  return false;
}

/**
 * The output folder on disk, read only through its Root: no symbolic link is followed at any level. `stateFiles`:
 * the state file(s), never served whatever they are called (the run may keep its state in the folder as `--state
 * out/run.sqlite`); `*.db` names are refused by name as well (pathSegments).
 */
export function folderOutput(outDir: string, stateFiles: readonly string[] = []): RunOutput {
  /** The output folder's Root, opened per request (its realpath taken then), or null while the folder does not exist. */
  const opened = (): Root | null => {
    try {
      return Root.open(outDir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
  };
  const refusedAsNull = <T>(fn: () => T): T | null => {
    try {
      return fn();
    } catch (err) {
      if (err instanceof UnsafePathError) return null;
      throw err;
    }
  };
  const regular = (root: Root, rel: string): number | null => {
    const st = refusedAsNull(() => root.lstat(rel));
    return st?.isFile() ? st.size : null;
  };
  const readSmall = async (root: Root, rel: string): Promise<string | null> => {
    const got = refusedAsNull(() => root.readStream(rel));
    if (got === null) return null;
    if (got.size > MAX_RECORD) {
      got.stream.destroy();
      return null;
    }
    const chunks: Buffer[] = [];
    for await (const c of got.stream) chunks.push(c as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  };
  return {
    async send(res, urlPath, headOnly) {
      const root = opened();
      const file = root === null ? null : servedFile(root, urlPath);
      if (file === null) return false;
      if (isStateFile(file.fd, stateFiles)) {
        closeSync(file.fd);
        return false;
      }
      await sendFile(res, file, headOnly);
      return true;
    },
    async info(rel) {
      const root = opened();
      const size = root === null ? null : regular(root, rel);
      return size === null ? null : { size, sha256: null };
    },
    async previous(folder) {
      const root = opened();
      if (root === null) return [];
      const entries = refusedAsNull(() => root.list(folder)) ?? [];
      // Dirent types come from the folder itself: a previous-<n> that is a symbolic link is not a folder here.
      const names = entries.filter((e) => e.isDirectory() && PREVIOUS_DIR.test(e.name)).map((e) => e.name);
      names.sort(byNumberDesc);
      const out = [];
      for (const name of names) {
        const dir = `${folder}/${name}`;
        const files = [];
        const shas = recordedShas(await readSmall(root, `${dir}/${RESULT_FILE}`));
        for (const e of refusedAsNull(() => root.list(dir)) ?? []) {
          if (!e.isFile()) continue;
          const size = regular(root, `${dir}/${e.name}`);
          if (size !== null) files.push({ path: `${dir}/${e.name}`, size, sha256: shas.get(e.name) ?? null });
        }
        files.sort((a, b) => a.path.localeCompare(b.path));
        out.push({ name, files });
      }
      return out;
    },
    close() {},
  };
}

/**
 * The run's prefix in a bucket. /files/ takes the same paths as on disk (segments checked as there) and
 * streams the object under the prefix; the multipart uploads' temporary objects (`.genbatch-partial/`) are
 * not served. A file's sha256 is the one its object carries (`x-amz-meta-sha256`), else none is shown.
 */
export function bucketOutput(out: ObjectOut): RunOutput {
  const bodyOf = (rel: string) => openObject(out, rel);
  const info = async (rel: string, known?: { size: number }): Promise<Shown | null> => {
    const h = await out.head(rel);
    return h === null ? null : { size: known?.size ?? h.size, sha256: h.sha256 };
  };
  return {
    async send(res, urlPath, headOnly) {
      const segments = pathSegments(urlPath);
      if (segments === null || segments[0] === PARTIAL_DIR) return false;
      const got = await bodyOf(segments.join('/'));
      if (got === null) return false;
      // The type from the object's first bytes, as the run stores it (not the type the object was stored with).
      const { head, all } = await peek(got.body);
      res.writeHead(200, { ...inertHeaders(await inertType(head)), 'content-length': got.size, 'cache-control': 'no-cache' });
      if (headOnly) {
        all.destroy();
        res.end();
        return true;
      }
      await new Promise<void>((done) => {
        all.on('error', () => {
          res.destroy();
          done();
        });
        all.on('end', () => done());
        res.on('close', () => {
          all.destroy();
          done();
        });
        all.pipe(res);
      });
      return true;
    },
    info: (rel) => info(rel),
    async previous(folder) {
      const { ListObjectsV2Command } = await import('@aws-sdk/client-s3');
      const base = out.keyOf(`${folder}/`);
      const found = new Map<string, Array<{ rel: string; size: number }>>();
      let token: string | undefined;
      do {
        const page = await out.client.send(new ListObjectsV2Command({ Bucket: out.loc.bucket, Prefix: `${base}previous-`, ContinuationToken: token }));
        for (const o of page.Contents ?? []) {
          const [name, file, ...deeper] = (o.Key ?? '').slice(base.length).split('/');
          if (!name || !file || deeper.length > 0 || !PREVIOUS_DIR.test(name)) continue;
          found.set(name, [...(found.get(name) ?? []), { rel: `${folder}/${name}/${file}`, size: o.Size ?? 0 }]);
        }
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
      const result = [];
      for (const name of [...found.keys()].sort(byNumberDesc)) {
        const files = [];
        for (const f of found.get(name)!.sort((a, b) => a.rel.localeCompare(b.rel))) {
          const i = await info(f.rel, f);
          if (i) files.push({ path: f.rel, ...i });
        }
        result.push({ name, files });
      }
      return result;
    },
    close: () => out.close(),
  };
}

/** The RunOutput of a run's recorded output (`out_dir`: a folder, or `s3://bucket/prefix`); `stateFiles` never served (folderOutput). */
export async function runOutput(outDir: string, stateFiles: readonly string[] = []): Promise<RunOutput> {
  return isS3Url(outDir) ? bucketOutput(await openBucket(outDir)) : folderOutput(outDir, stateFiles);
}
