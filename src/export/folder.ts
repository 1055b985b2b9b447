import { createReadStream, createWriteStream } from 'node:fs';
import { copyFile, link, lstat, mkdir, readFile, rename, unlink } from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { sha256OfFile, tmpSuffix } from '../download/index.js';
import { writeFileAtomic } from '../report/atomic.js';
import { LEDGER, parseLedger, type ExportDest, type ExportSource, type Placement } from './places.js';

/** `name` under `root`, or null when it would leave it. */
export function inside(root: string, name: string): string | null {
  const full = resolve(root, name);
  return full.startsWith(root.endsWith(sep) ? root : root + sep) ? full : null;
}

/** A run's output folder as the source of an export. */
export function folderSource(outDir: string): ExportSource {
  return {
    where: outDir,
    file: (rel) => inside(outDir, rel),
    open: async (rel) => createReadStream(inside(outDir, rel)!),
  };
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

async function isFileWith(path: string, sha: string): Promise<boolean> {
  const st = await lstat(path).catch(() => null);
  return st !== null && st.isFile() && (await sha256OfFile(path)) === sha;
}

/**
 * A folder as the destination of an export. A file: hard link to a temporary name beside the destination
 * (a copy when linking fails, or streamed from a bucket), its sha256 read back and compared with the
 * recorded one, then renamed.
 */
export async function folderDest(dir: string): Promise<ExportDest> {
  await mkdir(dir, { recursive: true });
  return {
    where: dir,
    at: (name) => join(dir, name),
    async readLedger() {
      let text: string | null;
      try {
        text = await readFile(join(dir, LEDGER), 'utf8');
      } catch {
        text = null;
      }
      return parseLedger(text, join(dir, LEDGER));
    },
    exists: async (name) => (await lstat(join(dir, name)).catch(() => null)) !== null,
    async place(e, from, ledger, problems): Promise<Placement> {
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
      const source = from.file(e.rel);
      let how: 'linked' | 'copied' = 'linked';
      try {
        try {
          if (source === null) throw new Error('not on this machine');
          await link(source, temp);
        } catch {
          how = 'copied';
          if (source !== null) await copyFile(source, temp);
          else await pipeline(await from.open(e.rel), createWriteStream(temp, { flags: 'wx' }));
        }
        const got = await sha256OfFile(temp);
        if (got !== e.sha256) {
          problems.push(`${source ?? `${from.where}/${e.rel}`}: sha256 ${got} is not the recorded ${e.sha256} (changed since it was downloaded); not exported`);
          await unlink(temp);
          return null;
        }
        await rename(temp, dest);
      } catch (err) {
        await unlink(temp).catch(() => undefined);
        throw err;
      }
      return how;
    },
    async removeIfUnchanged(name, sha256) {
      const path = inside(dir, name);
      if (path === null || !(await isFileWith(path, sha256))) return false;
      await unlink(path);
      return true;
    },
    async write(name, produce) {
      await writeFileAtomic(join(dir, name), produce);
      return sha256OfFile(join(dir, name));
    },
    close() {},
  };
}
