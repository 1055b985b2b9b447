import { createWriteStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { tmpSuffix } from '../download/index.js';
import { UnsafePathError } from '../errors.js';
import { Root } from '../lib/root.js';
import { writeFileAtomic } from '../report/atomic.js';
import { ExportProblem, LEDGER, parseLedger, type ExportDest, type ExportSource, type Placement } from './places.js';

/**
 * A run's output folder as the source of an export: every recorded file is read through the output folder's
 * Root (src/lib/root.ts): a name leaving it, a link on the way or in its place, a missing file is a named problem.
 */
export function folderSource(outDir: string): ExportSource {
  const root = Root.open(outDir);
  /** A refusal of the Root, as a problem of this file of the output folder. */
  const checked = <T>(rel: string, fn: () => T): T => {
    try {
      return fn();
    } catch (err) {
      if (err instanceof UnsafePathError) throw new ExportProblem(`${root.path(rel)}: recorded, but ${err.path} ${err.what} in the output folder; not exported`);
      throw err;
    }
  };
  return {
    where: root.dir,
    file(rel) {
      const st = checked(rel, () => root.lstat(rel));
      if (st === null) throw new ExportProblem(`${root.path(rel)}: recorded but missing from the output folder; not exported`);
      if (!st.isFile()) throw new ExportProblem(`${root.path(rel)}: recorded as a file but ${st.isSymbolicLink() ? 'is a symbolic link' : 'is not a regular file'}; not exported`);
      return root.path(rel);
    },
    async open(rel) {
      const got = checked(rel, () => root.readStream(rel));
      if (got === null) throw new ExportProblem(`${root.path(rel)}: recorded but missing from the output folder; not exported`);
      return got.stream;
    },
  };
}

/** `name`'s folder and last part (`a/b/c.png` -> `a/b`, `c.png`). */
function split(name: string): { dir: string; base: string } {
  const i = name.lastIndexOf('/');
  return i < 0 ? { dir: '', base: name } : { dir: name.slice(0, i), base: name.slice(i + 1) };
}

/**
 * A folder as the destination of an export, every operation through its Root (no `..`, no absolute name, no
 * link at any level, checked as it happens). A file: hard link to a new temporary name beside the destination
 * (a copy when linking fails, or streamed from a bucket), its size and sha256 read back and compared with the
 * recorded ones, then renamed.
 */
export async function folderDest(dir: string): Promise<ExportDest> {
  const root = Root.open(dir, { create: true, flag: '--to' });
  return {
    where: root.dir,
    at: (name) => root.path(name),
    async readLedger() {
      let text: string | null = null;
      const got = root.readStream(LEDGER);
      if (got !== null) {
        const chunks: Buffer[] = [];
        for await (const c of got.stream) chunks.push(c as Buffer);
        text = Buffer.concat(chunks).toString('utf8');
      }
      return parseLedger(text, root.path(LEDGER));
    },
    exists: async (name) => root.lstat(name) !== null,
    async place(e, from, ledger): Promise<Placement> {
      const st = root.lstat(e.name);
      if (st) {
        if (st.isFile() && (await root.hash(e.name))?.sha256 === e.sha256) return 'kept';
        if (!(e.name in ledger.files) || !st.isFile()) throw new ExportProblem(`${root.path(e.name)}: already there and genbatch did not write it; not replaced (job ${String(e.row.job_id)} not exported)`);
      }
      const { dir: folder, base } = split(e.name);
      const temp = `${folder === '' ? '' : `${folder}/`}.${base}.${tmpSuffix()}.part`;
      const source = from.file(e.rel);
      let how: 'linked' | 'copied' = 'linked';
      let made = false;
      try {
        try {
          if (source === null) throw new Error('not on this machine');
          root.link(source, temp);
          made = true;
        } catch (err) {
          if (made || isNameTooLong(err)) throw err;
          how = 'copied';
          const { fd } = root.createNew(temp);
          made = true;
          await pipeline(await from.open(e.rel), createWriteStream('', { fd }));
        }
        const got = await root.hash(temp);
        if (got?.sha256 !== e.sha256 || got.size !== e.size) {
          const size = got?.size !== e.size ? `, size ${got?.size} is not the recorded ${e.size}` : '';
          throw new ExportProblem(`${source ?? `${from.where}/${e.rel}`}: sha256 ${got?.sha256} is not the recorded ${e.sha256}${size} (changed since it was downloaded); not exported`);
        }
        root.rename(temp, e.name);
        made = false;
      } finally {
        if (made) removeQuietly(root, temp);
      }
      return how;
    },
    async removeIfUnchanged(name, sha256) {
      const st = root.lstat(name);
      if (st === null || !st.isFile() || (await root.hash(name))?.sha256 !== sha256) return false;
      return root.remove(name);
    },
    async write(name, produce) {
      root.checkDir(split(name).dir);
      await writeFileAtomic(root.path(name), produce);
      return (await root.hash(name))!.sha256;
    },
    close() {},
  };
}

function isNameTooLong(err: unknown): boolean {
  return (err as { code?: string }).code === 'ENAMETOOLONG';
}

function removeQuietly(root: Root, name: string): void {
  try {
    root.remove(name);
  } catch {
    // gone already, or its folder is no longer ours: nothing to remove
  }
}
