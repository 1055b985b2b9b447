import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { PREVIOUS_DIR } from '../engine/results.js';
import { SNIFF_BYTES, inertHeaders, inertType } from '../storage/inert.js';
import { PARTIAL_DIR, isS3Url, openBucket, openObject, type ObjectOut } from '../storage/index.js';
import { pathSegments, sendFile, servedFile } from './files.js';

/**
 * Where the view reads a run's files: the output folder, or the bucket prefix of a run with
 * `--out s3://bucket/prefix` (objects read through the AWS environment's credentials, as the run wrote them).
 * Both answer the same three questions.
 */
export interface RunOutput {
  /** GET (HEAD: `headOnly`) /files/<urlPath>: sends the file (true), or false when it may not be served (then a 404). */
  send(res: ServerResponse, urlPath: string, headOnly?: boolean): Promise<boolean>;
  /** A file's size and sha256 by its path under the output (`<job>/result.json`), or null when there is none. */
  info(rel: string): Promise<{ size: number; sha256: string } | null>;
  /** The earlier attempts kept in a job's folder (`previous-<n>/`, newest first), each with its files. */
  previous(folder: string): Promise<Array<{ name: string; files: Array<{ path: string; size: number; sha256: string }> }>>;
  close(): void;
}

function sha256Of(body: Readable): Promise<string> {
  return new Promise((done, fail) => {
    const h = createHash('sha256');
    body
      .on('data', (d: Buffer) => h.update(d))
      .on('end', () => done(h.digest('hex')))
      .on('error', fail);
  });
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

/** The output folder on disk. */
export function folderOutput(outDir: string): RunOutput {
  return {
    async send(res, urlPath) {
      const file = await servedFile(outDir, urlPath);
      if (file === null) return false;
      await sendFile(res, file);
      return true;
    },
    async info(rel) {
      const path = join(outDir, rel);
      const st = await stat(path).catch(() => null);
      return st?.isFile() ? { size: st.size, sha256: await sha256Of(createReadStream(path)) } : null;
    },
    async previous(folder) {
      let names: string[];
      try {
        names = (await readdir(join(outDir, folder))).filter((n) => PREVIOUS_DIR.test(n));
      } catch {
        return [];
      }
      names.sort(byNumberDesc);
      const out = [];
      for (const name of names) {
        const files = [];
        const dir = join(outDir, folder, name);
        for (const e of await readdir(dir, { withFileTypes: true })) {
          if (!e.isFile()) continue;
          const p = join(dir, e.name);
          files.push({ path: `${folder}/${name}/${e.name}`, size: (await stat(p)).size, sha256: await sha256Of(createReadStream(p)) });
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
 * not served. A file's sha256 is the one its object carries (`x-amz-meta-sha256`), else read.
 */
export function bucketOutput(out: ObjectOut): RunOutput {
  const bodyOf = (rel: string) => openObject(out, rel);
  const info = async (rel: string, known?: { size: number }): Promise<{ size: number; sha256: string } | null> => {
    const h = await out.head(rel);
    if (h === null) return null;
    if (h.sha256 !== null) return { size: known?.size ?? h.size, sha256: h.sha256 };
    const got = await bodyOf(rel);
    return got === null ? null : { size: got.size, sha256: await sha256Of(got.body) };
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

/** The RunOutput of a run's recorded output (`out_dir`: a folder, or `s3://bucket/prefix`). */
export async function runOutput(outDir: string): Promise<RunOutput> {
  return isS3Url(outDir) ? bucketOutput(await openBucket(outDir)) : folderOutput(outDir);
}
