import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';

/**
 * For every downloaded file recorded as done (a row with a URL), the bytes on
 * disk equal the bytes the server serves at that URL now: same size, same
 * sha256. `fetchWhole(url)` must return the server's whole body (the caller
 * switches faults off for it). Returns how many files were compared.
 */
export async function compareWithServer(statePath: string, outDir: string, fetchWhole: (url: string) => Promise<Buffer>): Promise<number> {
  const db = new Database(statePath, { readonly: true });
  let rows: Array<{ job_id: string; path: string; url: string }>;
  try {
    rows = db.prepare(`SELECT job_id, path, url FROM files WHERE state = 'done' AND url IS NOT NULL ORDER BY job_id, idx`).all() as typeof rows;
  } finally {
    db.close();
  }
  for (const r of rows) {
    const disk = readFileSync(join(outDir, r.path));
    const server = await fetchWhole(r.url);
    if (disk.length !== server.length) throw new Error(`job ${r.job_id}: ${r.path} has ${disk.length} bytes, the server serves ${server.length}`);
    const a = createHash('sha256').update(disk).digest('hex');
    const b = createHash('sha256').update(server).digest('hex');
    if (a !== b) throw new Error(`job ${r.job_id}: ${r.path} differs from the server's bytes`);
  }
  return rows.length;
}
